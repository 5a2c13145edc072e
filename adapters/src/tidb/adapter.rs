//! [`TiDb`]: the seam's [`Database`] for TiDB.

use isocert_history::{Dialect, History};
use isocert_recovery::{
    recover_tidb, tidb_timestamps, LiveTicks, RawLog, RecordedLiveTicks, Recovered, RecoveryError, RowMatcher,
};
use mysql_async::prelude::Queryable;

use super::mvcc::MvccCapture;
use super::session::{classify, TiDbSession};
use super::url::{TiDbUrl, TxnMode};
use crate::mysql_sql::{db_error_with, quote, MySqlAdmin};
use crate::seam::{
    CaptureOptions, Database, DatabaseKind, DbError, IsolationLevel, NoThrowawayServer, TableSpec,
};
use crate::AdapterError;

/// A TiDB cluster under test, reached through its SQL port and its status port.
#[derive(Clone, Debug)]
pub struct TiDb {
    url: TiDbUrl,
    admin: MySqlAdmin,
}

impl TiDb {
    /// The adapter for a `tidb://` URL (docs/TIDB.md lists its parameters).
    ///
    /// # Errors
    /// A URL [`TiDbUrl::parse`] refuses.
    pub fn new(url: &str) -> Result<Self, AdapterError> {
        let url = TiDbUrl::parse(url)?;
        let admin = MySqlAdmin::new(&url.mysql_url, classify);
        Ok(TiDb { url, admin })
    }

    /// The parsed URL.
    pub fn url(&self) -> &TiDbUrl {
        &self.url
    }
}

/// `CREATE TABLE` column definitions: the integer key is the clustered row handle, which
/// the MVCC API addresses rows by.
fn definition(table: &TableSpec) -> String {
    let last = table.columns.len() - 1;
    let columns: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match i {
            0 => format!("{} INT NOT NULL PRIMARY KEY CLUSTERED", quote(c)),
            i if i == last => format!("{} BIGINT NOT NULL", quote(c)),
            _ => format!("{} INT NOT NULL", quote(c)),
        })
        .collect();
    columns.join(", ")
}

impl Database for TiDb {
    type Session = TiDbSession;
    type Capture = MvccCapture;
    type Server = NoThrowawayServer<Self>;

    const KIND: DatabaseKind = DatabaseKind::TiDb;
    const DIALECT: Dialect = Dialect::Mysql;
    /// TiDB has no SERIALIZABLE level (`transaction-isolation-levels.md`).
    const RUN_LEVELS: &'static [IsolationLevel] =
        &[IsolationLevel::RepeatableRead, IsolationLevel::ReadCommitted];

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        TiDb::new(url)
    }

    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, Self::Server), AdapterError> {
        NoThrowawayServer::refused("one", "tidb", "tidb://root@127.0.0.1:4000/test")
    }

    async fn connect(&self) -> Result<TiDbSession, DbError> {
        TiDbSession::connect(&self.url.mysql_url, self.url.txn_mode).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let create = format!("CREATE TABLE {} ({})", quote(table.name), definition(table));
        self.admin.prepare_table(table, create, rows).await
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        self.admin.table_exists(table).await
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        self.admin.drop_table(table).await
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<isocert_history::Scalar>>, DbError> {
        // The MVCC capture decodes integer columns only.
        crate::seam::integer_table(table)?;
        self.admin.read_table(table).await
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        self.admin.execute(&[format!("KILL {server_id}")]).await
    }

    async fn start_capture(
        &self,
        table: &TableSpec,
        options: &CaptureOptions,
    ) -> Result<MvccCapture, AdapterError> {
        if let Some(mode) = &options.mode {
            return Err(AdapterError::NotSupportedHere {
                message: format!(
                    "TiDB's versions come from its MVCC API; --replication {mode} is PostgreSQL's"
                ),
            });
        }
        // Everything committed by now (the loaded table) is the initial state.
        let mut conn = self.admin.connect().await?;
        let sql = "SELECT @@tidb_current_ts";
        let baseline = async {
            conn.query_drop("BEGIN").await?;
            let ts: Option<u64> = conn.query_first(sql).await?;
            conn.query_drop("COMMIT").await?;
            Ok::<_, mysql_async::Error>(ts)
        }
        .await;
        let _ = conn.disconnect().await;
        let baseline = baseline.map_err(|e| AdapterError::from(db_error_with(classify, sql, e)))?;
        let baseline = baseline.filter(|&t| t > 0).ok_or_else(|| AdapterError::Protocol {
            message: "@@tidb_current_ts is 0 inside a transaction: is this TiDB?".into(),
        })?;
        Ok(MvccCapture::new(&self.url.status_url, &self.url.database, table, baseline)?
            .resolving_locks_through(&self.url.mysql_url))
    }

    /// The timestamps each session recorded (`@@tidb_current_ts` and `@@tidb_last_txn_info`'s
    /// `commit_ts`), as each transaction completes: PD is one timestamp oracle, so a start
    /// taken after a cut is above every commit before it. Recovery's MVCC versions win
    /// where they differ, and the run then exits 2 naming the transaction.
    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(RecordedLiveTicks::new(tidb_timestamps)))
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_tidb(h, log, matcher)
    }

    /// REPEATABLE READ is checked as snapshot isolation in optimistic transactions (every
    /// read at the start timestamp, TiDB's documented snapshot isolation) and as read
    /// committed in pessimistic ones: their DML and `SELECT ... FOR UPDATE` read the newest
    /// committed version at `for_update_ts`, which TiDB documents as a non-repeatable
    /// "current read" (`transaction-isolation-levels.md`, `pessimistic-transaction.md`), so a
    /// lost-update-shaped history (a snapshot read, then an update reading a concurrent
    /// commit) is TiDB's documented behaviour there, allowed at read committed (G2-item, not
    /// G1) and refused by snapshot isolation. `--check snapshot-isolation` still asks.
    fn checked_as(&self, level: IsolationLevel) -> IsolationLevel {
        match (level, self.url.txn_mode.unwrap_or(TxnMode::for_level(level))) {
            (IsolationLevel::RepeatableRead, TxnMode::Optimistic) => IsolationLevel::SnapshotIsolation,
            (IsolationLevel::RepeatableRead, TxnMode::Pessimistic) => IsolationLevel::ReadCommitted,
            (other, _) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_clustered_handle() {
        let items = TableSpec::integers("items", &["id", "c1", "v"]);
        assert_eq!(
            definition(&items),
            "`id` INT NOT NULL PRIMARY KEY CLUSTERED, `c1` INT NOT NULL, `v` BIGINT NOT NULL"
        );
        assert!(TiDb::from_url("postgres://h/db").is_err());
    }

    #[test]
    fn pessimistic_repeatable_read_is_checked_at_the_level_tidb_documents() {
        let level = |url: &str, l| TiDb::from_url(url).unwrap().checked_as(l);
        let rr = IsolationLevel::RepeatableRead;
        assert_eq!(level("tidb://h/db", rr), IsolationLevel::SnapshotIsolation, "optimistic by default");
        assert_eq!(level("tidb://h/db?txn_mode=optimistic", rr), IsolationLevel::SnapshotIsolation);
        assert_eq!(level("tidb://h/db?txn_mode=pessimistic", rr), IsolationLevel::ReadCommitted);
        assert_eq!(level("tidb://h/db", IsolationLevel::ReadCommitted), IsolationLevel::ReadCommitted);
    }
}
