//! Evaluation of a compiled predicate over one row.

use std::borrow::Cow;
use std::cmp::Ordering;

use isocert_history::{Dialect, Row, Scalar, Table};

use crate::ast::{CmpOp, Column, Node};
use crate::like::{Fold, LikePattern};
use crate::ops::{arith, cast, compare, func, neg, promote, to_text, truth};
use crate::value::{EvalError, EvalResult, V};

/// The row a predicate is evaluated on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RowView<'a> {
    /// A kv object: its key and its scalar value.
    Kv { key: &'a Scalar, value: &'a Scalar },
    /// A SQL table's row.
    Row(&'a Row),
}

/// Everything evaluation reads: the row, its table (for late-resolved columns), the dialect.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) row: RowView<'a>,
    pub(crate) table: &'a Table,
    pub(crate) dialect: Dialect,
}

impl<'a> Ctx<'a> {
    #[inline]
    fn column(&self, c: &'a Column) -> V<'a> {
        V::from_scalar(self.scalar(c))
    }

    /// The stored scalar of a column.
    #[inline]
    fn scalar(&self, c: &'a Column) -> &'a Scalar {
        const NULL: Scalar = Scalar::Null;
        let s: &'a Scalar = match (c, self.row) {
            (Column::Row(id), RowView::Row(r)) => r.get(*id),
            (Column::KvKey, RowView::Kv { key, .. }) => key,
            (Column::KvValue, RowView::Kv { value, .. }) => value,
            (Column::Unresolved(name), RowView::Row(r)) => match self.table.column(name) {
                Some(id) => r.get(id),
                None => &NULL,
            },
            _ => &NULL,
        };
        s
    }
}

/// Compares a stored scalar with a constant: the common typed pairs directly, the rest
/// through the general rules.
#[inline(always)]
fn compare_stored(s: &Scalar, k: &V<'static>, d: Dialect) -> Result<Option<Ordering>, EvalError> {
    if d == Dialect::Postgres {
        match (s, k) {
            (Scalar::Null, _) => return Ok(None),
            (Scalar::Int(x), V::Int(y)) => return Ok(Some(x.cmp(y))),
            (Scalar::Text(x), V::Text(y)) => return Ok(Some(x.as_bytes().cmp(y.as_bytes()))),
            (Scalar::Float(x), V::Float(y)) => return Ok(Some(crate::value::float_cmp(*x, *y))),
            _ => {}
        }
    }
    compare_stored_general(s, k, d)
}

#[inline(never)]
fn compare_stored_general(s: &Scalar, k: &V<'static>, d: Dialect) -> Result<Option<Ordering>, EvalError> {
    compare(&V::from_scalar(s), &borrow_const(k), d)
}

/// Borrows a constant without copying its text.
#[inline]
fn borrow_const<'a>(v: &'a V<'static>) -> V<'a> {
    match v {
        V::Text(t) => V::Text(Cow::Borrowed(t.as_ref())),
        V::Null => V::Null,
        V::Bool(b) => V::Bool(*b),
        V::Int(i) => V::Int(*i),
        V::Float(f) => V::Float(*f),
        V::Num(n) => V::Num(*n),
        V::Unknown(t) => V::Unknown(t),
    }
}

#[inline]
fn cmp_holds(op: CmpOp, o: Ordering) -> bool {
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
    }
}

#[inline]
fn tri(b: Option<bool>) -> V<'static> {
    match b {
        Some(b) => V::Bool(b),
        None => V::Null,
    }
}

impl Node {
    /// Evaluates the node on `ctx`'s row.
    pub(crate) fn eval<'a>(&'a self, ctx: &Ctx<'a>) -> EvalResult<'a> {
        let d = ctx.dialect;
        Ok(match self {
            Node::Const(v) => borrow_const(v),
            Node::Unknown(t) => V::Unknown(t),
            Node::Column(c) => ctx.column(c),
            Node::Not(_) | Node::And(_) | Node::Or(_) => tri(self.truth(ctx, "")?),
            Node::Cmp(..) | Node::CmpColumn { .. } | Node::InColumn { .. } => tri(self.truth(ctx, "")?),
            Node::Distinct { left, right, negated } => {
                let (a, b) = (left.eval(ctx)?, right.eval(ctx)?);
                let distinct = match (&a, &b) {
                    (V::Null, V::Null) => false,
                    (V::Null, _) | (_, V::Null) => true,
                    _ => compare(&a, &b, d)? != Some(Ordering::Equal),
                };
                V::Bool(distinct != *negated)
            }
            Node::In { expr, array, chain, negated } => {
                // IN is an OR of equalities (NOT IN an AND of inequalities): a match decides.
                let mut unknown = false;
                if !array.is_empty() {
                    let x = expr.eval(ctx)?;
                    let mut found = false;
                    for item in array.iter() {
                        let v = item.eval(ctx)?;
                        if !matches!(x, V::Null) && !found {
                            match compare(&x, &v, d)? {
                                Some(Ordering::Equal) => found = true,
                                None => unknown = true,
                                Some(_) => {}
                            }
                        }
                    }
                    if matches!(x, V::Null) {
                        unknown = true;
                    } else if found {
                        return Ok(V::Bool(!*negated));
                    }
                }
                for item in chain.iter() {
                    // `x = NULL` with a constant NULL is folded to NULL when planning: x is not evaluated.
                    if matches!(item, Node::Const(V::Null)) {
                        unknown = true;
                        continue;
                    }
                    let (x, v) = (expr.eval(ctx)?, item.eval(ctx)?);
                    match compare(&x, &v, d)? {
                        Some(Ordering::Equal) => return Ok(V::Bool(!*negated)),
                        None => unknown = true,
                        Some(_) => {}
                    }
                }
                if unknown {
                    V::Null
                } else {
                    V::Bool(*negated)
                }
            }
            Node::IsNull { expr, negated } => V::Bool(matches!(expr.eval(ctx)?, V::Null) != *negated),
            Node::IsTruth { expr, truth: want, negated } => {
                let t = expr.truth(ctx, "IS")?;
                V::Bool((t == *want) != *negated)
            }
            Node::Like { expr, pattern, negated } => match like_subject(expr.eval(ctx)?, d)? {
                None => V::Null,
                Some(text) => V::Bool(pattern.matches(&text) != *negated),
            },
            Node::LikeDynamic { expr, pattern, escape, case_insensitive, negated } => {
                let subject = like_subject(expr.eval(ctx)?, d)?;
                let pat = like_subject(pattern.eval(ctx)?, d)?;
                match (subject, pat) {
                    (Some(text), Some(pat)) => {
                        let fold = match (case_insensitive, d) {
                            (false, Dialect::Postgres) => Fold::None,
                            (true, Dialect::Postgres) => Fold::Ascii,
                            _ => Fold::Unicode,
                        };
                        let p = LikePattern::compile(&pat, *escape, fold, d == Dialect::Postgres)?;
                        V::Bool(p.matches(&text) != *negated)
                    }
                    _ => V::Null,
                }
            }
            Node::Arith { op, left, right, int4 } => arith(*op, left.eval(ctx)?, right.eval(ctx)?, *int4, d)?,
            Node::Neg { expr, int4 } => neg(expr.eval(ctx)?, *int4, d)?,
            Node::Case { operand, arms, otherwise, promote: ty } => {
                let subject = match operand {
                    Some(o) => Some(o.eval(ctx)?),
                    None => None,
                };
                let mut result = None;
                for (when, then) in arms.iter() {
                    let hit = match &subject {
                        Some(s) => compare(s, &when.eval(ctx)?, d)? == Some(Ordering::Equal),
                        None => when.truth(ctx, "CASE/WHEN")? == Some(true),
                    };
                    if hit {
                        result = Some(then.eval(ctx)?);
                        break;
                    }
                }
                let v = match result {
                    Some(v) => v,
                    None => otherwise.eval(ctx)?,
                };
                match ty {
                    Some(t) => promote(v, *t),
                    None => v,
                }
            }
            Node::Coalesce { args, promote: ty } => {
                let mut out = V::Null;
                for a in args.iter() {
                    let v = a.eval(ctx)?;
                    if !matches!(v, V::Null) {
                        out = v;
                        break;
                    }
                }
                match ty {
                    Some(t) => promote(out, *t),
                    None => out,
                }
            }
            Node::NullIf { left, right, promote: ty } => {
                let (x, y) = (left.eval(ctx)?, right.eval(ctx)?);
                if compare(&x, &y, d)? == Some(Ordering::Equal) {
                    V::Null
                } else {
                    match ty {
                        Some(t) => promote(x, *t),
                        None => x,
                    }
                }
            }
            Node::Func { func: f, arg, int4 } => func(*f, arg.eval(ctx)?, *int4, d)?,
            Node::Cast { expr, to, from_int4 } => cast(expr.eval(ctx)?, *to, *from_int4, d)?,
        })
    }

    /// Evaluates the node as a condition (`None` is UNKNOWN); `context` names the construct
    /// for the error when the value is not a boolean. The common shapes (connectives,
    /// column-vs-constant tests) are handled here in a small frame; the rest go through
    /// [`Node::eval`].
    #[inline]
    pub(crate) fn truth<'a>(&'a self, ctx: &Ctx<'a>, context: &str) -> Result<Option<bool>, EvalError> {
        if let Some(r) = self.leaf_truth(ctx) {
            return r;
        }
        match self {
            Node::And(args) => {
                let mut unknown = false;
                for a in args.iter() {
                    let t = match a.leaf_truth(ctx) {
                        Some(r) => r?,
                        None => a.truth(ctx, "AND")?,
                    };
                    match t {
                        Some(false) => return Ok(Some(false)),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                Ok(if unknown { None } else { Some(true) })
            }
            Node::Or(args) => {
                let mut unknown = false;
                for a in args.iter() {
                    let t = match a.leaf_truth(ctx) {
                        Some(r) => r?,
                        None => a.truth(ctx, "OR")?,
                    };
                    match t {
                        Some(true) => return Ok(Some(true)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                Ok(if unknown { None } else { Some(false) })
            }
            Node::Not(e) => Ok(e.truth(ctx, "NOT")?.map(|b| !b)),
            _ => self.truth_general(ctx, context),
        }
    }

    /// The truth of a test of one column against constants, evaluated in place (no call);
    /// `None` for any other node.
    #[inline(always)]
    fn leaf_truth<'a>(&'a self, ctx: &Ctx<'a>) -> Option<Result<Option<bool>, EvalError>> {
        Some(match self {
            Node::CmpColumn { op, column, constant } => {
                compare_stored(ctx.scalar(column), constant, ctx.dialect)
                    .map(|o| o.map(|o| cmp_holds(*op, o)))
            }
            Node::InColumn { column, items, ints, has_null, negated } => {
                let s = ctx.scalar(column);
                if s.is_null() {
                    return Some(Ok(None));
                }
                if let (Scalar::Int(x), Some(ints), Dialect::Postgres) = (s, ints, ctx.dialect) {
                    let found = ints.contains(x);
                    return Some(Ok(if found {
                        Some(!*negated)
                    } else if *has_null {
                        None
                    } else {
                        Some(*negated)
                    }));
                }
                for k in items.iter() {
                    match compare_stored(s, k, ctx.dialect) {
                        Ok(Some(Ordering::Equal)) => return Some(Ok(Some(!*negated))),
                        Ok(_) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
                Ok(if *has_null { None } else { Some(*negated) })
            }
            Node::IsNull { expr, negated } => match expr.as_ref() {
                Node::Column(c) => Ok(Some(ctx.scalar(c).is_null() != *negated)),
                _ => return None,
            },
            Node::Like { expr, pattern, negated } if ctx.dialect == Dialect::Postgres => {
                match expr.as_ref() {
                    Node::Column(c) => match ctx.scalar(c) {
                        Scalar::Null => Ok(None),
                        Scalar::Text(t) => Ok(Some(pattern.matches(t) != *negated)),
                        _ => return None,
                    },
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// [`Node::truth`] for every other node.
    #[inline(never)]
    fn truth_general<'a>(&'a self, ctx: &Ctx<'a>, context: &str) -> Result<Option<bool>, EvalError> {
        match self {
            Node::Cmp(op, l, r) => {
                let (a, b) = (l.eval(ctx)?, r.eval(ctx)?);
                Ok(compare(&a, &b, ctx.dialect)?.map(|o| cmp_holds(*op, o)))
            }
            _ => truth(&self.eval(ctx)?, ctx.dialect, context),
        }
    }
}

/// The text a LIKE operand stands for: `None` for NULL; a non-text operand is an error in
/// PostgreSQL and converts to text in MySQL.
fn like_subject(v: V<'_>, d: Dialect) -> Result<Option<Cow<'_, str>>, EvalError> {
    match v {
        V::Null => Ok(None),
        V::Text(t) => Ok(Some(t)),
        V::Unknown(t) => Ok(Some(Cow::Borrowed(t))),
        other if d == Dialect::Mysql => Ok(Some(Cow::Owned(to_text(&other)))),
        other => Err(EvalError::new(format!("operator does not exist: {} ~~ text", other.type_name()))),
    }
}
