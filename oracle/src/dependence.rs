//! What an aggregate read's result depends on, object by object: one notion shared by the
//! checkers (Emme's predicate dependencies) and recovery (the serialization order PostgreSQL's
//! rule derives for Enne), so that both see the same dependencies.
//!
//! Adya's predicate dependencies follow a predicate's *matches*: a version that makes an
//! object enter or leave the matched set is a dependency of every read of the predicate.
//! For a `select` that is exactly what the result shows. An aggregate shows less and more:
//!
//! - `min(c) = 5` does not change when a second row with `c = 5` appears, so a concurrent
//!   insert of such a row is no dependency at all (PostgreSQL's SSI, which only locks the
//!   index entries `min` actually visits, rightly lets both transactions of such a "write
//!   skew" commit: each result is the same in either serial order);
//! - `sum(c)` changes when a matched row's `c` changes without leaving the predicate, which
//!   the match set alone does not see.
//!
//! So each aggregate read gets a *dependence key* per version, and a version is a
//! dependency exactly when its key differs from its predecessor's. The argument for
//! soundness is Adya's, with the key in place of the match bit: in any serial order where
//! every key-changing version keeps its edge's direction, the reader sees, for every object,
//! a version with the same key as the one in its version set, and the keys determine the
//! result:
//!
//! - `count(*)`: key = matches; `count(c)`: matches and `c` is not NULL.
//! - `sum(c)`: key = `c` of a matched row (NULL otherwise).
//! - `min(c)` / `max(c)` with result `r`: whether a matched `c` beats `r` (no such row may
//!   appear), equals `r` on one chosen *witness* object (it must stay), or compares with `r`
//!   not at all; other rows equal to `r`, worse than `r`, NULL or unmatched share one key.
//!   With a NULL result (nothing matched), any matched non-NULL `c` counts.

use std::cmp::Ordering;

use isocert_history::{AggregateFn, ColId, History, ObjId, Scalar, Value, ValueId};

use crate::value::sql_cmp;

/// What one aggregate read's result depends on (see the module documentation).
#[derive(Debug)]
pub enum Dependence<'h> {
    /// Whether the row matches (`count(*)`).
    Matches,
    /// Whether the row matches with a non-NULL column (`count(c)`).
    NonNull(ColId),
    /// The column's value in a matched row (`sum(c)`).
    Value(ColId),
    /// `min`/`max` of the column with result `result`: rows that beat it (ordering
    /// `better` against it), and the witness row holding it.
    Extremum {
        /// The aggregated column.
        column: ColId,
        /// The extremum the read returned.
        result: &'h Scalar,
        /// The ordering against `result` of a value that would have beaten it.
        better: Ordering,
        /// The first matched row (by object) holding `result`, which must stay.
        witness: Option<ObjId>,
    },
}

/// One version's dependence key: equal keys, same contribution to the result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Key<'h> {
    /// The version does not affect the result (unmatched, NULL, or not decisive).
    Silent,
    /// Matched; for `count(*)`/`count(c)` that is all that matters.
    Counted,
    /// Matched with this column value (`sum`).
    Adds(&'h Scalar),
    /// Matched and beats the extremum returned.
    Beats,
    /// The witness holding the extremum returned.
    Holds,
    /// Matched with a value SQL cannot compare with the result.
    Incomparable,
}

impl<'h> Dependence<'h> {
    /// The dependence of an aggregate `function(column)` that returned `result`, given the
    /// rows its version set matches (`expected`, sorted): the witness of a `min`/`max` is
    /// the first of them holding the result.
    pub fn of(
        h: &'h History,
        function: AggregateFn,
        column: Option<ColId>,
        result: &'h Scalar,
        expected: &[(ObjId, ValueId)],
    ) -> Self {
        let Some(column) = column else { return Dependence::Matches };
        match function {
            AggregateFn::Count => Dependence::NonNull(column),
            AggregateFn::Sum => Dependence::Value(column),
            AggregateFn::Min | AggregateFn::Max => {
                let better = if function == AggregateFn::Min { Ordering::Less } else { Ordering::Greater };
                let witness = expected
                    .iter()
                    .find(|&&(o, v)| {
                        column_value(h, o, v, column).and_then(|c| sql_cmp(c, result))
                            == Some(Ordering::Equal)
                    })
                    .map(|&(o, _)| o);
                Dependence::Extremum { column, result, better, witness }
            }
        }
    }

    /// The key of version `value` of `obj`, which `matches` says the predicate matches or
    /// not.
    pub fn key(&self, h: &'h History, obj: ObjId, value: ValueId, matches: bool) -> Key<'h> {
        if !matches {
            return Key::Silent;
        }
        match *self {
            Dependence::Matches => Key::Counted,
            Dependence::NonNull(c) => column_value(h, obj, value, c).map_or(Key::Silent, |_| Key::Counted),
            Dependence::Value(c) => column_value(h, obj, value, c).map_or(Key::Silent, Key::Adds),
            Dependence::Extremum { column, result, better, witness } => {
                let Some(c) = column_value(h, obj, value, column) else { return Key::Silent };
                if result.is_null() {
                    return Key::Beats;
                }
                match sql_cmp(c, result) {
                    None => Key::Incomparable,
                    Some(o) if o == better => Key::Beats,
                    Some(Ordering::Equal) if witness.is_none_or(|w| w == obj) => Key::Holds,
                    Some(_) => Key::Silent,
                }
            }
        }
    }
}

/// Column `col` of version `value` of `obj`, as a predicate sees it: for table `kv`,
/// column 0 is the object's key and column 1 the scalar value; for other tables, the
/// row's column. `None` when the version has no such column (absent, list, NULL, or a
/// value computed by the checker).
pub fn column_value(h: &History, obj: ObjId, value: ValueId, col: ColId) -> Option<&Scalar> {
    if value.index() >= h.value_count() {
        return None;
    }
    let key = h.object(obj);
    let s = match h.value(value) {
        Value::Absent | Value::List(_) => return None,
        Value::Scalar(s) => {
            if !h.table(key.table).is_kv() {
                return None;
            }
            match col.index() {
                0 => &key.key,
                1 => s,
                _ => return None,
            }
        }
        Value::Row(row) => row.get(col),
    };
    (!s.is_null()).then_some(s)
}
