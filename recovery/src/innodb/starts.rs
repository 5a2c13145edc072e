//! Where each committed MariaDB transaction starts and commits in the binary log, and its
//! ticks: the one rule offline recovery ([`super::recover_innodb`], the whole history one
//! group) and the live rule ([`super::InnoDbLiveTicks`], one group per cut) both apply,
//! transaction by transaction in record order.
//!
//! A transaction's positions depend only on the log up to its own commit (or the GTID it
//! read before COMMIT), on the commits acknowledged before it began and on its session's
//! earlier transactions, so a rule fed a prefix of the history with the log up to the
//! prefix's end gives every transaction of the prefix what the whole history gives it.

use isocert_history::{RealTime, SessionId};
use rustc_hash::FxHashMap;

use super::facts::{binlog_key_text, gtid_seq, InnoDbTxnFacts};
use super::placement::PositionSet;
use crate::{CommittedTxn, RecoveryError};

/// The log's positions so far, for locating GTIDs and binary-log offsets among its
/// transactions (position `p`: the first `p` logged transactions have committed).
#[derive(Debug, Default)]
pub(super) struct Positions {
    seqs: Vec<u64>,
    ends: Vec<u64>,
}

impl Positions {
    /// The positions of `log`'s transactions, in log order.
    pub(super) fn new<'a>(log: impl IntoIterator<Item = &'a CommittedTxn>) -> Self {
        let mut p = Positions::default();
        log.into_iter().for_each(|t| p.push(t));
        p
    }

    /// Appends the next logged transaction.
    pub(super) fn push(&mut self, t: &CommittedTxn) {
        self.seqs.push(t.xid);
        self.ends.push(t.end_lsn);
    }

    /// How many logged transactions have a GTID sequence number at most `seq`.
    pub(super) fn after_gtid(&self, seq: u64) -> usize {
        self.seqs.partition_point(|&s| s <= seq)
    }

    /// How many logged transactions end at or before binary-log position `key`.
    pub(super) fn after_end(&self, key: u64) -> usize {
        self.ends.partition_point(|&e| e <= key)
    }

    /// How many transactions are logged.
    pub(super) fn len(&self) -> usize {
        self.seqs.len()
    }
}

/// The client's acknowledged commits in real time: a transaction that began after a commit
/// was acknowledged sees it (InnoDB makes a commit visible before acknowledging it).
#[derive(Debug, Default)]
pub(super) struct AcknowledgedCommits {
    /// `(completed_at, log position after the commit)`, by `completed_at`, the position
    /// replaced by the running maximum.
    by_completion: Vec<(i64, usize)>,
}

impl AcknowledgedCommits {
    /// Adds commits, each `(completed_at, its log position)`. Later groups complete after
    /// earlier ones (a cut lies between), so they append; anything else is merged.
    pub(super) fn add(&mut self, commits: impl IntoIterator<Item = (i64, usize)>) {
        let mut new: Vec<(i64, usize)> = commits.into_iter().map(|(done, pos)| (done, pos + 1)).collect();
        new.sort_unstable();
        let from = match (self.by_completion.last(), new.first()) {
            (Some(last), Some(first)) if first.0 < last.0 => {
                // Out of completion order: merge and recompute the running maximum.
                for entry in &mut self.by_completion {
                    entry.1 = 0;
                }
                self.by_completion.extend(new);
                self.by_completion.sort_unstable();
                0
            }
            _ => {
                let from = self.by_completion.len();
                self.by_completion.extend(new);
                from
            }
        };
        let mut highest = from.checked_sub(1).map_or(0, |k| self.by_completion[k].1);
        for entry in &mut self.by_completion[from..] {
            highest = highest.max(entry.1);
            entry.1 = highest;
        }
    }

    /// The least snapshot position a transaction invoked at `real_time` can have: after
    /// every commit acknowledged before it was invoked (0 without real time).
    pub(super) fn floor(&self, real_time: Option<RealTime>) -> usize {
        let Some(rt) = real_time else { return 0 };
        let k = self.by_completion.partition_point(|&(done, _)| done < rt.invoked_at);
        k.checked_sub(1).map_or(0, |k| self.by_completion[k].1)
    }
}

/// One committed transaction's positions and ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Placed {
    /// Its consistent snapshot's position, placed (REPEATABLE READ) or as reported.
    pub(super) snapshot: Option<usize>,
    /// The least position its reads could see without a snapshot (start GTID, or the
    /// reported snapshot), at most `end`.
    pub(super) start: usize,
    /// Its commit point: its own log position, or where its GTID before COMMIT puts it.
    pub(super) end: usize,
    /// Whether `end` is known (not merely the log's end).
    pub(super) commit_point_known: bool,
    /// Its `(start, commit)` ticks: start `2p + 1` at snapshot position `p` (at SERIALIZABLE,
    /// whose reads all lock, its commit point), commit `2q + 2` at log position `q` (the
    /// start tick for a transaction that wrote nothing).
    pub(super) ticks: (u64, u64),
}

/// A committed transaction to place.
#[derive(Clone, Copy, Debug)]
pub(super) struct Committed<'a> {
    /// Its session's facts.
    pub(super) facts: &'a InnoDbTxnFacts,
    /// Its session.
    pub(super) session: SessionId,
    /// Its position in the log, if it wrote.
    pub(super) own_pos: Option<usize>,
    /// The floor of the commits acknowledged before it began.
    pub(super) acknowledged: usize,
}

/// The state the rule carries from one transaction to the next: each session's floor and
/// how many reported snapshot positions were moved.
#[derive(Debug, Default)]
pub(super) struct Starts {
    /// Per session, the position its last committed transaction's successor must start at
    /// or after (snapshot isolation with session order).
    session_floor: FxHashMap<SessionId, usize>,
    /// Reported positions the transaction's facts rule out.
    pub(super) contradicted: usize,
    /// Reported positions where snapshot isolation fails but not at another its reads allow.
    pub(super) unprovable: usize,
}

impl Starts {
    /// Places committed transaction `txn` among `positions`. `whole_log`: the length of the whole log, for a transaction that wrote
    /// nothing and recorded no GTID before COMMIT (`None` while the log is still growing:
    /// an error). `placement(reported, floor, end)` places a REPEATABLE READ snapshot and
    /// returns the positions its reads allow.
    ///
    /// # Errors
    /// [`RecoveryError::Live`] when the commit point needs the whole log; `placement`'s.
    pub(super) fn place(
        &mut self,
        positions: &Positions,
        whole_log: Option<usize>,
        txn: Committed<'_>,
        placement: impl FnOnce(usize, usize, usize) -> Result<(usize, PositionSet), RecoveryError>,
    ) -> Result<Placed, RecoveryError> {
        let Committed { facts, session, own_pos, acknowledged } = txn;
        let mut snapshot =
            facts.snapshot.as_deref().and_then(binlog_key_text).map(|k| positions.after_end(k));
        let start = match snapshot {
            Some(p) => p,
            None => facts.start_gtid.as_deref().and_then(gtid_seq).map_or(0, |s| positions.after_gtid(s)),
        };
        let end =
            match (own_pos, facts.before_commit_gtid.as_deref().and_then(gtid_seq), whole_log) {
                (Some(p), _, _) => p,
                (None, Some(s), _) => positions.after_gtid(s),
                (None, None, Some(len)) => len,
                (None, None, None) => return Err(RecoveryError::Live {
                    message:
                        "a transaction that wrote nothing recorded no GTID before COMMIT: only the whole log \
                              bounds what it read"
                            .into(),
                }),
            };
        let commit_point_known = own_pos.is_some() || facts.before_commit_gtid.is_some();
        if let (Some(reported), "repeatable-read") = (snapshot, facts.isolation.as_str()) {
            let floor = self.session_floor.get(&session).copied().unwrap_or(0).max(acknowledged);
            let (placed, allowed) = placement(reported, floor, end)?;
            if placed != reported {
                if allowed.contains(reported) {
                    self.unprovable += 1;
                } else {
                    self.contradicted += 1;
                }
            }
            snapshot = Some(placed);
        }
        let start_pos = match facts.isolation.as_str() {
            // Every read at SERIALIZABLE is a locking read, holding its locks until commit:
            // it saw the newest versions at the commit point, whatever snapshot the
            // transaction also took (its reads never used it).
            "serializable" if commit_point_known => end,
            _ => snapshot.unwrap_or(start.min(end)),
        };
        let start_ts = 2 * start_pos as u64 + 1;
        self.session_floor.insert(session, own_pos.map_or(start_pos, |p| p + 1));
        Ok(Placed {
            snapshot,
            start,
            end,
            commit_point_known,
            ticks: (start_ts, own_pos.map_or(start_ts, |p| 2 * p as u64 + 2)),
        })
    }
}
