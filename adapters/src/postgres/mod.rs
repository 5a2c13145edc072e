//! PostgreSQL: the embedded throwaway server, snapshots, and the session hooks that record
//! xids, snapshots and row writers (the contract is `docs/POSTGRES.md`).

mod embedded;
mod session;
mod snapshot;

pub use embedded::{EmbeddedPostgres, EmbeddedPostgresBuilder};
pub use session::connect;
pub use snapshot::{widen_xid, Snapshot};
