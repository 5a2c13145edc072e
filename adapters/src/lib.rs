//! Per-database adapters: what a test client must record inside each transaction so that
//! a version certificate can be recovered, and the database-side machinery around it.
//!
//! [`seam`] is what every adapter implements ([`Database`], [`Session`], [`ChangeCapture`],
//! [`ThrowawayServer`]) and the database-neutral vocabulary ([`Step`], [`RecordedOp`],
//! [`IsolationLevel`], [`DbError`]); docs/ADAPTERS.md is the checklist for adding a database.
//!
//! PostgreSQL ([`postgres`]):
//! - [`EmbeddedPostgres`]: a throwaway server (initdb into a temporary directory, logical
//!   WAL, a free loopback port) for tests and for `isocert run` without `--db`;
//! - [`Snapshot`]: a parsed `pg_current_snapshot()` with PostgreSQL's visibility rule and
//!   the widening of 32-bit xids, shared by the test client (isocert-workload, which records
//!   xids, snapshots and row writers as `docs/POSTGRES.md` specifies) and recovery;
//! - the logical replication consumer that recovers committed row versions.
//!
//! ```
//! use isocert_adapters::Snapshot;
//!
//! let s: Snapshot = "100:104:100,102".parse()?;
//! assert!(s.sees(101) && !s.sees(102) && !s.sees(104));
//! assert_eq!(s.to_string(), "100:104:100,102");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cockroach;
pub mod dgraph;
mod error;
pub mod guard;
pub mod mariadb;
pub mod mongodb;
mod mysql_sql;
pub mod postgres;
mod registry;
pub mod seam;
mod server_process;
pub mod tidb;

pub use cockroach::CockroachDb;
pub use dgraph::Dgraph;
pub use error::AdapterError;
pub use mariadb::{EmbeddedMariaDb, MariaDb};
#[cfg(feature = "mongodb")]
pub use mongodb::MongoDb;
pub use postgres::{EmbeddedPostgres, EmbeddedPostgresBuilder, Snapshot};
pub use seam::{
    dispatch, has_transaction_snapshot, int_row, parse_run_level, redact_url, row_key, sql_level,
    sql_literal, unrunnable_level, AccessPath, CaptureOptions, ChangeCapture, ColumnType, CommitOutcome,
    CommittedTxn, Database, DatabaseKind, DatabaseVisitor, DbError, ErrorClass, FeedProgress, FeedSink,
    FeedTxn, IntOp, IntStep, IsolationLevel, LiveTicks, PhysicalDesign, RecordedOp, SecondaryIndex, Session,
    SetValue, StaleObjects, StatementWrite, Step, TableIncarnation, TableLayout, TableSpec, ThrowawayServer,
    UnknownName, SQL_RUN_LEVELS,
};
pub use tidb::TiDb;
