//! One session: a connection that runs plans one transaction at a time, retries aborted
//! attempts as new transactions and records every attempt. It speaks to the database only
//! through the seam ([`isocert_adapters::Session`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isocert_adapters::{
    int_row, CommitOutcome, Database, DbError, RecordedOp, Session, Step as DbStep, TableSpec,
};
use isocert_history::{RealTime, Scalar, Status};
use isocert_random::SeededRng;
use rand::Rng;
use serde::Serialize;
use serde_json::{Map, Value as Json};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::RwLock;

use crate::plan::{items_c1_values, Planner, Step};
use crate::recorder::{RawTxn, Recorder};
use crate::schema::{Schema, ITEMS_C2_VALUES};
use crate::{WorkloadConfig, WorkloadError};

/// How often a session tries to reconnect before giving up.
const RECONNECT_ATTEMPTS: u32 = 20;

/// Aborted attempts of one plan after which its next attempts run alone.
const ATTEMPTS_BEFORE_EXCLUSIVE: u32 = 10;

/// What all sessions of a run share.
#[derive(Debug)]
pub(crate) struct Shared<D> {
    pub(crate) db: D,
    pub(crate) cfg: WorkloadConfig,
    pub(crate) planner: Planner,
    pub(crate) schema: &'static Schema,
    /// The table as the adapter sees it, with the run's layout.
    pub(crate) table: TableSpec,
    pub(crate) next_plan: AtomicU64,
    pub(crate) fresh: AtomicI64,
    pub(crate) stop: AtomicBool,
    /// Set from outside (Ctrl-C): sessions finish the attempt in flight and take no new plan.
    pub(crate) interrupt: Arc<AtomicBool>,
    pub(crate) recorder: Mutex<Recorder>,
    /// Attempts hold it shared; a plan that aborted too often takes it exclusively, and so
    /// does a live observer making a cut ([`crate::Observe`]).
    pub(crate) gate: Arc<RwLock<()>>,
    /// When the run started: transactions' real times are nanoseconds since then.
    pub(crate) epoch: Instant,
}

impl<D> Shared<D> {
    /// A value no other write has used.
    fn fresh(&self) -> i64 {
        self.fresh.fetch_add(1, Ordering::SeqCst)
    }

    /// Nanoseconds since the run started, on one clock for every session.
    fn now(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }
}

/// A new connection with session `session`'s planner settings applied (the access path
/// of [`WorkloadConfig::access_path`]; a database without them runs with its own choice,
/// which the run's notes say).
pub(crate) async fn connect_session<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    session: u32,
) -> Result<D::Session, DbError> {
    let mut conn = db.connect().await?;
    if let Ok(settings) = D::access_path_settings(cfg.access_path(session)) {
        for sql in settings {
            conn.execute_sql(&sql).await?;
        }
    }
    Ok(conn)
}

async fn reconnect<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    session: u32,
) -> Result<D::Session, WorkloadError> {
    let mut last = None;
    for attempt in 0..RECONNECT_ATTEMPTS {
        match connect_session(db, cfg, session).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt + 1))).await;
    }
    Err(last.expect("at least one attempt").into())
}

/// What to do after an attempt.
enum Next {
    /// The plan is finished (committed, or the outcome is unknown).
    Done,
    /// The attempt aborted: retry the plan as a new transaction.
    Retry,
}

/// Runs plans until there are none left; `done` gets one message per finished plan.
pub(crate) async fn run_session<D: Database>(
    shared: Arc<Shared<D>>,
    session: u32,
    done: UnboundedSender<()>,
) -> Result<(), WorkloadError> {
    let result = session_loop(&shared, session, &done).await;
    if result.is_err() {
        shared.stop.store(true, Ordering::SeqCst);
    }
    result
}

async fn session_loop<D: Database>(
    shared: &Shared<D>,
    session: u32,
    done: &UnboundedSender<()>,
) -> Result<(), WorkloadError> {
    let mut conn = connect_session(&shared.db, &shared.cfg, session).await?;
    let mut rng = isocert_random::seeded(shared.cfg.seed ^ (u64::from(session) << 32) ^ 0xfa17);
    loop {
        if shared.stop.load(Ordering::SeqCst) || shared.interrupt.load(Ordering::SeqCst) {
            return Ok(());
        }
        let i = shared.next_plan.fetch_add(1, Ordering::SeqCst);
        if i >= shared.cfg.txns {
            return Ok(());
        }
        let plan = shared.planner.plan(i);
        for attempt in 1..=shared.cfg.max_attempts {
            // A plan that keeps losing (a wide predicate update under SERIALIZABLE) would
            // starve: after a few attempts it runs alone, which cannot fail to serialize.
            let turn = if attempt > ATTEMPTS_BEFORE_EXCLUSIVE {
                (None, Some(shared.gate.write().await))
            } else {
                (Some(shared.gate.read().await), None)
            };
            let (raw, next, lost) = attempt_plan(shared, &mut conn, session, &plan, &mut rng).await?;
            if let Some(raw) = raw {
                shared.recorder.lock().expect("recorder lock").push(raw);
            }
            drop(turn);
            if lost {
                conn = reconnect(&shared.db, &shared.cfg, session).await?;
            }
            match next {
                Next::Done => break,
                Next::Retry if attempt == shared.cfg.max_attempts => {
                    tracing::warn!(plan = i, "giving up a plan after {attempt} aborted attempts");
                }
                Next::Retry => {
                    let pause = rng.random_range(0..=u64::from(attempt.min(20)));
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
            }
        }
        let _ = done.send(());
    }
}

/// Facts as a `meta` object (the seam requires facts that serialise to one).
fn to_meta(facts: &impl Serialize) -> Result<Map<String, Json>, WorkloadError> {
    match serde_json::to_value(facts) {
        Ok(Json::Object(map)) => Ok(map),
        Ok(other) => Err(WorkloadError::Session {
            session: 0,
            message: format!("adapter facts are not an object: {other}"),
        }),
        Err(e) => {
            Err(WorkloadError::Session { session: 0, message: format!("serialising adapter facts: {e}") })
        }
    }
}

/// The middle columns a read-modify-write installs: derived from the row read (`c2`
/// advanced by one), or from the key when the row was absent.
fn modified_columns(s: &Schema, key: i64, row: Option<&[i64]>, keys: u32) -> Vec<i64> {
    if s.is_kv() {
        return Vec::new();
    }
    match row {
        Some(r) => vec![r[1], (r[2] + 1) % ITEMS_C2_VALUES],
        None => vec![key % items_c1_values(keys), 0],
    }
}

/// A workload row read back: every column an integer.
fn integers(row: &[Scalar]) -> Result<Vec<i64>, DbError> {
    row.iter()
        .map(|v| match v {
            Scalar::Int(i) => Ok(*i),
            other => {
                Err(DbError::unexpected("a read-modify-write's read", format!("{other} is not an integer")))
            }
        })
        .collect()
}

/// The operations and their facts recorded so far in one attempt.
type Ops<F> = Vec<(RecordedOp, F)>;

/// Runs one planned step through the seam: fresh values are drawn here, and a
/// read-modify-write is a read followed by an upsert of a value derived from it. A step
/// that fails records none of its operations (its attempt is recorded as aborted).
async fn run_step<D: Database>(
    shared: &Shared<D>,
    conn: &mut D::Session,
    step: &Step,
    facts: &mut <D::Session as Session>::TxnFacts,
    ops: &mut Ops<<D::Session as Session>::OpFacts>,
) -> Result<(), DbError> {
    let s = shared.schema;
    let table = shared.table;
    let db_step = match step {
        Step::Read { key } => DbStep::Read { key: *key },
        Step::ReadModifyWrite { key } => {
            let read = conn.execute(&table, &DbStep::Read { key: *key }, facts).await?;
            let row = match read.first() {
                Some((RecordedOp::Read { row, .. }, _)) => row.as_ref().map(|r| integers(r)).transpose()?,
                _ => return Err(DbError::unexpected("a read-modify-write's read", "no read recorded")),
            };
            let middle = modified_columns(s, *key, row.as_deref(), shared.cfg.keys);
            let upsert = DbStep::Upsert { row: int_row(s.row(*key, &middle, shared.fresh())) };
            let written = conn.execute(&table, &upsert, facts).await?;
            // Recorded only once the whole step succeeded, as every step's operations.
            ops.extend(read);
            ops.extend(written);
            return Ok(());
        }
        Step::Upsert { key, columns } => {
            DbStep::Upsert { row: int_row(s.row(*key, columns, shared.fresh())) }
        }
        Step::Update { key, columns } => {
            DbStep::Update { row: int_row(s.row(*key, columns, shared.fresh())) }
        }
        Step::Delete { key } => DbStep::Delete { key: *key },
        Step::Select { predicate } => DbStep::Select { predicate: predicate.clone() },
        Step::Aggregate { predicate, function, column } => {
            DbStep::Aggregate { predicate: predicate.clone(), function: *function, column }
        }
        Step::PredicateUpdate { predicate, column, constant } => {
            let set = vec![
                (*column, Scalar::Int(*constant)),
                (*s.columns.last().expect("columns"), Scalar::Int(shared.fresh())),
            ];
            DbStep::PredicateUpdate { predicate: predicate.clone(), set }
        }
        Step::PredicateDelete { predicate } => DbStep::PredicateDelete { predicate: predicate.clone() },
        Step::Append { key } => DbStep::Append { key: *key, element: shared.fresh() },
        Step::Increment { key, add } => {
            increment(s, &format!("{} = {key}", s.columns[0]), *add, shared.fresh())
        }
        Step::PredicateIncrement { predicate, add } => increment(s, predicate, *add, shared.fresh()),
        Step::UpsertIncrement { key, add } => upsert_increment(s, *key, *add, shared.fresh()),
        Step::MergeIncrement { key, add } => merge_increment(s, *key, *add, shared.fresh()),
        Step::ClientAbort => return Ok(()),
    };
    ops.extend(conn.execute(&table, &db_step, facts).await?);
    Ok(())
}

/// `UPDATE table SET n = n + add, v = fresh WHERE predicate` (the counter workload: its
/// second column is the counter, its last the unique value), recorded as an expression update.
fn increment(s: &crate::schema::Schema, predicate: &str, add: i64, fresh: i64) -> DbStep {
    let (counter, unique) = (s.columns[1], *s.columns.last().expect("columns"));
    let sql =
        format!("UPDATE {} SET {counter} = {counter} + {add}, {unique} = {fresh} WHERE {predicate}", s.table);
    let set = vec![
        (counter, isocert_adapters::SetValue::Expr(format!("{counter} + {add}"))),
        (unique, isocert_adapters::SetValue::Const(Scalar::Int(fresh))),
    ];
    DbStep::Statement {
        sql,
        write: isocert_adapters::StatementWrite::ExprUpdate {
            predicate: predicate.to_string(),
            set,
            excluded: None,
        },
    }
}

/// `INSERT INTO table (id, n, v) VALUES (key, add, fresh) ON CONFLICT (id) DO UPDATE SET
/// n = table.n + EXCLUDED.n, v = EXCLUDED.v` (the counter workload, whose rows always exist:
/// the statement updates), recorded as an expression update with the proposed row.
fn upsert_increment(s: &crate::schema::Schema, key: i64, add: i64, fresh: i64) -> DbStep {
    let (pk, counter, unique, t) = (s.columns[0], s.columns[1], *s.columns.last().expect("columns"), s.table);
    let sql = format!(
        "INSERT INTO {t} ({pk}, {counter}, {unique}) VALUES ({key}, {add}, {fresh}) ON CONFLICT ({pk}) \
         DO UPDATE SET {counter} = {t}.{counter} + EXCLUDED.{counter}, {unique} = EXCLUDED.{unique}"
    );
    let set = vec![
        (counter, isocert_adapters::SetValue::Expr(format!("{t}.{counter} + excluded.{counter}"))),
        (unique, isocert_adapters::SetValue::Expr(format!("excluded.{unique}"))),
    ];
    let excluded = Some(vec![Scalar::Int(key), Scalar::Int(add), Scalar::Int(fresh)]);
    DbStep::Statement {
        sql,
        write: isocert_adapters::StatementWrite::ExprUpdate {
            predicate: format!("{pk} = {key}"),
            set,
            excluded,
        },
    }
}

/// `MERGE INTO table t USING (VALUES (key, add, fresh)) AS s(sid, sn, sv) ON t.id = s.sid
/// WHEN MATCHED THEN UPDATE SET n = t.n + s.sn, v = s.sv WHEN NOT MATCHED THEN INSERT ...`
/// (the counter workload, whose rows always exist: the statement updates), recorded as the
/// upsert is, with the source row as the proposed row (`excluded`). The source's columns
/// have names of their own so that the target's (`id, n, v`) stay unambiguous.
fn merge_increment(s: &crate::schema::Schema, key: i64, add: i64, fresh: i64) -> DbStep {
    let (pk, counter, unique, t) = (s.columns[0], s.columns[1], *s.columns.last().expect("columns"), s.table);
    let sql = format!(
        "MERGE INTO {t} t USING (VALUES ({key}, {add}, {fresh})) AS s(sid, sn, sv) ON t.{pk} = s.sid \
         WHEN MATCHED THEN UPDATE SET {counter} = t.{counter} + s.sn, {unique} = s.sv \
         WHEN NOT MATCHED THEN INSERT ({pk}, {counter}, {unique}) VALUES (s.sid, s.sn, s.sv)"
    );
    let set = vec![
        (counter, isocert_adapters::SetValue::Expr(format!("{t}.{counter} + excluded.{counter}"))),
        (unique, isocert_adapters::SetValue::Expr(format!("excluded.{unique}"))),
    ];
    let excluded = Some(vec![Scalar::Int(key), Scalar::Int(add), Scalar::Int(fresh)]);
    DbStep::Statement {
        sql,
        write: isocert_adapters::StatementWrite::ExprUpdate {
            predicate: format!("{pk} = {key}"),
            set,
            excluded,
        },
    }
}

/// Runs one attempt of `plan` as one transaction. Returns the record (none if the
/// transaction could not even begin), what to do next, and whether the connection was
/// lost. Errors that are neither retryable nor a lost connection end the run (after the
/// attempt is recorded as aborted).
async fn attempt_plan<D: Database>(
    shared: &Shared<D>,
    conn: &mut D::Session,
    session: u32,
    plan: &[Step],
    rng: &mut SeededRng,
) -> Result<(Option<RawTxn>, Next, bool), WorkloadError> {
    let invoked_at = shared.now();
    let (mut raw, next, lost) = attempt_body(shared, conn, session, plan, rng).await?;
    if let Some(raw) = &mut raw {
        // An unknown outcome may take effect at any time after the invocation.
        let completed_at = if raw.status == Status::Unknown { i64::MAX } else { shared.now() };
        raw.real_time = Some(RealTime { invoked_at, completed_at });
    }
    Ok((raw, next, lost))
}

/// [`attempt_plan`] without the timing.
async fn attempt_body<D: Database>(
    shared: &Shared<D>,
    conn: &mut D::Session,
    session: u32,
    plan: &[Step],
    rng: &mut SeededRng,
) -> Result<(Option<RawTxn>, Next, bool), WorkloadError> {
    let mut facts = match conn.begin(shared.cfg.isolation).await {
        Ok(f) => f,
        Err(e) if e.is_connection_lost() => return Ok((None, Next::Retry, true)),
        Err(e) if e.is_retryable() => return Ok((None, Next::Retry, false)),
        Err(e) => return Err(e.into()),
    };
    let mut ops = Vec::with_capacity(plan.len());
    let mut body = Ok(());
    for step in plan {
        body = run_step(shared, conn, step, &mut facts, &mut ops).await;
        if body.is_err() {
            break;
        }
    }
    if let Err(e) = body {
        return abort(conn, facts, ops, session, e).await;
    }
    if plan.last() == Some(&Step::ClientAbort) {
        // The client's own choice: recorded as aborted, and the plan is done.
        let lost = conn.rollback().await.is_err();
        return Ok((Some(raw_txn(session, Status::Aborted, facts, ops)?), Next::Done, lost));
    }
    if shared.cfg.disconnect_rate > 0.0 && rng.random_bool(shared.cfg.disconnect_rate) {
        shared.db.kill_session(conn.server_id()).await?;
    }
    match conn.commit(&mut facts).await {
        CommitOutcome::Committed => {
            Ok((Some(raw_txn(session, Status::Committed, facts, ops)?), Next::Done, false))
        }
        CommitOutcome::Unknown(e) => {
            conn.note_error(&mut facts, &e);
            Ok((Some(raw_txn(session, Status::Unknown, facts, ops)?), Next::Done, true))
        }
        CommitOutcome::AbortedRetryable(e) | CommitOutcome::Failed(e) => {
            abort(conn, facts, ops, session, e).await
        }
    }
}

/// A transaction attempt as the recorder takes it: its facts and its operations' facts
/// serialised into `meta` objects.
///
/// # Errors
/// Facts that do not serialise to a JSON object.
pub fn raw_txn<T: Serialize, O: Serialize>(
    session: u32,
    status: Status,
    facts: T,
    ops: Vec<(RecordedOp, O)>,
) -> Result<RawTxn, WorkloadError> {
    let ops = ops.into_iter().map(|(op, f)| Ok((op, to_meta(&f)?))).collect::<Result<_, WorkloadError>>()?;
    Ok(RawTxn { session, status, ops, meta: to_meta(&facts)?, real_time: None })
}

/// Records a failed attempt as aborted and decides whether to retry; an error that is
/// neither retryable nor a lost connection ends the run.
async fn abort<S: Session>(
    conn: &mut S,
    mut facts: S::TxnFacts,
    ops: Vec<(RecordedOp, S::OpFacts)>,
    session: u32,
    e: DbError,
) -> Result<(Option<RawTxn>, Next, bool), WorkloadError> {
    conn.note_error(&mut facts, &e);
    let raw = raw_txn(session, Status::Aborted, facts, ops)?;
    if e.is_connection_lost() {
        return Ok((Some(raw), Next::Retry, true));
    }
    let rollback = conn.rollback().await;
    if e.is_retryable() {
        return Ok((Some(raw), Next::Retry, rollback.is_err()));
    }
    drop(raw);
    Err(e.into())
}
