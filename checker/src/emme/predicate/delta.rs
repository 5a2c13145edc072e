//! Witness mode over compact version sets, operation to operation (issue 16).
//!
//! A compact set is a snapshot plus a few exceptions, and consecutive operations' snapshots
//! are close, so instead of resolving and walking every row of the table per operation,
//! [`DeltaView`] keeps what the resolver's current snapshot shows of every row (its *base*
//! version) and updates only the rows whose newest visible writer changed between two
//! snapshots ([`SnapshotResolver::take_changes`]). Per table and constrained column, a
//! sorted set of the base versions' keys gives a predicate's candidate matches in
//! O(log rows + candidates); per table, a segment tree over the ranks of each base version's
//! writer and of its successor's writer gives the rows whose forward check can fail (a
//! writer ranked at or after the reader, a successor ranked at or before it): every other
//! row's check passes at its first step without evaluating the predicate. The rows the
//! operation sees differently from the snapshot (exceptions, unseen rows, the
//! transaction's own writes, rows whose base version the operation's own transaction wrote,
//! objects whose writers have no commit timestamp order) are resolved one by one by the set's rule and checked exactly as the full walk does.

use std::collections::BTreeSet;
use std::ops::Bound;

use isocert_history::{
    ColId, History, ObjId, Op, OpRef, PredId, SnapshotResolver, SnapshotRow, SnapshotSet, TableId, TxnId,
    ValueId, Writer,
};
use rustc_hash::FxHashMap;

use super::PredicatePass;
use crate::colindex::{key_of, usable_constraints, Key, Range};
use crate::emme::item::ItemPass;
use crate::values::column_value;
use crate::versions::{VersionTable, INITIAL};
use crate::CheckError;

/// A base version that is not one: the row is resolved per operation.
const PER_OPERATION: u32 = u32::MAX;

/// An index key with a total order: numbers by their IEEE total order (`-0.0` as `0.0`), then
/// text in byte order (the order of [`Range::contains`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum OrdKey<'h> {
    Num(u64),
    Text(&'h str),
}

fn ord_num(n: f64) -> u64 {
    let bits = (n + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

impl<'h> From<Key<'h>> for OrdKey<'h> {
    fn from(k: Key<'h>) -> Self {
        match k {
            Key::Num(n) => OrdKey::Num(ord_num(n)),
            Key::Text(t) => OrdKey::Text(t),
        }
    }
}

/// Per position, the rank of the base version's writer (`-1`: the initial transaction) and
/// of its successor's writer (`i64::MAX`: none), with subtree maxima and minima.
#[derive(Debug)]
struct RankTree {
    size: usize,
    seen_max: Vec<i64>,
    next_min: Vec<i64>,
}

impl RankTree {
    fn new(len: usize) -> Self {
        let size = len.next_power_of_two().max(1);
        RankTree { size, seen_max: vec![i64::MIN; 2 * size], next_min: vec![i64::MAX; 2 * size] }
    }

    fn set(&mut self, pos: usize, seen: i64, next: i64) {
        let mut i = self.size + pos;
        self.seen_max[i] = seen;
        self.next_min[i] = next;
        while i > 1 {
            i /= 2;
            self.seen_max[i] = self.seen_max[2 * i].max(self.seen_max[2 * i + 1]);
            self.next_min[i] = self.next_min[2 * i].min(self.next_min[2 * i + 1]);
        }
    }

    /// The positions whose seen rank is at least `rt` (when `seen`) or whose next rank is at
    /// most `rt` (when `next`), in order.
    fn flagged(&self, rt: i64, seen: bool, next: bool, out: &mut Vec<usize>) {
        let hit = |i: usize| (seen && self.seen_max[i] >= rt) || (next && self.next_min[i] <= rt);
        let mut stack = vec![1usize];
        while let Some(i) = stack.pop() {
            if !hit(i) {
                continue;
            }
            if i >= self.size {
                out.push(i - self.size);
            } else {
                stack.push(2 * i + 1);
                stack.push(2 * i);
            }
        }
    }
}

/// One table's part of the view.
#[derive(Debug)]
struct TableView {
    ranks: RankTree,
    /// Objects resolved per operation (writers without a commit timestamp order, versions
    /// the version table lacks), in id order.
    per_operation: Vec<ObjId>,
}

/// The base version of every row at the resolver's current snapshot, and the indexes over
/// them (module doc).
#[derive(Debug)]
pub(super) struct DeltaView<'h> {
    /// Per object: its base version id, or [`PER_OPERATION`].
    base: Vec<u32>,
    /// Per object: its position among its table's objects.
    pos: Vec<u32>,
    tables: Vec<Option<TableView>>,
    keys: FxHashMap<(TableId, ColId), BTreeSet<(OrdKey<'h>, u32)>>,
    changes: Vec<ObjId>,
    /// Per object: the operation number that last marked it resolved per operation.
    marked: Vec<u32>,
    opno: u32,
    /// Per writing transaction: the objects whose base version it wrote (the rule skips an
    /// operation's own transaction, so these rows are resolved per operation for it).
    rows_of_writer: FxHashMap<u32, Vec<ObjId>>,
}

impl<'h> DeltaView<'h> {
    /// An empty view; tables are laid out when first asked for.
    pub(super) fn new(h: &History, table_objects: &[Vec<ObjId>]) -> Self {
        let mut pos = vec![0; h.object_count()];
        for objs in table_objects {
            for (p, o) in objs.iter().enumerate() {
                pos[o.index()] = p as u32;
            }
        }
        DeltaView {
            base: vec![PER_OPERATION; h.object_count()],
            pos,
            tables: (0..table_objects.len()).map(|_| None).collect(),
            keys: FxHashMap::default(),
            changes: Vec::new(),
            marked: vec![0; h.object_count()],
            opno: 0,
            rows_of_writer: FxHashMap::default(),
        }
    }

    /// The base version of `obj` at the resolver's snapshot.
    fn base_of(vt: &VersionTable, resolver: &SnapshotResolver, obj: ObjId) -> u32 {
        match resolver.row(obj) {
            SnapshotRow::Txn(w) => vt.by_writer(obj, w).unwrap_or(PER_OPERATION),
            SnapshotRow::Initial => vt.initial(obj),
            SnapshotRow::Unborn => {
                let g = vt.initial(obj);
                if vt.versions[g as usize].value == ValueId::ABSENT {
                    g
                } else {
                    PER_OPERATION
                }
            }
            SnapshotRow::PerOperation => PER_OPERATION,
        }
    }

    fn ranks_of(vt: &VersionTable, rank: &[u32], g: u32) -> (i64, i64) {
        if g == PER_OPERATION {
            return (i64::MIN, i64::MAX);
        }
        let w = vt.versions[g as usize].writer;
        let seen = if w == INITIAL { -1 } else { i64::from(rank[w as usize]) };
        let next = vt.next(g).map_or(i64::MAX, |n| i64::from(rank[vt.versions[n as usize].writer as usize]));
        (seen, next)
    }

    fn key(h: &'h History, vt: &VersionTable, col: ColId, g: u32) -> Option<OrdKey<'h>> {
        if g == PER_OPERATION {
            return None;
        }
        let v = vt.versions[g as usize];
        column_value(h, v.obj, v.value, col).and_then(|s| key_of(s, h.dialect)).map(OrdKey::from)
    }

    /// Brings the view to the resolver's current snapshot and lays out `table` (and the
    /// index of `col` over it) if it is new.
    #[allow(clippy::too_many_arguments)]
    fn sync(
        &mut self,
        h: &'h History,
        vt: &VersionTable,
        resolver: &mut SnapshotResolver,
        rank: &[u32],
        table_objects: &[Vec<ObjId>],
        table: TableId,
        col: ColId,
    ) {
        resolver.take_changes(&mut self.changes);
        let changes = std::mem::take(&mut self.changes);
        for &obj in &changes {
            let t = h.object(obj).table;
            let Some(view) = self.tables[t.index()].as_mut() else { continue };
            let old = self.base[obj.index()];
            let new = Self::base_of(vt, resolver, obj);
            if old == new {
                continue;
            }
            self.base[obj.index()] = new;
            Self::move_writer(&mut self.rows_of_writer, vt, obj, old, new);
            if new == PER_OPERATION && !view.per_operation.contains(&obj) {
                view.per_operation.push(obj);
            }
            let (seen, next) = Self::ranks_of(vt, rank, new);
            view.ranks.set(self.pos[obj.index()] as usize, seen, next);
            for (&(kt, kc), index) in self.keys.iter_mut() {
                if kt != t {
                    continue;
                }
                if let Some(k) = Self::key(h, vt, kc, old) {
                    index.remove(&(k, obj.0));
                }
                if let Some(k) = Self::key(h, vt, kc, new) {
                    index.insert((k, obj.0));
                }
            }
        }
        self.changes = changes;
        let objs = &table_objects[table.index()];
        if self.tables[table.index()].is_none() {
            let mut ranks = RankTree::new(objs.len());
            let mut per_operation = Vec::new();
            for (p, &obj) in objs.iter().enumerate() {
                let g = Self::base_of(vt, resolver, obj);
                self.base[obj.index()] = g;
                Self::move_writer(&mut self.rows_of_writer, vt, obj, PER_OPERATION, g);
                let (seen, next) = Self::ranks_of(vt, rank, g);
                ranks.set(p, seen, next);
                if g == PER_OPERATION {
                    per_operation.push(obj);
                }
            }
            self.tables[table.index()] = Some(TableView { ranks, per_operation });
        }
        if !self.keys.contains_key(&(table, col)) {
            let index = objs
                .iter()
                .filter_map(|&obj| Self::key(h, vt, col, self.base[obj.index()]).map(|k| (k, obj.0)))
                .collect();
            self.keys.insert((table, col), index);
        }
    }

    /// Moves `obj` from the rows of the writer of base version `old` to those of `new`'s.
    fn move_writer(
        rows_of_writer: &mut FxHashMap<u32, Vec<ObjId>>,
        vt: &VersionTable,
        obj: ObjId,
        old: u32,
        new: u32,
    ) {
        let writer =
            |g: u32| (g != PER_OPERATION).then(|| vt.versions[g as usize].writer).filter(|&w| w != INITIAL);
        if let Some(w) = writer(old) {
            if let Some(rows) = rows_of_writer.get_mut(&w) {
                if let Some(k) = rows.iter().position(|&o| o == obj) {
                    rows.swap_remove(k);
                }
                if rows.is_empty() {
                    rows_of_writer.remove(&w);
                }
            }
        }
        if let Some(w) = writer(new) {
            rows_of_writer.entry(w).or_default().push(obj);
        }
    }

    /// The objects whose base version's key lies in `ranges`, sorted and once each.
    fn candidates(&self, table: TableId, col: ColId, ranges: &[Range<'_>], out: &mut Vec<ObjId>) {
        out.clear();
        let Some(index) = self.keys.get(&(table, col)) else { return };
        for r in ranges {
            let (lo, hi) = match r {
                Range::Num(lo, hi) => {
                    if lo.is_nan() || hi.is_nan() || lo > hi {
                        continue;
                    }
                    (
                        Bound::Included((OrdKey::Num(ord_num(*lo)), 0)),
                        Bound::Included((OrdKey::Num(ord_num(*hi)), u32::MAX)),
                    )
                }
                Range::Text(lo, hi) => {
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        if lo > hi {
                            continue;
                        }
                    }
                    let lo = Bound::Included((OrdKey::Text(lo.unwrap_or("")), 0));
                    let hi = match hi {
                        Some(hi) => Bound::Included((OrdKey::Text(hi), u32::MAX)),
                        None => Bound::Unbounded,
                    };
                    (lo, hi)
                }
            };
            out.extend(index.range((lo, hi)).map(|&(_, o)| ObjId(o)));
        }
        out.sort_unstable();
        out.dedup();
    }
}

impl<'a, 'h> PredicatePass<'a, 'h> {
    /// Witness mode for predicate operation `i` of `t` with the compact set `snap`, through the
    /// [`DeltaView`]: the same anomalies and the same witness failure as resolving the set and
    /// walking it ([`Self::witness_op`]). Returns `false`, having done nothing, when the view
    /// cannot serve the operation (the predicate has no indexable bound).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn delta_op(
        &mut self,
        t: TxnId,
        i: u32,
        op: &Op,
        pred: PredId,
        snap: &SnapshotSet,
        items: &mut ItemPass<'_, 'h>,
    ) -> Result<bool, CheckError> {
        let h = self.h;
        let table = h.predicate(pred).table;
        let bounds = self.oracle.bounds(pred);
        let usable = usable_constraints(&bounds, h.dialect);
        let Some(filter) = usable.first() else { return Ok(false) };
        let (Some((_, resolver)), Some((rank, obligations))) =
            (self.snapshots.as_mut(), self.witness.as_ref())
        else {
            return Ok(false);
        };
        let opref = OpRef { txn: t, op: i };
        let view = self.delta.get_or_insert_with(|| {
            resolver.record_changes();
            DeltaView::new(h, &self.table_objects)
        });
        resolver.seek(snap.visible_through);
        view.sync(h, self.vt, resolver, rank, &self.table_objects, table, filter.0);
        let rt = i64::from(rank[t.index()]);
        let (read_deps, anti_deps) = (obligations.read_deps, obligations.anti_deps);

        // The rows resolved one by one, in id order, with what the set gives them.
        view.opno += 1;
        let mark = view.opno;
        let earlier = SnapshotResolver::earlier_writes(h, opref);
        let in_table = |o: &ObjId| h.object(*o).table == table;
        let mut exact: Vec<ObjId> = earlier.iter().copied().filter(in_table).collect();
        exact.extend(items.own.keys().copied().filter(in_table));
        exact.extend(snap.except.iter().map(|e| e.obj).filter(in_table));
        exact.extend(snap.unseen.iter().copied().filter(in_table));
        exact.extend(view.rows_of_writer.get(&t.0).into_iter().flatten().copied().filter(in_table));
        exact.extend(view.tables[table.index()].as_ref().map_or(&[][..], |v| &v.per_operation[..]));
        exact.sort_unstable();
        exact.dedup();
        let mut entries: Vec<(ObjId, Option<Writer>)> = Vec::with_capacity(exact.len());
        for &obj in &exact {
            view.marked[obj.index()] = mark;
            let seen = resolver.resolve_object(h, opref, snap, obj, &earlier).map_err(|e| {
                CheckError::InvalidCertificate {
                    field: format!("version_sets[{}:{}].snapshot", h.txn_label(t), i),
                    message: e.to_string(),
                }
            })?;
            entries.push((obj, seen.map(|s| s.writer)));
        }
        let mut candidates = Vec::new();
        view.candidates(table, filter.0, &filter.1, &mut candidates);
        candidates.retain(|o| view.marked[o.index()] != mark);
        let candidates: Vec<(ObjId, u32)> =
            candidates.into_iter().map(|o| (o, view.base[o.index()])).collect();
        let mut flagged = Vec::new();
        if let Some(tv) = view.tables[table.index()].as_ref() {
            tv.ranks.flagged(rt, read_deps, anti_deps, &mut flagged);
        }
        let objs = &self.table_objects[table.index()];
        let mut seen_versions: Vec<u32> = flagged
            .into_iter()
            .map(|p| objs[p])
            .filter(|o| view.marked[o.index()] != mark)
            .map(|o| view.base[o.index()])
            .collect();

        let mut expected: Vec<(ObjId, ValueId)> = Vec::new();
        let mut missing: Vec<(ObjId, u32)> = Vec::new();
        let select = matches!(op, Op::Select { .. });
        for (obj, g) in candidates {
            self.seen_version_matches(t, pred, filter, select, obj, g, &mut expected)?;
        }
        for (obj, entry) in entries {
            if let Some(own) = items.own.get(&obj) {
                match entry {
                    Some(Writer::Txn(w)) if w == t => {
                        if let Some(g) = self.vt.by_writer(obj, t) {
                            seen_versions.push(g);
                        }
                        if let Some(v) = own.value {
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
                    _ => self.failed = true,
                }
                continue;
            }
            let g = match entry {
                None => {
                    seen_versions.push(self.vt.initial(obj));
                    continue;
                }
                Some(Writer::Initial) => self.vt.initial(obj),
                Some(Writer::Txn(w)) if w == t => continue,
                Some(Writer::Txn(w)) => match self.vt.by_writer(obj, w) {
                    Some(g) => g,
                    None => {
                        missing.push((obj, w.0));
                        continue;
                    }
                },
            };
            self.seen_version_matches(t, pred, filter, select, obj, g, &mut expected)?;
            seen_versions.push(g);
        }
        expected.sort_unstable();
        let dependence = Self::dependence(h, op, &expected);
        for g in seen_versions {
            if self.failed {
                break;
            }
            if !self.forward(t, pred, Some(filter), dependence.as_ref(), g)? {
                self.failed = true;
            }
        }
        self.compare_results(t, i, op, &expected, items);
        missing.sort_unstable();
        for (obj, w) in missing {
            items.anomalies.push(super::unordered_version(h, t, i, obj, TxnId(w)));
        }
        Ok(true)
    }

    /// Version `g` of `obj`, seen by a predicate operation of `t`: when it matches, adds it
    /// to `expected` and, for a select, checks its row-read edges are forward.
    #[allow(clippy::too_many_arguments)]
    fn seen_version_matches(
        &mut self,
        t: TxnId,
        pred: PredId,
        filter: &(ColId, Vec<Range<'_>>),
        select: bool,
        obj: ObjId,
        g: u32,
        expected: &mut Vec<(ObjId, ValueId)>,
    ) -> Result<(), CheckError> {
        if self.maybe_matches(pred, Some(filter), g)? {
            expected.push((obj, self.vt.versions[g as usize].value));
            if select && !self.failed && !self.row_read_forward(t, g) {
                self.failed = true;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emme::check_walking;
    use crate::emme::predicate::Walk;
    use crate::IsolationLevel;
    use isocert_gen::{generate, GenConfig, Injection};
    use isocert_oracle::Interpreter;

    /// The delta walk against the every-row walk it replaces, report for report (anomalies
    /// with their messages and evidence, notes, statistics), over generated predicate
    /// histories: seeds, both simulated levels, no injection and every injection, compact
    /// and explicit version sets, checked at RC, RR, SI and SER.
    #[test]
    fn delta_walk_reports_what_the_every_row_walk_reports() {
        let levels = [
            IsolationLevel::ReadCommitted,
            IsolationLevel::RepeatableRead,
            IsolationLevel::SnapshotIsolation,
            IsolationLevel::Serializable,
        ];
        let (mut compared, mut witnessed, mut invalid, mut injected) = (0, 0, 0, 0);
        for seed in 0..5 {
            for (keys, txns) in [(10, 120), (40, 200)] {
                for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
                    for inject in std::iter::once(None).chain(Injection::ALL.iter().copied().map(Some)) {
                        let cfg = GenConfig {
                            txns,
                            sessions: 5,
                            keys,
                            predicate_ratio: 0.4,
                            seed,
                            isolation,
                            inject,
                            ..GenConfig::default()
                        };
                        for explicit in [false, true] {
                            let Ok(g) =
                                generate(&GenConfig { explicit_version_sets: explicit, ..cfg.clone() })
                            else {
                                continue;
                            };
                            assert_eq!(g.certificate.snapshot_sets.is_some(), !explicit);
                            injected += usize::from(inject.is_some_and(Injection::needs_predicates));
                            let oracle = Interpreter::new(&g.history).unwrap();
                            for level in levels {
                                let run =
                                    |walk| check_walking(&g.history, &g.certificate, level, &oracle, walk);
                                let (delta, every) = (run(Walk::Delta), run(Walk::EveryRow));
                                let what =
                                    format!("seed {seed} keys {keys} {isolation:?} {inject:?} {level:?}");
                                match (&delta, &every) {
                                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
                                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
                                    _ => panic!("{what}: one walk failed: {delta:?} vs {every:?}"),
                                }
                                if let Ok(r) = delta {
                                    compared += 1;
                                    invalid += usize::from(!r.is_valid());
                                    witnessed +=
                                        usize::from(r.notes.iter().any(|n| n.contains("serial order")));
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(
            compared > 1000 && witnessed > 300 && invalid > 200 && injected > 20,
            "{compared} compared, {witnessed} witnessed, {invalid} invalid, {injected} predicate injections"
        );
    }

    #[test]
    fn rank_tree_flags_exactly_the_positions_a_scan_would() {
        let mut state: u64 = 7;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as i64
        };
        for len in [1usize, 2, 3, 7, 64, 100] {
            let mut tree = RankTree::new(len);
            let mut rows = vec![(i64::MIN, i64::MAX); len];
            for _ in 0..200 {
                let p = (next() as usize) % len;
                let (s, n) = (next() % 50 - 1, next() % 60);
                tree.set(p, s, n);
                rows[p] = (s, n);
                let rt = next() % 50;
                for (seen, nx) in [(true, true), (true, false), (false, true), (false, false)] {
                    let mut got = Vec::new();
                    tree.flagged(rt, seen, nx, &mut got);
                    got.sort_unstable();
                    let want: Vec<usize> =
                        (0..len).filter(|&q| (seen && rows[q].0 >= rt) || (nx && rows[q].1 <= rt)).collect();
                    assert_eq!(got, want, "len {len} rt {rt}");
                }
            }
        }
    }

    #[test]
    fn ord_key_orders_numbers_like_f64() {
        let xs = [f64::NEG_INFINITY, -3.5, -1.0, -0.0, 0.0, 1e-300, 2.0, 1e9, f64::INFINITY];
        for a in xs {
            for b in xs {
                let (ka, kb) = (ord_num(a), ord_num(b));
                assert_eq!(a.partial_cmp(&b).unwrap(), ka.cmp(&kb), "{a} vs {b}");
            }
        }
        assert!(OrdKey::Num(ord_num(f64::INFINITY)) < OrdKey::Text(""));
    }
}
