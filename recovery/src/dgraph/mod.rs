//! Dgraph's recovery rule: timestamp ordering from the history alone.
//!
//! Dgraph keeps every version of an (uid, predicate) pair under its writer's `commit_ts`,
//! and a transaction reads the snapshot at its `start_ts` (snapshot isolation, Dgraph's
//! only level). Its HTTP API returns both timestamps to the client (`extensions.txn.start_ts`
//! on the first `/query` or `/mutate`, `extensions.txn.commit_ts` from `/commit`) but has no
//! per-key version API. So there is no log: the version order of each node is its writers'
//! commit timestamp order, and each read sees the newest version committed at or before its
//! transaction's `start_ts` ([`crate::timestamp_order`], [`VersionSource::CommitTimestamps`]).
//!
//! The timestamps come from the facts the session recorded in each transaction's `meta`
//! ([`DgraphTxnFacts`]), or, for a history that carries them already (a run's
//! `history.jsonl` after recovery, a converted history), from its `start_ts`/`commit_ts`.

use isocert_history::{History, Op, Status, Timestamp, Transaction};
use serde::{Deserialize, Serialize};

use crate::meta::facts_of_txn;
use crate::timestamp_order::{recover_by_timestamps, TimestampFacts, VersionSource};
use crate::{RawLog, Recovered, RecoveryError, RowMatcher};

/// What a Dgraph session records about one transaction attempt (docs/DGRAPH.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DgraphTxnFacts {
    /// The level, as isocert spells it (`repeatable-read`: Dgraph runs snapshot isolation).
    #[serde(default)]
    pub isolation: String,
    /// `extensions.txn.start_ts` of the transaction's first request: its snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ts: Option<u64>,
    /// `extensions.txn.commit_ts` of `/commit` (absent for a transaction that mutated
    /// nothing: it is not sent to `/commit`, and commits at its snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ts: Option<u64>,
    /// Why the attempt failed: `aborted` (Dgraph's "Transaction has been aborted"), the
    /// server's `extensions.code`, `connection` or `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Recovers the certificate of a Dgraph history from its transactions' timestamps alone
/// (module doc) and writes each committed transaction's `start_ts`/`commit_ts` into it. The
/// log is ignored (Dgraph has none; `isocert run` saves an empty one); a transaction whose
/// commit answer was lost is taken as aborted unless some transaction read its writes, which
/// is refused, as there is nothing to settle it.
///
/// # Errors
/// A [`RecoveryError`] when a transaction's `meta` is malformed or disagrees with its
/// timestamps, a committed transaction has no `start_ts`, one that wrote has no
/// `commit_ts`, or two writers of a node share a commit timestamp.
pub fn recover_dgraph(
    history: &mut History,
    _log: &RawLog,
    _matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let facts = timestamp_facts(history)?;
    recover_by_timestamps(history, VersionSource::CommitTimestamps, &facts)
}

/// Each transaction's snapshot and commit timestamps, from its facts or its fields.
fn timestamp_facts(h: &History) -> Result<TimestampFacts, RecoveryError> {
    let mut facts = TimestampFacts::with_len(h.txns.len());
    for t in h.txn_ids() {
        let (start, commit) = dgraph_timestamps(h.txn(t))?;
        facts.start[t.index()] = start;
        facts.commit[t.index()] = commit;
    }
    Ok(facts)
}

/// The snapshot and commit timestamps recovery gives `txn`: from its facts or its fields,
/// a committed transaction that wrote nothing committing at its start. A live run
/// publishes them as each transaction completes ([`crate::RecordedLiveTicks`]): with no
/// log to match, recovery keeps them as they are.
///
/// # Errors
/// Malformed facts, facts and fields that disagree, a commit not after the start.
pub fn dgraph_timestamps(txn: &Transaction) -> Result<(Option<Timestamp>, Option<Timestamp>), RecoveryError> {
    let f: DgraphTxnFacts = facts_of_txn(txn)?;
    let start = pick(txn, "start_ts", f.start_ts.map(Timestamp::new), txn.start_ts())?;
    let commit = pick(txn, "commit_ts", f.commit_ts.map(Timestamp::new), txn.commit_ts())?;
    // Whether the transaction installed a version (a predicate update or delete that
    // matched nothing mutated nothing).
    let wrote = txn.ops.iter().any(|op| match op {
        Op::Write { .. } | Op::Append { .. } => true,
        Op::Update { rows, .. } | Op::Delete { rows, .. } => !rows.is_empty(),
        _ => false,
    });
    if let (Some(s), Some(c)) = (start, commit) {
        // Dgraph's Zero hands out every timestamp once: a writer commits after its start
        // (one that wrote nothing may carry its snapshot as commit_ts, as recovery writes).
        if c < s || (c == s && wrote) {
            return Err(RecoveryError::Meta {
                txn: format!("T{}", txn.name),
                field: "meta.commit_ts".into(),
                message: format!("commit_ts {c} is not after start_ts {s}"),
            });
        }
    }
    // A transaction that mutated nothing never reaches /commit: its reads are those of
    // its snapshot, and it is equivalent to one committing there.
    let commit = match commit {
        None if !wrote && txn.status == Status::Committed => start,
        c => c,
    };
    Ok((start, commit))
}

/// The timestamp from the facts, else the transaction's field; both present must agree.
fn pick(
    txn: &Transaction,
    field: &str,
    from_meta: Option<Timestamp>,
    from_txn: Option<Timestamp>,
) -> Result<Option<Timestamp>, RecoveryError> {
    match (from_meta, from_txn) {
        (Some(m), Some(x)) if m != x => Err(RecoveryError::Meta {
            txn: format!("T{}", txn.name),
            field: format!("meta.{field}"),
            message: format!("the session recorded {m}, the transaction's {field} is {x}"),
        }),
        (m, x) => Ok(m.or(x)),
    }
}

#[cfg(test)]
mod tests;
