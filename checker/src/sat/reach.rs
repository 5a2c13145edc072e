//! Reachability for pruning: a topological order (Kahn's algorithm, smallest transaction id
//! first among the ready ones) and batched "does `from` reach `to`" queries answered with
//! bit-parallel sweeps over the order.
//!
//! A full transitive closure needs n² bits (1.25 GB at 100,000 transactions); the queries
//! only ask about some targets, so the targets get bit columns and the columns are swept in
//! chunks whose bitsets fit in [`CHUNK_BYTES`]: the time is edges × targets / 64 either way,
//! the memory stays bounded.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::mtc::graph::Csr;

/// Memory for one chunk's bitsets (one row of words per node).
const CHUNK_BYTES: usize = 64 << 20;

/// A topological order of `g`, ties broken by the smallest node id, or `None` when `g` has
/// a cycle.
pub(crate) fn topological_order<E: Copy>(g: &Csr<E>) -> Option<Vec<u32>> {
    let n = g.nodes();
    let mut indegree = vec![0u32; n];
    for v in 0..n as u32 {
        for &w in g.targets_from(v) {
            indegree[w as usize] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> =
        (0..n as u32).filter(|&v| indegree[v as usize] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(v)) = ready.pop() {
        order.push(v);
        for &w in g.targets_from(v) {
            indegree[w as usize] -= 1;
            if indegree[w as usize] == 0 {
                ready.push(Reverse(w));
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// For each query `(from, to)`, whether a path of one or more edges leads from `from` to
/// `to` in the acyclic graph `g` whose topological order is `order`; `from == to` counts as
/// reachable (the new edge would close a cycle on itself).
pub(crate) fn reaches<E: Copy>(g: &Csr<E>, order: &[u32], queries: &[(u32, u32)]) -> Vec<bool> {
    let n = g.nodes();
    let mut answer: Vec<bool> = queries.iter().map(|&(from, to)| from == to).collect();
    // Distinct targets become columns.
    let mut column = vec![u32::MAX; n];
    let mut targets: Vec<u32> = Vec::new();
    for &(from, to) in queries {
        if from != to && column[to as usize] == u32::MAX {
            column[to as usize] = targets.len() as u32;
            targets.push(to);
        }
    }
    if targets.is_empty() {
        return answer;
    }
    let words = (CHUNK_BYTES / 8 / n.max(1)).clamp(1, targets.len().div_ceil(64));
    let per_chunk = words * 64;
    let mut by_chunk: Vec<Vec<usize>> = vec![Vec::new(); targets.len().div_ceil(per_chunk)];
    for (i, &(from, to)) in queries.iter().enumerate() {
        if from != to {
            by_chunk[column[to as usize] as usize / per_chunk].push(i);
        }
    }
    let mut bits = vec![0u64; n * words];
    for (chunk, asked) in by_chunk.iter().enumerate() {
        let first = chunk * per_chunk;
        bits.iter_mut().for_each(|w| *w = 0);
        for &v in order.iter().rev() {
            let row = v as usize * words;
            for &w in g.targets_from(v) {
                let (src, dst) = (w as usize * words, row);
                for k in 0..words {
                    bits[dst + k] |= bits[src + k];
                }
                let c = column[w as usize];
                if c != u32::MAX && (c as usize) >= first && (c as usize) < first + per_chunk {
                    let bit = c as usize - first;
                    bits[row + bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        for &i in asked {
            let (from, to) = queries[i];
            let bit = column[to as usize] as usize - first;
            answer[i] = bits[from as usize * words + bit / 64] & (1 << (bit % 64)) != 0;
        }
    }
    answer
}

/// Nodes of no chain (no edges at all).
const NO_CHAIN: u32 = u32::MAX;

/// Reachability in an acyclic graph by a chain decomposition: the nodes are covered by
/// chains (paths of the graph; a session's transactions in order, mostly), and each node
/// keeps, per chain, the earliest position on it that it reaches. A query is then one
/// lookup: `from` reaches `to` when its earliest position on `to`'s chain is at or before
/// `to`'s. The index takes nodes × chains × 4 bytes and edges × chains steps to build, so
/// it is built only when the chains are few ([`ChainIndex::build`] says when).
#[derive(Debug)]
pub(crate) struct ChainIndex {
    /// Chains.
    chains: usize,
    /// Each node's chain, or [`NO_CHAIN`].
    chain: Vec<u32>,
    /// Each node's position on its chain.
    pos: Vec<u32>,
    /// Per node and chain, the earliest position reached by a path of one or more edges
    /// (`u32::MAX`: none).
    earliest: Vec<u32>,
}

impl ChainIndex {
    /// Builds the index of the acyclic graph `g` with topological order `order`, or `None`
    /// when it would take more than `max_bytes`. `hint`: a chain follows an edge to a node
    /// of the same hint (session) first.
    pub(crate) fn build<E: Copy>(g: &Csr<E>, order: &[u32], hint: &[u32], max_bytes: usize) -> Option<Self> {
        let n = g.nodes();
        let mut has_edge = vec![false; n];
        for v in 0..n as u32 {
            for &w in g.targets_from(v) {
                has_edge[v as usize] = true;
                has_edge[w as usize] = true;
            }
        }
        let mut chain = vec![NO_CHAIN; n];
        let mut pos = vec![0u32; n];
        let mut rank = vec![0u32; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v as usize] = i as u32;
        }
        let mut chains = 0usize;
        for &v in order {
            if chain[v as usize] != NO_CHAIN || !has_edge[v as usize] {
                continue;
            }
            let (mut x, mut p) = (v, 0u32);
            loop {
                chain[x as usize] = chains as u32;
                pos[x as usize] = p;
                p += 1;
                let free = g.targets_from(x).iter().copied().filter(|&w| chain[w as usize] == NO_CHAIN);
                let same = free
                    .clone()
                    .filter(|&w| hint[w as usize] == hint[x as usize])
                    .min_by_key(|&w| rank[w as usize]);
                match same.or_else(|| free.min_by_key(|&w| rank[w as usize])) {
                    Some(w) => x = w,
                    None => break,
                }
            }
            chains += 1;
            if n.saturating_mul(chains).saturating_mul(4) > max_bytes {
                return None;
            }
        }
        let mut earliest = vec![u32::MAX; n * chains];
        let mut row = vec![u32::MAX; chains];
        for &v in order.iter().rev() {
            row.iter_mut().for_each(|x| *x = u32::MAX);
            for &w in g.targets_from(v) {
                let c = chain[w as usize] as usize;
                row[c] = row[c].min(pos[w as usize]);
                let theirs = &earliest[w as usize * chains..(w as usize + 1) * chains];
                row.iter_mut().zip(theirs).for_each(|(x, &y)| *x = (*x).min(y));
            }
            earliest[v as usize * chains..(v as usize + 1) * chains].copy_from_slice(&row);
        }
        Some(ChainIndex { chains, chain, pos, earliest })
    }

    /// How many chains cover the nodes with edges.
    #[cfg(test)]
    pub(crate) fn chains(&self) -> usize {
        self.chains
    }

    /// Whether a path of one or more edges leads from `from` to `to`.
    pub(crate) fn reaches(&self, from: u32, to: u32) -> bool {
        let c = self.chain[to as usize];
        c != NO_CHAIN && self.earliest[from as usize * self.chains + c as usize] <= self.pos[to as usize]
    }

    /// Whether `from == to` or a path leads from `from` to `to`.
    pub(crate) fn reaches_or_is(&self, from: u32, to: u32) -> bool {
        from == to || self.reaches(from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_random::rand::Rng as _;

    /// Reachability by depth-first search, the reference.
    fn slow(g: &Csr<()>, from: u32, to: u32) -> bool {
        if from == to {
            return true;
        }
        let mut seen = vec![false; g.nodes()];
        let mut stack = vec![from];
        while let Some(v) = stack.pop() {
            for &w in g.targets_from(v) {
                if w == to {
                    return true;
                }
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    stack.push(w);
                }
            }
        }
        false
    }

    #[test]
    fn batched_queries_agree_with_depth_first_search_on_random_dags() {
        let mut rng = isocert_random::seeded(7);
        for _ in 0..300 {
            let n = rng.random_range(1..40u32);
            let m = rng.random_range(0..n * 3);
            // Edges from a lower to a higher rank of a random permutation: acyclic.
            let mut rank: Vec<u32> = (0..n).collect();
            for i in (1..n as usize).rev() {
                rank.swap(i, rng.random_range(0..=i));
            }
            let edges: Vec<(u32, u32, ())> = (0..m)
                .filter_map(|_| {
                    let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                    (rank[a as usize] < rank[b as usize]).then_some((a, b, ()))
                })
                .collect();
            let g = Csr::build(n as usize, &edges);
            let order = topological_order(&g).expect("acyclic by construction");
            let queries: Vec<(u32, u32)> =
                (0..50).map(|_| (rng.random_range(0..n), rng.random_range(0..n))).collect();
            let got = reaches(&g, &order, &queries);
            for (q, &(from, to)) in queries.iter().enumerate() {
                assert_eq!(got[q], slow(&g, from, to), "{from} -> {to} in {edges:?}");
            }
        }
    }

    #[test]
    fn chain_index_agrees_with_depth_first_search_on_random_dags() {
        let mut rng = isocert_random::seeded(11);
        let mut chained = 0usize;
        for _ in 0..300 {
            let n = rng.random_range(1..40u32);
            let m = rng.random_range(0..n * 3);
            let mut rank: Vec<u32> = (0..n).collect();
            for i in (1..n as usize).rev() {
                rank.swap(i, rng.random_range(0..=i));
            }
            let edges: Vec<(u32, u32, ())> = (0..m)
                .filter_map(|_| {
                    let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                    (rank[a as usize] < rank[b as usize]).then_some((a, b, ()))
                })
                .collect();
            let g = Csr::build(n as usize, &edges);
            let order = topological_order(&g).expect("acyclic by construction");
            let hint: Vec<u32> = (0..n).map(|_| rng.random_range(0..4u32)).collect();
            let index = ChainIndex::build(&g, &order, &hint, usize::MAX).expect("no memory bound");
            chained += (index.chains() > 1) as usize;
            for from in 0..n {
                for to in 0..n {
                    let expected = from != to && slow(&g, from, to);
                    assert_eq!(index.reaches(from, to), expected, "{from} -> {to} in {edges:?}");
                    assert_eq!(index.reaches_or_is(from, to), from == to || expected);
                }
            }
        }
        assert!(chained > 100, "only {chained} graphs needed more than one chain");
        // Too many chains for the bound: no index.
        let g = Csr::build(4, &[(0, 1, ()), (2, 3, ())]);
        let order = topological_order(&g).unwrap();
        assert!(ChainIndex::build(&g, &order, &[0, 0, 0, 0], 4 * 4).is_none());
        assert!(ChainIndex::build(&g, &order, &[0, 0, 0, 0], 4 * 8).is_some());
    }

    #[test]
    fn a_cycle_has_no_topological_order() {
        let g = Csr::build(3, &[(0, 1, ()), (1, 2, ()), (2, 0, ())]);
        assert!(topological_order(&g).is_none());
        let g = Csr::build(3, &[(2, 1, ()), (1, 0, ())]);
        assert_eq!(topological_order(&g), Some(vec![2, 1, 0]));
    }
}
