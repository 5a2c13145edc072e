//! Black-box read committed, read atomic and causal consistency for key-value histories
//! with unique written values and no certificate, in near-linear time (the approach of
//! AWDIT, Møldrup and Pavlogiannis, "Optimal Isolation Checking", PLDI 2025, on Biswas and
//! Enea's axiomatic definitions).
//!
//! 1. Reads are resolved by value as MTC and the SAT checkers do ([`reads`]); reads no
//!    level allows (aborted, intermediate, garbage, a transaction contradicting its own
//!    write) are reported as they report them. Every read is external unless the
//!    transaction wrote the object before it, so a transaction may read one object twice
//!    from two writers (read committed allows it; the stronger levels' axioms refuse it).
//! 2. Session order and read dependencies must be acyclic (the commit order contains them);
//!    a cycle there is `g1c`, circular information flow.
//! 3. The level's axiom forces write orders ([`saturate`]); the level holds exactly when
//!    session order, read dependencies and those orders are acyclic. One shortest cycle per
//!    strongly connected component is reported, each forced order explained by the read that
//!    forces it. A read of the initial version that some transaction's write had to precede
//!    is reported alone, as a two-step cycle through an anti-dependency.
//!
//! Read committed is linear in the operations for transactions of bounded size (each read
//! is compared with the distinct writers read before it in its transaction), read atomic
//! likewise, and causal consistency costs one vector clock per transaction, O(n · sessions)
//! time and memory, plus a binary search per read and session.

mod clock;
mod reads;
mod saturate;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use isocert_history::{History, KvHistory, KvOpKind, ObjId, OpRef, Status, TxnId, Writer};
use rustc_hash::FxHashMap;

use crate::items::{self, object_label, value_label, WriteSites};
use crate::mtc::graph::Csr;
use crate::mtc::{cycle_anomaly, cycle_kind};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, Edge, EdgeKind, IsolationLevel, Report};
use clock::{topological_order, Clocks};
use reads::Reads;
use saturate::{Forced, Saturation, SessionWriters, Via};

/// Vector-clock entries (u32 each) causal consistency may allocate: 4 GiB.
const MAX_CLOCK_ENTRIES: usize = 1 << 30;

/// One edge of the graph: session order, a read dependency, or a forced write order. Eight
/// bytes: a forced order is named by its index, so an edge takes 16 bytes, not 32 (the edge
/// list is the checker's largest array at read committed).
#[derive(Clone, Copy, Debug)]
enum Why {
    /// `from` came before `to` in their session.
    Session,
    /// `to` read what `from` wrote, at this op.
    Read(u32),
    /// `from`'s write of an object must precede `to`'s: the forced order at this index.
    Order(u32),
    /// `from`'s append to this list came before `to`'s: a list read shows it, or no read
    /// shows `to`'s append (list-append histories, [`crate::sat::lists`]).
    Given(ObjId),
}

/// The anomaly kind of a forced-order cycle at `level`, or the refusal of another level.
fn violation_kind(level: IsolationLevel) -> Result<AnomalyKind, CheckError> {
    Ok(match level {
        IsolationLevel::ReadCommitted => AnomalyKind::NonMonotonicRead,
        IsolationLevel::ReadAtomic => AnomalyKind::FracturedRead,
        IsolationLevel::Causal => AnomalyKind::CausalityViolation,
        _ => return Err(CheckError::UnsupportedLevel {
            checker: CheckerKind::Weak,
            level,
            hint: "weak checks read-committed, read-atomic and causal; without a certificate use mtc, cobra \
                       or polysi for serializable and snapshot-isolation",
        }),
    })
}

/// Runs the weak checker at read committed, read atomic or causal on a history, in the
/// compact model ([`items::item_history`]).
pub(crate) fn check(h: &History, level: IsolationLevel) -> Result<Report, CheckError> {
    let kind = violation_kind(level)?;
    if crate::sat::lists::is_list_history(h) {
        let lists = crate::sat::lists::as_items(h);
        let mut given: Vec<(ObjId, TxnId, TxnId)> = lists.after.clone();
        for (&obj, writers) in &lists.order {
            given.extend(writers.windows(2).map(|w| (obj, w[0], w[1])));
        }
        given.sort_unstable();
        let kv = items::unique_items(&lists.history, CheckerKind::Weak)?;
        let sites = WriteSites::build(&kv);
        let mut report = check_items(&kv, level, kind, &given, sites)?;
        report.notes.insert(
            0,
            format!(
                "list-append: each list read is checked as a read of its last element, and the {} order(s) of \
                 appends the list reads show (each list's longest read, and every append no read shows after \
                 them) are part of the commit order",
                given.len()
            ),
        );
        let mut anomalies = lists.anomalies;
        anomalies.append(&mut report.anomalies);
        report.anomalies = anomalies;
        if !report.anomalies.is_empty() {
            report.inferred_version_order = None;
        }
        return Ok(report);
    }
    let kv = items::unique_items(h, CheckerKind::Weak)?;
    let sites = WriteSites::build(&kv);
    check_items(&kv, level, kind, &[], sites)
}

/// [`check`] on an item history in the compact model (no list appends: those are turned
/// into items in the general model, by [`check`]), whose writes `sites` indexes.
pub(crate) fn check_kv(
    kv: &KvHistory,
    level: IsolationLevel,
    sites: WriteSites,
) -> Result<Report, CheckError> {
    check_items(kv, level, violation_kind(level)?, &[], sites)
}

/// [`check`] on a history of item reads and writes; `given`: write orders known to hold
/// (`(key, a, b)`: `a`'s version before `b`'s), part of the commit order.
fn check_items(
    kv: &KvHistory,
    level: IsolationLevel,
    kind: AnomalyKind,
    given: &[(ObjId, TxnId, TxnId)],
    sites: WriteSites,
) -> Result<Report, CheckError> {
    items::unique_values(kv, CheckerKind::Weak, &sites)?;
    let reads = Reads::resolve(kv, &sites);
    // Every read names its writer now; the index of write sites is not needed again.
    drop(sites);
    let mut report = Report::new(level, CheckerKind::Weak);
    report.stats.txns = kv.len();
    report.stats.committed = reads.in_graph.iter().filter(|&&b| b).count();
    report.stats.ops = items::op_count(kv);
    report.notes.push(
        "no certificate: reads resolved by value; Biswas and Enea's axioms, session order included (weak)"
            .into(),
    );
    let mut anomalies = reads.anomalies.clone();
    let n = kv.len();
    let given_edges = || {
        given
            .iter()
            .filter(|(_, a, b)| reads.in_graph[a.index()] && reads.in_graph[b.index()])
            .map(|&(obj, a, b)| (a.0, b.0, Why::Given(obj)))
    };
    // The edge list is allocated once at its final length where the forced orders are known
    // before it (read committed, read atomic): growing it past its capacity copied it into
    // twice its size, a third of the peak memory at read committed.
    let (mut edges, mut sat) = match level {
        IsolationLevel::ReadCommitted | IsolationLevel::ReadAtomic => {
            let sat = if level == IsolationLevel::ReadCommitted {
                saturate::read_committed(&reads)
            } else {
                saturate::read_atomic(&reads)
            };
            (base_edges(&reads, sat.edges.len() + given_edges().count()), sat)
        }
        _ => {
            // Causal consistency needs a topological order of session order and reads for
            // its clocks; the other levels find a cycle there only if the final graph has one.
            let mut edges = base_edges(&reads, 0);
            let Some(order) = topological_order(&reads.in_graph, &edges) else {
                return Ok(information_flow(kv, report, anomalies, &edges));
            };
            let entries = Clocks::entries(&reads);
            if entries > MAX_CLOCK_ENTRIES {
                return Err(CheckError::UnsupportedHistory {
                    checker: CheckerKind::Weak,
                    what: format!(
                        "causal consistency keeps one clock entry per transaction and session: {} transactions × \
                         {} sessions is over {MAX_CLOCK_ENTRIES} entries",
                        kv.len(),
                        reads.sessions.len()
                    ),
                });
            }
            let clocks = Clocks::build(&reads, &order);
            let sat = saturate::causal(&reads, &SessionWriters::build(&reads), &clocks);
            edges.reserve_exact(sat.edges.len() + given_edges().count());
            (edges, sat)
        }
    };
    let base_len = edges.len();
    let forced = std::mem::take(&mut sat.edges);
    let forced_len = forced.len();
    edges.extend(forced.iter().enumerate().map(|(i, &(a, b, _))| (a, b, Why::Order(i as u32))));
    edges.extend(given_edges());
    // Acyclic (the common case) is decided by Kahn's algorithm alone; the graphs that
    // explain counterexamples are built only when there is something to explain.
    let topo = topological_order(&reads.in_graph, &edges);
    let cyclic = topo.is_none();
    if cyclic
        && level != IsolationLevel::Causal
        && topological_order(&reads.in_graph, &edges[..base_len]).is_none()
    {
        edges.truncate(base_len);
        return Ok(information_flow(kv, report, anomalies, &edges));
    }
    report.stats.edges = edges.len();
    report.notes.push(format!(
        "{} external read(s) forced {} write order(s) between transactions; {} read(s) of an initial version \
         came after a write they had to see",
        reads.len(),
        forced_len,
        sat.initial.len()
    ));
    if cyclic || !sat.initial.is_empty() {
        let base = Csr::build(n, &edges[..base_len]);
        anomalies.extend(initial_reads(kv, &reads, &base, &sat, kind));
        if cyclic {
            anomalies.extend(cycles(kv, &Csr::build(n, &edges), &base, &forced, kind));
        }
    }
    if let (Some(order), true) = (topo, anomalies.is_empty()) {
        report.inferred_version_order = Some(version_order(kv, &reads.in_graph, &order));
    }
    report.anomalies = anomalies;
    Ok(report)
}

/// The version order a valid verdict implies: every object's writers in the order of a
/// topological order of session order, reads and the forced write orders (a commit order
/// the level's axiom accepts), for `--certificate-out`.
fn version_order(kv: &KvHistory, in_graph: &[bool], order: &[u32]) -> FxHashMap<ObjId, Vec<TxnId>> {
    let mut out: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for &t in order {
        let t = TxnId(t);
        if !in_graph[t.index()] || kv.status(t) != Status::Committed {
            continue;
        }
        for op in kv.ops(t).iter().filter(|op| op.kind() == KvOpKind::Write) {
            let writers = out.entry(op.obj()).or_default();
            if writers.last() != Some(&t) {
                writers.push(t);
            }
        }
    }
    out
}

/// The report when session order and reads alone have a cycle (`g1c`): no write order is
/// inferred.
fn information_flow(
    kv: &KvHistory,
    mut report: Report,
    mut anomalies: Vec<Anomaly>,
    base: &[(u32, u32, Why)],
) -> Report {
    report.stats.edges = base.len();
    let graph = Csr::build(kv.len(), base);
    anomalies.extend(cycles(kv, &graph, &graph, &[], AnomalyKind::G1c));
    report.notes.push("session order and reads have a cycle: no write order was inferred".into());
    report.anomalies = anomalies;
    report
}

/// Session order between consecutive nodes of a session, and a read dependency per read.
/// `extra`: room for the edges that will be added after them.
fn base_edges(reads: &Reads, extra: usize) -> Vec<(u32, u32, Why)> {
    let mut edges =
        Vec::with_capacity(reads.len() + reads.sessions.iter().map(Vec::len).sum::<usize>() + extra);
    for session in &reads.sessions {
        for pair in session.windows(2) {
            edges.push((pair[0].0, pair[1].0, Why::Session));
        }
        for &t in session {
            for read in reads.of(t) {
                if let Writer::Txn(w) = read.writer {
                    edges.push((w.0, t.0, Why::Read(read.op)));
                }
            }
        }
    }
    edges
}

/// One shortest cycle per cyclic strongly connected component of `graph`, explained; a
/// cycle with a forced order is of kind `kind`, one without is `g1c`. `forced`: the forced
/// orders [`Why::Order`] names.
fn cycles(
    kv: &KvHistory,
    graph: &Csr<Why>,
    base: &Csr<Why>,
    forced: &[(u32, u32, Forced)],
    kind: AnomalyKind,
) -> Vec<Anomaly> {
    let mut member = vec![false; graph.nodes()];
    let mut out = Vec::new();
    for comp in graph.cyclic_components() {
        comp.iter().for_each(|&n| member[n as usize] = true);
        let start = *comp.iter().min().expect("components are not empty");
        let cycle = graph.shortest_cycle(start, &|n| member[n as usize]);
        comp.iter().for_each(|&n| member[n as usize] = false);
        let any_forced = cycle.iter().any(|e| matches!(e.2, Why::Order(_) | Why::Given(_)));
        let edges: Vec<Edge> =
            cycle.iter().map(|&(a, b, why)| explain(kv, base, forced, a, b, why)).collect();
        let (kind, what) = if any_forced {
            (kind, "no commit order respects session order, reads and the write orders they force")
        } else {
            (
                cycle_kind(edges.iter().map(|e| e.kind)),
                "session order and reads form a cycle (circular information flow)",
            )
        };
        out.push(cycle_anomaly(&|t| kv.txn_label(t), kind, edges, what));
    }
    out
}

/// Reads of an initial version that a write had to precede: one anomaly per reading
/// transaction, the path from the writer to the reader closed by the anti-dependency.
fn initial_reads(
    kv: &KvHistory,
    reads: &Reads,
    base: &Csr<Why>,
    sat: &Saturation,
    kind: AnomalyKind,
) -> Vec<Anomaly> {
    let mut reported: Vec<bool> = vec![false; reads.in_graph.len()];
    let mut out = Vec::new();
    for &(t2, why) in &sat.initial {
        if std::mem::replace(&mut reported[why.reader.index()], true) {
            continue;
        }
        let mut edges = precedence(kv, base, t2, why);
        edges.push(Edge {
            from: why.reader,
            to: t2,
            kind: EdgeKind::Rw,
            obj: Some(why.obj),
            op: Some(OpRef { txn: why.reader, op: why.op }),
            basis: crate::EdgeBasis::Derived,
            explanation: format!(
                "{} read the initial version of {} at op {}, which {} overwrote",
                kv.txn_label(why.reader),
                object_label(kv, why.obj),
                why.op,
                kv.txn_label(t2)
            ),
        });
        out.push(cycle_anomaly(
            &|t| kv.txn_label(t),
            kind,
            edges,
            "a read saw the initial version although a write it had to see came before it",
        ));
    }
    out
}

/// The edges by which `t2` precedes the reader of `why`, as the level's premise says.
fn precedence(kv: &KvHistory, base: &Csr<Why>, t2: TxnId, why: Forced) -> Vec<Edge> {
    match why.via {
        Via::EarlierRead(op) | Via::Read(op) => {
            vec![explain(kv, base, &[], t2.0, why.reader.0, Why::Read(op))]
        }
        Via::Session => vec![explain(kv, base, &[], t2.0, why.reader.0, Why::Session)],
        Via::Causal => path(base, t2.0, why.reader.0)
            .into_iter()
            .map(|(a, b, w)| explain(kv, base, &[], a, b, w))
            .collect(),
    }
}

/// A shortest path of session order and reads from `from` to `to` (breadth-first).
fn path(base: &Csr<Why>, from: u32, to: u32) -> Vec<(u32, u32, Why)> {
    let mut parent: rustc_hash::FxHashMap<u32, (u32, Why)> = rustc_hash::FxHashMap::default();
    let mut queue = VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        if v == to {
            break;
        }
        for (&w, &why) in base.targets_from(v).iter().zip(base.payloads_from(v)) {
            if w != from && !parent.contains_key(&w) {
                parent.insert(w, (v, why));
                queue.push_back(w);
            }
        }
    }
    let mut out = Vec::new();
    let mut at = to;
    while at != from {
        let Some(&(p, why)) = parent.get(&at) else { return Vec::new() };
        out.push((p, at, why));
        at = p;
    }
    out.reverse();
    out
}

/// One explained edge; `forced`: the forced orders [`Why::Order`] names.
fn explain(
    kv: &KvHistory,
    base: &Csr<Why>,
    forced: &[(u32, u32, Forced)],
    from: u32,
    to: u32,
    why: Why,
) -> Edge {
    let (a, b) = (TxnId(from), TxnId(to));
    let (la, lb) = (kv.txn_label(a), kv.txn_label(b));
    let read_at = |t: TxnId, op: u32| match kv.ops(t).get(op as usize) {
        Some(read) if read.kind() == KvOpKind::Read => {
            let obj = read.obj();
            (Some(obj), format!("{} = {}", object_label(kv, obj), value_label(kv, obj, read.value())))
        }
        _ => (None, format!("op {op}")),
    };
    match why {
        Why::Session => Edge {
            from: a,
            to: b,
            kind: EdgeKind::Session,
            obj: None,
            op: None,
            basis: crate::EdgeBasis::Observed,
            explanation: format!("{la} came before {lb} in their session"),
        },
        Why::Read(op) => {
            let (obj, value) = read_at(b, op);
            Edge {
                from: a,
                to: b,
                kind: EdgeKind::Wr,
                obj,
                op: Some(OpRef { txn: b, op }),
                basis: crate::EdgeBasis::Observed,
                explanation: format!("{lb} read {value} written by {la}"),
            }
        }
        Why::Given(obj) => Edge {
            from: a,
            to: b,
            kind: EdgeKind::Ww,
            obj: Some(obj),
            op: None,
            explanation: format!(
                "{la}'s append to {} came before {lb}'s: a read of the list shows it, or no read shows {lb}'s \
                 append",
                object_label(kv, obj)
            ),
            basis: crate::EdgeBasis::Derived,
        },
        Why::Order(i) => {
            let f = forced[i as usize].2;
            let t3 = f.reader;
            let l3 = kv.txn_label(t3);
            let (_, value) = read_at(t3, f.op);
            let because = match f.via {
                Via::EarlierRead(op) => format!(
                    "after it had read {} written by {la} at op {op} (read committed: no read sees an older \
                     version than an earlier read of its transaction)",
                    read_at(t3, op).1
                ),
                Via::Session => format!("though {la} came before {l3} in its session (read atomic)"),
                Via::Read(op) => format!(
                    "though it read {} written by {la} at op {op} (read atomic: all of a transaction's writes or \
                     none)",
                    read_at(t3, op).1
                ),
                Via::Causal => {
                    let chain: Vec<String> =
                        path(base, from, t3.0).iter().map(|&(_, to, _)| kv.txn_label(TxnId(to))).collect();
                    format!("though {la} causally precedes {l3} ({la} -> {}) (causal consistency)", chain.join(" -> "))
                }
            };
            Edge {
                from: a,
                to: b,
                kind: EdgeKind::Ww,
                obj: Some(f.obj),
                op: Some(OpRef { txn: t3, op: f.op }),
                basis: crate::EdgeBasis::Derived,
                explanation: format!(
                    "{la}'s write of {} must come before {lb}'s: {l3} read {value} written by {lb} at op {} {because}",
                    object_label(kv, f.obj),
                    f.op
                ),
            }
        }
    }
}
