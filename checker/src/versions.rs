//! The version table: every committed version of every object, in the certificate's
//! version order, with the value it holds and who installed it.
//!
//! Built once per check from the history and the certificate. Version ids are dense
//! (`u32`), the versions of one object are contiguous (oldest first, the initial version
//! at position 0), so "the next version" is the next id.

use isocert_history::{is_opaque_value, History, ObjId, Op, Scalar, Status, TxnId, ValueId};
use rustc_hash::FxHashMap;

use crate::values::ValueStore;
use crate::{Anomaly, AnomalyKind};

/// The writer of an initial version.
pub(crate) const INITIAL: u32 = u32::MAX;
const AMBIGUOUS: u32 = u32::MAX;

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
/// elements it appended after that.
#[derive(Debug, Default)]
struct FinalEffect {
    set: Option<ValueId>,
    appends: Vec<Scalar>,
    used: bool,
}

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
    by_value: FxHashMap<(ObjId, ValueId), u32>,
    by_writer: FxHashMap<(ObjId, TxnId), u32>,
    /// Whether each transaction is a node of the dependency graph: committed, or named by
    /// the version order (an unknown or aborted transaction the certificate says committed).
    pub(crate) in_graph: Vec<bool>,
    /// Per object, how many absent versions (unborn or deleted) it has.
    absent_count: FxHashMap<ObjId, u32>,
}

impl VersionTable {
    /// Builds the table; contradictions between history and certificate (and duplicate
    /// writes) are pushed to `anomalies`.
    pub(crate) fn build(
        h: &History,
        order: &FxHashMap<ObjId, Vec<TxnId>>,
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
        let mut effects: FxHashMap<(ObjId, TxnId), FinalEffect> = FxHashMap::default();
        for t in h.txn_ids().filter(|t| in_graph[t.index()]) {
            for op in &h.txn(t).ops {
                let mut set = |obj: ObjId, value: ValueId| {
                    let e = effects.entry((obj, t)).or_default();
                    e.set = Some(value);
                    e.appends.clear();
                };
                match op {
                    Op::Write { obj, value } => set(*obj, *value),
                    Op::Update { rows, .. } | Op::Delete { rows, .. } => rows.iter().for_each(|r| {
                        set(r.obj, if matches!(op, Op::Delete { .. }) { ValueId::ABSENT } else { r.value })
                    }),
                    Op::Append { obj, element } => {
                        effects.entry((*obj, t)).or_default().appends.push(element.clone())
                    }
                    Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. } => {}
                }
            }
        }
        let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
        let objects = h.object_count();
        let mut table = VersionTable {
            versions: Vec::with_capacity(objects + effects.len()),
            start: Vec::with_capacity(objects + 1),
            by_value: FxHashMap::default(),
            by_writer: FxHashMap::default(),
            in_graph,
            absent_count: FxHashMap::default(),
        };
        table.by_value.reserve(objects + effects.len());
        table.by_writer.reserve(effects.len());
        for o in 0..objects {
            let obj = ObjId::from_index(o);
            table.start.push(table.versions.len() as u32);
            let mut value = initial.get(&obj).copied().unwrap_or(ValueId::ABSENT);
            table.push(h, obj, INITIAL, value, anomalies);
            let Some(writers) = order.get(&obj) else { continue };
            for &t in writers {
                let label = || format!("{} in the version order of {}", h.txn_label(t), h.object_label(obj));
                if table.by_writer.contains_key(&(obj, t)) {
                    anomalies.push(
                        Anomaly::new(
                            AnomalyKind::CertificateContradiction,
                            vec![t],
                            format!("{} appears twice", label()),
                        )
                        .with_objects(vec![obj]),
                    );
                    continue;
                }
                let Some(effect) = effects.get_mut(&(obj, t)) else {
                    anomalies.push(
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
                    );
                    continue;
                };
                effect.used = true;
                if let Some(set) = effect.set {
                    value = set;
                }
                for element in &effect.appends {
                    value = values.append(value, element);
                }
                let gid = table.push(h, obj, t.0, value, anomalies);
                table.by_writer.insert((obj, t), gid);
            }
        }
        table.start.push(table.versions.len() as u32);
        let mut missing: Vec<(ObjId, TxnId)> =
            effects.iter().filter(|(_, e)| !e.used).map(|(&k, _)| k).collect();
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

    fn push(
        &mut self,
        h: &History,
        obj: ObjId,
        writer: u32,
        value: ValueId,
        anomalies: &mut Vec<Anomaly>,
    ) -> u32 {
        let gid = self.versions.len() as u32;
        self.versions.push(Version { obj, writer, value });
        if value == ValueId::ABSENT
            || (self.by_value.contains_key(&(obj, value)) && is_opaque_value(h, obj, value))
        {
            if value == ValueId::ABSENT {
                *self.absent_count.entry(obj).or_default() += 1;
            }
            let slot = self.by_value.entry((obj, value)).or_insert(gid);
            if *slot != gid {
                *slot = AMBIGUOUS;
            }
        } else if let Some(&first) = self.by_value.get(&(obj, value)) {
            let first_writer = self.versions[first as usize].writer;
            let mut txns: Vec<TxnId> =
                [first_writer, writer].into_iter().filter(|&w| w != INITIAL).map(TxnId).collect();
            txns.dedup();
            anomalies.push(
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
            );
        } else {
            self.by_value.insert((obj, value), gid);
        }
        gid
    }

    /// The version of `obj` holding `value`: `Ok(Some(id))`, `Ok(None)` when no committed
    /// version holds it, `Err(n)` when `value` is absent and `n` > 1 versions are absent.
    pub(crate) fn by_value(&self, obj: ObjId, value: ValueId) -> Result<Option<u32>, u32> {
        match self.by_value.get(&(obj, value)) {
            Some(&AMBIGUOUS) => Err(self.absent_count.get(&obj).copied().unwrap_or(0)),
            Some(&gid) => Ok(Some(gid)),
            None => Ok(None),
        }
    }

    /// The version of `obj` that `t` installed.
    pub(crate) fn by_writer(&self, obj: ObjId, t: TxnId) -> Option<u32> {
        self.by_writer.get(&(obj, t)).copied()
    }

    /// The initial version of `obj`.
    pub(crate) fn initial(&self, obj: ObjId) -> u32 {
        self.start[obj.index()]
    }

    /// The version after `gid`, if any.
    pub(crate) fn next(&self, gid: u32) -> Option<u32> {
        let obj = self.versions[gid as usize].obj;
        (gid + 1 < self.start[obj.index() + 1]).then_some(gid + 1)
    }

    /// The position of version `gid` in its object's order (0 = initial).
    pub(crate) fn position(&self, gid: u32) -> u32 {
        gid - self.start[self.versions[gid as usize].obj.index()]
    }
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
