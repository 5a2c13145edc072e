//! Black-box serializability (Cobra-style) and snapshot isolation (PolySI-style) for
//! key-value histories with unique values and no certificate: a generalized polygraph,
//! pruned, then solved by SAT with lazy acyclicity.
//!
//! 1. Reads are resolved by value as MTC does ([`crate::mtc`]): wr edges, session order,
//!    and the orders read-modify-writes imply (a transaction that read a version and
//!    overwrote it comes after it) are *certain* edges; so is every anti-dependency from a
//!    reader of the initial version to each writer of the key ([`polygraph`]).
//! 2. For each key and each pair of its writers `a < b` not already ordered, ordering `a`
//!    before `b` gives ww `a → b` and rw `r → b` for every reader `r` of `a`'s version; the
//!    other order gives the mirror edges (the constraint of a generalized polygraph).
//! 3. Pruning ([`prune`]): an order whose edges close a forbidden cycle with the known edges
//!    is impossible, so the other one is *forced*; repeated until nothing more is forced.
//!    On histories of valid databases this decides nearly every pair. Each key's known
//!    order is one transitively closed relation over its writers ([`polygraph::KeyOrder`]),
//!    so only incomparable pairs are asked about and no pair is stored until the solver's
//!    few; reachability comes from a chain index when the known graph has few chains.
//! 4. The open pairs go to the solver ([`solve`]): one boolean variable each, preferring the
//!    order of a topological sort of the known graph; lazy acyclicity adds a clause per
//!    forbidden cycle found (serializability: in all edges; snapshot isolation: in
//!    `(so ∪ wr ∪ ww) ; rw?`) until the graph is acyclic (valid; the orientation is a
//!    version order) or the solver reports no orientation is left (invalid). A cycle of
//!    certain and forced edges alone is reported without the solver.
//!
//! At strict serializability (Cobra only) real-time order joins the certain edges through
//! MTC's chain of auxiliary nodes ([`mtc::realtime::chain_arcs`]: O(n log n) edges, not
//! n²); a cycle's stretch through the chain is reported as one real-time edge, and a cycle
//! with one is kind `real-time`. This is how list-append histories with Jepsen's `:time`
//! are decided at that level.
//!
//! Counterexamples mark each edge "certain", "forced" or "chosen by the solver" in its
//! explanation; for an unsatisfiable polygraph the report names a minimal unsatisfiable core
//! (the pairs of writes whose every order closes one of its cycles) and shows one of its
//! cycles. A valid verdict carries the version order it found
//! ([`Report::inferred_version_order`]).
//!
//! The solver is batsat (a pure-Rust MiniSat port, incremental clause addition between
//! solves): it builds in seconds with no C++ toolchain, which keeps CI's build time flat.
//! Not yet done: a graph-aware propagator in place of the lazy loop, predicates and deletes.

pub(crate) mod lists;
mod polygraph;
mod prune;
mod reach;
mod solve;
#[cfg(test)]
mod tests;

use isocert_history::{History, KvHistory, KvOpKind, ObjId, OpRef, RealTime, TxnId};
use rustc_hash::FxHashMap;

use crate::items::{self, object_label, value_label, WriteSites};
use crate::mtc::{self, cycle_anomaly, cycle_kind, explain, realtime};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, Edge, EdgeKind, IsolationLevel, Report};
use polygraph::{Arc, Origin, Polygraph};
use solve::Outcome;

/// Pruning rounds before the rest goes to the solver.
const PRUNE_ROUNDS: usize = 16;

/// Runs the SAT checker: Cobra-style at serializable, PolySI-style at snapshot isolation,
/// on a history in the compact model ([`items::item_history`]); a list-append history as
/// the item history its reads show ([`lists`]). `given`: a version order (King Cobra's,
/// possibly partial) whose orders of listed writers are fixed before pruning; the orders it
/// leaves out are searched.
pub(crate) fn check(
    h: &History,
    level: IsolationLevel,
    checker: CheckerKind,
    given: Option<&FxHashMap<ObjId, Vec<TxnId>>>,
) -> Result<Report, CheckError> {
    supported(level, checker)?;
    if lists::is_list_history(h) {
        let list_items = lists::as_items(h);
        let kv = items::unique_items(&list_items.history, checker)?;
        let sites = WriteSites::build(&kv);
        let mut report = check_items(&kv, level, checker, Some(&list_items.order), &list_items.after, sites)?;
        report.notes.insert(
            0,
            format!(
                "list-append: each list read is checked as a read of its last element; the order each list's \
                 longest read shows is fixed, and so is every append no read shows after them ({} such order(s)); \
                 only the order of those appends is searched",
                list_items.after.len()
            ),
        );
        let mut anomalies = list_items.anomalies;
        anomalies.append(&mut report.anomalies);
        report.anomalies = anomalies;
        if !report.anomalies.is_empty() {
            report.inferred_version_order = None;
        }
        return Ok(report);
    }
    let kv = items::unique_items(h, checker)?;
    let sites = WriteSites::build(&kv);
    check_items(&kv, level, checker, given, &[], sites)
}

/// [`check`] on an item history in the compact model (no list appends), whose writes
/// `sites` indexes.
pub(crate) fn check_kv(
    kv: &KvHistory,
    level: IsolationLevel,
    checker: CheckerKind,
    given: Option<&FxHashMap<ObjId, Vec<TxnId>>>,
    sites: WriteSites,
) -> Result<Report, CheckError> {
    supported(level, checker)?;
    check_items(kv, level, checker, given, &[], sites)
}

/// The refusal of a level `checker` does not decide.
fn supported(level: IsolationLevel, checker: CheckerKind) -> Result<(), CheckError> {
    let decided = if checker == CheckerKind::Cobra {
        matches!(level, IsolationLevel::Serializable | IsolationLevel::StrictSerializable)
    } else {
        level == IsolationLevel::SnapshotIsolation
    };
    if !decided {
        return Err(CheckError::UnsupportedLevel {
            checker,
            level,
            hint:
                "cobra checks serializable and strict-serializable, polysi snapshot-isolation, all without a \
                   certificate",
        });
    }
    Ok(())
}

/// [`check`] on a history of item reads and writes; `after`: further single orders to fix
/// (`(key, a, b)`: `a`'s version before `b`'s).
fn check_items(
    kv: &KvHistory,
    level: IsolationLevel,
    checker: CheckerKind,
    given: Option<&FxHashMap<ObjId, Vec<TxnId>>>,
    after: &[(ObjId, TxnId, TxnId)],
    sites: WriteSites,
) -> Result<Report, CheckError> {
    items::unique_values(kv, checker, &sites)?;
    let inf = mtc::infer(kv, &sites);
    drop(sites);
    let mut report = Report::new(level, checker);
    report.stats.txns = kv.len();
    report.stats.committed = inf.in_graph.iter().filter(|&&b| b).count();
    report.stats.ops = items::op_count(kv);
    let mut anomalies = inf.anomalies.clone();
    let si = level == IsolationLevel::SnapshotIsolation;
    if si {
        anomalies.extend(mtc::divergences(kv, &inf));
    }
    let mut pg = Polygraph::build(kv, &inf);
    let times = if level == IsolationLevel::StrictSerializable {
        let times = realtime::real_times_for(kv, &inf.in_graph, checker)?;
        let (arcs, chain) = realtime::chain_arcs(kv.len(), &inf.in_graph, &times);
        pg.add_real_time(arcs, chain);
        report.notes.push(
            "real-time order from the clients' invoked_at / completed_at is part of the graph (certain edges): \
             a transaction that completed before another was invoked comes first"
                .into(),
        );
        Some(times)
    } else {
        None
    };
    let cycle_of = |cycle: Vec<Arc>, unsat: bool| anomaly(kv, cycle, si, unsat, times.as_deref());
    if let Some(order) = given {
        let fixed = pg.give(order) + pg.give_pairs(after);
        report.notes.push(format!(
            "the certificate's version order fixed {fixed} order(s) of consecutive listed writers (edges marked \
             'given'); the writes it leaves out are placed by the search"
        ));
    }
    let open_before = pg.open_count();
    report.stats.edges = pg.deps.len() + pg.anti.len();
    let pruned = prune::prune(&mut pg, si, PRUNE_ROUNDS, prune::Engine::Auto);
    report.notes.push(format!(
        "no certificate: the order of {open_before} pair(s) of writers was open; pruning forced {} in {} round(s), \
         {} went to the SAT solver (edges marked 'forced' or 'chosen by the solver' come from that search)",
        pruned.forced,
        pruned.rounds,
        pg.open_count()
    ));
    if let Some(cycle) = pruned.cycle {
        anomalies.push(cycle_of(cycle, false));
        report.anomalies = anomalies;
        return Ok(report);
    }
    match solve::solve(&pg, si) {
        Outcome::Valid { position, rounds } => {
            report.notes.push(format!("the solver found an acyclic order in {rounds} round(s)"));
            if anomalies.is_empty() {
                report.inferred_version_order = Some(version_order(&pg, &position));
            }
        }
        Outcome::Invalid { cycle, core, unsat, rounds } => {
            if unsat {
                report.notes.push(format!("the solver ran {rounds} round(s) and found no acyclic order"));
            }
            let mut a = cycle_of(cycle, unsat);
            if !core.is_empty() {
                a.explanation.push_str(&core_explanation(kv, &pg, &core, times.as_deref()));
            }
            anomalies.push(a);
        }
    }
    report.anomalies = anomalies;
    Ok(report)
}

/// Every key's writers in the order of `position` (a topological order of an acyclic
/// orientation, which holds every pair's ww edge).
fn version_order(pg: &Polygraph, position: &[u32]) -> FxHashMap<ObjId, Vec<TxnId>> {
    pg.keys
        .iter()
        .map(|key| {
            let mut ws = key.writers.clone();
            ws.sort_unstable_by_key(|t| position[t.index()]);
            (key.obj, ws)
        })
        .collect()
}

/// Only item reads and writes, unique non-initial values, no deletes.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first operation that is not.
pub(crate) fn shape(h: &History, checker: CheckerKind) -> Result<(), CheckError> {
    let kv = items::unique_items(h, checker)?;
    items::unique_values(&kv, checker, &WriteSites::build(&kv))
}

/// What a minimal unsatisfiable core says, in words: the pairs of writes whose every order
/// closes one of the core's cycles (the first of which the anomaly shows).
fn core_explanation(
    kv: &KvHistory,
    pg: &Polygraph,
    core: &[Vec<Arc>],
    times: Option<&[Option<RealTime>]>,
) -> String {
    let mut pairs: Vec<usize> = core
        .iter()
        .flatten()
        .filter_map(|e| match e.2.origin {
            Origin::Chosen(l) => Some(l.var().idx() as usize),
            _ => None,
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let named: Vec<String> = pairs
        .iter()
        .filter_map(|&i| pg.pairs.get(i))
        .map(|p| format!("{} by {} and {}", object_label(kv, p.obj), kv.txn_label(p.a), kv.txn_label(p.b)))
        .collect();
    let cycles: Vec<String> = core
        .iter()
        .map(|c| {
            let edges = edges_of(kv, c.clone(), times);
            let mut path: Vec<String> =
                edges.iter().map(|e| format!("{} -{}->", kv.txn_label(e.from), e.kind)).collect();
            path.extend(edges.first().map(|e| kv.txn_label(e.from)));
            path.join(" ")
        })
        .collect();
    format!(
        ". Why no order works (a minimal unsatisfiable core): the writes of {} can be ordered {} way(s), \
         and every one closes one of these {} cycle(s): {}",
        named.join("; "),
        1u64.checked_shl(named.len() as u32).map_or("many".to_string(), |n| n.to_string()),
        cycles.len(),
        cycles.join("; ")
    )
}

/// An explained anomaly from a cycle's edges; `unsat`: the solver proved no order avoids
/// some cycle and this is the last one it met; `times`: the real times, when the graph has
/// the real-time chain (strict serializability).
fn anomaly(
    kv: &KvHistory,
    cycle: Vec<Arc>,
    si: bool,
    unsat: bool,
    times: Option<&[Option<RealTime>]>,
) -> Anomaly {
    let edges = edges_of(kv, cycle, times);
    let kind = if edges.iter().any(|e| e.kind == EdgeKind::RealTime) {
        AnomalyKind::RealTime
    } else if si && edges.iter().any(|e| e.kind == EdgeKind::Rw) {
        AnomalyKind::GSi
    } else {
        cycle_kind(edges.iter().map(|e| e.kind))
    };
    let what = match (unsat, si, times.is_some()) {
        (false, _, true) => {
            "dependency cycle of certain and forced edges, real-time order among them (no serial order explains \
             the reads and keeps the order in which transactions completed and were invoked)"
        }
        (true, _, true) => {
            "no order of the writes avoids a dependency cycle with real-time order (the solver proved it); one \
             cycle of its proof"
        }
        (false, false, _) => "dependency cycle of certain and forced edges (no serial order explains the reads)",
        (false, true, _) => "cycle of certain and forced edges with no two anti-dependencies in a row (no snapshot order explains the reads)",
        (true, false, _) => "no order of the writes avoids a dependency cycle (the solver proved it); one cycle of its proof",
        (true, true, _) => "no order of the writes avoids a cycle snapshot isolation forbids (the solver proved it); one cycle of its proof",
    };
    cycle_anomaly(&|t| kv.txn_label(t), kind, edges, what)
}

/// A cycle's arcs as explained edges, each stretch through the real-time chain (nodes past
/// the transactions) made one real-time edge between the two transactions it joins.
fn edges_of(kv: &KvHistory, mut cycle: Vec<Arc>, times: Option<&[Option<RealTime>]>) -> Vec<Edge> {
    let n = kv.len();
    // Start at a transaction node (the chain alone is acyclic, so the cycle has one).
    if let Some(first) = cycle.iter().position(|a| (a.0 as usize) < n) {
        cycle.rotate_left(first);
    }
    let mut out = Vec::with_capacity(cycle.len());
    let mut chain_from: Option<u32> = None;
    for &(a, b, t) in &cycle {
        if t.dep.kind == EdgeKind::RealTime {
            let times = times.expect("real-time arcs only with real times");
            if (a as usize) < n {
                chain_from = Some(a);
            }
            if (b as usize) < n {
                let from = chain_from.take().expect("a chain stretch starts at a transaction");
                let mut e = realtime::real_time_edge(kv, times, TxnId(from), TxnId(b));
                e.explanation.push_str(" (certain)");
                out.push(e);
            }
            continue;
        }
        out.push(edge_of(kv, (a, b, t)));
    }
    out
}

/// One explained edge of the polygraph, marked with its origin.
fn edge_of(kv: &KvHistory, arc: Arc) -> Edge {
    let (a, b, t) = arc;
    let (from, to) = (TxnId(a), TxnId(b));
    let mut e = match (t.origin, t.dep.kind) {
        (Origin::Certain, _) => explain(kv, a, b, t.dep),
        (_, EdgeKind::Ww) => Edge {
            from,
            to,
            kind: EdgeKind::Ww,
            obj: Some(t.dep.obj),
            op: None,
            basis: crate::EdgeBasis::Derived,
            explanation: format!(
                "{}'s version of {} came before {}'s",
                kv.txn_label(from),
                object_label(kv, t.dep.obj),
                kv.txn_label(to)
            ),
        },
        (origin, _) => {
            let read = match kv.ops(from).get(t.dep.op as usize) {
                Some(op) if op.kind() == KvOpKind::Read => value_label(kv, op.obj(), op.value()),
                _ => object_label(kv, t.dep.obj),
            };
            let which =
                if origin == Origin::InitialRead { "overwrote it" } else { "installed a later version" };
            Edge {
                from,
                to,
                kind: EdgeKind::Rw,
                obj: Some(t.dep.obj),
                op: Some(OpRef { txn: from, op: t.dep.op }),
                basis: crate::EdgeBasis::Derived,
                explanation: format!("{} read {read}, and {} {which}", kv.txn_label(from), kv.txn_label(to)),
            }
        }
    };
    e.explanation.push_str(match t.origin {
        Origin::Certain | Origin::InitialRead => " (certain)",
        Origin::Forced => " (forced: the other order of these writes closes a cycle)",
        Origin::Given => " (given by the certificate's version order, or shown by the list reads)",
        Origin::Chosen(_) => " (chosen by the solver)",
    });
    if matches!(t.origin, Origin::Chosen(_)) {
        e.basis = crate::EdgeBasis::Chosen;
    }
    e
}
