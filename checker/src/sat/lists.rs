//! List-append histories (Jepsen's main workload) for the black-box checkers (issue 28).
//!
//! Each append writes a fresh element, and a read returns the whole list, so a read names the
//! version it saw by its last element. The history is checked as the item history in which
//! every `append k e` is a write of `e` to `k` and every read of `[.. e]` a read of `e` (of
//! the initial version when empty): reads resolve by value as for any key-value history, an
//! element of an aborted transaction is an aborted read and a list that stops at an element
//! its appender followed with another is an intermediate read. What the item view loses is
//! the order the reads show, so it is given back as facts: each list's longest read orders
//! its appenders ([`list_append_certificate`]), and every append no read shows comes after
//! all of them (a read of a later version would have shown it). Those orders are fixed and
//! only the order of the appends no read shows is searched, as with King Cobra's partial
//! version orders. Reads that are no prefix of the longest read, and reads holding an
//! element twice, are reported as Elle reports them (`incompatible-order`,
//! `duplicate-elements`).

use isocert_history::formats::list_append_certificate;
use isocert_history::{History, ObjId, Op, Status, TxnId, Value, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{Anomaly, AnomalyKind};

/// A list-append history as the black-box checkers see it.
pub(crate) struct AsItems {
    /// The item history: same transactions (same ids), appends as writes of their element,
    /// list reads as reads of their last element.
    pub(crate) history: History,
    /// Per list, its appenders in the order its longest read shows.
    pub(crate) order: FxHashMap<ObjId, Vec<TxnId>>,
    /// `(list, a, b)`: `a` (the last appender a read shows) comes before `b` (an append no
    /// read shows).
    pub(crate) after: Vec<(ObjId, TxnId, TxnId)>,
    /// Incompatible orders and duplicate elements among the list reads.
    pub(crate) anomalies: Vec<Anomaly>,
}

/// Whether `h` appends to lists (and so is checked through [`as_items`]).
pub(crate) fn is_list_history(h: &History) -> bool {
    h.txns.iter().flat_map(|t| &t.ops).any(|op| matches!(op, Op::Append { .. }))
}

/// The list value `value` as the item value of its last element (absent when empty); other
/// values unchanged.
fn last_element(h: &mut History, value: ValueId) -> ValueId {
    let last = match h.value(value) {
        Value::List(items) => items.last().cloned(),
        _ => return value,
    };
    match last {
        Some(element) => h.intern_value(Value::Scalar(element)),
        None => ValueId::ABSENT,
    }
}

/// `h` as an item history, with the orders its list reads show.
pub(crate) fn as_items(h: &History) -> AsItems {
    let trace = list_append_certificate(h);
    let order = trace.certificate.version_order.clone().unwrap_or_default();
    let mut out = h.clone();
    for i in 0..out.initial.len() {
        let (obj, value) = out.initial[i];
        out.initial[i] = (obj, last_element(&mut out, value));
    }
    for t in 0..out.txns.len() {
        for i in 0..out.txns[t].ops.len() {
            let op = match &out.txns[t].ops[i] {
                Op::Append { obj, element } => {
                    let (obj, element) = (*obj, element.clone());
                    Op::Write { obj, value: out.intern_value(Value::Scalar(element)) }
                }
                Op::Read { obj, value } => {
                    let (obj, value) = (*obj, *value);
                    Op::Read { obj, value: last_element(&mut out, value) }
                }
                _ => continue,
            };
            out.txns[t].ops[i] = op;
        }
    }
    // Every committed append no read shows follows the last appender a read shows. The
    // appenders of each list are gathered in one pass over the history (asking every
    // transaction about every such list took minutes at 100,000 transactions).
    let unordered: FxHashSet<ObjId> = trace.unordered.iter().copied().collect();
    let mut appenders: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for t in h.txn_ids().filter(|&t| h.txn(t).status == Status::Committed) {
        for op in &h.txn(t).ops {
            if let Op::Append { obj, .. } = op {
                if unordered.contains(obj) {
                    let ts = appenders.entry(*obj).or_default();
                    if ts.last() != Some(&t) {
                        ts.push(t);
                    }
                }
            }
        }
    }
    let mut after = Vec::new();
    for obj in &trace.unordered {
        let Some(listed) = order.get(obj) else { continue };
        let Some(&last) = listed.last() else { continue };
        let listed: FxHashSet<TxnId> = listed.iter().copied().collect();
        let mine = appenders.remove(obj).unwrap_or_default();
        after.extend(mine.into_iter().filter(|t| !listed.contains(t)).map(|t| (*obj, last, t)));
    }
    let mut anomalies = Vec::new();
    for c in &trace.conflicts {
        let mut txns = vec![c.other.txn, c.longest.txn];
        txns.dedup();
        anomalies.push(
            Anomaly::new(
                AnomalyKind::IncompatibleOrder,
                txns,
                format!("{}: every read of a list must be a prefix of its longest read", c.explain(h)),
            )
            .with_ops(vec![c.other, c.longest])
            .with_objects(vec![c.obj]),
        );
    }
    for r in &trace.duplicates {
        let Op::Read { obj, value } = h.txn(r.txn).ops[r.op as usize] else { continue };
        anomalies.push(
            Anomaly::new(
                AnomalyKind::DuplicateElements,
                vec![r.txn],
                format!(
                    "{} read {} = {}, which holds an element twice; each append happens once",
                    h.txn_label(r.txn),
                    h.object_label(obj),
                    h.value_label(obj, value)
                ),
            )
            .with_ops(vec![*r])
            .with_objects(vec![obj]),
        );
    }
    AsItems { history: out, order, after, anomalies }
}
