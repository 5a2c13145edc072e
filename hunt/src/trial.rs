//! One trial: set the workload's table up, capture the change stream while the workload
//! runs, recover the certificate and check the history, on any database behind the seam.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use isocert_adapters::{CaptureOptions, ChangeCapture, Database};
use isocert_certify::{Certified, CertifyError};
use isocert_checker::{CheckerKind, IsolationLevel, Report};
use isocert_history::{History, Status};
use isocert_recovery::{RawLog, Recovered};
use isocert_workload::{client_aborted_plans, WorkloadConfig};

use crate::params::TrialParams;
use crate::HuntError;

/// A finished trial: everything `isocert run` would save, and its counts.
#[derive(Debug)]
pub struct Trial {
    /// What ran.
    pub params: TrialParams,
    /// The workload configuration it ran with.
    pub config: WorkloadConfig,
    /// The history, with the recovered timestamps and outcomes.
    pub history: History,
    /// The captured change stream.
    pub log: RawLog,
    /// The recovered certificate and its counts.
    pub recovered: Recovered,
    /// The check of the history against the hunt's level.
    pub report: Report,
    /// Committed transactions.
    pub committed: usize,
    /// Attempts recorded (committed, aborted, unknown).
    pub attempts: usize,
    /// Attempts the database aborted (serialization failures, deadlocks, ...): aborted
    /// attempts minus the client's own rollbacks.
    pub server_aborts: usize,
    /// Seconds the workload ran.
    pub workload_secs: f64,
    /// The adapter's notes on what of the physical design it did not apply.
    pub notes: Vec<String>,
}

impl Trial {
    /// Attempts the database aborted, per attempt (what the search maximises).
    pub fn abort_rate(&self) -> f64 {
        self.server_aborts as f64 / self.attempts.max(1) as f64
    }
}

/// Runs one trial of `params` at `isolation` and checks it at `level`; `progress` gets the
/// number of finished plans; `interrupt` stops the workload after the attempts in flight
/// (the trial is then checked on what completed).
///
/// # Errors
/// A [`HuntError`] when the workload, the capture, recovery or the check fails.
pub async fn run_trial<D: Database>(
    db: &D,
    params: &TrialParams,
    isolation: IsolationLevel,
    level: IsolationLevel,
    capture: &CaptureOptions,
    interrupt: Arc<AtomicBool>,
    progress: impl Fn(u64),
) -> Result<Trial, HuntError> {
    let config = params.config(isolation, D::ONE_CHANGE_PER_ROW);
    let notes = isocert_workload::setup_on(db, &config).await?;
    let mut consumer = db.start_capture(&config.table_spec(), capture).await?;
    consumer.wait_started(Duration::from_secs(60)).await?;
    let started = Instant::now();
    let run = isocert_workload::run_until(db, &config, interrupt, progress).await;
    let workload_secs = started.elapsed().as_secs_f64();
    let mut history = match run {
        Ok(h) => h,
        Err(e) => {
            let _ = consumer.finish(None).await;
            return Err(e.into());
        }
    };
    let log = tokio::time::timeout(Duration::from_secs(600), consumer.finish(Some(&history)))
        .await
        .map_err(|_| HuntError::Check("the change capture did not catch up within 10 minutes".into()))??;
    let (recovered, report) = recover_and_check::<D>(&mut history, &log, level)?;
    let committed = history.txns.iter().filter(|t| t.is_committed()).count();
    let aborted = history.txns.iter().filter(|t| t.status == Status::Aborted).count();
    let client = client_aborted_plans(&config, config.txns) as usize;
    Ok(Trial {
        params: params.clone(),
        config,
        committed,
        attempts: history.txns.len(),
        server_aborts: aborted.saturating_sub(client),
        history,
        log,
        recovered,
        report,
        workload_secs,
        notes,
    })
}

/// Recovers the certificate of `history` from `log` with `D`'s rule and checks it at `level`.
///
/// # Errors
/// [`HuntError::Recovery`] or [`HuntError::Check`].
pub fn recover_and_check<D: Database>(
    history: &mut History,
    log: &RawLog,
    level: IsolationLevel,
) -> Result<(Recovered, Report), HuntError> {
    match isocert_certify::certify::<D>(history, log, level, CheckerKind::Auto) {
        Ok(Certified { recovered, report }) => Ok((recovered, report)),
        Err(CertifyError::Recovery(e)) => Err(HuntError::Recovery(e)),
        Err(CertifyError::Predicates(e)) => Err(HuntError::Check(e.to_string())),
        Err(CertifyError::Check(e)) => Err(HuntError::Check(e.to_string())),
        Err(e) => Err(HuntError::Check(e.to_string())),
    }
}
