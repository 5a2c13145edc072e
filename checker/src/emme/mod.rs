//! Emme: Adya's direct serialization graph from a version certificate (Algorithms 1–3).
//!
//! 1. [`VersionTable`] lays out every committed version in the certificate's version order.
//! 2. [`item`] walks each committed transaction's operations: item reads give wr and rw
//!    edges or a non-cyclic anomaly; the version order gives ww edges.
//! 3. [`predicate`] checks each predicate operation's result against its version set and
//!    adds predicate-wr/rw edges for the versions that change its matches, touching only
//!    versions an index of the predicate's bounds says can match.
//! 4. [`cycles`] finds strongly connected components per level and reports the shortest
//!    cycle through a forbidden edge; [`si`] adds the start-dependency checks of G-SI.
//! 5. [`lists`] checks list reads against each other (incompatible orders, duplicate
//!    elements), which needs no version order.

mod cycles;
mod explain;
mod item;
mod lists;
mod predicate;
mod si;
mod witness;

use isocert_history::{Certificate, History, Op, Status};
use isocert_oracle::MatchesOracle;

use crate::values::ValueStore;
use crate::versions::{VersionTable, INITIAL};
use crate::{CheckError, CheckerKind, EdgeKind, IsolationLevel, Report};

/// One dependency edge before explanation: versions are ids in the [`VersionTable`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEdge {
    pub(crate) from: u32,
    pub(crate) to: u32,
    pub(crate) kind: EdgeKind,
    /// The op index in the reading (or predicate) transaction, `u32::MAX` for ww.
    pub(crate) op: u32,
    /// wr: the version read; rw: the version read; ww: the earlier version;
    /// predicate-wr: the version that changes the matches; predicate-rw: the version seen.
    pub(crate) ver: u32,
    /// rw and ww: the next version; predicate-wr: the version seen (or `u32::MAX`: its own);
    /// predicate-rw: the later version that changes the matches.
    pub(crate) aux: u32,
}

/// Walks the committed transactions' predicate operations with `pass`, tracking each
/// transaction's own writes.
fn predicates<'h>(
    h: &'h History,
    vt: &VersionTable,
    values: &mut ValueStore<'h>,
    edges: &mut Vec<RawEdge>,
    anomalies: &mut Vec<crate::Anomaly>,
    pass: &mut predicate::PredicatePass<'_, 'h>,
    level: IsolationLevel,
) -> Result<(), CheckError> {
    let mut own = item::ItemPass::new(h, vt, values, edges, anomalies, level, None);
    own.own_only = true;
    for t in h.txn_ids().filter(|t| vt.in_graph[t.index()]) {
        own.start_txn(t);
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            if op.predicate().is_some() {
                pass.op(t, i as u32, op, &mut own)?;
            }
            own.op(t, i as u32, op);
        }
    }
    Ok(())
}

/// Session order: an edge from each graph transaction to the next one of its session (file
/// order within a session is session order). The level's definition includes it by default;
/// without it ([`crate::SessionOrder::Excluded`]) every transaction is its own session and
/// there are none. A transaction without operations is skipped (its neighbours are joined
/// directly, which keeps the order): it has no timestamps to check a session edge against,
/// and nothing it did can be seen.
fn session_edges(h: &History, vt: &VersionTable, edges: &mut Vec<RawEdge>) {
    let mut last: Vec<u32> = vec![u32::MAX; h.session_count()];
    for t in h.txn_ids().filter(|t| vt.in_graph[t.index()] && !h.txn(*t).ops.is_empty()) {
        let session = h.txn(t).session.index();
        let before = std::mem::replace(&mut last[session], t.0);
        if before != u32::MAX {
            edges.push(RawEdge {
                from: before,
                to: t.0,
                kind: EdgeKind::Session,
                op: u32::MAX,
                ver: u32::MAX,
                aux: u32::MAX,
            });
        }
    }
}

/// Why the certificate checkers refuse read atomic and causal consistency, and what to use.
pub(crate) const WEAK_HINT: &str = "read-atomic and causal are checked black-box, without a certificate: \
                                    use --checker weak (or --checker auto)";

/// Runs Emme.
pub(crate) fn check(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    check_walking(h, cert, level, oracle, predicate::Walk::Delta)
}

/// Runs Emme, walking compact version sets as `walk` says in witness mode.
fn check_walking(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    oracle: &dyn MatchesOracle,
    walk: predicate::Walk,
) -> Result<Report, CheckError> {
    if level.black_box_only() {
        return Err(CheckError::UnsupportedLevel { checker: CheckerKind::Emme, level, hint: WEAK_HINT });
    }
    let order = cert.version_order.as_ref().ok_or_else(|| CheckError::MissingCertificateData {
        what: "version order in the certificate".to_string(),
        level,
        checker: CheckerKind::Emme,
    })?;
    let mut report = Report::new(level, CheckerKind::Emme);
    let mut values = ValueStore::new(h);
    let mut anomalies = Vec::new();
    let vt = VersionTable::build(h, order, cert.writer_identity, &mut values, &mut anomalies);
    // Room for the item edges at once (a ww edge per version, a session edge per
    // transaction, a wr and an rw edge per item read): grown by doubling, the edge list
    // was copied four times and its copies' page faults were about 8% of an item-only
    // check (`perf`, issue 34). Pages reserved and never written cost no memory.
    let item_reads: usize = h
        .txns
        .iter()
        .zip(&vt.in_graph)
        .filter(|(_, &in_graph)| in_graph)
        .map(|(t, _)| t.ops.iter().filter(|op| matches!(op, Op::Read { .. })).count())
        .sum();
    let mut edges = Vec::with_capacity(vt.versions.len() + h.txns.len() + 2 * item_reads);
    for ver in 1..vt.versions.len() as u32 {
        // A version of an unordered tail follows the last listed one, not its neighbour.
        let before = if vt.is_unordered(ver) { vt.last_listed(ver) } else { ver - 1 };
        let (a, b) = (&vt.versions[before as usize], &vt.versions[ver as usize]);
        if a.obj == b.obj && a.writer != INITIAL && a.writer != b.writer {
            edges.push(RawEdge {
                from: a.writer,
                to: b.writer,
                kind: EdgeKind::Ww,
                op: u32::MAX,
                ver: before,
                aux: ver,
            });
        }
    }
    session_edges(h, &vt, &mut edges);
    if vt.unordered > 0 {
        report.notes.push(format!(
            "{} committed append(s) no read shows have no known order among themselves: each follows every \
             version the reads show, and no edge orders them against each other, so the verdict holds for every \
             order they could have had",
            vt.unordered
        ));
    }
    let needs_predicates = level != IsolationLevel::ReadUncommitted
        || cert.version_sets.is_some()
        || cert.snapshot_sets.is_some();
    let read_versions = cert.version_sets.as_ref().filter(|sets| {
        sets.keys().any(|r| {
            matches!(h.txns.get(r.txn.index()).and_then(|t| t.ops.get(r.op as usize)), Some(Op::Read { .. }))
        })
    });
    let mut items =
        item::ItemPass::new(h, &vt, &mut values, &mut edges, &mut anomalies, level, read_versions);
    let mut committed = 0;
    for t in h.txn_ids() {
        if !vt.in_graph[t.index()] {
            continue;
        }
        committed += 1;
        items.start_txn(t);
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            items.op(t, i as u32, op);
        }
    }
    report.stats.reads_resolved_by_certificate = items.resolved_reads;
    report.stats.ambiguous_reads = items.ambiguous_reads;
    drop(items);
    let has_predicates = h.txns.iter().any(|t| t.ops.iter().any(|op| op.predicate().is_some()));
    if needs_predicates && has_predicates {
        let mut certified = false;
        if let Some(obligations) = witness::Obligations::of(level) {
            if let Some(rank) = witness::rank(h, cert, &edges, level) {
                let mut found = Vec::new();
                let mut unused = Vec::new();
                let mut pass = predicate::PredicatePass::new(h, cert, level, oracle, &vt)?;
                pass.witness = Some((rank, obligations));
                pass.walk = walk;
                predicates(h, &vt, &mut values, &mut unused, &mut found, &mut pass, level)?;
                if !pass.failed {
                    anomalies.extend(found);
                    certified = true;
                    report.notes.push(
                        "predicate dependencies were checked against a serial order of the item dependencies; \
                         none goes backward, so they close no cycle"
                            .into(),
                    );
                }
            }
        }
        if !certified {
            let mut pass = predicate::PredicatePass::new(h, cert, level, oracle, &vt)?;
            predicates(h, &vt, &mut values, &mut edges, &mut anomalies, &mut pass, level)?;
        }
    }
    let (resolved, ambiguous) = (report.stats.reads_resolved_by_certificate, report.stats.ambiguous_reads);
    if resolved > 0 {
        report.notes.push(format!(
            "{resolved} item read(s) returned no row of an object with several absent versions (unborn and \
             deleted); the certificate named the version each saw"
        ));
    }
    if ambiguous > 0 {
        report.notes.push(format!(
            "{ambiguous} item read(s) returned no row of an object with several absent versions (unborn and \
             deleted) and the certificate names no version for them; they add no dependency edges"
        ));
    }
    if !needs_predicates && has_predicates {
        report.notes.push(
            "no version sets: predicate results were not checked (read-uncommitted only forbids G0)".into(),
        );
    }
    if level == IsolationLevel::SnapshotIsolation {
        si::check(h, &values, &vt, &edges, &mut anomalies)?;
    }
    anomalies.extend(cycles::find(h, cert, &values, &vt, &edges, level));
    lists::check(h, &vt, &mut anomalies);
    lists::drop_garbage_reads_explained(&mut anomalies);
    anomalies.retain(|a| a.kind.violates(level));
    report.stats.txns = h.txns.len();
    report.stats.committed = committed;
    report.stats.ops = h.txns.iter().map(|t| t.ops.len()).sum();
    report.stats.edges = edges.len();
    report.anomalies = anomalies;
    if h.txns.iter().any(|t| t.status == Status::Unknown) {
        report.notes.push(
            "transactions with unknown outcome count as committed when the version order lists a version of \
             theirs, and as not committed otherwise"
                .into(),
        );
    }
    Ok(report)
}
