//! PostgreSQL behind the seam ([`Postgres`]): the test-client session and its SQL dialect
//! (`client.rs`, recording xids, snapshots and row writers as `docs/POSTGRES.md` specifies),
//! the embedded throwaway server, logical replication as the change capture.

mod adapter;
mod client;
mod embedded;
mod feed;
mod physical;
mod replication;
mod replication_decode;
mod replication_poll;
mod replication_stream;
mod session;
mod standby;
mod walsender;
mod walsender_wire;

pub use adapter::{create_table_statement, PgCapture, Postgres};
pub use client::{classify, PgOpFacts, PgSession, PgTxnFacts};
/// Simple-query helpers the CockroachDB session shares (same wire protocol and text rows).
pub(crate) use client::{int, literal_row, one_row, query_with, table_row, text};
pub use embedded::{EmbeddedPostgres, EmbeddedPostgresBuilder};
pub use physical::{access_path_settings, design_statements, maintenance_statements};
// PostgreSQL snapshots live in isocert-recovery (they are the recovery rule's data); the
// test client and recovery share that one type.
pub use isocert_recovery::{widen_xid, PgSnapshot as Snapshot, SnapshotParseError};
pub use replication::{
    drop_stale, flush_wal, ReplicationConsumer, ReplicationMode, ReplicationSlot, DEFAULT_POLL_INTERVAL,
};
pub use replication_decode::PgOutputDecoder;
pub use session::connect;
