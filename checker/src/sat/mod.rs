//! Black-box serializability (Cobra-style) and snapshot isolation (PolySI-style) for
//! key-value histories with unique values and no certificate: a polygraph solved by SAT
//! with lazy acyclicity.
//!
//! 1. Reads are resolved by value as MTC does ([`crate::mtc`]): wr edges, session order,
//!    and the orders read-modify-writes imply (a transaction that read a version and
//!    overwrote it comes after it) are *certain* edges; so is every anti-dependency from a
//!    reader of the initial version to each writer of the key.
//! 2. For each key and each pair of its writers `a < b` not already ordered, one boolean
//!    variable: `a` before `b` gives ww `a → b` and rw `r → b` for every reader `r` of `a`'s
//!    version; the other way round gives the mirror edges (the constraint of a
//!    generalized polygraph).
//! 3. Lazy acyclicity: the solver proposes an orientation; the graph of certain plus chosen
//!    edges (serializability: all of them; snapshot isolation: `(so ∪ wr ∪ ww) ; rw?`) is
//!    searched for cycles; each cycle found adds a clause forbidding its chosen edges
//!    together; repeat until the graph is acyclic (valid; the orientation is a version
//!    order) or the solver reports no orientation is left (invalid). A cycle of certain
//!    edges alone is reported at once, without the solver.
//!
//! Counterexamples mark each edge "certain" or "chosen by the solver" in its explanation;
//! for an unsatisfiable polygraph the report shows the last cycle the solver ran into.
//!
//! The solver is batsat (a pure-Rust MiniSat port, incremental clause addition between
//! solves): it builds in seconds with no C++ toolchain, which keeps CI's build time flat.
//! Not yet done: Cobra's and PolySI's pruning and compaction beyond the read-modify-write
//! orders, a graph-aware propagator in place of the lazy loop, predicates and deletes.

#[cfg(test)]
mod tests;

use batsat::{lbool, BasicSolver, Lit, SolverInterface, Var};
use isocert_history::{History, ObjId, Op, OpRef, TxnId, Writer};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::mtc::graph::Csr;
use crate::mtc::{self, cycle_anomaly, cycle_kind, explain, Dep};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, Edge, EdgeKind, IsolationLevel, Report};

/// An edge with the solver literal that implies it (`None`: certain).
#[derive(Clone, Copy, Debug)]
struct Tagged {
    dep: Dep,
    lit: Option<Lit>,
}

/// One unordered pair of writers of a key and its variable.
#[derive(Clone, Copy, Debug)]
struct Pair {
    obj: ObjId,
    a: TxnId,
    b: TxnId,
    var: Var,
}

/// Runs the SAT checker: Cobra-style at serializable, PolySI-style at snapshot isolation.
pub(crate) fn check(h: &History, level: IsolationLevel, checker: CheckerKind) -> Result<Report, CheckError> {
    let wanted = if checker == CheckerKind::Cobra {
        IsolationLevel::Serializable
    } else {
        IsolationLevel::SnapshotIsolation
    };
    if level != wanted {
        return Err(CheckError::UnsupportedLevel {
            checker,
            level,
            hint: "cobra checks serializable, polysi snapshot-isolation, both without a certificate",
        });
    }
    shape(h, checker)?;
    let inf = mtc::infer(h);
    let mut report = Report::new(level, checker);
    report.stats.txns = h.txns.len();
    report.stats.committed = inf.in_graph.iter().filter(|&&b| b).count();
    report.stats.ops = h.txns.iter().map(|t| t.ops.len()).sum();
    report.notes.push(
        "no certificate: the version order was searched by a SAT solver over every order of each key's writers \
         (edges marked 'chosen by the solver' come from the order it tried)"
            .into(),
    );
    let mut anomalies = inf.anomalies.clone();
    let si = level == IsolationLevel::SnapshotIsolation;
    if si {
        anomalies.extend(mtc::divergences(h, &inf));
    }
    let found = solve(h, &inf, si, &mut report);
    anomalies.extend(found);
    report.anomalies = anomalies;
    Ok(report)
}

/// Whether the SAT checkers can read `h` (item reads and writes of unique values).
pub(crate) fn applies(h: &History) -> bool {
    shape(h, CheckerKind::Cobra).is_ok()
}

/// Only item reads and writes, unique non-initial values, no deletes.
fn shape(h: &History, checker: CheckerKind) -> Result<(), CheckError> {
    let initial: FxHashMap<ObjId, isocert_history::ValueId> = h.initial.iter().copied().collect();
    let mut seen = FxHashSet::default();
    for t in h.txn_ids() {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let refuse = |what: String| {
                Err(CheckError::UnsupportedHistory {
                    checker,
                    what: format!(
                        "{} op {i} {what} (black-box checking needs item reads and writes of unique values)",
                        h.txn_label(t)
                    ),
                })
            };
            match op {
                Op::Read { .. } => {}
                Op::Write { obj, value } => {
                    if *value == isocert_history::ValueId::ABSENT {
                        return refuse(format!("deletes {}", h.object_label(*obj)));
                    }
                    if initial.get(obj) == Some(value) {
                        return refuse(format!("writes the initial value {}", h.value_label(*obj, *value)));
                    }
                    if !seen.insert((*obj, *value)) {
                        return refuse(format!(
                            "writes {}, which another write also wrote",
                            h.value_label(*obj, *value)
                        ));
                    }
                }
                _ => return refuse("is not an item read or write".into()),
            }
        }
    }
    Ok(())
}

/// The lazy loop. Returns the anomalies (empty: a valid orientation was found).
fn solve(h: &History, inf: &mtc::Inference, si: bool, report: &mut Report) -> Vec<Anomaly> {
    let n = h.txns.len();
    // Writers per key (final writes of transactions in the graph), readers per version.
    let mut writers: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for t in h.txn_ids().filter(|t| inf.in_graph[t.index()]) {
        let mut mine: Vec<ObjId> = Vec::new();
        for op in &h.txn(t).ops {
            if let Op::Write { obj, .. } = op {
                if !mine.contains(obj) {
                    mine.push(*obj);
                    writers.entry(*obj).or_default().push(t);
                }
            }
        }
    }
    let mut readers: FxHashMap<(ObjId, Writer), Vec<(TxnId, u32)>> = FxHashMap::default();
    for &(t, obj, w, op) in &inf.reads {
        readers.entry((obj, w)).or_default().push((t, op));
    }
    let mut certain: Vec<(u32, u32, Tagged)> =
        inf.deps.iter().map(|&(a, b, dep)| (a, b, Tagged { dep, lit: None })).collect();
    let mut certain_anti: Vec<(u32, u32, Tagged)> = Vec::new();
    // Readers of the initial version anti-depend on every writer of the key.
    let mut objs: Vec<&ObjId> = writers.keys().collect();
    objs.sort_unstable();
    for &obj in &objs {
        for &(r, op) in readers.get(&(*obj, Writer::Initial)).map(Vec::as_slice).unwrap_or(&[]) {
            for &w in &writers[obj] {
                if w != r {
                    certain_anti.push((
                        r.0,
                        w.0,
                        Tagged { dep: Dep { kind: EdgeKind::Rw, obj: *obj, op }, lit: None },
                    ));
                }
            }
        }
    }
    // Orders read-modify-writes fix: a before b when b read a's version (or a later one
    // that a's successor chain leads to; only the direct ones are used).
    let mut fixed: FxHashSet<(ObjId, TxnId, TxnId)> = FxHashSet::default();
    for (&(obj, w), kids) in &inf.children {
        if let Writer::Txn(a) = w {
            for &b in kids {
                fixed.insert((obj, a, b));
            }
        }
    }
    for &(a, b, dep) in &inf.anti {
        certain_anti.push((a, b, Tagged { dep, lit: None }));
    }
    let mut solver = BasicSolver::default();
    let mut pairs: Vec<Pair> = Vec::new();
    let mut chosen: Vec<(u32, u32, Tagged)> = Vec::new();
    for &obj in &objs {
        let ws = &writers[obj];
        for i in 0..ws.len() {
            for j in i + 1..ws.len() {
                let (a, b) = (ws[i], ws[j]);
                let var = solver.new_var_default();
                let lit = Lit::new(var, true);
                if fixed.contains(&(*obj, a, b)) {
                    solver.add_clause_reuse(&mut vec![lit]);
                } else if fixed.contains(&(*obj, b, a)) {
                    solver.add_clause_reuse(&mut vec![!lit]);
                }
                pairs.push(Pair { obj: *obj, a, b, var });
            }
        }
    }
    report.stats.edges = certain.len() + certain_anti.len();
    // Certain edges alone: a cycle there needs no solver.
    let known = cycles(n, &certain, &certain_anti, si, &[]);
    if !known.is_empty() {
        return known.into_iter().map(|c| anomaly(h, c, si, false)).collect();
    }
    let mut rounds = 0usize;
    let mut last: Option<Vec<(u32, u32, Tagged)>> = None;
    loop {
        rounds += 1;
        if solver.solve_limited(&[]) != lbool::TRUE {
            report.notes.push(format!("the solver ran {rounds} round(s) and found no acyclic order"));
            let cycle = last.expect("unsatisfiable only after a cycle clause");
            return vec![anomaly(h, cycle, si, true)];
        }
        chosen.clear();
        let mut chosen_anti: Vec<(u32, u32, Tagged)> = Vec::new();
        for p in &pairs {
            let before = solver.value_lit(Lit::new(p.var, true)) == lbool::TRUE;
            let lit = Lit::new(p.var, before);
            let (first, second) = if before { (p.a, p.b) } else { (p.b, p.a) };
            let tag = |kind, op| Tagged { dep: Dep { kind, obj: p.obj, op }, lit: Some(lit) };
            chosen.push((first.0, second.0, tag(EdgeKind::Ww, u32::MAX)));
            for &(r, op) in readers.get(&(p.obj, Writer::Txn(first))).map(Vec::as_slice).unwrap_or(&[]) {
                if r != second {
                    chosen_anti.push((r.0, second.0, tag(EdgeKind::Rw, op)));
                }
            }
        }
        let mut deps = certain.clone();
        deps.extend_from_slice(&chosen);
        let mut anti = certain_anti.clone();
        anti.extend(chosen_anti);
        let found = cycles(n, &deps, &anti, si, &[]);
        if found.is_empty() {
            report.notes.push(format!("the solver found an acyclic order in {rounds} round(s)"));
            return Vec::new();
        }
        for cycle in &found {
            let mut clause: Vec<Lit> = cycle.iter().filter_map(|e| e.2.lit).map(|l| !l).collect();
            clause.sort_unstable_by_key(|l| l.var().idx());
            clause.dedup();
            if clause.is_empty() {
                return vec![anomaly(h, cycle.clone(), si, false)];
            }
            solver.add_clause_reuse(&mut clause);
        }
        last = found.into_iter().next();
        certain.truncate(inf.deps.len());
    }
}

/// One shortest cycle per cyclic component of `deps ∪ anti` (serializable) or of
/// `deps ; anti?` (snapshot isolation), as its underlying edges.
fn cycles(
    n: usize,
    deps: &[(u32, u32, Tagged)],
    anti: &[(u32, u32, Tagged)],
    si: bool,
    _unused: &[()],
) -> Vec<Vec<(u32, u32, Tagged)>> {
    type Step = ((u32, u32, Tagged), Option<(u32, u32, Tagged)>);
    let edges: Vec<(u32, u32, Step)> = if si {
        let by_source = Csr::build(n, &anti.iter().map(|&e| (e.0, e.1, e)).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(deps.len() * 2);
        for &d in deps {
            out.push((d.0, d.1, (d, None)));
            for &r in by_source.payloads_from(d.1) {
                out.push((d.0, r.1, (d, Some(r))));
            }
        }
        out
    } else {
        deps.iter().chain(anti).map(|&e| (e.0, e.1, (e, None))).collect()
    };
    let g = Csr::build(n, &edges);
    let mut member = vec![false; n];
    let mut out = Vec::new();
    for comp in g.cyclic_components() {
        comp.iter().for_each(|&x| member[x as usize] = true);
        let start = *comp.iter().min().expect("components are not empty");
        let mut cycle = Vec::new();
        for (_, _, (first, then)) in g.shortest_cycle(start, &|x| member[x as usize]) {
            cycle.push(first);
            cycle.extend(then);
        }
        comp.iter().for_each(|&x| member[x as usize] = false);
        out.push(cycle);
    }
    out
}

/// An explained anomaly from a cycle's edges; `unsat`: the solver proved no order avoids
/// some cycle and this is the last one it met.
fn anomaly(h: &History, cycle: Vec<(u32, u32, Tagged)>, si: bool, unsat: bool) -> Anomaly {
    let edges: Vec<Edge> = cycle
        .iter()
        .map(|&(a, b, t)| {
            let mut e = match (t.lit, t.dep.kind) {
                (Some(_), EdgeKind::Ww) => Edge {
                    from: TxnId(a),
                    to: TxnId(b),
                    kind: EdgeKind::Ww,
                    obj: Some(t.dep.obj),
                    op: None,
                    explanation: format!(
                        "{}'s version of {} came before {}'s",
                        h.txn_label(TxnId(a)),
                        h.object_label(t.dep.obj),
                        h.txn_label(TxnId(b))
                    ),
                },
                (Some(_), _) => {
                    let reader = OpRef { txn: TxnId(a), op: t.dep.op };
                    let read = match h.txn(TxnId(a)).ops.get(t.dep.op as usize) {
                        Some(Op::Read { obj, value }) => h.value_label(*obj, *value),
                        _ => h.object_label(t.dep.obj),
                    };
                    Edge {
                        from: TxnId(a),
                        to: TxnId(b),
                        kind: EdgeKind::Rw,
                        obj: Some(t.dep.obj),
                        op: Some(reader),
                        explanation: format!(
                            "{} read {read}, and {} installed a later version",
                            h.txn_label(TxnId(a)),
                            h.txn_label(TxnId(b))
                        ),
                    }
                }
                (None, _) => explain(h, a, b, t.dep),
            };
            e.explanation.push_str(if t.lit.is_some() { " (chosen by the solver)" } else { " (certain)" });
            e
        })
        .collect();
    let kind = if si && edges.iter().any(|e| e.kind == EdgeKind::Rw) {
        AnomalyKind::GSi
    } else {
        cycle_kind(edges.iter().map(|e| e.kind))
    };
    let what = match (unsat, si) {
        (false, false) => "dependency cycle of certain edges (no serial order explains the reads)",
        (false, true) => "cycle of certain edges with no two anti-dependencies in a row (no snapshot order explains the reads)",
        (true, false) => "no order of the writes avoids a dependency cycle (the solver proved it); the last cycle it met",
        (true, true) => "no order of the writes avoids a cycle snapshot isolation forbids (the solver proved it); the last cycle it met",
    };
    cycle_anomaly(h, kind, edges, what)
}
