//! The one error type of the hunt.

use isocert_adapters::{AdapterError, DbError};

/// Why a hunt could not go on (an anomaly is a finding, never an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HuntError {
    /// The workload failed (a connection, a statement the database refused).
    #[error("running the workload: {0}")]
    Workload(#[from] isocert_workload::WorkloadError),
    /// The change capture failed or did not catch up.
    #[error("the change capture: {0}")]
    Capture(#[from] AdapterError),
    /// A database request outside a transaction failed.
    #[error("{0}")]
    Database(#[from] DbError),
    /// History and captured log disagree: no certificate.
    #[error("recovering the certificate: {0}")]
    Recovery(#[from] isocert_recovery::RecoveryError),
    /// The history's predicates or the check could not be used.
    #[error("checking: {0}")]
    Check(String),
    /// A reproducer could not be written or run.
    #[error("the reproducer: {0}")]
    Reproducer(String),
}
