//! [`MariaDb`]: the seam's [`Database`] for MariaDB (and MySQL-protocol servers with
//! MariaDB's binary log and status variables).

use std::sync::atomic::{AtomicU32, Ordering};

use isocert_history::{Dialect, History};
use isocert_recovery::{
    recover_innodb, InnoDbLiveTicks, LiveTicks, RawLog, Recovered, RecoveryError, RowMatcher,
};

use super::binlog::BinlogCapture;
use super::client::{classify, opts, quote, MariaSession};
use super::embedded::EmbeddedMariaDb;
use crate::mysql_sql::MySqlAdmin;
use crate::seam::{
    CaptureOptions, ColumnType, Database, DatabaseKind, DbError, IsolationLevel, TableSpec, ThrowawayServer,
};
use crate::AdapterError;

/// A MariaDB server under test (needs a row-based binary log for the change capture).
#[derive(Clone, Debug)]
pub struct MariaDb {
    url: String,
    database: String,
    admin: MySqlAdmin,
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
        let admin = MySqlAdmin::new(&url, classify);
        Ok(MariaDb { url, database, admin })
    }

    /// The URL it connects to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A server id for the capture's replica registration, unique per capture: the
    /// server ends an older dump of the same id when a new one registers, so a process
    /// that captures several times (a scenario's permutations) needs a new id each time.
    fn replica_id() -> u32 {
        static CAPTURES: AtomicU32 = AtomicU32::new(0);
        let n = CAPTURES.fetch_add(1, Ordering::Relaxed) % 1000;
        1_000_000 + (std::process::id() % 1_000_000) * 1000 + n
    }
}

/// `CREATE TABLE` column definitions of a workload table.
fn definition(table: &TableSpec) -> String {
    let last = table.columns.len() - 1;
    let columns: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match (i, table.column_type(i)) {
            (0, _) => format!("{} INT NOT NULL PRIMARY KEY", quote(c)),
            (_, ColumnType::Integer) if i == last => format!("{} BIGINT NOT NULL", quote(c)),
            (_, ColumnType::Integer) => format!("{} INT NOT NULL", quote(c)),
            (_, ColumnType::Text) => format!("{} TEXT NOT NULL", quote(c)),
            (_, ColumnType::Float) => format!("{} DOUBLE NOT NULL", quote(c)),
            (_, ColumnType::Numeric) => format!("{} DECIMAL(30, 10) NOT NULL", quote(c)),
            (_, ColumnType::Boolean) => format!("{} BOOLEAN NOT NULL", quote(c)),
        })
        .collect();
    columns.join(", ")
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

    async fn server_version(&self) -> Option<String> {
        use mysql_async::prelude::Queryable;
        let mut conn = self.admin.connect().await.ok()?;
        let version = conn.query_first::<String, _>("SELECT VERSION()").await.ok().flatten();
        let _ = conn.disconnect().await;
        version.map(|v| format!("MariaDB {v}"))
    }

    async fn connect(&self) -> Result<MariaSession, DbError> {
        MariaSession::connect(&self.url).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let create = format!("CREATE TABLE {} ({}) ENGINE=InnoDB", quote(table.name), definition(table));
        self.admin.prepare_table(table, create, rows).await
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        self.admin.table_exists(table).await
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        self.admin.drop_table(table).await
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<isocert_history::Scalar>>, DbError> {
        self.admin.read_table(table).await
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        self.admin.execute(&[format!("KILL {server_id}")]).await
    }

    async fn is_blocked(&self, server_id: u64) -> Result<bool, DbError> {
        self.admin.lock_waiting(server_id).await
    }

    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(InnoDbLiveTicks::new()))
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

    /// InnoDB's manual ("Transaction Isolation Levels", "Consistent Nonlocking Reads";
    /// docs/MARIADB.md, "Statement-level promises"): `UPDATE` and `DELETE` find and change
    /// rows by current (locking) reads of the latest committed version at every level, at
    /// read committed through a semi-consistent read that evaluates the `WHERE` on the latest
    /// committed version and reads the row again under its lock; so a write replaces the
    /// newest version, which satisfies its condition, and computes its new row from it. A
    /// plain read is one consistent read (one snapshot) per statement at read committed
    /// only: at repeatable read and serializable the snapshot is the transaction's first.
    fn statement_promises(&self, level: IsolationLevel) -> Option<isocert_history::Promises> {
        use isocert_history::StatementPromise::{OneSnapshot, WriteFromReplaced, WriteToQualifying};
        let mut statements = vec![WriteToQualifying, WriteFromReplaced];
        if level == IsolationLevel::ReadCommitted {
            statements.insert(0, OneSnapshot);
        }
        Some(isocert_history::Promises { database: "MariaDB".into(), statements })
    }

    /// InnoDB's repeatable read is checked as snapshot isolation, to show whether it is one
    /// (docs/MARIADB.md: it is not, unless `innodb_snapshot_isolation=ON`).
    fn checked_as(&self, level: IsolationLevel) -> IsolationLevel {
        match level {
            IsolationLevel::RepeatableRead => IsolationLevel::SnapshotIsolation,
            other => other,
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
    fn mariadb_promises_one_snapshot_per_statement_only_at_read_committed() {
        use isocert_history::StatementPromise::{OneSnapshot, WriteFromReplaced, WriteToQualifying};
        let db = MariaDb::from_url("mariadb://root@h:3306/isocert").unwrap();
        let rc = db.statement_promises(IsolationLevel::ReadCommitted).expect("declared");
        assert_eq!(rc.statements, [OneSnapshot, WriteToQualifying, WriteFromReplaced]);
        let ser = db.statement_promises(IsolationLevel::Serializable).expect("declared");
        assert_eq!(ser.statements, [WriteToQualifying, WriteFromReplaced]);
        assert_eq!(&*ser.database, "MariaDB");
    }

    #[test]
    fn tables_get_integer_columns_and_urls_must_name_a_database() {
        let items = TableSpec::integers("items", &["id", "c1", "c2", "v"]);
        assert_eq!(
            definition(&items),
            "`id` INT NOT NULL PRIMARY KEY, `c1` INT NOT NULL, `c2` INT NOT NULL, `v` BIGINT NOT NULL"
        );
        assert!(MariaDb::from_url("postgres://h/db").is_err());
        assert!(MariaDb::from_url("mysql://root@h:3306").unwrap_err().to_string().contains("DATABASE"));
        assert_eq!(MariaDb::from_url("mariadb://root@h:3306/isocert").unwrap().database, "isocert");
    }
}
