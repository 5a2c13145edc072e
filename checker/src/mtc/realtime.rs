//! Strict serializability for MTC: serializability whose serial order also keeps the
//! real-time order (a transaction that completed before another was invoked comes first),
//! from the clients' `invoked_at` / `completed_at` (project extension of the v1 format).
//!
//! Real-time order has up to n² pairs. The graph gets them through a chain of n auxiliary
//! nodes instead, in O(n log n): the committed transactions sorted by completion,
//! `T_i → c_i` for the i-th to complete, `c_i → c_{i+1}`, and `c_j → T` for the last `T_j`
//! that completed before `T` was invoked. A path `T_a ⇝ c_a ⇝ c_j → T` exists exactly when
//! `T_a` completed before `T` was invoked, so the graph (with so, wr, ww, rw) is acyclic
//! exactly when a serial order keeps real time. A cycle's stretch through the chain is
//! reported as one real-time edge between the two transactions it joins.
//!
//! Lightweight-transaction histories (every transaction one compare-and-set or
//! insert-if-absent on one key: [`lwt_chains`]) are decided in linear time after a sort by
//! the MTC paper's Algorithm 2 instead ([`linearizability`]): there strict serializability
//! is linearizability, which is local, so each key's chain of writes is checked on its own.

use isocert_history::{KvHistory, KvOpKind, ObjId, RealTime, TxnId, Writer};
use rustc_hash::FxHashMap;

use super::{cycle_anomaly, explain, graph::Csr, Dep, Inference};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, Edge, EdgeKind};

/// A dependency of the strict-serializability graph: a history edge, or a step of the
/// real-time chain (`Dep.kind == EdgeKind::RealTime`).
type Arc = (u32, u32, Dep);

/// The real times of the graph's transactions.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first transaction of the graph without
/// `invoked_at` / `completed_at`.
pub(crate) fn real_times(kv: &KvHistory, in_graph: &[bool]) -> Result<Vec<Option<RealTime>>, CheckError> {
    real_times_for(kv, in_graph, CheckerKind::Mtc)
}

/// [`real_times`] for `checker` (the refusal names it).
///
/// # Errors
/// As [`real_times`].
pub(crate) fn real_times_for(
    kv: &KvHistory,
    in_graph: &[bool],
    checker: CheckerKind,
) -> Result<Vec<Option<RealTime>>, CheckError> {
    let mut out = Vec::with_capacity(kv.len());
    for t in kv.txn_ids() {
        let rt = kv.real_time(t);
        if in_graph[t.index()] && rt.is_none() {
            return Err(CheckError::UnsupportedHistory {
                checker,
                what: format!(
                    "{} has no invoked_at / completed_at: strict serializability needs the clients' real times \
                     of every committed transaction (isocert run records them; Jepsen's :time gives them)",
                    kv.txn_label(t)
                ),
            });
        }
        out.push(rt);
    }
    Ok(out)
}

/// The real-time chain's arcs over `n` transaction nodes; chain node `c_i` is `n + i`.
/// Returns the arcs and the number of chain nodes.
pub(crate) fn chain_arcs(n: usize, in_graph: &[bool], times: &[Option<RealTime>]) -> (Vec<Arc>, usize) {
    let chain = Dep { kind: EdgeKind::RealTime, obj: ObjId(u32::MAX), op: u32::MAX };
    let mut by_completion: Vec<(i64, u32)> = (0..n)
        .filter(|&t| in_graph[t])
        .filter_map(|t| times[t].map(|rt| (rt.completed_at, t as u32)))
        .collect();
    by_completion.sort_unstable();
    let m = by_completion.len();
    let mut arcs = Vec::with_capacity(3 * m);
    for (i, &(_, t)) in by_completion.iter().enumerate() {
        let c = (n + i) as u32;
        arcs.push((t, c, chain));
        if i + 1 < m {
            arcs.push((c, c + 1, chain));
        }
    }
    for t in (0..n).filter(|&t| in_graph[t]) {
        let Some(rt) = times[t] else { continue };
        // The transactions that completed strictly before `t` was invoked: a prefix.
        let before = by_completion.partition_point(|&(done, _)| done < rt.invoked_at);
        if before > 0 {
            arcs.push(((n + before - 1) as u32, t as u32, chain));
        }
    }
    (arcs, m)
}

/// One shortest cycle per strongly connected component of so ∪ wr ∪ ww ∪ rw ∪ real time.
pub(crate) fn sser_cycles(kv: &KvHistory, inf: &Inference, times: &[Option<RealTime>]) -> Vec<Anomaly> {
    let n = kv.len();
    let (chain, m) = chain_arcs(n, &inf.in_graph, times);
    let mut all: Vec<Arc> = Vec::with_capacity(inf.deps.len() + inf.anti.len() + chain.len());
    all.extend_from_slice(&inf.deps);
    all.extend_from_slice(&inf.anti);
    all.extend_from_slice(&chain);
    let g = Csr::build(n + m, &all);
    let mut out = Vec::new();
    let mut member = vec![false; n + m];
    for comp in g.cyclic_components() {
        comp.iter().for_each(|&x| member[x as usize] = true);
        // The smallest member is a transaction: the chain alone is acyclic.
        let start = *comp.iter().min().expect("components are not empty");
        let cycle = collapse(kv, n, times, g.shortest_cycle(start, &|x| member[x as usize]));
        comp.iter().for_each(|&x| member[x as usize] = false);
        let kind = if cycle.iter().any(|e| e.kind == EdgeKind::RealTime) {
            AnomalyKind::RealTime
        } else {
            super::cycle_kind(cycle.iter().map(|e| e.kind))
        };
        out.push(cycle_anomaly(
            &|t| kv.txn_label(t),
            kind,
            cycle,
            "dependency cycle through real-time order (no serial order explains the reads and keeps the order \
             in which transactions completed and were invoked)",
        ));
    }
    out
}

/// A cycle's arcs with each stretch through the chain made one real-time edge.
fn collapse(kv: &KvHistory, n: usize, times: &[Option<RealTime>], arcs: Vec<Arc>) -> Vec<Edge> {
    // Rotate so the cycle starts at a transaction node.
    let first = arcs.iter().position(|a| (a.0 as usize) < n).unwrap_or(0);
    let mut edges = Vec::with_capacity(arcs.len());
    let mut from_txn: Option<u32> = None;
    for &(a, b, dep) in arcs[first..].iter().chain(&arcs[..first]) {
        if dep.kind != EdgeKind::RealTime {
            edges.push(explain(kv, a, b, dep));
            continue;
        }
        if (a as usize) < n {
            from_txn = Some(a);
        }
        if (b as usize) < n {
            let from = from_txn.take().expect("a chain stretch starts at a transaction");
            edges.push(real_time_edge(kv, times, TxnId(from), TxnId(b)));
        }
    }
    edges
}

/// The edge "`a` completed before `b` was invoked".
pub(crate) fn real_time_edge(kv: &KvHistory, times: &[Option<RealTime>], a: TxnId, b: TxnId) -> Edge {
    let (ta, tb) = (times[a.index()].expect("timed"), times[b.index()].expect("timed"));
    Edge {
        from: a,
        to: b,
        kind: EdgeKind::RealTime,
        obj: None,
        op: None,
        basis: crate::EdgeBasis::Observed,
        explanation: format!(
            "{} completed (at {}) before {} was invoked (at {})",
            kv.txn_label(a),
            ta.completed_at,
            kv.txn_label(b),
            tb.invoked_at
        ),
    }
}

/// Whether real time orders every session's consecutive transactions of the graph as the
/// session does (a client's transactions run one after another). Algorithm 2 checks real time
/// only, so it decides a history only when session order adds nothing to it; otherwise the
/// graph, which has both, decides.
pub(crate) fn sessions_keep_real_time(kv: &KvHistory, in_graph: &[bool], times: &[Option<RealTime>]) -> bool {
    let mut last: FxHashMap<u32, RealTime> = FxHashMap::default();
    for t in kv.txn_ids().filter(|t| in_graph[t.index()]) {
        let Some(rt) = times[t.index()] else { continue };
        if let Some(prev) = last.insert(kv.session(t).index() as u32, rt) {
            if prev.completed_at >= rt.invoked_at {
                return false;
            }
        }
    }
    true
}

/// One lightweight transaction: a compare-and-set (read, then write of the same key), a
/// failed compare-and-set (a read), or an insert-if-absent (a read of absent, then a write).
#[derive(Clone, Copy, Debug)]
struct Lwt {
    txn: TxnId,
    /// The version it read.
    read: Writer,
    /// Whether it installed a version.
    writes: bool,
}

/// Per key, the lightweight transactions of a history whose every transaction in the graph
/// is one: at most one read and at most one write, of one key, the read first. `None` when
/// some transaction is not.
fn lwt_ops(kv: &KvHistory, inf: &Inference) -> Option<FxHashMap<ObjId, Vec<Lwt>>> {
    let read_of: FxHashMap<TxnId, Writer> = inf.reads.iter().map(|&(t, _, w, _)| (t, w)).collect();
    let mut by_key: FxHashMap<ObjId, Vec<Lwt>> = FxHashMap::default();
    for t in kv.txn_ids().filter(|t| inf.in_graph[t.index()]) {
        let (obj, writes) = match kv.ops(t) {
            [read] if read.kind() == KvOpKind::Read => (read.obj(), false),
            [read, write]
                if read.kind() == KvOpKind::Read
                    && write.kind() == KvOpKind::Write
                    && read.obj() == write.obj() =>
            {
                (read.obj(), true)
            }
            _ => return None,
        };
        by_key.entry(obj).or_default().push(Lwt { txn: t, read: *read_of.get(&t)?, writes });
    }
    Some(by_key)
}

/// Linearizability of a lightweight-transaction history (MTC's Algorithm 2, extended to
/// failed compare-and-sets), or `None` when the history is not one. Per key, the writes
/// form one chain from the initial version, each reading its predecessor's version; reads
/// of a version sit between its writer and the next write. The chain fixes a rank per
/// transaction (a writer, then the readers of its version), and the history is linearizable
/// exactly when no transaction completed before one of lower rank was invoked: one pass
/// over the ranks with the latest invocation so far decides it. The caller explains a
/// violation with the general graph, which finds the same cycles.
pub(crate) fn lwt_linearizable(kv: &KvHistory, inf: &Inference, times: &[Option<RealTime>]) -> Option<bool> {
    if !inf.anomalies.is_empty() {
        return None;
    }
    let by_key = lwt_ops(kv, inf)?;
    let time = |t: TxnId| times[t.index()].expect("every graph transaction is timed");
    for ops in by_key.values() {
        let mut next: FxHashMap<Writer, TxnId> = FxHashMap::default();
        let mut readers: FxHashMap<Writer, Vec<TxnId>> = FxHashMap::default();
        for op in ops {
            if op.writes {
                if next.insert(op.read, op.txn).is_some() {
                    // Two writes of one version (MTC's Divergence): no chain.
                    return Some(false);
                }
            } else {
                readers.entry(op.read).or_default().push(op.txn);
            }
        }
        // Walk the chain from the initial version, rank by rank; `latest` is the latest
        // invocation among lower ranks.
        let mut latest = i64::MIN;
        let mut at = Writer::Initial;
        let mut placed = 0;
        loop {
            let group = readers.get(&at).map(Vec::as_slice).unwrap_or(&[]);
            if group.iter().any(|&r| time(r).completed_at < latest) {
                return Some(false);
            }
            latest = group.iter().map(|&r| time(r).invoked_at).fold(latest, i64::max);
            placed += group.len();
            let Some(&w) = next.get(&at) else { break };
            if time(w).completed_at < latest {
                return Some(false);
            }
            latest = latest.max(time(w).invoked_at);
            placed += 1;
            at = Writer::Txn(w);
        }
        if placed != ops.len() {
            // A write or read of a version off the chain (a cycle of writes): not
            // linearizable; the graph names the cycle.
            return Some(false);
        }
    }
    Some(true)
}
