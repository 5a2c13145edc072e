//! The matches oracle: decides whether a row version matches a SQL predicate (or, for a
//! Dgraph history, a DQL filter).
//!
//! Checkers ask one small trait, [`MatchesOracle`]; the [`Interpreter`] answers it by
//! compiling each distinct predicate of a history once and evaluating it with SQL
//! three-valued logic over interned rows, following PostgreSQL (or, when the history says
//! so, MySQL) semantics. [`Bounds`] describe, per column, the intervals a predicate can
//! match, so a checker can index versions and skip those that cannot change a predicate's
//! matches. Histories in the `mongodb` dialect hold MongoDB query filters instead of SQL
//! (`{"value": {"$gte": 2, "$lt": 5}}`); the interpreter evaluates them with MongoDB's
//! comparison order, type bracketing and null-or-missing rules, and refuses the operators
//! it does not implement by name. [`PostgresOracle`] answers the same trait by asking a live PostgreSQL, to
//! cross-check the interpreter or (through [`FallbackOracle`]) to cover what it refuses.
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `database` | on | [`PostgresOracle`] and [`FallbackOracle`], over the synchronous `postgres` client |
//!
//! ```
//! use isocert_history::{History, Scalar};
//! use isocert_oracle::{Interpreter, MatchesOracle};
//!
//! let mut h = History::new();
//! let t = h.intern_table("accounts");
//! let (id, balance) = (h.intern_column(t, "id"), h.intern_column(t, "balance"));
//! let row = h.intern_row(&[(id, Scalar::Int(1)), (balance, Scalar::Int(120))]);
//! let obj = h.intern_object(t, Scalar::Int(1));
//! let pred = h.intern_predicate(t, "balance BETWEEN 100 AND 200 AND id % 2 = 1");
//!
//! let oracle = Interpreter::new(&h)?;
//! assert!(oracle.matches(&h, pred, obj, row)?);
//! assert_eq!(oracle.bounds(pred).constraints.len(), 1); // balance in [100, 200]
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assign;
mod ast;
mod bounds;
mod calls;
mod compile;
#[cfg(feature = "database")]
mod database;
pub mod dependence;
mod dql;
mod error;
mod eval;
#[cfg(feature = "database")]
mod fallback;
mod fold;
mod interpreter;
mod like;
mod mongo_filter;
mod numeric;
mod ops;
mod schema;
mod simple;
mod text;
mod value;

use std::ops::Bound;

use isocert_history::{ColId, History, ObjId, PredId, Scalar, ValueId};

pub use assign::Assignments;
#[cfg(feature = "database")]
pub use database::PostgresOracle;
pub use dependence::column_value;
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
