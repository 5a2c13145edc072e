//! Pruning, as Cobra and PolySI do before solving: an order of two writers whose edges
//! would close a forbidden cycle with the known edges is impossible, so the other order is
//! forced and its edges become known. Repeated until a round forces nothing.
//!
//! The cycle tests are reachability queries on the known graph ([`super::reach`]):
//! ordering `a` before `b` on a key adds ww `a → b` and rw `r → b` for each reader `r` of
//! `a`'s version. At serializable that closes a cycle when `b` reaches `a` or some such `r`.
//! At snapshot isolation the searched graph is `deps ; anti?`, so the new steps are `a → b`,
//! `a → s` for each known anti-dependency `b → s`, and `p → b` for each dependency `p → r`;
//! two kinds of helper nodes answer "some `s` reaches `a`" and "`b` reaches some `p`" in
//! one query each.

use super::polygraph::{cycles, forbidden_graph, Arc, Polygraph};
use super::reach::{reaches, topological_order};
use crate::mtc::graph::Csr;

/// What pruning did.
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    /// Rounds of queries run.
    pub(crate) rounds: usize,
    /// Pairs whose order was forced.
    pub(crate) forced: usize,
    /// Pairs neither of whose orders is possible (left to the solver, which proves it).
    pub(crate) conflicts: usize,
    /// A cycle of known edges, when the known edges alone are forbidden.
    pub(crate) cycle: Option<Vec<Arc>>,
}

/// Prunes `pg` in place for at most `max_rounds` rounds.
pub(crate) fn prune(pg: &mut Polygraph, si: bool, max_rounds: usize) -> Pruned {
    let n = pg.n;
    let mut out = Pruned::default();
    while out.rounds < max_rounds && !pg.pairs.is_empty() {
        out.rounds += 1;
        let g = forbidden_graph(n, &pg.deps, &pg.anti, si);
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
        let Some(order) = topological_order(&q) else {
            out.cycle = cycles(&g, 1).into_iter().next();
            return out;
        };
        drop(g);
        // Queries per pair: the ones for `a` first, then the ones for `b` first.
        let mut queries: Vec<(u32, u32)> = Vec::new();
        let mut bounds: Vec<(usize, usize, usize)> = Vec::with_capacity(pg.pairs.len());
        for p in &pg.pairs {
            let start = queries.len();
            option_queries(pg, p.obj, p.a, p.b, si, &mut queries);
            let mid = queries.len();
            option_queries(pg, p.obj, p.b, p.a, si, &mut queries);
            bounds.push((start, mid, queries.len()));
        }
        let answer = reaches(&q, &order, &queries);
        let mut open = Vec::with_capacity(pg.pairs.len());
        let mut forced = Vec::new();
        for (p, &(start, mid, end)) in pg.pairs.iter().zip(&bounds) {
            let a_first_bad = answer[start..mid].iter().any(|&x| x);
            let b_first_bad = answer[mid..end].iter().any(|&x| x);
            match (a_first_bad, b_first_bad) {
                (true, true) => {
                    out.conflicts += 1;
                    open.push(*p);
                }
                (true, false) => forced.push((p.obj, p.b, p.a)),
                (false, true) => forced.push((p.obj, p.a, p.b)),
                (false, false) => open.push(*p),
            }
        }
        if forced.is_empty() {
            break;
        }
        out.forced += forced.len();
        pg.pairs = open;
        pg.force(forced);
    }
    out
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
