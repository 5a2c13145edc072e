//! The pipeline's steps: recover a certificate with a database's rule, check it.

use isocert_adapters::Database;
use isocert_checker::{check, CheckError, CheckerKind, IsolationLevel, Report};
use isocert_history::History;
use isocert_oracle::{Interpreter, MatchesOracle, OracleError};
use isocert_recovery::{RawLog, Recovered, RecoveryError};

/// Why a history could not be certified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertifyError {
    /// A predicate of the history does not compile (or no longer does after recovery).
    #[error("compiling the history's predicates")]
    Predicates(#[source] OracleError),
    /// History and captured log disagree: no certificate.
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    /// The checker could not judge the history.
    #[error("checking the recovered certificate")]
    Check(#[source] CheckError),
}

/// A certified history: its recovered certificate (with counts and warnings) and the
/// checker's report.
#[derive(Debug)]
pub struct Certified {
    /// The certificate and what recovery counted and warned about.
    pub recovered: Recovered,
    /// The verdict on the history with that certificate.
    pub report: Report,
}

/// Recovers the certificate of `h` from `log` with `D`'s rule, asking `interpreter` (built
/// from `h` by [`Interpreter::new`]) which rows a predicate matches. Recovery records start
/// and commit timestamps, settles unknown outcomes and may intern foreign writers' rows;
/// afterwards `interpreter` is brought up to date with `h` ([`Interpreter::refresh`]), so
/// that the check can use it as [`Interpreter::new`] on the recovered history.
///
/// # Errors
/// [`CertifyError::Recovery`] when history and log disagree; [`CertifyError::Predicates`]
/// when a predicate no longer compiles against the recovered history.
pub fn recover<D: Database>(
    h: &mut History,
    log: &RawLog,
    interpreter: &mut Interpreter,
) -> Result<Recovered, CertifyError> {
    let matcher = |h: &History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = D::recover(h, log, &matcher)?;
    interpreter.refresh(h).map_err(CertifyError::Predicates)?;
    Ok(recovered)
}

/// How many committed writing transactions `h` holds when `recovered` logged none of them
/// although `D` recovers from a log: the log is not this run's change stream (or not this
/// database's). `None` when the log is plausibly the history's.
pub fn unlogged_writers<D: Database>(h: &History, recovered: &Recovered) -> Option<usize> {
    if !D::NEEDS_LOG || recovered.stats.logged_txns > 0 {
        return None;
    }
    let writers = h.txns.iter().filter(|t| t.is_committed() && t.ops.iter().any(|o| o.is_write())).count();
    (writers > 0).then_some(writers)
}

/// Compiles the predicates of `h`, recovers its certificate from `log` with `D`'s rule and
/// checks it at `level` with `checker`: the whole pipeline, with one interpreter.
///
/// # Errors
/// A [`CertifyError`] naming the step that failed.
pub fn certify<D: Database>(
    h: &mut History,
    log: &RawLog,
    level: IsolationLevel,
    checker: CheckerKind,
) -> Result<Certified, CertifyError> {
    let mut interpreter = Interpreter::new(h).map_err(CertifyError::Predicates)?;
    let recovered = recover::<D>(h, log, &mut interpreter)?;
    let report =
        check(h, &recovered.certificate, level, checker, &interpreter).map_err(CertifyError::Check)?;
    Ok(Certified { recovered, report })
}

#[cfg(test)]
mod tests {
    use isocert_adapters::{Dgraph, MariaDb};
    use isocert_history::v1;
    use isocert_recovery::Recovered;

    use super::unlogged_writers;

    /// One committed writing transaction and one that only reads.
    const HISTORY: &str = concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":3}]}"#,
        "\n",
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":3}]}"#
    );

    #[test]
    fn a_log_with_none_of_the_commits_is_not_the_runs() {
        let h = v1::read_history(HISTORY.as_bytes()).expect("a valid history");
        let mut recovered = Recovered::default();
        assert_eq!(unlogged_writers::<MariaDb>(&h, &recovered), Some(1));
        // Dgraph recovers from the history alone: an empty log says nothing.
        assert_eq!(unlogged_writers::<Dgraph>(&h, &recovered), None);
        recovered.stats.logged_txns = 1;
        assert_eq!(unlogged_writers::<MariaDb>(&h, &recovered), None);
    }
}
