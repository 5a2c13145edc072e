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
//!   the commits the log shows matter. The positions that explain the item reads (documents
//!   carry their writer, so an item read names its version) and then the predicate reads
//!   remain; with several, the shared rule gives each operation its versions only where
//!   they all agree and marks the rest `read-time-unknown` (uncertified): docs/MONGODB.md.

mod change_stream;
mod ext_json;
mod live;
mod oplog;
#[cfg(test)]
mod tests;

use isocert_history::{History, ObjId, Op, Status, Timestamp, Transaction, Value, ValueId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use change_stream::{read_change_stream, ChangeStreamReader};
pub use ext_json::mongo_txn_xid;
pub use live::MongoLiveTicks;
pub use oplog::read_oplog;

use crate::matching::logged_value;
use crate::meta::txn_facts;
use crate::timestamp_order::{recover_by_timestamps, LogMatch, ReadWindow, TimestampFacts, VersionSource};
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
    matcher: RowMatcher<'_>,
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
    let keyed = with_key_columns(history, log);
    let log = &keyed;
    let versions = logged_versions(history, log);
    let commits: Vec<Timestamp> = log.txns().iter().filter_map(|t| t.commit_ts).collect();
    let initial: FxHashMap<ObjId, &Value> =
        history.initial.iter().map(|(o, v)| (*o, history.value(*v))).collect();
    let mut ts = TimestampFacts::with_len(history.txns.len());
    let mut ambiguous = 0usize;
    let mut unexplained = Vec::new();
    for (t, f) in history.txn_ids().zip(&facts) {
        ts.commit[t.index()] = f.commit_ts.map(ClusterTime::timestamp);
        if history.txn(t).status == Status::Aborted {
            continue;
        }
        let reads = item_reads(history.txn(t));
        let explains = |at: Timestamp| {
            reads.iter().all(|&(obj, v)| visible(&versions, &initial, obj, at) == history.value(v))
        };
        ts.start[t.index()] = match snapshot(f, &commits, explains) {
            Snapshot::Exact(at) => Some(at),
            Snapshot::Placed { candidates, high } => {
                let mut fitting = Vec::new();
                for &at in &candidates {
                    if predicates_explained(history, t, &versions, &initial, at, matcher)? {
                        fitting.push(at);
                    }
                }
                match (fitting.first().zip(fitting.last()), candidates.last()) {
                    (Some((&first, &last)), _) => {
                        // The shared rule gives each operation its versions only where
                        // every snapshot left gives the same (all do when one is left).
                        ambiguous += usize::from(first != last);
                        ts.start_window[t.index()] = Some(ReadWindow {
                            from: Some(first),
                            until: Some(Timestamp::hlc(last.wall, last.logical.saturating_add(1))),
                            returned: Vec::new(),
                        });
                        Some(last)
                    }
                    // No snapshot the item reads allow explains the predicate reads: each
                    // gives a wrong result, which the checkers report.
                    (None, Some(&last)) => Some(last),
                    (None, None) => {
                        unexplained.push(history.txn_label(t));
                        Some(high)
                    }
                }
            }
            Snapshot::Unknown => None,
        };
    }
    let mut recovered =
        recover_by_timestamps(history, VersionSource::Log { log, by: LogMatch::Xid(&ids) }, &ts)?;
    if ambiguous > 0 {
        recovered.warnings.push(format!(
            "{ambiguous} transactions' snapshot times are only bracketed and several commits in their bracket explain \
             their reads; operations whose versions differ between them are uncertified (docs/MONGODB.md)"
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

/// Whether a snapshot of `t` at `at` explains its predicate reads: each select returns the
/// documents, and each predicate update or delete writes the documents, that match its
/// filter there (its own earlier writes first).
fn predicates_explained(
    h: &History,
    t: isocert_history::TxnId,
    versions: &Versions,
    initial: &FxHashMap<ObjId, &Value>,
    at: Timestamp,
    matcher: RowMatcher<'_>,
) -> Result<bool, RecoveryError> {
    let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
    for op in &h.txn(t).ops {
        let (predicate, rows, values) = match op {
            Op::Select { predicate, rows } => (*predicate, rows, true),
            Op::Update { predicate, rows, .. } | Op::Delete { predicate, rows } => (*predicate, rows, false),
            _ => {
                crate::matching::record_own_writes(op, &mut own);
                continue;
            }
        };
        let table = h.predicate(predicate).table;
        let mut expected: Vec<(ObjId, Option<ValueId>)> = Vec::new();
        for obj in (0..h.object_count()).map(ObjId::from_index).filter(|o| h.object(*o).table == table) {
            let value = match own.get(&obj) {
                Some(v) => Some(*v),
                None => h.value_id(visible(versions, initial, obj, at)),
            };
            // A version the history never wrote or read cannot be judged: not explained.
            let Some(value) = value else { return Ok(false) };
            if value != ValueId::ABSENT
                && matcher(h, predicate, obj, value).map_err(|e| RecoveryError::Meta {
                    txn: h.txn_label(t),
                    field: "ops".into(),
                    message: e,
                })?
            {
                expected.push((obj, values.then_some(value)));
            }
        }
        let mut returned: Vec<(ObjId, Option<ValueId>)> =
            rows.iter().map(|r| (r.obj, values.then_some(r.value))).collect();
        returned.sort_unstable();
        if expected != returned {
            return Ok(false);
        }
        crate::matching::record_own_writes(op, &mut own);
    }
    Ok(true)
}

/// The log with each document's `_id` named as its table's key column: the history's rows
/// carry the workload's key column (`items.id`, the first column: the adapter writes a row's
/// first column as `_id`, `adapters/src/mongodb/session.rs`), the documents `_id`. Tables
/// that have an `_id` column, and the key-value table, are left as they are.
fn with_key_columns(h: &History, log: &RawLog) -> RawLog {
    let mut out = RawLog::new();
    for txn in log.txns() {
        let mut txn = txn.clone();
        for change in &mut txn.changes {
            let Some(table) = h.table_by_name(&change.table).map(|t| h.table(t)) else { continue };
            let Some(key_column) =
                table.columns.first().filter(|_| !table.is_kv() && table.column("_id").is_none())
            else {
                continue;
            };
            for (name, _) in change.row.iter_mut().flatten() {
                if &**name == "_id" {
                    *name = std::sync::Arc::from(&**key_column);
                }
            }
        }
        out.push(txn);
    }
    out
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

/// Where a transaction's snapshot lies, by what its session recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Snapshot {
    /// The server reported it (`atClusterTime`).
    Exact(Timestamp),
    /// Only bracketed: the positions in the bracket (its start and the commits inside it,
    /// in order) that explain its item reads, and the bracket's end.
    Placed { candidates: Vec<Timestamp>, high: Timestamp },
    /// Nothing recorded bounds it.
    Unknown,
}

/// The snapshot of a transaction with facts `f`, among the bracket's start and the
/// logged `commits` (in order) inside its bracket; `explains(at)` says whether a snapshot
/// at `at` explains every item read. One rule for recovery and the live rule
/// ([`MongoLiveTicks`]): a bracket ends before the transaction completed, so the commits in
/// it are all logged by the time either asks.
fn snapshot(f: &MongoTxnFacts, commits: &[Timestamp], explains: impl Fn(Timestamp) -> bool) -> Snapshot {
    let high = match (f.read_ts, f.read_before.or(f.commit_ts)) {
        (Some(exact), _) => return Snapshot::Exact(exact.timestamp()),
        (None, Some(high)) => high.timestamp(),
        (None, None) => return Snapshot::Unknown,
    };
    let low = f.read_after.map_or(Timestamp::default(), ClusterTime::timestamp);
    // Never at or after its own commit: a snapshot precedes the transaction's writes.
    let high = f
        .commit_ts
        .map(ClusterTime::timestamp)
        .map_or(high, |own| high.min(Timestamp::hlc(own.wall, own.logical.saturating_sub(1))));
    let inside = commits.iter().copied().filter(|c| low < *c && *c <= high);
    let candidates = std::iter::once(low).chain(inside).filter(|&at| explains(at)).collect();
    Snapshot::Placed { candidates, high }
}

/// The item reads of `txn` made before it wrote the object: what places its snapshot.
fn item_reads(txn: &Transaction) -> Vec<(ObjId, ValueId)> {
    let mut reads = Vec::new();
    let mut written: Vec<ObjId> = Vec::new();
    for op in &txn.ops {
        match op {
            Op::Read { obj, value } if !written.contains(obj) => reads.push((*obj, *value)),
            Op::Write { obj, .. } => written.push(*obj),
            Op::Update { rows, .. } | Op::Delete { rows, .. } => written.extend(rows.iter().map(|r| r.obj)),
            _ => {}
        }
    }
    reads
}

/// The value of `obj` a snapshot at `at` sees: the newest logged version committed at or
/// before it, else the initial one.
fn visible<'h>(
    versions: &'h Versions,
    initial: &FxHashMap<ObjId, &'h Value>,
    obj: ObjId,
    at: Timestamp,
) -> &'h Value {
    let logged = versions.get(&obj).and_then(|l| l.iter().rev().find(|(c, _)| *c <= at).map(|(_, v)| v));
    logged.or_else(|| initial.get(&obj).copied()).unwrap_or(&Value::Absent)
}
