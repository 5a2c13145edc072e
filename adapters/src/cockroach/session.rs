//! The CockroachDB test-client session over pgwire: each [`Step`] in CockroachDB's SQL
//! (PostgreSQL's dialect for these statements; `UPSERT` for the upsert, no `xmin`) and the
//! facts recorded with it (docs/COCKROACHDB.md):
//!
//! - per transaction, the level asked for and the one CockroachDB runs
//!   (`SHOW transaction_isolation`: a level the cluster has not enabled runs as
//!   SERIALIZABLE), and at SERIALIZABLE `cluster_logical_timestamp()` sent with COMMIT in
//!   one simple query: it fixes the commit timestamp, so a later push makes COMMIT fail
//!   with 40001 and the attempt is retried (counted as an aborted attempt);
//! - per read, `crdb_internal_mvcc_timestamp` of each row returned: the version it saw.
//!
//! Errors: 40001 (`restart transaction`: `ReadWithinUncertaintyIntervalError`,
//! `TransactionRetryWithProtoRefreshError`, `WriteTooOldError`, ...) is retryable; 40003
//! (`statement completion unknown`) and `result is ambiguous` leave the outcome unknown;
//! no SQLSTATE, 08* and 57P* mean the connection is gone.

use isocert_history::AggregateFn;
use isocert_recovery::{CrdbOpFacts, CrdbTxnFacts};
use tokio_postgres::{Client, SimpleQueryRow};

use super::tls;
use super::url::CockroachUrl;
use crate::postgres::{int, literal_row, one_row, query_with, table_row, text};
use crate::seam::{
    sql_level, unrunnable_level, CommitOutcome, Database, DbError, ErrorClass, IntOp, IntStep,
    IsolationLevel, RecordedOp, Session, Step, TableSpec,
};
use crate::CockroachDb;

/// The one place CockroachDB errors are classified (see the module doc).
pub fn classify(e: &tokio_postgres::Error) -> ErrorClass {
    let ambiguous = e.as_db_error().is_some_and(|d| d.message().contains("result is ambiguous"));
    match e.code().map(|c| c.code()) {
        None => ErrorClass::ConnectionLost,
        Some("40003") => ErrorClass::ConnectionLost,
        _ if ambiguous => ErrorClass::ConnectionLost,
        Some("40001" | "40P01") => ErrorClass::Retryable,
        Some(c) if c.starts_with("08") || c.starts_with("57P") => ErrorClass::ConnectionLost,
        Some(_) => ErrorClass::Fatal,
    }
}

/// `"name"`: an identifier quoted for CockroachDB (`key` and `value` are keywords).
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// One test-client connection to CockroachDB.
#[derive(Debug)]
pub struct CrdbSession {
    client: Client,
    /// The low 64 bits of `SHOW session_id` (what `kill_session` matches).
    id: u64,
    isolation: IsolationLevel,
}

impl CrdbSession {
    /// Connects and reads the session id.
    pub(crate) async fn connect(url: &CockroachUrl) -> Result<Self, DbError> {
        let client = tls::connect(url, classify).await?;
        let sql = "SHOW session_id";
        let rows = query_with(&client, sql, classify).await?;
        let hex = rows.first().and_then(|r| r.get(0)).unwrap_or_default();
        let id = session_low_bits(hex).ok_or_else(|| DbError::unexpected(sql, format!("{hex:?}")))?;
        Ok(CrdbSession { client, id, isolation: IsolationLevel::Serializable })
    }

    async fn query(&self, sql: &str) -> Result<Vec<SimpleQueryRow>, DbError> {
        query_with(&self.client, sql, classify).await
    }
}

/// The low 64 bits of a session id (32 hex digits).
pub(crate) fn session_low_bits(hex: &str) -> Option<u64> {
    let hex = hex.trim();
    (hex.len() >= 16 && hex.is_ascii())
        .then(|| u64::from_str_radix(&hex[hex.len() - 16..], 16).ok())
        .flatten()
}

fn mvcc(sql: &str, row: &SimpleQueryRow) -> Result<String, DbError> {
    text(sql, row, 0)?
        .map(str::to_string)
        .ok_or_else(|| DbError::unexpected(sql, "a row without crdb_internal_mvcc_timestamp"))
}

impl Session for CrdbSession {
    type TxnFacts = CrdbTxnFacts;
    type OpFacts = CrdbOpFacts;

    fn server_id(&self) -> u64 {
        self.id
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<CrdbTxnFacts, DbError> {
        if !CockroachDb::RUN_LEVELS.contains(&level) {
            return Err(unrunnable_level(level, CockroachDb::RUN_LEVELS));
        }
        let sql =
            format!("BEGIN TRANSACTION ISOLATION LEVEL {}; SHOW transaction_isolation", sql_level(level)?);
        self.isolation = level;
        let rows = self.query(&sql).await?;
        let effective = rows.first().and_then(|r| r.get(0)).map(|s| s.to_ascii_lowercase().replace(' ', "-"));
        if effective.as_deref().is_some_and(|e| e != level.as_str()) {
            tracing::debug!("CockroachDB runs {level} as {effective:?} (the cluster has not enabled it)");
        }
        Ok(CrdbTxnFacts {
            isolation: level.as_str().to_string(),
            effective_isolation: effective,
            ..CrdbTxnFacts::default()
        })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        _facts: &mut CrdbTxnFacts,
    ) -> Result<Vec<(RecordedOp, CrdbOpFacts)>, DbError> {
        let t = ident(table.name);
        let pk = ident(table.pk());
        let cols: Vec<String> = table.columns.iter().map(|c| ident(c)).collect();
        let cols = cols.join(", ");
        let none = CrdbOpFacts::default();
        let n = table.columns.len();
        let step = &step.integers()?;
        let ops: Vec<(IntOp, CrdbOpFacts)> = match step {
            IntStep::Read { key } => {
                let sql = format!(
                    "SELECT crdb_internal_mvcc_timestamp::STRING, {cols} FROM {t} WHERE {pk} = {key}"
                );
                let rows = self.query(&sql).await?;
                match rows.first() {
                    None => vec![(IntOp::Read { key: *key, row: None }, none)],
                    Some(r) => {
                        let row = table_row(&sql, r, 1, n)?;
                        let facts = CrdbOpFacts { mvcc_ts: Some(mvcc(&sql, r)?), ..none };
                        vec![(IntOp::Read { key: *key, row }, facts)]
                    }
                }
            }
            IntStep::Upsert { row } => {
                self.query(&format!("UPSERT INTO {t} ({cols}) VALUES ({})", literal_row(row))).await?;
                vec![(IntOp::Write { key: row[0], row: Some(row.clone()) }, none)]
            }
            IntStep::Insert { row } => {
                self.query(&format!("INSERT INTO {t} ({cols}) VALUES ({})", literal_row(row))).await?;
                vec![(IntOp::Write { key: row[0], row: Some(row.clone()) }, none)]
            }
            IntStep::Update { row } => {
                let set: Vec<String> = table.columns[1..]
                    .iter()
                    .zip(&row[1..])
                    .map(|(c, v)| format!("{} = {v}", ident(c)))
                    .collect();
                let sql = format!("UPDATE {t} SET {} WHERE {pk} = {} RETURNING {pk}", set.join(", "), row[0]);
                if self.query(&sql).await?.is_empty() {
                    Vec::new()
                } else {
                    vec![(IntOp::Write { key: row[0], row: Some(row.clone()) }, none)]
                }
            }
            IntStep::Delete { key } => {
                let sql = format!("DELETE FROM {t} WHERE {pk} = {key} RETURNING {pk}");
                if self.query(&sql).await?.is_empty() {
                    Vec::new()
                } else {
                    vec![(IntOp::Write { key: *key, row: None }, none)]
                }
            }
            IntStep::Select { predicate } => {
                let sql = format!(
                    "SELECT crdb_internal_mvcc_timestamp::STRING, {cols} FROM {t} WHERE {predicate} ORDER BY {pk}"
                );
                let result = self.query(&sql).await?;
                let mut rows = Vec::with_capacity(result.len());
                let mut stamps = Vec::with_capacity(result.len());
                for r in &result {
                    rows.push(
                        table_row(&sql, r, 1, n)?.ok_or_else(|| DbError::unexpected(&sql, "a NULL key"))?,
                    );
                    stamps.push(mvcc(&sql, r)?);
                }
                let facts = CrdbOpFacts { mvcc_ts_rows: Some(stamps), ..none };
                vec![(IntOp::Select { predicate: predicate.clone(), rows }, facts)]
            }
            IntStep::Statement { .. } => return Err(DbError::unexpected(
                "a step",
                "a scenario's own SQL statement: this database's adapter records the workload's steps only",
            )),
            IntStep::Aggregate { predicate, function, column } => {
                // sum() of an INT is a DECIMAL in CockroachDB: cast back so the text is an integer.
                let call = match function {
                    AggregateFn::Sum => format!("sum({})::INT8", ident(column)),
                    f => format!("{}({})", f.as_str(), ident(column)),
                };
                let sql = format!("SELECT {call} FROM {t} WHERE {predicate}");
                let r = one_row(&sql, self.query(&sql).await?)?;
                let result = int(&sql, &r, 0)?;
                let op =
                    IntOp::Aggregate { predicate: predicate.clone(), function: *function, column, result };
                vec![(op, none)]
            }
            IntStep::PredicateUpdate { predicate, set } => {
                let assignments: Vec<String> =
                    set.iter().map(|(c, v)| format!("{} = {v}", ident(c))).collect();
                let sql =
                    format!("UPDATE {t} SET {} WHERE {predicate} RETURNING {cols}", assignments.join(", "));
                let result = self.query(&sql).await?;
                let mut rows = result
                    .iter()
                    .map(|r| table_row(&sql, r, 0, n)?.ok_or_else(|| DbError::unexpected(&sql, "a NULL key")))
                    .collect::<Result<Vec<_>, _>>()?;
                rows.sort_by_key(|r| r[0]);
                vec![(IntOp::Update { predicate: predicate.clone(), set: set.clone(), rows }, none)]
            }
            IntStep::Append { .. } => return Err(crate::seam::append_unsupported("CockroachDB")),
            IntStep::PredicateDelete { predicate } => {
                let sql = format!("DELETE FROM {t} WHERE {predicate} RETURNING {pk}");
                let result = self.query(&sql).await?;
                let mut keys = result
                    .iter()
                    .map(|r| int(&sql, r, 0)?.ok_or_else(|| DbError::unexpected(&sql, "a NULL key")))
                    .collect::<Result<Vec<_>, _>>()?;
                keys.sort_unstable();
                vec![(IntOp::Delete { predicate: predicate.clone(), keys }, none)]
            }
        };
        Ok(ops.into_iter().map(|(op, facts)| (RecordedOp::from(op), facts)).collect())
    }

    async fn commit(&mut self, facts: &mut CrdbTxnFacts) -> CommitOutcome {
        // cluster_logical_timestamp() is refused below SERIALIZABLE (the commit timestamp
        // is not fixed there); recovery then takes the commit timestamp from the changefeed.
        let serializable = facts.effective_isolation.as_deref().is_none_or(|e| e == "serializable");
        if !serializable {
            return match self.query("COMMIT").await {
                Ok(_) => CommitOutcome::Committed,
                Err(e) => CommitOutcome::failed_with(e),
            };
        }
        // One simple query: the server skips COMMIT when the SELECT fails.
        let sql = "SELECT cluster_logical_timestamp()::STRING; COMMIT";
        match self.query(sql).await {
            Ok(rows) => {
                match rows.first().and_then(|r| r.get(0)) {
                    Some(ts) => match isocert_recovery::parse_hlc(ts) {
                        Ok(_) => facts.commit_ts = Some(ts.to_string()),
                        Err(e) => return CommitOutcome::Failed(DbError::unexpected(sql, e)),
                    },
                    None => return CommitOutcome::Failed(DbError::unexpected(sql, "no timestamp")),
                }
                CommitOutcome::Committed
            }
            Err(e) => CommitOutcome::failed_with(e),
        }
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        self.query(sql).await.map(|_| ())
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.query("ROLLBACK").await.map(|_| ())
    }

    fn note_error(&self, facts: &mut CrdbTxnFacts, error: &DbError) {
        facts.error = Some(error.fact());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_keep_their_low_bits_and_identifiers_are_quoted() {
        // `SHOW session_id` answers 32 hex digits (CockroachDB's ClusterWideID).
        assert_eq!(session_low_bits("17a6d5f4c6b2e0f80000000000000001"), Some(1));
        assert_eq!(session_low_bits("17a6d5f4c6b2e0f8ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(session_low_bits("xyz"), None);
        assert_eq!(ident("key"), "\"key\"");
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
    }
}
