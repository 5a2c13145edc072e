//! Running one permutation of a scenario on a database, through the seam.
//!
//! Per permutation: the global setup on an administrative connection, the change capture
//! started on every recorded table (one capture each, their logs merged), one connection per session (each in its own task, so a
//! step that waits for a lock does not stop the others), the session setups, the steps in
//! the permutation's order, the session teardowns, the global teardown.
//!
//! A step is sent to its session's task; the runner waits until it completes or until the
//! database says the session waits for a lock ([`Database::is_blocked`]), and then starts
//! the next step, as isolationtester does. A step of a session whose previous step is still
//! blocked waits for it first. A statement that fails (serialization failure, deadlock)
//! ends its transaction: it is recorded as aborted and rolled back, and the session's
//! statements up to its next `COMMIT`/`ROLLBACK` are skipped, as PostgreSQL refuses them in
//! a failed transaction block.

use std::time::{Duration, Instant};

use isocert_adapters::{CaptureOptions, ChangeCapture, Database, DbError, IsolationLevel, Session};
use isocert_history::History;
use isocert_recovery::RawLog;
use isocert_workload::Recorder;
use serde::Serialize;

use crate::sessions::{FinishedTxn, Sessions};
use crate::spec::{Permutation, Spec};
use crate::translate::{ScenarioTable, SkippedTable, Translator};

/// How a scenario runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The level of a transaction whose `BEGIN` names none (`--isolation`).
    pub isolation: IsolationLevel,
    /// The change capture's options.
    pub capture: CaptureOptions,
    /// How long a step may neither finish nor be reported blocked.
    pub step_timeout: Duration,
    /// How often a running step is checked for a lock wait (MariaDB needs more than 100 ms:
    /// its `INNODB_TRX` table is a cache refreshed only after that long unread).
    pub block_check: Duration,
    /// How long one statement of the global setup or teardown may take (`--setup-timeout`).
    pub setup_timeout: Duration,
    /// Set to `true` to stop (SIGINT, SIGTERM, SIGHUP): the permutation ends its sessions,
    /// runs the teardown, drops its capture and returns [`ScenarioError::Interrupted`].
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

impl RunOptions {
    /// Whether a stop was asked for.
    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| *s.borrow())
    }

    /// `work`, unless it takes longer than `limit` or a stop is asked for first.
    pub(crate) async fn guarded<T>(
        &self,
        limit: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, Halt> {
        let mut stop = self.stop.clone();
        let stopped = async move {
            match stop.as_mut() {
                Some(s) => {
                    while !*s.borrow_and_update() {
                        if s.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            out = tokio::time::timeout(limit, work) => out.map_err(|_| Halt::Timeout),
            () = stopped => Err(Halt::Interrupted),
        }
    }
}

/// Why a guarded wait ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Halt {
    /// The time was up.
    Timeout,
    /// A stop was asked for.
    Interrupted,
}

/// A statement that ran but is not in the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unrecorded {
    /// The step (or `setup of s1`).
    pub step: String,
    /// The statement.
    pub sql: String,
    /// Why it is not recorded.
    pub why: String,
    /// Whether it writes a recorded table (then the permutation cannot be certified).
    pub writes_table: bool,
}

/// What one permutation did.
#[derive(Debug)]
pub struct PermutationRun {
    /// The permutation, as its step names.
    pub steps: Vec<String>,
    /// The recorded history (initial rows, every transaction of every session).
    pub history: History,
    /// The captured change stream of every recorded table, merged (none without one).
    pub log: Option<RawLog>,
    /// Statements that ran unrecorded.
    pub unrecorded: Vec<Unrecorded>,
    /// Statements that failed, as `step: error`.
    pub errors: Vec<String>,
    /// Steps the database reported waiting for a lock.
    pub blocked: Vec<String>,
    /// Why the permutation could not run as written (isolationtester's "invalid
    /// permutation"): a step of a session whose previous step still waits for a lock.
    pub invalid: Option<String>,
    /// The levels its recorded transactions ran at, each once, weakest first.
    pub levels: Vec<IsolationLevel>,
    /// The tables recorded (those of the spec the runner could read after the setup).
    pub tables: Vec<&'static str>,
    /// Recordable tables whose rows could not be read after the setup (a NULL, a value out
    /// of range): not recorded in this permutation, their statements run as written.
    pub unreadable: Vec<SkippedTable>,
    /// Why the change capture could not record the permutation (a statement, such as
    /// PostgreSQL's TRUNCATE of a recorded table, changed rows it cannot follow): `log` is
    /// then `None` and the permutation is uncertified; the next permutations still run.
    pub capture_incomplete: Option<String>,
}

/// Why a permutation could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A database request outside any step failed.
    #[error("{what}: {source}")]
    Database {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: DbError,
    },
    /// The change capture failed.
    #[error("the change capture: {0}")]
    Capture(#[from] isocert_adapters::AdapterError),
    /// A step neither finished nor waited for a lock in time; its session was ended.
    #[error(
        "step {step} neither finished nor waited for a lock within {secs} s (--step-timeout); its session was \
         ended and the teardown ran"
    )]
    Stuck {
        /// The step.
        step: String,
        /// The timeout.
        secs: u64,
    },
    /// A statement of the global setup or teardown did not finish in time.
    #[error("{what} did not finish within {secs} s (--setup-timeout): {sql}")]
    Timeout {
        /// `setup (line N)` or `teardown (line N)`.
        what: String,
        /// The statement.
        sql: String,
        /// The timeout.
        secs: u64,
    },
    /// A stop was asked for (a signal): the sessions were ended, the teardown ran.
    #[error("interrupted")]
    Interrupted,
    /// The change capture did not record the last commit in time.
    #[error("the change capture did not catch up within {0} s")]
    CatchUp(u64),
    /// A session's task ended unexpectedly.
    #[error("session {0}'s task ended")]
    Lost(String),
    /// The recorded facts could not be serialised.
    #[error("{0}")]
    Facts(String),
}

/// A failed statement in a line: the database's code and the first line of its most
/// specific message.
pub(crate) fn describe(e: &DbError) -> String {
    let mut message = e.source.to_string();
    let mut source = e.source.source();
    while let Some(inner) = source {
        message = inner.to_string();
        source = inner.source();
    }
    let message = message.lines().next().unwrap_or_default().trim_start_matches("ERROR: ").to_string();
    match e.code() {
        Some(code) => format!("{code} {message}"),
        None => message,
    }
}

/// Turns a failed database request into the error that names `what` it was doing.
pub(crate) fn failed(what: impl Into<String>) -> impl FnOnce(DbError) -> ScenarioError {
    let what = what.into();
    move |source| ScenarioError::Database { what, source }
}

/// How long a step waits for its session's previous, blocked step before the permutation
/// is declared invalid.
const INVALID_AFTER: Duration = Duration::from_secs(2);

/// How long the change capture may take to record the permutation's last commit.
const CATCH_UP: Duration = Duration::from_secs(120);

/// Runs permutation `perm` of `spec` on `db`. `tables` are the recorded tables (none: the
/// statements run, nothing is recorded).
///
/// # Errors
/// A [`ScenarioError`] when setup, the capture or a step goes wrong outside what a step
/// may do (a failing statement inside a step is recorded, not an error).
pub async fn run_permutation<D: Database>(
    db: &D,
    spec: &Spec,
    tables: &[ScenarioTable],
    perm: &Permutation,
    options: &RunOptions,
) -> Result<PermutationRun, ScenarioError> {
    let mut admin = db.connect().await.map_err(failed("connecting"))?;
    // The global setup makes the initial state: it runs as written, before the capture.
    let mut failure = None;
    'setup: for block in &spec.setup {
        for sql in crate::translate::split_statements(&block.sql, D::DIALECT) {
            let what = format!("setup (line {})", block.line);
            if let Err(e) = admin_statement(db, &mut admin, &sql, &what, options, true).await {
                failure = Some(e);
                break 'setup;
            }
        }
    }
    let result = match failure {
        Some(e) => Err(e),
        None => setup_done(db, spec, tables, perm, options).await,
    };
    // The teardown runs after a failure or a stop too (the sessions are ended by then, so
    // nothing holds a lock it needs); a teardown that fails is reported after a run that
    // did not, never instead of the run's own error.
    let mut teardown_error = None;
    if let Some(block) = &spec.teardown {
        if matches!(result, Err(ScenarioError::Timeout { .. } | ScenarioError::Interrupted)) {
            // A setup statement may have been ended with its connection.
            admin = db.connect().await.map_err(failed("connecting for the teardown"))?;
        }
        for sql in crate::translate::split_statements(&block.sql, D::DIALECT) {
            let what = format!("teardown (line {})", block.line);
            // Not stoppable: a stop is what the teardown cleans up after.
            match admin_statement(db, &mut admin, &sql, &what, options, false).await {
                Ok(()) => {}
                Err(e @ ScenarioError::Timeout { .. }) => {
                    teardown_error = Some(e);
                    break;
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }
    match (result, teardown_error) {
        (Ok(_), Some(e)) => Err(e),
        (result, _) => result,
    }
}

/// Runs one statement of the global setup or teardown on the administrative connection,
/// within `--setup-timeout` (a statement that does not finish is ended with its connection),
/// and when `stoppable` until a stop is asked for.
async fn admin_statement<D: Database>(
    db: &D,
    admin: &mut D::Session,
    sql: &str,
    what: &str,
    options: &RunOptions,
    stoppable: bool,
) -> Result<(), ScenarioError> {
    let id = admin.server_id();
    let unstoppable;
    let guard = if stoppable {
        options
    } else {
        unstoppable = RunOptions { stop: None, ..options.clone() };
        &unstoppable
    };
    match guard.guarded(options.setup_timeout, admin.execute_sql(sql)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ScenarioError::Database { what: format!("{what}: {sql}"), source: e }),
        Err(halt) => {
            if let Err(e) = db.kill_session(id).await {
                tracing::warn!("ending the session of the {what}: {e}");
            }
            Err(match halt {
                Halt::Timeout => ScenarioError::Timeout {
                    what: what.to_string(),
                    sql: sql.to_string(),
                    secs: options.setup_timeout.as_secs(),
                },
                Halt::Interrupted => ScenarioError::Interrupted,
            })
        }
    }
}

/// The permutation after the global setup: the initial rows, then the sessions; any
/// session still connected when they end (a failure, a stop) is ended, so that the
/// teardown finds no lock held.
async fn setup_done<D: Database>(
    db: &D,
    spec: &Spec,
    tables: &[ScenarioTable],
    perm: &Permutation,
    options: &RunOptions,
) -> Result<PermutationRun, ScenarioError> {
    // The initial rows of each table; a table whose rows the seam cannot hold (a NULL, a
    // value out of range) is not recorded.
    let mut readable = Vec::new();
    let mut initial = Vec::new();
    let mut unreadable = Vec::new();
    for t in tables {
        match db.read_table(&t.spec).await {
            Ok(rows) => {
                readable.push(*t);
                initial.push(rows);
            }
            Err(e) => unreadable.push(SkippedTable {
                table: t.spec.name.to_string(),
                why: format!("its rows after the setup could not be read: {}", describe(&e)),
            }),
        }
    }
    let translator = Translator::new(readable.clone(), D::DIALECT);
    let mut server_ids = Vec::new();
    // Held here, so that after a failure the sessions are ended before the captures are
    // dropped (which drops their slots and restores what they changed on the tables: that
    // needs the sessions' locks released).
    let mut captures = Vec::new();
    let result = run_sessions(
        db,
        spec,
        &readable,
        initial,
        perm,
        options,
        &translator,
        &mut server_ids,
        &mut captures,
    )
    .await;
    if result.is_err() {
        for id in server_ids {
            if let Err(e) = db.kill_session(id).await {
                tracing::debug!("ending session {id}: {e}");
            }
        }
    }
    drop(captures);
    result.map(|mut run| {
        run.unreadable = unreadable;
        run
    })
}

/// The sessions' part of a permutation; `server_ids` receives each session's connection
/// as it opens and `captures` each change capture as it starts, so the caller can end and
/// drop them whatever happens here.
#[allow(clippy::too_many_arguments)]
async fn run_sessions<D: Database>(
    db: &D,
    spec: &Spec,
    tables: &[ScenarioTable],
    initial: Vec<Vec<Vec<isocert_history::Scalar>>>,
    perm: &Permutation,
    options: &RunOptions,
    translator: &Translator,
    server_ids: &mut Vec<u64>,
    captures: &mut Vec<D::Capture>,
) -> Result<PermutationRun, ScenarioError> {
    start_captures(db, tables, options, captures).await?;
    let mut sessions = Sessions::start(db, spec, tables, options, server_ids).await?;
    let mut run = PermutationRun {
        steps: perm.steps.iter().map(|s| s.name.clone()).collect(),
        history: History::new(),
        log: None,
        unrecorded: Vec::new(),
        errors: Vec::new(),
        blocked: Vec::new(),
        invalid: None,
        levels: Vec::new(),
        tables: tables.iter().map(|t| t.spec.name).collect(),
        unreadable: Vec::new(),
        capture_incomplete: None,
    };
    // Session setups, each to completion.
    for (i, s) in spec.sessions.iter().enumerate() {
        if let Some(block) = &s.setup {
            let actions = translator.block(&block.sql);
            sessions.run_to_completion(i, format!("setup of {}", s.name), actions, &mut run, options).await?;
        }
    }
    run_steps(db, spec, perm, translator, &mut sessions, &mut run, server_ids, options).await?;
    if run.invalid.is_some() {
        // Roll back the sessions that are not waiting, which releases the waiting ones.
        sessions.abandon_idle();
    }
    end_waiting_steps(db, &mut sessions, &mut run, server_ids, options).await?;
    if run.invalid.is_some() {
        sessions.abandon_all();
    }
    for (i, s) in spec.sessions.iter().enumerate() {
        if let Some(block) = &s.teardown {
            let actions = translator.block(&block.sql);
            sessions
                .run_to_completion(i, format!("teardown of {}", s.name), actions, &mut run, options)
                .await?;
        }
    }
    let finished = sessions.finish(&mut run).await?;
    if !tables.is_empty() {
        run.history = record_history::<D>(spec, tables, &initial, finished);
    }
    let mut logs = Vec::new();
    // Every capture is finished (each drops what it made), even after one could not record.
    for c in captures.drain(..) {
        let finish = tokio::time::timeout(CATCH_UP, c.finish(Some(&run.history)));
        match finish.await.map_err(|_| ScenarioError::CatchUp(CATCH_UP.as_secs()))? {
            Ok(log) => logs.push(log),
            Err(e) if e.is_unrecordable() => {
                run.capture_incomplete.get_or_insert_with(|| e.to_string());
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !logs.is_empty() && run.capture_incomplete.is_none() {
        run.log = Some(RawLog::merge(logs));
    }
    Ok(run)
}

/// Starts one change capture per recorded table (the seam's capture follows one table),
/// each with its own server-side objects: the run name with the table's number.
async fn start_captures<D: Database>(
    db: &D,
    tables: &[ScenarioTable],
    options: &RunOptions,
    captures: &mut Vec<D::Capture>,
) -> Result<(), ScenarioError> {
    for (i, t) in tables.iter().enumerate() {
        let mut capture_options = options.capture.clone();
        if tables.len() > 1 {
            capture_options.run_name = format!("{}_t{i}", options.capture.run_name);
        }
        let mut c = db.start_capture(&t.spec, &capture_options).await?;
        c.wait_started(Duration::from_secs(60)).await?;
        captures.push(c);
    }
    Ok(())
}

/// Runs the permutation's steps in order, as isolationtester does: each is sent to its
/// session and waited for until it completes or the database says it waits for a lock
/// (then it is `blocked` and the next step starts). A step whose session still runs its
/// previous, blocked step waits for it first; if that does not finish soon, the
/// permutation is invalid and the remaining steps do not run.
#[allow(clippy::too_many_arguments)]
async fn run_steps<D: Database>(
    db: &D,
    spec: &Spec,
    perm: &Permutation,
    translator: &Translator,
    sessions: &mut Sessions,
    run: &mut PermutationRun,
    server_ids: &[u64],
    options: &RunOptions,
) -> Result<(), ScenarioError> {
    for pstep in &perm.steps {
        let i = spec.session_of(&pstep.name).expect("the parser checked every step name");
        if sessions.is_pending(i) {
            // The session's previous step waits for a lock: only a step of another session
            // could release it, so if it does not finish soon the permutation is invalid.
            let grace = options.step_timeout.min(INVALID_AFTER);
            if let Err(ScenarioError::Stuck { step, .. }) = sessions.wait_for(i, run, grace, options).await {
                run.invalid = Some(format!(
                    "step {} cannot start: {step} of its session still waits for a lock",
                    pstep.name
                ));
                break;
            }
        }
        let step = spec.step(&pstep.name).expect("a step of the spec");
        sessions.send(i, pstep.name.clone(), translator.block(&step.sql.sql))?;
        let started = Instant::now();
        loop {
            match sessions.next_done(options.block_check).await {
                Ok(Some(done)) => {
                    if sessions.absorb(done, run)? == i && !sessions.is_pending(i) {
                        break;
                    }
                }
                Ok(None) => return Err(ScenarioError::Lost(spec.sessions[i].name.clone())),
                Err(_) => {
                    if options.stopped() {
                        return Err(ScenarioError::Interrupted);
                    }
                    if db.is_blocked(server_ids[i]).await.map_err(failed("asking for lock waits"))? {
                        run.blocked.push(pstep.name.clone());
                        break;
                    }
                    if started.elapsed() > options.step_timeout {
                        return Err(ScenarioError::Stuck {
                            step: pstep.name.clone(),
                            secs: options.step_timeout.as_secs(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every step has started: a step still waiting for a lock after --step-timeout waits
/// for nothing any step will do (isolationtester's invalid permutation). Its session is
/// ended, which releases what it held, and the permutation is invalid.
async fn end_waiting_steps<D: Database>(
    db: &D,
    sessions: &mut Sessions,
    run: &mut PermutationRun,
    server_ids: &[u64],
    options: &RunOptions,
) -> Result<(), ScenarioError> {
    let started = Instant::now();
    // One connection per session, in the sessions' order.
    for (i, &server_id) in server_ids.iter().enumerate() {
        if sessions.is_pending(i) {
            let left = options.step_timeout.saturating_sub(started.elapsed());
            match sessions.wait_for(i, run, left, options).await {
                Ok(()) => {}
                Err(ScenarioError::Stuck { step, .. }) => {
                    if run.invalid.is_none() {
                        run.invalid = Some(format!(
                            "step {step} still waited for a lock {} s after every step had started; its \
                             session was ended",
                            options.step_timeout.as_secs()
                        ));
                    }
                    if let Err(e) = db.kill_session(server_id).await {
                        tracing::warn!("ending the session of step {step}: {e}");
                    }
                    // The ended connection fails the step, which reports back.
                    sessions.wait_for(i, run, CATCH_UP, options).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The history the sessions recorded: the recorded tables' initial rows, then the finished
/// transactions in the order they ended.
fn record_history<D: Database>(
    spec: &Spec,
    tables: &[ScenarioTable],
    initial: &[Vec<Vec<isocert_history::Scalar>>],
    mut finished: Vec<FinishedTxn>,
) -> History {
    finished.sort_by_key(|(seq, _, _)| *seq);
    let specs: Vec<_> = tables.iter().map(|t| t.spec).collect();
    let mut recorder = Recorder::with_tables(&specs, spec.sessions.len() as u32, D::DIALECT);
    for (i, rows) in initial.iter().enumerate() {
        recorder.add_initial(i, rows);
    }
    for (_, raw, on) in finished {
        recorder.push_on(raw, &on);
    }
    recorder.finish()
}
