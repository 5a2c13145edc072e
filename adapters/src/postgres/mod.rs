//! PostgreSQL: the embedded throwaway server, snapshots, and the session hooks that record
//! xids, snapshots and row writers (the contract is `docs/POSTGRES.md`).

mod embedded;
mod replication;
mod replication_decode;
mod session;
mod snapshot;

pub use embedded::{EmbeddedPostgres, EmbeddedPostgresBuilder};
pub use replication::{flush_wal, ReplicationConsumer, ReplicationSlot, DEFAULT_POLL_INTERVAL};
pub use replication_decode::PgOutputDecoder;
pub use session::connect;
pub use snapshot::{widen_xid, Snapshot};
