//! Where each transaction's start and commit events fall in the simulated execution.
//!
//! The paper's visibility is `T1 VIS T2 iff T1.commit_ts <= T2.start_ts` and its arbitration
//! the commit-timestamp order. Events at one timestamp `t` therefore run in three groups:
//! first the commits of transactions that started before `t` (they are visible to
//! everything starting at `t`), then the transactions whose start and commit are both `t`
//! (read-only ones typically; each runs atomically, start then commit), then the starts of
//! transactions that commit later. Ties inside a group follow file (arrival) order. Under
//! serializability every transaction runs atomically at its commit timestamp.

use isocert_history::{KvHistory, Status, Timestamp, TxnId};

use crate::{CheckError, CheckerKind, IsolationLevel};

/// The group of an event at its timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Phase {
    /// Commit of a transaction that started earlier.
    Commit = 0,
    /// Start and commit of a transaction whose timestamps are equal (or any, under SER).
    Atomic = 1,
    /// Start of a transaction that commits later.
    Start = 2,
}

/// A point of the simulated execution: timestamp, group, file position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct EventKey {
    pub(crate) ts: Timestamp,
    pub(crate) phase: Phase,
    pub(crate) txn: u32,
}

impl EventKey {
    /// The smallest key at `ts` (before every event at that timestamp).
    pub(crate) fn floor(ts: Timestamp) -> Self {
        EventKey { ts, phase: Phase::Commit, txn: 0 }
    }

    /// The largest key at `ts` (after every event at that timestamp).
    pub(crate) fn ceil(ts: Timestamp) -> Self {
        EventKey { ts, phase: Phase::Start, txn: u32::MAX }
    }
}

/// The start and commit events of one checked transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: EventKey,
    pub(crate) commit: EventKey,
}

impl Span {
    /// Whether the transaction runs atomically (one event).
    pub(crate) fn is_atomic(self) -> bool {
        self.start.phase == Phase::Atomic
    }

    /// Whether two writers of one object are concurrent: neither committed before the other
    /// started. Two atomic transactions at one timestamp would each see the other, which no
    /// execution allows, so they conflict too.
    pub(crate) fn concurrent(self, other: Span) -> bool {
        if self.is_atomic() && other.is_atomic() && self.start.ts == other.start.ts {
            return self.start.txn != other.start.txn;
        }
        self.commit > other.start && other.commit > self.start
    }
}

/// Decides whether `t` is checked and, if so, its span.
///
/// # Errors
/// [`CheckError::MissingCertificateData`] for a committed transaction without timestamps,
/// [`CheckError::UnsupportedHistory`] for one that starts after it commits.
pub(crate) fn span_of(
    kv: &KvHistory,
    t: TxnId,
    level: IsolationLevel,
    checker: CheckerKind,
) -> Result<Option<Span>, CheckError> {
    let (start, commit) = match (kv.status(t), kv.start_ts(t), kv.commit_ts(t)) {
        (Status::Aborted, _, _) => return Ok(None),
        (_, Some(s), Some(c)) => (s, c),
        (Status::Unknown, _, _) => return Ok(None),
        (_, s, c) => {
            let missing = match (s, c) {
                (None, None) => "start_ts and commit_ts",
                (None, _) => "start_ts",
                _ => "commit_ts",
            };
            return Err(CheckError::MissingCertificateData {
                what: format!("{missing} on committed transaction {}", kv.txn_label(t)),
                level,
                checker,
            });
        }
    };
    if start > commit {
        return Err(CheckError::UnsupportedHistory {
            checker,
            what: format!(
                "{} starts after it commits (start_ts {start} > commit_ts {commit}); \
                 the timestamp checkers need start_ts <= commit_ts",
                kv.txn_label(t)
            ),
        });
    }
    let txn = t.0;
    Ok(Some(if start == commit || level == IsolationLevel::Serializable {
        let k = EventKey { ts: commit, phase: Phase::Atomic, txn };
        Span { start: k, commit: k }
    } else {
        Span {
            start: EventKey { ts: start, phase: Phase::Start, txn },
            commit: EventKey { ts: commit, phase: Phase::Commit, txn },
        }
    }))
}

/// The levels the timestamp checkers decide.
///
/// # Errors
/// [`CheckError::UnsupportedLevel`] for levels below snapshot isolation.
pub(crate) fn supported(level: IsolationLevel, checker: CheckerKind) -> Result<(), CheckError> {
    match level {
        IsolationLevel::SnapshotIsolation | IsolationLevel::Serializable => Ok(()),
        _ => Err(CheckError::UnsupportedLevel {
            checker,
            level,
            hint: "Chronos and Aion decide snapshot-isolation and serializable; use --checker emme",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ts: u64, phase: Phase, txn: u32) -> EventKey {
        EventKey { ts: Timestamp::new(ts), phase, txn }
    }

    #[test]
    fn commits_precede_atomic_runs_precede_starts_at_one_timestamp() {
        let mut keys = [
            key(5, Phase::Start, 0),
            key(5, Phase::Atomic, 9),
            key(5, Phase::Commit, 7),
            key(4, Phase::Start, 8),
        ];
        keys.sort();
        let phases: Vec<_> = keys.iter().map(|k| (k.ts.wall, k.phase)).collect();
        assert_eq!(phases, [(4, Phase::Start), (5, Phase::Commit), (5, Phase::Atomic), (5, Phase::Start)]);
        assert!(EventKey::floor(Timestamp::new(5)) <= key(5, Phase::Commit, 0));
        assert!(EventKey::floor(Timestamp::new(5)) > key(4, Phase::Start, 9));
        assert!(EventKey::ceil(Timestamp::new(5)) > key(5, Phase::Start, 3));
    }

    #[test]
    fn concurrency_follows_visibility() {
        let span = |s, c, t| {
            if s == c {
                let k = key(s, Phase::Atomic, t);
                Span { start: k, commit: k }
            } else {
                Span { start: key(s, Phase::Start, t), commit: key(c, Phase::Commit, t) }
            }
        };
        assert!(span(1, 5, 0).concurrent(span(3, 8, 1)));
        assert!(!span(1, 5, 0).concurrent(span(5, 8, 1)), "commit == start is visible");
        assert!(!span(1, 5, 0).concurrent(span(5, 5, 1)));
        assert!(span(5, 5, 0).concurrent(span(5, 5, 1)), "two atomic writers at one timestamp");
        assert!(!span(1, 5, 0).concurrent(span(5, 5, 1)), "the atomic one starts after the commit");
    }
}
