//! The version each ambiguous item read saw (isocert's version-set entry for item reads).
//!
//! A checker finds the version an item read saw by its value. When several versions of
//! the object hold that value (typically "no row": the object unborn, then deleted, maybe
//! deleted again after a re-insert), the value does not say which, and the read would add
//! no dependency. The snapshot does: the read saw the newest version whose writer its
//! snapshot sees, the same rule as a predicate operation's version set (at READ COMMITTED
//! the statement's snapshot). Only such ambiguous reads get an entry, which keeps
//! certificates small; the checker verifies that the named version holds the value read.

use isocert_history::{ObjId, Op, OpRef, SeenVersion, ValueId, Writer};
use rustc_hash::{FxHashMap, FxHashSet};

use super::version_sets::Context;

/// Adds to `sets` an entry for every external item read of a committed transaction whose
/// value more than one version of its object holds. Returns how many entries it added.
///
/// A read of an object its own transaction already wrote sees that write and gets no entry;
/// a read without a recorded snapshot gets none either (the checker counts it as ambiguous).
pub(crate) fn add_entries(cx: &Context<'_>, sets: &mut FxHashMap<OpRef, Vec<SeenVersion>>) -> usize {
    let h = cx.h;
    let ambiguous = ambiguous_values(cx);
    if ambiguous.is_empty() {
        return 0;
    }
    let mut added = 0;
    let mut own: FxHashSet<ObjId> = FxHashSet::default();
    for t in h.txn_ids() {
        let txn = h.txn(t);
        if !txn.is_committed() {
            continue;
        }
        own.clear();
        for (i, op) in txn.ops.iter().enumerate() {
            match op {
                Op::Read { obj, value } if !own.contains(obj) && ambiguous.contains(&(*obj, *value)) => {
                    let Some(snap) = cx.facts[t.index()].snapshot_of(i as u32) else { continue };
                    let writer =
                        cx.writer_at(*obj, cx.latest_visible(*obj, snap, t)).unwrap_or(Writer::Initial);
                    sets.insert(OpRef { txn: t, op: i as u32 }, vec![SeenVersion { obj: *obj, writer }]);
                    added += 1;
                }
                Op::Write { obj, .. } => {
                    own.insert(*obj);
                }
                Op::Update { rows, .. } | Op::Delete { rows, .. } => own.extend(rows.iter().map(|r| r.obj)),
                _ => {}
            }
        }
    }
    added
}

/// Every (object, value) that more than one version of the object holds: the initial
/// version (absent when the object starts unborn) and each committed writer's last value.
fn ambiguous_values(cx: &Context<'_>) -> FxHashSet<(ObjId, ValueId)> {
    let mut ambiguous = FxHashSet::default();
    let mut seen: FxHashSet<ValueId> = FxHashSet::default();
    for (&obj, writers) in &cx.m.version_order {
        seen.clear();
        let versions = std::iter::once(Writer::Initial).chain(writers.iter().map(|&w| Writer::Txn(w)));
        for writer in versions {
            let value = cx.value_of(obj, writer);
            if !seen.insert(value) {
                ambiguous.insert((obj, value));
            }
        }
    }
    ambiguous
}
