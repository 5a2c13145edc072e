//! Predicate dependencies (Algorithm 3): result-set checks against version sets, and
//! predicate-wr/rw edges for the versions that change a predicate's matches.
//!
//! Per distinct predicate, the versions that can match are found once through a sorted
//! index of the constrained column ([`crate::colindex`]); only those and their
//! neighbours in the version order are evaluated. Each operation then only walks the
//! predicate's matching versions and match-changing transitions, plus its version set.

mod delta;

use isocert_history::{
    Certificate, ColId, History, ObjId, Op, OpRef, PredId, SeenVersion, SnapshotResolver, SnapshotSet,
    TableId, TxnId, ValueId, Writer,
};
use isocert_oracle::MatchesOracle;
use rustc_hash::FxHashMap;

use super::item::ItemPass;
use super::witness::Obligations;
use super::RawEdge;
use crate::aggregate::{aggregate, same_result};
use crate::colindex::{key_of, usable_constraints, ColumnIndex, Range};
use crate::values::column_value;
use crate::versions::{VersionTable, INITIAL};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, EdgeKind, IsolationLevel};
use isocert_oracle::dependence::Dependence;

/// How witness mode walks an operation's compact version set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Only the rows that changed since the previous operation, the candidate matches and
    /// the rows whose forward check can fail ([`delta::DeltaView`]).
    Delta,
    /// Resolve the set and visit every row of the table (the reference the delta is tested
    /// against).
    #[cfg_attr(not(test), allow(dead_code))]
    EveryRow,
}

/// The versions one predicate matches, and those whose installation changed its matches.
#[derive(Debug, Default)]
struct PredInfo {
    matching: Vec<u32>,
    changing: Vec<u32>,
}

/// What a predicate operation's version set says about one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Version(u32),
    Own,
    Unborn,
    Missing(u32),
}

/// State of the predicate pass over one history.
pub(crate) struct PredicatePass<'a, 'h> {
    h: &'h History,
    sets: Option<&'a FxHashMap<OpRef, Vec<SeenVersion>>>,
    /// Compact version sets and their resolver (built when the certificate has any).
    snapshots: Option<(&'a FxHashMap<OpRef, SnapshotSet>, SnapshotResolver)>,
    /// The resolved compact set of the current operation, reused between operations.
    resolved: Vec<SeenVersion>,
    level: IsolationLevel,
    oracle: &'a dyn MatchesOracle,
    vt: &'a VersionTable,
    infos: Vec<Option<PredInfo>>,
    table_versions: Vec<Vec<u32>>,
    indexes: FxHashMap<(TableId, ColId), ColumnIndex<'h>>,
    stamp: Vec<u32>,
    seen: Vec<u32>,
    opno: u32,
    eval_stamp: Vec<u32>,
    eval_value: Vec<bool>,
    eval_gen: u32,
    /// Witness mode: a topological order of the item edges and what must be forward in
    /// it; predicate edges are checked against it instead of being materialised.
    pub(crate) witness: Option<(Vec<u32>, Obligations)>,
    /// Witness mode: a predicate edge was backward (or unknown), so the witness fails.
    pub(crate) failed: bool,
    table_objects: Vec<Vec<ObjId>>,
    /// Witness mode over compact sets: the rows' versions at the resolver's snapshot
    /// ([`delta::DeltaView`]), laid out at the first operation it serves.
    delta: Option<delta::DeltaView<'h>>,
    /// How witness mode walks compact sets.
    pub(crate) walk: Walk,
}

impl<'a, 'h> PredicatePass<'a, 'h> {
    pub(crate) fn new(
        h: &'h History,
        cert: &'a Certificate,
        level: IsolationLevel,
        oracle: &'a dyn MatchesOracle,
        vt: &'a VersionTable,
    ) -> Result<Self, CheckError> {
        let mut table_versions = vec![Vec::new(); h.tables().len()];
        for (g, v) in vt.versions.iter().enumerate() {
            table_versions[h.object(v.obj).table.index()].push(g as u32);
        }
        Ok(PredicatePass {
            h,
            sets: cert.version_sets.as_ref(),
            snapshots: cert.snapshot_sets.as_ref().map(|s| (s, SnapshotResolver::new(h, cert))),
            resolved: Vec::new(),
            level,
            oracle,
            vt,
            infos: (0..h.predicates().len()).map(|_| None).collect(),
            table_versions,
            indexes: FxHashMap::default(),
            stamp: vec![0; h.object_count()],
            seen: vec![0; h.object_count()],
            opno: 0,
            eval_stamp: vec![0; vt.versions.len()],
            eval_value: vec![false; vt.versions.len()],
            eval_gen: 0,
            witness: None,
            failed: false,
            table_objects: {
                let mut by_table = vec![Vec::new(); h.tables().len()];
                for o in 0..h.object_count() {
                    let obj = ObjId::from_index(o);
                    by_table[h.object(obj).table.index()].push(obj);
                }
                by_table
            },
            delta: None,
            walk: Walk::Delta,
        })
    }

    fn matches(&mut self, pred: PredId, gid: u32) -> Result<bool, CheckError> {
        let g = gid as usize;
        if self.eval_stamp[g] == self.eval_gen {
            return Ok(self.eval_value[g]);
        }
        let v = self.vt.versions[g];
        let m = v.value != ValueId::ABSENT
            && v.value.index() < self.h.value_count()
            && self.oracle.matches(self.h, pred, v.obj, v.value)?;
        self.eval_stamp[g] = self.eval_gen;
        self.eval_value[g] = m;
        Ok(m)
    }

    fn info(&mut self, pred: PredId) -> Result<PredInfo, CheckError> {
        if let Some(info) = self.infos[pred.index()].take() {
            return Ok(info);
        }
        let h = self.h;
        let table = h.predicate(pred).table;
        let bounds = self.oracle.bounds(pred);
        let usable = usable_constraints(&bounds, h.dialect);
        let mut best: Option<(usize, ColId, usize)> = None;
        for (i, (col, ranges)) in usable.iter().enumerate() {
            let vt = self.vt;
            let versions = &self.table_versions[table.index()];
            let index = self.indexes.entry((table, *col)).or_insert_with(|| {
                ColumnIndex::build(versions.iter().filter_map(|&g| {
                    let v = vt.versions[g as usize];
                    column_value(h, v.obj, v.value, *col).and_then(|s| key_of(s, h.dialect)).map(|k| (k, g))
                }))
            });
            let n = index.count(ranges);
            if best.is_none_or(|b| n < b.2) {
                best = Some((i, *col, n));
            }
        }
        let mut candidates = Vec::new();
        match best {
            Some((i, col, _)) => self.indexes[&(table, col)].for_each(&usable[i].1, |g| candidates.push(g)),
            None => candidates.extend_from_slice(&self.table_versions[table.index()]),
        }
        candidates.sort_unstable();
        candidates.dedup();
        self.eval_gen += 1;
        let mut info = PredInfo::default();
        for &g in &candidates {
            if self.matches(pred, g)? {
                info.matching.push(g);
            }
        }
        for g in self.transitions(&candidates) {
            if self.matches(pred, g)? != self.matches(pred, g - 1)? {
                info.changing.push(g);
            }
        }
        Ok(info)
    }

    fn resolve(&self, t: TxnId, obj: ObjId) -> Seen {
        if self.stamp[obj.index()] != self.opno {
            return Seen::Unborn;
        }
        match self.seen[obj.index()] {
            INITIAL => Seen::Version(self.vt.initial(obj)),
            w if w == t.0 => Seen::Own,
            w => self.vt.by_writer(obj, TxnId(w)).map_or(Seen::Missing(w), Seen::Version),
        }
    }

    /// Checks predicate operation `i` of `t` against its version set and adds its edges.
    pub(crate) fn op(
        &mut self,
        t: TxnId,
        i: u32,
        op: &Op,
        items: &mut ItemPass<'_, 'h>,
    ) -> Result<(), CheckError> {
        let h = self.h;
        let Some(pred) = op.predicate() else { return Ok(()) };
        let opref = OpRef { txn: t, op: i };
        if self.witness.is_some()
            && self.walk == Walk::Delta
            && self.sets.and_then(|s| s.get(&opref)).is_none()
        {
            let snaps = self.snapshots.as_ref().map(|(s, _)| *s);
            if let Some(snap) = snaps.and_then(|s| s.get(&opref)) {
                if self.delta_op(t, i, op, pred, snap, items)? {
                    return Ok(());
                }
            }
        }
        let mut resolved = std::mem::take(&mut self.resolved);
        let set: Option<&[SeenVersion]> = match self.sets.and_then(|s| s.get(&opref)) {
            Some(set) => Some(set),
            None => match &mut self.snapshots {
                Some((snaps, resolver)) => match snaps.get(&opref) {
                    Some(snap) => {
                        resolver.resolve_into(h, opref, snap, &mut resolved).map_err(|e| {
                            CheckError::InvalidCertificate {
                                field: format!("version_sets[{}:{}].snapshot", h.txn_label(t), i),
                                message: e.to_string(),
                            }
                        })?;
                        Some(&resolved)
                    }
                    None => None,
                },
                None => None,
            },
        };
        let result = self.op_with_set(t, i, op, pred, opref, set, items);
        self.resolved = resolved;
        result
    }

    /// [`Self::op`] once the operation's version set is known (`None`: the certificate has none).
    #[allow(clippy::too_many_arguments)]
    fn op_with_set(
        &mut self,
        t: TxnId,
        i: u32,
        op: &Op,
        pred: PredId,
        opref: OpRef,
        set: Option<&[SeenVersion]>,
        items: &mut ItemPass<'_, 'h>,
    ) -> Result<(), CheckError> {
        let h = self.h;
        let Some(set) = set else {
            if self.level == IsolationLevel::ReadUncommitted {
                // Only G0 matters at read-uncommitted; without a version set there is
                // nothing to compare the result with.
                return Ok(());
            }
            return Err(CheckError::MissingCertificateData {
                what: format!("version set for {} op {} (a predicate operation)", h.txn_label(t), i),
                level: self.level,
                checker: CheckerKind::Emme,
            });
        };
        self.stamp_version_set(set);
        if self.witness.is_some() {
            return self.witness_op(t, i, op, pred, set, items);
        }
        let info = self.info(pred)?;
        let expected = self.expected_result(t, i, pred, opref, &info, items)?;
        self.compare_results(t, i, op, &expected, items);
        if matches!(op, Op::Select { .. }) {
            for &(obj, _) in &expected {
                if let Seen::Version(g) = self.resolve(t, obj) {
                    // A version that changed the matches already gives the predicate-wr
                    // edge from its writer, which every cycle rule treats as a wr edge.
                    let changed_matches = info.changing.binary_search(&g).is_ok();
                    self.row_read_edges(t, i, g, !changed_matches, items);
                }
            }
        }
        self.predicate_edges(t, i, op, &info, &expected, items);
        self.infos[pred.index()] = Some(info);
        Ok(())
    }

    /// Marks the versions of `set` as what the current operation saw (read by `resolve`).
    fn stamp_version_set(&mut self, set: &[SeenVersion]) {
        self.opno += 1;
        for sv in set {
            self.stamp[sv.obj.index()] = self.opno;
            self.seen[sv.obj.index()] = match sv.writer {
                Writer::Initial => INITIAL,
                Writer::Txn(w) => w.0,
            };
        }
    }

    /// The rows (object, value) operation `i` of `t` should have matched, sorted: the
    /// matching versions its version set names, and its transaction's own matching writes.
    /// A version set naming another writer's version of a row `t` had written is an
    /// internal inconsistency, reported here.
    fn expected_result(
        &mut self,
        t: TxnId,
        i: u32,
        pred: PredId,
        opref: OpRef,
        info: &PredInfo,
        items: &mut ItemPass<'_, 'h>,
    ) -> Result<Vec<(ObjId, ValueId)>, CheckError> {
        let h = self.h;
        let table = h.predicate(pred).table;
        let mut expected: Vec<(ObjId, ValueId)> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        for &g in &info.matching {
            let v = self.vt.versions[g as usize];
            if !items.own.contains_key(&v.obj) && self.resolve(t, v.obj) == Seen::Version(g) {
                expected.push((v.obj, v.value));
            }
        }
        let mut own: Vec<(ObjId, Option<ValueId>)> = items
            .own
            .iter()
            .filter(|(o, _)| h.object(**o).table == table)
            .map(|(o, s)| (*o, s.value))
            .collect();
        own.sort_unstable();
        for (obj, value) in own {
            let seen = self.resolve(t, obj);
            let value = match (seen, value) {
                (Seen::Own, Some(v)) => v,
                (Seen::Own, None) => continue,
                (Seen::Version(g), _) => {
                    problems.push(format!(
                        "its version set names {}'s version of {} although {} had written it",
                        crate::versions::writer_label(h, self.vt.versions[g as usize].writer),
                        h.object_label(obj),
                        h.txn_label(t)
                    ));
                    self.vt.versions[g as usize].value
                }
                _ => continue,
            };
            if value != ValueId::ABSENT
                && value.index() < h.value_count()
                && self.oracle.matches(h, pred, obj, value)?
            {
                expected.push((obj, value));
            }
        }
        if !problems.is_empty() {
            items.anomalies.push(
                Anomaly::new(
                    AnomalyKind::InternalInconsistency,
                    vec![t],
                    format!(
                        "{} ({}): {}",
                        crate::words::nth_op(h, t, i),
                        h.predicate(pred).sql,
                        problems.join("; ")
                    ),
                )
                .with_ops(vec![opref]),
            );
        }
        expected.sort_unstable();
        Ok(expected)
    }

    /// The predicate edges of operation `i` of `t`: against each version that changes what
    /// it matches (for an aggregate, what it computes), predicate-rw to a later version's
    /// writer, predicate-wr from an earlier one's; a version whose predecessor `t` saw is
    /// not in the version order is reported instead.
    fn predicate_edges(
        &self,
        t: TxnId,
        i: u32,
        op: &Op,
        info: &PredInfo,
        expected: &[(ObjId, ValueId)],
        items: &mut ItemPass<'_, 'h>,
    ) {
        let h = self.h;
        let aggregate_changing;
        let changing: &[u32] = match Self::dependence(h, op, expected) {
            Some(dependence) => {
                aggregate_changing = self.aggregate_changing(info, &dependence);
                &aggregate_changing
            }
            None => &info.changing,
        };
        let mut missing: Vec<(ObjId, u32)> = Vec::new();
        for &g in changing {
            let v = self.vt.versions[g as usize];
            if v.writer == t.0 {
                continue;
            }
            let s = match self.resolve(t, v.obj) {
                Seen::Version(s) => s,
                Seen::Own => match self.vt.by_writer(v.obj, t) {
                    Some(s) => s,
                    None => continue,
                },
                Seen::Unborn => self.vt.initial(v.obj),
                Seen::Missing(w) => {
                    missing.push((v.obj, w));
                    continue;
                }
            };
            let edge = if g > s {
                RawEdge { from: t.0, to: v.writer, kind: EdgeKind::PredicateRw, op: i, ver: s, aux: g }
            } else {
                RawEdge { from: v.writer, to: t.0, kind: EdgeKind::PredicateWr, op: i, ver: g, aux: s }
            };
            items.edges.push(edge);
        }
        missing.sort_unstable();
        missing.dedup();
        for (obj, w) in missing {
            items.anomalies.push(unordered_version(h, t, i, obj, TxnId(w)));
        }
    }

    /// A select also reads the rows it returns (Adya models a query as a predicate read
    /// followed by item reads of the matching rows): version `g` it returned gives the item
    /// edges of a read, wr from its writer and rw to the writer of the next version, so
    /// that a concurrent change of a returned row's value is a dependency although the
    /// row stays matched.
    fn row_read_edges(&self, t: TxnId, i: u32, g: u32, read_dep: bool, items: &mut ItemPass<'_, 'h>) {
        let writer = self.vt.versions[g as usize].writer;
        if read_dep && writer != INITIAL && writer != t.0 {
            items.edges.push(RawEdge {
                from: writer,
                to: t.0,
                kind: EdgeKind::Wr,
                op: i,
                ver: g,
                aux: u32::MAX,
            });
        }
        if let Some(next) = self.vt.next(g) {
            let nw = self.vt.versions[next as usize].writer;
            if nw != t.0 {
                items.edges.push(RawEdge { from: t.0, to: nw, kind: EdgeKind::Rw, op: i, ver: g, aux: next });
            }
        }
    }

    /// Witness mode: whether the item edges of [`Self::row_read_edges`] are forward.
    fn row_read_forward(&self, t: TxnId, g: u32) -> bool {
        let Some((rank, obligations)) = &self.witness else { return false };
        let rt = rank[t.index()];
        let writer = self.vt.versions[g as usize].writer;
        if obligations.read_deps && writer != INITIAL && writer != t.0 && rank[writer as usize] >= rt {
            return false;
        }
        if obligations.item_anti_deps {
            if let Some(next) = self.vt.next(g) {
                let nw = self.vt.versions[next as usize].writer;
                if nw != t.0 && rank[nw as usize] <= rt {
                    return false;
                }
            }
        }
        true
    }

    /// What aggregate read `op` depends on, given the rows its version set matches; `None`
    /// for the other predicate operations, which depend on the matches.
    fn dependence<'o>(h: &'o History, op: &'o Op, expected: &[(ObjId, ValueId)]) -> Option<Dependence<'o>> {
        match op {
            Op::Aggregate { function, column, result, .. } => {
                Some(Dependence::of(h, *function, *column, result, expected))
            }
            _ => None,
        }
    }

    /// The versions whose installation changes what an aggregate read depends on. Only a
    /// transition into or out of a matching version can (an unmatched version's key is
    /// silent), and `info.matching` holds every matching version, sorted.
    fn aggregate_changing(&self, info: &PredInfo, dependence: &Dependence<'_>) -> Vec<u32> {
        let key = |g: u32| {
            let v = self.vt.versions[g as usize];
            dependence.key(self.h, v.obj, v.value, info.matching.binary_search(&g).is_ok())
        };
        self.transitions(&info.matching).into_iter().filter(|&g| key(g) != key(g - 1)).collect()
    }

    /// The installations into or out of `versions` (sorted): each one that has a
    /// predecessor, and each one's successor, sorted and once each.
    fn transitions(&self, versions: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(versions.len() * 2);
        for &g in versions {
            if self.vt.position(g) > 0 {
                out.push(g);
            }
            if let Some(next) = self.vt.next(g) {
                out.push(next);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether version `gid` may match `pred`: outside the constrained column's ranges it
    /// cannot; inside, the oracle decides.
    fn maybe_matches(
        &self,
        pred: PredId,
        filter: Option<&(ColId, Vec<Range<'_>>)>,
        gid: u32,
    ) -> Result<bool, CheckError> {
        let h = self.h;
        let v = self.vt.versions[gid as usize];
        if v.value == ValueId::ABSENT || v.value.index() >= h.value_count() {
            return Ok(false);
        }
        if let Some((col, ranges)) = filter {
            let Some(key) = column_value(h, v.obj, v.value, *col).and_then(|s| key_of(s, h.dialect)) else {
                return Ok(false);
            };
            if !ranges.iter().any(|r| r.contains(&key)) {
                return Ok(false);
            }
        }
        Ok(self.oracle.matches(h, pred, v.obj, v.value)?)
    }

    /// Whether installing version `gid` changes what a read of `pred` depends on: its
    /// matches, or for an aggregate its dependence key.
    fn changes(
        &self,
        pred: PredId,
        filter: Option<&(ColId, Vec<Range<'_>>)>,
        dependence: Option<&Dependence<'_>>,
        gid: u32,
    ) -> Result<bool, CheckError> {
        let (now, before) =
            (self.maybe_matches(pred, filter, gid)?, self.maybe_matches(pred, filter, gid - 1)?);
        Ok(match dependence {
            None => now != before,
            Some(d) => {
                let key = |g: u32, m: bool| {
                    let v = self.vt.versions[g as usize];
                    d.key(self.h, v.obj, v.value, m)
                };
                key(gid, now) != key(gid - 1, before)
            }
        })
    }

    /// Whether every predicate edge of reader `t` on the object of version `seen` is forward
    /// in the witness order.
    fn forward(
        &self,
        t: TxnId,
        pred: PredId,
        filter: Option<&(ColId, Vec<Range<'_>>)>,
        dependence: Option<&Dependence<'_>>,
        seen: u32,
    ) -> Result<bool, CheckError> {
        let Some((rank, obligations)) = &self.witness else { return Ok(false) };
        let rt = rank[t.index()];
        if obligations.read_deps {
            let mut k = seen;
            loop {
                let w = self.vt.versions[k as usize].writer;
                if w == INITIAL {
                    break;
                }
                if w != t.0 {
                    if rank[w as usize] < rt {
                        break;
                    }
                    if self.changes(pred, filter, dependence, k)? {
                        return Ok(false);
                    }
                }
                k -= 1;
            }
        }
        if obligations.anti_deps {
            let mut k = seen;
            while let Some(next) = self.vt.next(k) {
                let w = self.vt.versions[next as usize].writer;
                if w != t.0 {
                    if rank[w as usize] > rt {
                        break;
                    }
                    if self.changes(pred, filter, dependence, next)? {
                        return Ok(false);
                    }
                }
                k = next;
            }
        }
        Ok(true)
    }

    /// Witness mode: the result-set check by walking the version set, and a forward check
    /// per object instead of materialised predicate edges.
    fn witness_op(
        &mut self,
        t: TxnId,
        i: u32,
        op: &Op,
        pred: PredId,
        set: &[SeenVersion],
        items: &mut ItemPass<'_, 'h>,
    ) -> Result<(), CheckError> {
        let h = self.h;
        let table = h.predicate(pred).table;
        let bounds = self.oracle.bounds(pred);
        let usable = usable_constraints(&bounds, h.dialect);
        let filter = usable.first();
        let mut expected: Vec<(ObjId, ValueId)> = Vec::new();
        let mut missing: Vec<(ObjId, u32)> = Vec::new();
        // The versions whose edges must be forward; checked once the result's dependence
        // is known (an aggregate's depends on the rows matched).
        let mut seen_versions: Vec<u32> = Vec::new();
        for sv in set {
            if h.object(sv.obj).table != table || items.own.contains_key(&sv.obj) {
                continue;
            }
            match self.resolve(t, sv.obj) {
                Seen::Version(g) => {
                    if self.maybe_matches(pred, filter, g)? {
                        expected.push((sv.obj, self.vt.versions[g as usize].value));
                        if matches!(op, Op::Select { .. }) && !self.failed && !self.row_read_forward(t, g) {
                            self.failed = true;
                        }
                    }
                    seen_versions.push(g);
                }
                Seen::Missing(w) => missing.push((sv.obj, w)),
                Seen::Own | Seen::Unborn => {}
            }
        }
        for &obj in &self.table_objects[table.index()] {
            if self.stamp[obj.index()] != self.opno && !items.own.contains_key(&obj) {
                seen_versions.push(self.vt.initial(obj));
            }
        }
        let mut own: Vec<ObjId> = items.own.keys().copied().filter(|o| h.object(*o).table == table).collect();
        own.sort_unstable();
        for obj in own {
            match self.resolve(t, obj) {
                Seen::Own => {
                    if let Some(g) = self.vt.by_writer(obj, t) {
                        seen_versions.push(g);
                    }
                    if let Some(v) = items.own[&obj].value {
                        if v != ValueId::ABSENT
                            && v.index() < h.value_count()
                            && self.oracle.matches(h, pred, obj, v)?
                        {
                            expected.push((obj, v));
                        }
                    }
                }
                // The version set ignores the transaction's own write: the full pass
                // reports it with its explanation.
                Seen::Version(_) | Seen::Unborn | Seen::Missing(_) => self.failed = true,
            }
        }
        expected.sort_unstable();
        let dependence = Self::dependence(h, op, &expected);
        for g in seen_versions {
            if self.failed {
                break;
            }
            if !self.forward(t, pred, filter, dependence.as_ref(), g)? {
                self.failed = true;
            }
        }
        self.compare_results(t, i, op, &expected, items);
        missing.sort_unstable();
        for (obj, w) in missing {
            items.anomalies.push(unordered_version(h, t, i, obj, TxnId(w)));
        }
        Ok(())
    }

    fn compare_results(
        &self,
        t: TxnId,
        i: u32,
        op: &Op,
        expected: &[(ObjId, ValueId)],
        items: &mut ItemPass<'_, 'h>,
    ) {
        let h = self.h;
        let pred = op.predicate().expect("predicate op");
        let what = format!(
            "{} ({} where {})",
            crate::words::nth_op(h, t, i),
            h.table(h.predicate(pred).table).name,
            h.predicate(pred).sql
        );
        let message = match op {
            Op::Aggregate { function, column, result, .. } => {
                let want = aggregate(h, *function, *column, expected);
                (!same_result(result, &want)).then(|| {
                    format!(
                        "{what} returned {}({}) = {result}, but over its version set it is {want}",
                        function.as_str(),
                        column
                            .map_or("*".to_string(), |c| h.table(h.predicate(pred).table).columns[c.index()]
                                .to_string())
                    )
                })
            }
            Op::Select { rows, .. } | Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                let compare_values = matches!(op, Op::Select { .. });
                let mut got: Vec<(ObjId, ValueId)> = rows.iter().map(|r| (r.obj, r.value)).collect();
                got.sort_unstable();
                let same = if compare_values {
                    got == expected
                } else {
                    got.len() == expected.len() && got.iter().zip(expected).all(|(a, b)| a.0 == b.0)
                };
                (!same).then(|| {
                    let describe = |list: &[(ObjId, ValueId)], other: &[(ObjId, ValueId)]| -> Vec<String> {
                        list.iter()
                            .filter(|(o, v)| {
                                !other.iter().any(|(p, w)| p == o && (!compare_values || v == w))
                            })
                            .take(5)
                            .map(|&(o, v)| {
                                if compare_values {
                                    format!("{}={}", h.object_label(o), items.values.label(o, v))
                                } else {
                                    h.object_label(o)
                                }
                            })
                            .collect()
                    };
                    let extra = describe(&got, expected);
                    let absent = describe(expected, &got);
                    format!(
                        "{what}: rows differ from what its version set matches; returned but not matched: [{}]; \
                         matched but not returned: [{}]",
                        extra.join(", "),
                        absent.join(", ")
                    )
                })
            }
            _ => None,
        };
        if let Some(message) = message {
            items.anomalies.push(
                Anomaly::new(AnomalyKind::ResultSetMismatch, vec![t], message)
                    .with_ops(vec![OpRef { txn: t, op: i }]),
            );
        }
    }
}

/// A version set names a writer's version the version order does not have.
fn unordered_version(h: &History, t: TxnId, op: u32, obj: ObjId, writer: TxnId) -> Anomaly {
    Anomaly::new(
        AnomalyKind::CertificateContradiction,
        vec![t],
        format!(
            "the version set of {} op {op} names {}'s version of {}, which the version order does not have",
            h.txn_label(t),
            h.txn_label(writer),
            h.object_label(obj)
        ),
    )
    .with_ops(vec![OpRef { txn: t, op }])
    .with_objects(vec![obj])
}
