//! A topological-order witness that lets Emme certify predicate dependencies without
//! materialising them.
//!
//! Adya's predicate-wr edges go from every version at or before the one a predicate read
//! saw that changes its matches; predicate-rw edges go to every later such version. In a
//! long history that is O(predicate operations × versions in range) edges. But all
//! versions of an object are chained by ww edges, so if a total order `rank` is a
//! topological order of the item graph (ww, wr and, from repeatable read up, rw), the
//! predicate edges are all forward in it as soon as (1) the writer of the version seen,
//! and (2) every later version's writer ranked before the reader that changes the matches,
//! are checked; earlier and later writers follow by the chain. When every predicate edge is
//! forward, the whole graph is acyclic: no cyclic anomaly at any rule of the level. When a
//! check fails (or the item graph has a cycle), Emme falls back to materialising the edges.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use isocert_history::{Certificate, History};

use super::RawEdge;
use crate::{EdgeKind, IsolationLevel};

/// Which predicate edges a level puts in cycles, and the item edges its order must respect.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Obligations {
    /// Predicate-wr edges must be forward.
    pub(crate) read_deps: bool,
    /// Predicate-rw edges must be forward.
    pub(crate) anti_deps: bool,
    /// Item rw edges the predicate pass adds (a select's reads of the rows it returned)
    /// must be forward.
    pub(crate) item_anti_deps: bool,
}

impl Obligations {
    /// What `level`'s cycle rules need (snapshot isolation has per-edge timestamp checks
    /// and is not certified this way).
    pub(crate) fn of(level: IsolationLevel) -> Option<Obligations> {
        match level {
            IsolationLevel::ReadUncommitted => {
                Some(Obligations { read_deps: false, anti_deps: false, item_anti_deps: false })
            }
            IsolationLevel::ReadCommitted => {
                Some(Obligations { read_deps: true, anti_deps: false, item_anti_deps: false })
            }
            IsolationLevel::RepeatableRead => {
                Some(Obligations { read_deps: true, anti_deps: false, item_anti_deps: true })
            }
            IsolationLevel::Serializable => {
                Some(Obligations { read_deps: true, anti_deps: true, item_anti_deps: true })
            }
            // Snapshot isolation checks each edge against timestamps; read atomic and causal
            // are refused by `emme::check` (black-box levels).
            IsolationLevel::SnapshotIsolation
            | IsolationLevel::ReadAtomic
            | IsolationLevel::Causal
            | IsolationLevel::StrictSerializable => None,
        }
    }
}

/// A sort key per transaction for an order the dependency edges should follow: the
/// certificate's serialization order when it has one, else commit timestamps, else file order
/// (transactions without a timestamp after every timestamped one, in file order).
pub(crate) fn order_hint(h: &History, cert: &Certificate) -> Vec<u64> {
    let n = h.txns.len();
    let mut hint: Vec<u64> = (0..n as u64).map(|i| i + (1 << 40)).collect();
    if let Some(order) = &cert.serialization_order {
        for (pos, t) in order.iter().enumerate() {
            hint[t.index()] = pos as u64;
        }
    } else {
        for (t, txn) in h.txns.iter().enumerate() {
            if let Some(c) = txn.commit_ts() {
                hint[t] = (c.wall.min(1 << 38) << 2) | (c.logical.min(3));
            }
        }
    }
    hint
}

/// A topological order (rank per transaction) of the item edges `level` puts in cycles,
/// preferring the certificate's serialization order, then commit timestamps, then file
/// order; `None` when those edges have a cycle.
pub(crate) fn rank(
    h: &History,
    cert: &Certificate,
    edges: &[RawEdge],
    level: IsolationLevel,
) -> Option<Vec<u32>> {
    let n = h.txns.len();
    let with_rw = matches!(level, IsolationLevel::RepeatableRead | IsolationLevel::Serializable);
    let used = |e: &RawEdge| match e.kind {
        EdgeKind::Ww | EdgeKind::Wr => level != IsolationLevel::ReadUncommitted,
        EdgeKind::Rw => with_rw,
        _ => false,
    };
    let hint = order_hint(h, cert);
    let mut indegree = vec![0u32; n];
    let mut offsets = vec![0u32; n + 1];
    for e in edges.iter().filter(|e| used(e)) {
        indegree[e.to as usize] += 1;
        offsets[e.from as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut targets = vec![0u32; offsets[n] as usize];
    for e in edges.iter().filter(|e| used(e)) {
        targets[fill[e.from as usize] as usize] = e.to;
        fill[e.from as usize] += 1;
    }
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> =
        (0..n).filter(|&t| indegree[t] == 0).map(|t| Reverse((hint[t], t as u32))).collect();
    let mut rank = vec![u32::MAX; n];
    let mut next = 0u32;
    while let Some(Reverse((_, t))) = heap.pop() {
        rank[t as usize] = next;
        next += 1;
        for &w in &targets[offsets[t as usize] as usize..offsets[t as usize + 1] as usize] {
            indegree[w as usize] -= 1;
            if indegree[w as usize] == 0 {
                heap.push(Reverse((hint[w as usize], w)));
            }
        }
    }
    (next as usize == n).then_some(rank)
}
