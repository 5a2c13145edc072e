//! Elle's traceability: the version order of a list-append object, recovered from its reads.
//!
//! Every read of a list returns the whole list, so the longest read of an object shows the
//! order in which its elements (and hence the transactions that appended them) were
//! installed. Every other read must be a prefix of it; one that is not means two reads saw
//! incompatible orders, an anomaly in itself (Elle's `incompatible-order`), reported as a
//! [`PrefixConflict`]. Committed appends that no read shows are left out of the order: each
//! came after every version a read shows (a read would have shown its element otherwise),
//! but nothing shows their relative order, so guessing one would invent write-dependencies.
//! The checker places them after the listed versions in an unknown order
//! ([`Traceability::unordered`] names the objects that have some).

use rustc_hash::FxHashMap;

use crate::{Certificate, History, ObjId, Op, OpRef, Scalar, Status, TxnId, Value, ValueId};

/// Two reads of one list object that disagree on a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixConflict {
    /// The list object.
    pub obj: ObjId,
    /// The longest read of the object (the one the version order follows).
    pub longest: OpRef,
    /// A read that is not a prefix of it.
    pub other: OpRef,
    /// The first position where they differ.
    pub position: usize,
}

impl PrefixConflict {
    /// A sentence for people: which reads, which object, where they differ.
    pub fn explain(&self, h: &History) -> String {
        format!(
            "{} (its operation {}) and {} (its operation {}) read {} in incompatible orders (they differ at \
             position {})",
            h.txn_label(self.other.txn),
            self.other.op + 1,
            h.txn_label(self.longest.txn),
            self.longest.op + 1,
            h.object_label(self.obj),
            self.position
        )
    }
}

/// What traceability recovered from a list-append history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traceability {
    /// The certificate: `version_order` for every list object, nothing else.
    pub certificate: Certificate,
    /// Reads that are not prefixes of their object's longest read.
    pub conflicts: Vec<PrefixConflict>,
    /// Objects with committed appends no read shows, which the order leaves out (their
    /// relative order is unknown; each follows every listed version).
    pub unordered: Vec<ObjId>,
    /// List reads that contain some element twice (Elle's `duplicate-elements`): each append
    /// happens once, so such a read saw no real version.
    pub duplicates: Vec<OpRef>,
}

/// Derives the version order of every list object from its longest read: the appenders of
/// its elements, in order; committed appends no read shows are not listed.
///
/// Appenders are the transactions whose `append` put an element there; a transaction that
/// appended several elements to one object installs one version, placed at its first element.
/// Elements nobody appended are skipped (the checker reports them as garbage reads).
pub fn list_append_certificate(h: &History) -> Traceability {
    let mut appender: FxHashMap<(ObjId, &Scalar), TxnId> = FxHashMap::default();
    let mut appenders: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    let mut reads: FxHashMap<ObjId, Vec<(OpRef, &[Scalar])>> = FxHashMap::default();
    for id in h.txn_ids() {
        let t = h.txn(id);
        for (i, op) in t.ops.iter().enumerate() {
            match op {
                Op::Append { obj, element } if t.status != Status::Aborted => {
                    appender.entry((*obj, element)).or_insert(id);
                    let list = appenders.entry(*obj).or_default();
                    if list.last() != Some(&id) && t.status == Status::Committed && !list.contains(&id) {
                        list.push(id);
                    }
                }
                Op::Read { obj, value } if t.status == Status::Committed => {
                    if let Some(items) = list_items(h, *value) {
                        reads.entry(*obj).or_default().push((OpRef { txn: id, op: i as u32 }, items));
                    }
                }
                _ => {}
            }
        }
    }
    let is_list = |obj: &ObjId| {
        appenders.contains_key(obj)
            || reads.get(obj).is_some_and(|r| r.iter().any(|(_, items)| !items.is_empty()))
    };
    let mut objects: Vec<ObjId> = appenders.keys().chain(reads.keys()).copied().filter(is_list).collect();
    objects.sort();
    objects.dedup();
    let mut out = Traceability::default();
    let mut order = FxHashMap::default();
    for obj in objects {
        let obj_reads = reads.get(&obj).map(Vec::as_slice).unwrap_or(&[]);
        let mut writers: Vec<TxnId> = Vec::new();
        if let Some(&(longest_ref, longest)) =
            obj_reads.iter().max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(&a.0)))
        {
            for &(other, items) in obj_reads {
                let mut seen = rustc_hash::FxHashSet::default();
                if !items.iter().all(|e| seen.insert(e)) {
                    out.duplicates.push(other);
                }
                if let Some(position) = items.iter().zip(longest).position(|(a, b)| a != b) {
                    out.conflicts.push(PrefixConflict { obj, longest: longest_ref, other, position });
                }
            }
            for element in longest {
                if let Some(&w) = appender.get(&(obj, element)) {
                    if !writers.contains(&w) {
                        writers.push(w);
                    }
                }
            }
        }
        if appenders.get(&obj).is_some_and(|ws| ws.iter().any(|w| !writers.contains(w))) {
            out.unordered.push(obj);
        }
        order.insert(obj, writers);
    }
    out.certificate.version_order = Some(order);
    out
}

fn list_items(h: &History, value: ValueId) -> Option<&[Scalar]> {
    match h.value(value) {
        Value::List(items) => Some(items),
        Value::Absent => Some(&[]),
        _ => None,
    }
}
