//! Setting up the table and running a workload to a recorded history.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};

use isocert_adapters::postgres::connect;
use isocert_history::History;
use tokio::sync::mpsc;

use crate::plan::Planner;
use crate::recorder::Recorder;
use crate::schema::Schema;
use crate::session::{run_session, Shared};
use crate::statements::query;
use crate::{WorkloadConfig, WorkloadError};

/// Rows per `INSERT` when loading the initial rows.
const INSERT_BATCH: usize = 1000;

/// Drops and recreates the workload's table (`REPLICA IDENTITY FULL`) and inserts its
/// initial rows; committed when this returns. Create a replication slot after this and
/// before [`run`], so that the slot streams exactly the history's transactions.
///
/// # Errors
/// [`WorkloadError::Config`] for a bad configuration, [`WorkloadError::Connect`] or
/// [`WorkloadError::Statement`] when the database refuses.
pub async fn setup(url: &str, cfg: &WorkloadConfig) -> Result<(), WorkloadError> {
    cfg.validate()?;
    let schema = Schema::of(cfg.kind);
    let client = connect(url).await?;
    query(&client, &schema.create_sql()).await?;
    for batch in schema.initial_rows(cfg).chunks(INSERT_BATCH) {
        let values: Vec<String> = batch
            .iter()
            .map(|r| format!("({})", r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))
            .collect();
        let sql =
            format!("INSERT INTO {} ({}) VALUES {}", schema.table, schema.column_list(), values.join(", "));
        query(&client, &sql).await?;
    }
    Ok(())
}

/// Runs the workload against the table [`setup`] prepared and returns the recorded history.
///
/// The table's rows when the run starts become the history's initial versions. `cfg.sessions`
/// tokio tasks each hold one connection and take plans from a shared counter until
/// `cfg.txns` plans have finished; every attempt is recorded as it ends, so the history
/// keeps each session's order. `progress` is called with the number of finished plans.
///
/// # Errors
/// A configuration, connection or unexpected database error; serialization failures,
/// deadlocks and lost connections are recorded, not returned.
pub async fn run(url: &str, cfg: &WorkloadConfig, progress: impl Fn(u64)) -> Result<History, WorkloadError> {
    cfg.validate()?;
    let schema = Schema::of(cfg.kind);
    let client = connect(url).await?;
    let sql = format!("SELECT {} FROM {} ORDER BY 1", schema.column_list(), schema.table);
    let mut initial = Vec::new();
    for r in query(&client, &sql).await? {
        let row = (0..schema.columns.len())
            .map(|i| r.get(i).and_then(|t| t.parse().ok()))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| WorkloadError::unexpected(&sql, "a row with a NULL or non-integer column"))?;
        initial.push(row);
    }
    let max_value = initial.iter().map(|r| *r.last().expect("columns")).max().unwrap_or(0);
    let mut recorder = Recorder::new(schema, cfg.sessions);
    recorder.set_initial(&initial);
    let admin = if cfg.disconnect_rate > 0.0 { Some(connect(url).await?) } else { None };
    let shared = Arc::new(Shared {
        url: url.to_string(),
        cfg: cfg.clone(),
        planner: Planner::new(cfg),
        schema,
        next_plan: AtomicU64::new(0),
        fresh: AtomicI64::new(max_value + 1),
        stop: AtomicBool::new(false),
        recorder: Mutex::new(recorder),
        admin,
        gate: tokio::sync::RwLock::new(()),
    });
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let tasks: Vec<_> = (0..cfg.sessions)
        .map(|s| tokio::spawn(run_session(Arc::clone(&shared), s, done_tx.clone())))
        .collect();
    drop(done_tx);
    let mut finished = 0;
    while done_rx.recv().await.is_some() {
        finished += 1;
        progress(finished);
    }
    let mut first_error = None;
    for (s, task) in tasks.into_iter().enumerate() {
        let result = task
            .await
            .unwrap_or_else(|e| Err(WorkloadError::Session { session: s as u32, message: e.to_string() }));
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| WorkloadError::Session { session: 0, message: "a session outlived the run".into() })?;
    let recorder = shared.recorder.into_inner().expect("recorder lock");
    tracing::info!(txns = recorder.len(), "workload finished");
    Ok(recorder.finish())
}
