//! [`TiDb`]: the seam's [`Database`] for TiDB.

use isocert_history::{Dialect, History};
use isocert_recovery::{recover_tidb, RawLog, Recovered, RecoveryError, RowMatcher};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::mvcc::MvccCapture;
use super::session::{classify, TiDbSession};
use super::url::TiDbUrl;
use crate::mysql_sql::{column_list, db_error_with, quote};
use crate::seam::{
    redact_url, CaptureOptions, CheckedLevel, Database, DatabaseKind, DbError, ErrorClass, Isolation,
    TableSpec, ThrowawayServer,
};
use crate::AdapterError;

/// Rows per `INSERT` when loading the initial rows.
const INSERT_BATCH: usize = 1000;

/// A TiDB cluster under test, reached through its SQL port and its status port.
#[derive(Clone, Debug)]
pub struct TiDb {
    url: TiDbUrl,
}

impl TiDb {
    /// The adapter for a `tidb://` URL (docs/TIDB.md lists its parameters).
    ///
    /// # Errors
    /// A URL [`TiDbUrl::parse`] refuses.
    pub fn new(url: &str) -> Result<Self, AdapterError> {
        Ok(TiDb { url: TiDbUrl::parse(url)? })
    }

    /// The parsed URL.
    pub fn url(&self) -> &TiDbUrl {
        &self.url
    }

    async fn admin(&self) -> Result<Conn, DbError> {
        let mysql = &self.url.mysql_url;
        let opts = mysql_async::Opts::from_url(mysql).map_err(|e| {
            DbError::new(ErrorClass::Fatal, None, format!("reading {}", redact_url(mysql)), e)
        })?;
        Conn::new(opts).await.map_err(|e| db_error(&format!("connecting to {}", redact_url(mysql)), e))
    }
}

fn db_error(context: &str, e: mysql_async::Error) -> DbError {
    db_error_with(classify, context, e)
}

async fn exec(conn: &mut Conn, sql: &str) -> Result<(), DbError> {
    conn.query_drop(sql).await.map_err(|e| db_error(sql, e))
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

/// TiDB runs only where a cluster is given: there is no throwaway server.
#[derive(Debug)]
pub struct NoTiDbServer;

impl ThrowawayServer for NoTiDbServer {
    fn url(&self) -> String {
        String::new()
    }

    async fn shutdown(self) -> Result<(), AdapterError> {
        Ok(())
    }
}

impl Database for TiDb {
    type Session = TiDbSession;
    type Capture = MvccCapture;
    type Server = NoTiDbServer;

    const KIND: DatabaseKind = DatabaseKind::TiDb;
    const DIALECT: Dialect = Dialect::Mysql;

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        TiDb::new(url)
    }

    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, NoTiDbServer), AdapterError> {
        Err(AdapterError::NotSupportedHere {
            message:
                "isocert cannot start a throwaway TiDB: bring one up (`docker compose up -d --wait tidb`) \
                      and pass --db tidb://root@127.0.0.1:4000/test"
                    .into(),
        })
    }

    async fn connect(&self) -> Result<TiDbSession, DbError> {
        TiDbSession::connect(&self.url.mysql_url, self.url.txn_mode).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let mut conn = self.admin().await?;
        let t = quote(table.name);
        exec(&mut conn, &format!("DROP TABLE IF EXISTS {t}")).await?;
        exec(&mut conn, &format!("CREATE TABLE {t} ({})", definition(table))).await?;
        for batch in rows.chunks(INSERT_BATCH) {
            let values: Vec<String> = batch
                .iter()
                .map(|r| format!("({})", r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))
                .collect();
            exec(
                &mut conn,
                &format!("INSERT INTO {t} ({}) VALUES {}", column_list(table), values.join(", ")),
            )
            .await?;
        }
        let _ = conn.disconnect().await;
        Ok(())
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        let mut conn = self.admin().await?;
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{}'",
            table.name
        );
        let n: Option<i64> = conn.query_first(&sql).await.map_err(|e| db_error(&sql, e))?;
        let _ = conn.disconnect().await;
        Ok(n.unwrap_or(0) > 0)
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        let mut conn = self.admin().await?;
        exec(&mut conn, &format!("DROP TABLE IF EXISTS {}", quote(table.name))).await?;
        let _ = conn.disconnect().await;
        Ok(())
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<i64>>, DbError> {
        let mut conn = self.admin().await?;
        let sql = format!("SELECT {} FROM {} ORDER BY 1", column_list(table), quote(table.name));
        let rows: Vec<mysql_async::Row> = conn.query(&sql).await.map_err(|e| db_error(&sql, e))?;
        let _ = conn.disconnect().await;
        rows.iter().map(|r| crate::mysql_sql::ints(&sql, r, table.columns.len())).collect()
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        let mut conn = self.admin().await?;
        exec(&mut conn, &format!("KILL {server_id}")).await?;
        let _ = conn.disconnect().await;
        Ok(())
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
        let mut conn = self.admin().await.map_err(AdapterError::from)?;
        exec(&mut conn, "BEGIN").await.map_err(AdapterError::from)?;
        let sql = "SELECT @@tidb_current_ts";
        let baseline: Option<u64> =
            conn.query_first(sql).await.map_err(|e| AdapterError::from(db_error(sql, e)))?;
        exec(&mut conn, "COMMIT").await.map_err(AdapterError::from)?;
        let _ = conn.disconnect().await;
        let baseline = baseline.filter(|&t| t > 0).ok_or_else(|| AdapterError::Protocol {
            message: "@@tidb_current_ts is 0 inside a transaction: is this TiDB?".into(),
        })?;
        MvccCapture::new(&self.url.status_url, &self.url.database, table, baseline)
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_tidb(h, log, matcher)
    }

    /// TiDB's REPEATABLE READ is snapshot isolation (TiDB's documentation says so): it is
    /// checked as such.
    fn checked_as(level: Isolation) -> CheckedLevel {
        match level {
            Isolation::Serializable => CheckedLevel::Serializable,
            Isolation::RepeatableRead => CheckedLevel::SnapshotIsolation,
            Isolation::ReadCommitted => CheckedLevel::ReadCommitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_clustered_handle() {
        let items = TableSpec { name: "items", columns: &["id", "c1", "v"] };
        assert_eq!(
            definition(&items),
            "`id` INT NOT NULL PRIMARY KEY CLUSTERED, `c1` INT NOT NULL, `v` BIGINT NOT NULL"
        );
        assert!(TiDb::from_url("postgres://h/db").is_err());
    }
}
