//! Setting up the table and running a workload to a recorded history, on any database
//! behind the seam.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};

use isocert_adapters::{dispatch, Database, DatabaseKind, DatabaseVisitor};
use isocert_history::History;
use tokio::sync::mpsc;

use crate::plan::Planner;
use crate::recorder::Recorder;
use crate::schema::Schema;
use crate::session::{run_session, Shared};
use crate::{WorkloadConfig, WorkloadError};

/// Drops and recreates the workload's table and inserts its initial rows; committed when
/// this returns. Start the change capture after this and before [`run_on`], so that it
/// sees exactly the history's transactions.
///
/// # Errors
/// [`WorkloadError::Config`] for a bad configuration, [`WorkloadError::Database`] when the
/// database refuses.
pub async fn setup_on<D: Database>(db: &D, cfg: &WorkloadConfig) -> Result<(), WorkloadError> {
    cfg.validate()?;
    let schema = Schema::of(cfg.kind);
    db.prepare_table(&schema.spec(), &schema.initial_rows(cfg)).await?;
    Ok(())
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
    let initial_facts = db.initial_facts(&schema.spec()).await?;
    let initial = db.read_table(&schema.spec()).await?;
    let max_value = initial
        .iter()
        .filter_map(|r| match r.last() {
            Some(isocert_history::Scalar::Int(v)) => Some(*v),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut recorder = Recorder::new(schema.spec(), cfg.sessions, D::DIALECT);
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
    let shared = Arc::new(Shared {
        db: db.clone(),
        cfg: cfg.clone(),
        planner: Planner::new(cfg),
        schema,
        next_plan: AtomicU64::new(0),
        fresh: AtomicI64::new(max_value + 1),
        stop: AtomicBool::new(false),
        interrupt,
        recorder: Mutex::new(recorder),
        gate,
        epoch: std::time::Instant::now(),
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
    let history = recorder.finish();
    tracing::info!(txns = history.txns.len(), "workload finished");
    Ok(history)
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
            Box::pin(async move { setup_on(&D::from_url(self.0)?, self.1).await })
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
