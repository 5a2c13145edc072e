//! The timestamp databases' ticks while the workload runs ([`RecordedLiveTicks`]): the
//! timestamps each session recorded as its transaction completed, handed out at the cut.
//!
//! Recovery writes a timestamp database's recorded timestamps into the history after
//! matching them with the version source. Dgraph's has no log to match
//! ([`crate::VersionSource::CommitTimestamps`]), so recovery keeps every recorded timestamp.
//! CockroachDB's changefeed is matched by the recorded commit timestamp, so at SERIALIZABLE
//! recovery keeps it too. TiDB's MVCC versions carry their `commit_ts`, which wins where it
//! differs from the session's `@@tidb_last_txn_info` (a database bug): the run compares
//! every published timestamp with the recovered one and exits 2 naming a transaction that
//! differs. The rule publishes each committed transaction with its recorded
//! `(start, commit)`, a transaction that wrote nothing committing at its start. What it
//! cannot promise stops live publishing instead (the rest is published after recovery): an
//! unknown outcome (recovery settles it by what later transactions read), a committed
//! writer without a commit timestamp, what the database's function refuses (CockroachDB
//! below SERIALIZABLE), two writers of one row at one commit timestamp, and a start below
//! the watermark already sent. MongoDB's sessions only bracket a snapshot's cluster time,
//! which is placed by the change stream's commits: its rule is `crate::MongoLiveTicks`.

use std::collections::VecDeque;

use isocert_history::{IsolationLevel, ObjId, SerialOrder, Status, Timestamp, Transaction, TxnId};
use rustc_hash::FxHashMap;

use crate::live::{stop, HighestTimestamp};
use crate::matching::record_own_writes;
use crate::{CommittedTxn, LiveTicks, RecoveryError};

/// A database's recorded `(start, commit)` of one transaction, as recovery will write them
/// (`commit`: `None` for a transaction that wrote nothing and recorded none).
pub type RecordedTimestamps =
    fn(&Transaction) -> Result<(Option<Timestamp>, Option<Timestamp>), RecoveryError>;

/// Ticks of a database whose timestamps come from one timestamp oracle (Dgraph Zero): every
/// transaction that begins after a cut reads at a timestamp above every one handed out
/// before it, so the watermark after a group is the highest timestamp so far.
#[derive(Debug)]
pub struct RecordedLiveTicks {
    recorded: RecordedTimestamps,
    /// Whether the database serializes SERIALIZABLE transactions in commit-timestamp order.
    commit_ordered: bool,
    /// Per row, the transaction that committed it at each timestamp.
    writers: FxHashMap<(ObjId, Timestamp), String>,
    /// The watermark: the highest timestamp handed out so far.
    highest: HighestTimestamp,
}

impl RecordedLiveTicks {
    /// The rule for a database whose sessions record `recorded`.
    pub fn new(recorded: RecordedTimestamps) -> RecordedLiveTicks {
        RecordedLiveTicks {
            recorded,
            commit_ordered: false,
            writers: FxHashMap::default(),
            highest: HighestTimestamp::default(),
        }
    }

    /// The rule for a database whose SERIALIZABLE transactions serialize in commit-timestamp
    /// order (CockroachDB): a run at that level publishes `serial_order` `commit_ts`, as
    /// recovery records it.
    pub fn commit_ordered(recorded: RecordedTimestamps) -> RecordedLiveTicks {
        RecordedLiveTicks { commit_ordered: true, ..RecordedLiveTicks::new(recorded) }
    }
}

/// The rows `txn` wrote, sorted.
fn written(txn: &Transaction) -> Vec<ObjId> {
    let mut own = FxHashMap::default();
    txn.ops.iter().for_each(|op| record_own_writes(op, &mut own));
    let mut objects: Vec<ObjId> = own.into_keys().collect();
    objects.sort_unstable();
    objects
}

impl LiveTicks for RecordedLiveTicks {
    fn group(
        &mut self,
        txns: &[(TxnId, &Transaction)],
        _stream: &mut VecDeque<CommittedTxn>,
    ) -> Result<Vec<Option<(Timestamp, Timestamp)>>, RecoveryError> {
        let low = self.low();
        let mut out = Vec::with_capacity(txns.len());
        for (_, txn) in txns {
            let label = format!("T{}", txn.name);
            match txn.status {
                Status::Aborted => {
                    out.push(None);
                    continue;
                }
                Status::Unknown => {
                    return Err(stop(format!(
                        "{label}'s commit outcome is unknown: recovery settles it by what later transactions read"
                    )))
                }
                Status::Committed => {}
            }
            let (start, commit) = (self.recorded)(txn)?;
            let Some(start) = start else {
                return Err(stop(format!("{label} committed without the timestamp its snapshot reads at")));
            };
            let objects = written(txn);
            let commit = match commit {
                Some(c) => c,
                None if objects.is_empty() => start,
                None => return Err(stop(format!("{label} wrote and committed without a commit timestamp"))),
            };
            for obj in objects {
                if let Some(other) = self.writers.insert((obj, commit), label.clone()) {
                    return Err(stop(format!(
                        "{label} and {other} wrote one row and both commit at {commit}: recovery refuses them"
                    )));
                }
            }
            out.push(Some(self.highest.hand_out(&label, low, (start, commit))?));
        }
        Ok(out)
    }

    fn low(&self) -> Timestamp {
        self.highest.low()
    }

    fn needs_stream(&self) -> bool {
        false
    }

    fn serial_order(&self, level: IsolationLevel) -> SerialOrder {
        if self.commit_ordered {
            super::commit_order_if_serializable([level.as_str()])
        } else {
            SerialOrder::Unknown
        }
    }
}
