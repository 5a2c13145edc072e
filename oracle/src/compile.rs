//! Compiles a parsed `where` clause (sqlparser AST) into a [`Node`] tree with static types.

use isocert_history::{Dialect, Table};
use sqlparser::ast::{BinaryOperator, CastKind, Expr, Ident, UnaryOperator, Value};

use isocert_history::ColId;

use crate::ast::{ArithOp, CastTy, CmpOp, Column, Node, Ty};
use crate::numeric::Decimal;
use crate::schema;
use crate::text::{parse_bool, parse_float, parse_int, parse_numeric};
use crate::value::V;

/// Why compilation failed, before the interpreter names the predicate.
#[derive(Debug)]
pub(crate) enum CompileError {
    /// A construct the interpreter does not implement.
    Unsupported(String),
    /// The predicate is not valid in the dialect (a type error, a constant that fails).
    Invalid(String),
}

/// A compiled node and its static type.
pub(crate) type Typed = (Node, Ty);

/// The result of compiling one expression.
pub(crate) type Compiled = Result<Typed, CompileError>;

pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError::Unsupported(what.into()))
}

pub(crate) fn invalid<T>(what: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError::Invalid(what.into()))
}

pub(crate) fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::Any => "any",
        Ty::Null => "null",
        Ty::Bool => "boolean",
        Ty::Int4 => "integer",
        Ty::Int8 => "bigint",
        Ty::Float => "double precision",
        Ty::Num => "numeric",
        Ty::Text => "text",
        Ty::Unknown => "unknown",
    }
}

/// The compiler's view of the predicate's table and dialect.
pub(crate) struct Compiler<'h> {
    pub(crate) table: &'h Table,
    pub(crate) dialect: Dialect,
    /// The kinds of scalar each column held ([`crate::schema`] bits), by column index.
    pub(crate) kinds: &'h [u8],
}

impl Compiler<'_> {
    pub(crate) fn pg(&self) -> bool {
        self.dialect == Dialect::Postgres
    }

    fn column(&self, ident: &Ident) -> Compiled {
        let name = if ident.quote_style.is_none() && self.pg() {
            ident.value.to_lowercase()
        } else {
            ident.value.clone()
        };
        let found = if self.pg() {
            self.table.column(&name)
        } else {
            self.table.columns.iter().position(|c| c.eq_ignore_ascii_case(&name)).map(ColId::from_index)
        };
        let Some(id) = found else {
            // A table no row of the history mentions has no known columns: nothing to go by.
            if self.table.columns.is_empty() {
                return Ok((Node::Column(Column::Unresolved(name.into())), Ty::Any));
            }
            // PostgreSQL (and MariaDB) reject a column the table does not have; so does the
            // interpreter, naming it, rather than reading NULL. A database oracle (whose
            // schema may have the column) takes over from a lenient interpreter.
            return invalid(format!(
                "column {name} does not exist in table {} (its rows have {})",
                self.table.name,
                self.table.columns.join(", ")
            ));
        };
        let column = match (self.table.is_kv(), id.index()) {
            (true, 0) => Column::KvKey,
            (true, _) => Column::KvValue,
            (false, _) => Column::Row(id),
        };
        let node = Node::Column(column);
        if !self.pg() {
            return Ok((node, Ty::Any));
        }
        Ok(match self.kinds.get(id.index()).copied().unwrap_or(0) {
            schema::INT => (node, Ty::Int8),
            schema::FLOAT => (node, Ty::Float),
            // A column holding both integers and floats is double precision: read it as such.
            k if k == schema::INT | schema::FLOAT => {
                (Node::Cast { expr: Box::new(node), to: CastTy::Float, from_int4: false }, Ty::Float)
            }
            schema::TEXT => (node, Ty::Text),
            schema::BOOL => (node, Ty::Bool),
            _ => (node, Ty::Any),
        })
    }

    /// PostgreSQL resolves a string literal to the type of the other operand when it parses
    /// the query, so `int_col = 'abc'` fails on every row: do the same, at compile time.
    pub(crate) fn coerce(&self, (n, t): (Node, Ty), target: Ty) -> Compiled {
        let Node::Unknown(text) = &n else { return Ok((n, t)) };
        if !self.pg() {
            return Ok((n, t));
        }
        let bad = |e: crate::value::EvalError| CompileError::Invalid(e.into_message());
        Ok(match target {
            Ty::Int4 => (Node::Const(V::Int(parse_int(text, "integer").map_err(bad)?)), Ty::Int4),
            Ty::Int8 => (Node::Const(V::Int(parse_int(text, "bigint").map_err(bad)?)), Ty::Int8),
            Ty::Float => (Node::Const(V::Float(parse_float(text).map_err(bad)?)), Ty::Float),
            Ty::Num => (Node::Const(V::Num(parse_numeric(text).map_err(bad)?)), Ty::Num),
            Ty::Bool => (Node::Const(V::Bool(parse_bool(text).map_err(bad)?)), Ty::Bool),
            Ty::Text => (Node::Const(V::Text(String::from(text.as_ref()).into())), Ty::Text),
            _ => (n, t),
        })
    }

    /// Compiles two operands of a comparison-like operator, each string literal taking the
    /// type of the other side.
    fn operand_pair(&self, a: &Expr, b: &Expr, op: &str) -> Result<(Typed, Typed), CompileError> {
        let l = self.expr(a)?;
        let r = self.expr(b)?;
        let (tl, tr) = (l.1, r.1);
        let l = self.coerce(l, tr)?;
        let r = self.coerce(r, tl)?;
        self.check_comparable(l.1, r.1, op)?;
        Ok((l, r))
    }

    /// Compiles a whole predicate: [`condition`](Self::condition) after refusing, by
    /// name, an expression nested deeper than [`MAX_NESTING`].
    pub(crate) fn predicate(&self, e: &Expr) -> Result<Node, CompileError> {
        let depth = nesting_depth(e);
        if depth > MAX_NESTING {
            return unsupported(format!(
                "an expression nested {depth} levels deep (operator chains such as `a + b + c ...` \
                 are limited to {MAX_NESTING} levels; AND and OR chains of any length are fine)"
            ));
        }
        self.condition(e, "WHERE")
    }

    /// Compiles a condition (the whole predicate, or an argument of AND/OR/NOT).
    pub(crate) fn condition(&self, e: &Expr, context: &str) -> Result<Node, CompileError> {
        let (n, t) = self.expr(e)?;
        if self.pg() && !matches!(t, Ty::Bool | Ty::Any | Ty::Null | Ty::Unknown) {
            return invalid(format!("argument of {context} must be type boolean, not type {}", ty_name(t)));
        }
        Ok(n)
    }

    /// Compiles an expression and infers its static type.
    pub(crate) fn expr(&self, e: &Expr) -> Compiled {
        match e {
            Expr::Identifier(ident) => self.column(ident),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [table, col] if table.value.eq_ignore_ascii_case(&self.table.name) => self.column(col),
                _ => unsupported(format!("column reference {e}")),
            },
            Expr::Nested(inner) => self.expr(inner),
            Expr::Value(v) => self.literal(&v.value, false),
            Expr::UnaryOp { op: UnaryOperator::Minus, expr } => match negated_literal(expr, true) {
                Some((v, negative)) => self.literal(v, negative),
                None => {
                    let (n, t) = self.expr(expr)?;
                    if self.pg() && matches!(t, Ty::Text | Ty::Bool | Ty::Unknown) {
                        return invalid(format!("operator does not exist: - {}", ty_name(t)));
                    }
                    Ok((Node::Neg { expr: Box::new(n), int4: t == Ty::Int4 }, t))
                }
            },
            Expr::UnaryOp { op: UnaryOperator::Plus, expr } => self.expr(expr),
            Expr::UnaryOp { op: UnaryOperator::Not, expr } => {
                Ok((Node::Not(Box::new(self.condition(expr, "NOT")?)), Ty::Bool))
            }
            Expr::BinaryOp { left, op, right } => self.binary(e, left, op, right),
            Expr::IsNull(x) => Ok((Node::IsNull { expr: self.boxed(x)?, negated: false }, Ty::Bool)),
            Expr::IsNotNull(x) => Ok((Node::IsNull { expr: self.boxed(x)?, negated: true }, Ty::Bool)),
            Expr::IsTrue(x) => self.is_truth(x, Some(true), false),
            Expr::IsNotTrue(x) => self.is_truth(x, Some(true), true),
            Expr::IsFalse(x) => self.is_truth(x, Some(false), false),
            Expr::IsNotFalse(x) => self.is_truth(x, Some(false), true),
            Expr::IsUnknown(x) => self.is_truth(x, None, false),
            Expr::IsNotUnknown(x) => self.is_truth(x, None, true),
            Expr::IsDistinctFrom(a, b) => match reassociate_distinct(a, b, false) {
                Some(fixed) => self.expr(&fixed),
                None => self.distinct(a, b, false),
            },
            Expr::IsNotDistinctFrom(a, b) => match reassociate_distinct(a, b, true) {
                Some(fixed) => self.expr(&fixed),
                None => self.distinct(a, b, true),
            },
            Expr::Between { expr, negated, low, high } => {
                let (x, tx) = self.expr(expr)?;
                let (l, tl) = self.coerce(self.expr(low)?, tx)?;
                let (h, th) = self.coerce(self.expr(high)?, tx)?;
                self.check_comparable(tx, tl, "BETWEEN")?;
                self.check_comparable(tx, th, "BETWEEN")?;
                // PostgreSQL rewrites BETWEEN when parsing: x >= low AND x <= high
                // (NOT BETWEEN: x < low OR x > high); the planner then folds each half.
                let (lo, hi) = if *negated { (CmpOp::Lt, CmpOp::Gt) } else { (CmpOp::Ge, CmpOp::Le) };
                let halves = [
                    Node::Cmp(lo, Box::new(x.clone()), Box::new(l)),
                    Node::Cmp(hi, Box::new(x), Box::new(h)),
                ];
                let node = if *negated { Node::Or(halves.into()) } else { Node::And(halves.into()) };
                Ok((node, Ty::Bool))
            }
            Expr::InList { expr, list, negated } => {
                let (x, tx) = self.expr(expr)?;
                let compiled = list.iter().map(|item| self.expr(item)).collect::<Result<Vec<_>, _>>()?;
                // String literals take the type of the tested expression, or of the list.
                let target = if tx == Ty::Any || tx == Ty::Unknown || tx == Ty::Null {
                    compiled.iter().map(|(_, t)| *t).find(|t| !matches!(t, Ty::Any | Ty::Null | Ty::Unknown))
                } else {
                    Some(tx)
                };
                let (x, tx) = match target {
                    Some(t) => self.coerce((x, tx), t)?,
                    None => (x, tx),
                };
                let mut items = Vec::with_capacity(list.len());
                for c in compiled {
                    let (n, t) = match target {
                        Some(target) => self.coerce(c, target)?,
                        None => c,
                    };
                    self.check_comparable(tx, t, "IN")?;
                    items.push(n);
                }
                let constant = items.iter().filter(|n| !n.reads_columns()).count();
                let (array, chain): (Vec<Node>, Vec<Node>) = if constant > 1 {
                    items.into_iter().partition(|n| !n.reads_columns())
                } else {
                    (Vec::new(), items)
                };
                let node = Node::In {
                    expr: Box::new(x),
                    array: array.into(),
                    chain: chain.into(),
                    negated: *negated,
                };
                Ok((node, Ty::Bool))
            }
            Expr::Like { negated, any: false, expr, pattern, escape_char } => {
                self.like(expr, pattern, escape_char.as_ref(), false, *negated)
            }
            Expr::ILike { negated, any: false, expr, pattern, escape_char } => {
                self.like(expr, pattern, escape_char.as_ref(), true, *negated)
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                let operand = match operand {
                    Some(o) => Some(self.expr(o)?),
                    None => None,
                };
                let mut arms = Vec::with_capacity(conditions.len());
                let mut results = Vec::with_capacity(conditions.len() + 1);
                for cw in conditions {
                    let when = match &operand {
                        Some((_, t)) => {
                            let (w, tw) = self.coerce(self.expr(&cw.condition)?, *t)?;
                            self.check_comparable(*t, tw, "=")?;
                            w
                        }
                        None => self.condition(&cw.condition, "CASE/WHEN")?,
                    };
                    arms.push(when);
                    results.push(self.expr(&cw.result)?);
                }
                results.push(match else_result {
                    Some(e) => self.expr(e)?,
                    None => (Node::Const(V::Null), Ty::Null),
                });
                let (results, ty, promote) = self.unify(results, "CASE")?;
                let mut results = results.into_iter();
                let arms: Vec<(Node, Node)> = arms.into_iter().zip(results.by_ref()).collect();
                let otherwise = Box::new(results.next().unwrap_or(Node::Const(V::Null)));
                let operand = operand.map(|(n, _)| Box::new(n));
                Ok((Node::Case { operand, arms: arms.into(), otherwise, promote }, ty))
            }
            Expr::Cast { kind: CastKind::Cast | CastKind::DoubleColon, expr, data_type, format: None } => {
                let to = self.cast_type(data_type)?;
                let (n, t) = self.expr(expr)?;
                // A cast string literal is converted when the query is parsed, wherever it is.
                if let Node::Unknown(_) = n {
                    if self.pg() {
                        let target = match to {
                            CastTy::Int4 => Ty::Int4,
                            CastTy::Int8 => Ty::Int8,
                            CastTy::Float => Ty::Float,
                            CastTy::Numeric => Ty::Num,
                            CastTy::Text => Ty::Text,
                            CastTy::Bool => Ty::Bool,
                        };
                        return self.coerce((n, t), target);
                    }
                }
                let ty = match to {
                    CastTy::Int4 => Ty::Int4,
                    CastTy::Int8 => Ty::Int8,
                    CastTy::Float => Ty::Float,
                    CastTy::Numeric => Ty::Num,
                    CastTy::Text => Ty::Text,
                    CastTy::Bool => Ty::Bool,
                };
                Ok((Node::Cast { expr: Box::new(n), to, from_int4: t == Ty::Int4 }, ty))
            }
            Expr::Function(f) => self.function(f),
            other => unsupported(describe(other)),
        }
    }

    fn boxed(&self, e: &Expr) -> Result<Box<Node>, CompileError> {
        Ok(Box::new(self.expr(e)?.0))
    }

    fn literal(&self, v: &Value, negative: bool) -> Compiled {
        Ok(match v {
            Value::Number(digits, _) => {
                let text = if negative { format!("-{digits}") } else { digits.clone() };
                let integral = digits.bytes().all(|b| b.is_ascii_digit());
                // PostgreSQL folds a minus sign into the literal, then types it by its value.
                match text.parse::<i64>() {
                    Ok(i) if integral => {
                        let ty = if i32::try_from(i).is_ok() { Ty::Int4 } else { Ty::Int8 };
                        (Node::Const(V::Int(i)), ty)
                    }
                    _ => match Decimal::parse(&text) {
                        Some(d) => (Node::Const(V::Num(d)), Ty::Num),
                        None => return unsupported(format!("numeric literal {text}")),
                    },
                }
            }
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) | Value::DoubleQuotedString(s)
                if !negative =>
            {
                (Node::Unknown(s.as_str().into()), Ty::Unknown)
            }
            Value::Boolean(b) if !negative => (Node::Const(V::Bool(*b)), Ty::Bool),
            Value::Null if !negative => (Node::Const(V::Null), Ty::Null),
            other => return unsupported(format!("literal {other}")),
        })
    }

    fn is_truth(&self, x: &Expr, truth: Option<bool>, negated: bool) -> Compiled {
        let expr = Box::new(self.condition(x, "IS")?);
        Ok((Node::IsTruth { expr, truth, negated }, Ty::Bool))
    }

    fn distinct(&self, a: &Expr, b: &Expr, negated: bool) -> Compiled {
        let ((l, _), (r, _)) = self.operand_pair(a, b, "IS DISTINCT FROM")?;
        Ok((Node::Distinct { left: Box::new(l), right: Box::new(r), negated }, Ty::Bool))
    }

    /// PostgreSQL rejects comparisons between type categories it cannot match.
    pub(crate) fn check_comparable(&self, a: Ty, b: Ty, op: &str) -> Result<(), CompileError> {
        if !self.pg() {
            return Ok(());
        }
        let known = |t: Ty| !matches!(t, Ty::Any | Ty::Null | Ty::Unknown);
        let same_category = a.is_numeric() && b.is_numeric() || a == b;
        if known(a) && known(b) && !same_category {
            return invalid(format!("operator does not exist: {} {op} {}", ty_name(a), ty_name(b)));
        }
        Ok(())
    }

    fn binary(&self, whole: &Expr, left: &Expr, op: &BinaryOperator, right: &Expr) -> Compiled {
        let cmp = match op {
            BinaryOperator::Eq => Some(CmpOp::Eq),
            BinaryOperator::NotEq => Some(CmpOp::Ne),
            BinaryOperator::Lt => Some(CmpOp::Lt),
            BinaryOperator::LtEq => Some(CmpOp::Le),
            BinaryOperator::Gt => Some(CmpOp::Gt),
            BinaryOperator::GtEq => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(c) = cmp {
            let ((l, _), (r, _)) = self.operand_pair(left, right, &op.to_string())?;
            return Ok((Node::Cmp(c, Box::new(l), Box::new(r)), Ty::Bool));
        }
        let logic = match op {
            BinaryOperator::And => Some(true),
            BinaryOperator::Or => Some(false),
            _ => None,
        };
        if let Some(is_and) = logic {
            // Flatten chains of the same connective so evaluation is one loop.
            let mut args = Vec::new();
            self.flatten(left, is_and, &mut args)?;
            self.flatten(right, is_and, &mut args)?;
            let node = if is_and { Node::And(args.into()) } else { Node::Or(args.into()) };
            return Ok((node, Ty::Bool));
        }
        let arith = match op {
            BinaryOperator::Plus => ArithOp::Add,
            BinaryOperator::Minus => ArithOp::Sub,
            BinaryOperator::Multiply => ArithOp::Mul,
            BinaryOperator::Divide => ArithOp::Div,
            BinaryOperator::Modulo => ArithOp::Mod,
            BinaryOperator::MyIntegerDivide if !self.pg() => ArithOp::IntDiv,
            _ => return unsupported(format!("operator {op} in {whole}")),
        };
        let l = self.expr(left)?;
        let r = self.expr(right)?;
        let (tl0, tr0) = (l.1, r.1);
        let (l, tl) = if tr0.is_numeric() { self.coerce(l, tr0)? } else { l };
        let (r, tr) = if tl0.is_numeric() { self.coerce(r, tl0)? } else { r };
        let ty = self.arith_type(arith, tl, tr)?;
        let int4 = tl == Ty::Int4 && tr == Ty::Int4;
        Ok((Node::Arith { op: arith, left: Box::new(l), right: Box::new(r), int4 }, ty))
    }

    fn flatten(&self, e: &Expr, is_and: bool, out: &mut Vec<Node>) -> Result<(), CompileError> {
        let same = |op: &BinaryOperator| match op {
            BinaryOperator::And => is_and,
            BinaryOperator::Or => !is_and,
            _ => false,
        };
        // Iterative (an explicit stack, right operands pushed first so the arguments keep
        // their order): a chain of tens of thousands of ANDs is one left-deep tree that
        // recursion would overflow the stack on.
        let mut pending = vec![e];
        while let Some(e) = pending.pop() {
            match e {
                Expr::BinaryOp { left, op, right } if same(op) => {
                    pending.push(right);
                    pending.push(left);
                }
                _ => out.push(self.condition(e, if is_and { "AND" } else { "OR" })?),
            }
        }
        Ok(())
    }

    fn arith_type(&self, op: ArithOp, a: Ty, b: Ty) -> Result<Ty, CompileError> {
        if !self.pg() {
            return Ok(Ty::Any);
        }
        let bad = |t: Ty| matches!(t, Ty::Text | Ty::Bool);
        if bad(a) || bad(b) || (a == Ty::Unknown && b == Ty::Unknown) {
            return invalid(format!(
                "operator does not exist: {} {} {}",
                ty_name(a),
                op.symbol(),
                ty_name(b)
            ));
        }
        if op == ArithOp::Mod && (a == Ty::Float || b == Ty::Float) {
            return invalid(format!("operator does not exist: {} % {}", ty_name(a), ty_name(b)));
        }
        Ok(match (a.numeric_rank(), b.numeric_rank()) {
            (Some(x), Some(y)) => {
                if x >= y {
                    a
                } else {
                    b
                }
            }
            (Some(_), None) if b == Ty::Unknown || b == Ty::Null => a,
            (None, Some(_)) if a == Ty::Unknown || a == Ty::Null => b,
            _ => Ty::Any,
        })
    }
}

/// A numeric literal under minus signs and parentheses, with the sign they amount to:
/// PostgreSQL's parser folds `-(-5)` into the constant 5 before typing it.
/// How deeply the compiler, the folder and the evaluator may recurse into one expression.
/// They recurse once per level; the `isocert` binary runs on a thread with a stack large
/// enough for this depth in a debug build (cli/src/main.rs). AND and OR chains, the usual
/// long predicates, are flattened into one level by an explicit stack and never count.
pub(crate) const MAX_NESTING: usize = 10_000;

/// The nesting depth of `e`, counted with an explicit stack (so that measuring a
/// pathological expression cannot itself overflow): binary and unary operators and
/// parentheses add a level, except AND/OR inside a chain of the same connective.
pub(crate) fn nesting_depth(e: &Expr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(e, 1usize, None::<bool>)];
    while let Some((e, depth, chain)) = pending.pop() {
        deepest = deepest.max(depth);
        match e {
            Expr::BinaryOp { left, op, right } => {
                let connective = match op {
                    BinaryOperator::And => Some(true),
                    BinaryOperator::Or => Some(false),
                    _ => None,
                };
                let next = if connective.is_some() && connective == chain { depth } else { depth + 1 };
                pending.push((left, next, connective));
                pending.push((right, next, connective));
            }
            Expr::UnaryOp { expr, .. } | Expr::Nested(expr) => pending.push((expr, depth + 1, None)),
            _ => {}
        }
    }
    deepest
}

fn negated_literal(e: &Expr, negative: bool) -> Option<(&Value, bool)> {
    match e {
        Expr::Value(v) if matches!(v.value, Value::Number(..)) => Some((&v.value, negative)),
        Expr::Nested(inner) => negated_literal(inner, negative),
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => negated_literal(expr, !negative),
        _ => None,
    }
}

/// sqlparser reads `a IS DISTINCT FROM b OR c` as `a IS DISTINCT FROM (b OR c)`; PostgreSQL
/// binds IS tighter than AND and OR, as `(a IS DISTINCT FROM b) OR c`. An unparenthesized
/// AND/OR on the right (sqlparser keeps explicit parentheses as `Nested`) is re-associated.
fn reassociate_distinct(a: &Expr, b: &Expr, negated: bool) -> Option<Expr> {
    match b {
        Expr::BinaryOp { left, op: op @ (BinaryOperator::And | BinaryOperator::Or), right } => {
            let inner = reassociate_distinct(a, left, negated).unwrap_or_else(|| {
                if negated {
                    Expr::IsNotDistinctFrom(Box::new(a.clone()), left.clone())
                } else {
                    Expr::IsDistinctFrom(Box::new(a.clone()), left.clone())
                }
            });
            Some(Expr::BinaryOp { left: Box::new(inner), op: op.clone(), right: right.clone() })
        }
        _ => None,
    }
}

/// A short name for an expression the interpreter does not implement.
fn describe(e: &Expr) -> String {
    let kind = match e {
        Expr::InSubquery { .. } | Expr::Subquery(_) | Expr::Exists { .. } => "subquery",
        Expr::SimilarTo { .. } => "SIMILAR TO",
        Expr::RLike { .. } => "regular expression match",
        Expr::AnyOp { .. } | Expr::AllOp { .. } => "ANY/ALL",
        Expr::Like { .. } | Expr::ILike { .. } => "LIKE ANY",
        Expr::Collate { .. } => "COLLATE",
        Expr::Substring { .. } => "SUBSTRING",
        Expr::Trim { .. } => "TRIM",
        Expr::Interval(_) => "INTERVAL",
        Expr::TypedString(_) => "typed literal",
        Expr::Cast { .. } => "cast",
        Expr::UnaryOp { .. } => "unary operator",
        _ => "expression",
    };
    format!("{kind} `{e}`")
}
