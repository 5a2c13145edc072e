//! MariaDB's ticks while the workload runs ([`InnoDbLiveTicks`], docs/ONLINE.md): the
//! rule of [`super::recover_innodb`] fed one cut's group at a time.
//!
//! A group's transactions all committed before the cut, so their log positions, the
//! commits acknowledged before each began and their sessions' earlier transactions are all
//! in the log and the history up to the cut. A REPEATABLE READ snapshot is placed within
//! `floor..=end` (`end`: its own commit, or the GTID it read before COMMIT), and a version
//! committed after the cut is visible only after `end`, so it changes no placement: each
//! transaction gets the positions, ticks and moves (counted as recovery's warnings count
//! them) that the whole history gives it.
//!
//! The rule has the run's transactions, not its history: a version's value is its writer's
//! recorded write (recovery checks it against the log's row image and takes the logged
//! one, the same value), the initial versions come from [`LiveTicks::initial`]. So it
//! takes item reads and writes (deletes included), which name their versions by value, and
//! stops at an append (the list it leaves is the log's) or a predicate operation (the
//! oracle needs the history).

use std::collections::VecDeque;

use isocert_history::{
    IsolationLevel, ObjId, Op, SerialOrder, Status, Timestamp, Transaction, TxnId, ValueId, Writer,
};
use rustc_hash::FxHashMap;

use super::facts::{gtid_seq, read_txn};
use super::starts::{AcknowledgedCommits, Committed, Positions, Starts};
use super::{placement, read_evidence, Version};
use crate::live::stop;
use crate::matching::record_own_writes;
use crate::{CommittedTxn, LiveTicks, RecoveryError};

/// MariaDB's ticks ([`super::recover_innodb`]'s: binary-log positions, REPEATABLE READ
/// snapshots placed by the transactions' reads), group by group.
#[derive(Debug, Default)]
pub struct InnoDbLiveTicks {
    positions: Positions,
    acknowledged: AcknowledgedCommits,
    starts: Starts,
    initial: FxHashMap<ObjId, ValueId>,
    /// Per object, its versions so far: the initial one, then one per logged writer.
    versions: FxHashMap<ObjId, Vec<Version>>,
    /// The lowest tick promised to later groups (the last watermark).
    low: u64,
}

impl InnoDbLiveTicks {
    /// Ticks from the run's first logged transaction, as recovery numbers them.
    pub fn new() -> InnoDbLiveTicks {
        InnoDbLiveTicks { low: 1, ..InnoDbLiveTicks::default() }
    }

    /// How many reported REPEATABLE READ positions the facts ruled out, and how many were
    /// moved off a position where only snapshot isolation failed (recovery's warnings).
    pub fn moved(&self) -> (usize, usize) {
        (self.starts.contradicted, self.starts.unprovable)
    }

    fn versions_mut(&mut self, obj: ObjId) -> &mut Vec<Version> {
        let initial = self.initial.get(&obj).copied().unwrap_or(ValueId::ABSENT);
        self.versions
            .entry(obj)
            .or_insert_with(|| vec![Version { pos: None, writer: Writer::Initial, value: initial }])
    }
}

impl LiveTicks for InnoDbLiveTicks {
    fn serial_order(&self, level: IsolationLevel) -> SerialOrder {
        crate::timestamp_order::commit_order_if_serializable([level.as_str()])
    }

    fn initial(&mut self, initial: &[(ObjId, ValueId)]) {
        self.initial = initial.iter().copied().collect();
        // Recovery lists every object with an initial version, written or not.
        for &(obj, _) in initial {
            self.versions_mut(obj);
        }
    }

    fn group(
        &mut self,
        txns: &[(TxnId, &Transaction)],
        stream: &mut VecDeque<CommittedTxn>,
    ) -> Result<Vec<Option<(Timestamp, Timestamp)>>, RecoveryError> {
        let facts: Vec<_> = txns.iter().map(|(_, t)| read_txn(t)).collect::<Result<_, _>>()?;
        let mut by_seq: FxHashMap<u64, usize> = FxHashMap::default();
        for (i, ((_, txn), f)) in txns.iter().zip(&facts).enumerate() {
            let label = format!("T{}", txn.name);
            match txn.status {
                Status::Unknown => {
                    return Err(stop(format!(
                    "{label}'s commit outcome is unknown (its connection was lost during COMMIT): only the \
                         whole binary log settles it"
                )))
                }
                Status::Aborted => continue,
                Status::Committed => {}
            }
            if txn.real_time().is_none() {
                return Err(stop(format!("{label} has no real time: later snapshots cannot be bounded")));
            }
            if let Some(k) = txn.ops.iter().position(|op| !matches!(op, Op::Read { .. } | Op::Write { .. })) {
                return Err(stop(format!(
                    "{label} op {k} is neither an item read nor an item write: live MariaDB ticks take only \
                     those (an append's list is the log's, a predicate needs the history's oracle)"
                )));
            }
            if let Some(seq) = f.gtid.as_deref().and_then(gtid_seq) {
                by_seq.insert(seq, i);
            }
        }
        let mut own_pos: Vec<Option<usize>> = vec![None; txns.len()];
        while let Some(i) = stream.front().and_then(|c| by_seq.get(&c.xid).copied()) {
            let c = stream.pop_front().expect("front exists");
            if own_pos[i].is_some() {
                return Err(stop(format!("the binary log commits GTID {} twice", c.xid)));
            }
            let pos = self.positions.len();
            self.positions.push(&c);
            own_pos[i] = Some(pos);
            let (id, txn) = txns[i];
            let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
            txn.ops.iter().for_each(|op| record_own_writes(op, &mut own));
            let mut written: Vec<(ObjId, ValueId)> = own.into_iter().collect();
            written.sort_unstable();
            for (obj, value) in written {
                self.versions_mut(obj).push(Version { pos: Some(pos), writer: Writer::Txn(id), value });
            }
        }
        if let Some(c) = stream.iter().find(|c| by_seq.contains_key(&c.xid)) {
            return Err(stop(format!(
                "the binary log commits GTID {} after a commit of no transaction recorded before it",
                c.xid
            )));
        }
        for (i, (_, txn)) in txns.iter().enumerate() {
            // Recovery refuses a recorded write the log lacks.
            if txn.is_committed()
                && own_pos[i].is_none()
                && txn.ops.iter().any(|op| matches!(op, Op::Write { .. }))
            {
                return Err(stop(format!(
                    "T{} wrote, but the binary log up to the cut has no commit of it",
                    txn.name
                )));
            }
        }
        self.acknowledged.add(
            txns.iter()
                .zip(&own_pos)
                .filter_map(|((_, txn), pos)| Some((txn.real_time()?.completed_at, (*pos)?))),
        );
        let mut out = Vec::with_capacity(txns.len());
        for (i, ((id, txn), f)) in txns.iter().zip(&facts).enumerate() {
            if !txn.is_committed() {
                out.push(None);
                continue;
            }
            let versions = &self.versions;
            let placed = self.starts.place(
                &self.positions,
                None,
                Committed {
                    facts: f,
                    session: txn.session,
                    own_pos: own_pos[i],
                    acknowledged: self.acknowledged.floor(txn.real_time()),
                },
                |reported, floor, end| {
                    let evidence = read_evidence(
                        txn,
                        *id,
                        |obj| versions.get(&obj).map(Vec::as_slice).unwrap_or(&[]),
                        |_| &[],
                        floor,
                        end,
                    )?;
                    let required = placement::PositionSet::between(evidence.lowest, end);
                    Ok((placement::place(reported, &evidence.read, &required), evidence.read))
                },
            )?;
            let (start, commit) = placed.ticks;
            if start < self.low || commit < self.low {
                return Err(stop(format!(
                    "T{} starts at tick {start} (its snapshot position as MariaDB reported it, which its reads \
                     do not place), below the watermark {} already published",
                    txn.name, self.low
                )));
            }
            out.push(Some((Timestamp::new(start), Timestamp::new(commit))));
        }
        self.low = 2 * self.positions.len() as u64 + 1;
        Ok(out)
    }

    fn low(&self) -> Timestamp {
        Timestamp::new(self.low)
    }
}

#[cfg(test)]
mod tests;
