//! Range extraction: per-column intervals that bound the rows a predicate can match.
//!
//! Conservative by construction: a constraint is emitted only where every row the predicate
//! matches satisfies it. AND intersects its arguments' constraints; OR keeps only columns
//! every argument constrains, as the union of their sets; anything else (NOT, arithmetic on
//! a column, a numeric literal, the MySQL dialect's collation) constrains nothing.

use std::cmp::Ordering;
use std::ops::Bound;

use isocert_history::{ColId, Dialect, Scalar, Table};

use crate::ast::{CmpOp, Column, Node};
use crate::value::{sql_cmp, V};
use crate::{Bounds, ColumnBounds, Interval};

/// The bounds of a compiled predicate (everything when unsure).
pub(crate) fn extract_bounds(node: &Node, table: &Table, dialect: Dialect) -> Bounds {
    if dialect != Dialect::Postgres {
        return Bounds::everything();
    }
    let mut constraints = extract(node, table).unwrap_or_default();
    constraints.sort_by_key(|c| c.column);
    Bounds { constraints }
}

type Constraints = Vec<ColumnBounds>;

fn column_id(n: &Node, table: &Table) -> Option<ColId> {
    match n {
        Node::Column(Column::Row(c)) => Some(*c),
        Node::Column(Column::KvKey) if table.is_kv() => Some(ColId(0)),
        Node::Column(Column::KvValue) if table.is_kv() => Some(ColId(1)),
        _ => None,
    }
}

/// A constant the interval order can hold exactly (numerics are left out: their float
/// image could exclude a matching row at a boundary).
fn constant(n: &Node) -> Option<Scalar> {
    match n {
        Node::Const(V::Int(i)) => Some(Scalar::Int(*i)),
        Node::Const(V::Float(f)) if !f.is_nan() => Some(Scalar::Float(*f)),
        Node::Const(V::Text(t)) => Some(Scalar::Text(t.as_ref().into())),
        Node::Const(V::Bool(b)) => Some(Scalar::Bool(*b)),
        _ => None,
    }
}

fn one(column: ColId, intervals: Vec<Interval>) -> Constraints {
    vec![ColumnBounds { column, intervals }]
}

fn point(v: Scalar) -> Interval {
    Interval { low: Bound::Included(v.clone()), high: Bound::Included(v) }
}

/// The constraints `node` implies; `None` is "no constraint".
fn extract(node: &Node, table: &Table) -> Option<Constraints> {
    match node {
        Node::And(args) => {
            let mut acc: Constraints = Vec::new();
            for a in args.iter() {
                for c in extract(a, table).unwrap_or_default() {
                    match acc.iter_mut().find(|x| x.column == c.column) {
                        Some(existing) => {
                            if let Some(i) = intersect(&existing.intervals, &c.intervals) {
                                existing.intervals = i;
                            }
                        }
                        None => acc.push(c),
                    }
                }
            }
            (!acc.is_empty()).then_some(acc)
        }
        Node::Or(args) => {
            let mut parts = args.iter().map(|a| extract(a, table));
            let mut acc = parts.next()??;
            for part in parts {
                let part = part?;
                acc = acc
                    .into_iter()
                    .filter_map(|c| {
                        let other = part.iter().find(|p| p.column == c.column)?;
                        let intervals = union(&c.intervals, &other.intervals)?;
                        Some(ColumnBounds { column: c.column, intervals })
                    })
                    .collect();
            }
            (!acc.is_empty()).then_some(acc)
        }
        Node::IsTruth { expr, truth: Some(true), negated: false } => extract(expr, table),
        Node::Cmp(op, l, r) => {
            let (col, v, op) = match (column_id(l, table), constant(r), column_id(r, table), constant(l)) {
                (Some(c), Some(v), _, _) => (c, v, *op),
                (_, _, Some(c), Some(v)) => (c, v, flip(*op)),
                _ => return None,
            };
            let interval = match op {
                CmpOp::Eq => point(v),
                CmpOp::Lt => Interval { low: Bound::Unbounded, high: Bound::Excluded(v) },
                CmpOp::Le => Interval { low: Bound::Unbounded, high: Bound::Included(v) },
                CmpOp::Gt => Interval { low: Bound::Excluded(v), high: Bound::Unbounded },
                CmpOp::Ge => Interval { low: Bound::Included(v), high: Bound::Unbounded },
                // `<>` excludes one point only; not worth a constraint.
                CmpOp::Ne => return None,
            };
            Some(one(col, vec![interval]))
        }
        Node::In { expr, array, chain, negated: false } => {
            let col = column_id(expr, table)?;
            let mut points = Vec::new();
            for item in array.iter().chain(chain.iter()) {
                match item {
                    Node::Const(V::Null) => {}
                    other => points.push(point(constant(other)?)),
                }
            }
            Some(one(col, normalize(points)?))
        }
        Node::Like { expr, pattern, negated: false } => {
            let col = column_id(expr, table)?;
            let (prefix, exact) = pattern.literal_prefix()?;
            if exact {
                return Some(one(col, vec![point(Scalar::Text(prefix.into()))]));
            }
            let low = Bound::Included(Scalar::Text(prefix.as_str().into()));
            let high = match successor(&prefix) {
                Some(next) => Bound::Excluded(Scalar::Text(next.into())),
                None => Bound::Unbounded,
            };
            Some(one(col, vec![Interval { low, high }]))
        }
        _ => None,
    }
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

/// The smallest text above every text starting with `prefix` (code-point order), if any.
fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        while next <= char::MAX as u32 {
            if let Some(c) = char::from_u32(next) {
                chars.push(c);
                return Some(chars.into_iter().collect());
            }
            next += 1;
        }
    }
    None
}

/// Compares two lower ends (`Unbounded` lowest; `Included(x)` before `Excluded(x)`).
fn cmp_low(a: &Bound<Scalar>, b: &Bound<Scalar>) -> Option<Ordering> {
    Some(match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => sql_cmp(x, y)?
            .then_with(|| match (a, b) {
                (Bound::Included(_), Bound::Excluded(_)) => Ordering::Less,
                (Bound::Excluded(_), Bound::Included(_)) => Ordering::Greater,
                _ => Ordering::Equal,
            }),
    })
}

/// Compares two upper ends (`Unbounded` highest; `Excluded(x)` before `Included(x)`).
fn cmp_high(a: &Bound<Scalar>, b: &Bound<Scalar>) -> Option<Ordering> {
    Some(match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => sql_cmp(x, y)?
            .then_with(|| match (a, b) {
                (Bound::Excluded(_), Bound::Included(_)) => Ordering::Less,
                (Bound::Included(_), Bound::Excluded(_)) => Ordering::Greater,
                _ => Ordering::Equal,
            }),
    })
}

/// Whether an interval holds no value.
fn is_empty(i: &Interval) -> Option<bool> {
    match (&i.low, &i.high) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => Some(false),
        (Bound::Included(x), Bound::Included(y)) => Some(sql_cmp(x, y)? == Ordering::Greater),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            Some(sql_cmp(x, y)? != Ordering::Less)
        }
    }
}

/// Whether `a` (lower in order) and `b` overlap or touch, so their union is one interval.
fn joins(a: &Interval, b: &Interval) -> Option<bool> {
    match (&a.high, &b.low) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => Some(true),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            Some(match sql_cmp(x, y)? {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => {
                    matches!(a.high, Bound::Included(_)) || matches!(b.low, Bound::Included(_))
                }
            })
        }
    }
}

/// Sorts, drops empty intervals and merges overlapping ones; `None` when the values are not
/// mutually comparable.
fn normalize(mut v: Vec<Interval>) -> Option<Vec<Interval>> {
    let mut keep = Vec::with_capacity(v.len());
    for i in v.drain(..) {
        if !is_empty(&i)? {
            keep.push(i);
        }
    }
    let mut failed = false;
    keep.sort_by(|a, b| {
        cmp_low(&a.low, &b.low).unwrap_or_else(|| {
            failed = true;
            Ordering::Equal
        })
    });
    if failed {
        return None;
    }
    let mut out: Vec<Interval> = Vec::with_capacity(keep.len());
    for i in keep {
        match out.last_mut() {
            Some(last) if joins(last, &i)? => {
                if cmp_high(&i.high, &last.high)? == Ordering::Greater {
                    last.high = i.high;
                }
            }
            _ => out.push(i),
        }
    }
    Some(out)
}

fn union(a: &[Interval], b: &[Interval]) -> Option<Vec<Interval>> {
    normalize(a.iter().chain(b).cloned().collect())
}

fn intersect(a: &[Interval], b: &[Interval]) -> Option<Vec<Interval>> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let low = if cmp_low(&x.low, &y.low)? == Ordering::Less { y.low.clone() } else { x.low.clone() };
            let high = if cmp_high(&x.high, &y.high)? == Ordering::Greater {
                y.high.clone()
            } else {
                x.high.clone()
            };
            out.push(Interval { low, high });
        }
    }
    normalize(out)
}
