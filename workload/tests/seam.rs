//! The executor through the seam, without a database: an in-memory adapter whose commits
//! fail on a schedule shows that retryable aborts are retried as new transactions, lost
//! commits are recorded as `unknown` and the plan is not run again, each
//! adapter's typed facts land in `meta`, and a fatal error ends the run. It is also the
//! smallest example of implementing the seam (docs/ADAPTERS.md).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use isocert_adapters::seam::{RawLog, Recovered, RecoveryError, RowMatcher};
use isocert_adapters::{
    int_row, AdapterError, CaptureOptions, ChangeCapture, CommitOutcome, Database, DatabaseKind, DbError,
    ErrorClass, IntStep, IsolationLevel, RecordedOp, Session, Step, TableSpec, ThrowawayServer,
};
use isocert_history::{History, Scalar, Status};
use isocert_workload::{run_on, setup_on, WorkloadConfig, WorkloadKind};
use serde::Serialize;

/// Commit number n (counted over all sessions, from 1) fails retryably when n % 3 == 0 and
/// is lost (but applied) when n % 7 == 0; the read-modify-write upsert after `fatal_after`
/// statements fails fatally.
#[derive(Clone, Debug)]
struct Memory {
    rows: Arc<Mutex<BTreeMap<i64, Vec<i64>>>>,
    commits: Arc<AtomicU64>,
    statements: Arc<AtomicU64>,
    fatal_after: u64,
}

#[derive(Debug, Default, Serialize)]
struct MemTxnFacts {
    attempt: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct MemOpFacts {
    statement: u64,
}

#[derive(Debug)]
struct MemSession {
    db: Memory,
    /// Writes of the open transaction, applied at commit.
    pending: Vec<(i64, Option<Vec<i64>>)>,
}

fn refused(message: &str) -> DbError {
    DbError::new(ErrorClass::Fatal, Some("0A000".into()), message, message.to_string())
}

impl Session for MemSession {
    type TxnFacts = MemTxnFacts;
    type OpFacts = MemOpFacts;

    fn server_id(&self) -> u64 {
        1
    }

    async fn begin(&mut self, _level: IsolationLevel) -> Result<MemTxnFacts, DbError> {
        self.pending.clear();
        Ok(MemTxnFacts { attempt: self.db.commits.load(Ordering::SeqCst), error: None })
    }

    async fn execute(
        &mut self,
        _table: &TableSpec,
        step: &Step,
        _facts: &mut MemTxnFacts,
    ) -> Result<Vec<(RecordedOp, MemOpFacts)>, DbError> {
        let statement = self.db.statements.fetch_add(1, Ordering::SeqCst) + 1;
        let facts = MemOpFacts { statement };
        let rows = self.db.rows.lock().unwrap();
        Ok(match step {
            Step::Read { key } => {
                let own = self.pending.iter().rev().find(|(k, _)| k == key).map(|(_, r)| r.clone());
                let row = own.unwrap_or_else(|| rows.get(key).cloned());
                vec![(RecordedOp::Read { key: *key, row: row.map(int_row) }, facts)]
            }
            Step::Upsert { row } | Step::Insert { row } | Step::Update { row } => {
                if statement > self.db.fatal_after {
                    return Err(refused("disk full"));
                }
                let ints: Vec<i64> = match step.integers()? {
                    IntStep::Upsert { row } | IntStep::Insert { row } | IntStep::Update { row } => row,
                    _ => unreachable!("a write step"),
                };
                self.pending.push((ints[0], Some(ints.clone())));
                vec![(RecordedOp::Write { key: ints[0], row: Some(row.clone()) }, facts)]
            }
            Step::Delete { key } => {
                self.pending.push((*key, None));
                vec![(RecordedOp::Write { key: *key, row: None }, facts)]
            }
            _ => return Err(refused("predicates are not supported by the in-memory adapter")),
        })
    }

    async fn commit(&mut self, _facts: &mut MemTxnFacts) -> CommitOutcome {
        let n = self.db.commits.fetch_add(1, Ordering::SeqCst) + 1;
        if n.is_multiple_of(3) {
            return CommitOutcome::AbortedRetryable(DbError::new(
                ErrorClass::Retryable,
                Some("40001".into()),
                "COMMIT",
                "conflict",
            ));
        }
        let mut rows = self.db.rows.lock().unwrap();
        for (key, row) in self.pending.drain(..) {
            match row {
                Some(r) => rows.insert(key, r),
                None => rows.remove(&key),
            };
        }
        if n.is_multiple_of(7) {
            return CommitOutcome::Unknown(DbError::new(
                ErrorClass::ConnectionLost,
                None,
                "COMMIT",
                "connection reset",
            ));
        }
        CommitOutcome::Committed
    }

    async fn execute_sql(&mut self, _sql: &str) -> Result<(), DbError> {
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.pending.clear();
        Ok(())
    }

    fn note_error(&self, facts: &mut MemTxnFacts, error: &DbError) {
        facts.error = Some(error.code().unwrap_or("lost").to_string());
    }
}

#[derive(Debug)]
struct NoCapture;

impl ChangeCapture for NoCapture {
    async fn wait_started(&mut self, _timeout: Duration) -> Result<(), AdapterError> {
        Ok(())
    }
    fn recorded(&self) -> usize {
        0
    }
    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        Ok(RawLog::new())
    }
}

#[derive(Debug)]
struct NoServer;

impl ThrowawayServer for NoServer {
    fn url(&self) -> String {
        "memory://".into()
    }
    async fn shutdown(self) -> Result<(), AdapterError> {
        Ok(())
    }
}

impl Database for Memory {
    type Session = MemSession;
    type Capture = NoCapture;
    type Server = NoServer;
    const KIND: DatabaseKind = DatabaseKind::Postgres;

    fn from_url(_url: &str) -> Result<Self, AdapterError> {
        Ok(Memory::new(u64::MAX))
    }
    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, NoServer), AdapterError> {
        Ok((Memory::new(u64::MAX), NoServer))
    }
    async fn connect(&self) -> Result<MemSession, DbError> {
        Ok(MemSession { db: self.clone(), pending: Vec::new() })
    }
    async fn prepare_table(&self, _table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        *self.rows.lock().unwrap() = rows.iter().map(|r| (r[0], r.clone())).collect();
        Ok(())
    }
    async fn table_exists(&self, _table: &TableSpec) -> Result<bool, DbError> {
        Ok(false)
    }
    async fn drop_table(&self, _table: &TableSpec) -> Result<(), DbError> {
        Ok(())
    }
    async fn read_table(&self, _table: &TableSpec) -> Result<Vec<Vec<Scalar>>, DbError> {
        Ok(self.rows.lock().unwrap().values().cloned().map(int_row).collect())
    }
    async fn kill_session(&self, _server_id: u64) -> Result<(), DbError> {
        Ok(())
    }
    async fn start_capture(
        &self,
        _table: &TableSpec,
        _options: &CaptureOptions,
    ) -> Result<NoCapture, AdapterError> {
        Ok(NoCapture)
    }
    fn recover(
        _h: &mut History,
        _log: &RawLog,
        _matcher: RowMatcher<'_>,
    ) -> Result<Recovered, RecoveryError> {
        Ok(Recovered::default())
    }
}

impl Memory {
    fn new(fatal_after: u64) -> Self {
        Memory { rows: Arc::default(), commits: Arc::default(), statements: Arc::default(), fatal_after }
    }
}

fn config(txns: u64) -> WorkloadConfig {
    let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, IsolationLevel::Serializable);
    cfg.txns = txns;
    cfg.sessions = 1;
    cfg
}

#[tokio::test]
async fn retries_unknown_commits_and_typed_facts_go_through_the_seam() {
    let db = Memory::new(u64::MAX);
    let cfg = config(60);
    setup_on(&db, &cfg).await.unwrap();
    let h = run_on(&db, &cfg, |_| {}).await.unwrap();
    let count = |s: Status| h.txns.iter().filter(|t| t.status == s).count();
    let (committed, aborted, unknown) =
        (count(Status::Committed), count(Status::Aborted), count(Status::Unknown));
    // Every plan finishes once (committed or unknown); every third commit was retried.
    assert_eq!(committed + unknown, 60);
    assert_eq!(h.txns.len() as u64, db.commits.load(Ordering::SeqCst));
    assert_eq!(aborted, h.txns.len() / 3, "commits 3, 6, 9, ... abort");
    assert!(unknown > 0 && unknown == h.txns.len() / 7 - h.txns.len() / 21, "{unknown} unknown");
    for (i, t) in h.txns.iter().enumerate() {
        let meta = t.meta().expect("facts are recorded");
        assert_eq!(meta["attempt"], i as u64, "the adapter's TxnFacts are the meta: {meta}");
        let error = meta.get("error").and_then(|e| e.as_str());
        match t.status {
            Status::Aborted => assert_eq!(error, Some("40001")),
            Status::Unknown => assert_eq!(error, Some("lost")),
            _ => assert_eq!(error, None),
        }
        for (op, m) in t.op_metas() {
            assert!(m["statement"].as_u64().unwrap() > 0, "op {op}: the OpFacts are its meta");
        }
        assert_eq!(t.op_metas().len(), t.ops.len(), "every operation carries its facts");
    }
}

#[tokio::test]
async fn a_fatal_error_ends_the_run_with_the_adapters_classification() {
    let db = Memory::new(12);
    let cfg = config(1000);
    setup_on(&db, &cfg).await.unwrap();
    let err = run_on(&db, &cfg, |_| {}).await.unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    assert!(!err.is_retryable() && !err.is_connection_lost());
    assert_eq!(err.sqlstate(), Some("0A000"));
}
