//! The one error type of the test client.

use tokio_postgres::error::SqlState;

/// Why a workload could not run, or why one statement failed.
///
/// Statement failures are classified the way the executor needs: [`is_retryable`]
/// (serialization failure, deadlock: roll back and retry as a new transaction),
/// [`is_connection_lost`] (reconnect), [`is_indeterminate`] (a commit whose outcome the
/// client never learned).
///
/// [`is_retryable`]: WorkloadError::is_retryable
/// [`is_connection_lost`]: WorkloadError::is_connection_lost
/// [`is_indeterminate`]: WorkloadError::is_indeterminate
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A configuration value is unusable.
    #[error("bad workload configuration: {field}: {message}")]
    Config {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// Could not connect (or reconnect) to the database.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("{sql}: {source}")]
    Statement {
        /// The statement (shortened when long).
        sql: String,
        /// The driver error; [`WorkloadError::sqlstate`] gives its SQLSTATE.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The connection broke while `COMMIT` was in flight: it may or may not have committed.
    #[error("outcome of COMMIT unknown: {source}")]
    CommitUnknown {
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement returned something the client did not expect.
    #[error("unexpected result of {sql}: {message}")]
    UnexpectedResult {
        /// The statement (shortened when long).
        sql: String,
        /// What was unexpected.
        message: String,
    },
    /// An adapter facility failed (snapshot parsing, connecting).
    #[error(transparent)]
    Adapter(#[from] isocert_adapters::AdapterError),
    /// A session task ended abnormally.
    #[error("session {session} failed: {message}")]
    Session {
        /// The session number.
        session: u32,
        /// What happened.
        message: String,
    },
}

impl WorkloadError {
    /// A [`WorkloadError::Config`].
    pub(crate) fn config(field: &'static str, message: impl Into<String>) -> Self {
        WorkloadError::Config { field, message: message.into() }
    }

    /// A [`WorkloadError::Statement`], keeping the first 200 bytes of the SQL.
    pub(crate) fn statement(sql: &str, source: tokio_postgres::Error) -> Self {
        WorkloadError::Statement { sql: shorten(sql), source }
    }

    /// A [`WorkloadError::UnexpectedResult`].
    pub(crate) fn unexpected(sql: &str, message: impl Into<String>) -> Self {
        WorkloadError::UnexpectedResult { sql: shorten(sql), message: message.into() }
    }

    fn driver_error(&self) -> Option<&tokio_postgres::Error> {
        match self {
            WorkloadError::Connect { source, .. }
            | WorkloadError::Statement { source, .. }
            | WorkloadError::CommitUnknown { source } => Some(source),
            _ => None,
        }
    }

    /// The SQLSTATE the server sent, if the failure came from the server.
    pub fn sqlstate(&self) -> Option<&str> {
        self.driver_error().and_then(|e| e.code()).map(SqlState::code)
    }

    /// Whether retrying the transaction may succeed: a serialization failure (40001) or
    /// a deadlock (40P01). The transaction was rolled back.
    pub fn is_retryable(&self) -> bool {
        matches!(self.driver_error().and_then(|e| e.code()), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
    }

    /// Whether the connection is gone (closed, I/O error, or the server ended the session:
    /// SQLSTATE classes 08 and 57P); the transaction, if not committing, was rolled back.
    pub fn is_connection_lost(&self) -> bool {
        match self.driver_error() {
            Some(e) => match e.code() {
                None => true,
                Some(c) => c.code().starts_with("08") || c.code().starts_with("57P"),
            },
            None => false,
        }
    }

    /// Whether the outcome of a commit is unknown (the transaction may have committed).
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, WorkloadError::CommitUnknown { .. })
    }
}

fn shorten(sql: &str) -> String {
    if sql.len() <= 200 {
        return sql.to_string();
    }
    let mut end = 200;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &sql[..end])
}
