//! Per-database adapters: what a test client must record inside each transaction so that
//! a version certificate can be recovered, and the database-side machinery around it.
//!
//! Today there is one database, PostgreSQL ([`postgres`]):
//! - [`EmbeddedPostgres`]: a throwaway server (initdb into a temporary directory, logical
//!   WAL, a free loopback port) for tests and for `isocert run` without `--db`;
//! - [`Snapshot`]: a parsed `pg_current_snapshot()` with PostgreSQL's visibility rule;
//! - the SQL fragments the workload uses to record xids, snapshots and row writers
//!   (documented in `docs/POSTGRES.md`).
//!
//! ```
//! use isocert_adapters::Snapshot;
//!
//! let s: Snapshot = "100:104:100,102".parse()?;
//! assert!(s.sees(101) && !s.sees(102) && !s.sees(104));
//! assert_eq!(s.to_string(), "100:104:100,102");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub mod postgres;

pub use error::AdapterError;
pub use postgres::{EmbeddedPostgres, EmbeddedPostgresBuilder, Snapshot};
