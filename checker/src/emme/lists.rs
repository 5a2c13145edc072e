//! List-append read checks that need no version order (Elle's `incompatible-order` and
//! `duplicate-elements`): every read of one list must be a prefix of its longest read, and
//! no read may hold an element twice, since each append happens once.
//!
//! Recomputed from the history itself, so v1 list histories get them as well as imported
//! Elle ones, whatever certificate came with them.

use isocert_history::{History, ObjId, Op, OpRef, Scalar, Value, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::versions::VersionTable;
use crate::{Anomaly, AnomalyKind};

/// One list read: where it is, the value it returned and its elements.
struct ListRead<'h> {
    at: OpRef,
    value: ValueId,
    items: &'h [Scalar],
}

/// Drops the `garbage-read` of a list read that an `incompatible-order` or
/// `duplicate-elements` anomaly already names: a list no version order explains is no
/// version, so it was reported twice, once in words that hide why (Elle's incompatible-order
/// example showed one read as both).
pub(crate) fn drop_garbage_reads_explained(anomalies: &mut Vec<Anomaly>) {
    let explained: FxHashSet<OpRef> = anomalies
        .iter()
        .filter(|a| matches!(a.kind, AnomalyKind::IncompatibleOrder | AnomalyKind::DuplicateElements))
        .flat_map(|a| a.ops.iter().copied())
        .collect();
    if explained.is_empty() {
        return;
    }
    anomalies
        .retain(|a| a.kind != AnomalyKind::GarbageRead || !a.ops.iter().any(|op| explained.contains(op)));
}

/// Pushes an `incompatible-order` anomaly for each distinct read of a list that is not a
/// prefix of that list's longest read, and a `duplicate-elements` anomaly for each read
/// holding an element twice. Only transactions in the graph (committed) are looked at.
pub(crate) fn check(h: &History, vt: &VersionTable, anomalies: &mut Vec<Anomaly>) {
    // One pass over the value table spares a look-up per read when no read returned a list.
    if !(0..h.value_count()).any(|v| matches!(h.value(ValueId::from_index(v)), Value::List(_))) {
        return;
    }
    let mut reads: FxHashMap<ObjId, Vec<ListRead<'_>>> = FxHashMap::default();
    for t in h.txn_ids().filter(|t| vt.in_graph[t.index()]) {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            if let Op::Read { obj, value } = op {
                if let Value::List(items) = h.value(*value) {
                    let at = OpRef { txn: t, op: i as u32 };
                    reads.entry(*obj).or_default().push(ListRead { at, value: *value, items });
                }
            }
        }
    }
    let mut objects: Vec<ObjId> = reads.keys().copied().collect();
    objects.sort_unstable();
    for obj in objects {
        let obj_reads = &reads[&obj];
        let read_label = |r: &ListRead<'_>| {
            format!(
                "{} read {}={} (its operation {})",
                h.txn_label(r.at.txn),
                h.object_label(obj),
                h.value_label(obj, r.value),
                r.at.op + 1
            )
        };
        let mut seen_duplicates = FxHashSet::default();
        for r in obj_reads {
            let mut elements = FxHashSet::default();
            let Some(twice) = r.items.iter().find(|e| !elements.insert(*e)) else { continue };
            if !seen_duplicates.insert(r.value) {
                continue;
            }
            anomalies.push(
                Anomaly::new(
                    AnomalyKind::DuplicateElements,
                    vec![r.at.txn],
                    format!(
                        "{}, which holds element {twice} twice; each append happens once, so no version of {} \
                         can look like that",
                        read_label(r),
                        h.object_label(obj)
                    ),
                )
                .with_ops(vec![r.at])
                .with_objects(vec![obj]),
            );
        }
        let Some(longest) =
            obj_reads.iter().max_by(|a, b| a.items.len().cmp(&b.items.len()).then(b.at.cmp(&a.at)))
        else {
            continue;
        };
        let mut seen_conflicts = FxHashSet::default();
        for r in obj_reads {
            let Some(position) = r.items.iter().zip(longest.items).position(|(a, b)| a != b) else {
                continue;
            };
            if !seen_conflicts.insert(r.value) {
                continue;
            }
            let mut txns = vec![r.at.txn, longest.at.txn];
            txns.dedup();
            anomalies.push(
                Anomaly::new(
                    AnomalyKind::IncompatibleOrder,
                    txns,
                    format!(
                        "{} and {} disagree at position {position}: every read of a list must be a prefix of its \
                         longest read",
                        read_label(r),
                        read_label(longest)
                    ),
                )
                .with_ops(vec![r.at, longest.at])
                .with_objects(vec![obj]),
            );
        }
    }
}
