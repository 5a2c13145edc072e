//! MariaDB behind the seam: [`MariaDb`] implements [`Database`](crate::Database) with the
//! session of `client.rs` (InnoDB's facts: consistent-snapshot positions and GTIDs), the
//! row-based binary log as the change capture ([`BinlogCapture`]), [`EmbeddedMariaDb`] as
//! the throwaway server and `isocert_recovery::recover_innodb` as the recovery rule.
//! docs/MARIADB.md says what is recorded and how InnoDB's reads are modelled.

mod adapter;
mod binlog;
mod client;
mod embedded;

pub use adapter::MariaDb;
pub use binlog::BinlogCapture;
pub use client::{classify, MariaSession};
pub use embedded::{EmbeddedMariaDb, DATABASE};
