//! The TiDB test-client session: the workload's steps in MySQL's SQL (`mysql_sql.rs`), and
//! the timestamps timestamp-ordering recovery needs ([`TiDbTxnFacts`], [`TiDbOpFacts`]).
//!
//! - `@@tidb_current_ts` right after `BEGIN`: the start timestamp (TiDB allocates it
//!   there; every plain read of a REPEATABLE READ transaction is at it);
//! - `@@tidb_last_query_info` after each statement that reads at its own timestamp (DML
//!   and `SELECT ... FOR UPDATE` of a pessimistic transaction, every statement at READ
//!   COMMITTED): its `for_update_ts`, the op's `read_ts`;
//! - `@@tidb_last_txn_info` after COMMIT: its `commit_ts`.
//!
//! The JSON of both variables is TiDB's `sessionctx/variable` `TxnInfo` / `QueryInfo`:
//! `{"txn_scope":"global","start_ts":N,"commit_ts":N,...}` and
//! `{"txn_scope":"global","start_ts":N,"for_update_ts":N,"error":...}`.

use isocert_recovery::{TiDbOpFacts, TiDbTxnFacts};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use serde::Deserialize;

use super::url::TxnMode;
use crate::mysql_sql::{db_error_with, execute_step, quote};
use crate::seam::{
    redact_url, sql_level, unrunnable_level, CommitOutcome, Database, DbError, ErrorClass, IsolationLevel,
    RecordedOp, Session, Step, TableSpec,
};
use crate::TiDb;

/// TiDB error numbers after which the transaction was rolled back and a new attempt may
/// succeed (TiDB's `error-codes.md`): write conflict in TiKV (9007) and in TiDB ("Write
/// Conflict, txnStartTS is stale", 8005), "can not retry select for update statement"
/// (8002), "transaction retry failed" (8022), "information schema is changed" (8028),
/// deadlock (1213), lock wait timeout (1205), and the transient cluster errors: PD server
/// timeout (9001), TiKV server timeout (9002), TiKV server is busy (9003), resolve lock
/// timeout (9004), region is unavailable (9005).
const RETRYABLE: &[u16] = &[9007, 8005, 8002, 8022, 8028, 1213, 1205, 9001, 9002, 9003, 9004, 9005];

/// Transient cluster errors that leave a COMMIT's outcome unknown: the primary key may have
/// been committed before the timeout or the unavailable region was reported. The row
/// versions settle such an attempt, as after a connection lost during COMMIT.
const UNKNOWN_AT_COMMIT: &[u16] = &[9001, 9002, 9003, 9005];

/// "Duplicate entry for key" (1062). An optimistic transaction checks unique keys lazily
/// (`tidb_constraint_check_in_place` is off by default): an `INSERT` of a key another
/// transaction committed meanwhile fails only at COMMIT, which rolls the transaction back
/// (`pessimistic-transaction.md`, "constraint check"). There it is a transaction abort, not
/// a failure of the run; at a statement it stays fatal, as on every other database.
const DUPLICATE_AT_COMMIT: u16 = 1062;

/// Error numbers that mean the session is gone: killed (1927), server shutdown (1053).
const CONNECTION_GONE: &[u16] = &[1927, 1053];

/// How a driver error is handled: the one place TiDB errors are classified.
pub fn classify(e: &mysql_async::Error) -> ErrorClass {
    crate::mysql_sql::classify_codes(e, RETRYABLE, CONNECTION_GONE)
}

fn db_error(context: &str, e: mysql_async::Error) -> DbError {
    db_error_with(classify, context, e)
}

/// Classifies an error of COMMIT: as [`classify`], except that the transient cluster
/// errors leave the outcome unknown and an optimistic transaction's duplicate key
/// ([`DUPLICATE_AT_COMMIT`]) aborted it (recorded as aborted, the plan retried).
pub fn classify_commit(e: &mysql_async::Error) -> ErrorClass {
    match e {
        mysql_async::Error::Server(s) if UNKNOWN_AT_COMMIT.contains(&s.code) => ErrorClass::ConnectionLost,
        mysql_async::Error::Server(s) if s.code == DUPLICATE_AT_COMMIT => ErrorClass::Retryable,
        _ => classify(e),
    }
}

/// `@@tidb_last_txn_info` / `@@tidb_last_query_info`, the fields isocert reads.
#[derive(Debug, Default, Deserialize)]
struct TsInfo {
    #[serde(default)]
    start_ts: u64,
    #[serde(default)]
    commit_ts: u64,
    #[serde(default)]
    for_update_ts: u64,
}

/// The JSON of `@@tidb_last_txn_info` or `@@tidb_last_query_info` (`sql` read it); NULL or
/// empty (no transaction yet) is all zeros.
fn parse_ts_info(sql: &str, text: Option<&str>) -> Result<TsInfo, DbError> {
    let bad =
        |m: String| DbError::unexpected(sql, format!("not TiDB's JSON ({m}): {}", text.unwrap_or_default()));
    match text {
        Some(t) if !t.is_empty() => {
            let json: serde_json::Value = serde_json::from_str(t).map_err(|e| bad(e.to_string()))?;
            // serde reads a struct from an array too ([1, 2] as start_ts and commit_ts).
            if !json.is_object() {
                return Err(bad("not an object".into()));
            }
            serde_json::from_value(json).map_err(|e| bad(e.to_string()))
        }
        _ => Ok(TsInfo::default()),
    }
}

/// One test-client connection to TiDB.
#[derive(Debug)]
pub struct TiDbSession {
    conn: Conn,
    /// The URL's `txn_mode`, if it named one.
    asked_mode: Option<TxnMode>,
    /// The mode of the current transaction.
    mode: TxnMode,
    level: IsolationLevel,
}

impl TiDbSession {
    /// Connects to `mysql_url`; each transaction begins in `mode`, or in the mode of its level
    /// ([`TxnMode::for_level`]) when `None`.
    pub(crate) async fn connect(mysql_url: &str, mode: Option<TxnMode>) -> Result<Self, DbError> {
        let opts = mysql_async::Opts::from_url(mysql_url).map_err(|e| {
            DbError::new(ErrorClass::Fatal, None, format!("reading {}", redact_url(mysql_url)), e)
        })?;
        let conn = Conn::new(opts)
            .await
            .map_err(|e| db_error(&format!("connecting to {}", redact_url(mysql_url)), e))?;
        let first = mode.unwrap_or(TxnMode::for_level(IsolationLevel::RepeatableRead));
        Ok(TiDbSession { conn, asked_mode: mode, mode: first, level: IsolationLevel::RepeatableRead })
    }

    async fn info(&mut self, variable: &str) -> Result<TsInfo, DbError> {
        let sql = format!("SELECT @@{variable}");
        let text: Option<Option<String>> =
            self.conn.query_first(&sql).await.map_err(|e| db_error(&sql, e))?;
        parse_ts_info(&sql, text.flatten().as_deref())
    }

    /// Whether `step` reads at its own timestamp rather than the transaction's start.
    fn reads_at_own_ts(&self, step: &Step) -> bool {
        self.level == IsolationLevel::ReadCommitted
            || (self.mode == TxnMode::Pessimistic
                && !matches!(step, Step::Read { .. } | Step::Select { .. } | Step::Aggregate { .. }))
    }

    /// A predicate delete without `RETURNING`: lock and read the matching keys, then delete
    /// them by key. Its `read_ts` is the locking read's.
    async fn predicate_delete(
        &mut self,
        table: &TableSpec,
        predicate: &str,
    ) -> Result<(RecordedOp, TiDbOpFacts), DbError> {
        let (t, pk) = (quote(table.name), quote(table.pk()));
        let sql = format!("SELECT {pk} FROM {t} WHERE {predicate} ORDER BY {pk} FOR UPDATE");
        let keys: Vec<i64> = self.conn.query(&sql).await.map_err(|e| db_error(&sql, e))?;
        let facts = self.op_facts(true).await?;
        if !keys.is_empty() {
            let list = keys.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
            let sql = format!("DELETE FROM {t} WHERE {pk} IN ({list})");
            self.conn.query_drop(&sql).await.map_err(|e| db_error(&sql, e))?;
        }
        Ok((RecordedOp::Delete { predicate: predicate.to_string(), keys }, facts))
    }

    async fn op_facts(&mut self, own_ts: bool) -> Result<TiDbOpFacts, DbError> {
        if !own_ts {
            return Ok(TiDbOpFacts::default());
        }
        let info = self.info("tidb_last_query_info").await?;
        Ok(TiDbOpFacts { read_ts: (info.for_update_ts > 0).then_some(info.for_update_ts) })
    }
}

impl Session for TiDbSession {
    type TxnFacts = TiDbTxnFacts;
    type OpFacts = TiDbOpFacts;

    fn server_id(&self) -> u64 {
        u64::from(self.conn.id())
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<TiDbTxnFacts, DbError> {
        let refuse =
            |message: String| DbError::new(ErrorClass::Fatal, None, "starting a transaction", message);
        let mode = self.asked_mode.unwrap_or(TxnMode::for_level(level));
        match (level, mode) {
            (IsolationLevel::Serializable, _) => {
                return Err(refuse(
                    "TiDB has no SERIALIZABLE level (it refuses it, or with tidb_skip_isolation_level_check runs \
                     snapshot isolation under that name): run --isolation repeatable-read (snapshot isolation) \
                     or read-committed"
                        .into(),
                ))
            }
            (IsolationLevel::ReadCommitted, TxnMode::Optimistic) => {
                return Err(refuse(
                    "TiDB's READ COMMITTED takes effect only in pessimistic transactions: drop txn_mode=optimistic \
                     from the URL or run --isolation repeatable-read"
                        .into(),
                ))
            }
            (other, _) if !TiDb::RUN_LEVELS.contains(&other) => return Err(unrunnable_level(other, TiDb::RUN_LEVELS)),
            _ => {}
        }
        self.level = level;
        self.mode = mode;
        let facts = TiDbTxnFacts {
            isolation: level.as_str().to_string(),
            txn_mode: self.mode.as_str().to_string(),
            ..TiDbTxnFacts::default()
        };
        let sql = format!("SET TRANSACTION ISOLATION LEVEL {}", sql_level(level)?);
        self.conn.query_drop(&sql).await.map_err(|e| db_error(&sql, e))?;
        // `BEGIN PESSIMISTIC|OPTIMISTIC` takes precedence over `tidb_txn_mode`
        // (`pessimistic-transaction.md`), whatever the server's default.
        let begin = match mode {
            TxnMode::Pessimistic => "BEGIN PESSIMISTIC",
            TxnMode::Optimistic => "BEGIN OPTIMISTIC",
        };
        self.conn.query_drop(begin).await.map_err(|e| db_error(begin, e))?;
        let sql = "SELECT @@tidb_current_ts";
        let ts: Option<u64> = self.conn.query_first(sql).await.map_err(|e| db_error(sql, e))?;
        Ok(TiDbTxnFacts { start_ts: ts.filter(|&t| t > 0), ..facts })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        _facts: &mut TiDbTxnFacts,
    ) -> Result<Vec<(RecordedOp, TiDbOpFacts)>, DbError> {
        if let Step::PredicateDelete { predicate } = step {
            return Ok(vec![self.predicate_delete(table, predicate).await?]);
        }
        let own_ts = self.reads_at_own_ts(step);
        let ops = execute_step(&mut self.conn, table, step, classify).await?;
        let facts = self.op_facts(own_ts).await?;
        Ok(ops.into_iter().map(|(op, _)| (op, facts.clone())).collect())
    }

    async fn commit(&mut self, facts: &mut TiDbTxnFacts) -> CommitOutcome {
        if let Err(e) = self.conn.query_drop("COMMIT").await {
            return CommitOutcome::failed_with(db_error_with(classify_commit, "COMMIT", e));
        }
        // The commit happened; what follows only records when. Without it, recovery takes
        // the commit timestamp from the row versions (a read-only transaction needs none).
        match self.info("tidb_last_txn_info").await {
            Ok(info) => {
                if facts.start_ts.is_some_and(|s| info.start_ts != 0 && info.start_ts != s) {
                    tracing::warn!(start_ts = info.start_ts, "tidb_last_txn_info names another transaction");
                } else {
                    facts.commit_ts = (info.commit_ts > 0).then_some(info.commit_ts);
                }
            }
            Err(e) => tracing::debug!("reading the commit timestamp: {e}"),
        }
        CommitOutcome::Committed
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        self.conn.query_drop(sql).await.map_err(|e| db_error(sql, e))
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.conn.query_drop("ROLLBACK").await.map_err(|e| db_error("ROLLBACK", e))
    }

    fn note_error(&self, facts: &mut TiDbTxnFacts, error: &DbError) {
        facts.error = Some(error.fact());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_conflicts_retry_and_the_info_variables_parse() {
        let server = |code: u16| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: String::new(),
                state: String::new(),
            })
        };
        for code in [9007, 8005, 8002, 8022, 8028, 1213, 1205, 9001, 9002, 9003, 9004, 9005] {
            assert_eq!(classify(&server(code)), ErrorClass::Retryable, "{code}");
        }
        // At COMMIT a timeout or an unavailable region may come after the primary committed.
        for code in [9001, 9002, 9003, 9005] {
            assert_eq!(classify_commit(&server(code)), ErrorClass::ConnectionLost, "{code}");
        }
        for code in [9007, 8005, 9004, 1213] {
            assert_eq!(classify_commit(&server(code)), ErrorClass::Retryable, "{code}");
        }
        // An optimistic transaction's duplicate key, found at COMMIT, aborted it; at a
        // statement it stops the run.
        assert_eq!(classify_commit(&server(1062)), ErrorClass::Retryable);
        assert_eq!(classify(&server(1062)), ErrorClass::Fatal);
        // GC life time shorter than the transaction (9006) and the rest stop the run.
        assert_eq!(classify(&server(1105)), ErrorClass::Fatal);
        assert_eq!(classify(&server(9006)), ErrorClass::Fatal);
        assert_eq!(
            classify(&mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed)),
            ErrorClass::ConnectionLost
        );
        // Shapes from TiDB's documentation of the two system variables.
        let txn: TsInfo = serde_json::from_str(
            r#"{"txn_scope":"global","start_ts":419627869211545601,"commit_ts":419627869211545602,"txn_commit_mode":"2pc","async_commit_fallback":false,"one_pc_fallback":false}"#,
        )
        .unwrap();
        assert_eq!((txn.start_ts, txn.commit_ts), (419627869211545601, 419627869211545602));
        let query: TsInfo = serde_json::from_str(
            r#"{"txn_scope":"global","start_ts":419627869211545601,"for_update_ts":419627869224652801}"#,
        )
        .unwrap();
        assert_eq!(query.for_update_ts, 419627869224652801);
    }

    /// The two variables as TiDB fills them: `@@tidb_last_txn_info` is client-go's `TxnInfo`
    /// (`txnkv/transaction/txn.go` in tikv/client-go v2; `store/tikv/txn.go` in TiDB
    /// before 5.1): `txn_scope`, `start_ts`, `commit_ts`, `txn_commit_mode`,
    /// `async_commit_fallback`, `one_pc_fallback`, and `error` (omitempty) with
    /// `commit_ts` 0 when the commit failed; older servers wrote fewer of these fields, so
    /// a shape with only the ones isocert reads must do. `@@tidb_last_query_info` (TiDB's
    /// `sessionctx/variable` `QueryInfo`): `txn_scope`, `start_ts`, `for_update_ts` (0 in
    /// optimistic transactions) and `error` (omitempty). Near misses: a timestamp as text,
    /// and not JSON at all.
    #[test]
    fn the_info_variables_across_versions_and_their_near_misses() {
        let sql = "SELECT @@tidb_last_txn_info";
        let v4 = parse_ts_info(
            sql,
            Some(r#"{"txn_scope":"global","start_ts":418897384453062657,"commit_ts":418897384453062658}"#),
        )
        .unwrap();
        assert_eq!(
            (v4.start_ts, v4.commit_ts, v4.for_update_ts),
            (418897384453062657, 418897384453062658, 0)
        );
        let failed = parse_ts_info(sql, Some(r#"{"txn_scope":"global","start_ts":418897384453062657,"commit_ts":0,"txn_commit_mode":"2pc","async_commit_fallback":false,"one_pc_fallback":false,"error":"[kv:9007]Write conflict"}"#)).unwrap();
        assert_eq!(failed.commit_ts, 0, "no commit timestamp for a failed commit");
        let optimistic = parse_ts_info(
            "SELECT @@tidb_last_query_info",
            Some(r#"{"txn_scope":"global","start_ts":418897384453062657}"#),
        )
        .unwrap();
        assert_eq!(optimistic.for_update_ts, 0);
        let erred = parse_ts_info(
            "SELECT @@tidb_last_query_info",
            Some(r#"{"txn_scope":"global","start_ts":1,"for_update_ts":3,"error":"lock wait timeout"}"#),
        )
        .unwrap();
        assert_eq!(erred.for_update_ts, 3);
        assert_eq!(parse_ts_info(sql, None).unwrap().start_ts, 0);
        assert_eq!(parse_ts_info(sql, Some("")).unwrap().commit_ts, 0);
        let e = parse_ts_info(sql, Some(r#"{"start_ts":"418897384453062657"}"#)).unwrap_err().to_string();
        assert!(e.contains("tidb_last_txn_info") && e.contains("not TiDB's JSON"), "{e}");
        assert!(parse_ts_info(sql, Some("start_ts=5")).is_err());
        let e = parse_ts_info(sql, Some("[418897384453062657,418897384453062658]")).unwrap_err().to_string();
        assert!(e.contains("not an object"), "{e}");
    }
}
