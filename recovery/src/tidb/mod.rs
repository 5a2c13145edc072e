//! The timestamp-ordering rule (TiDB / Percolator): history + the rows' MVCC versions ->
//! certificate.
//!
//! TiKV keeps every version of a row under its writer's `commit_ts`, and a read at
//! timestamp `ts` returns the newest version with `commit_ts <= ts`. So:
//!
//! - version order: per row, its writers by `commit_ts` (the log the TiDB capture builds
//!   from the MVCC API is sorted by `(commit_ts, start_ts)`, and carries `start_ts` as the
//!   transaction id, which the client recorded as `@@tidb_current_ts`);
//! - what each read saw: the newest version at its read timestamp, which is the
//!   transaction's `start_ts` for plain reads, and the statement's own timestamp
//!   (`for_update_ts` of `@@tidb_last_query_info`, recorded in the op's `read_ts`) for the
//!   locking reads of pessimistic transactions and for every statement at READ COMMITTED;
//!   a transaction sees its own writes first;
//! - timestamps: `start_ts`, and `commit_ts` from the log (the client's
//!   `@@tidb_last_txn_info` for a transaction that wrote nothing), so that the snapshot
//!   isolation checks judge exactly what TiDB promises.
//!
//! Only the last write of a row per transaction reaches TiKV, like every log this crate
//! reads; [`crate::matching`] compares it with the history's final write of the row.

use isocert_history::{
    Certificate, History, ObjId, Op, OpRef, SeenVersion, Status, Timestamp, ValueId, Writer,
};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::matching::{match_log, record_own_writes};
use crate::meta::{op_facts, txn_facts};
use crate::{RawLog, Recovered, RecoveryError, RecoveryStats, RowMatcher};

/// What a TiDB session records about one transaction attempt (docs/TIDB.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TiDbTxnFacts {
    /// The level, as isocert spells it (`repeatable-read`).
    pub isolation: String,
    /// `@@tidb_txn_mode`: `optimistic` or `pessimistic`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub txn_mode: String,
    /// `@@tidb_current_ts` inside the transaction: its start timestamp (the MVCC API's
    /// `start_ts` of its writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ts: Option<u64>,
    /// `commit_ts` of `@@tidb_last_txn_info` after COMMIT (0 or absent for a transaction
    /// that wrote nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ts: Option<u64>,
    /// Why the attempt failed: the server's error number, `connection` or `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a TiDB session records per statement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TiDbOpFacts {
    /// The timestamp the statement read at when it is not the transaction's `start_ts`:
    /// `for_update_ts` of a pessimistic transaction's DML or `SELECT ... FOR UPDATE`, or
    /// of any statement at READ COMMITTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ts: Option<u64>,
}

/// One version of a row: its writer's commit timestamp (`None` for the initial version),
/// writer and value.
#[derive(Clone, Copy, Debug)]
struct Version {
    commit_ts: Option<u64>,
    writer: Writer,
    value: ValueId,
}

/// Recovers the certificate of a TiDB history from the MVCC versions of the rows it
/// touched (a [`RawLog`] sorted by commit timestamp, `xid` = `start_ts`), and writes the
/// transactions' `start_ts`/`commit_ts` into the history; unknown outcomes the versions
/// settle become committed or aborted.
///
/// # Errors
/// A [`RecoveryError`] when the `meta` facts are malformed, a committed transaction has no
/// start timestamp, or history and log disagree.
pub fn recover_tidb(
    history: &mut History,
    log: &RawLog,
    _matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let facts: Vec<TiDbTxnFacts> =
        history.txn_ids().map(|t| txn_facts(history, t)).collect::<Result<_, _>>()?;
    let ids: Vec<Option<u64>> = facts.iter().map(|f| f.start_ts).collect();
    let matched = match_log(history, &ids, log, |ts| ts)?;
    let h: &History = history;
    let mut warnings = Vec::new();

    // Each transaction's timestamps: start from the client, commit from the log (the
    // client's for a transaction that wrote nothing: TiDB commits it at no timestamp, and it
    // is equivalent to one committing at its start).
    let mut times: Vec<Option<(u64, u64)>> = vec![None; h.txns.len()];
    for t in h.txn_ids() {
        if h.txn(t).status != Status::Committed {
            continue;
        }
        let f = &facts[t.index()];
        let start = f.start_ts.ok_or_else(|| RecoveryError::Meta {
            txn: h.txn_label(t),
            field: "meta.start_ts".into(),
            message: "a committed transaction needs its start timestamp (@@tidb_current_ts)".into(),
        })?;
        let logged = matched.stream_pos[t.index()].map(|p| log.txns()[p as usize].commit_time as u64);
        if let (Some(logged), Some(client)) = (logged, f.commit_ts.filter(|&c| c > 0)) {
            if logged != client {
                warnings.push(format!(
                    "{}: @@tidb_last_txn_info says commit_ts {client}, its MVCC versions {logged}; the versions' is used",
                    h.txn_label(t)
                ));
            }
        }
        times[t.index()] = Some((start, logged.unwrap_or(start)));
    }

    // Per row, its versions: the initial one, then each writer's, by commit timestamp.
    let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let mut versions: FxHashMap<ObjId, Vec<Version>> = FxHashMap::default();
    for obj in initial.keys().chain(matched.version_order.keys()).copied() {
        versions.entry(obj).or_insert_with(|| {
            let mut list = vec![Version {
                commit_ts: None,
                writer: Writer::Initial,
                value: initial.get(&obj).copied().unwrap_or(ValueId::ABSENT),
            }];
            for &w in matched.version_order.get(&obj).map(Vec::as_slice).unwrap_or(&[]) {
                list.push(Version {
                    commit_ts: times[w.index()].map(|(_, c)| c),
                    writer: Writer::Txn(w),
                    value: matched.final_value.get(&(w, obj)).copied().unwrap_or(ValueId::ABSENT),
                });
            }
            list
        });
    }
    let mut objects_of: Vec<Vec<ObjId>> = vec![Vec::new(); h.tables().len()];
    for obj in versions.keys() {
        objects_of[h.object(*obj).table.index()].push(*obj);
    }
    objects_of.iter_mut().for_each(|v| v.sort_unstable());
    let newest_at = |obj: ObjId, ts: u64| -> Option<Version> {
        let list = versions.get(&obj)?;
        list.iter().rev().find(|v| v.commit_ts.is_none_or(|c| c <= ts)).copied()
    };

    let mut sets: FxHashMap<OpRef, Vec<SeenVersion>> = FxHashMap::default();
    let mut stats = RecoveryStats {
        logged_txns: log.len(),
        logged_changes: log.change_count(),
        resolved_committed: matched.resolved_committed,
        resolved_aborted: matched.resolved_aborted,
        ..RecoveryStats::default()
    };
    for t in h.txn_ids() {
        let Some((start, _)) = times[t.index()] else { continue };
        let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let at = OpRef { txn: t, op: i as u32 };
            let read_ts = op_facts::<TiDbOpFacts>(h, t, i)?.read_ts.unwrap_or(start);
            match op {
                Op::Read { obj, .. } if !own.contains_key(obj) => {
                    if let Some(v) = newest_at(*obj, read_ts) {
                        sets.insert(at, vec![SeenVersion { obj: *obj, writer: v.writer }]);
                        stats.item_read_versions += 1;
                    }
                }
                Op::Select { predicate, .. }
                | Op::Update { predicate, .. }
                | Op::Delete { predicate, .. }
                | Op::Aggregate { predicate, .. } => {
                    let table = h.predicate(*predicate).table;
                    let mut set = Vec::new();
                    for &obj in &objects_of[table.index()] {
                        if own.contains_key(&obj) {
                            set.push(SeenVersion { obj, writer: Writer::Txn(t) });
                        } else if let Some(v) = newest_at(obj, read_ts) {
                            if !(v.writer == Writer::Initial && v.value == ValueId::ABSENT) {
                                set.push(SeenVersion { obj, writer: v.writer });
                            }
                        }
                    }
                    sets.insert(at, set);
                    stats.version_sets += 1;
                }
                _ => {}
            }
            record_own_writes(op, &mut own);
        }
    }
    let certificate = Certificate {
        version_order: Some(matched.version_order.clone()),
        version_sets: Some(sets),
        serialization_order: None,
    };
    for (txn, time) in history.txns.iter_mut().zip(&times) {
        if let Some((start, commit)) = time {
            txn.start_ts = Some(Timestamp::new(*start));
            txn.commit_ts = Some(Timestamp::new(*commit));
        }
    }
    Ok(Recovered { certificate, stats, warnings })
}

#[cfg(test)]
mod tests;
