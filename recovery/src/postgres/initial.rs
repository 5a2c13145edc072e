//! The history's initial load in a change feed over whole tables (`isocert serve`): the
//! logged transactions that committed before the history's first snapshot, decided by
//! position (transaction ids and snapshots), never by comparing values.
//!
//! A feed over a whole table records the table's setup (and whatever other clients changed
//! before the history began) ahead of the history's first transaction. Those changes made
//! the versions the history starts from; everything after belongs in the version order.
//! Telling the two apart by value (the longest prefix whose effect is the history's claimed
//! initial values) would let a history that claims other values learn whether the hidden
//! changes produce them (issue 32); PostgreSQL's snapshots say it without a value.

use isocert_history::{opaque_value, History, ObjId, Status, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value as Json;

use super::facts::read_placement;
use crate::matching::intern_logged_value;
use crate::{widen_xid, CommittedTxn, RawLog, RecoveryError, RowChange};

/// How many of `log`'s first transactions (commit order) are the history's initial load:
/// the longest prefix of transactions that are no history transaction's recorded xid and
/// that **every** snapshot the history recorded sees (a committed `x` is visible to a
/// snapshot iff `x < xmax` and `x` is not in `xip`, so visible to all iff `x` is below the
/// least `xmax` and in no `xip`): they committed before the history's first snapshot was
/// taken. The prefix ends at the first transaction that some snapshot does not see, even if
/// a later one is seen by all (PostgreSQL may make commits visible in a slightly different
/// order from the WAL's; such a one stays in the log, as a foreign writer). A log
/// transaction committed after the first snapshot but before a later one is never in it.
///
/// No prefix (0) when the history recorded no snapshot (nothing places its start), or when
/// it holds a transaction of unknown outcome that recorded neither its xid nor a snapshot
/// (it may have committed before every snapshot, and only its values could tell which
/// logged transaction it is).
///
/// # Errors
/// [`RecoveryError::Meta`] when the history's facts are malformed.
pub fn initial_load(h: &History, log: &RawLog) -> Result<usize, RecoveryError> {
    let placement = read_placement(h)?;
    let unplaced = h.txn_ids().any(|t| {
        h.txn(t).status == Status::Unknown
            && placement.xids[t.index()].is_none()
            && !placement.has_snapshot[t.index()]
    });
    let Some(least_xmax) = placement.snapshots.iter().map(|s| s.xmax).min() else {
        return Ok(0);
    };
    if unplaced {
        return Ok(0);
    }
    let running: FxHashSet<u64> = placement.snapshots.iter().flat_map(|s| s.xip.iter().copied()).collect();
    // The stream carries 32-bit xids; the client records full 64-bit ones.
    let recorded: FxHashSet<u32> = placement.xids.iter().flatten().map(|&x| x as u32).collect();
    let seen_by_all = |xid: u64| {
        let full = widen_xid(xid as u32, least_xmax);
        full < least_xmax && !running.contains(&full)
    };
    Ok(log.txns().iter().take_while(|ct| !recorded.contains(&(ct.xid as u32)) && seen_by_all(ct.xid)).count())
}

/// Each row's initial version as a certificate shows it: its value, or `None` for the
/// opaque stand-in ([`isocert_history::opaque_value`]).
pub type InitialVersion = (ObjId, Option<ValueId>);

/// The initial versions of the rows `h` names, as its initial `load` (the log's first
/// transactions, [`initial_load`]) left them, written into `h.initial` and returned as a
/// certificate shows them, so that nothing depends on the history's claimed initial values:
///
/// - a row the load never wrote starts unborn;
/// - a row whose last writer in the load is one the history declares its client read
///   (header `meta.initial_xids`, docs/POSTGRES.md) gets the logged value, and a claim that
///   differs from it is an error naming the row (the value is the history's own);
/// - a row last written by another transaction gets the logged value when `reveal`, else
///   the opaque stand-in (its value hidden, like every foreign value), whatever the claim.
///
/// A claim of a row the load never wrote, other than unborn, is an error too (no hidden
/// value is compared: that the row was not written is a position, not a value).
///
/// # Errors
/// [`RecoveryError::InitialMismatch`] naming the row, [`RecoveryError::Meta`] for a
/// malformed `initial_xids`.
pub fn settle_initial(
    h: &mut History,
    load: &[CommittedTxn],
    reveal: bool,
) -> Result<Vec<InitialVersion>, RecoveryError> {
    let own = initial_xids(h)?;
    let mut last: FxHashMap<ObjId, (u64, &RowChange)> = FxHashMap::default();
    for ct in load {
        for change in &ct.changes {
            // A row the history never names: its versions are not the history's concern.
            if let Some(obj) = h.table_by_name(&change.table).and_then(|t| h.object_by_key(t, &change.key)) {
                last.insert(obj, (ct.xid, change));
            }
        }
    }
    let claims: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let claimed = |obj: ObjId| claims.get(&obj).copied().unwrap_or(ValueId::ABSENT);
    let mut written: Vec<(ObjId, (u64, &RowChange))> = last.into_iter().collect();
    written.sort_unstable_by_key(|(obj, _)| *obj);
    for &(obj, value) in &h.initial {
        if value != ValueId::ABSENT && written.binary_search_by_key(&obj, |(o, _)| *o).is_err() {
            return Err(RecoveryError::InitialMismatch {
                object: h.object_label(obj),
                claimed: h.value_label(obj, value),
                found: "no change committed before the history's first snapshot wrote the row".into(),
            });
        }
    }
    let mut shown = Vec::with_capacity(written.len());
    for (obj, (xid, change)) in written {
        let table = h.object(obj).table;
        let own = own.contains(&(xid as u32));
        if !own && !reveal {
            shown.push((obj, None));
            continue;
        }
        let value = intern_logged_value(h, table, change);
        if own && claimed(obj) != value {
            return Err(RecoveryError::InitialMismatch {
                object: h.object_label(obj),
                claimed: h.value_label(obj, claimed(obj)),
                found: format!(
                    "the history's own initial load left {} before its first snapshot",
                    h.value_label(obj, value)
                ),
            });
        }
        if value != ValueId::ABSENT {
            shown.push((obj, Some(value)));
        }
    }
    h.initial =
        shown.iter().map(|&(obj, value)| (obj, value.unwrap_or_else(|| opaque_value(h, obj)))).collect();
    Ok(shown)
}

/// The header's `meta.initial_xids` (32-bit, as `xmin` holds them): the writers of the rows
/// the history's client read as its initial versions.
fn initial_xids(h: &History) -> Result<FxHashSet<u32>, RecoveryError> {
    let bad = |message: String| RecoveryError::Meta {
        txn: "the header".into(),
        field: "meta.initial_xids".into(),
        message,
    };
    let Some(list) = h.meta.as_deref().and_then(|m| m.get("initial_xids")) else {
        return Ok(FxHashSet::default());
    };
    let Json::Array(list) = list else { return Err(bad(format!("{list} is not an array"))) };
    list.iter()
        .map(|x| match x {
            Json::Number(_) => {
                x.as_u64().map(|x| x as u32).ok_or_else(|| bad(format!("{x} is not a transaction id")))
            }
            Json::String(s) => {
                s.parse::<u64>().map(|x| x as u32).map_err(|_| bad(format!("{s:?} is not a transaction id")))
            }
            other => Err(bad(format!("{other} is not a transaction id"))),
        })
        .collect()
}
