//! [`MariaDb`]: the seam's [`Database`] for MariaDB (and MySQL-protocol servers with
//! MariaDB's binary log and status variables).

use isocert_history::{Dialect, History};
use isocert_recovery::{recover_innodb, RawLog, Recovered, RecoveryError, RowMatcher};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::binlog::BinlogCapture;
use super::client::{column_list, connect, db_error, opts, quote, MariaSession};
use super::embedded::EmbeddedMariaDb;
use crate::seam::{
    CaptureOptions, CheckedLevel, Database, DatabaseKind, DbError, Isolation, TableSpec, ThrowawayServer,
};
use crate::AdapterError;

/// Rows per `INSERT` when loading the initial rows.
const INSERT_BATCH: usize = 1000;

/// A MariaDB server under test (needs a row-based binary log for the change capture).
#[derive(Clone, Debug)]
pub struct MariaDb {
    url: String,
    database: String,
}

impl MariaDb {
    /// The adapter for `url` (`mysql://` or `mariadb://`, naming the database the tables go in).
    ///
    /// # Errors
    /// A URL the driver cannot read, or one without a database name.
    pub fn new(url: impl Into<String>) -> Result<Self, AdapterError> {
        let url = url.into();
        let database = opts(&url)?.db_name().map(str::to_string).ok_or_else(|| AdapterError::Protocol {
            message: "a MariaDB URL must name the database the workload's tables go in (mysql://user@host:port/DATABASE)"
                .into(),
        })?;
        Ok(MariaDb { url, database })
    }

    /// The URL it connects to.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn admin(&self) -> Result<Conn, DbError> {
        connect(&self.url).await
    }

    /// A server id for the capture's replica registration, unique per process.
    fn replica_id() -> u32 {
        1_000_000 + std::process::id() % 1_000_000_000
    }
}

/// `CREATE TABLE` column definitions of a workload table.
fn definition(table: &TableSpec) -> String {
    let last = table.columns.len() - 1;
    let columns: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match i {
            0 => format!("{} INT NOT NULL PRIMARY KEY", quote(c)),
            i if i == last => format!("{} BIGINT NOT NULL", quote(c)),
            _ => format!("{} INT NOT NULL", quote(c)),
        })
        .collect();
    columns.join(", ")
}

async fn exec(conn: &mut Conn, sql: &str) -> Result<(), DbError> {
    conn.query_drop(sql).await.map_err(|e| db_error(sql, e))
}

impl Database for MariaDb {
    type Session = MariaSession;
    type Capture = BinlogCapture;
    type Server = EmbeddedMariaDb;

    const KIND: DatabaseKind = DatabaseKind::MariaDb;
    const DIALECT: Dialect = Dialect::Mysql;

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        match DatabaseKind::from_url(url)? {
            DatabaseKind::MariaDb => MariaDb::new(url),
            other => Err(AdapterError::Protocol {
                message: format!("a {} URL given to the MariaDB adapter", other.display_name()),
            }),
        }
    }

    async fn start_server(settings: &[(String, String)]) -> Result<(Self, EmbeddedMariaDb), AdapterError> {
        let server = EmbeddedMariaDb::start_async(settings.to_vec()).await?;
        Ok((MariaDb::new(server.url())?, server))
    }

    async fn connect(&self) -> Result<MariaSession, DbError> {
        MariaSession::connect(&self.url).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let mut conn = self.admin().await?;
        let t = quote(table.name);
        exec(&mut conn, &format!("DROP TABLE IF EXISTS {t}")).await?;
        exec(&mut conn, &format!("CREATE TABLE {t} ({}) ENGINE=InnoDB", definition(table))).await?;
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
        rows.iter()
            .map(|r| {
                (0..table.columns.len())
                    .map(|i| r.get_opt::<i64, usize>(i).and_then(Result::ok))
                    .collect::<Option<Vec<i64>>>()
                    .ok_or_else(|| DbError::unexpected(&sql, "a row with a NULL or non-integer column"))
            })
            .collect()
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
    ) -> Result<BinlogCapture, AdapterError> {
        if let Some(mode) = &options.mode {
            return Err(AdapterError::NotSupportedHere {
                message: format!("MariaDB's change capture has one mode (the binary log); --replication {mode} is PostgreSQL's"),
            });
        }
        BinlogCapture::start(&self.url, &self.database, table, Self::replica_id()).await
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_innodb(h, log, matcher)
    }

    /// InnoDB's repeatable read is checked as snapshot isolation, to show whether it is one
    /// (docs/MARIADB.md: it is not, unless `innodb_snapshot_isolation=ON`).
    fn checked_as(level: Isolation) -> CheckedLevel {
        match level {
            Isolation::Serializable => CheckedLevel::Serializable,
            Isolation::RepeatableRead => CheckedLevel::SnapshotIsolation,
            Isolation::ReadCommitted => CheckedLevel::ReadCommitted,
        }
    }
}

impl ThrowawayServer for EmbeddedMariaDb {
    fn url(&self) -> String {
        EmbeddedMariaDb::url(self)
    }

    async fn shutdown(self) -> Result<(), AdapterError> {
        self.shutdown_async().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_get_integer_columns_and_urls_must_name_a_database() {
        let items = TableSpec { name: "items", columns: &["id", "c1", "c2", "v"] };
        assert_eq!(
            definition(&items),
            "`id` INT NOT NULL PRIMARY KEY, `c1` INT NOT NULL, `c2` INT NOT NULL, `v` BIGINT NOT NULL"
        );
        assert!(MariaDb::from_url("postgres://h/db").is_err());
        assert!(MariaDb::from_url("mysql://root@h:3306").unwrap_err().to_string().contains("DATABASE"));
        assert_eq!(MariaDb::from_url("mariadb://root@h:3306/isocert").unwrap().database, "isocert");
    }
}
