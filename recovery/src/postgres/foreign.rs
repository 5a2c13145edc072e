//! Foreign writers: logged transactions that no history transaction can be, because
//! another client wrote rows of the history's tables (what `isocert serve` meets when a
//! tenant's test client is not the only writer). They still belong in the version order,
//! so recovery gives each one a synthetic committed transaction writing what the log says
//! it wrote, with its xid as its only fact; `isocert serve` then names them `~1`, `~2`, ...
//! and never reveals their xids or (unless the history read them) their values.

use isocert_history::{History, ObjId, Op, Scalar, Status, Transaction, TxnId, ValueId};
use rustc_hash::FxHashSet;
use serde_json::json;

use super::facts::read_xids;
use crate::matching::{final_writes, intern_logged_value};
use crate::{widen_xid, RawLog, RecoveryError};

/// Adds a synthetic committed transaction, named `~1`, `~2`, ... in commit order, for every
/// transaction of `log` that is neither a history transaction's recorded xid nor (for a
/// transaction of unknown outcome that never learned its xid) the writer of one of its
/// values; returns them. Their sessions are their own.
///
/// # Errors
/// [`RecoveryError`] when the history's facts are malformed.
pub fn add_foreign_writers(h: &mut History, log: &RawLog) -> Result<Vec<TxnId>, RecoveryError> {
    let xids = read_xids(h)?;
    let recorded: FxHashSet<u32> = xids.iter().flatten().map(|&x| x as u32).collect();
    let reference = xids.iter().flatten().copied().max().unwrap_or(0);
    let mut unknown_writes: FxHashSet<(ObjId, ValueId)> = FxHashSet::default();
    for t in h.txn_ids() {
        if h.txn(t).status == Status::Unknown && xids[t.index()].is_none() {
            unknown_writes.extend(final_writes(h, t)?.into_iter().filter(|(_, v)| *v != ValueId::ABSENT));
        }
    }
    let mut added = Vec::new();
    for ct in log.txns() {
        if recorded.contains(&(ct.xid as u32)) {
            continue;
        }
        let mut writes: Vec<(ObjId, ValueId)> = Vec::new();
        for change in &ct.changes {
            let table = h.intern_table(&change.table);
            let obj = h.intern_object(table, change.key.clone());
            let value = intern_logged_value(h, table, change);
            match writes.iter_mut().find(|(o, _)| *o == obj) {
                Some(slot) => slot.1 = value,
                None => writes.push((obj, value)),
            }
        }
        if writes.iter().any(|w| unknown_writes.contains(w)) {
            continue;
        }
        let name = format!("~{}", added.len() + 1);
        let session = h.intern_session(Scalar::Text(name.as_str().into()));
        let ops = writes.into_iter().map(|(obj, value)| Op::Write { obj, value }).collect();
        let mut txn = Transaction::new(Scalar::Text(name.as_str().into()), session, ops);
        txn.set_meta(Some(json!({"xid": widen_xid(ct.xid as u32, reference)})));
        let id = h.push_txn(txn).map_err(|t| RecoveryError::Unsupported {
            txn: name.clone(),
            op: 0,
            message: format!("the history already has a transaction named {}", t.name),
        })?;
        added.push(id);
    }
    Ok(added)
}

/// `log` with every value a foreign writer wrote hidden: each change of a logged
/// transaction that is no history transaction's recorded xid becomes a write of the opaque
/// stand-in ([`isocert_history::opaque_value`]: a row with no column, read as SQL NULL),
/// deletes included, so that whatever recovery then computes (which versions are foreign,
/// version sets, which version an item read saw, the serialization order) rests on no
/// hidden value. Which transactions are foreign is decided by xid alone, never by value.
/// `None` when no transaction of `log` is foreign (nothing to hide).
///
/// # Errors
/// [`RecoveryError::Unsupported`] when the history has a transaction of unknown outcome
/// that recorded no xid while the log has foreign transactions: only its values could tell
/// whether one of them is it, and comparing them with hidden values would reveal them (the
/// error says so whatever the values are). [`RecoveryError`] for malformed facts.
pub fn hide_foreign_values(h: &History, log: &RawLog) -> Result<Option<RawLog>, RecoveryError> {
    let xids = read_xids(h)?;
    let recorded: FxHashSet<u32> = xids.iter().flatten().map(|&x| x as u32).collect();
    let foreign = |xid: u64| !recorded.contains(&(xid as u32));
    if !log.txns().iter().any(|ct| foreign(ct.xid)) {
        return Ok(None);
    }
    if let Some(t) = h.txn_ids().find(|t| h.txn(*t).status == Status::Unknown && xids[t.index()].is_none()) {
        return Err(RecoveryError::Unsupported {
            txn: h.txn_label(t),
            op: 0,
            message: "its outcome is unknown and it recorded no xid, and other writers wrote the history's \
                      tables: telling whether one of them is it would compare its values with their hidden \
                      values"
                .into(),
        });
    }
    let mut out = RawLog::new();
    for ct in log.txns() {
        let mut ct = ct.clone();
        if foreign(ct.xid) {
            for change in &mut ct.changes {
                change.row = Some(Vec::new());
            }
        }
        out.push(ct);
    }
    Ok(Some(out))
}
