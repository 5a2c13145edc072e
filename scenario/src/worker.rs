//! One session of a permutation: its connection, its open transaction and what it
//! recorded, driven step by step from its own task (so a step that waits for a lock does not
//! stop the others).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use isocert_adapters::{CommitOutcome, DbError, IsolationLevel, RecordedOp, Session};
use isocert_history::Status;
use isocert_workload::{raw_txn, RawTxn};

use crate::runner::{describe, Unrecorded};
use crate::translate::{Action, Effect, ScenarioTable};

/// What a session's task reports when a step is done.
#[derive(Debug)]
pub(crate) struct StepDone {
    pub(crate) session: usize,
    pub(crate) step: String,
    pub(crate) errors: Vec<String>,
    pub(crate) unrecorded: Vec<Unrecorded>,
}

pub(crate) enum Command {
    Run {
        step: String,
        actions: Vec<Action>,
    },
    /// The permutation is abandoned: roll back the open transaction.
    Abandon,
    Finish,
}

/// A transaction a session has open.
pub(crate) struct Open<S: Session> {
    pub(crate) facts: S::TxnFacts,
    pub(crate) ops: Vec<(RecordedOp, S::OpFacts)>,
    /// The recorded table of each op (an index into the worker's tables).
    pub(crate) on: Vec<usize>,
    pub(crate) level: IsolationLevel,
}

/// One session's connection and its transaction state.
pub(crate) struct Worker<S: Session> {
    pub(crate) index: usize,
    pub(crate) session: S,
    pub(crate) tables: Vec<ScenarioTable>,
    pub(crate) default_level: IsolationLevel,
    pub(crate) next_level: Option<IsolationLevel>,
    pub(crate) open: Option<Open<S>>,
    /// A statement failed in the open transaction block: skip until COMMIT/ROLLBACK.
    pub(crate) failed: bool,
    pub(crate) finished: Vec<(u64, RawTxn, Vec<usize>)>,
    /// The levels of the transactions begun.
    pub(crate) levels: Vec<IsolationLevel>,
    pub(crate) order: Arc<AtomicU64>,
}

impl<S: Session> Worker<S> {
    pub(crate) fn record(&mut self, status: Status, open: Open<S>) -> Result<(), String> {
        if !self.levels.contains(&open.level) {
            self.levels.push(open.level);
        }
        let raw = raw_txn(self.index as u32, status, open.facts, open.ops).map_err(|e| e.to_string())?;
        self.finished.push((self.order.fetch_add(1, Ordering::SeqCst), raw, open.on));
        Ok(())
    }

    async fn begin(&mut self, level: Option<IsolationLevel>) -> Result<(), DbError> {
        let level = level.or(self.next_level.take()).unwrap_or(self.default_level);
        let facts = self.session.begin(level).await?;
        self.open = Some(Open { facts, ops: Vec::new(), on: Vec::new(), level });
        Ok(())
    }

    /// Ends the open transaction after `e`: recorded as aborted, rolled back.
    async fn fail(&mut self, e: &DbError, block: bool) -> Result<(), String> {
        if let Some(mut open) = self.open.take() {
            self.session.note_error(&mut open.facts, e);
            self.record(Status::Aborted, open)?;
        }
        if !e.is_connection_lost() {
            let _ = self.session.rollback().await;
        }
        self.failed = block;
        Ok(())
    }

    async fn commit(&mut self) -> Result<Option<String>, String> {
        let Some(mut open) = self.open.take() else { return Ok(None) };
        match self.session.commit(&mut open.facts).await {
            CommitOutcome::Committed => {
                self.record(Status::Committed, open)?;
                Ok(None)
            }
            CommitOutcome::Unknown(e) => {
                self.session.note_error(&mut open.facts, &e);
                self.record(Status::Unknown, open)?;
                Ok(Some(describe(&e)))
            }
            CommitOutcome::AbortedRetryable(e) | CommitOutcome::Failed(e) => {
                self.open = Some(open);
                self.fail(&e, false).await?;
                Ok(Some(describe(&e)))
            }
        }
    }

    /// Runs a step's actions; returns the errors and the unrecorded statements.
    pub(crate) async fn run(
        &mut self,
        step: &str,
        actions: Vec<Action>,
    ) -> Result<(Vec<String>, Vec<Unrecorded>), String> {
        let mut errors = Vec::new();
        let mut unrecorded = Vec::new();
        for action in actions {
            if self.failed && !matches!(action, Action::Commit | Action::Rollback) {
                errors.push("skipped: the transaction had failed".to_string());
                continue;
            }
            match action {
                Action::Begin(level) => {
                    if self.open.is_none() {
                        if let Err(e) = self.begin(level).await {
                            errors.push(describe(&e));
                        }
                    }
                }
                Action::SetLevel(level) => match self.open.as_ref().map(|o| o.ops.is_empty()) {
                    Some(true) => {
                        if let Err(e) = self.begin(Some(level)).await {
                            errors.push(describe(&e));
                        }
                    }
                    Some(false) => {
                        errors.push("SET TRANSACTION after the transaction's first statement: ignored".into())
                    }
                    None => self.next_level = Some(level),
                },
                Action::Commit => {
                    self.failed = false;
                    errors.extend(self.commit().await?);
                }
                Action::Rollback => {
                    self.failed = false;
                    if let Some(open) = self.open.take() {
                        self.record(Status::Aborted, open)?;
                        if let Err(e) = self.session.rollback().await {
                            errors.push(describe(&e));
                        }
                    }
                }
                Action::Record(table, db_step) => {
                    let Some(t) = self.tables.iter().position(|x| x.spec.name == table.spec.name) else {
                        continue;
                    };
                    let autocommit = self.open.is_none();
                    if autocommit {
                        if let Err(e) = self.begin(None).await {
                            errors.push(describe(&e));
                            continue;
                        }
                    }
                    let open = self.open.as_mut().expect("a transaction is open");
                    match self.session.execute(&table.spec, &db_step, &mut open.facts).await {
                        Ok(ops) => {
                            open.on.extend(std::iter::repeat_n(t, ops.len()));
                            open.ops.extend(ops);
                            if autocommit {
                                errors.extend(self.commit().await?);
                            }
                        }
                        Err(e) => {
                            errors.push(describe(&e));
                            self.fail(&e, !autocommit).await?;
                        }
                    }
                }
                Action::Raw { sql, effect, why } => {
                    if effect != Effect::None {
                        unrecorded.push(Unrecorded {
                            step: step.to_string(),
                            sql: sql.clone(),
                            why,
                            writes_table: effect == Effect::WritesTable,
                        });
                    }
                    if let Err(e) = self.session.execute_sql(&sql).await {
                        errors.push(describe(&e));
                        if self.open.is_some() {
                            self.fail(&e, true).await?;
                        }
                    }
                }
            }
        }
        Ok((errors, unrecorded))
    }
}
