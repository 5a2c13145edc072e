//! Whether a history is MT-shaped, naming the first transaction that is not.

use isocert_history::{History, KvHistory, KvOpKind, KvValue, ObjId};
use rustc_hash::FxHashMap;

use crate::items::{self, object_label, value_label, WriteSites};
use crate::{CheckError, CheckerKind};

/// MTC's refusal of a history: `what` is wrong with it.
fn refusal(what: String) -> String {
    format!(
        "{what}: not a mini-transaction history (every write must follow a read of the same key in its \
         transaction, and every value must be written once); give a certificate instead"
    )
}

/// `h` in the compact model, for MTC.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first predicate operation.
pub(crate) fn mini_transactions(h: &History) -> Result<KvHistory, CheckError> {
    items::item_history(
        h,
        CheckerKind::Mtc,
        |label, kind| refusal(format!("{label} is {kind}")),
        |kv| check_shape(kv, &WriteSites::build(kv)),
    )
}

/// Checks MTC's preconditions: only item reads and writes, every write of a key preceded by
/// a read of that key in the same transaction, no deletes, and every (key, value) written
/// at most once and never the key's initial value (so each read names its writer).
///
/// `sites` says whether some (key, value) was written twice: only then are the writes
/// looked up one by one, to name the first.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first transaction (in file order) that
/// breaks the shape, and how.
pub(crate) fn check_shape(kv: &KvHistory, sites: &WriteSites) -> Result<(), CheckError> {
    let refuse =
        |what: String| Err(CheckError::UnsupportedHistory { checker: CheckerKind::Mtc, what: refusal(what) });
    let repeats = sites.has_repeats();
    let initial = items::initial_values(kv);
    let mut written: FxHashMap<(ObjId, KvValue), u32> = FxHashMap::default();
    let mut touched: Vec<ObjId> = Vec::new();
    for t in kv.txn_ids() {
        touched.clear();
        for (i, op) in kv.ops(t).iter().enumerate() {
            let label = || format!("{} op {i}", kv.txn_label(t));
            let (obj, value) = (op.obj(), op.value());
            match op.kind() {
                KvOpKind::Read => {
                    if !touched.contains(&obj) {
                        touched.push(obj);
                    }
                }
                KvOpKind::Write => {
                    if !touched.contains(&obj) {
                        return refuse(format!(
                            "{} writes {} without reading it first",
                            label(),
                            object_label(kv, obj)
                        ));
                    }
                    if value == KvValue::Absent {
                        return refuse(format!("{} deletes {}", label(), object_label(kv, obj)));
                    }
                    if initial[obj.index()] == value {
                        return refuse(format!(
                            "{} writes the initial value {}",
                            label(),
                            value_label(kv, obj, value)
                        ));
                    }
                    if let Some(prev) = repeats.then(|| written.insert((obj, value), t.0)).flatten() {
                        return refuse(format!(
                            "{} writes {}, which {} also wrote",
                            label(),
                            value_label(kv, obj, value),
                            kv.txn_label(isocert_history::TxnId(prev))
                        ));
                    }
                }
                KvOpKind::Append => return refuse(format!("{} is a list append", label())),
            }
        }
    }
    Ok(())
}
