//! The lazy acyclicity loop over the pairs pruning left open: the solver proposes an order
//! for each pair; the known edges plus the chosen ones are searched for forbidden cycles;
//! each cycle found becomes a clause forbidding its chosen edges together; repeat until
//! the graph is acyclic (valid) or no assignment is left (invalid).
//!
//! Each variable's preferred value follows a topological order of the known graph, so the
//! first proposal is already consistent with everything known, and a round adds a clause
//! for several cycles of each cyclic component, not just one.

use batsat::{lbool, BasicSolver, Lit, SolverInterface};

use super::polygraph::{cycles, forbidden_graph, Arc, Origin, Polygraph};
use super::reach::topological_order;

/// Cycles turned into clauses per cyclic component and round.
const CYCLES_PER_COMPONENT: usize = 16;

/// How the search ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// An acyclic orientation: the position of each transaction in a topological order of
    /// the known and chosen edges (it orders every key's writers as chosen).
    Valid { position: Vec<u32>, rounds: usize },
    /// No orientation avoids a forbidden cycle; `unsat`: the solver proved it and `cycle`
    /// is the last one it met, else `cycle` is made of known edges alone.
    Invalid { cycle: Vec<Arc>, unsat: bool, rounds: usize },
}

/// Searches an orientation of `pg`'s open pairs.
pub(crate) fn solve(pg: &Polygraph, si: bool) -> Outcome {
    let n = pg.n;
    let known = forbidden_graph(n, &pg.deps, &pg.anti, si);
    let Some(order) = topological_order(&known) else {
        let cycle = cycles(&known, 1).into_iter().next().expect("a cyclic graph has a cycle");
        return Outcome::Invalid { cycle, unsat: false, rounds: 0 };
    };
    drop(known);
    let position = positions(&order);
    let mut solver = BasicSolver::default();
    let vars: Vec<_> = pg
        .pairs
        .iter()
        .map(|p| {
            let prefer = position[p.a.index()] < position[p.b.index()];
            solver.new_var(if prefer { lbool::TRUE } else { lbool::FALSE }, true)
        })
        .collect();
    let mut rounds = 0usize;
    let mut last: Option<Vec<Arc>> = None;
    loop {
        rounds += 1;
        if solver.solve_limited(&[]) != lbool::TRUE {
            let cycle = last.expect("unsatisfiable only after a cycle clause");
            return Outcome::Invalid { cycle, unsat: true, rounds };
        }
        let mut deps = pg.deps.clone();
        let mut anti = pg.anti.clone();
        for (p, &var) in pg.pairs.iter().zip(&vars) {
            let a_first = solver.value_lit(Lit::new(var, true)) == lbool::TRUE;
            let lit = Lit::new(var, a_first);
            let (first, second) = if a_first { (p.a, p.b) } else { (p.b, p.a) };
            pg.order_edges(p.obj, first, second, Origin::Chosen(lit), |e| {
                if e.2.dep.kind == crate::EdgeKind::Ww {
                    deps.push(e)
                } else {
                    anti.push(e)
                }
            });
        }
        let g = forbidden_graph(n, &deps, &anti, si);
        if let Some(order) = topological_order(&g) {
            return Outcome::Valid { position: positions(&order), rounds };
        }
        let found = cycles(&g, CYCLES_PER_COMPONENT);
        for cycle in &found {
            let mut clause: Vec<Lit> = cycle
                .iter()
                .filter_map(|e| match e.2.origin {
                    Origin::Chosen(l) => Some(!l),
                    _ => None,
                })
                .collect();
            clause.sort_unstable_by_key(|l| l.var().idx());
            clause.dedup();
            if clause.is_empty() {
                return Outcome::Invalid { cycle: cycle.clone(), unsat: false, rounds };
            }
            solver.add_clause_reuse(&mut clause);
        }
        last = found.into_iter().next();
    }
}

/// The index of each node in `order`.
fn positions(order: &[u32]) -> Vec<u32> {
    let mut position = vec![0u32; order.len()];
    for (i, &v) in order.iter().enumerate() {
        position[v as usize] = i as u32;
    }
    position
}
