//! Cycle search per level: when every edge goes forward in the order the certificate suggests
//! (serialization order, else commit timestamps) there is no cycle and nothing is built;
//! otherwise iterative Tarjan SCCs over the edges a level forbids in
//! cycles, then, per component, the shortest cycle (BFS) through a forbidden edge.

use isocert_history::{Certificate, History, TxnId};

use super::explain::explain;
use super::RawEdge;
use crate::values::ValueStore;
use crate::versions::VersionTable;
use crate::{Anomaly, AnomalyKind, EdgeKind, IsolationLevel};

const NONE: u32 = u32::MAX;
/// How many forbidden edges of one component are tried when looking for a short cycle.
const TRIES_PER_COMPONENT: usize = 8;

/// Edges grouped by source node (compressed sparse rows).
struct Graph {
    offsets: Vec<u32>,
    edges: Vec<u32>,
}

impl Graph {
    fn new(nodes: usize, edges: &[RawEdge]) -> Graph {
        let mut offsets = vec![0u32; nodes + 1];
        for e in edges {
            offsets[e.from as usize + 1] += 1;
        }
        for i in 0..nodes {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut out = vec![0u32; edges.len()];
        for (i, e) in edges.iter().enumerate() {
            out[fill[e.from as usize] as usize] = i as u32;
            fill[e.from as usize] += 1;
        }
        Graph { offsets, edges: out }
    }

    fn out(&self, node: u32) -> &[u32] {
        &self.edges[self.offsets[node as usize] as usize..self.offsets[node as usize + 1] as usize]
    }
}

/// Strongly connected component id of every node over edges whose kind is in `mask`
/// (iterative Tarjan; `NONE` never happens for returned ids).
fn components(graph: &Graph, edges: &[RawEdge], mask: &[EdgeKind]) -> Vec<u32> {
    let n = graph.offsets.len() - 1;
    let allowed: Vec<bool> = edges.iter().map(|e| mask.contains(&e.kind)).collect();
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![NONE; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut calls: Vec<(u32, usize)> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    for root in 0..n as u32 {
        if index[root as usize] != NONE {
            continue;
        }
        calls.push((root, 0));
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut pos)) = calls.last_mut() {
            let out = graph.out(v);
            if *pos < out.len() {
                let e = out[*pos] as usize;
                *pos += 1;
                if !allowed[e] {
                    continue;
                }
                let w = edges[e].to;
                if index[w as usize] == NONE {
                    index[w as usize] = next_index;
                    low[w as usize] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    calls.push((w, 0));
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent as usize] = low[parent as usize].min(low[v as usize]);
            }
            if low[v as usize] == index[v as usize] {
                loop {
                    let w = stack.pop().expect("Tarjan stack holds the component");
                    on_stack[w as usize] = false;
                    comp[w as usize] = next_comp;
                    if w == v {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

/// Scratch space for breadth-first searches inside one component.
struct Bfs {
    stamp: Vec<u32>,
    parent: Vec<u32>,
    generation: u32,
    queue: std::collections::VecDeque<u32>,
}

impl Bfs {
    /// The shortest path (edge ids) from `start` to `goal` staying in `start`'s component.
    fn path(&mut self, scope: &Scope<'_>, start: u32, goal: u32, limit: usize) -> Option<Vec<u32>> {
        let Scope { graph: g, edges, allowed, comp } = *scope;
        self.generation += 1;
        let c = comp[start as usize];
        self.queue.clear();
        self.queue.push_back(start);
        self.stamp[start as usize] = self.generation;
        self.parent[start as usize] = NONE;
        let mut depth_guard = 0usize;
        while let Some(v) = self.queue.pop_front() {
            if v == goal {
                let mut path = Vec::new();
                let mut at = goal;
                while self.parent[at as usize] != NONE {
                    let e = self.parent[at as usize];
                    path.push(e);
                    at = edges[e as usize].from;
                }
                path.reverse();
                return Some(path);
            }
            depth_guard += 1;
            if depth_guard > limit {
                return None;
            }
            for &e in g.out(v) {
                let w = edges[e as usize].to;
                if allowed[e as usize] && comp[w as usize] == c && self.stamp[w as usize] != self.generation {
                    self.stamp[w as usize] = self.generation;
                    self.parent[w as usize] = e;
                    self.queue.push_back(w);
                }
            }
        }
        None
    }
}

/// What a breadth-first search may traverse.
#[derive(Clone, Copy)]
struct Scope<'a> {
    graph: &'a Graph,
    edges: &'a [RawEdge],
    allowed: &'a [bool],
    comp: &'a [u32],
}

/// One kind of forbidden cycle: the edges it may use and the edge it must contain.
struct CycleRule {
    kind: AnomalyKind,
    mask: &'static [EdgeKind],
    through: &'static [EdgeKind],
    describe: &'static str,
}

const G0: CycleRule = CycleRule {
    kind: AnomalyKind::G0,
    mask: &[EdgeKind::Ww],
    through: &[EdgeKind::Ww],
    describe: "write cycle: each transaction overwrote the previous one's version",
};
// Session order (the default definition, `SessionOrder::Included`) counts as information
// flow, as MTC and PolySI count it: a cycle through it and write or read dependencies is G1c.
const G1C: CycleRule = CycleRule {
    kind: AnomalyKind::G1c,
    mask: &[EdgeKind::Ww, EdgeKind::Wr, EdgeKind::PredicateWr, EdgeKind::Session],
    through: &[EdgeKind::Wr, EdgeKind::PredicateWr, EdgeKind::Session],
    describe: "circular information flow: a cycle of write and read dependencies",
};
const G2_ITEM: CycleRule = CycleRule {
    kind: AnomalyKind::G2Item,
    mask: &[EdgeKind::Ww, EdgeKind::Wr, EdgeKind::PredicateWr, EdgeKind::Session, EdgeKind::Rw],
    through: &[EdgeKind::Rw],
    describe: "a dependency cycle with an item anti-dependency",
};
const G2: CycleRule = CycleRule {
    kind: AnomalyKind::G2,
    mask: &[
        EdgeKind::Ww,
        EdgeKind::Wr,
        EdgeKind::PredicateWr,
        EdgeKind::Session,
        EdgeKind::Rw,
        EdgeKind::PredicateRw,
    ],
    through: &[EdgeKind::PredicateRw],
    describe: "a dependency cycle with a predicate anti-dependency",
};

/// The cyclic anomalies `level` forbids.
pub(crate) fn find(
    h: &History,
    cert: &Certificate,
    values: &ValueStore<'_>,
    vt: &VersionTable,
    edges: &[RawEdge],
    level: IsolationLevel,
) -> Vec<Anomaly> {
    use IsolationLevel::*;
    let rules: &[CycleRule] = match level {
        ReadUncommitted => &[G0],
        ReadCommitted | SnapshotIsolation => &[G0, G1C],
        RepeatableRead => &[G0, G1C, G2_ITEM],
        Serializable => &[G0, G1C, G2_ITEM, G2],
        // Refused by `emme::check` before any edge is built (black-box levels).
        ReadAtomic | Causal | StrictSerializable => &[],
    };
    // The rules' masks are nested: when every edge of the widest one goes forward in the
    // order the certificate suggests, no rule has a cycle and no graph is needed.
    if let Some(widest) = rules.iter().map(|r| r.mask).max_by_key(|m| m.len()) {
        let hint = super::witness::order_hint(h, cert);
        if edges.iter().all(|e| !widest.contains(&e.kind) || hint[e.from as usize] < hint[e.to as usize]) {
            return Vec::new();
        }
    }
    let n = h.txns.len();
    let graph = Graph::new(n, edges);
    let mut bfs = Bfs { stamp: vec![0; n], parent: vec![NONE; n], generation: 0, queue: Default::default() };
    let mut out = Vec::new();
    for rule in rules {
        if !edges.iter().any(|e| rule.through.contains(&e.kind)) {
            continue;
        }
        let comp = components(&graph, edges, rule.mask);
        let allowed: Vec<bool> = edges.iter().map(|e| rule.mask.contains(&e.kind)).collect();
        let scope = Scope { graph: &graph, edges, allowed: &allowed, comp: &comp };
        let mut tried = vec![0usize; n];
        let mut best: Vec<Option<Vec<u32>>> = vec![None; n];
        let mut order: Vec<u32> = Vec::new();
        for (i, e) in edges.iter().enumerate() {
            let c = comp[e.from as usize] as usize;
            if !rule.through.contains(&e.kind)
                || comp[e.to as usize] as usize != c
                || tried[c] >= TRIES_PER_COMPONENT
            {
                continue;
            }
            tried[c] += 1;
            let limit = best[c].as_ref().map_or(usize::MAX, |_| 4 * n.min(1 << 16));
            if let Some(mut path) = bfs.path(&scope, e.to, e.from, limit) {
                path.insert(0, i as u32);
                if best[c].is_none() {
                    order.push(c as u32);
                }
                if best[c].as_ref().is_none_or(|b| path.len() < b.len()) {
                    best[c] = Some(path);
                }
            }
        }
        for c in order {
            let cycle = best[c as usize].take().expect("component with a cycle");
            let explained: Vec<_> =
                cycle.iter().map(|&e| explain(h, values, vt, &edges[e as usize])).collect();
            let txns: Vec<TxnId> = explained.iter().map(|e| e.from).collect();
            let mut objects: Vec<_> = explained.iter().filter_map(|e| e.obj).collect();
            objects.sort_unstable();
            objects.dedup();
            let names: Vec<String> = txns.iter().map(|&t| h.txn_label(t)).collect();
            out.push(Anomaly {
                kind: rule.kind,
                ops: explained.iter().filter_map(|e| e.op).collect(),
                objects,
                explanation: format!("{} ({} -> {})", rule.describe, names.join(" -> "), names[0]),
                txns,
                cycle: explained,
            });
        }
    }
    out
}
