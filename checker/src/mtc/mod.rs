//! MTC: black-box checking of mini-transaction histories without a certificate (Zhang et
//! al., "Mini-transactions", ICDE 2025, Algorithm 1 with the optimisations of its §IV-C).
//!
//! A history is MT-shaped when its transactions only read and write single keys, every
//! write of a key follows a read of that key in the same transaction, and every value is
//! written once per key (never the key's initial value, never a delete). Then the version
//! order follows from the reads: the version a transaction installs comes right after the
//! one it read. From that:
//!
//! - **wr**: the unique writer of each value read;
//! - **ww**: from the writer of the version read to the transaction that read and then
//!   overwrote it (no transitive closure: the paper's Theorem 1 shows it is not needed);
//! - **rw**: from each reader of a version to every transaction that overwrote it;
//! - **so**: session order between consecutive committed transactions of a session.
//!
//! Serializability holds exactly when that graph is acyclic; snapshot isolation exactly when
//! no two transactions overwrite the same version (the Divergence pattern, a lost update)
//! and the induced graph `(so ∪ wr ∪ ww) ; rw?` is acyclic. Both are linear in the number
//! of operations. Reads that no level allows (of aborted or intermediate writes, of values
//! nobody wrote, a transaction contradicting its own earlier read or write) are reported
//! first, as Emme reports them.
//!
//! Strict serializability adds the real-time order from the clients' invocation and
//! completion times (`invoked_at` / `completed_at`) to the serializability graph through a
//! chain of auxiliary nodes, and decides lightweight-transaction histories (linearizability)
//! per key in linear time ([`realtime`]).

pub(crate) mod graph;
pub(crate) mod realtime;
mod shape;
#[cfg(test)]
pub(crate) mod tests;

use isocert_history::{
    Certificate, History, KvHistory, KvOpKind, KvValue, ObjId, OpRef, Status, TxnId, Writer,
};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::items::{self, object_label, value_label, WriteSites};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, Edge, EdgeKind, IsolationLevel, Report};
use graph::Csr;
pub(crate) use shape::{check_shape, mini_transactions};

/// One dependency edge: its kind, object and the reading operation (`u32::MAX`: none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dep {
    pub(crate) kind: EdgeKind,
    pub(crate) obj: ObjId,
    /// The op index in the reading transaction (wr: `to`, rw: `from`).
    pub(crate) op: u32,
}

/// An edge of the snapshot-isolation graph: a dependency, optionally followed by an
/// anti-dependency (index into the rw list).
#[derive(Clone, Copy, Debug)]
struct SiEdge {
    first: (u32, u32, Dep),
    then: Option<(u32, u32, Dep)>,
}

/// What the reads of an MT-shaped history say.
#[derive(Debug)]
pub(crate) struct Inference {
    /// Whether each transaction is a node: committed, or unknown and read by someone.
    pub(crate) in_graph: Vec<bool>,
    /// so, wr, ww edges.
    pub(crate) deps: Vec<(u32, u32, Dep)>,
    /// rw edges.
    pub(crate) anti: Vec<(u32, u32, Dep)>,
    /// Per (object, writer of the version read), the transactions that read it and then
    /// overwrote it.
    pub(crate) children: FxHashMap<(ObjId, Writer), Vec<TxnId>>,
    /// Every external read resolved to a committed version: reader, object, writer, op.
    pub(crate) reads: Vec<(TxnId, ObjId, Writer, u32)>,
    /// Anomalies found while resolving reads (aborted, intermediate, garbage, internal).
    pub(crate) anomalies: Vec<Anomaly>,
}

/// Resolves every read of an MT-shaped history (whose writes `sites` indexes) and builds the
/// dependency edges.
pub(crate) fn infer(kv: &KvHistory, sites: &WriteSites) -> Inference {
    let n = kv.len();
    let initial = items::initial_values(kv);
    let in_graph = items::graph_nodes(kv, sites);
    let mut inf = Inference {
        in_graph,
        deps: Vec::with_capacity(n * 3),
        anti: Vec::with_capacity(n * 2),
        children: FxHashMap::default(),
        reads: Vec::new(),
        anomalies: Vec::new(),
    };
    inf.children.reserve(n);
    let mut last_in_session: FxHashMap<u32, TxnId> = FxHashMap::default();
    // Per transaction: the object, the writer of the version its first read saw, the op.
    let mut external: Vec<(ObjId, Option<Writer>, u32)> = Vec::new();
    let mut reads: Vec<(TxnId, ObjId, Writer, u32)> = Vec::with_capacity(n * 2);
    for t in kv.txn_ids() {
        if !inf.in_graph[t.index()] {
            continue;
        }
        let ops = kv.ops(t);
        if let Some(prev) = last_in_session.insert(kv.session(t).0, t) {
            inf.deps.push((prev.0, t.0, Dep { kind: EdgeKind::Session, obj: ObjId(u32::MAX), op: u32::MAX }));
        }
        external.clear();
        // The value this transaction last read or wrote per object, for internal reads; for
        // a long transaction also indexed by object, so its ops are not scanned once per op
        // (a Cobra log of one 100,000-read transaction took 8.8 s; issue 28).
        let mut own: Vec<(ObjId, KvValue, bool)> = Vec::new();
        let long = ops.len() > items::LONG_TXN;
        let mut own_index: FxHashMap<ObjId, usize> = FxHashMap::default();
        for (i, op) in ops.iter().enumerate() {
            let (obj, value, is_read) = match op.kind() {
                KvOpKind::Read => (op.obj(), op.value(), true),
                KvOpKind::Write => (op.obj(), op.value(), false),
                KvOpKind::Append => continue,
            };
            let i = i as u32;
            let found = if long { own_index.get(&obj).copied() } else { own.iter().position(|e| e.0 == obj) };
            if let Some(entry) = found.map(|at| &mut own[at]) {
                if is_read && entry.1 != value {
                    let what = if entry.2 { "wrote" } else { "read" };
                    inf.anomalies.push(
                        Anomaly::new(
                            AnomalyKind::InternalInconsistency,
                            vec![t],
                            format!(
                                "{} read {} at op {i} after it {what} {}",
                                kv.txn_label(t),
                                value_label(kv, obj, value),
                                value_label(kv, obj, entry.1)
                            ),
                        )
                        .with_ops(vec![OpRef { txn: t, op: i }])
                        .with_objects(vec![obj]),
                    );
                }
                *entry = (obj, value, !is_read || entry.2);
                continue;
            }
            if long {
                own_index.insert(obj, own.len());
            }
            own.push((obj, value, !is_read));
            if !is_read {
                // A blind write (never in MT-shaped histories): no version read.
                continue;
            }
            // First access of obj is a read: resolve its writer.
            let init = initial[obj.index()];
            let writer = items::resolve(kv, &inf.in_graph, sites, init, t, i, obj, value, &mut inf.anomalies);
            external.push((obj, writer, i));
            if let Some(w) = writer {
                if let Writer::Txn(wt) = w {
                    inf.deps.push((wt.0, t.0, Dep { kind: EdgeKind::Wr, obj, op: i }));
                }
                reads.push((t, obj, w, i));
            }
        }
        let is_write = |o: &&isocert_history::KvOp| o.kind() == KvOpKind::Write;
        let written: FxHashSet<ObjId> =
            if long { ops.iter().filter(is_write).map(|o| o.obj()).collect() } else { FxHashSet::default() };
        for &(obj, writer, op) in &external {
            let writes = if long {
                written.contains(&obj)
            } else {
                ops.iter().filter(is_write).any(|o| o.obj() == obj)
            };
            if let (true, Some(w)) = (writes, writer) {
                inf.children.entry((obj, w)).or_default().push(t);
                if let Writer::Txn(wt) = w {
                    inf.deps.push((wt.0, t.0, Dep { kind: EdgeKind::Ww, obj, op }));
                }
            }
        }
    }
    for &(t, obj, w, op) in &reads {
        if let Some(kids) = inf.children.get(&(obj, w)) {
            for &k in kids {
                if k != t {
                    inf.anti.push((t.0, k.0, Dep { kind: EdgeKind::Rw, obj, op }));
                }
            }
        }
    }
    inf.reads = reads;
    inf
}

/// The version order the reads imply: per object, the overwriting transactions in
/// depth-first order from the initial version (a lost update puts two overwriters of one
/// version one after the other; transactions whose predecessor is unknown come last).
pub(crate) fn version_order(kv: &KvHistory, inf: &Inference) -> FxHashMap<ObjId, Vec<TxnId>> {
    let mut writers: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    let mut seen: Vec<ObjId> = Vec::new();
    for t in kv.txn_ids().filter(|t| inf.in_graph[t.index()]) {
        seen.clear();
        for op in kv.ops(t).iter().filter(|op| op.kind() == KvOpKind::Write) {
            if !seen.contains(&op.obj()) {
                seen.push(op.obj());
                writers.entry(op.obj()).or_default().push(t);
            }
        }
    }
    // Per object, the children of its versions, sorted by version: one pass over the
    // children map, rather than a lookup (a cache miss, on a large history) per writer.
    let mut versions: FxHashMap<ObjId, Vec<(Writer, &[TxnId])>> =
        FxHashMap::with_capacity_and_hasher(writers.len(), Default::default());
    for (&(obj, w), kids) in &inf.children {
        versions.entry(obj).or_default().push((w, kids));
    }
    // Whether a transaction is placed in the current object's order yet: every child of
    // an object's version writes that object, so the object's writers are exactly what
    // gets placed, and unplacing them readies the array for the next object.
    let mut placed = vec![false; kv.len()];
    let mut stack = Vec::new();
    let mut order = FxHashMap::with_capacity_and_hasher(writers.len(), Default::default());
    for (obj, ws) in writers {
        let mut children = versions.remove(&obj).unwrap_or_default();
        children.sort_unstable_by_key(|&(w, _)| w);
        let children_of = |w: Writer| match children.binary_search_by_key(&w, |&(v, _)| v) {
            Ok(at) => children[at].1,
            Err(_) => &[],
        };
        let mut out = Vec::with_capacity(ws.len());
        let roots = std::iter::once(Writer::Initial).chain(ws.iter().map(|&t| Writer::Txn(t)));
        for root in roots {
            if let Writer::Txn(t) = root {
                if placed[t.index()] {
                    continue;
                }
                placed[t.index()] = true;
                out.push(t);
            }
            stack.push(root);
            while let Some(w) = stack.pop() {
                for &k in children_of(w).iter().rev() {
                    if !placed[k.index()] {
                        placed[k.index()] = true;
                        out.push(k);
                        stack.push(Writer::Txn(k));
                    }
                }
            }
        }
        debug_assert_eq!(out.len(), ws.len(), "a child of a version of {obj:?} does not write it");
        for t in &out {
            placed[t.index()] = false;
        }
        order.insert(obj, out);
    }
    order
}

/// The certificate an MT-shaped history implies: its version order.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first transaction that is not a
/// mini-transaction (or the first value written twice).
pub fn infer_mtc_certificate(h: &History) -> Result<Certificate, CheckError> {
    let kv = mini_transactions(h)?;
    let sites = WriteSites::build(&kv);
    check_shape(&kv, &sites)?;
    let inf = infer(&kv, &sites);
    Ok(Certificate { version_order: Some(version_order(&kv, &inf)), ..Certificate::default() })
}

/// Runs MTC at strict serializability, serializable or snapshot isolation on a history, in
/// the compact model ([`mini_transactions`]).
pub(crate) fn check(h: &History, level: IsolationLevel) -> Result<Report, CheckError> {
    supported(level)?;
    let kv = mini_transactions(h)?;
    let sites = WriteSites::build(&kv);
    check_kv(&kv, level, sites)
}

/// The refusal of a level MTC does not decide.
fn supported(level: IsolationLevel) -> Result<(), CheckError> {
    if !matches!(
        level,
        IsolationLevel::StrictSerializable | IsolationLevel::Serializable | IsolationLevel::SnapshotIsolation
    ) {
        return Err(CheckError::UnsupportedLevel {
            checker: CheckerKind::Mtc,
            level,
            hint: "mtc decides strict-serializable, serializable and snapshot-isolation; for read-committed, \
                   read-atomic and causal use --checker weak, for the others give a certificate (--checker emme)",
        });
    }
    Ok(())
}

/// [`check`] on a history in the compact model, whose writes `sites` indexes.
pub(crate) fn check_kv(
    kv: &KvHistory,
    level: IsolationLevel,
    sites: WriteSites,
) -> Result<Report, CheckError> {
    supported(level)?;
    check_shape(kv, &sites)?;
    let inf = infer(kv, &sites);
    drop(sites);
    let mut report = Report::new(level, CheckerKind::Mtc);
    report.stats.txns = kv.len();
    report.stats.committed = inf.in_graph.iter().filter(|&&b| b).count();
    report.stats.ops = items::op_count(kv);
    report.stats.edges = inf.deps.len() + inf.anti.len();
    report.notes.push(
        "no certificate: the version order was inferred from the read-modify-writes of mini-transactions (MTC); \
         session order is part of the graph"
            .into(),
    );
    if kv.txn_ids().any(|t| kv.status(t) == Status::Unknown) {
        report.notes.push(
            "transactions with unknown outcome count as committed when another transaction read their write"
                .into(),
        );
    }
    report.inferred_version_order = Some(version_order(kv, &inf));
    let mut anomalies = inf.anomalies.clone();
    match level {
        IsolationLevel::Serializable => anomalies.extend(ser_cycles(kv, &inf)),
        IsolationLevel::StrictSerializable => {
            let times = realtime::real_times(kv, &inf.in_graph)?;
            report.notes.push(
                "real-time order from the clients' invoked_at / completed_at is part of the graph".into(),
            );
            if realtime::sessions_keep_real_time(kv, &inf.in_graph, &times)
                && realtime::lwt_linearizable(kv, &inf, &times) == Some(true)
            {
                report.notes.push(
                    "lightweight transactions (one compare-and-set or insert-if-absent each): linearizable, \
                     decided per key by MTC's Algorithm 2"
                        .into(),
                );
            } else {
                anomalies.extend(realtime::sser_cycles(kv, &inf, &times));
            }
        }
        _ => {
            anomalies.extend(divergences(kv, &inf));
            anomalies.extend(si_cycles(kv, &inf));
        }
    }
    report.anomalies = anomalies;
    Ok(report)
}

/// One explained edge.
pub(crate) fn explain(kv: &KvHistory, from: u32, to: u32, dep: Dep) -> Edge {
    let (a, b) = (TxnId(from), TxnId(to));
    let (la, lb) = (kv.txn_label(a), kv.txn_label(b));
    let reader = |t: TxnId| (dep.op != u32::MAX).then_some(OpRef { txn: t, op: dep.op });
    let read_value = |t: TxnId| match kv.ops(t).get(dep.op as usize) {
        Some(op) if op.kind() == KvOpKind::Read => value_label(kv, op.obj(), op.value()),
        _ => object_label(kv, dep.obj),
    };
    let (obj, op, explanation) = match dep.kind {
        EdgeKind::Session => (None, None, format!("{la} came before {lb} in their session")),
        EdgeKind::Wr => (Some(dep.obj), reader(b), format!("{lb} read {} written by {la}", read_value(b))),
        EdgeKind::Ww => (
            Some(dep.obj),
            reader(b),
            format!("{lb} read {} written by {la}, then overwrote it", read_value(b)),
        ),
        _ => (
            Some(dep.obj),
            reader(a),
            format!("{la} read {}, which {lb} read and then overwrote", read_value(a)),
        ),
    };
    Edge { from: a, to: b, kind: dep.kind, obj, op, explanation, basis: crate::EdgeBasis::of_kind(dep.kind) }
}

/// The Adya kind of a cycle of these edge kinds (session edges count as neither).
pub(crate) fn cycle_kind(kinds: impl Iterator<Item = EdgeKind>) -> AnomalyKind {
    let (mut anti, mut read) = (false, false);
    for k in kinds {
        anti |= k == EdgeKind::Rw;
        read |= k == EdgeKind::Wr || k == EdgeKind::Session;
    }
    if anti {
        AnomalyKind::G2Item
    } else if read {
        AnomalyKind::G1c
    } else {
        AnomalyKind::G0
    }
}

/// The anomaly of a cycle of explained edges: its transactions, operations and objects,
/// and `what` it means with the path spelled out (`txn_label` names a transaction).
pub(crate) fn cycle_anomaly(
    txn_label: &dyn Fn(TxnId) -> String,
    kind: AnomalyKind,
    cycle: Vec<Edge>,
    what: &str,
) -> Anomaly {
    let txns: Vec<TxnId> = cycle.iter().map(|e| e.from).collect();
    let objects = {
        let mut o: Vec<ObjId> = cycle.iter().filter_map(|e| e.obj).collect();
        o.sort_unstable();
        o.dedup();
        o
    };
    let ops = cycle.iter().filter_map(|e| e.op).collect();
    let path: Vec<String> = cycle.iter().map(|e| format!("{} -{}->", txn_label(e.from), e.kind)).collect();
    let explanation = format!("{what}: {} {}", path.join(" "), txn_label(cycle[0].from));
    Anomaly { kind, txns, ops, objects, explanation, cycle }
}

/// Serializability: one shortest cycle per strongly connected component of so ∪ wr ∪ ww ∪ rw.
fn ser_cycles(kv: &KvHistory, inf: &Inference) -> Vec<Anomaly> {
    let mut all = inf.deps.clone();
    all.extend_from_slice(&inf.anti);
    let g = Csr::build(kv.len(), &all);
    let mut out = Vec::new();
    let mut member = vec![false; kv.len()];
    for comp in g.cyclic_components() {
        comp.iter().for_each(|&n| member[n as usize] = true);
        let start = *comp.iter().min().expect("components are not empty");
        let cycle: Vec<Edge> = g
            .shortest_cycle(start, &|n| member[n as usize])
            .into_iter()
            .map(|(a, b, d)| explain(kv, a, b, d))
            .collect();
        comp.iter().for_each(|&n| member[n as usize] = false);
        let kind = cycle_kind(cycle.iter().map(|e| e.kind));
        out.push(cycle_anomaly(
            &|t| kv.txn_label(t),
            kind,
            cycle,
            "dependency cycle (no serial order explains the reads)",
        ));
    }
    out
}

/// Snapshot isolation's Divergence pattern: two transactions overwrote the same version.
pub(crate) fn divergences(kv: &KvHistory, inf: &Inference) -> Vec<Anomaly> {
    let mut found: Vec<(&(ObjId, Writer), &Vec<TxnId>)> =
        inf.children.iter().filter(|(_, kids)| kids.len() > 1).collect();
    found.sort_unstable_by_key(|(k, _)| **k);
    found
        .into_iter()
        .map(|(&(obj, w), kids)| {
            let (a, b) = (kids[0], kids[1]);
            let base = match w {
                Writer::Initial => format!("the initial version of {}", object_label(kv, obj)),
                Writer::Txn(t) => {
                    format!("the version of {} {} installed", object_label(kv, obj), kv.txn_label(t))
                }
            };
            let rw = |x: TxnId, y: TxnId| {
                let op = first_read(kv, x, obj);
                explain(kv, x.0, y.0, Dep { kind: EdgeKind::Rw, obj, op })
            };
            Anomaly {
                kind: AnomalyKind::GSi,
                txns: vec![a, b],
                ops: vec![
                    OpRef { txn: a, op: first_read(kv, a, obj) },
                    OpRef { txn: b, op: first_read(kv, b, obj) },
                ],
                objects: vec![obj],
                explanation: format!(
                    "lost update (MTC's Divergence): {} and {} both read {base} and overwrote it",
                    kv.txn_label(a),
                    kv.txn_label(b)
                ),
                cycle: vec![rw(a, b), rw(b, a)],
            }
        })
        .collect()
}

fn first_read(kv: &KvHistory, t: TxnId, obj: ObjId) -> u32 {
    kv.ops(t).iter().position(|o| o.kind() == KvOpKind::Read && o.obj() == obj).unwrap_or(0) as u32
}

/// Snapshot isolation: one shortest cycle per strongly connected component of
/// `(so ∪ wr ∪ ww) ; rw?`, each composite edge expanded back into its two dependencies.
fn si_cycles(kv: &KvHistory, inf: &Inference) -> Vec<Anomaly> {
    let n = kv.len();
    let anti = Csr::build(n, &inf.anti.iter().map(|&(a, b, d)| (a, b, (a, b, d))).collect::<Vec<_>>());
    let mut edges: Vec<(u32, u32, SiEdge)> = Vec::with_capacity(inf.deps.len() * 2);
    for &(a, b, d) in &inf.deps {
        edges.push((a, b, SiEdge { first: (a, b, d), then: None }));
        for &(x, c, rw) in anti.payloads_from(b) {
            edges.push((a, c, SiEdge { first: (a, b, d), then: Some((x, c, rw)) }));
        }
    }
    let g = Csr::build(n, &edges);
    let mut out = Vec::new();
    let mut member = vec![false; n];
    for comp in g.cyclic_components() {
        comp.iter().for_each(|&x| member[x as usize] = true);
        let start = *comp.iter().min().expect("components are not empty");
        let mut cycle = Vec::new();
        for (_, _, e) in g.shortest_cycle(start, &|x| member[x as usize]) {
            cycle.push(explain(kv, e.first.0, e.first.1, e.first.2));
            if let Some((a, b, d)) = e.then {
                cycle.push(explain(kv, a, b, d));
            }
        }
        comp.iter().for_each(|&x| member[x as usize] = false);
        let kind = if cycle.iter().any(|e| e.kind == EdgeKind::Rw) {
            AnomalyKind::GSi
        } else {
            cycle_kind(cycle.iter().map(|e| e.kind))
        };
        out.push(cycle_anomaly(
            &|t| kv.txn_label(t),
            kind,
            cycle,
            "cycle with no two anti-dependencies in a row (no snapshot order explains the reads)",
        ));
    }
    out
}
