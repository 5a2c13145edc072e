//! TiDB behind the seam: [`TiDb`] implements [`Database`](crate::Database) over the MySQL
//! protocol (the statements of `mysql_sql.rs`), with a session recording TiDB's timestamps
//! (`@@tidb_current_ts`, `@@tidb_last_txn_info`, `@@tidb_last_query_info`), the status
//! port's MVCC API as the version source ([`MvccCapture`]: every version of every row the
//! history names, read after the run), and `isocert_recovery::recover_tidb` (timestamp
//! ordering) as the recovery rule. TiDB cannot run on isocert's CI machine: the payload
//! shapes are tested here, the whole path live when `ISOCERT_TIDB_URL` is set
//! (docs/TIDB.md).

mod adapter;
mod mvcc;
mod row_codec;
mod session;
mod url;

pub use adapter::TiDb;
pub use mvcc::{parse_mvcc, parse_mvcc_row, versions_to_log, MvccCapture, MvccVersion, PendingLock};
pub use session::{classify, classify_commit, TiDbSession};
pub use url::{TiDbUrl, TxnMode};
