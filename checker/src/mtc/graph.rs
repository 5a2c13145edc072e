//! The dependency graph MTC builds, in compressed adjacency form, with Tarjan's strongly
//! connected components and a shortest cycle per component (breadth-first search inside
//! the component). Everything is linear in nodes plus edges and iterative (no recursion,
//! so a million-transaction chain cannot overflow the stack).

/// A graph over dense node ids with one payload per edge.
#[derive(Debug)]
pub(crate) struct Csr<E> {
    start: Vec<u32>,
    targets: Vec<u32>,
    payload: Vec<E>,
}

impl Csr<()> {
    /// Builds a graph without payloads over `nodes` nodes from `edges`, which calls its
    /// argument once per edge (from, to) and is run twice: to count each node's edges, then
    /// to place them. The graph is the one [`Csr::build`] makes from the same edges in the
    /// same order, without holding them in a list (8 bytes an edge, and its growth).
    pub(crate) fn build_shape(nodes: usize, edges: impl Fn(&mut dyn FnMut(u32, u32))) -> Self {
        let mut start = vec![0u32; nodes + 1];
        edges(&mut |from, _| start[from as usize + 1] += 1);
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut targets = vec![0u32; start[nodes] as usize];
        edges(&mut |from, to| {
            let slot = &mut fill[from as usize];
            targets[*slot as usize] = to;
            *slot += 1;
        });
        let payload = vec![(); targets.len()];
        Csr { start, targets, payload }
    }
}

impl<E: Copy> Csr<E> {
    /// Builds the graph over `nodes` nodes from `(from, to, payload)` triples.
    pub(crate) fn build(nodes: usize, edges: &[(u32, u32, E)]) -> Self {
        let mut start = vec![0u32; nodes + 1];
        for &(from, _, _) in edges {
            start[from as usize + 1] += 1;
        }
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut targets = vec![0u32; edges.len()];
        let mut payload = Vec::with_capacity(edges.len());
        // Payloads are placed by position; start with copies, overwrite in place.
        payload.extend(edges.iter().map(|e| e.2));
        for &(from, to, p) in edges {
            let slot = fill[from as usize] as usize;
            fill[from as usize] += 1;
            targets[slot] = to;
            payload[slot] = p;
        }
        Csr { start, targets, payload }
    }

    fn out(&self, n: u32) -> std::ops::Range<usize> {
        self.start[n as usize] as usize..self.start[n as usize + 1] as usize
    }

    /// The payloads of the edges leaving `n`.
    pub(crate) fn payloads_from(&self, n: u32) -> &[E] {
        &self.payload[self.out(n)]
    }

    /// The targets of the edges leaving `n`.
    pub(crate) fn targets_from(&self, n: u32) -> &[u32] {
        &self.targets[self.out(n)]
    }

    /// Node count.
    pub(crate) fn nodes(&self) -> usize {
        self.start.len() - 1
    }

    /// The strongly connected components that hold a cycle (more than one node, or a
    /// self-loop), each as its list of nodes.
    pub(crate) fn cyclic_components(&self) -> Vec<Vec<u32>> {
        const UNSEEN: u32 = u32::MAX;
        let n = self.nodes();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        let mut call: Vec<(u32, usize)> = Vec::new();
        let mut next = 0u32;
        let mut out = Vec::new();
        for root in 0..n as u32 {
            if index[root as usize] != UNSEEN {
                continue;
            }
            call.push((root, self.out(root).start));
            index[root as usize] = next;
            low[root as usize] = next;
            next += 1;
            stack.push(root);
            on_stack[root as usize] = true;
            while let Some(&mut (v, ref mut pos)) = call.last_mut() {
                let end = self.out(v).end;
                if *pos < end {
                    let w = self.targets[*pos];
                    *pos += 1;
                    if index[w as usize] == UNSEEN {
                        index[w as usize] = next;
                        low[w as usize] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w as usize] = true;
                        call.push((w, self.out(w).start));
                    } else if on_stack[w as usize] {
                        low[v as usize] = low[v as usize].min(index[w as usize]);
                    }
                    continue;
                }
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("tarjan stack holds the component");
                        on_stack[w as usize] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    let self_loop = comp.len() == 1 && self.targets[self.out(v)].contains(&v);
                    if comp.len() > 1 || self_loop {
                        out.push(comp);
                    }
                }
            }
        }
        out
    }

    /// A shortest cycle through `start` inside the component `comp` (`member[n]` is true for
    /// its nodes), as the payloads of its edges in order from `start`.
    pub(crate) fn shortest_cycle(&self, start: u32, member: &dyn Fn(u32) -> bool) -> Vec<(u32, u32, E)> {
        use std::collections::VecDeque;
        let mut parent: rustc_hash::FxHashMap<u32, usize> = rustc_hash::FxHashMap::default();
        let mut queue = VecDeque::new();
        queue.push_back(start);
        let mut closing = None;
        'bfs: while let Some(v) = queue.pop_front() {
            for slot in self.out(v) {
                let w = self.targets[slot];
                if !member(w) {
                    continue;
                }
                if w == start {
                    closing = Some(slot);
                    break 'bfs;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                    e.insert(slot);
                    queue.push_back(w);
                }
            }
        }
        let Some(mut slot) = closing else { return Vec::new() };
        let mut cycle = Vec::new();
        loop {
            let from = self.source(slot);
            cycle.push((from, self.targets[slot], self.payload[slot]));
            if from == start {
                break;
            }
            slot = parent[&from];
        }
        cycle.reverse();
        cycle
    }

    fn source(&self, slot: usize) -> u32 {
        // The node whose range holds `slot`: the last start <= slot with a non-empty range.
        (self.start.partition_point(|&s| s as usize <= slot) - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cyclic_components_and_a_shortest_cycle() {
        // 0 -> 1 -> 2 -> 0 and 2 -> 3 -> 3 (self-loop), 4 isolated, 5 -> 0.
        let edges =
            [(0, 1, 'a'), (1, 2, 'b'), (2, 0, 'c'), (2, 3, 'd'), (3, 3, 'e'), (5, 0, 'f'), (0, 2, 'g')];
        let g = Csr::build(6, &edges);
        let mut comps = g.cyclic_components();
        comps.iter_mut().for_each(|c| c.sort_unstable());
        comps.sort();
        assert_eq!(comps, vec![vec![0, 1, 2], vec![3]]);
        let cycle = g.shortest_cycle(0, &|n| n <= 2);
        assert_eq!(cycle.iter().map(|e| e.2).collect::<String>(), "gc");
        assert_eq!(g.shortest_cycle(3, &|n| n == 3), vec![(3, 3, 'e')]);
    }

    /// `build_shape` against `build` on the same edges in the same order (pseudo-random,
    /// with repeats, self-loops and nodes without edges): the same graph.
    #[test]
    fn build_shape_makes_the_graph_build_makes() {
        let mut x = 0x9e37_79b9_u32;
        let mut next = |m: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % m
        };
        for nodes in [1u32, 2, 7, 50] {
            let edges: Vec<(u32, u32, ())> = (0..nodes * 5).map(|_| (next(nodes), next(nodes), ())).collect();
            let (built, shaped) = (
                Csr::build(nodes as usize, &edges),
                Csr::build_shape(nodes as usize, |emit| edges.iter().for_each(|e| emit(e.0, e.1))),
            );
            assert_eq!(
                (built.start, built.targets, built.payload.len()),
                (shaped.start, shaped.targets, shaped.payload.len())
            );
        }
    }

    #[test]
    fn an_acyclic_graph_has_no_cyclic_component() {
        let edges: Vec<(u32, u32, ())> = (0..1000).map(|i| (i, i + 1, ())).collect();
        assert!(Csr::build(1001, &edges).cyclic_components().is_empty());
    }
}
