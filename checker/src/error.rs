//! Why a check could not be carried out (as opposed to finding anomalies).

use isocert_oracle::OracleError;

use crate::{CheckerKind, IsolationLevel};

/// A check that could not run: the input lacks what the level or checker needs, or the
/// predicate oracle failed. Anomalies are not errors; they are in the
/// [`Report`](crate::Report).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The certificate (or the history's timestamps) lacks data the checker needs at this level.
    #[error("{checker} cannot check {level}: the input has no {what}")]
    MissingCertificateData {
        /// What is missing, e.g. "start_ts/commit_ts on committed transaction T4".
        what: String,
        /// The level requested.
        level: IsolationLevel,
        /// The checker that needed it.
        checker: CheckerKind,
    },
    /// Uncertified: the certificate marks operations whose outcome rests on a value it does
    /// not show (`hidden_reads`, what `isocert serve` marks for reads of rows written outside
    /// the submitted history), so neither a valid verdict nor an anomaly through them would
    /// rest on facts. Exit code 2 on the command line.
    #[error("uncertified: {reads}")]
    HiddenValues {
        /// The operations and why, e.g. `T3 op 1: its value was written outside ...`.
        reads: String,
    },
    /// Uncertified: Chronos or Aion found the history not serializable in commit-timestamp
    /// order, but its timestamps do not promise to be the serial order (header
    /// `serial_order: "unknown"`, as PostgreSQL's recovery writes), so the findings are no
    /// anomaly. Exit code 2 on the command line.
    #[error(
        "uncertified: {found} finding(s) say the history is not serializable in commit-timestamp order, \
         but its timestamps do not promise to be the order it serialized in (serial_order \"unknown\", as for \
         PostgreSQL's SSI); decide serializability with --checker emme or enne and the recovered certificate. \
         First: {findings}"
    )]
    SerialOrderUnknown {
        /// How many findings broke commit order.
        found: usize,
        /// The first findings, explained.
        findings: String,
    },
    /// The checker does not decide this level.
    #[error("{checker} does not check {level}; {hint}")]
    UnsupportedLevel {
        /// The checker requested.
        checker: CheckerKind,
        /// The level requested.
        level: IsolationLevel,
        /// What to use instead.
        hint: &'static str,
    },
    /// The history uses a construct the checker cannot interpret.
    #[error("{checker} cannot check this history: {what}")]
    UnsupportedHistory {
        /// The checker.
        checker: CheckerKind,
        /// The construct, naming the transaction and operation.
        what: String,
    },
    /// The certificate is malformed beyond what a contradiction can express (it names a
    /// version twice, orders an object that does not exist, ...).
    #[error("invalid certificate: {field}: {message}")]
    InvalidCertificate {
        /// The certificate field at fault, e.g. `version_order[kv[3]]`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The predicate oracle could not compile or evaluate a predicate (the error names it).
    #[error(transparent)]
    Oracle(#[from] OracleError),
}
