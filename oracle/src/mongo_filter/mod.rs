//! The MongoDB front end: query filters (`{"value": {"$gte": 2, "$lt": 5}}`) compiled from
//! relaxed extended JSON and evaluated with MongoDB's semantics.
//!
//! Supported: implicit equality, `$eq $ne $gt $gte $lt $lte $in $nin $exists $not` on a
//! field, `$and $or $nor` of filters. Semantics follow the MongoDB manual:
//! - comparison operators only match values of the operand's type bracket ("Comparison/Sort
//!   Order": `{$gt: 5}` never matches a string); numbers compare by value across int, long,
//!   double and decimal; strings bytewise (no collation); NaN equals NaN and is otherwise
//!   neither greater nor less than anything in a query;
//! - `{f: null}` (and `$eq`, `$gte`, `$lte`, `$in` with null) matches a null or missing
//!   field ("Query for Null or Missing Fields"); `$ne` and `$nin` match missing fields;
//! - on an array field a condition matches when the whole array or any element matches
//!   (`$ne`/`$nin`: no element equals); `$not` negates the whole condition.
//!
//! Refused by name ([`crate::OracleError::Unsupported`]): every other operator (`$regex`,
//! `$where`, `$expr`, `$type`, `$elemMatch`, `$size`, `$all`, `$mod`, `$text`, ...), dotted
//! field paths (the history's documents are flat), and extended JSON types the history
//! model has no scalar for (`$oid`, `$date`, `$binary`, `$minKey`, ...).
//!
//! Documents come from the history: in the key-value table `_id` is the key and `value`
//! the value; in other tables fields are columns (`_id` the object key unless a column is
//! named so). A SQL NULL column stands for "null or missing" (the history model does not
//! tell them apart), which every supported operator but `$exists` treats alike; `$exists`
//! on such a column is an evaluation error rather than a guess.

mod compile;
mod eval;
#[cfg(test)]
mod tests;
mod value;

use isocert_history::{ColId, Table};

pub(crate) use compile::{compile_filter, FilterError};
pub(crate) use eval::{evaluate, HistoryDoc};

use crate::{Bounds, ColumnBounds, Interval};
use value::MValue;

/// A compiled filter: a conjunction of clauses.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Filter {
    /// Every clause must match (the empty filter matches every document).
    pub(crate) clauses: Vec<Clause>,
}

/// One clause of a filter document.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Clause {
    /// `$and`.
    And(Vec<Filter>),
    /// `$or`.
    Or(Vec<Filter>),
    /// `$nor`.
    Nor(Vec<Filter>),
    /// `field: condition`: every operator must hold.
    Field {
        /// The field.
        field: FieldRef,
        /// Its operators.
        ops: Vec<Op>,
    },
}

/// A field reference, resolved against the table at compile time where possible.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FieldRef {
    /// The object's key (`_id`).
    Key,
    /// A key-value object's value (`value`).
    KvValue,
    /// A column of a row table.
    Column(ColId),
    /// A column the table did not have when compiled (resolved by name at evaluation).
    Name(Box<str>),
}

/// One operator on a field.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    /// `$eq` or implicit equality.
    Eq(MValue),
    /// `$ne`.
    Ne(MValue),
    /// `$gt`.
    Gt(MValue),
    /// `$gte`.
    Gte(MValue),
    /// `$lt`.
    Lt(MValue),
    /// `$lte`.
    Lte(MValue),
    /// `$in`.
    In(Vec<MValue>),
    /// `$nin`.
    Nin(Vec<MValue>),
    /// `$exists`.
    Exists(bool),
    /// `$not`: none of... rather, not all of these operators.
    Not(Vec<Op>),
}

/// Per-column intervals a filter implies (conservative: only top-level conjunctions of
/// numeric comparisons, equalities and `$in` lists; everything else constrains nothing).
pub(crate) fn filter_bounds(filter: &Filter, table: &Table) -> Bounds {
    let mut constraints: Vec<ColumnBounds> = Vec::new();
    collect_bounds(filter, table, &mut constraints);
    constraints.sort_by_key(|c| c.column);
    Bounds { constraints }
}

fn collect_bounds(filter: &Filter, table: &Table, out: &mut Vec<ColumnBounds>) {
    for clause in &filter.clauses {
        match clause {
            Clause::And(parts) => {
                for p in parts {
                    collect_bounds(p, table, out);
                }
            }
            Clause::Field { field, ops } => {
                let column = match field {
                    FieldRef::Key if table.is_kv() => ColId(0),
                    FieldRef::KvValue => ColId(1),
                    FieldRef::Column(c) => *c,
                    _ => continue,
                };
                if out.iter().any(|c| c.column == column) {
                    continue; // Keeping the first constraint only narrows less: still sound.
                }
                if let Some(intervals) = op_intervals(ops) {
                    out.push(ColumnBounds { column, intervals });
                }
            }
            Clause::Or(_) | Clause::Nor(_) => {}
        }
    }
}

/// A number the bounds can hold exactly (int or a non-NaN double).
fn number(v: &MValue) -> Option<isocert_history::Scalar> {
    match v {
        MValue::Num(value::Num::Int(_)) | MValue::Num(value::Num::Double(_)) => v.to_scalar(),
        _ => None,
    }
}

fn op_intervals(ops: &[Op]) -> Option<Vec<Interval>> {
    use std::ops::Bound;
    for op in ops {
        match op {
            Op::Eq(v) => {
                let s = number(v)?;
                return Some(vec![Interval { low: Bound::Included(s.clone()), high: Bound::Included(s) }]);
            }
            Op::In(list) => {
                let mut points: Vec<isocert_history::Scalar> =
                    list.iter().map(number).collect::<Option<_>>()?;
                points.sort_by(|a, b| crate::sql_cmp(a, b).unwrap_or(std::cmp::Ordering::Equal));
                points.dedup_by(|a, b| crate::sql_cmp(a, b) == Some(std::cmp::Ordering::Equal));
                if points.is_empty() {
                    return None;
                }
                return Some(
                    points
                        .into_iter()
                        .map(|s| Interval { low: Bound::Included(s.clone()), high: Bound::Included(s) })
                        .collect(),
                );
            }
            _ => {}
        }
    }
    let (mut low, mut high) = (Bound::Unbounded, Bound::Unbounded);
    for op in ops {
        match op {
            Op::Gt(v) => low = tighter_low(low, Bound::Excluded(number(v)?)),
            Op::Gte(v) => low = tighter_low(low, Bound::Included(number(v)?)),
            Op::Lt(v) => high = tighter_high(high, Bound::Excluded(number(v)?)),
            Op::Lte(v) => high = tighter_high(high, Bound::Included(number(v)?)),
            _ => {}
        }
    }
    if matches!((&low, &high), (Bound::Unbounded, Bound::Unbounded)) {
        return None;
    }
    Some(vec![Interval { low, high }])
}

fn bound_value(b: &std::ops::Bound<isocert_history::Scalar>) -> Option<&isocert_history::Scalar> {
    match b {
        std::ops::Bound::Included(s) | std::ops::Bound::Excluded(s) => Some(s),
        std::ops::Bound::Unbounded => None,
    }
}

fn tighter_low(
    a: std::ops::Bound<isocert_history::Scalar>,
    b: std::ops::Bound<isocert_history::Scalar>,
) -> std::ops::Bound<isocert_history::Scalar> {
    use std::cmp::Ordering;
    let (Some(x), Some(y)) = (bound_value(&a), bound_value(&b)) else {
        return if bound_value(&a).is_some() { a } else { b };
    };
    match crate::sql_cmp(x, y) {
        Some(Ordering::Less) => b,
        Some(Ordering::Greater) => a,
        _ if matches!(b, std::ops::Bound::Excluded(_)) => b,
        _ => a,
    }
}

fn tighter_high(
    a: std::ops::Bound<isocert_history::Scalar>,
    b: std::ops::Bound<isocert_history::Scalar>,
) -> std::ops::Bound<isocert_history::Scalar> {
    use std::cmp::Ordering;
    let (Some(x), Some(y)) = (bound_value(&a), bound_value(&b)) else {
        return if bound_value(&a).is_some() { a } else { b };
    };
    match crate::sql_cmp(x, y) {
        Some(Ordering::Greater) => b,
        Some(Ordering::Less) => a,
        _ if matches!(b, std::ops::Bound::Excluded(_)) => b,
        _ => a,
    }
}
