//! The isocert test client: generated transactions run by concurrent sessions against any
//! database behind the adapters' seam ([`isocert_adapters::Database`]), recorded as a v1
//! [`History`](isocert_history::History) with the facts certificate recovery needs, which
//! each adapter records in `meta` (PostgreSQL: xids, snapshots, row writers; docs/POSTGRES.md).
//! This crate holds the database-neutral plans and the executor; SQL lives in the adapters.
//!
//! Workloads ([`WorkloadKind`]): `kv` (item reads, blind updates, upserts,
//! read-modify-writes, deletes), `predicate` (plus range reads, predicate updates and
//! deletes, min/max aggregates; predicate anomalies at read committed) and `skew` (write
//! skew, which repeatable read allows). A [`WorkloadConfig`] says what to run:
//!
//! ```
//! use isocert_adapters::IsolationLevel;
//! use isocert_workload::{Distribution, WorkloadConfig, WorkloadKind};
//!
//! let mut cfg = WorkloadConfig::new("predicate".parse()?, "read-committed".parse()?);
//! cfg.distribution = "zipfian".parse()?;
//! assert_eq!((cfg.kind, cfg.isolation), (WorkloadKind::Predicate, IsolationLevel::ReadCommitted));
//! assert_eq!(cfg.kind.table(), "items");
//! cfg.validate()?;
//! cfg.sessions = 0;
//! assert!(cfg.validate().unwrap_err().to_string().contains("sessions"));
//! # let _ = Distribution::Uniform;
//! # Ok::<(), isocert_workload::WorkloadError>(())
//! ```
//!
//! Call [`setup`] (or [`setup_on`] with an adapter), start the change capture, then
//! [`run`] (or [`run_on`]); [`setup`] and [`run`] pick the adapter from the URL's scheme:
//!
//! ```no_run
//! use isocert_adapters::IsolationLevel;
//! use isocert_workload::{run, setup, WorkloadConfig, WorkloadKind};
//!
//! # async fn demo(url: &str) -> Result<(), isocert_workload::WorkloadError> {
//! let mut cfg = WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::Serializable);
//! cfg.txns = 2000;
//! setup(url, &cfg).await?;
//! let history = run(url, &cfg, |done| eprint!("\r{done}")).await?;
//! assert!(history.txns.iter().filter(|t| t.is_committed()).count() >= 1);
//! # Ok(()) }
//! ```
//!
//! Errors the adapter classifies as retryable (PostgreSQL: serialization failures 40001,
//! deadlocks 40P01) are recorded as aborted transactions and the plan is retried as a new
//! transaction; a connection lost while `COMMIT` is in flight is recorded as `unknown`.

mod config;
mod error;
mod plan;
mod recorder;
mod run;
mod schema;
mod session;

pub use config::{
    AccessPath, Distribution, PhysicalDesign, SecondaryIndex, TableLayout, WorkloadConfig, WorkloadKind,
};
pub use error::WorkloadError;
pub use plan::client_aborted_plans;
pub use recorder::{ObserverFn, RawTxn, Recorder};
pub use run::{run, run_observed, run_on, run_until, setup, setup_on, Observe};
pub use schema::FILLER_KEYS;
pub use session::raw_txn;
