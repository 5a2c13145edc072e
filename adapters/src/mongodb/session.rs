//! The MongoDB test-client session: each attempt is a multi-document transaction with read
//! concern `snapshot` and write concern `majority` on one driver session, recording what
//! recovery needs ([`MongoTxnFacts`]): the session id and the `txnNumber` the driver sent for
//! the attempt (which name its oplog entries and change events; read from command monitoring,
//! `txn_numbers.rs`), the cluster times that bracket its snapshot, and the `operationTime`
//! after commit.

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use isocert_history::AggregateFn;
use isocert_recovery::{ClusterTime, MongoTxnFacts};
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{
    Error, ErrorKind, WriteFailure, TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT,
};
use mongodb::options::{ReadConcern, WriteConcern};
use mongodb::{ClientSession, Collection, Database as MongoDatabase};
use serde::Serialize;

use super::filter::sql_to_filter;
use super::txn_numbers::TxnNumbers;
use crate::seam::{
    CommitOutcome, Database, DbError, ErrorClass, IntOp, IntStep, IsolationLevel, RecordedOp, Session, Step,
    TableSpec,
};
use crate::MongoDb;

/// What the session records per operation: nothing beyond the transaction's facts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MongoOpFacts {}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// One test-client connection: a driver session on the database under test.
#[derive(Debug)]
pub struct MongoSession {
    db: MongoDatabase,
    session: ClientSession,
    id: u64,
    lsid: String,
    /// The attempts begun on this session: with the session's id, the writer tag of the
    /// current one. Not the driver's `txnNumber`, which continues from wherever the pooled
    /// server session left it.
    attempt: u32,
    /// The `txnNumber` each session id's commands carried, from command monitoring.
    txn_numbers: TxnNumbers,
    /// Whether the current attempt has run a statement yet.
    started: bool,
}

/// Classifies a driver error: `TransientTransactionError` retryable (the whole transaction
/// may be tried again), `UnknownTransactionCommitResult` and network or server-selection
/// failures lost (a commit in flight is unknown), the rest fatal.
pub fn classify(e: &Error) -> ErrorClass {
    if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) {
        return ErrorClass::ConnectionLost;
    }
    if e.contains_label(TRANSIENT_TRANSACTION_ERROR) {
        return ErrorClass::Retryable;
    }
    match e.kind.as_ref() {
        ErrorKind::Io(_) | ErrorKind::ServerSelection { .. } | ErrorKind::ConnectionPoolCleared { .. } => {
            ErrorClass::ConnectionLost
        }
        _ => ErrorClass::Fatal,
    }
}

/// The server's code name of a driver error, if it sent one.
fn code(e: &Error) -> Option<String> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => {
            Some(if c.code_name.is_empty() { c.code.to_string() } else { c.code_name.clone() })
        }
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            Some(w.code_name.clone().unwrap_or_else(|| w.code.to_string()))
        }
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code_name.clone()),
        _ if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) => {
            Some(UNKNOWN_TRANSACTION_COMMIT_RESULT.into())
        }
        _ if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => Some(TRANSIENT_TRANSACTION_ERROR.into()),
        _ => None,
    }
}

/// A classified [`DbError`] from a driver error.
pub(crate) fn db_error(context: &str, e: Error) -> DbError {
    DbError::new(classify(&e), code(&e), context, e)
}

fn cluster_time(ts: Option<mongodb::bson::Timestamp>) -> Option<ClusterTime> {
    ts.map(|t| ClusterTime { t: t.time, i: t.increment })
}

/// The document of a workload row: `_id` the key, a field per other column, and `writer`.
pub(crate) fn row_document(table: &TableSpec, row: &[i64], writer: i64) -> Document {
    let mut d = Document::new();
    d.insert("_id", row[0]);
    for (c, v) in table.columns.iter().zip(row).skip(1) {
        d.insert(*c, *v);
    }
    d.insert("writer", writer);
    d
}

/// The workload row of a document, in the table's column order.
pub(crate) fn document_row(table: &TableSpec, d: &Document) -> Result<Vec<i64>, DbError> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let field = if i == 0 { "_id" } else { c };
            match d.get(field) {
                Some(Bson::Int64(v)) => Ok(*v),
                Some(Bson::Int32(v)) => Ok(i64::from(*v)),
                other => Err(DbError::unexpected(
                    &format!("reading {}", table.name),
                    format!("field {field} of document {d} is {other:?}, not an integer"),
                )),
            }
        })
        .collect()
}

impl MongoSession {
    pub(crate) async fn connect(
        db: MongoDatabase,
        txn_numbers: TxnNumbers,
    ) -> Result<(Self, Document), DbError> {
        let session = db.client().start_session().await.map_err(|e| db_error("starting a session", e))?;
        let lsid_doc = session.id().clone();
        let lsid = match lsid_doc.get("id") {
            Some(Bson::Binary(b)) => base64::engine::general_purpose::STANDARD.encode(&b.bytes),
            other => return Err(DbError::unexpected("starting a session", format!("lsid.id is {other:?}"))),
        };
        let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        Ok((MongoSession { db, session, id, lsid, attempt: 0, txn_numbers, started: false }, lsid_doc))
    }

    fn collection(&self, table: &TableSpec) -> Collection<Document> {
        self.db.collection::<Document>(table.name)
    }

    /// This attempt's writer tag, unique in the run: the session's id and the attempt's
    /// number on it (recovery matches by `lsid` and `txnNumber`; the tag lets a person
    /// reading the collection tell the attempts apart).
    fn writer(&self) -> i64 {
        ((self.id << 32) | u64::from(self.attempt)) as i64
    }

    async fn find(&mut self, table: &TableSpec, filter: Document) -> Result<Vec<Vec<i64>>, DbError> {
        let context = format!("find {filter} in {}", table.name);
        let mut cursor = self
            .collection(table)
            .find(filter)
            .sort(doc! { "_id": 1 })
            .session(&mut self.session)
            .await
            .map_err(|e| db_error(&context, e))?;
        let mut rows = Vec::new();
        while let Some(d) = cursor.next(&mut self.session).await {
            rows.push(document_row(table, &d.map_err(|e| db_error(&context, e))?)?);
        }
        Ok(rows)
    }

    /// Runs `step`, returning the recorded operation(s).
    async fn run(&mut self, table: &TableSpec, step: &IntStep) -> Result<Vec<IntOp>, DbError> {
        let filter_of = |predicate: &str| -> Result<(String, Document), DbError> {
            let json = sql_to_filter(predicate, table)
                .map_err(|m| DbError::new(ErrorClass::Fatal, None, "translating a predicate", m))?;
            let doc = mongodb::bson::to_document(&json)
                .map_err(|e| DbError::new(ErrorClass::Fatal, None, "translating a predicate", e))?;
            Ok((json.to_string(), doc))
        };
        let coll = self.collection(table);
        let writer = self.writer();
        Ok(match step {
            IntStep::Read { key } => {
                let rows = self.find(table, doc! { "_id": key }).await?;
                vec![IntOp::Read { key: *key, row: rows.into_iter().next() }]
            }
            IntStep::Upsert { row } => {
                let ctx = format!("replace_one (upsert) of {} in {}", row[0], table.name);
                coll.replace_one(doc! { "_id": row[0] }, row_document(table, row, writer))
                    .upsert(true)
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                vec![IntOp::Write { key: row[0], row: Some(row.clone()) }]
            }
            IntStep::Insert { row } => {
                let ctx = format!("insert_one of {} in {}", row[0], table.name);
                coll.insert_one(row_document(table, row, writer))
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                vec![IntOp::Write { key: row[0], row: Some(row.clone()) }]
            }
            IntStep::Update { row } => {
                let ctx = format!("update_one of {} in {}", row[0], table.name);
                let mut set = row_document(table, row, writer);
                set.remove("_id");
                let r = coll
                    .update_one(doc! { "_id": row[0] }, doc! { "$set": set })
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                match r.matched_count {
                    0 => Vec::new(),
                    _ => vec![IntOp::Write { key: row[0], row: Some(row.clone()) }],
                }
            }
            IntStep::Delete { key } => {
                let ctx = format!("delete_one of {key} in {}", table.name);
                let r = coll
                    .delete_one(doc! { "_id": key })
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                match r.deleted_count {
                    0 => Vec::new(),
                    _ => vec![IntOp::Write { key: *key, row: None }],
                }
            }
            IntStep::Select { predicate } => {
                let (text, filter) = filter_of(predicate)?;
                let rows = self.find(table, filter).await?;
                vec![IntOp::Select { predicate: text, rows }]
            }
            IntStep::PredicateUpdate { predicate, set } => {
                let (text, filter) = filter_of(predicate)?;
                let mut assign = Document::new();
                for (c, v) in set {
                    assign.insert(*c, *v);
                }
                assign.insert("writer", writer);
                let ctx = format!("update_many {text} in {}", table.name);
                coll.update_many(filter, doc! { "$set": assign })
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                // The rows it wrote carry the statement's fresh unique value (the last
                // assignment), which the transaction sees as its own writes.
                let (value_col, fresh) =
                    set.last().ok_or_else(|| DbError::unexpected(&ctx, "no assignment"))?;
                let rows = self.find(table, doc! { *value_col: fresh }).await?;
                vec![IntOp::Update { predicate: text, set: set.clone(), rows }]
            }
            IntStep::PredicateDelete { predicate } => {
                let (text, filter) = filter_of(predicate)?;
                let keys: Vec<i64> =
                    self.find(table, filter.clone()).await?.into_iter().map(|r| r[0]).collect();
                let ctx = format!("delete_many {text} in {}", table.name);
                let r = coll
                    .delete_many(filter)
                    .session(&mut self.session)
                    .await
                    .map_err(|e| db_error(&ctx, e))?;
                if r.deleted_count != keys.len() as u64 {
                    return Err(DbError::unexpected(
                        &ctx,
                        format!(
                            "deleted {} documents, the same snapshot matched {}",
                            r.deleted_count,
                            keys.len()
                        ),
                    ));
                }
                vec![IntOp::Delete { predicate: text, keys }]
            }
            IntStep::Statement { .. } => return Err(DbError::unexpected(
                "a step",
                "a scenario's own SQL statement: this database's adapter records the workload's steps only",
            )),
            IntStep::Append { .. } => return Err(crate::seam::append_unsupported("MongoDB")),
            IntStep::Aggregate { predicate, function, column } => {
                let (text, filter) = filter_of(predicate)?;
                let rows = self.find(table, filter).await?;
                let at = table.columns.iter().position(|c| c == column).ok_or_else(|| {
                    DbError::new(ErrorClass::Fatal, None, "aggregating", format!("no column {column}"))
                })?;
                let values = rows.iter().map(|r| r[at]);
                let result = match function {
                    AggregateFn::Min => values.min(),
                    AggregateFn::Max => values.max(),
                    AggregateFn::Count => Some(rows.len() as i64),
                    AggregateFn::Sum => (!rows.is_empty()).then(|| values.sum()),
                };
                vec![IntOp::Aggregate { predicate: text, function: *function, column, result }]
            }
        })
    }
}

impl Session for MongoSession {
    type TxnFacts = MongoTxnFacts;
    type OpFacts = MongoOpFacts;

    fn server_id(&self) -> u64 {
        self.id
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<MongoTxnFacts, DbError> {
        if !MongoDb::RUN_LEVELS.contains(&level) {
            return Err(DbError::new(
                ErrorClass::Fatal,
                None,
                "starting a transaction",
                format!(
                    "MongoDB transactions have one level, snapshot isolation (read concern snapshot): run \
                     --isolation repeatable-read, not {}",
                    level.as_str()
                ),
            ));
        }
        // The snapshot is no older than what this session has seen.
        let read_after = cluster_time(self.session.operation_time());
        self.session
            .start_transaction()
            .read_concern(ReadConcern::snapshot())
            .write_concern(WriteConcern::majority())
            .await
            .map_err(|e| db_error("startTransaction", e))?;
        self.attempt += 1;
        self.started = false;
        Ok(MongoTxnFacts {
            isolation: level.as_str().to_string(),
            lsid: Some(self.lsid.clone()),
            // Known once a command of the transaction was sent (execute, commit).
            txn_number: None,
            read_after,
            ..MongoTxnFacts::default()
        })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        facts: &mut MongoTxnFacts,
    ) -> Result<Vec<(RecordedOp, MongoOpFacts)>, DbError> {
        let ops = self.run(table, &step.integers()?).await?;
        if !self.started {
            // The first statement fixed the snapshot: its reply's operationTime is no older.
            self.started = true;
            facts.read_before = cluster_time(self.session.operation_time());
            facts.txn_number = self.txn_numbers.last(&self.lsid);
        }
        Ok(ops.into_iter().map(|op| (RecordedOp::from(op), MongoOpFacts::default())).collect())
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        Err(DbError::new(
            ErrorClass::Fatal,
            None,
            "running SQL",
            format!("MongoDB runs no SQL ({})", isocert_history::quote_capped(sql)),
        ))
    }

    async fn commit(&mut self, facts: &mut MongoTxnFacts) -> CommitOutcome {
        let outcome = self.session.commit_transaction().await;
        // commitTransaction carries the transaction's number even when its outcome is unknown.
        facts.txn_number = self.txn_numbers.last(&self.lsid).or(facts.txn_number);
        if let Err(e) = outcome {
            return CommitOutcome::failed_with(db_error("commitTransaction", e));
        }
        facts.commit_ts = cluster_time(self.session.operation_time());
        CommitOutcome::Committed
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        // Aborting a transaction the server already ended is not an error worth stopping for.
        match self.session.abort_transaction().await {
            Ok(()) => Ok(()),
            Err(e) if classify(&e) == ErrorClass::ConnectionLost => Err(db_error("abortTransaction", e)),
            Err(e) => {
                tracing::debug!("abortTransaction: {e}");
                Ok(())
            }
        }
    }

    fn note_error(&self, facts: &mut MongoTxnFacts, error: &DbError) {
        facts.error = Some(error.fact());
    }
}
