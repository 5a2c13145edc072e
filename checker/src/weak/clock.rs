//! Causal precedence (session order and read dependencies, transitively) as vector clocks:
//! one entry per session and node, computed in a topological order of those edges.

use isocert_history::{TxnId, Writer};

use super::reads::Reads;

/// Per node and session, the position (1-based) of the last transaction of that session
/// that causally precedes the node (0: none).
#[derive(Debug)]
pub(crate) struct Clocks {
    width: usize,
    seen: Vec<u32>,
}

impl Clocks {
    /// The vector-clock entries `Clocks::build` would allocate for `reads`.
    pub(crate) fn entries(reads: &Reads) -> usize {
        reads.in_graph.len().saturating_mul(reads.sessions.len())
    }

    /// Computes every node's clock, visiting nodes in `order` (a topological order of
    /// session order and read dependencies, every node once).
    pub(crate) fn build(reads: &Reads, order: &[u32]) -> Clocks {
        let width = reads.sessions.len();
        let mut seen = vec![0u32; Clocks::entries(reads)];
        let mut row = vec![0u32; width];
        for &t in order {
            let t = TxnId(t);
            row.fill(0);
            let preds = reads.session_predecessor(t).into_iter().chain(reads.of(t).iter().filter_map(|r| {
                match r.writer {
                    Writer::Txn(w) => Some(w),
                    Writer::Initial => None,
                }
            }));
            for p in preds {
                let from = &seen[p.index() * width..(p.index() + 1) * width];
                for (mine, theirs) in row.iter_mut().zip(from) {
                    *mine = (*mine).max(*theirs);
                }
                let s = reads.session[p.index()] as usize;
                row[s] = row[s].max(reads.position[p.index()]);
            }
            seen[t.index() * width..(t.index() + 1) * width].copy_from_slice(&row);
        }
        Clocks { width, seen }
    }

    /// The position of the last transaction of session `s` that causally precedes `t`.
    pub(crate) fn last_seen(&self, t: TxnId, s: u32) -> u32 {
        self.seen[t.index() * self.width + s as usize]
    }

    /// Whether node `a` causally precedes node `b`.
    pub(crate) fn precedes(&self, reads: &Reads, a: TxnId, b: TxnId) -> bool {
        reads.position[a.index()] <= self.last_seen(b, reads.session[a.index()])
    }
}

/// A topological order of the nodes under `edges` (Kahn's algorithm), or `None` if the
/// edges have a cycle. Nodes outside the graph are left out.
pub(crate) fn topological_order<E>(in_graph: &[bool], edges: &[(u32, u32, E)]) -> Option<Vec<u32>> {
    let n = in_graph.len();
    let mut indegree = vec![0u32; n];
    let mut start = vec![0u32; n + 1];
    for &(a, b, _) in edges {
        indegree[b as usize] += 1;
        start[a as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut targets = vec![0u32; edges.len()];
    for &(a, b, _) in edges {
        targets[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    let mut order: Vec<u32> =
        (0..n as u32).filter(|&t| in_graph[t as usize] && indegree[t as usize] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        let t = order[next] as usize;
        next += 1;
        for &b in &targets[start[t] as usize..start[t + 1] as usize] {
            indegree[b as usize] -= 1;
            if indegree[b as usize] == 0 {
                order.push(b);
            }
        }
    }
    (order.len() == in_graph.iter().filter(|&&b| b).count()).then_some(order)
}
