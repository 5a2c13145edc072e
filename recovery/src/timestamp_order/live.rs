//! The timestamp databases' ticks while the workload runs ([`RecordedLiveTicks`]): the
//! timestamps each session recorded as its transaction completed, handed out at the cut
//! when recovery will keep them as they are.
//!
//! Recovery writes a timestamp database's recorded timestamps into the history after
//! matching them with the version source, and a logged commit timestamp wins over the
//! client's. Only a database whose recovery has no log to match (Dgraph:
//! [`crate::VersionSource::CommitTimestamps`]) keeps every recorded timestamp, so only its
//! rule publishes live: each committed transaction with its recorded `(start, commit)`,
//! a transaction that wrote nothing committing at its start. What recovery would refuse
//! stops live publishing instead (the rest is published after recovery): an unknown
//! outcome (recovery settles it by what later transactions read), a committed writer
//! without a commit timestamp, and two writers of one row at one commit timestamp.

use std::collections::VecDeque;

use isocert_history::{ObjId, Status, Timestamp, Transaction, TxnId};
use rustc_hash::FxHashMap;

use crate::live::stop;
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
    /// Per row, the transaction that committed it at each timestamp.
    writers: FxHashMap<(ObjId, Timestamp), String>,
    /// The highest timestamp handed out so far.
    highest: Option<Timestamp>,
}

impl RecordedLiveTicks {
    /// The rule for a database whose sessions record `recorded`.
    pub fn new(recorded: RecordedTimestamps) -> RecordedLiveTicks {
        RecordedLiveTicks { recorded, writers: FxHashMap::default(), highest: None }
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
            if start < low {
                // Not expected of a timestamp oracle; checked so that a mark is never wrong.
                return Err(stop(format!(
                    "{label} reads at {start}, below the watermark {low} already published"
                )));
            }
            self.highest = Some(self.highest.map_or(commit.max(start), |h| h.max(commit).max(start)));
            out.push(Some((start, commit)));
        }
        Ok(out)
    }

    fn low(&self) -> Timestamp {
        self.highest.unwrap_or(Timestamp::new(0))
    }

    fn needs_stream(&self) -> bool {
        false
    }
}
