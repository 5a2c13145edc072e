//! Compiling the calls and typed constructs of a predicate: LIKE, casts, functions, and the
//! common result type of CASE/COALESCE branches.

use isocert_history::Dialect;
use sqlparser::ast::{
    DataType, ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
    ObjectNamePart, Value,
};

use crate::ast::{CastTy, Func, Node, Ty};
use crate::compile::{invalid, ty_name, unsupported, CompileError, Compiled, Compiler};
use crate::like::{Fold, LikePattern};
use crate::value::V;

impl Compiler<'_> {
    /// Resolves the common result type of CASE/COALESCE branches (PostgreSQL's
    /// select_common_type): numbers promote to the widest known numeric type, string
    /// literals become text when nothing else decides.
    pub(crate) fn unify(
        &self,
        items: Vec<(Node, Ty)>,
        what: &str,
    ) -> Result<(Vec<Node>, Ty, Option<Ty>), CompileError> {
        let known: Vec<Ty> = items
            .iter()
            .map(|(_, t)| *t)
            .filter(|t| !matches!(t, Ty::Any | Ty::Null | Ty::Unknown))
            .collect();
        let any = items.iter().any(|(_, t)| *t == Ty::Any);
        let mut ty = Ty::Null;
        for t in &known {
            ty = match (ty, *t) {
                (Ty::Null, t) => t,
                (a, b) if a == b => a,
                (a, b) if a.is_numeric() && b.is_numeric() => {
                    if a.numeric_rank() >= b.numeric_rank() {
                        a
                    } else {
                        b
                    }
                }
                (a, b) if self.pg() => {
                    return invalid(format!(
                        "{what} types {} and {} cannot be matched",
                        ty_name(a),
                        ty_name(b)
                    ))
                }
                _ => Ty::Any,
            };
        }
        let promote = matches!(ty, Ty::Num | Ty::Float).then_some(ty);
        let text_literals = self.pg() && !any && (ty == Ty::Null || ty == Ty::Text);
        let target = if text_literals { Ty::Text } else { ty };
        let nodes = items
            .into_iter()
            .map(|item| self.coerce(item, target).map(|(n, _)| n))
            .collect::<Result<Vec<_>, _>>()?;
        let result = if any {
            Ty::Any
        } else if ty == Ty::Null && text_literals && known.is_empty() {
            Ty::Text
        } else {
            ty
        };
        Ok((nodes, result, promote))
    }

    pub(crate) fn like(
        &self,
        expr: &Expr,
        pattern: &Expr,
        escape: Option<&Value>,
        ci: bool,
        negated: bool,
    ) -> Compiled {
        let (x, tx) = self.expr(expr)?;
        if self.pg() && (tx.is_numeric() || tx == Ty::Bool) {
            return invalid(format!("operator does not exist: {} ~~ unknown", ty_name(tx)));
        }
        let escape = match escape {
            None => Some('\\'),
            Some(Value::SingleQuotedString(s)) | Some(Value::EscapedStringLiteral(s)) => {
                let mut chars = s.chars();
                match (chars.next(), chars.next()) {
                    (None, _) => None,
                    (Some(c), None) => Some(c),
                    _ => return invalid("invalid escape string: ESCAPE must be empty or one character"),
                }
            }
            Some(other) => return unsupported(format!("LIKE escape {other}")),
        };
        let fold = match (ci, self.dialect) {
            (false, Dialect::Postgres) => Fold::None,
            (true, Dialect::Postgres) => Fold::Ascii,
            _ => Fold::Unicode,
        };
        let (p, _) = self.expr(pattern)?;
        let node = match &p {
            Node::Unknown(text) => {
                let pattern = LikePattern::compile(text, escape, fold, self.pg())
                    .map_err(|e| CompileError::Invalid(e.into_message()))?;
                Node::Like { expr: Box::new(x), pattern, negated }
            }
            _ => Node::LikeDynamic {
                expr: Box::new(x),
                pattern: Box::new(p),
                escape,
                case_insensitive: ci,
                negated,
            },
        };
        Ok((node, Ty::Bool))
    }

    pub(crate) fn cast_type(&self, t: &DataType) -> Result<CastTy, CompileError> {
        Ok(match t {
            DataType::Int(None) | DataType::Integer(None) | DataType::Int4(None) => CastTy::Int4,
            DataType::BigInt(None) | DataType::Int8(None) | DataType::Signed | DataType::SignedInteger => {
                CastTy::Int8
            }
            DataType::Double(ExactNumberInfo::None)
            | DataType::DoublePrecision
            | DataType::Float8
            | DataType::Float(ExactNumberInfo::None) => CastTy::Float,
            DataType::Numeric(ExactNumberInfo::None)
            | DataType::Decimal(ExactNumberInfo::None)
            | DataType::Dec(ExactNumberInfo::None) => CastTy::Numeric,
            DataType::Text
            | DataType::Varchar(None)
            | DataType::CharacterVarying(None)
            | DataType::String(None) => CastTy::Text,
            DataType::Char(None) if !self.pg() => CastTy::Text,
            DataType::Boolean | DataType::Bool => CastTy::Bool,
            other => return unsupported(format!("cast to {other}")),
        })
    }

    pub(crate) fn function(&self, f: &Function) -> Compiled {
        let name = match f.name.0.as_slice() {
            [ObjectNamePart::Identifier(i)] => i.value.to_lowercase(),
            _ => return unsupported(format!("function {}", f.name)),
        };
        let list = match &f.args {
            FunctionArguments::List(l)
                if l.duplicate_treatment.is_none()
                    && l.clauses.is_empty()
                    && f.filter.is_none()
                    && f.over.is_none()
                    && f.within_group.is_empty()
                    && matches!(f.parameters, FunctionArguments::None) =>
            {
                l
            }
            _ => return unsupported(format!("function call {f}")),
        };
        let mut args = Vec::with_capacity(list.args.len());
        for a in &list.args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(self.expr(e)?),
                _ => return unsupported(format!("argument {a} of {}", f.name)),
            }
        }
        let one = |args: &mut Vec<(Node, Ty)>| -> Compiled {
            if args.len() != 1 {
                return invalid(format!("function {name} takes one argument, got {}", args.len()));
            }
            Ok(args.pop().unwrap_or((Node::Const(V::Null), Ty::Null)))
        };
        let func1 = |func: Func, (arg, t): (Node, Ty), ty: Ty| {
            (Node::Func { func, arg: Box::new(arg), int4: t == Ty::Int4 }, ty)
        };
        let text_arg = |t: Ty, fname: &str| -> Result<(), CompileError> {
            if self.pg() && (t.is_numeric() || t == Ty::Bool) {
                return invalid(format!("function {fname}({}) does not exist", ty_name(t)));
            }
            Ok(())
        };
        match name.as_str() {
            "abs" => {
                let (n, t) = one(&mut args)?;
                if self.pg() && matches!(t, Ty::Text | Ty::Bool | Ty::Unknown) {
                    return invalid(format!("function abs({}) does not exist", ty_name(t)));
                }
                Ok(func1(Func::Abs, (n, t), t))
            }
            "lower" | "upper" | "length" | "char_length" | "character_length" | "octet_length" => {
                let arg = one(&mut args)?;
                text_arg(arg.1, &name)?;
                Ok(match name.as_str() {
                    "lower" => func1(Func::Lower, arg, Ty::Text),
                    "upper" => func1(Func::Upper, arg, Ty::Text),
                    "length" if !self.pg() => func1(Func::OctetLength, arg, Ty::Int8),
                    "octet_length" => func1(Func::OctetLength, arg, Ty::Int4),
                    _ => func1(Func::CharLength, arg, Ty::Int4),
                })
            }
            "coalesce" => {
                if args.is_empty() {
                    return invalid("coalesce needs at least one argument");
                }
                let (nodes, ty, promote) = self.unify(args, "COALESCE")?;
                Ok((Node::Coalesce { args: nodes.into(), promote }, ty))
            }
            "nullif" => {
                if args.len() != 2 {
                    return invalid(format!("function nullif takes two arguments, got {}", args.len()));
                }
                let b = args.pop().unwrap_or((Node::Const(V::Null), Ty::Null));
                let a = args.pop().unwrap_or((Node::Const(V::Null), Ty::Null));
                let (ta0, tb0) = (a.1, b.1);
                let (a, ta) = self.coerce(a, tb0)?;
                let (b, tb) = self.coerce(b, ta0)?;
                self.check_comparable(ta, tb, "=")?;
                // PostgreSQL returns the first argument of the implied `=`, promoted to the
                // common type: NULLIF(1, 2.2) is numeric.
                // Integers compare across widths without promotion (int4 = int8 exists).
                let integer = |t: Ty| matches!(t, Ty::Int4 | Ty::Int8);
                let common = match (ta.numeric_rank(), tb.numeric_rank()) {
                    (Some(x), Some(y)) if y > x && !(integer(ta) && integer(tb)) => tb,
                    _ => ta,
                };
                let promote = matches!(common, Ty::Num | Ty::Float).then_some(common);
                Ok((Node::NullIf { left: Box::new(a), right: Box::new(b), promote }, common))
            }
            _ => unsupported(format!("function {}", f.name)),
        }
    }
}
