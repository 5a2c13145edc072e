//! Aggregates over the rows a predicate matched, and comparing them with what the
//! database returned.

use std::cmp::Ordering;

use isocert_history::{AggregateFn, ColId, History, ObjId, Scalar, ValueId};
use isocert_oracle::sql_cmp;

use crate::values::column_value;

/// `function(column)` over the matched versions `rows` (SQL semantics: NULLs skipped,
/// NULL over no values except `count`).
pub(crate) fn aggregate(
    h: &History,
    function: AggregateFn,
    column: Option<ColId>,
    rows: &[(ObjId, ValueId)],
) -> Scalar {
    let values = || rows.iter().filter_map(move |&(o, v)| column.and_then(|c| column_value(h, o, v, c)));
    match function {
        AggregateFn::Count => {
            Scalar::Int(if column.is_none() { rows.len() } else { values().count() } as i64)
        }
        AggregateFn::Sum => {
            let mut int: Option<i64> = Some(0);
            let mut float = 0.0f64;
            let mut any = false;
            let mut is_float = false;
            for v in values() {
                any = true;
                match v {
                    Scalar::Int(i) => {
                        int = int.and_then(|s| s.checked_add(*i));
                        float += *i as f64;
                    }
                    Scalar::Float(f) => {
                        is_float = true;
                        float += f;
                    }
                    _ => {}
                }
            }
            match (any, is_float, int) {
                (false, _, _) => Scalar::Null,
                (true, false, Some(i)) => Scalar::Int(i),
                _ => Scalar::Float(float),
            }
        }
        AggregateFn::Min | AggregateFn::Max => {
            let want = if function == AggregateFn::Min { Ordering::Less } else { Ordering::Greater };
            let mut best: Option<&Scalar> = None;
            for v in values() {
                if best.is_none_or(|b| sql_cmp(v, b) == Some(want)) {
                    best = Some(v);
                }
            }
            best.cloned().unwrap_or(Scalar::Null)
        }
    }
}

/// Whether an aggregate the database returned equals the expected one (numbers compare
/// numerically, with a relative tolerance of 1e-9 for floats).
pub(crate) fn same_result(returned: &Scalar, expected: &Scalar) -> bool {
    let num = |s: &Scalar| match s {
        Scalar::Int(i) => Some(*i as f64),
        Scalar::Float(f) => Some(*f),
        _ => None,
    };
    match (returned, expected, num(returned), num(expected)) {
        (Scalar::Int(a), Scalar::Int(b), _, _) => a == b,
        (_, _, Some(a), Some(b)) => a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
        _ => returned == expected,
    }
}
