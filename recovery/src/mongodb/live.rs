//! MongoDB's ticks while the workload runs ([`MongoLiveTicks`]): each group's cluster
//! times as [`super::recover_mongodb`] will give them, from the change stream's commits up
//! to the cut.
//!
//! A transaction's commit time is its commit's `clusterTime` in the stream (the client's
//! `operationTime` for one that wrote nothing). Its snapshot is the `atClusterTime` the
//! server reported, or else it is placed in the bracket the session recorded by the same
//! rule as recovery's ([`super::snapshot`]): the bracket ends before the transaction
//! completed, so every commit inside it is in the stream by the cut. The versions are the
//! group's own writes at their commits' times (recovery checks that they are the logged
//! ones). What recovery would settle or refuse with the whole log stops live publishing
//! (the rest is published after recovery): an unknown outcome, a group's commit behind a
//! stream commit of no recorded transaction (another client, or a write outside a
//! transaction), a recorded write the stream lacks, and a snapshot below the watermark
//! already sent.

use std::collections::VecDeque;

use isocert_history::{ObjId, Status, Timestamp, Transaction, TxnId, ValueId};
use rustc_hash::FxHashMap;

use super::{item_reads, mongo_txn_xid, snapshot, ClusterTime, MongoTxnFacts, Snapshot};
use crate::live::{stop, HighestTimestamp};
use crate::matching::record_own_writes;
use crate::meta::facts_of_txn;
use crate::{CommittedTxn, LiveTicks, RecoveryError};

/// The MongoDB rule for live runs; see the module documentation.
#[derive(Debug, Default)]
pub struct MongoLiveTicks {
    initial: FxHashMap<ObjId, ValueId>,
    /// Per object, its versions so far: (commit time, value), in commit order.
    versions: FxHashMap<ObjId, Vec<(Timestamp, ValueId)>>,
    /// Every commit time the stream carried so far, in order.
    commits: Vec<Timestamp>,
    /// The watermark.
    highest: HighestTimestamp,
}

impl MongoLiveTicks {
    /// The rule before the first group.
    pub fn new() -> MongoLiveTicks {
        MongoLiveTicks::default()
    }

    fn visible(&self, obj: ObjId, at: Timestamp) -> ValueId {
        let logged = self.versions.get(&obj).and_then(|l| l.iter().rev().find(|(c, _)| *c <= at));
        logged.map(|&(_, v)| v).or_else(|| self.initial.get(&obj).copied()).unwrap_or(ValueId::ABSENT)
    }
}

/// The versions `txn` installs: its final value of each object it wrote, by object.
fn own_writes(txn: &Transaction) -> Vec<(ObjId, ValueId)> {
    let mut own = FxHashMap::default();
    txn.ops.iter().for_each(|op| record_own_writes(op, &mut own));
    let mut own: Vec<(ObjId, ValueId)> = own.into_iter().collect();
    own.sort_unstable();
    own
}

impl LiveTicks for MongoLiveTicks {
    fn initial(&mut self, initial: &[(ObjId, ValueId)]) {
        self.initial = initial.iter().copied().collect();
    }

    fn group(
        &mut self,
        txns: &[(TxnId, &Transaction)],
        stream: &mut VecDeque<CommittedTxn>,
    ) -> Result<Vec<Option<(Timestamp, Timestamp)>>, RecoveryError> {
        let facts: Vec<MongoTxnFacts> =
            txns.iter().map(|(_, t)| facts_of_txn(t)).collect::<Result<_, _>>()?;
        let mut by_xid: FxHashMap<u64, usize> = FxHashMap::default();
        for (i, ((_, txn), f)) in txns.iter().zip(&facts).enumerate() {
            if txn.status == Status::Unknown {
                return Err(stop(format!(
                    "T{}'s commit outcome is unknown: recovery settles it by the whole change stream",
                    txn.name
                )));
            }
            if let (Some(lsid), Some(n)) = (&f.lsid, f.txn_number) {
                by_xid.insert(mongo_txn_xid(lsid, n), i);
            }
        }
        let written: Vec<Vec<(ObjId, ValueId)>> = txns.iter().map(|(_, t)| own_writes(t)).collect();
        // The group's commits at the front of the stream, in order, each installing its
        // transaction's writes; commits of later groups may follow them.
        let mut logged: Vec<Option<Timestamp>> = vec![None; txns.len()];
        while let Some(&i) = stream.front().and_then(|c| by_xid.get(&c.xid)) {
            let c = stream.pop_front().expect("front exists");
            let at =
                c.commit_ts.ok_or_else(|| stop(format!("the change stream gave {:#x} no time", c.xid)))?;
            if txns[i].1.status != Status::Committed
                || logged[i].replace(at).is_some()
                || self.commits.last().is_some_and(|&last| at <= last)
            {
                return Err(stop(format!(
                    "the change stream commits {:#x} at {at}, which T{} did not record as one commit",
                    c.xid, txns[i].1.name
                )));
            }
            for &(obj, value) in &written[i] {
                self.versions.entry(obj).or_default().push((at, value));
            }
            self.commits.push(at);
        }
        if let Some(c) = stream.iter().find(|c| by_xid.contains_key(&c.xid)) {
            return Err(stop(format!(
                "the change stream commits {:#x} after a commit of no transaction recorded before it (another \
                 client, or a write outside a transaction)",
                c.xid
            )));
        }
        let low = self.low();
        let mut out = Vec::with_capacity(txns.len());
        for (i, ((_, txn), f)) in txns.iter().zip(&facts).enumerate() {
            if txn.status != Status::Committed {
                out.push(None);
                continue;
            }
            let label = format!("T{}", txn.name);
            if !written[i].is_empty() && logged[i].is_none() {
                return Err(stop(format!("{label} wrote, but the change stream has not carried its commit")));
            }
            let reads = item_reads(txn);
            let explains = |at: Timestamp| reads.iter().all(|&(obj, v)| self.visible(obj, at) == v);
            let start = match snapshot(f, &self.commits, explains) {
                Snapshot::Exact(at) => at,
                Snapshot::Placed { candidates, .. } if candidates.len() == 1 => candidates[0],
                Snapshot::Placed { candidates, .. } => {
                    // Several snapshots (or none) explain its item reads: recovery decides
                    // with its predicate reads, or marks what stays undecided.
                    return Err(stop(format!(
                        "{label}'s snapshot is only bracketed and {} positions in its bracket explain its item \
                         reads",
                        candidates.len()
                    )));
                }
                Snapshot::Unknown => {
                    return Err(stop(format!("{label} committed without a snapshot time or bracket")))
                }
            };
            let commit = logged[i].or(f.commit_ts.map(ClusterTime::timestamp)).unwrap_or(start);
            out.push(Some(self.highest.hand_out(&label, low, (start, commit))?));
        }
        Ok(out)
    }

    fn low(&self) -> Timestamp {
        self.highest.low()
    }
}
