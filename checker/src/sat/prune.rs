//! Pruning, as Cobra and PolySI do before solving: an order of two writers whose edges
//! would close a forbidden cycle with the known edges is impossible, so the other order is
//! forced and its edges become known. Repeated until a round forces nothing.
//!
//! The cycle tests are reachability queries on the known graph ([`super::reach`]):
//! ordering `a` before `b` on a key adds ww `a → b` and rw `r → b` for each reader `r` of
//! `a`'s version. At serializable that closes a cycle when `b` reaches `a` or some such `r`.
//! At snapshot isolation the searched graph is `deps ; anti?`, so the new steps are `a → b`,
//! `a → s` for each known anti-dependency `b → s`, and `p → b` for each dependency `p → r`;
//! the queries are "`b` reaches `a`", "some `s` reaches `a`" and "`b` reaches some `p`".
//!
//! Only pairs whose order is open are asked about: each key's known order is transitively
//! closed ([`super::polygraph::KeyOrder`]), so the pairs an earlier round ordered, directly
//! or by transitivity, are never enumerated again. The queries are answered by a chain
//! index ([`ChainIndex`]: one lookup each, pair by pair, nothing stored) when the graph's
//! chains are few, as they are when sessions are; otherwise they are batched and answered
//! by bit-parallel sweeps ([`reaches`]), where two kinds of helper nodes turn the snapshot
//! isolation queries into one query each.

use super::polygraph::{cycles, forbidden_graph, forbidden_shape, Arc, Batch, Polygraph};
use super::reach::{reaches, topological_order, ChainIndex};
use crate::mtc::graph::Csr;

/// Memory the chain index may take; beyond it the batched sweeps answer the queries.
const CHAIN_INDEX_BYTES: usize = 256 << 20;

/// How the reachability queries are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// A chain index when it fits in [`CHAIN_INDEX_BYTES`], else batched sweeps.
    Auto,
    /// Always batched sweeps (the simple path, for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Batched,
}

/// What pruning did.
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    /// Rounds of queries run.
    pub(crate) rounds: usize,
    /// Pairs whose order was forced (directly or by transitivity).
    pub(crate) forced: usize,
    /// Pairs neither of whose orders is possible (left to the solver, which proves it).
    pub(crate) conflicts: usize,
    /// A cycle of known edges, when the known edges alone are forbidden.
    pub(crate) cycle: Option<Vec<Arc>>,
}

/// Prunes `pg` in place for at most `max_rounds` rounds, then lists the open pairs in
/// `pg.pairs`.
pub(crate) fn prune(pg: &mut Polygraph, si: bool, max_rounds: usize, engine: Engine) -> Pruned {
    let mut out = Pruned::default();
    let mut open = pg.open_count();
    while out.rounds < max_rounds && open > 0 {
        out.rounds += 1;
        let g = forbidden_shape(pg.n, &pg.deps, &pg.anti, si);
        let Some(order) = topological_order(&g) else {
            drop(g);
            let g = forbidden_graph(pg.n, &pg.deps, &pg.anti, si);
            out.cycle = cycles(&g, 1).into_iter().next();
            return out;
        };
        let index = match engine {
            Engine::Auto => ChainIndex::build(&g, &order, &pg.session, CHAIN_INDEX_BYTES),
            Engine::Batched => None,
        };
        let batches = match index {
            Some(index) => {
                drop(g);
                by_chains(pg, si, &index, &mut out.conflicts)
            }
            None => batched(pg, si, &g, &mut out.conflicts),
        };
        if batches.iter().all(|b| b.1.is_empty()) {
            break;
        }
        pg.learn(batches);
        let left = pg.open_count();
        out.forced += open - left;
        open = left;
    }
    pg.list_open_pairs();
    out
}

/// Whether ordering writer `i` before writer `j` of a key is impossible, and the other
/// order: `(i first is bad, j first is bad)`.
type Verdict = (bool, bool);

/// The forced orders of one round, from each open pair's verdict.
fn forced_orders(
    pg: &Polygraph,
    conflicts: &mut usize,
    mut verdict: impl FnMut(usize, usize, usize) -> Verdict,
) -> Vec<Batch> {
    let mut batches = Vec::new();
    for (ki, key) in pg.keys.iter().enumerate() {
        let mut forced = Vec::new();
        let k = key.writers.len();
        for i in 0..k {
            for j in i + 1..k {
                if !key.is_open(i, j) {
                    continue;
                }
                match verdict(ki, i, j) {
                    (true, true) => *conflicts += 1,
                    (true, false) => forced.push((j as u32, i as u32)),
                    (false, true) => forced.push((i as u32, j as u32)),
                    (false, false) => {}
                }
            }
        }
        batches.push((ki, forced));
    }
    batches
}

/// One round's forced orders, each query answered by the chain index as it comes.
fn by_chains(pg: &Polygraph, si: bool, index: &ChainIndex, conflicts: &mut usize) -> Vec<Batch> {
    let n = pg.n;
    // Snapshot isolation's helpers: anti-dependencies by source, dependencies by target.
    let (anti_from, deps_into) = if si {
        let anti: Vec<(u32, u32, ())> = pg.anti.iter().map(|e| (e.0, e.1, ())).collect();
        let deps: Vec<(u32, u32, ())> = pg.deps.iter().map(|e| (e.1, e.0, ())).collect();
        (Csr::build(n, &anti), Csr::build(n, &deps))
    } else {
        (Csr::build(0, &[]), Csr::build(0, &[]))
    };
    let bad = |obj, first: isocert_history::TxnId, second: isocert_history::TxnId| -> bool {
        let (a, b) = (first.0, second.0);
        if index.reaches(b, a) {
            return true;
        }
        let readers = pg.readers_of(obj, first);
        if si {
            anti_from.targets_from(b).iter().any(|&s| index.reaches_or_is(s, a))
                || readers.iter().any(|&(r, _)| {
                    r != second && deps_into.targets_from(r.0).iter().any(|&p| index.reaches_or_is(b, p))
                })
        } else {
            readers.iter().any(|&(r, _)| r != second && index.reaches_or_is(b, r.0))
        }
    };
    forced_orders(pg, conflicts, |ki, i, j| {
        let key = &pg.keys[ki];
        let (a, b) = (key.writers[i], key.writers[j]);
        (bad(key.obj, a, b), bad(key.obj, b, a))
    })
}

/// One round's forced orders, the queries of every open pair collected and answered by
/// bit-parallel sweeps.
fn batched(pg: &Polygraph, si: bool, g: &Csr<()>, conflicts: &mut usize) -> Vec<Batch> {
    let n = pg.n;
    let mut edges: Vec<(u32, u32, ())> = Vec::with_capacity(pg.deps.len() + pg.anti.len());
    for v in 0..n as u32 {
        edges.extend(g.targets_from(v).iter().map(|&w| (v, w, ())));
    }
    let nodes = if si {
        let n32 = n as u32;
        edges.extend(pg.anti.iter().map(|&(b, s, _)| (n32 + b, s, ())));
        edges.extend(pg.deps.iter().map(|&(p, r, _)| (p, 2 * n32 + r, ())));
        3 * n
    } else {
        n
    };
    let q = Csr::build(nodes, &edges);
    drop(edges);
    let order = topological_order(&q).expect("helper nodes add no cycle to an acyclic graph");
    // Queries per open pair: the ones for `a` first, then the ones for `b` first.
    let mut queries: Vec<(u32, u32)> = Vec::new();
    let mut bounds: Vec<(usize, usize, usize)> = Vec::new();
    forced_orders(pg, &mut 0, |ki, i, j| {
        let key = &pg.keys[ki];
        let (a, b) = (key.writers[i], key.writers[j]);
        let start = queries.len();
        option_queries(pg, key.obj, a, b, si, &mut queries);
        let mid = queries.len();
        option_queries(pg, key.obj, b, a, si, &mut queries);
        bounds.push((start, mid, queries.len()));
        (false, false)
    });
    let answer = reaches(&q, &order, &queries);
    let mut next = bounds.into_iter();
    forced_orders(pg, conflicts, |_, _, _| {
        let (start, mid, end) = next.next().expect("the same open pairs in the same order");
        (answer[start..mid].iter().any(|&x| x), answer[mid..end].iter().any(|&x| x))
    })
}

/// The reachability queries any of which makes "`first` before `second` on `obj`" close a
/// forbidden cycle (see the module doc; helper nodes start at `n` and `2n`).
fn option_queries(
    pg: &Polygraph,
    obj: isocert_history::ObjId,
    first: isocert_history::TxnId,
    second: isocert_history::TxnId,
    si: bool,
    queries: &mut Vec<(u32, u32)>,
) {
    let n = pg.n as u32;
    queries.push((second.0, first.0));
    if si {
        queries.push((n + second.0, first.0));
    }
    for &(r, _) in pg.readers_of(obj, first) {
        if r != second {
            queries.push(if si { (second.0, 2 * n + r.0) } else { (second.0, r.0) });
        }
    }
}
