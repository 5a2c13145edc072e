//! Snapshot isolation's G-SI against start-dependencies from start/commit timestamps.
//!
//! `Ti` start-depends-before `Tj` when `commit_ts(Ti) <= start_ts(Tj)` (Tj's snapshot
//! includes Ti). G-SIa (interference): a ww, wr or predicate-wr edge `Ti -> Tj` without
//! that start-dependency. G-SIb (missed effects): a cycle with exactly one
//! anti-dependency. When there is no G-SIa, every ww/wr path implies a chain of
//! start-dependencies, so such a cycle exists exactly when an anti-dependency `Tu -> Tv`
//! has `commit_ts(Tv) <= start_ts(Tu)`: Tu's snapshot included Tv yet read an older
//! version. Both checks are one pass over the edges.

use isocert_history::{History, Timestamp, TxnId};

use super::explain::explain;
use super::RawEdge;
use crate::values::ValueStore;
use crate::versions::VersionTable;
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, EdgeKind, IsolationLevel};

fn timestamps(h: &History, vt: &VersionTable) -> Result<Vec<(Timestamp, Timestamp)>, CheckError> {
    let mut out = Vec::with_capacity(h.txns.len());
    for t in h.txn_ids() {
        let txn = h.txn(t);
        if !vt.in_graph[t.index()] || txn.ops.is_empty() {
            out.push((Timestamp::default(), Timestamp::default()));
            continue;
        }
        let missing = |what: &str| CheckError::MissingCertificateData {
            what: format!(
                "{what} on committed transaction {} (snapshot isolation needs start and commit timestamps)",
                h.txn_label(t)
            ),
            level: IsolationLevel::SnapshotIsolation,
            checker: CheckerKind::Emme,
        };
        let start = txn.start_ts().ok_or_else(|| missing("start_ts"))?;
        let commit = match txn.commit_ts() {
            Some(c) => c,
            None if txn.ops.iter().any(|op| op.is_write()) => return Err(missing("commit_ts")),
            None => Timestamp { wall: u64::MAX, logical: u64::MAX },
        };
        out.push((start, commit));
    }
    Ok(out)
}

/// Whether transaction `t` writes anything (an item or predicate write).
fn writes(h: &History, t: u32) -> bool {
    h.txn(TxnId(t)).ops.iter().any(|op| op.is_write())
}

/// G-SIa between appends of one list that no read shows ([`VersionTable::following`]):
/// their order is unknown, but any order puts a write-dependency between two of them, so
/// two that overlap in time interfere whichever came first.
fn concurrent_unordered_appends(
    h: &History,
    vt: &VersionTable,
    ts: &[(Timestamp, Timestamp)],
    anomalies: &mut Vec<Anomaly>,
) {
    for tail in vt.unordered_tails() {
        let obj = vt.versions[tail.start as usize].obj;
        let mut writers: Vec<u32> = tail.map(|g| vt.versions[g as usize].writer).collect();
        writers.sort_by_key(|&w| (ts[w as usize].1, w));
        for pair in writers.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if ts[a as usize].1 <= ts[b as usize].0 {
                continue;
            }
            let (la, lb) = (h.txn_label(TxnId(a)), h.txn_label(TxnId(b)));
            anomalies.push(
                Anomaly::new(
                    AnomalyKind::GSi,
                    vec![TxnId(a), TxnId(b)],
                    format!(
                        "G-SIa (interference): {la} and {lb} both appended to {}, which no read shows, and ran \
                         concurrently ({la} committed at {} after {lb} started at {}): in either order one installed \
                         its version over the other's without having it in its snapshot",
                        h.object_label(obj),
                        ts[a as usize].1,
                        ts[b as usize].0
                    ),
                )
                .with_objects(vec![obj]),
            );
        }
    }
}

/// Adds G-SIa and G-SIb anomalies.
pub(crate) fn check(
    h: &History,
    values: &ValueStore<'_>,
    vt: &VersionTable,
    edges: &[RawEdge],
    anomalies: &mut Vec<Anomaly>,
) -> Result<(), CheckError> {
    let ts = timestamps(h, vt)?;
    for t in h.txn_ids().filter(|t| vt.in_graph[t.index()]) {
        let (s, c) = ts[t.index()];
        if s > c {
            anomalies.push(Anomaly::new(
                AnomalyKind::CertificateContradiction,
                vec![t],
                format!("{} has start_ts {s} after its commit_ts {c}", h.txn_label(t)),
            ));
        }
    }
    concurrent_unordered_appends(h, vt, &ts, anomalies);
    for e in edges {
        let (from, to) = (ts[e.from as usize], ts[e.to as usize]);
        let start_dep = |a: u32, b: u32| RawEdge {
            from: a,
            to: b,
            kind: EdgeKind::StartDep,
            op: u32::MAX,
            ver: u32::MAX,
            aux: u32::MAX,
        };
        // Labels are formatted only for an anomaly: most edges raise none.
        let labels = || (h.txn_label(TxnId(e.from)), h.txn_label(TxnId(e.to)));
        match e.kind {
            // A session predecessor that wrote nothing has no commit anyone can observe (a
            // recovery's commit_ts for it is a position it was given, not a fact): what
            // session order requires of it is that its successor's snapshot is not older.
            EdgeKind::Session if !writes(h, e.from) && from.0 > to.0 => {
                let edge = explain(h, values, vt, e);
                let (a, b) = labels();
                anomalies.push(Anomaly {
                    kind: AnomalyKind::GSi,
                    txns: vec![TxnId(e.from), TxnId(e.to)],
                    ops: Vec::new(),
                    objects: Vec::new(),
                    explanation: format!(
                        "G-SIa (interference): {b} follows {a} in their session, but started at {} before \
                         {a} started at {} (an older snapshot than its predecessor's)",
                        to.0, from.0
                    ),
                    cycle: vec![edge],
                });
            }
            EdgeKind::Session if !writes(h, e.from) => {}
            EdgeKind::Ww | EdgeKind::Wr | EdgeKind::PredicateWr | EdgeKind::Session if from.1 > to.0 => {
                let edge = explain(h, values, vt, e);
                let (a, b) = labels();
                anomalies.push(Anomaly {
                    kind: AnomalyKind::GSi,
                    txns: vec![TxnId(e.from), TxnId(e.to)],
                    ops: edge.op.into_iter().collect(),
                    objects: edge.obj.into_iter().collect(),
                    explanation: format!(
                        "G-SIa (interference): {b} depends on {a} ({}), but {a} committed at {} after {b} started at {}",
                        e.kind, from.1, to.0
                    ),
                    cycle: vec![edge],
                });
            }
            EdgeKind::Rw | EdgeKind::PredicateRw if to.1 <= from.0 => {
                let edge = explain(h, values, vt, e);
                let back = explain(h, values, vt, &start_dep(e.to, e.from));
                let (a, b) = labels();
                anomalies.push(Anomaly {
                    kind: AnomalyKind::GSi,
                    txns: vec![TxnId(e.from), TxnId(e.to)],
                    ops: edge.op.into_iter().collect(),
                    objects: edge.obj.into_iter().collect(),
                    explanation: format!(
                        "G-SIb (missed effects): {a} started at {} after {b} committed at {}, yet did not see {b}'s version",
                        from.0, to.1
                    ),
                    cycle: vec![edge, back],
                });
            }
            _ => {}
        }
    }
    Ok(())
}
