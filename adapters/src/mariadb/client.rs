//! The MariaDB test-client session: the workload's steps in MariaDB's SQL, and the facts
//! InnoDB recovery needs ([`InnoDbTxnFacts`]: the binary-log position of the consistent
//! snapshot at REPEATABLE READ, the GTID of each commit, the GTID positions around each
//! transaction).
//!
//! The driver is mysql_async: one crate serves the sessions and the binary-log stream
//! (`Conn::get_binlog_stream`), which sqlx's MySQL driver lacks.

use isocert_history::AggregateFn;
use isocert_recovery::{InnoDbOpFacts, InnoDbTxnFacts};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row};

use crate::seam::{
    redact_url, CommitOutcome, DbError, ErrorClass, Isolation, RecordedOp, Session, Step, TableSpec,
};

/// MariaDB error numbers after which the transaction was rolled back (or must be) and a new
/// attempt may succeed: deadlock (1213), lock wait timeout (1205), and "record has changed
/// since last read" (1020, REPEATABLE READ with `innodb_snapshot_isolation=ON`).
const RETRYABLE: &[u16] = &[1213, 1205, 1020];

/// Error numbers that mean the session is gone: killed (1927), server shutdown (1053).
const CONNECTION_GONE: &[u16] = &[1927, 1053];

/// How a driver error is handled: the one place MariaDB errors are classified.
pub fn classify(e: &mysql_async::Error) -> ErrorClass {
    match e {
        mysql_async::Error::Server(s) if RETRYABLE.contains(&s.code) => ErrorClass::Retryable,
        mysql_async::Error::Server(s) if CONNECTION_GONE.contains(&s.code) => ErrorClass::ConnectionLost,
        mysql_async::Error::Server(_) | mysql_async::Error::Url(_) => ErrorClass::Fatal,
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => ErrorClass::ConnectionLost,
        mysql_async::Error::Other(_) => ErrorClass::Fatal,
    }
}

/// A [`DbError`] from a driver error, classified.
pub(crate) fn db_error(context: &str, e: mysql_async::Error) -> DbError {
    let code = match &e {
        mysql_async::Error::Server(s) => Some(s.code.to_string()),
        _ => None,
    };
    DbError::new(classify(&e), code, context, e)
}

/// The driver's options for `url`: `mysql://` or `mariadb://` (read as `mysql://`).
pub(crate) fn opts(url: &str) -> Result<Opts, DbError> {
    let mysql_url = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
        _ => url.to_string(),
    };
    Opts::from_url(&mysql_url)
        .map_err(|e| DbError::new(ErrorClass::Fatal, None, format!("reading the URL {}", redact_url(url)), e))
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
}

impl MariaSession {
    /// Connects.
    pub(crate) async fn connect(url: &str) -> Result<Self, DbError> {
        Ok(MariaSession { conn: connect(url).await?, gtid_before: None })
    }

    async fn run(&mut self, sql: &str) -> Result<u64, DbError> {
        self.conn.query_drop(sql).await.map_err(|e| db_error(sql, e))?;
        Ok(self.conn.affected_rows())
    }

    async fn rows(&mut self, sql: &str) -> Result<Vec<Row>, DbError> {
        self.conn.query(sql).await.map_err(|e| db_error(sql, e))
    }

    /// `@@gtid_binlog_pos` (the GTID of the last transaction written to the binary log)
    /// and this session's `@@last_gtid`.
    async fn gtids(&mut self) -> Result<(Option<String>, Option<String>), DbError> {
        let sql = "SELECT @@gtid_binlog_pos, @@last_gtid";
        let row: Option<(Option<String>, Option<String>)> =
            self.conn.query_first(sql).await.map_err(|e| db_error(sql, e))?;
        let (pos, last) = row.unwrap_or_default();
        let set = |g: Option<String>| g.filter(|g| !g.is_empty());
        Ok((set(pos), set(last)))
    }
}

/// The integer columns of `row`, all of them.
fn ints(sql: &str, row: &Row, width: usize) -> Result<Vec<i64>, DbError> {
    (0..width)
        .map(|i| {
            row.get_opt::<i64, usize>(i)
                .and_then(Result::ok)
                .ok_or_else(|| DbError::unexpected(sql, format!("column {i} is NULL or not an integer")))
        })
        .collect()
}

/// An identifier quoted for MariaDB (`key` is a reserved word there).
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The table's columns, quoted, comma-separated.
pub(crate) fn column_list(table: &TableSpec) -> String {
    table.columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
}

fn assignments(table: &TableSpec, row: &[i64]) -> String {
    let pairs = table.columns[1..].iter().zip(&row[1..]);
    pairs.map(|(c, v)| format!("{} = {v}", quote(c))).collect::<Vec<_>>().join(", ")
}

fn values(row: &[i64]) -> String {
    row.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// How a failed COMMIT (or the query just before it) ends the attempt.
fn commit_failure(e: DbError) -> CommitOutcome {
    match e.class {
        ErrorClass::Retryable => CommitOutcome::AbortedRetryable(e),
        ErrorClass::ConnectionLost => CommitOutcome::Unknown(e),
        ErrorClass::Fatal => CommitOutcome::Failed(e),
    }
}

impl Session for MariaSession {
    type TxnFacts = InnoDbTxnFacts;
    type OpFacts = InnoDbOpFacts;

    fn server_id(&self) -> u64 {
        u64::from(self.conn.id())
    }

    async fn begin(&mut self, level: Isolation) -> Result<InnoDbTxnFacts, DbError> {
        let mut facts = InnoDbTxnFacts { isolation: level.as_str().to_string(), ..InnoDbTxnFacts::default() };
        self.run(&format!("SET TRANSACTION ISOLATION LEVEL {}", level.sql())).await?;
        // At every level: the snapshot's binary-log position is the prefix of the log whose
        // commits the storage engine had made when the transaction began (at REPEATABLE
        // READ it is also what plain SELECTs read).
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
            facts.snapshot = Some(format!("{file}:{position}"));
        }
        Ok(facts)
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        _facts: &mut InnoDbTxnFacts,
    ) -> Result<Vec<(RecordedOp, InnoDbOpFacts)>, DbError> {
        let t = quote(table.name);
        let pk = quote(table.pk());
        let cols = column_list(table);
        let width = table.columns.len();
        let ops = match step {
            Step::Read { key } => {
                let sql = format!("SELECT {cols} FROM {t} WHERE {pk} = {key}");
                let rows = self.rows(&sql).await?;
                let row = rows.first().map(|r| ints(&sql, r, width)).transpose()?;
                vec![RecordedOp::Read { key: *key, row }]
            }
            Step::Upsert { row } => {
                let update = table.columns[1..]
                    .iter()
                    .map(|c| format!("{0} = VALUES({0})", quote(c)))
                    .collect::<Vec<_>>();
                let sql = format!(
                    "INSERT INTO {t} ({cols}) VALUES ({}) ON DUPLICATE KEY UPDATE {}",
                    values(row),
                    update.join(", ")
                );
                self.run(&sql).await?;
                vec![RecordedOp::Write { key: row[0], row: Some(row.clone()) }]
            }
            Step::Update { row } => {
                let sql = format!("UPDATE {t} SET {} WHERE {pk} = {}", assignments(table, row), row[0]);
                match self.run(&sql).await? {
                    0 => Vec::new(),
                    _ => vec![RecordedOp::Write { key: row[0], row: Some(row.clone()) }],
                }
            }
            Step::Delete { key } => {
                let sql = format!("DELETE FROM {t} WHERE {pk} = {key}");
                match self.run(&sql).await? {
                    0 => Vec::new(),
                    _ => vec![RecordedOp::Write { key: *key, row: None }],
                }
            }
            Step::Select { predicate } => {
                let sql = format!("SELECT {cols} FROM {t} WHERE {predicate} ORDER BY {pk}");
                let rows = self.rows(&sql).await?;
                let rows = rows.iter().map(|r| ints(&sql, r, width)).collect::<Result<_, _>>()?;
                vec![RecordedOp::Select { predicate: predicate.clone(), rows }]
            }
            Step::PredicateUpdate { predicate, set } => {
                let assign =
                    set.iter().map(|(c, v)| format!("{} = {v}", quote(c))).collect::<Vec<_>>().join(", ");
                let sql = format!("UPDATE {t} SET {assign} WHERE {predicate}");
                self.run(&sql).await?;
                // MariaDB's UPDATE has no RETURNING: the rows it wrote are the ones carrying
                // the statement's fresh unique value (the last assignment), which the
                // transaction sees as its own writes.
                let (value_col, fresh) =
                    set.last().ok_or_else(|| DbError::unexpected(&sql, "no assignment"))?;
                let read =
                    format!("SELECT {cols} FROM {t} WHERE {} = {fresh} ORDER BY {pk}", quote(value_col));
                let rows = self.rows(&read).await?;
                let rows = rows.iter().map(|r| ints(&read, r, width)).collect::<Result<_, _>>()?;
                vec![RecordedOp::Update { predicate: predicate.clone(), set: set.clone(), rows }]
            }
            Step::PredicateDelete { predicate } => {
                let sql = format!("DELETE FROM {t} WHERE {predicate} RETURNING {pk}");
                let rows = self.rows(&sql).await?;
                let mut keys =
                    rows.iter().map(|r| ints(&sql, r, 1).map(|k| k[0])).collect::<Result<Vec<_>, _>>()?;
                keys.sort_unstable();
                vec![RecordedOp::Delete { predicate: predicate.clone(), keys }]
            }
            Step::Aggregate { predicate, function, column } => {
                let f = match function {
                    AggregateFn::Min => "MIN",
                    AggregateFn::Max => "MAX",
                    AggregateFn::Count => "COUNT",
                    AggregateFn::Sum => "SUM",
                };
                // One statement, one read: the aggregate over the matching rows, repeated on
                // each of them (a window function), with each row's key and value column.
                let sql = format!(
                    "SELECT {pk}, {v}, CAST({f}({c}) OVER () AS SIGNED) FROM {t} WHERE {predicate} ORDER BY {pk}",
                    v = quote(table.value_column()),
                    c = quote(column),
                );
                let rows: Vec<(i64, i64, Option<i64>)> =
                    self.conn.query(&sql).await.map_err(|e| db_error(&sql, e))?;
                let result = match rows.first() {
                    Some((_, _, value)) => *value,
                    None if *function == AggregateFn::Count => Some(0),
                    None => None,
                };
                let op = RecordedOp::Aggregate {
                    predicate: predicate.clone(),
                    function: *function,
                    column,
                    result,
                };
                let facts = InnoDbOpFacts {
                    aggregated_rows: Some(rows.iter().map(|(k, v, _)| [*k, *v]).collect()),
                    value_column: Some(table.value_column().to_string()),
                };
                return Ok(vec![(op, facts)]);
            }
        };
        Ok(ops.into_iter().map(|op| (op, InnoDbOpFacts::default())).collect())
    }

    async fn commit(&mut self, facts: &mut InnoDbTxnFacts) -> CommitOutcome {
        // While the transaction still holds its locks: every version a locking read saw
        // was committed to the binary log at or before this position.
        match self.gtids().await {
            Ok((pos, _)) => facts.before_commit_gtid = pos,
            Err(e) => return commit_failure(e),
        }
        if let Err(e) = self.run("COMMIT").await {
            return commit_failure(e);
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

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.run("ROLLBACK").await.map(|_| ())
    }

    fn note_error(&self, facts: &mut InnoDbTxnFacts, error: &DbError) {
        facts.error = Some(match (error.code(), error.class) {
            (Some(code), _) => code.to_string(),
            (None, ErrorClass::ConnectionLost) => "connection".to_string(),
            (None, _) => "client".to_string(),
        });
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
