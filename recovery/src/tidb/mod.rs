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

use isocert_history::{History, OpRef, Timestamp, Transaction};
use serde::{Deserialize, Serialize};

use crate::meta::{facts_of_txn, op_facts, txn_facts};
use crate::timestamp_order::{recover_by_timestamps, LogMatch, TimestampFacts, VersionSource};
use crate::{CommittedTxn, RawLog, Recovered, RecoveryError, RowMatcher};

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

impl TiDbTxnFacts {
    /// The recorded `(start_ts, commit_ts)`; a transaction that wrote nothing reports
    /// commit_ts 0: it committed at no timestamp of its own.
    fn timestamps(&self) -> (Option<Timestamp>, Option<Timestamp>) {
        (self.start_ts.map(Timestamp::new), self.commit_ts.filter(|&c| c > 0).map(Timestamp::new))
    }
}

/// The `(start_ts, commit_ts)` a TiDB session recorded for `txn`, which a live run
/// publishes as each transaction completes ([`crate::RecordedLiveTicks`]): PD hands out
/// every start timestamp, so one taken after a cut is above every commit acknowledged
/// before it. Recovery later writes the MVCC API's `commit_ts` of the transaction's
/// versions, which wins where it differs; the run then exits 2 naming the transaction.
///
/// # Errors
/// Malformed facts.
pub fn tidb_timestamps(txn: &Transaction) -> Result<(Option<Timestamp>, Option<Timestamp>), RecoveryError> {
    Ok(facts_of_txn::<TiDbTxnFacts>(txn)?.timestamps())
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

/// Recovers the certificate of a TiDB history from the MVCC versions of the rows it
/// touched (a [`RawLog`] sorted by commit timestamp, `xid` = `start_ts`), and writes the
/// transactions' `start_ts`/`commit_ts` into the history; unknown outcomes the versions
/// settle become committed or aborted. The rule is [`crate::timestamp_order`]'s; this
/// function reads TiDB's facts for it.
///
/// # Errors
/// A [`RecoveryError`] when the `meta` facts are malformed, a committed transaction has no
/// start timestamp, or history and log disagree.
pub fn recover_tidb(
    history: &mut History,
    log: &RawLog,
    _matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let txn_facts: Vec<TiDbTxnFacts> =
        history.txn_ids().map(|t| txn_facts(history, t)).collect::<Result<_, _>>()?;
    let mut facts = TimestampFacts::with_len(history.txns.len());
    for (t, f) in history.txn_ids().zip(&txn_facts) {
        (facts.start[t.index()], facts.commit[t.index()]) = f.timestamps();
        for i in 0..history.txn(t).ops.len() {
            if let Some(ts) = op_facts::<TiDbOpFacts>(history, t, i)?.read_ts {
                facts.read_ts.insert(OpRef { txn: t, op: i as u32 }, Timestamp::new(ts));
            }
        }
    }
    let ids: Vec<Option<u64>> = txn_facts.iter().map(|f| f.start_ts).collect();
    // The MVCC API's versions carry their commit_ts; older captured logs only `commit_time`.
    let mut with_ts = RawLog::new();
    for txn in log.txns() {
        let commit_ts = txn.commit_ts.or(Some(Timestamp::new(txn.commit_time as u64)));
        with_ts.push(CommittedTxn { commit_ts, ..txn.clone() });
    }
    recover_by_timestamps(history, VersionSource::Log { log: &with_ts, by: LogMatch::Xid(&ids) }, &facts)
}

#[cfg(test)]
mod tests;
