//! The lazy acyclicity loop over the pairs pruning left open: the solver proposes an order
//! for each pair; the known edges plus the chosen ones are searched for forbidden cycles;
//! each cycle found becomes a clause forbidding its chosen edges together; repeat until
//! the graph is acyclic (valid) or no assignment is left (invalid).
//!
//! Each variable's preferred value follows a topological order of the known graph, so the
//! first proposal is already consistent with everything known, and a round adds a clause
//! for several cycles of each cyclic component, not just one.

use batsat::{lbool, BasicSolver, Lit, SolverInterface};

use super::polygraph::{cycles, forbidden_graph, forbidden_shape, Arc, Origin, Polygraph};
use super::reach::topological_order;

/// Cycles turned into clauses per cyclic component and round.
const CYCLES_PER_COMPONENT: usize = 16;

/// How the search ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// An acyclic orientation: the position of each transaction in a topological order of
    /// the known and chosen edges (it orders every key's writers as chosen).
    Valid { position: Vec<u32>, rounds: usize },
    /// No orientation avoids a forbidden cycle; `unsat`: the solver proved it, `core` holds
    /// the cycles of a minimal unsatisfiable core (every orientation of the pairs they
    /// choose closes one of them) and `cycle` is the first of them; else `cycle` is made of
    /// known edges alone and `core` is empty.
    Invalid { cycle: Vec<Arc>, core: Vec<Vec<Arc>>, unsat: bool, rounds: usize },
}

/// Searches an orientation of `pg`'s open pairs.
pub(crate) fn solve(pg: &Polygraph, si: bool) -> Outcome {
    let n = pg.n;
    let known = forbidden_shape(n, &pg.deps, &pg.anti, si);
    let Some(order) = topological_order(&known) else {
        let known = forbidden_graph(n, &pg.deps, &pg.anti, si);
        let cycle = cycles(&known, 1).into_iter().next().expect("a cyclic graph has a cycle");
        return Outcome::Invalid { cycle, core: Vec::new(), unsat: false, rounds: 0 };
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
    let mut clauses: Vec<(Vec<Lit>, Vec<Arc>)> = Vec::new();
    loop {
        rounds += 1;
        if solver.solve_limited(&[]) != lbool::TRUE {
            let core = minimal_core(vars.len(), &clauses);
            let cycle = core.first().cloned().expect("unsatisfiable only after a cycle clause");
            return Outcome::Invalid { cycle, core, unsat: true, rounds };
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
        if let Some(order) = topological_order(&forbidden_shape(n, &deps, &anti, si)) {
            return Outcome::Valid { position: positions(&order), rounds };
        }
        let g = forbidden_graph(n, &deps, &anti, si);
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
                return Outcome::Invalid { cycle: cycle.clone(), core: Vec::new(), unsat: false, rounds };
            }
            clauses.push((clause.clone(), cycle.clone()));
            solver.add_clause_reuse(&mut clause);
        }
    }
}

/// At most this many extra solver calls to shrink an unsatisfiable core.
const CORE_SHRINK_CALLS: usize = 200;

/// The cycles of a minimal unsatisfiable subset of the cycle clauses (PolySI's
/// interpretation step: which choices of write orders the proof needed). Each clause gets a
/// selector; the solver's final conflict over the selectors gives a core, which deletion
/// then shrinks: a clause is left out when the rest stays unsatisfiable without it.
fn minimal_core(vars: usize, clauses: &[(Vec<Lit>, Vec<Arc>)]) -> Vec<Vec<Arc>> {
    let mut solver = BasicSolver::default();
    for _ in 0..vars {
        solver.new_var_default();
    }
    let selectors: Vec<Lit> = clauses
        .iter()
        .map(|(clause, _)| {
            let s = Lit::new(solver.new_var_default(), true);
            let mut with = clause.clone();
            with.push(!s);
            solver.add_clause_reuse(&mut with);
            s
        })
        .collect();
    let unsat = |solver: &mut BasicSolver, keep: &[usize]| {
        let assumptions: Vec<Lit> = keep.iter().map(|&i| selectors[i]).collect();
        solver.solve_limited(&assumptions) == lbool::FALSE
    };
    let all: Vec<usize> = (0..clauses.len()).collect();
    if !unsat(&mut solver, &all) {
        // Cannot happen (the clauses were unsatisfiable): fall back to all of them.
        return clauses.iter().map(|(_, c)| c.clone()).collect();
    }
    let in_conflict = |solver: &BasicSolver| -> Vec<usize> {
        (0..clauses.len()).filter(|&i| solver.unsat_core_contains_lit(!selectors[i])).collect()
    };
    let mut core = in_conflict(&solver);
    if core.is_empty() {
        core = all;
    }
    // A clause whose removal makes the rest satisfiable stays necessary in every subset.
    let mut necessary: Vec<usize> = Vec::new();
    for _ in 0..CORE_SHRINK_CALLS {
        let Some(&candidate) = core.iter().find(|c| !necessary.contains(c)) else { break };
        let without: Vec<usize> = core.iter().copied().filter(|&c| c != candidate).collect();
        if unsat(&mut solver, &without) {
            // Keep only what the new conflict used (never more than `without`).
            let used = in_conflict(&solver);
            core = if used.is_empty() { without } else { used };
        } else {
            necessary.push(candidate);
        }
    }
    core.into_iter().map(|i| clauses[i].1.clone()).collect()
}

/// The index of each node in `order`.
fn positions(order: &[u32]) -> Vec<u32> {
    let mut position = vec![0u32; order.len()];
    for (i, &v) in order.iter().enumerate() {
        position[v as usize] = i as u32;
    }
    position
}
