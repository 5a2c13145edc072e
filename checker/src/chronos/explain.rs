//! Turning axiom violations into [`Anomaly`]s whose explanations name the axiom, the
//! transaction, the object and the values expected and seen.

use isocert_history::{KvHistory, ObjId, OpRef, TxnId};

use super::state::ObjState;
use super::timeline::Span;
use crate::{Anomaly, AnomalyKind};

/// Who installed the state an external read should have seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The initial value (the paper's initial transaction).
    Initial,
    /// A checked transaction's commit.
    Txn(TxnId),
}

fn span_text(kv: &KvHistory, t: TxnId) -> String {
    match (kv.start_ts(t), kv.commit_ts(t)) {
        (Some(s), Some(c)) if s == c => format!("[{s}]"),
        (Some(s), Some(c)) => format!("[{s}, {c}]"),
        _ => "[?]".to_string(),
    }
}

/// Session: `t` starts before its session predecessor `prev` commits.
pub(crate) fn session(kv: &KvHistory, prev: TxnId, t: TxnId, serializable: bool) -> Anomaly {
    let when = if serializable { "commits" } else { "starts" };
    Anomaly::new(
        AnomalyKind::Session,
        vec![prev, t],
        format!(
            "Session: {t_label} {t_span} {when} before its session predecessor {p_label} {p_span} commits, \
             so the session's earlier transaction is not visible to it",
            t_label = kv.txn_label(t),
            t_span = span_text(kv, t),
            p_label = kv.txn_label(prev),
            p_span = span_text(kv, prev),
        ),
    )
}

/// Int: an internal read returned something other than the transaction's own last read or write.
pub(crate) fn int(
    kv: &KvHistory,
    t: TxnId,
    op: u32,
    obj: ObjId,
    expected: &ObjState,
    seen: &ObjState,
) -> Anomaly {
    Anomaly::new(
        AnomalyKind::Int,
        vec![t],
        format!(
            "Int: {} (operation {}) read {} = {} but its own earlier read or write of it gives {} \
             (expected {}, seen {})",
            kv.txn_label(t),
            op + 1,
            kv.dict().object_label(obj),
            seen.label(kv),
            expected.label(kv),
            expected.label(kv),
            seen.label(kv),
        ),
    )
    .with_ops(vec![OpRef { txn: t, op }])
    .with_objects(vec![obj])
}

/// A read: its transaction, its index in the transaction's operations and its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadAt {
    pub(crate) txn: TxnId,
    pub(crate) op: u32,
    pub(crate) obj: ObjId,
}

/// Ext: an external read did not return the snapshot's latest committed value.
pub(crate) fn ext(
    kv: &KvHistory,
    read: ReadAt,
    expected: &ObjState,
    source: Source,
    seen: &ObjState,
    serializable: bool,
) -> Anomaly {
    let ReadAt { txn: t, op, obj } = read;
    let at = if serializable {
        format!("its commit timestamp {}", kv.commit_ts(t).map(|c| c.to_string()).unwrap_or_default())
    } else {
        format!("its start timestamp {}", kv.start_ts(t).map(|c| c.to_string()).unwrap_or_default())
    };
    let (by, mut txns) = match source {
        Source::Initial => ("the initial value".to_string(), vec![t]),
        Source::Txn(w) => (format!("written by {} {}", kv.txn_label(w), span_text(kv, w)), vec![t, w]),
    };
    txns.dedup();
    Anomaly::new(
        AnomalyKind::Ext,
        txns,
        format!(
            "Ext: {} (operation {}) read {} = {}, but the last value committed before {at} is {} ({by}) \
             (expected {}, seen {})",
            kv.txn_label(t),
            op + 1,
            kv.dict().object_label(obj),
            seen.label(kv),
            expected.label(kv),
            expected.label(kv),
            seen.label(kv),
        ),
    )
    .with_ops(vec![OpRef { txn: t, op }])
    .with_objects(vec![obj])
}

/// NoConflict: two concurrent transactions both wrote `obj`; `first` commits first.
pub(crate) fn no_conflict(
    kv: &KvHistory,
    first: TxnId,
    second: TxnId,
    obj: ObjId,
    spans: (Span, Span),
) -> Anomaly {
    let why = if spans.0.is_atomic() && spans.1.is_atomic() {
        "both run atomically at the same timestamp, so each would see the other"
    } else {
        "neither committed before the other started"
    };
    Anomaly::new(
        AnomalyKind::NoConflict,
        vec![first, second],
        format!(
            "NoConflict: {} {} and {} {} both wrote {} and are concurrent: {why}",
            kv.txn_label(first),
            span_text(kv, first),
            kv.txn_label(second),
            span_text(kv, second),
            kv.dict().object_label(obj),
        ),
    )
    .with_objects(vec![obj])
}

/// A stable order of anomalies (kind, transactions, objects, operations), so that reports
/// of Chronos and Aion compare equal however transactions arrived.
pub(crate) fn sort(anomalies: &mut [Anomaly]) {
    anomalies
        .sort_by(|a, b| (a.kind, &a.txns, &a.objects, &a.ops).cmp(&(b.kind, &b.txns, &b.objects, &b.ops)));
}
