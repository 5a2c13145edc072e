//! The sessions of a running permutation: one worker task per spec session, each on its own
//! connection and taking commands from its own channel, the one channel they all report
//! finished steps on, and the step each session is still running. The runner sends steps
//! and waits here; the lock-wait questions it asks the database stay in the runner.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use isocert_adapters::{Database, IsolationLevel, Session};
use isocert_history::Status;
use isocert_workload::RawTxn;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::runner::{failed, Halt, PermutationRun, RunOptions, ScenarioError};
use crate::spec::Spec;
use crate::translate::{Action, ScenarioTable};
use crate::worker::{Command, StepDone, Worker};

/// A transaction a session finished: its place in the order transactions ended, what it
/// recorded, and the table of each of its operations.
pub(crate) type FinishedTxn = (u64, RawTxn, Vec<usize>);

/// What a session's task hands back when it ends: its finished transactions and the levels
/// of the transactions it began.
type SessionOutcome = (Vec<FinishedTxn>, Vec<IsolationLevel>);

/// The running sessions of one permutation.
pub(crate) struct Sessions {
    /// Each session's name, as the spec gives it.
    names: Vec<String>,
    /// Each session's command channel.
    senders: Vec<mpsc::UnboundedSender<Command>>,
    /// Each session's task.
    tasks: Vec<JoinHandle<SessionOutcome>>,
    /// Where every session reports a finished step.
    done_rx: mpsc::UnboundedReceiver<Result<StepDone, String>>,
    /// The step each session is running, if any.
    pending: Vec<Option<String>>,
}

impl Sessions {
    /// Connects one session per spec session, each to a task of its own; `server_ids`
    /// receives each connection's id as it opens (so the caller can end it whatever happens).
    pub(crate) async fn start<D: Database>(
        db: &D,
        spec: &Spec,
        tables: &[ScenarioTable],
        options: &RunOptions,
        server_ids: &mut Vec<u64>,
    ) -> Result<Self, ScenarioError> {
        let order = Arc::new(AtomicU64::new(0));
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Result<StepDone, String>>();
        let mut senders = Vec::new();
        let mut tasks = Vec::new();
        for (index, s) in spec.sessions.iter().enumerate() {
            let session = db.connect().await.map_err(failed(format!("connecting session {}", s.name)))?;
            server_ids.push(session.server_id());
            let (tx, rx) = mpsc::unbounded_channel::<Command>();
            senders.push(tx);
            let worker = Worker {
                index,
                session,
                tables: tables.to_vec(),
                default_level: options.isolation,
                next_level: None,
                open: None,
                failed: false,
                finished: Vec::new(),
                levels: Vec::new(),
                order: Arc::clone(&order),
            };
            tasks.push(tokio::spawn(serve(worker, rx, done_tx.clone())));
        }
        Ok(Sessions {
            names: spec.sessions.iter().map(|s| s.name.clone()).collect(),
            senders,
            tasks,
            done_rx,
            pending: vec![None; spec.sessions.len()],
        })
    }

    /// Whether session `i` is still running a step (it may wait for a lock).
    pub(crate) fn is_pending(&self, i: usize) -> bool {
        self.pending[i].is_some()
    }

    /// Sends `step` (its `actions`) to session `i`, which runs it in its task.
    pub(crate) fn send(&mut self, i: usize, step: String, actions: Vec<Action>) -> Result<(), ScenarioError> {
        self.pending[i] = Some(step.clone());
        self.senders[i]
            .send(Command::Run { step, actions })
            .map_err(|_| ScenarioError::Lost(self.names[i].clone()))
    }

    /// The next finished step, waiting at most `limit` (`Err` when the time is up, `Ok(None)`
    /// when every session's task has ended).
    pub(crate) async fn next_done(
        &mut self,
        limit: Duration,
    ) -> Result<Option<Result<StepDone, String>>, tokio::time::error::Elapsed> {
        tokio::time::timeout(limit, self.done_rx.recv()).await
    }

    /// Takes a finished step into `run` (its errors and unrecorded statements) and returns
    /// the session it belongs to.
    pub(crate) fn absorb(
        &mut self,
        done: Result<StepDone, String>,
        run: &mut PermutationRun,
    ) -> Result<usize, ScenarioError> {
        let done = done.map_err(ScenarioError::Facts)?;
        self.pending[done.session] = None;
        run.errors.extend(done.errors.iter().map(|e| format!("{}: {e}", done.step)));
        run.unrecorded.extend(done.unrecorded);
        Ok(done.session)
    }

    /// Sends `step` (its `actions`) to session `i` and waits until it completes.
    pub(crate) async fn run_to_completion(
        &mut self,
        i: usize,
        step: String,
        actions: Vec<Action>,
        run: &mut PermutationRun,
        options: &RunOptions,
    ) -> Result<(), ScenarioError> {
        self.send(i, step, actions)?;
        self.wait_for(i, run, options.step_timeout, options).await
    }

    /// Waits until session `i`'s pending step completes (absorbing other completions), at
    /// most `timeout` ([`ScenarioError::Stuck`]), or until a stop is asked for.
    pub(crate) async fn wait_for(
        &mut self,
        i: usize,
        run: &mut PermutationRun,
        timeout: Duration,
        options: &RunOptions,
    ) -> Result<(), ScenarioError> {
        let started = Instant::now();
        while self.pending[i].is_some() {
            let left = timeout.saturating_sub(started.elapsed());
            match options.guarded(left, self.done_rx.recv()).await {
                Ok(Some(done)) => {
                    self.absorb(done, run)?;
                }
                Ok(None) => return Err(ScenarioError::Lost(format!("{i}"))),
                Err(Halt::Interrupted) => return Err(ScenarioError::Interrupted),
                Err(Halt::Timeout) => {
                    return Err(ScenarioError::Stuck {
                        step: self.pending[i].clone().unwrap_or_default(),
                        secs: timeout.as_secs(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Rolls back the open transaction of every session not running a step, which releases
    /// the locks the others wait for.
    pub(crate) fn abandon_idle(&self) {
        for (tx, pending) in self.senders.iter().zip(&self.pending) {
            if pending.is_none() {
                let _ = tx.send(Command::Abandon);
            }
        }
    }

    /// Rolls back the open transaction of every session.
    pub(crate) fn abandon_all(&self) {
        for tx in &self.senders {
            let _ = tx.send(Command::Abandon);
        }
    }

    /// Ends every session's task and returns the transactions they finished; the levels
    /// their transactions began at go into `run.levels`, weakest first.
    pub(crate) async fn finish(self, run: &mut PermutationRun) -> Result<Vec<FinishedTxn>, ScenarioError> {
        let mut finished = Vec::new();
        for (tx, task) in self.senders.iter().zip(self.tasks) {
            let _ = tx.send(Command::Finish);
            let (txns, levels) = task.await.map_err(|e| ScenarioError::Lost(e.to_string()))?;
            finished.extend(txns);
            for level in levels {
                if !run.levels.contains(&level) {
                    run.levels.push(level);
                }
            }
        }
        // Weakest first: `IsolationLevel`'s order puts read committed before repeatable read
        // before serializable.
        run.levels.sort();
        Ok(finished)
    }
}

/// A session's task: runs the commands it is sent, reporting each finished step on `done`;
/// a transaction left open when the commands end is rolled back with the connection.
async fn serve<S: Session>(
    mut worker: Worker<S>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    done: mpsc::UnboundedSender<Result<StepDone, String>>,
) -> SessionOutcome {
    let index = worker.index;
    while let Some(command) = rx.recv().await {
        match command {
            Command::Run { step, actions } => {
                let outcome = worker.run(&step, actions).await.map(|(errors, unrecorded)| StepDone {
                    session: index,
                    step,
                    errors,
                    unrecorded,
                });
                let _ = done.send(outcome);
            }
            Command::Abandon => {
                if let Some(open) = worker.open.take() {
                    let _ = worker.session.rollback().await;
                    let _ = worker.record(Status::Aborted, open);
                }
                worker.failed = false;
            }
            Command::Finish => break,
        }
    }
    // A transaction left open ends with the connection: rolled back.
    if let Some(open) = worker.open.take() {
        let _ = worker.session.rollback().await;
        let _ = worker.record(Status::Aborted, open);
    }
    (worker.finished, worker.levels)
}
