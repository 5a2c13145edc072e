//! The matches oracle: decides whether a row version matches a SQL predicate.
//!
//! Checkers ask one small trait, [`MatchesOracle`]; the [`Interpreter`] answers it by
//! compiling each distinct predicate of a history once and evaluating it with SQL
//! three-valued logic over interned rows. [`Bounds`] describe, per column, the intervals
//! a predicate can match, so a checker can index versions and skip those that cannot
//! change a predicate's matches.

mod ast;
mod bounds;
mod compile;
#[cfg(feature = "database")]
mod database;
mod error;
mod eval;
#[cfg(feature = "database")]
mod fallback;
mod fold;
mod interpreter;
mod like;
mod numeric;
mod ops;
mod schema;
mod text;
mod value;

use std::ops::Bound;

use isocert_history::{ColId, History, ObjId, PredId, Scalar, ValueId};

#[cfg(feature = "database")]
pub use database::PostgresOracle;
pub use error::OracleError;
#[cfg(feature = "database")]
pub use fallback::FallbackOracle;
pub use interpreter::Interpreter;
pub use value::sql_cmp;

/// Answers "does this version of this object match this predicate?".
pub trait MatchesOracle {
    /// Whether version `value` of object `obj` matches predicate `pred` (SQL TRUE).
    /// An absent value (unborn or deleted row) never matches.
    ///
    /// # Errors
    /// An [`OracleError`] when the predicate cannot be evaluated on this row (a run-time
    /// SQL error such as division by zero or a failed cast).
    fn matches(&self, h: &History, pred: PredId, obj: ObjId, value: ValueId) -> Result<bool, OracleError>;

    /// The rows `pred` can match, for indexing; [`Bounds::everything`] when unsure.
    fn bounds(&self, pred: PredId) -> Bounds {
        let _ = pred;
        Bounds::everything()
    }
}

/// A conjunction of per-column constraints that every row matching a predicate satisfies.
/// No constraints: the predicate may match anything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bounds {
    /// The constraints; a matching row satisfies every one.
    pub constraints: Vec<ColumnBounds>,
}

impl Bounds {
    /// No constraint: any row may match.
    pub fn everything() -> Self {
        Bounds::default()
    }
}

/// The values one column can hold in a matching row: the union of `intervals`, in SQL
/// order of the column ([`sql_cmp`]). A NULL column never satisfies a constraint.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnBounds {
    /// The column.
    pub column: ColId,
    /// Disjoint intervals, in ascending order.
    pub intervals: Vec<Interval>,
}

/// An interval of column values in SQL order.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Lower end.
    pub low: Bound<Scalar>,
    /// Upper end.
    pub high: Bound<Scalar>,
}
