//! The MariaDB test-client session: the workload's steps in MariaDB's SQL, and the facts
//! InnoDB recovery needs ([`InnoDbTxnFacts`]: the binary-log position of the consistent
//! snapshot at REPEATABLE READ, the GTID of each commit, the GTID positions around each
//! transaction).
//!
//! The driver is mysql_async: one crate serves the sessions and the binary-log stream
//! (`Conn::get_binlog_stream`), which sqlx's MySQL driver lacks.

use isocert_recovery::{InnoDbOpFacts, InnoDbTxnFacts};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

pub(crate) use crate::mysql_sql::quote;
use crate::mysql_sql::{db_error_with, execute_step};
use crate::seam::{
    redact_url, sql_level, unrunnable_level, CommitOutcome, Database, DbError, ErrorClass, IsolationLevel,
    RecordedOp, Session, Step, TableSpec,
};
use crate::MariaDb;

/// MariaDB error numbers after which the transaction was rolled back (or must be) and a new
/// attempt may succeed: deadlock (1213), lock wait timeout (1205), and "record has changed
/// since last read" (1020, REPEATABLE READ with `innodb_snapshot_isolation=ON`).
const RETRYABLE: &[u16] = &[1213, 1205, 1020];

/// Error numbers that mean the session is gone: killed (1927), server shutdown (1053).
const CONNECTION_GONE: &[u16] = &[1927, 1053];

/// How a driver error is handled: the one place MariaDB errors are classified.
pub fn classify(e: &mysql_async::Error) -> ErrorClass {
    crate::mysql_sql::classify_codes(e, RETRYABLE, CONNECTION_GONE)
}

/// A [`DbError`] from a driver error, classified.
pub(crate) fn db_error(context: &str, e: mysql_async::Error) -> DbError {
    db_error_with(classify, context, e)
}

/// The driver's options for `url`: `mysql://` or `mariadb://` (read as `mysql://`).
pub(crate) fn opts(url: &str) -> Result<Opts, DbError> {
    crate::mysql_sql::mysql_opts(url)
}

/// Opens a connection.
pub(crate) async fn connect(url: &str) -> Result<Conn, DbError> {
    let opts = opts(url)?;
    Conn::new(opts).await.map_err(|e| db_error(&format!("connecting to {}", redact_url(url)), e))
}

/// One test-client connection to MariaDB.
#[derive(Debug)]
pub struct MariaSession {
    conn: Conn,
    /// `@@last_gtid` when the transaction began: it stays set after a transaction that
    /// writes nothing, so only a changed value is the committing transaction's GTID.
    gtid_before: Option<String>,
    /// The level of a transaction whose start is deferred to its first statement (as
    /// PostgreSQL's snapshot is taken by the first statement, not by `BEGIN`).
    pending_begin: Option<IsolationLevel>,
    /// The consistent snapshot's `file:position` once the deferred start ran, until it is
    /// copied into the transaction's facts.
    snapshot: Option<String>,
}

impl MariaSession {
    /// Connects.
    pub(crate) async fn connect(url: &str) -> Result<Self, DbError> {
        Ok(MariaSession { conn: connect(url).await?, gtid_before: None, pending_begin: None, snapshot: None })
    }

    async fn run(&mut self, sql: &str) -> Result<u64, DbError> {
        self.conn.query_drop(sql).await.map_err(|e| db_error(sql, e))?;
        Ok(self.conn.affected_rows())
    }

    /// Starts the deferred transaction, if any, and moves its snapshot position into
    /// `facts` (when given).
    async fn start(&mut self, facts: Option<&mut InnoDbTxnFacts>) -> Result<(), DbError> {
        if let Some(level) = self.pending_begin.take() {
            self.run(&format!("SET TRANSACTION ISOLATION LEVEL {}", sql_level(level)?)).await?;
            // At every level: the snapshot's binary-log position is the prefix of the log
            // whose commits the storage engine had made when the transaction began (at
            // REPEATABLE READ it is also what plain SELECTs read).
            self.run("START TRANSACTION WITH CONSISTENT SNAPSHOT").await?;
            let sql = "SELECT @@last_gtid, \
                       (SELECT variable_value FROM information_schema.session_status \
                        WHERE variable_name = 'BINLOG_SNAPSHOT_FILE'), \
                       (SELECT variable_value FROM information_schema.session_status \
                        WHERE variable_name = 'BINLOG_SNAPSHOT_POSITION')";
            let row: Option<(Option<String>, Option<String>, Option<String>)> =
                self.conn.query_first(sql).await.map_err(|e| db_error(sql, e))?;
            let (last, file, position) = row.unwrap_or_default();
            self.gtid_before = last.filter(|g| !g.is_empty());
            if let (Some(file), Some(position)) = (file.filter(|f| !f.is_empty()), position) {
                self.snapshot = Some(format!("{file}:{position}"));
            }
        }
        if let Some(facts) = facts {
            if facts.snapshot.is_none() {
                facts.snapshot = self.snapshot.take();
            }
        }
        Ok(())
    }

    async fn gtids(&mut self) -> Result<(Option<String>, Option<String>), DbError> {
        let sql = "SELECT @@gtid_binlog_pos, @@last_gtid";
        let row: Option<(Option<String>, Option<String>)> =
            self.conn.query_first(sql).await.map_err(|e| db_error(sql, e))?;
        let (pos, last) = row.unwrap_or_default();
        let set = |g: Option<String>| g.filter(|g| !g.is_empty());
        Ok((set(pos), set(last)))
    }
}

impl Session for MariaSession {
    type TxnFacts = InnoDbTxnFacts;
    type OpFacts = InnoDbOpFacts;

    fn server_id(&self) -> u64 {
        u64::from(self.conn.id())
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<InnoDbTxnFacts, DbError> {
        if !MariaDb::RUN_LEVELS.contains(&level) {
            return Err(unrunnable_level(level, MariaDb::RUN_LEVELS));
        }
        self.pending_begin = Some(level);
        self.snapshot = None;
        Ok(InnoDbTxnFacts { isolation: level.as_str().to_string(), ..InnoDbTxnFacts::default() })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        facts: &mut InnoDbTxnFacts,
    ) -> Result<Vec<(RecordedOp, InnoDbOpFacts)>, DbError> {
        self.start(Some(facts)).await?;
        let ops = execute_step(&mut self.conn, table, step, classify).await?;
        Ok(ops
            .into_iter()
            .map(|(op, step)| {
                let facts = InnoDbOpFacts {
                    value_column: step.aggregated_rows.is_some().then(|| table.value_column().to_string()),
                    aggregated_rows: step.aggregated_rows,
                    locking: step.locking,
                };
                (op, facts)
            })
            .collect())
    }

    async fn commit(&mut self, facts: &mut InnoDbTxnFacts) -> CommitOutcome {
        if let Err(e) = self.start(Some(facts)).await {
            return CommitOutcome::failed_with(e);
        }
        // While the transaction still holds its locks: every version a locking read saw
        // was committed to the binary log at or before this position.
        match self.gtids().await {
            Ok((pos, _)) => facts.before_commit_gtid = pos,
            Err(e) => return CommitOutcome::failed_with(e),
        }
        if let Err(e) = self.run("COMMIT").await {
            return CommitOutcome::failed_with(e);
        }
        // The commit happened; what follows only records where. A failure here loses the
        // GTID (recovery then matches the transaction by the values it wrote).
        match self.gtids().await {
            Ok((_, last)) => {
                facts.gtid = last.filter(|g| Some(g) != self.gtid_before.as_ref());
            }
            Err(e) => tracing::debug!("reading the commit's GTID: {e}"),
        }
        CommitOutcome::Committed
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        self.start(None).await?;
        self.conn.query_drop(sql).await.map_err(|e| db_error(sql, e))
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.pending_begin = None;
        self.run("ROLLBACK").await.map(|_| ())
    }

    fn note_error(&self, facts: &mut InnoDbTxnFacts, error: &DbError) {
        facts.error = Some(error.fact());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlocks_and_timeouts_retry_and_lost_sessions_reconnect() {
        let server = |code: u16| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: String::new(),
                state: String::new(),
            })
        };
        assert_eq!(classify(&server(1213)), ErrorClass::Retryable);
        assert_eq!(classify(&server(1205)), ErrorClass::Retryable);
        assert_eq!(classify(&server(1020)), ErrorClass::Retryable);
        assert_eq!(classify(&server(1927)), ErrorClass::ConnectionLost);
        assert_eq!(classify(&server(1064)), ErrorClass::Fatal);
        assert_eq!(
            classify(&mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed)),
            ErrorClass::ConnectionLost
        );
    }

    #[test]
    fn mariadb_urls_are_read_as_mysql_ones_and_never_printed_with_their_password() {
        assert!(opts("mariadb://root@127.0.0.1:3306/isocert").is_ok());
        assert!(opts("mysql://root:pw@127.0.0.1:3306/isocert").is_ok());
        let e = opts("mysql://root:s3cret@127.0.0.1:notaport/x").unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
