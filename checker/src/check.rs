//! The one entry point: pick a checker for the level and certificate, run it.

use isocert_history::{Certificate, History, KvHistory, ObjId, Op, Status, TxnId};
use isocert_oracle::MatchesOracle;
use rustc_hash::FxHashMap;

use crate::{emme, enne, items, CheckError, CheckerKind, IsolationLevel, Report, SessionOrder};

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
    if uses_version_order(&report) {
        crate::promises::check_promises(h, cert, oracle, &mut report)?;
    } else if let Some(p) = &h.promises {
        report.notes.push(format!(
            "statement promises not checked: {} does not read a version order (the level checked is Adya's, not as \
             {} documents it)",
            report.checker, p.database
        ));
    }
    Ok(report)
}

/// Whether the checker that ran read the certificate's version order (Emme): the statement
/// promises are checked against the same order.
fn uses_version_order(report: &Report) -> bool {
    report.checker == CheckerKind::Emme
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

/// [`check_with`] on a history whose sessions carry the definition's session order; a
/// checker that decides without the certificate's orders has the certificate checked
/// against the history too ([`validate_certificate`]).
fn check_definition(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    checker: CheckerKind,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    let mut report = run_checker(h, cert, level, checker, oracle)?;
    validate_certificate(h, cert, oracle, &mut report)?;
    Ok(report)
}

/// Issue 47: Chronos and Aion (timestamps), MTC and the weak checker (the reads) decide
/// without the certificate's version order, version sets and serialization order, and Cobra
/// and PolySI pass over what a version order lists that the history did not write, so a
/// certificate recovered for another history was accepted without a word. The certificate
/// is checked against the history as Emme checks it (Enne for a serialization order alone):
/// each contradiction is added to `report` as an anomaly, with a note. A partial version
/// order (King Cobra's), which Cobra and PolySI complete by search, is left to them.
///
/// # Errors
/// Emme's or Enne's (a predicate that cannot be evaluated).
fn validate_certificate(
    h: &History,
    cert: &Certificate,
    oracle: &dyn MatchesOracle,
    report: &mut Report,
) -> Result<(), CheckError> {
    let blind = match report.checker {
        CheckerKind::Chronos | CheckerKind::Aion | CheckerKind::Mtc | CheckerKind::Weak => true,
        CheckerKind::Cobra | CheckerKind::Polysi => !partial_version_order(h, cert),
        _ => false,
    };
    if !blind || (cert.version_order.is_none() && cert.serialization_order.is_none()) {
        return Ok(());
    }
    let (reference, reference_report) = if cert.version_order.is_some() {
        (CheckerKind::Emme, emme::check(h, cert, IsolationLevel::Serializable, oracle))
    } else {
        (CheckerKind::Enne, enne::check(h, cert, IsolationLevel::Serializable, oracle))
    };
    let reference_report = match reference_report {
        Ok(r) => r,
        Err(e @ (CheckError::MissingCertificateData { .. } | CheckError::UnsupportedLevel { .. })) => {
            report.notes.push(format!("the certificate could not be checked against the history: {e}"));
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let contradictions: Vec<_> = reference_report
        .anomalies
        .into_iter()
        .filter(|a| a.kind == crate::AnomalyKind::CertificateContradiction)
        .collect();
    report.notes.push(format!(
        "{} decides without the certificate's orders; the certificate was checked against the history as \
         {reference} checks it: {} contradiction(s)",
        report.checker,
        contradictions.len()
    ));
    report.anomalies.extend(contradictions);
    Ok(())
}

/// Runs the checker [`check_definition`] picks.
fn run_checker(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    checker: CheckerKind,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    // Item reads and writes for a black-box checker: in the compact model, where every
    // black-box decision is taken ([`check_black_box`]).
    if black_box_request(cert, level, checker) && is_item_history(h) {
        let kv = KvHistory::from_history(h).expect("item reads and writes convert");
        let given = cert
            .version_order
            .as_ref()
            .filter(|_| matches!(checker, CheckerKind::Cobra | CheckerKind::Polysi));
        return check_items(&kv, level, checker, given);
    }
    // A list-append history without timestamps at snapshot isolation (an Elle history): the
    // order its reads show is fixed and the rest searched, PolySI-style (issue 28).
    if checker == CheckerKind::Auto
        && level == IsolationLevel::SnapshotIsolation
        && crate::sat::lists::is_list_history(h)
        && h.txns.iter().any(|t| t.status == Status::Committed && t.start_ts().is_none())
    {
        return crate::sat::check(h, level, CheckerKind::Polysi, None);
    }
    // At strict serializability `auto` runs MTC on mini-transactions; list-append histories
    // (Jepsen's, with `:time`), which are not, go to Cobra with real-time order as certain
    // edges (issue 28), as item histories that are not do ([`check_items`]).
    if checker == CheckerKind::Auto
        && level == IsolationLevel::StrictSerializable
        && crate::sat::lists::is_list_history(h)
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
        return Err(strict_serializability_refusal(resolved, level));
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

/// The refusal of `checker` at strict serializability, which only MTC and Cobra decide.
fn strict_serializability_refusal(checker: CheckerKind, level: IsolationLevel) -> CheckError {
    CheckError::UnsupportedLevel {
        checker,
        level,
        hint:
            "strict serializability is decided by --checker mtc (mini-transactions) or --checker cobra (item \
               reads and writes of unique values, list appends), from the clients' invoked_at / completed_at",
    }
}

/// Checks a history in the compact model ([`KvHistory`]) with a black-box checker, without
/// a certificate: MTC, Cobra, PolySI or the weak checker as asked, or for
/// [`CheckerKind::Auto`] the one [`check_with`] picks without a certificate (MTC for
/// mini-transactions, else Cobra at serializable and strict serializability, PolySI at
/// snapshot isolation, the weak checker at read committed, read atomic and causal). This is
/// what `isocert check` runs on Plume and v1 files, read into the compact model directly.
///
/// # Errors
/// As [`check_with`] without a certificate: [`CheckError::UnsupportedHistory`] for a shape
/// the checker cannot read, [`CheckError::UnsupportedLevel`], and
/// [`CheckError::MissingCertificateData`] when `Auto` finds no black-box checker for the
/// history (a certificate-based checker was asked for, or the level needs one).
pub fn check_black_box(
    kv: &KvHistory,
    level: IsolationLevel,
    checker: CheckerKind,
) -> Result<Report, CheckError> {
    let empty = Certificate::default();
    if items::has_appends(kv) || !black_box_request(&empty, level, checker) {
        // List reads are turned into item reads in the general model; other checkers take it.
        let h = kv.clone().into_history();
        let oracle = isocert_oracle::Interpreter::new(&h)?;
        return check_with(&h, &empty, level, SessionOrder::Included, checker, &oracle);
    }
    check_items(kv, level, checker, None)
}

/// Whether checking at `level` with `checker` and no certificate runs a black-box checker
/// (MTC, Cobra, PolySI or the weak checker), which [`check_black_box`] runs on the compact
/// model: one of them named, or `Auto` (which then picks one, or asks for a certificate).
pub fn runs_black_box(level: IsolationLevel, checker: CheckerKind) -> bool {
    black_box_request(&Certificate::default(), level, checker)
}

/// Whether `checker` at `level` with `cert` is a black-box checker: named, or picked by
/// `Auto` (strict serializability, read atomic and causal always; the other levels when
/// the certificate is empty).
fn black_box_request(cert: &Certificate, level: IsolationLevel, checker: CheckerKind) -> bool {
    match checker {
        CheckerKind::Mtc | CheckerKind::Cobra | CheckerKind::Polysi | CheckerKind::Weak => true,
        CheckerKind::Auto => match resolve(cert, level, checker) {
            Ok(kind) => matches!(kind, CheckerKind::Mtc | CheckerKind::Weak),
            Err(CheckError::MissingCertificateData { .. }) => cert.is_empty(),
            Err(_) => false,
        },
        _ => false,
    }
}

/// Whether `h` has only item reads and writes (no list append, no predicate operation).
fn is_item_history(h: &History) -> bool {
    h.txns.iter().flat_map(|t| &t.ops).all(|op| matches!(op, Op::Read { .. } | Op::Write { .. }))
}

/// The black-box checker for an item history in the compact model, as [`check_definition`]
/// picks one for a history without a certificate; `given`: a version order whose orders
/// Cobra and PolySI fix (King Cobra's).
fn check_items(
    kv: &KvHistory,
    level: IsolationLevel,
    checker: CheckerKind,
    given: Option<&FxHashMap<ObjId, Vec<TxnId>>>,
) -> Result<Report, CheckError> {
    let sites = items::WriteSites::build(kv);
    let mini = || crate::mtc::check_shape(kv, &sites).is_ok();
    let unique = |candidate| items::unique_values(kv, candidate, &sites);
    // At strict serializability `auto` runs MTC on mini-transactions, else Cobra.
    if checker == CheckerKind::Auto
        && level == IsolationLevel::StrictSerializable
        && !mini()
        && unique(CheckerKind::Cobra).is_ok()
    {
        return crate::sat::check_kv(kv, level, CheckerKind::Cobra, None, sites);
    }
    let (resolved, missing) = match resolve(&Certificate::default(), level, checker) {
        Err(e @ CheckError::MissingCertificateData { .. }) => {
            let candidate = match level {
                IsolationLevel::Serializable | IsolationLevel::SnapshotIsolation if mini() => {
                    Some(CheckerKind::Mtc)
                }
                IsolationLevel::Serializable => Some(CheckerKind::Cobra),
                IsolationLevel::SnapshotIsolation => Some(CheckerKind::Polysi),
                IsolationLevel::ReadCommitted => Some(CheckerKind::Weak),
                _ => None,
            };
            match candidate {
                // The weak checker tests the shape itself (once).
                Some(kind @ (CheckerKind::Mtc | CheckerKind::Weak)) => (kind, Some(e)),
                Some(kind) => match unique(kind) {
                    Ok(()) => (kind, Some(e)),
                    Err(refusal) => return Err(with_refusal(e, refusal)),
                },
                None => return Err(e),
            }
        }
        other => (other?, None),
    };
    if level == IsolationLevel::StrictSerializable
        && !matches!(resolved, CheckerKind::Mtc | CheckerKind::Cobra)
    {
        return Err(strict_serializability_refusal(resolved, level));
    }
    match resolved {
        CheckerKind::Mtc => crate::mtc::check_kv(kv, level, sites),
        CheckerKind::Cobra | CheckerKind::Polysi => crate::sat::check_kv(kv, level, resolved, given, sites),
        _ => match (crate::weak::check_kv(kv, level, sites), missing) {
            (Err(CheckError::UnsupportedHistory { .. }), Some(e)) => Err(e),
            (result, _) => result,
        },
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
    match crate::sat::shape(h, candidate) {
        Err(refusal) => with_refusal(e, refusal),
        Ok(()) => e,
    }
}

/// The missing certificate `e`, with the black-box checker's `refusal` of the history.
fn with_refusal(e: CheckError, refusal: CheckError) -> CheckError {
    match e {
        CheckError::MissingCertificateData { what, level, checker } => {
            CheckError::MissingCertificateData { what: format!("{what}, and {refusal}"), level, checker }
        }
        e => e,
    }
}

/// The black-box checker for a history without a certificate that is not an item history
/// (those are decided in [`check_items`]): for a list-append history (never MT-shaped)
/// Cobra at serializable, PolySI at snapshot isolation; at read committed the weak checker,
/// which refuses other histories itself; `None` otherwise.
fn black_box(h: &History, level: IsolationLevel) -> Option<CheckerKind> {
    let lists = crate::sat::lists::is_list_history(h);
    match level {
        IsolationLevel::Serializable if lists => Some(CheckerKind::Cobra),
        IsolationLevel::SnapshotIsolation if lists => Some(CheckerKind::Polysi),
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
