//! Setting up the table and running a workload to a recorded history, on any database
//! behind the seam.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use isocert_adapters::{dispatch, Database, DatabaseKind, DatabaseVisitor, Session};
use isocert_history::History;
use tokio::sync::mpsc;

use crate::plan::Planner;
use crate::recorder::Recorder;
use crate::schema::Schema;
use crate::session::{run_session, Shared};
use crate::{WorkloadConfig, WorkloadError};

/// Drops and recreates the workload's table with the configuration's physical design and
/// inserts its initial rows; committed when this returns. Returns the adapter's notes on
/// what of the design it did not apply. Start the change capture after this and before [`run_on`], so that it
/// sees exactly the history's transactions.
///
/// # Errors
/// [`WorkloadError::Config`] for a bad configuration, [`WorkloadError::Database`] when the
/// database refuses.
pub async fn setup_on<D: Database>(db: &D, cfg: &WorkloadConfig) -> Result<Vec<String>, WorkloadError> {
    cfg.validate()?;
    let schema = Schema::of(cfg.kind);
    Ok(db.prepare_designed_table(&cfg.table_spec(), &schema.initial_rows(cfg), &cfg.design).await?)
}

/// Runs the workload against the table [`setup_on`] prepared and returns the recorded history.
///
/// The table's rows when the run starts become the history's initial versions. `cfg.sessions`
/// tokio tasks each hold one connection and take plans from a shared counter until
/// `cfg.txns` plans have finished; every attempt is recorded as it ends, so the history
/// keeps each session's order. `progress` is called with the number of finished plans.
///
/// # Errors
/// A configuration, connection or unexpected database error; serialization failures,
/// deadlocks and lost connections are recorded, not returned.
pub async fn run_on<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    progress: impl Fn(u64),
) -> Result<History, WorkloadError> {
    run_until(db, cfg, Arc::new(AtomicBool::new(false)), progress).await
}

/// [`run_on`], stopping early when `interrupt` becomes true (Ctrl-C): every session
/// finishes the attempt it has in flight, records it, and takes no new plan, so the
/// history returned holds only whole attempts.
///
/// # Errors
/// As [`run_on`].
pub async fn run_until<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    interrupt: Arc<AtomicBool>,
    progress: impl Fn(u64),
) -> Result<History, WorkloadError> {
    run_observed(db, cfg, interrupt, progress, None).await
}

/// What a live consumer of a run (`isocert run --emit`) hooks in: the history as each
/// transaction is recorded, and a way to hold every session back.
pub struct Observe {
    /// Every attempt holds it shared from before its first statement until it is
    /// recorded: whoever holds it exclusively sees no transaction in flight, and every
    /// transaction begun before is recorded (a *cut*).
    pub gate: Arc<tokio::sync::RwLock<()>>,
    /// Called under the recorder's lock (keep it short), see [`Recorder::observe`].
    pub observer: crate::recorder::ObserverFn,
}

impl std::fmt::Debug for Observe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observe").finish_non_exhaustive()
    }
}

/// [`run_until`], with `observe` hooked in (`None`: as [`run_until`]).
///
/// # Errors
/// As [`run_on`].
pub async fn run_observed<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    interrupt: Arc<AtomicBool>,
    progress: impl Fn(u64),
    observe: Option<Observe>,
) -> Result<History, WorkloadError> {
    cfg.validate()?;
    let schema = Schema::of(cfg.kind);
    // The initial rows' writers first: one that commits before the rows are read is then
    // never taken for the history's own (docs/API.md, initial versions).
    let table = cfg.table_spec();
    let initial_facts = db.initial_facts(&table).await?;
    let initial = db.read_table(&table).await?;
    let max_value = initial
        .iter()
        .filter_map(|r| match r.last() {
            Some(isocert_history::Scalar::Int(v)) => Some(*v),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut recorder = Recorder::new(table, cfg.sessions, D::DIALECT);
    recorder.set_initial(&initial);
    recorder.set_meta(initial_facts);
    if schema.is_list() {
        recorder.set_lists(0);
    }
    let gate = match observe {
        Some(Observe { gate, observer }) => {
            recorder.observe(observer);
            gate
        }
        None => Arc::default(),
    };
    let mut planner = Planner::new(cfg);
    planner.merge = cfg.kind == crate::WorkloadKind::Counter && db.has_merge().await;
    let shared = Arc::new(Shared {
        db: db.clone(),
        cfg: cfg.clone(),
        planner,
        schema,
        table,
        next_plan: AtomicU64::new(0),
        fresh: AtomicI64::new(max_value + 1),
        stop: AtomicBool::new(false),
        interrupt,
        recorder: Mutex::new(recorder),
        gate,
        epoch: std::time::Instant::now(),
    });
    let maintenance_stop = Arc::new(AtomicBool::new(false));
    let maintenance_log = Arc::new(Mutex::new(MaintenanceLog::default()));
    let maintenance = cfg.maintenance.then(|| {
        let statements = D::maintenance_statements(&table, &cfg.design);
        let (stop, log) = (Arc::clone(&maintenance_stop), Arc::clone(&maintenance_log));
        tokio::spawn(maintain(db.clone(), statements, stop, log))
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
    maintenance_stop.store(true, Ordering::SeqCst);
    let maintained = match maintenance {
        Some(task) => Some(stop_maintenance(task, maintenance_log).await),
        None => None,
    };
    if let Some(e) = first_error {
        return Err(e);
    }
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| WorkloadError::Session { session: 0, message: "a session outlived the run".into() })?;
    let recorder = shared.recorder.into_inner().expect("recorder lock");
    let mut history = recorder.finish();
    note_physical::<D>(&mut history, cfg, maintained.as_ref());
    tracing::info!(txns = history.txns.len(), "workload finished");
    Ok(history)
}

/// What the maintenance session did: the statements it looped over, how many rounds it
/// finished, and the errors the database gave (each statement's first few).
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct MaintenanceLog {
    /// The statements of one round.
    pub(crate) statements: Vec<String>,
    /// Statements that ran to completion.
    pub(crate) executed: u64,
    /// Whole rounds finished.
    pub(crate) rounds: u64,
    /// Errors, `statement: error` (at most [`MAINTENANCE_ERRORS_KEPT`]).
    pub(crate) errors: Vec<String>,
    /// Whether a statement was still running when the workload ended (it was cancelled).
    pub(crate) stopped_in_flight: bool,
}

/// How many maintenance errors the run's notes keep.
pub(crate) const MAINTENANCE_ERRORS_KEPT: usize = 8;

/// The maintenance session: one connection looping over `statements` (each outside a
/// transaction) until `stop`, counting into `log`; a failing statement is noted and the
/// loop goes on.
async fn maintain<D: Database>(
    db: D,
    statements: Vec<String>,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<MaintenanceLog>>,
) {
    let note = |f: &dyn Fn(&mut MaintenanceLog)| f(&mut log.lock().expect("maintenance log lock"));
    note(&|l| l.statements.clone_from(&statements));
    if statements.is_empty() {
        return;
    }
    let mut conn = match db.connect().await {
        Ok(c) => c,
        Err(e) => return note(&|l| l.errors.push(format!("the maintenance session could not connect: {e}"))),
    };
    while !stop.load(Ordering::SeqCst) {
        for sql in &statements {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            match conn.execute_sql(sql).await {
                Ok(()) => note(&|l| l.executed += 1),
                Err(e) => note(&|l| {
                    if l.errors.len() < MAINTENANCE_ERRORS_KEPT {
                        l.errors.push(format!("{sql}: {e}"));
                    }
                }),
            }
        }
        note(&|l| l.rounds += 1);
    }
}

/// How long the maintenance session may take to finish its statement in flight once the
/// workload ended; then its connection is closed (the server cancels the statement; a
/// concurrent index build left invalid belongs to isocert's table and goes with it).
const MAINTENANCE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

async fn stop_maintenance(
    mut task: tokio::task::JoinHandle<()>,
    log: Arc<Mutex<MaintenanceLog>>,
) -> MaintenanceLog {
    let stopped_in_flight = match tokio::time::timeout(MAINTENANCE_GRACE, &mut task).await {
        Ok(_) => false,
        Err(_) => {
            task.abort();
            let _ = task.await;
            true
        }
    };
    let mut log = std::mem::take(&mut *log.lock().expect("maintenance log lock"));
    log.stopped_in_flight = stopped_in_flight;
    log
}

/// Adds the run's physical design, access paths and maintenance to the history's header
/// `meta` (`"physical"`), where the reports and a reproducer find them.
fn note_physical<D: Database>(
    history: &mut History,
    cfg: &WorkloadConfig,
    maintained: Option<&MaintenanceLog>,
) {
    if cfg.design.is_default() && cfg.access_paths.is_empty() && maintained.is_none() {
        return;
    }
    let ignored: Vec<String> =
        cfg.access_paths.iter().filter_map(|p| D::access_path_settings(*p).err()).collect();
    let physical = serde_json::json!({
        "layout": cfg.design.layout.as_str(),
        "index": cfg.design.index.as_str(),
        "filler_rows": cfg.design.filler_rows,
        "access_paths": cfg.access_paths.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "access_paths_ignored": ignored,
        "maintenance": maintained,
    });
    let mut meta = match history.meta.take().map(|m| *m) {
        Some(serde_json::Value::Object(m)) => m,
        Some(other) => {
            let mut m = serde_json::Map::new();
            m.insert("adapter".into(), other);
            m
        }
        None => serde_json::Map::new(),
    };
    meta.insert("physical".into(), physical);
    history.meta = Some(Box::new(serde_json::Value::Object(meta)));
}

/// A boxed future borrowing the caller's arguments.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, WorkloadError>> + 'a>>;

/// [`setup_on`] the database `url` names by its scheme.
///
/// # Errors
/// As [`setup_on`]; [`WorkloadError::Adapter`] for a URL no adapter takes.
pub async fn setup(url: &str, cfg: &WorkloadConfig) -> Result<(), WorkloadError> {
    struct Setup<'a>(&'a str, &'a WorkloadConfig);
    impl<'a> DatabaseVisitor for Setup<'a> {
        type Output = Boxed<'a, ()>;
        fn visit<D: Database>(self) -> Boxed<'a, ()> {
            Box::pin(async move { setup_on(&D::from_url(self.0)?, self.1).await.map(|_| ()) })
        }
    }
    dispatch(DatabaseKind::from_url(url)?, Setup(url, cfg))?.await
}

/// [`run_on`] the database `url` names by its scheme.
///
/// # Errors
/// As [`run_on`]; [`WorkloadError::Adapter`] for a URL no adapter takes.
pub async fn run(url: &str, cfg: &WorkloadConfig, progress: impl Fn(u64)) -> Result<History, WorkloadError> {
    struct Run<'a, P>(&'a str, &'a WorkloadConfig, P);
    impl<'a, P: Fn(u64) + 'a> DatabaseVisitor for Run<'a, P> {
        type Output = Boxed<'a, History>;
        fn visit<D: Database>(self) -> Boxed<'a, History> {
            Box::pin(async move { run_on(&D::from_url(self.0)?, self.1, self.2).await })
        }
    }
    dispatch(DatabaseKind::from_url(url)?, Run(url, cfg, progress))?.await
}
