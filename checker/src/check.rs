//! The one entry point: pick a checker for the level and certificate, run it.

use isocert_history::{Certificate, History, ObjId, Op, Status, TxnId};
use isocert_oracle::MatchesOracle;

use crate::{emme, enne, CheckError, CheckerKind, IsolationLevel, Report, SessionOrder};

/// Checks history `h` against isolation `level` (with session order, the default definition)
/// using certificate `cert`; [`check_with`] chooses the definition.
///
/// # Errors
/// As [`check_with`].
pub fn check(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    checker: CheckerKind,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    check_with(h, cert, level, SessionOrder::Included, checker, oracle)
}

/// `h` with every transaction in a session of its own (named `~s<n>`, `n` its position in
/// the file): the history as Adya's definitions see it, with no session order, so every
/// checker decides a level without it ([`SessionOrder::Excluded`]).
pub fn without_session_order(h: &History) -> History {
    let mut out = h.clone();
    for i in 0..out.txns.len() {
        let session = out.intern_session(isocert_history::Scalar::Text(format!("~s{i}").into()));
        out.txns[i].session = session;
    }
    out
}

/// Checks history `h` against isolation `level` under the definition `session_order` says,
/// using certificate `cert`. The report says which definition it checked
/// ([`Report::session_order`]).
///
/// [`CheckerKind::Auto`] runs Emme when the certificate has a version order (every level,
/// explained cycles), Enne when it has only a serialization order and the level is
/// serializable, and without any certificate MTC when the history is made of
/// mini-transactions (serializable, snapshot isolation), else, when it is made of item
/// reads and writes of unique values, Cobra (serializable), PolySI (snapshot isolation) or
/// the weak checker (read committed). Read atomic and causal always go to the weak checker,
/// which needs no certificate; strict serializability to MTC for mini-transactions, else
/// (item reads and writes of unique values, list appends) to Cobra with real-time order. `oracle` decides which rows a predicate matches.
///
/// # Errors
/// [`CheckError::MissingCertificateData`] when the certificate or the timestamps lack what
/// the level needs (exit code 2 on the command line), [`CheckError::UnsupportedLevel`] for
/// a checker that does not decide `level`, [`CheckError::Oracle`] when a predicate cannot
/// be evaluated.
pub fn check_with(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    session_order: SessionOrder,
    checker: CheckerKind,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    if !cert.hidden_reads.is_empty() {
        return Err(hidden_values(h, cert));
    }
    let mut report = match session_order {
        SessionOrder::Included => check_definition(h, cert, level, checker, oracle)?,
        SessionOrder::Excluded => {
            let mut report = check_definition(&without_session_order(h), cert, level, checker, oracle)?;
            report.notes.push(
                "without session order (Adya's definition): each transaction was checked as its own session"
                    .into(),
            );
            report
        }
    };
    report.session_order = session_order;
    Ok(report)
}

/// The uncertified verdict for a certificate with `hidden_reads`: each operation named
/// (the first ten; then how many more), with why.
fn hidden_values(h: &History, cert: &Certificate) -> CheckError {
    const SHOWN: usize = 10;
    let mut marks = cert.hidden_reads.clone();
    marks.sort_unstable();
    let mut reads: Vec<String> = marks
        .iter()
        .take(SHOWN)
        .map(|r| format!("{} op {}: {}", h.txn_label(r.at.txn), r.at.op, r.why.explain()))
        .collect();
    if marks.len() > SHOWN {
        reads.push(format!("and {} more", marks.len() - SHOWN));
    }
    CheckError::HiddenValues { reads: reads.join("; ") }
}

/// [`check_with`] on a history whose sessions carry the definition's session order.
fn check_definition(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    checker: CheckerKind,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    // A list-append history without timestamps at snapshot isolation (an Elle history): the
    // order its reads show is fixed and the rest searched, PolySI-style (issue 28).
    if checker == CheckerKind::Auto
        && level == IsolationLevel::SnapshotIsolation
        && crate::sat::lists::is_list_history(h)
        && h.txns.iter().any(|t| t.status == Status::Committed && t.start_ts().is_none())
    {
        return crate::sat::check(h, level, CheckerKind::Polysi, None);
    }
    // At strict serializability `auto` runs MTC on mini-transactions; other histories of item
    // reads and writes of unique values, and list-append histories (Jepsen's, with `:time`),
    // go to Cobra with real-time order as certain edges (issue 28).
    if checker == CheckerKind::Auto
        && level == IsolationLevel::StrictSerializable
        && crate::mtc::check_shape(h).is_err()
        && crate::sat::applies(h)
    {
        return crate::sat::check(h, level, CheckerKind::Cobra, None);
    }
    // Without a certificate, `auto` falls back to a black-box checker; if that one cannot
    // read the history either, the missing certificate is the error to report.
    let (resolved, missing) = match resolve(cert, level, checker) {
        Err(e @ CheckError::MissingCertificateData { .. }) if cert.is_empty() => match black_box(h, level) {
            Some(kind) => (kind, Some(e)),
            None => return Err(with_black_box_refusal(h, level, e)),
        },
        other => (other?, None),
    };
    if level == IsolationLevel::StrictSerializable
        && !matches!(resolved, CheckerKind::Mtc | CheckerKind::Cobra)
    {
        return Err(CheckError::UnsupportedLevel {
            checker: resolved,
            level,
            hint: "strict serializability is decided by --checker mtc (mini-transactions) or --checker cobra (item \
                   reads and writes of unique values, list appends), from the clients' invoked_at / completed_at",
        });
    }
    match resolved {
        CheckerKind::Enne => enne::check(h, cert, level, oracle),
        CheckerKind::Chronos => crate::chronos::check_chronos(h, level),
        CheckerKind::Aion => crate::aion::check_aion(h, level),
        CheckerKind::Mtc => crate::mtc::check(h, level),
        CheckerKind::Cobra | CheckerKind::Polysi => {
            crate::sat::check(h, level, resolved, cert.version_order.as_ref())
        }
        CheckerKind::Weak => match (crate::weak::check(h, level), missing) {
            (Err(CheckError::UnsupportedHistory { .. }), Some(e)) => Err(e),
            (result, _) => result,
        },
        _ => emme::check(h, cert, level, oracle),
    }
}

/// Whether `cert` has a version order that leaves out some committed transaction's write of
/// an object (King Cobra's partial orders). Emme reports such writes as contradictions;
/// Cobra and PolySI fix the orders it lists and search the rest.
pub fn partial_version_order(h: &History, cert: &Certificate) -> bool {
    let Some(order) = &cert.version_order else { return false };
    let placed: rustc_hash::FxHashSet<(ObjId, TxnId)> =
        order.iter().flat_map(|(&obj, ws)| ws.iter().map(move |&t| (obj, t))).collect();
    h.txn_ids().filter(|&t| h.txn(t).status == Status::Committed).any(|t| {
        h.txn(t).ops.iter().any(|op| matches!(op, Op::Write { obj, .. } if !placed.contains(&(*obj, t))))
    })
}

/// A missing certificate, with the reason the black-box checker of `level` refuses the
/// history too (issue 28: "no certificate" alone hid that, e.g., a transaction rewrites the
/// initial value), so the refusal names the real cause.
fn with_black_box_refusal(h: &History, level: IsolationLevel, e: CheckError) -> CheckError {
    let candidate = match level {
        IsolationLevel::Serializable => CheckerKind::Cobra,
        IsolationLevel::SnapshotIsolation => CheckerKind::Polysi,
        _ => return e,
    };
    match (e, crate::sat::shape(h, candidate)) {
        (CheckError::MissingCertificateData { what, level, checker }, Err(refusal)) => {
            CheckError::MissingCertificateData { what: format!("{what}, and {refusal}"), level, checker }
        }
        (e, _) => e,
    }
}

/// The black-box checker for a history without a certificate: MTC when it is made of
/// mini-transactions, else (item reads and writes of unique values) Cobra at serializable,
/// PolySI at snapshot isolation; at read committed the weak checker, which refuses other
/// histories itself; `None` otherwise.
fn black_box(h: &History, level: IsolationLevel) -> Option<CheckerKind> {
    match level {
        IsolationLevel::Serializable | IsolationLevel::SnapshotIsolation
            if crate::mtc::check_shape(h).is_ok() =>
        {
            Some(CheckerKind::Mtc)
        }
        IsolationLevel::Serializable if crate::sat::applies(h) => Some(CheckerKind::Cobra),
        IsolationLevel::SnapshotIsolation if crate::sat::applies(h) => Some(CheckerKind::Polysi),
        // The weak checker tests the shape itself (once); see `check`.
        IsolationLevel::ReadCommitted => Some(CheckerKind::Weak),
        _ => None,
    }
}

/// The checker that [`check`] runs for this request: the one asked for, or for `Auto` the
/// weak checker at read atomic and causal (which need no certificate), else as below.
///
/// # Errors
/// [`CheckError::MissingCertificateData`] when `Auto` finds neither a version order nor
/// (at serializable) a serialization order.
pub fn resolve(
    cert: &Certificate,
    level: IsolationLevel,
    checker: CheckerKind,
) -> Result<CheckerKind, CheckError> {
    if checker != CheckerKind::Auto {
        return Ok(checker);
    }
    if level == IsolationLevel::StrictSerializable {
        return Ok(CheckerKind::Mtc);
    }
    if level.black_box_only() {
        return Ok(CheckerKind::Weak);
    }
    if cert.version_order.is_some() {
        Ok(CheckerKind::Emme)
    } else if level == IsolationLevel::Serializable && cert.serialization_order.is_some() {
        Ok(CheckerKind::Enne)
    } else {
        Err(CheckError::MissingCertificateData {
            what: "version order (or, for serializable, serialization order) in the certificate".to_string(),
            level,
            checker,
        })
    }
}
