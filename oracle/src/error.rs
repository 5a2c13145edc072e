//! The oracle's error type.

use isocert_history::PredId;

/// Why a predicate could not be compiled or evaluated.
///
/// Compile-time variants ([`OracleError::Parse`], [`OracleError::Unsupported`]) name the
/// predicate so a bad history is reported at load time; evaluation-time variants are the
/// SQL run-time errors the database itself would have raised on that row.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum OracleError {
    /// The `where` text is not a SQL expression.
    #[error("predicate #{} ({sql:?}): cannot parse: {message}", pred.0)]
    Parse {
        /// The predicate.
        pred: PredId,
        /// Its SQL text.
        sql: String,
        /// The parser's message.
        message: String,
    },
    /// The predicate uses a construct the interpreter does not implement.
    #[error("predicate #{} ({sql:?}): unsupported construct: {construct}", pred.0)]
    Unsupported {
        /// The predicate.
        pred: PredId,
        /// Its SQL text.
        sql: String,
        /// The construct, as written or named.
        construct: String,
    },
    /// The predicate is not valid SQL in the history's dialect: a type error or a constant
    /// part that fails (the database reports both when planning, on every row).
    #[error("predicate #{} ({sql:?}): {message}", pred.0)]
    Invalid {
        /// The predicate.
        pred: PredId,
        /// Its SQL text.
        sql: String,
        /// What is wrong, in the database's words where possible.
        message: String,
    },
    /// The predicate was interned after the interpreter last compiled the history.
    #[error("predicate #{} was not compiled (call Interpreter::compile_new after interning predicates)", pred.0)]
    NotCompiled {
        /// The predicate.
        pred: PredId,
    },
    /// A SQL run-time error on this row: division by zero, overflow, a failed cast,
    /// an operator applied to types it does not accept.
    #[error("predicate #{} ({sql:?}) on {row}: {message}", pred.0)]
    Eval {
        /// The predicate.
        pred: PredId,
        /// Its SQL text.
        sql: String,
        /// A rendering of the row it was evaluated on.
        row: String,
        /// What went wrong, in the database's words where possible.
        message: String,
    },
    /// An update's assignment (`"set":{"n":{"expr":"n + 3"}}`) does not compile, or fails
    /// on the row it is evaluated on.
    #[error("assignment {sql:?}: {message}")]
    Assignment {
        /// The expression, quoted.
        sql: String,
        /// What is wrong, in the database's words where possible.
        message: String,
    },
    /// The database oracle could not reach or use its database.
    #[error("database oracle: {message}")]
    Database {
        /// The driver's message.
        message: String,
    },
}
