//! Ticks while the workload runs: a recovery rule fed the run in closed groups of
//! transactions, each group's ticks final when it is fed (docs/ONLINE.md, "Publishing from
//! `isocert run`").
//!
//! A *cut* is a moment when no transaction of the run is in flight (the test client holds
//! its sessions back for it). A group is every transaction recorded since the previous cut,
//! with the stream's commits of those transactions. Everything a group's transactions did
//! precedes everything later ones do, so a rule that numbers snapshots and commits can
//! number each group for good before the next one exists.

use std::collections::VecDeque;
use std::fmt;

use isocert_history::{IsolationLevel, SerialOrder, Timestamp, Transaction, TxnId};
use rustc_hash::FxHashMap;

use crate::postgres::facts::{read_txn_facts, TxnFacts};
use crate::postgres::timeline::{TickTxn, Ticker};
use crate::{CommittedTxn, RecoveryError};

/// The error that stops live publishing (the rest is published after recovery).
pub(crate) fn stop(message: String) -> RecoveryError {
    RecoveryError::Live { message }
}

/// The watermark of a rule that hands out a database's own timestamps (Dgraph's, TiDB's,
/// CockroachDB's, MongoDB's): the highest timestamp handed out so far, as start or commit.
/// A transaction that began after a cut reads above it where one oracle issues every
/// timestamp; one that does not stops live publishing, so that a mark is never wrong.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HighestTimestamp(Option<Timestamp>);

impl HighestTimestamp {
    /// The watermark: the lowest timestamp a later group may hand out.
    pub(crate) fn low(self) -> Timestamp {
        self.0.unwrap_or(Timestamp::new(0))
    }

    /// Hands out `(start, commit)` to transaction `label` of a group whose watermark before
    /// it was `low`, and returns them.
    ///
    /// # Errors
    /// [`RecoveryError::Live`] for a start below `low`.
    pub(crate) fn hand_out(
        &mut self,
        label: &str,
        low: Timestamp,
        (start, commit): (Timestamp, Timestamp),
    ) -> Result<(Timestamp, Timestamp), RecoveryError> {
        if start < low {
            return Err(stop(format!(
                "{label} reads at {start}, below the watermark {low} already published"
            )));
        }
        let top = commit.max(start);
        self.0 = Some(self.0.map_or(top, |h| h.max(top)));
        Ok((start, commit))
    }
}

/// The start and commit ticks of a group's transactions, as they will be in the recovered
/// history: what a database's incremental rule gives a live run (`isocert run --emit`).
pub trait LiveTicks: Send + fmt::Debug {
    /// Numbers the group `txns` (every transaction recorded since the last cut, in record
    /// order, each with its id in the run's history) whose stream commits are at the front
    /// of `stream` (the stream's commits in order, taken by the rule as it matches them;
    /// commits of later groups may follow). Returns, per transaction of the group, its final
    /// `(start, commit)`, or `None` for one that gets no ticks (aborted, or committed
    /// without a snapshot: nothing to check).
    ///
    /// # Errors
    /// [`RecoveryError::Live`] when the group cannot be numbered for good (an outcome only
    /// the whole log settles, a stream commit that belongs to no group); malformed facts.
    fn group(
        &mut self,
        txns: &[(TxnId, &Transaction)],
        stream: &mut VecDeque<CommittedTxn>,
    ) -> Result<Vec<Option<(Timestamp, Timestamp)>>, RecoveryError>;

    /// The lowest tick any later group can give a transaction, as start or commit (the
    /// producer's watermark).
    fn low(&self) -> Timestamp;

    /// The history's initial versions, before the first group (a rule that tells versions
    /// by value needs them). Default: not needed.
    fn initial(&mut self, initial: &[(isocert_history::ObjId, isocert_history::ValueId)]) {
        let _ = initial;
    }

    /// Whether [`LiveTicks::group`] needs the change stream's commits up to the cut
    /// (`ChangeCapture::take_committed`). Default: yes; a rule that takes the timestamps the
    /// sessions recorded needs none.
    fn needs_stream(&self) -> bool {
        true
    }

    /// The serial order recovery records for a run at `level` (the history's
    /// `serial_order`), which the header published before the first group promises.
    /// Default: unknown (the ticks order snapshots, not the serialization).
    fn serial_order(&self, level: IsolationLevel) -> SerialOrder {
        let _ = level;
        SerialOrder::Unknown
    }
}

/// PostgreSQL's ticks ([`crate::recover_postgres`]'s: the order of snapshots and of the
/// commits they see), group by group: each group's ticks equal those recovery gives the
/// whole history, because every snapshot after a cut sees every commit before it and
/// every xid assigned after it is above every earlier snapshot's `xmax`.
#[derive(Debug, Default)]
pub struct PgLiveTicks {
    ticker: Ticker,
    start: Vec<Option<u64>>,
    commit: Vec<Option<u64>>,
    /// Stream commits taken so far (the next one's position in the whole stream).
    taken: u32,
}

impl PgLiveTicks {
    /// Ticks from 1, as recovery numbers them.
    pub fn new() -> PgLiveTicks {
        PgLiveTicks { ticker: Ticker::new(), ..PgLiveTicks::default() }
    }
}

impl LiveTicks for PgLiveTicks {
    fn group(
        &mut self,
        txns: &[(TxnId, &Transaction)],
        stream: &mut VecDeque<CommittedTxn>,
    ) -> Result<Vec<Option<(Timestamp, Timestamp)>>, RecoveryError> {
        let facts: Vec<TxnFacts> = txns.iter().map(|(_, t)| read_txn_facts(t)).collect::<Result<_, _>>()?;
        // The stream carries 32-bit xids; the client records full 64-bit ones.
        let mut by_xid: FxHashMap<u64, usize> = FxHashMap::default();
        for (i, ((_, txn), f)) in txns.iter().zip(&facts).enumerate() {
            if txn.status == isocert_history::Status::Unknown {
                return Err(RecoveryError::Live {
                    message: format!(
                        "T{}'s commit outcome is unknown (its connection was lost during COMMIT): only the \
                         whole stream settles it",
                        txn.name
                    ),
                });
            }
            if let Some(x) = f.xid {
                by_xid.insert(u64::from(x as u32), i);
            }
        }
        let mut stream_pos: Vec<Option<u32>> = vec![None; txns.len()];
        while let Some(i) = stream.front().and_then(|c| by_xid.get(&u64::from(c.xid as u32)).copied()) {
            let c = stream.pop_front().expect("front exists");
            let (_, txn) = txns[i];
            if !txn.is_committed() || stream_pos[i].is_some() {
                return Err(RecoveryError::Live {
                    message: format!(
                        "the stream commits xid {} of T{}, which the client did not see commit",
                        c.xid, txn.name
                    ),
                });
            }
            stream_pos[i] = Some(self.taken);
            self.taken += 1;
        }
        if let Some(c) = stream.iter().find(|c| by_xid.contains_key(&u64::from(c.xid as u32))) {
            return Err(RecoveryError::Live {
                message: format!(
                    "the stream commits xid {} after a commit of no transaction recorded before it",
                    c.xid
                ),
            });
        }
        let ticked: Vec<TickTxn<'_>> = txns
            .iter()
            .zip(&facts)
            .zip(&stream_pos)
            .filter(|(((_, txn), _), _)| txn.is_committed())
            .map(|(((id, txn), f), pos)| TickTxn {
                id: *id,
                label: format!("T{}", txn.name),
                logged_xid: pos.and(f.xid),
                stream_pos: *pos,
                snapshots: f.snapshots().collect(),
            })
            .collect();
        self.ticker.add(&ticked, &mut self.start, &mut self.commit);
        self.ticker.close(&mut self.commit);
        if let Some(conflict) = self.ticker.conflicts.first() {
            // Recovery warns and keeps the first order it found; live ticks cannot promise
            // that order is final.
            return Err(RecoveryError::Live {
                message: format!("snapshots that are not nested: {conflict}"),
            });
        }
        Ok(txns
            .iter()
            .map(|(id, txn)| {
                let i = id.index();
                match (
                    txn.is_committed(),
                    self.start.get(i).copied().flatten(),
                    self.commit.get(i).copied().flatten(),
                ) {
                    (true, Some(s), Some(c)) => Some((Timestamp::new(s), Timestamp::new(c))),
                    _ => None,
                }
            })
            .collect())
    }

    fn low(&self) -> Timestamp {
        Timestamp::new(self.ticker.low())
    }
}

#[cfg(test)]
mod tests {
    use isocert_history::{v1, Scalar};

    use super::*;
    use crate::{recover_postgres, RawLog, RowChange};

    /// Two groups split at a cut: the first one's commits reach the stream in another
    /// order than their visibility (T2's snapshot sees xid 100 and not 101, which the
    /// stream carries first), and T3 commits in the second group.
    const TEXT: &str = r#"{"id":0,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}
{"id":1,"session":1,"ops":[{"f":"w","key":2,"value":20}],"meta":{"xid":101,"snapshot":"100:100:"}}
{"id":2,"session":2,"ops":[{"f":"r","key":1,"value":10}],"meta":{"xid":null,"snapshot":"101:102:101"}}
{"id":3,"session":0,"ops":[{"f":"r","key":2,"value":20},{"f":"w","key":1,"value":11}],"meta":{"xid":102,"snapshot":"102:102:"}}
{"id":4,"session":1,"ops":[{"f":"r","key":1,"value":10}],"meta":{"xid":null,"snapshot":"102:103:102"}}
{"id":5,"session":2,"status":"aborted","ops":[{"f":"w","key":2,"value":21}],"meta":{"xid":103,"snapshot":"102:103:102"}}
"#;

    fn commit(xid: u64, lsn: u64, key: i64, value: i64) -> CommittedTxn {
        CommittedTxn {
            xid,
            commit_lsn: lsn,
            end_lsn: lsn + 1,
            commit_time: 0,
            commit_ts: None,
            changes: vec![RowChange {
                table: "kv".into(),
                key: Scalar::Int(key),
                row: Some(vec![("key".into(), Scalar::Int(key)), ("value".into(), Scalar::Int(value))]),
            }],
        }
    }

    fn stream() -> Vec<CommittedTxn> {
        vec![commit(101, 10, 2, 20), commit(100, 20, 1, 10), commit(102, 30, 1, 11)]
    }

    /// Group by group, the ticks are those recovery gives the whole history.
    #[test]
    fn groups_get_the_ticks_of_the_whole_history() {
        let mut whole = v1::read_history(TEXT.as_bytes()).unwrap();
        let mut log = RawLog::new();
        for c in stream() {
            log.push(c);
        }
        recover_postgres(&mut whole, &log, &|_, _, _, _| Ok(true)).unwrap();
        let h = v1::read_history(TEXT.as_bytes()).unwrap();
        let mut rule = PgLiveTicks::new();
        let mut pending: VecDeque<CommittedTxn> = stream().into_iter().take(2).collect();
        let mut got = Vec::new();
        for (group, more) in [(0..3, 2..3), (3..6, 0..0)] {
            let txns: Vec<(TxnId, &Transaction)> =
                group.map(|i| (TxnId::from_index(i), &h.txns[i])).collect();
            got.extend(rule.group(&txns, &mut pending).unwrap());
            assert!(pending.is_empty());
            pending.extend(stream().drain(more));
        }
        let want: Vec<Option<(Timestamp, Timestamp)>> =
            whole.txns.iter().map(|t| t.start_ts().zip(t.commit_ts())).collect();
        assert_eq!(got, want);
        assert!(want[0].unwrap().1 < want[1].unwrap().1, "T0 visible before T1 though streamed after");
        assert_eq!(got[5], None, "aborted");
    }

    /// An unknown outcome, and a stream commit of a transaction recorded after a commit of
    /// nobody's, stop live ticks.
    #[test]
    fn what_only_the_whole_log_settles_is_refused() {
        let text = TEXT.replace(r#""id":1,"session":1,"#, r#""id":1,"session":1,"status":"unknown","#);
        let h = v1::read_history(text.as_bytes()).unwrap();
        let txns: Vec<(TxnId, &Transaction)> = (0..3).map(|i| (TxnId::from_index(i), &h.txns[i])).collect();
        let e = PgLiveTicks::new().group(&txns, &mut stream().into_iter().collect()).unwrap_err();
        assert!(e.to_string().contains("outcome is unknown"), "{e}");
        let h = v1::read_history(TEXT.as_bytes()).unwrap();
        let txns: Vec<(TxnId, &Transaction)> = (0..3).map(|i| (TxnId::from_index(i), &h.txns[i])).collect();
        let mut foreign: VecDeque<CommittedTxn> = stream().into_iter().take(2).collect();
        foreign.push_front(commit(99, 5, 3, 30));
        let e = PgLiveTicks::new().group(&txns, &mut foreign).unwrap_err();
        assert!(e.to_string().contains("no transaction recorded"), "{e}");
    }
}
