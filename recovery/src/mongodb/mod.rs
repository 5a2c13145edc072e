//! MongoDB: the captured oplog or change stream as a [`RawLog`], and recovery by cluster
//! time through the shared timestamp-ordering rule ([`crate::timestamp_order`]).
//!
//! - Version order: per document, its writers by commit cluster time: the `ts` of the
//!   entry that commits the transaction (the `applyOps` without `partialTxn`), the
//!   `commitTimestamp` of a prepared one, or the change events' `clusterTime`.
//! - Matching: a logged transaction's id is [`mongo_txn_xid`] of its `lsid` and
//!   `txnNumber`, which the client records in `meta` ([`MongoTxnFacts`]).
//! - Snapshots: a transaction with read concern `snapshot` reads at one cluster time. When
//!   the client learned it (`read_ts`: the `atClusterTime` a snapshot read reports) it is
//!   used as is. Otherwise the client brackets it: `read_after` (the session's
//!   `operationTime` before the transaction: the snapshot is no older) and `read_before`
//!   (the first statement's reply `operationTime`, or the commit's). Within the bracket only
//!   the commits the log shows matter; recovery takes the latest of those positions that
//!   explains every item read of the transaction (documents carry their writer, so an item
//!   read names its version), and says in a warning how many transactions had more than one
//!   such position (their predicate reads could have seen either: docs/MONGODB.md).

mod change_stream;
mod ext_json;
mod oplog;
#[cfg(test)]
mod tests;

use isocert_history::{History, ObjId, Op, Status, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use change_stream::read_change_stream;
pub use ext_json::mongo_txn_xid;
pub use oplog::read_oplog;

use crate::matching::logged_value;
use crate::meta::txn_facts;
use crate::timestamp_order::{recover_by_timestamps, LogMatch, TimestampFacts, VersionSource};
use crate::{RawLog, Recovered, RecoveryError, RowMatcher};

/// A BSON `Timestamp(t, i)`: seconds and the increment within the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClusterTime {
    /// Seconds since the Unix epoch.
    pub t: u32,
    /// Ordinal within the second.
    pub i: u32,
}

impl ClusterTime {
    /// As the HLC pair (t, i) the recovery rule orders by.
    pub fn timestamp(self) -> Timestamp {
        Timestamp::hlc(u64::from(self.t), u64::from(self.i))
    }
}

/// What a MongoDB session records about one transaction attempt (docs/MONGODB.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MongoTxnFacts {
    /// The level, as isocert spells it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub isolation: String,
    /// The session id (`lsid.id`), the base64 text of its UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsid: Option<String>,
    /// The attempt's `txnNumber` within the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_number: Option<i64>,
    /// The exact snapshot time (`atClusterTime`), when the server reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ts: Option<ClusterTime>,
    /// A cluster time the snapshot is not older than (the session's `operationTime`
    /// before the transaction's first statement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_after: Option<ClusterTime>,
    /// A cluster time the snapshot is not newer than (the first statement's reply
    /// `operationTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_before: Option<ClusterTime>,
    /// The session's `operationTime` after `commitTransaction`: the commit's cluster time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ts: Option<ClusterTime>,
    /// Why the attempt failed (`TransientTransactionError`, `UnknownTransactionCommitResult`,
    /// a server code name, `connection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Per object, its logged versions: (commit time, value), in commit order.
type Versions = FxHashMap<ObjId, Vec<(Timestamp, Value)>>;

/// Recovers the certificate of a MongoDB history from its captured oplog or change stream
/// ([`read_oplog`], [`read_change_stream`]), and writes the transactions' snapshot and
/// commit cluster times into the history; unknown commit outcomes the log settles become
/// committed or aborted.
///
/// # Errors
/// A [`RecoveryError`] when the `meta` facts are malformed, a committed transaction has no
/// snapshot time or bracket, or history and log disagree.
pub fn recover_mongodb(
    history: &mut History,
    log: &RawLog,
    _matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let facts: Vec<MongoTxnFacts> =
        history.txn_ids().map(|t| txn_facts(history, t)).collect::<Result<_, _>>()?;
    let ids: Vec<Option<u64>> = facts
        .iter()
        .map(|f| match (&f.lsid, f.txn_number) {
            (Some(l), Some(n)) => Some(mongo_txn_xid(l, n)),
            _ => None,
        })
        .collect();
    let versions = logged_versions(history, log);
    let commits: Vec<Timestamp> = log.txns().iter().filter_map(|t| t.commit_ts).collect();
    let mut ts = TimestampFacts::with_len(history.txns.len());
    let mut ambiguous = 0usize;
    let mut unexplained = Vec::new();
    for (t, f) in history.txn_ids().zip(&facts) {
        ts.commit[t.index()] = f.commit_ts.map(ClusterTime::timestamp);
        if history.txn(t).status == Status::Aborted {
            continue;
        }
        ts.start[t.index()] = match (f.read_ts, f.read_after, f.read_before.or(f.commit_ts)) {
            (Some(exact), _, _) => Some(exact.timestamp()),
            (None, low, Some(high)) => {
                let low = low.map_or(Timestamp::default(), ClusterTime::timestamp);
                let own = f.commit_ts.map(ClusterTime::timestamp);
                let (at, choices) =
                    snapshot_in(history, t, &versions, &commits, (low, high.timestamp()), own);
                if choices > 1 {
                    ambiguous += 1;
                } else if choices == 0 {
                    unexplained.push(history.txn_label(t));
                }
                Some(at)
            }
            (None, _, None) => None,
        };
    }
    let mut recovered =
        recover_by_timestamps(history, VersionSource::Log { log, by: LogMatch::Xid(&ids) }, &ts)?;
    if ambiguous > 0 {
        recovered.warnings.push(format!(
            "{ambiguous} transactions' snapshot times are only bracketed: several commits in their bracket explain their item reads; the latest was taken (docs/MONGODB.md)"
        ));
    }
    if !unexplained.is_empty() {
        recovered.warnings.push(format!(
            "no cluster time in the bracket explains every item read of {}; the bracket's end was taken",
            unexplained.join(", ")
        ));
    }
    Ok(recovered)
}

fn logged_versions(h: &History, log: &RawLog) -> Versions {
    let mut out: Versions = FxHashMap::default();
    for txn in log.txns() {
        let Some(ts) = txn.commit_ts else { continue };
        for c in &txn.changes {
            let Some(obj) = h.table_by_name(&c.table).and_then(|tb| h.object_by_key(tb, &c.key)) else {
                continue;
            };
            let Some(v) = logged_value(h, h.object(obj).table, c) else { continue };
            let list = out.entry(obj).or_default();
            match list.last_mut() {
                Some(last) if last.0 == ts => last.1 = v,
                _ => list.push((ts, v)),
            }
        }
    }
    out
}

/// The latest position in `[low, high]` (the bracket's start or a logged commit in it)
/// that explains every item read of `t` made before `t` wrote the object, and how many
/// positions do; `high` when none does.
fn snapshot_in(
    h: &History,
    t: TxnId,
    versions: &Versions,
    commits: &[Timestamp],
    (low, high): (Timestamp, Timestamp),
    own_commit: Option<Timestamp>,
) -> (Timestamp, usize) {
    let mut reads: Vec<(ObjId, &Value)> = Vec::new();
    let mut written: Vec<ObjId> = Vec::new();
    for op in &h.txn(t).ops {
        match op {
            Op::Read { obj, value } if !written.contains(obj) => reads.push((*obj, h.value(*value))),
            Op::Write { obj, .. } => written.push(*obj),
            Op::Update { rows, .. } | Op::Delete { rows, .. } => written.extend(rows.iter().map(|r| r.obj)),
            _ => {}
        }
    }
    let initial: FxHashMap<ObjId, &Value> = h.initial.iter().map(|(o, v)| (*o, h.value(*v))).collect();
    let visible = |obj: ObjId, at: Timestamp| -> &Value {
        let logged = versions.get(&obj).and_then(|l| l.iter().rev().find(|(c, _)| *c <= at).map(|(_, v)| v));
        logged.or_else(|| initial.get(&obj).copied()).unwrap_or(&Value::Absent)
    };
    let mut candidates: Vec<Timestamp> = vec![low];
    // Never at or after its own commit: a snapshot precedes the transaction's writes.
    let high =
        own_commit.map_or(high, |own| high.min(Timestamp::hlc(own.wall, own.logical.saturating_sub(1))));
    candidates.extend(commits.iter().copied().filter(|c| low < *c && *c <= high));
    let mut best = None;
    let mut count = 0;
    for at in candidates {
        if reads.iter().all(|(obj, v)| visible(*obj, at) == *v) {
            count += 1;
            best = Some(at);
        }
    }
    (best.unwrap_or(high), count)
}
