//! Whether a history is MT-shaped, naming the first transaction that is not.

use isocert_history::{History, ObjId, Op, ValueId};
use rustc_hash::FxHashMap;

use crate::{CheckError, CheckerKind};

/// Checks MTC's preconditions: only item reads and writes, every write of a key preceded by
/// a read of that key in the same transaction, no deletes, and every (key, value) written
/// at most once and never the key's initial value (so each read names its writer).
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first transaction (in file order) that
/// breaks the shape, and how.
pub(crate) fn check_shape(h: &History) -> Result<(), CheckError> {
    let refuse = |what: String| {
        Err(CheckError::UnsupportedHistory {
            checker: CheckerKind::Mtc,
            what: format!(
                "{what}: not a mini-transaction history (every write must follow a read of the same key in its \
                 transaction, and every value must be written once); give a certificate instead"
            ),
        })
    };
    let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let mut written: FxHashMap<(ObjId, ValueId), u32> = FxHashMap::default();
    written.reserve(h.txns.len() * 2);
    let mut touched: Vec<ObjId> = Vec::new();
    for t in h.txn_ids() {
        touched.clear();
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let label = || format!("{} op {i}", h.txn_label(t));
            match op {
                Op::Read { obj, .. } => {
                    if !touched.contains(obj) {
                        touched.push(*obj);
                    }
                }
                Op::Write { obj, value } => {
                    if !touched.contains(obj) {
                        return refuse(format!(
                            "{} writes {} without reading it first",
                            label(),
                            h.object_label(*obj)
                        ));
                    }
                    if *value == ValueId::ABSENT {
                        return refuse(format!("{} deletes {}", label(), h.object_label(*obj)));
                    }
                    if initial.get(obj).copied().unwrap_or(ValueId::ABSENT) == *value {
                        return refuse(format!(
                            "{} writes the initial value {}",
                            label(),
                            h.value_label(*obj, *value)
                        ));
                    }
                    if let Some(prev) = written.insert((*obj, *value), t.0) {
                        return refuse(format!(
                            "{} writes {}, which {} also wrote",
                            label(),
                            h.value_label(*obj, *value),
                            h.txn_label(isocert_history::TxnId(prev))
                        ));
                    }
                }
                other => {
                    let kind = match other {
                        Op::Append { .. } => "a list append",
                        Op::Select { .. } | Op::Aggregate { .. } => "a predicate read",
                        _ => "a predicate write",
                    };
                    return refuse(format!("{} is {kind}", label()));
                }
            }
        }
    }
    Ok(())
}
