//! The one error type of the test client.

use isocert_adapters::{DbError, UnknownName};

/// Why a workload could not run, or why one statement failed.
///
/// Database failures are classified by their adapter (isocert-adapters' seam):
/// [`is_retryable`] (serialization failure, deadlock: roll back and retry as a new
/// transaction), [`is_connection_lost`] (reconnect).
///
/// [`is_retryable`]: WorkloadError::is_retryable
/// [`is_connection_lost`]: WorkloadError::is_connection_lost
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
    /// A database request failed (connecting, a statement, a commit), as its adapter
    /// classified it.
    #[error(transparent)]
    Database(#[from] DbError),
    /// A name on the command line or in the configuration is not known.
    #[error("bad workload configuration: {0}")]
    UnknownName(#[from] UnknownName),
    /// A key distribution name is not known.
    #[error("bad workload configuration: distribution: {0}")]
    UnknownDistribution(#[from] isocert_random::UnknownDistribution),
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

    fn database_error(&self) -> Option<&DbError> {
        match self {
            WorkloadError::Database(e) => Some(e),
            _ => None,
        }
    }

    /// The database's error code (SQLSTATE, MySQL error number), if the server sent one.
    pub fn sqlstate(&self) -> Option<&str> {
        self.database_error().and_then(DbError::code)
    }

    /// Whether retrying the transaction may succeed (the adapter classified the error as
    /// a serialization failure, deadlock or the like; the transaction was rolled back).
    pub fn is_retryable(&self) -> bool {
        self.database_error().is_some_and(DbError::is_retryable)
    }

    /// Whether the connection is gone.
    pub fn is_connection_lost(&self) -> bool {
        self.database_error().is_some_and(DbError::is_connection_lost)
    }
}
