//! The version table: every committed version of every object, in the certificate's
//! version order, with the value it holds and who installed it.
//!
//! Built once per check from the history and the certificate. Version ids are dense
//! (`u32`), the versions of one object are contiguous (oldest first, the initial version
//! at position 0), so "the next version" is the next id.
//!
//! A list object's committed appends that the version order leaves out and that no read
//! shows (an Elle history's appends nobody read) are laid out after the listed versions as
//! the object's *unordered tail*: each is known to follow every listed version (a read of
//! the list would have shown its element otherwise), but their relative order is unknown,
//! so no version of the tail has a known next version ([`VersionTable::following`]).

use isocert_history::{is_opaque_value, History, ObjId, Op, Scalar, Status, TxnId, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::values::ValueStore;
use crate::{Anomaly, AnomalyKind};

/// The writer of an initial version.
pub(crate) const INITIAL: u32 = u32::MAX;

/// One committed version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Version {
    /// The object.
    pub(crate) obj: ObjId,
    /// The installing transaction, or [`INITIAL`].
    pub(crate) writer: u32,
    /// The value it holds.
    pub(crate) value: ValueId,
}

/// What one transaction finally did to one object: the last value it set, then the
/// elements it appended after that, and the version it became (`NONE` until the version
/// order lists it).
#[derive(Debug)]
struct FinalEffect {
    obj: ObjId,
    set: Option<ValueId>,
    /// The elements appended after the last value set: an index into the table's
    /// `appended` lists, `NONE` when there are none (kept aside so an effect stays 20 bytes).
    appended: u32,
    gid: u32,
}

const NONE: u32 = u32::MAX;

/// In `sole_holder`: several versions hold the value (or it is the absent value).
const SHARED: u32 = u32::MAX - 1;

/// Where a read value came from when it is not a committed version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteSite {
    /// The writing transaction.
    pub(crate) txn: TxnId,
    /// The op index of the write.
    pub(crate) op: u32,
    /// Whether it was the transaction's last write of the object.
    pub(crate) is_final: bool,
}

/// All committed versions, indexed by object, value and writer.
#[derive(Debug)]
pub(crate) struct VersionTable {
    /// Every version; the versions of object `o` are `start[o]..start[o + 1]`.
    pub(crate) versions: Vec<Version>,
    start: Vec<u32>,
    /// Per object, where its unordered tail starts (its end when it has none).
    tail: Vec<u32>,
    /// How many versions are in unordered tails.
    pub(crate) unordered: usize,
    /// Per object (the same ranges as `versions`), its versions' (value, id) sorted: found by
    /// binary search in the object's few versions rather than in a hash map of every
    /// version, which cost a quarter of an item-only check in cache misses (`perf`).
    by_value: Vec<(ValueId, u32)>,
    /// Per value id, the one version of any object that holds it ([`NONE`] when none does,
    /// [`SHARED`] when several do, and for the absent value): a read then finds its version
    /// with one lookup instead of a binary search among its object's versions, whose cache
    /// misses were 9 to 12% of an item-only check at serializable (`perf`, issue 34).
    sole_holder: Vec<u32>,
    /// Each graph transaction's final effects, sorted by object: transaction `t`'s are
    /// `effects[effect_start[t]..effect_start[t + 1]]`; each knows its version.
    effects: Vec<FinalEffect>,
    effect_start: Vec<u32>,
    /// The elements each effect appended after its last set value, when it appended any.
    appended: Vec<Vec<Scalar>>,
    /// Opaque values (stand-ins for rows nobody read) that several versions of one object
    /// hold: reads of them are ambiguous, not duplicate writes.
    shared_opaque: FxHashSet<(ObjId, ValueId)>,
    /// With a certificate whose writers identify the versions: values that several versions
    /// of one object hold. They are distinct versions; a read of one is resolved only by the
    /// certificate naming the version it saw, and is a duplicate write otherwise.
    repeated: FxHashSet<(ObjId, ValueId)>,
    /// Whether each transaction is a node of the dependency graph: committed, or named by
    /// the version order (an unknown or aborted transaction the certificate says committed).
    pub(crate) in_graph: Vec<bool>,
}

impl VersionTable {
    /// Builds the table; contradictions between history and certificate (and duplicate
    /// writes, unless `writer_identity`: see [`isocert_history::Certificate::writer_identity`])
    /// are pushed to `anomalies`.
    pub(crate) fn build(
        h: &History,
        order: &FxHashMap<ObjId, Vec<TxnId>>,
        writer_identity: bool,
        values: &mut ValueStore<'_>,
        anomalies: &mut Vec<Anomaly>,
    ) -> VersionTable {
        let n = h.txns.len();
        let mut in_graph: Vec<bool> = h.txns.iter().map(|t| t.status == Status::Committed).collect();
        let mut named = vec![false; n];
        let mut order_objs: Vec<&ObjId> = order.keys().collect();
        order_objs.sort_unstable();
        for &obj in &order_objs {
            for &t in &order[obj] {
                named[t.index()] = true;
            }
        }
        for t in h.txn_ids() {
            if !named[t.index()] || in_graph[t.index()] {
                continue;
            }
            in_graph[t.index()] = true;
            if h.txn(t).status == Status::Aborted {
                anomalies.push(Anomaly::new(
                    AnomalyKind::CertificateContradiction,
                    vec![t],
                    format!(
                        "{} aborted, but the certificate's version order lists a version it installed",
                        h.txn_label(t)
                    ),
                ));
            }
        }
        let (effects, effect_start, appended) = final_effects(h, &in_graph);
        let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
        let objects = h.object_count();
        let mut table = VersionTable {
            versions: Vec::with_capacity(objects + effects.len()),
            start: Vec::with_capacity(objects + 1),
            tail: Vec::with_capacity(objects),
            unordered: 0,
            by_value: Vec::new(),
            sole_holder: Vec::new(),
            effects,
            effect_start,
            appended,
            shared_opaque: FxHashSet::default(),
            repeated: FxHashSet::default(),
            in_graph,
        };
        // Anomalies found while laying out versions, keyed by the version id about to be
        // pushed, so the duplicate writes found afterwards fall in the same order.
        let mut found: Vec<(u32, Anomaly)> = Vec::new();
        let mut unlisted = unlisted_appends(h, order, &table);
        for o in 0..objects {
            let obj = ObjId::from_index(o);
            table.start.push(table.versions.len() as u32);
            let mut value = initial.get(&obj).copied().unwrap_or(ValueId::ABSENT);
            table.versions.push(Version { obj, writer: INITIAL, value });
            let writers = order.get(&obj).map(Vec::as_slice).unwrap_or(&[]);
            for &t in writers {
                let label = || format!("{} in the version order of {}", h.txn_label(t), h.object_label(obj));
                let next = table.versions.len() as u32;
                let Some(e) = table.effect_index(obj, t) else {
                    found.push((
                        next,
                        Anomaly::new(
                            AnomalyKind::CertificateContradiction,
                            vec![t],
                            format!(
                                "{}, but the history has no write of {} by {}",
                                label(),
                                h.object_label(obj),
                                h.txn_label(t)
                            ),
                        )
                        .with_objects(vec![obj]),
                    ));
                    continue;
                };
                let effect = &mut table.effects[e];
                if effect.gid != NONE {
                    found.push((
                        next,
                        Anomaly::new(
                            AnomalyKind::CertificateContradiction,
                            vec![t],
                            format!("{} appears twice", label()),
                        )
                        .with_objects(vec![obj]),
                    ));
                    continue;
                }
                effect.gid = next;
                if let Some(set) = effect.set {
                    value = set;
                }
                if effect.appended != NONE {
                    for element in &table.appended[effect.appended as usize] {
                        value = values.append(value, element);
                    }
                }
                table.versions.push(Version { obj, writer: t.0, value });
            }
            table.tail.push(table.versions.len() as u32);
            for (t, e) in unlisted.remove(&obj).unwrap_or_default() {
                table.effects[e].gid = table.versions.len() as u32;
                for element in &table.appended[table.effects[e].appended as usize] {
                    value = values.append(value, element);
                }
                table.versions.push(Version { obj, writer: t.0, value });
                table.unordered += 1;
            }
        }
        table.start.push(table.versions.len() as u32);
        table.index_values(h, writer_identity, &mut found);
        found.sort_by_key(|(at, _)| *at);
        anomalies.extend(found.into_iter().map(|(_, a)| a));
        let mut missing: Vec<(ObjId, TxnId)> = Vec::new();
        for t in 0..h.txns.len() {
            let range = table.effect_start[t] as usize..table.effect_start[t + 1] as usize;
            missing.extend(
                table.effects[range].iter().filter(|e| e.gid == NONE).map(|e| (e.obj, TxnId(t as u32))),
            );
        }
        missing.sort_unstable();
        for (obj, t) in missing {
            anomalies.push(
                Anomaly::new(
                    AnomalyKind::CertificateContradiction,
                    vec![t],
                    format!(
                        "{} committed a write of {}, but the certificate's version order has no version of it from {}",
                        h.txn_label(t),
                        h.object_label(obj),
                        h.txn_label(t)
                    ),
                )
                .with_objects(vec![obj]),
            );
        }
        table
    }

    /// Where `t`'s final effect on `obj` is in `effects`.
    fn effect_index(&self, obj: ObjId, t: TxnId) -> Option<usize> {
        let (lo, hi) = (self.effect_start[t.index()] as usize, self.effect_start[t.index() + 1] as usize);
        let mine = &self.effects[lo..hi];
        mine.binary_search_by_key(&obj, |e| e.obj).ok().map(|i| lo + i)
    }

    /// Sorts each object's versions by value into `by_value` and reports values installed
    /// twice (`found`, keyed by the later version), except absent and opaque values, which
    /// several versions may share: reads of those are ambiguous instead.
    fn index_values(&mut self, h: &History, writer_identity: bool, found: &mut Vec<(u32, Anomaly)>) {
        self.by_value = self.versions.iter().enumerate().map(|(gid, v)| (v.value, gid as u32)).collect();
        let values = self.versions.iter().map(|v| v.value.index() + 1).max().unwrap_or(0);
        self.sole_holder = vec![NONE; values.max(ValueId::ABSENT.index() + 1)];
        for (gid, v) in self.versions.iter().enumerate() {
            let slot = &mut self.sole_holder[v.value.index()];
            *slot = if *slot == NONE { gid as u32 } else { SHARED };
        }
        self.sole_holder[ValueId::ABSENT.index()] = SHARED;
        for o in 0..self.start.len() - 1 {
            let range = self.start[o] as usize..self.start[o + 1] as usize;
            let sorted = &mut self.by_value[range];
            sorted.sort_unstable();
            let obj = ObjId::from_index(o);
            for same in sorted.chunk_by(|a, b| a.0 == b.0).filter(|same| same.len() > 1) {
                let value = same[0].0;
                if value == ValueId::ABSENT {
                    continue;
                }
                if is_opaque_value(h, obj, value) {
                    self.shared_opaque.insert((obj, value));
                    continue;
                }
                if writer_identity {
                    self.repeated.insert((obj, value));
                    continue;
                }
                let first_writer = self.versions[same[0].1 as usize].writer;
                for &(_, gid) in &same[1..] {
                    let writer = self.versions[gid as usize].writer;
                    let mut txns: Vec<TxnId> =
                        [first_writer, writer].into_iter().filter(|&w| w != INITIAL).map(TxnId).collect();
                    txns.dedup();
                    found.push((
                        gid,
                        Anomaly::new(
                            AnomalyKind::DuplicateWrite,
                            txns,
                            format!(
                                "{} and {} both installed {}={}, so reads of that value are ambiguous",
                                writer_label(h, first_writer),
                                writer_label(h, writer),
                                h.object_label(obj),
                                h.value_label(obj, value)
                            ),
                        )
                        .with_objects(vec![obj]),
                    ));
                }
            }
        }
    }

    /// The versions of `obj` holding `value`, by (value, id).
    fn holding(&self, obj: ObjId, value: ValueId) -> &[(ValueId, u32)] {
        let sorted = &self.by_value[self.start[obj.index()] as usize..self.start[obj.index() + 1] as usize];
        let lo = sorted.partition_point(|&(v, _)| v < value);
        let hi = lo + sorted[lo..].partition_point(|&(v, _)| v == value);
        &sorted[lo..hi]
    }

    /// The version of `obj` holding `value`: `Ok(Some(id))`, `Ok(None)` when no committed
    /// version holds it, `Err(n)` when `value` is absent and `n` > 1 versions are absent.
    pub(crate) fn by_value(&self, obj: ObjId, value: ValueId) -> Result<Option<u32>, u32> {
        match self.sole_holder.get(value.index()) {
            None | Some(&NONE) => return Ok(None),
            Some(&SHARED) => {}
            Some(&gid) => return Ok((self.versions[gid as usize].obj == obj).then_some(gid)),
        }
        self.searched(obj, value)
    }

    /// [`Self::by_value`] by the binary search among the object's versions alone: what a
    /// value several versions hold takes, and the reference the one-lookup table is tested
    /// against.
    fn searched(&self, obj: ObjId, value: ValueId) -> Result<Option<u32>, u32> {
        match self.holding(obj, value) {
            [] => Ok(None),
            [(_, gid)] => Ok(Some(*gid)),
            [(_, first), ..]
                if value != ValueId::ABSENT
                    && !self.shared_opaque.contains(&(obj, value))
                    && !self.repeated.contains(&(obj, value)) =>
            {
                Ok(Some(*first))
            }
            _ => Err(self.holding(obj, ValueId::ABSENT).len() as u32),
        }
    }

    /// The writers of the versions of `obj` holding `value`, when several do and the
    /// certificate's writers identify versions (see `repeated`).
    pub(crate) fn repeated_writers(&self, obj: ObjId, value: ValueId) -> Option<Vec<u32>> {
        self.repeated.contains(&(obj, value)).then(|| {
            self.holding(obj, value).iter().map(|&(_, gid)| self.versions[gid as usize].writer).collect()
        })
    }

    /// The version of `obj` that `t` installed.
    pub(crate) fn by_writer(&self, obj: ObjId, t: TxnId) -> Option<u32> {
        if t.index() + 1 >= self.effect_start.len() {
            return None;
        }
        self.effect_index(obj, t).map(|e| self.effects[e].gid).filter(|&gid| gid != NONE)
    }

    /// The initial version of `obj`.
    pub(crate) fn initial(&self, obj: ObjId) -> u32 {
        self.start[obj.index()]
    }

    /// The version after `gid`, if any: none for a version of an unordered tail (its
    /// successor is unknown); for the last listed version, the tail's first.
    pub(crate) fn next(&self, gid: u32) -> Option<u32> {
        let obj = self.versions[gid as usize].obj;
        (gid + 1 < self.start[obj.index() + 1] && gid < self.tail[obj.index()]).then_some(gid + 1)
    }

    /// The versions known to come right after `gid`: the next one, or, after the last
    /// listed version of an object with an unordered tail, every version of the tail (each
    /// follows it, in an unknown order); none after a tail version.
    pub(crate) fn following(&self, gid: u32) -> std::ops::Range<u32> {
        let obj = self.versions[gid as usize].obj.index();
        let (tail, end) = (self.tail[obj], self.start[obj + 1]);
        if gid + 1 >= end || gid >= tail {
            gid..gid
        } else if gid + 1 == tail {
            tail..end
        } else {
            gid + 1..gid + 2
        }
    }

    /// Whether version `gid` is in its object's unordered tail (an append no read shows,
    /// whose place among the other such appends is unknown).
    pub(crate) fn is_unordered(&self, gid: u32) -> bool {
        gid >= self.tail[self.versions[gid as usize].obj.index()]
    }

    /// Each object's unordered tail that holds two versions or more (version id ranges).
    pub(crate) fn unordered_tails(&self) -> impl Iterator<Item = std::ops::Range<u32>> + '_ {
        self.tail.iter().enumerate().map(|(o, &tail)| tail..self.start[o + 1]).filter(|r| r.len() > 1)
    }

    /// The last version of `gid`'s object before its unordered tail (the initial version
    /// when the order lists none).
    pub(crate) fn last_listed(&self, gid: u32) -> u32 {
        self.tail[self.versions[gid as usize].obj.index()] - 1
    }

    /// The position of version `gid` in its object's order (0 = initial).
    pub(crate) fn position(&self, gid: u32) -> u32 {
        gid - self.start[self.versions[gid as usize].obj.index()]
    }
}

/// Per list object, the graph transactions whose effect on it is appends only, which the
/// version order does not list and none of whose elements a read of a graph transaction
/// shows, with their effect's index: the object's unordered tail, in transaction order.
/// Empty (and no read is looked at) when every such effect is listed.
fn unlisted_appends(
    h: &History,
    order: &FxHashMap<ObjId, Vec<TxnId>>,
    table: &VersionTable,
) -> FxHashMap<ObjId, Vec<(TxnId, usize)>> {
    let pure_append = |e: &FinalEffect| e.set.is_none() && e.appended != NONE;
    let mut unlisted: FxHashMap<ObjId, Vec<(TxnId, usize)>> = FxHashMap::default();
    if !table.effects.iter().any(pure_append) {
        return unlisted;
    }
    let listed: FxHashSet<(ObjId, TxnId)> =
        order.iter().flat_map(|(&obj, ws)| ws.iter().map(move |&t| (obj, t))).collect();
    for t in 0..h.txns.len() {
        let range = table.effect_start[t] as usize..table.effect_start[t + 1] as usize;
        for e in range {
            let effect = &table.effects[e];
            if pure_append(effect) && !listed.contains(&(effect.obj, TxnId(t as u32))) {
                unlisted.entry(effect.obj).or_default().push((TxnId(t as u32), e));
            }
        }
    }
    if unlisted.is_empty() {
        return unlisted;
    }
    let mut shown: FxHashSet<(ObjId, &Scalar)> = FxHashSet::default();
    for t in h.txn_ids().filter(|t| table.in_graph[t.index()]) {
        for op in &h.txn(t).ops {
            if let Op::Read { obj, value } = op {
                if let (true, isocert_history::Value::List(items)) =
                    (unlisted.contains_key(obj), h.value(*value))
                {
                    shown.extend(items.iter().map(|e| (*obj, e)));
                }
            }
        }
    }
    for appends in unlisted.values_mut() {
        appends.retain(|&(_, e)| {
            let effect = &table.effects[e];
            !table.appended[effect.appended as usize].iter().any(|x| shown.contains(&(effect.obj, x)))
        });
    }
    unlisted.retain(|_, appends| !appends.is_empty());
    unlisted
}

/// Each graph transaction's final effect per object it wrote, sorted by object; where each
/// transaction's start (one entry per transaction, plus the end); the appended lists.
fn final_effects(h: &History, in_graph: &[bool]) -> (Vec<FinalEffect>, Vec<u32>, Vec<Vec<Scalar>>) {
    let mut effects = Vec::new();
    let mut appended = Vec::new();
    let mut start = Vec::with_capacity(h.txns.len() + 1);
    // (object, op index, row index) of each write of the transaction, sorted: per object,
    // its writes in the order they happened.
    let mut touched: Vec<(ObjId, u32, u32)> = Vec::new();
    for (t, txn) in h.txns.iter().enumerate() {
        start.push(effects.len() as u32);
        if !in_graph[t] {
            continue;
        }
        touched.clear();
        for (i, op) in txn.ops.iter().enumerate() {
            match op {
                Op::Write { obj, .. } | Op::Append { obj, .. } => touched.push((*obj, i as u32, 0)),
                Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                    touched.extend(rows.iter().enumerate().map(|(r, row)| (row.obj, i as u32, r as u32)))
                }
                Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. } => {}
            }
        }
        touched.sort_unstable();
        for same in touched.chunk_by(|a, b| a.0 == b.0) {
            let mut set = None;
            let mut elements = Vec::new();
            for &(_, i, r) in same {
                let value = match &txn.ops[i as usize] {
                    Op::Write { value, .. } => *value,
                    Op::Update { rows, .. } => rows[r as usize].value,
                    Op::Delete { .. } => ValueId::ABSENT,
                    Op::Append { element, .. } => {
                        elements.push(element.clone());
                        continue;
                    }
                    Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. } => continue,
                };
                set = Some(value);
                elements.clear();
            }
            let mut effect = FinalEffect { obj: same[0].0, set, appended: NONE, gid: NONE };
            if !elements.is_empty() {
                effect.appended = appended.len() as u32;
                appended.push(elements);
            }
            effects.push(effect);
        }
    }
    start.push(effects.len() as u32);
    (effects, start, appended)
}

/// "T7" or "the initial version".
pub(crate) fn writer_label(h: &History, writer: u32) -> String {
    if writer == INITIAL {
        "the initial transaction".to_string()
    } else {
        h.txn_label(TxnId(writer))
    }
}

/// Every item write in the history by value, for explaining reads of values that are not
/// committed versions (built only when such a read occurs).
pub(crate) fn write_sites(h: &History) -> FxHashMap<(ObjId, ValueId), WriteSite> {
    let mut sites = FxHashMap::default();
    for t in h.txn_ids() {
        let ops = &h.txn(t).ops;
        let mut last: FxHashMap<ObjId, u32> = FxHashMap::default();
        for (i, op) in ops.iter().enumerate() {
            let mut note = |obj: ObjId| {
                last.insert(obj, i as u32);
            };
            match op {
                Op::Write { obj, .. } | Op::Append { obj, .. } => note(*obj),
                Op::Update { rows, .. } | Op::Delete { rows, .. } => rows.iter().for_each(|r| note(r.obj)),
                _ => {}
            }
        }
        for (i, op) in ops.iter().enumerate() {
            let mut add = |obj: ObjId, value: ValueId| {
                if value != ValueId::ABSENT {
                    let is_final = last.get(&obj) == Some(&(i as u32));
                    sites.entry((obj, value)).or_insert(WriteSite { txn: t, op: i as u32, is_final });
                }
            };
            match op {
                Op::Write { obj, value } => add(*obj, *value),
                Op::Update { rows, .. } => rows.iter().for_each(|r| add(r.obj, r.value)),
                _ => {}
            }
        }
    }
    sites
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_gen::{generate, DataModel, GenConfig, Injection};

    /// `by_value` against the search for every object and every value id (the history's,
    /// the checker's computed lists, and one beyond them all), over generated item, list and
    /// SQL-row histories with every injection (duplicate writes, reads of aborted and
    /// intermediate values, values shared by several objects).
    #[test]
    fn by_value_agrees_with_the_search_among_the_objects_versions() {
        let mut compared = 0;
        for seed in 0..3 {
            for model in [DataModel::KeyValue, DataModel::ListAppend, DataModel::SqlTable] {
                for inject in std::iter::once(None).chain(Injection::ALL.iter().copied().map(Some)) {
                    let cfg = GenConfig {
                        txns: 120,
                        sessions: 4,
                        keys: 6,
                        seed,
                        model,
                        inject,
                        ..GenConfig::default()
                    };
                    let Ok(g) = generate(&cfg) else { continue };
                    let Some(order) = g.certificate.version_order.as_ref() else { continue };
                    let h = &g.history;
                    let mut values = ValueStore::new(h);
                    let vt = VersionTable::build(
                        h,
                        order,
                        g.certificate.writer_identity,
                        &mut values,
                        &mut Vec::new(),
                    );
                    let ids = vt
                        .versions
                        .iter()
                        .map(|v| v.value.index() + 2)
                        .max()
                        .unwrap_or(0)
                        .max(h.value_count());
                    for o in 0..h.object_count() {
                        let obj = ObjId::from_index(o);
                        for v in 0..ids {
                            let value = ValueId::from_index(v);
                            assert_eq!(
                                vt.by_value(obj, value),
                                vt.searched(obj, value),
                                "{cfg:?} {obj:?} {value:?}"
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 10_000, "only {compared} lookups compared");
    }
}
