//! What an aggregate read's result depends on, object by object.
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

use isocert_history::{AggregateFn, ColId, History, ObjId, Scalar, ValueId};
use isocert_oracle::sql_cmp;

use crate::values::column_value;

/// What one aggregate read's result depends on (see the module documentation).
#[derive(Debug)]
pub(super) enum Dependence<'h> {
    /// Whether the row matches (`count(*)`).
    Matches,
    /// Whether the row matches with a non-NULL column (`count(c)`).
    NonNull(ColId),
    /// The column's value in a matched row (`sum(c)`).
    Value(ColId),
    /// `min`/`max` of the column with result `result`: rows that beat it (ordering
    /// `better` against it), and the witness row holding it.
    Extremum { column: ColId, result: &'h Scalar, better: Ordering, witness: Option<ObjId> },
}

/// One version's dependence key: equal keys, same contribution to the result.
#[derive(Debug, PartialEq)]
pub(super) enum Key<'h> {
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
    pub(super) fn of(
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
    pub(super) fn key(&self, h: &'h History, obj: ObjId, value: ValueId, matches: bool) -> Key<'h> {
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
