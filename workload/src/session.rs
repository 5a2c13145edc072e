//! One session: a connection that runs plans one transaction at a time, retries aborted
//! attempts as new transactions and records every attempt.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use isocert_history::Status;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value as Json};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::RwLock;
use tokio_postgres::{Client, NoTls};

use crate::plan::{Planner, Step};
use crate::recorder::{RawTxn, Recorder};
use crate::schema::Schema;
use crate::statements::{query, run_step, RawOp, StepContext};
use crate::{WorkloadConfig, WorkloadError};

/// How often a session tries to reconnect before giving up.
const RECONNECT_ATTEMPTS: u32 = 20;

/// Aborted attempts of one plan after which its next attempts run alone.
const ATTEMPTS_BEFORE_EXCLUSIVE: u32 = 10;

/// Sent when a session connects.
const DEADLOCK_TIMEOUT: &str = "SET deadlock_timeout = '20ms'";

/// What all sessions of a run share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) url: String,
    pub(crate) cfg: WorkloadConfig,
    pub(crate) planner: Planner,
    pub(crate) schema: &'static Schema,
    pub(crate) next_plan: AtomicU64,
    pub(crate) fresh: AtomicI64,
    pub(crate) stop: AtomicBool,
    pub(crate) recorder: Mutex<Recorder>,
    /// A separate connection used only to inject disconnects.
    pub(crate) admin: Option<Client>,
    /// Attempts hold it shared; a plan that aborted too often takes it exclusively.
    pub(crate) gate: RwLock<()>,
}

/// A session's connection and its server process id.
struct Connection {
    client: Client,
    pid: i32,
}

async fn connect(url: &str) -> Result<Connection, WorkloadError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|source| WorkloadError::Connect { url: url.to_string(), source })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("workload connection ended: {e}");
        }
    });
    // Deadlocks are expected (predicate updates lock rows in scan order); detect them fast
    // instead of after the default second. Only superusers may set it: ignore a refusal.
    if let Err(e) = client.simple_query(DEADLOCK_TIMEOUT).await {
        tracing::debug!("cannot lower deadlock_timeout: {e}");
    }
    let rows = query(&client, "SELECT pg_backend_pid()").await?;
    let pid = rows
        .first()
        .and_then(|r| r.get(0))
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| WorkloadError::unexpected("SELECT pg_backend_pid()", "no pid"))?;
    Ok(Connection { client, pid })
}

async fn reconnect(url: &str) -> Result<Connection, WorkloadError> {
    let mut last = None;
    for attempt in 0..RECONNECT_ATTEMPTS {
        match connect(url).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt + 1))).await;
    }
    Err(last.expect("at least one attempt"))
}

/// What to do after an attempt.
enum Next {
    /// The plan is finished (committed, or the outcome is unknown).
    Done,
    /// The attempt aborted: retry the plan as a new transaction.
    Retry,
}

/// Runs plans until there are none left; `done` gets one message per finished plan.
pub(crate) async fn run_session(
    shared: Arc<Shared>,
    session: u32,
    done: UnboundedSender<()>,
) -> Result<(), WorkloadError> {
    let result = session_loop(&shared, session, &done).await;
    if result.is_err() {
        shared.stop.store(true, Ordering::SeqCst);
    }
    result
}

async fn session_loop(
    shared: &Shared,
    session: u32,
    done: &UnboundedSender<()>,
) -> Result<(), WorkloadError> {
    let mut conn = connect(&shared.url).await?;
    let mut rng = ChaCha8Rng::seed_from_u64(shared.cfg.seed ^ (u64::from(session) << 32) ^ 0xfa17);
    loop {
        if shared.stop.load(Ordering::SeqCst) {
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
            let (raw, next, lost) = attempt_plan(shared, &conn, session, &plan, &mut rng).await?;
            shared.recorder.lock().expect("recorder lock").push(raw);
            drop(turn);
            if lost {
                conn = reconnect(&shared.url).await?;
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

/// Runs one attempt of `plan` as one transaction. Returns the record, what to do next, and
/// whether the connection was lost. Errors that are neither retryable nor a lost
/// connection end the run (after the attempt is recorded as aborted).
async fn attempt_plan(
    shared: &Shared,
    conn: &Connection,
    session: u32,
    plan: &[Step],
    rng: &mut ChaCha8Rng,
) -> Result<(RawTxn, Next, bool), WorkloadError> {
    let isolation = shared.cfg.isolation;
    let mut raw = RawTxn {
        session,
        status: Status::Committed,
        ops: Vec::with_capacity(plan.len()),
        meta: Map::from_iter([
            ("xid".to_string(), Json::Null),
            ("isolation".to_string(), json!(isolation.as_str())),
        ]),
    };
    let cx = StepContext {
        schema: shared.schema,
        isolation,
        keys: shared.cfg.keys,
        fresh: &shared.fresh,
        pending_begin: AtomicBool::new(true),
    };
    let client = &conn.client;
    let mut txn_snapshot = None;
    let body = async {
        for step in plan {
            for mut r in run_step(client, &cx, step).await? {
                if isolation.has_transaction_snapshot() {
                    txn_snapshot.get_or_insert(r.snapshot);
                } else {
                    r.meta.insert("snapshot".into(), json!(r.snapshot.to_string()));
                }
                raw.ops.push((r.op, r.meta));
            }
        }
        if cx.pending_begin.load(Ordering::SeqCst) {
            query(client, isolation.begin_sql()).await?;
        }
        Ok::<(), WorkloadError>(())
    }
    .await;
    if let Some(s) = txn_snapshot {
        raw.meta.insert("snapshot".into(), json!(s.to_string()));
    }
    if let Err(e) = body {
        return abort(raw, e, client).await;
    }
    if shared.cfg.disconnect_rate > 0.0 && rng.random_bool(shared.cfg.disconnect_rate) {
        if let Some(admin) = &shared.admin {
            query(admin, &format!("SELECT pg_terminate_backend({}, 5000)", conn.pid)).await?;
        }
    }
    // The xid and the COMMIT travel in one simple query: one round trip, and COMMIT is
    // skipped by the server if the SELECT fails.
    let sql = "SELECT pg_current_xact_id_if_assigned()::text; COMMIT";
    match query(client, sql).await {
        Ok(rows) => {
            if let Some(x) = rows.first().and_then(|r| r.get(0)) {
                let x: u64 =
                    x.parse().map_err(|_| WorkloadError::unexpected(sql, format!("not an xid: {x:?}")))?;
                raw.meta.insert("xid".into(), json!(x));
            }
            Ok((raw, Next::Done, false))
        }
        Err(e) => {
            if let Some(x) = own_xid_from_writes(&raw) {
                raw.meta.insert("xid".into(), json!(x));
            }
            if e.is_connection_lost() {
                raw.status = Status::Unknown;
                raw.meta.insert("sqlstate".into(), json!(e.sqlstate().unwrap_or("connection")));
                tracing::debug!("commit outcome unknown: {e}");
                Ok((raw, Next::Done, true))
            } else {
                abort(raw, e, client).await
            }
        }
    }
}

/// The transaction's xid as its own writes recorded it (the `xmin` of a version it
/// installed), for when the answer to the xid query was lost.
fn own_xid_from_writes(raw: &RawTxn) -> Option<u64> {
    raw.ops.iter().find_map(|(op, meta)| match op {
        RawOp::Write { row: Some(_), .. } => meta.get("xmin")?.as_u64(),
        RawOp::Update { rows, .. } if !rows.is_empty() => meta.get("xmins")?.get(0)?.as_u64(),
        _ => None,
    })
}

/// Records a failed attempt as aborted and decides whether to retry.
async fn abort(
    mut raw: RawTxn,
    e: WorkloadError,
    client: &Client,
) -> Result<(RawTxn, Next, bool), WorkloadError> {
    raw.status = Status::Aborted;
    let lost = e.is_connection_lost();
    raw.meta
        .insert("sqlstate".into(), json!(e.sqlstate().unwrap_or(if lost { "connection" } else { "client" })));
    if lost {
        return Ok((raw, Next::Retry, true));
    }
    // The server already rolled back on error; ROLLBACK ends the failed transaction block.
    let rollback = client.simple_query("ROLLBACK").await;
    if e.is_retryable() {
        let lost = rollback.is_err();
        return Ok((raw, Next::Retry, lost));
    }
    Err(e)
}
