//! Start and commit timestamps consistent with what every snapshot saw.
//!
//! PostgreSQL publishes commits one at a time (a committing backend leaves the ProcArray
//! under an exclusive lock), so the sets of committed writers that any two snapshots see
//! are nested. Sorting snapshots by how many committed writers they see therefore yields
//! one total order of "commit becomes visible" and "snapshot taken" events; numbering those
//! events gives each transaction a start timestamp (its first snapshot) and a commit
//! timestamp (the moment its commit became visible) such that writer `W` is visible to
//! snapshot `S` exactly when `commit_ts(W) < start_ts(S)`.

use std::collections::BTreeMap;

use isocert_history::{History, Timestamp, TxnId};
use rustc_hash::FxHashSet;

use super::facts::TxnFacts;
use crate::matching::Matched;
use crate::PgSnapshot;

/// The timestamps derived for every transaction, and the snapshots that broke nesting.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// Per transaction, the tick of its first snapshot.
    pub(crate) start: Vec<Option<u64>>,
    /// Per transaction, the tick its commit became visible (writers) or its last snapshot's
    /// tick (read-only transactions).
    pub(crate) commit: Vec<Option<u64>>,
    /// Human descriptions of snapshots that are not nested (a long fork), at most a few.
    pub(crate) conflicts: Vec<String>,
}

const MAX_CONFLICTS: usize = 10;

/// One committed transaction as the tick rule sees it: its xid if its commit is in the
/// stream (a writer), its position in the stream, and its snapshots in program order.
pub(crate) struct TickTxn<'a> {
    pub(crate) id: TxnId,
    pub(crate) label: String,
    /// The xid of a transaction whose commit the stream carries (`None`: read-only).
    pub(crate) logged_xid: Option<u64>,
    pub(crate) stream_pos: Option<u32>,
    pub(crate) snapshots: Vec<&'a PgSnapshot>,
}

/// The numbering of snapshots and visible commits, fed one closed group of transactions
/// at a time ([`Ticker::add`], then [`Ticker::close`]).
///
/// [`build`] feeds the whole history as one group. A live run feeds the transactions
/// recorded before each moment when none was in flight (a *cut*), each group's stream
/// commits included: every snapshot taken after a cut sees every commit before it, and
/// every xid assigned after it is above every earlier snapshot's `xmax`, so later
/// snapshots sort after (or tie with, and follow by transaction id) every earlier one and
/// each group's ticks are those the whole history gets (docs/ONLINE.md).
#[derive(Debug, Default)]
pub(crate) struct Ticker {
    /// Committed writers known so far, by xid.
    committed: Vec<(u64, TxnId)>,
    /// Writers no snapshot has seen yet: xid to (stream position, transaction).
    unassigned: BTreeMap<u64, (u32, TxnId)>,
    assigned: FxHashSet<u64>,
    max_assigned: Option<u64>,
    last_snapshot_tick: Option<u64>,
    next: u64,
    pub(crate) conflicts: Vec<String>,
}

impl Ticker {
    /// A numbering from tick 1.
    pub(crate) fn new() -> Ticker {
        Ticker { next: 1, ..Ticker::default() }
    }

    /// The lowest tick any transaction fed later can get as its start or commit.
    pub(crate) fn low(&self) -> u64 {
        self.last_snapshot_tick.unwrap_or(self.next)
    }

    /// Numbers one group's snapshots and the commits they see; `start` and `commit` are
    /// indexed by transaction id and grow as needed.
    pub(crate) fn add(
        &mut self,
        txns: &[TickTxn<'_>],
        start: &mut Vec<Option<u64>>,
        commit: &mut Vec<Option<u64>>,
    ) {
        for t in txns {
            if let (Some(x), Some(pos)) = (t.logged_xid, t.stream_pos) {
                self.committed.push((x, t.id));
                self.unassigned.insert(x, (pos, t.id));
            }
        }
        self.committed.sort_unstable();
        let committed = &self.committed;
        let is_committed = |x: u64| committed.binary_search_by_key(&x, |(c, _)| *c).is_ok();
        // Every snapshot with the number of committed writers it sees.
        let mut snaps: Vec<(usize, &TickTxn<'_>, &PgSnapshot)> = Vec::new();
        for t in txns {
            // PostgreSQL leaves a transaction's own xid out of its snapshots' running list:
            // its commit is not visible to them even though the xid is below xmax.
            let own = t.logged_xid.filter(|x| *x < u64::MAX);
            for s in &t.snapshots {
                let below = committed.partition_point(|(x, _)| *x < s.xmax);
                let hidden = s.xip.iter().filter(|x| is_committed(**x)).count();
                let own_hidden = own.is_some_and(|x| s.sees(x));
                snaps.push((below - hidden - usize::from(own_hidden), t, s));
            }
        }
        snaps.sort_by_key(|(size, t, _)| (*size, t.id));
        let mut fresh: Vec<(u32, u64, TxnId)> = Vec::new();
        let grow = |v: &mut Vec<Option<u64>>, i: usize| {
            if v.len() <= i {
                v.resize(i + 1, None);
            }
        };
        for (_, t, s) in &snaps {
            let own = t.logged_xid.filter(|x| *x < u64::MAX);
            let sees = |x: u64| s.sees(x) && Some(x) != own;
            if self.conflicts.len() < MAX_CONFLICTS {
                let hidden_old = s.xip.iter().chain(own.iter()).find(|x| self.assigned.contains(x)).copied();
                let beyond = self.max_assigned.filter(|x| *x >= s.xmax);
                if let Some(x) = hidden_old.or(beyond) {
                    self.conflicts.push(format!(
                        "{}'s snapshot {s} does not see xid {x}, which a snapshot seeing fewer commits saw",
                        t.label
                    ));
                }
            }
            fresh.clear();
            fresh.extend(
                self.unassigned.range(..s.xmax).filter(|(x, _)| sees(**x)).map(|(x, (p, w))| (*p, *x, *w)),
            );
            fresh.sort_unstable();
            for &(_, x, w) in &fresh {
                self.unassigned.remove(&x);
                self.assign(x, w, commit);
            }
            let tick = match self.last_snapshot_tick {
                Some(tick) => tick,
                None => {
                    let tick = self.next;
                    self.next += 2;
                    self.last_snapshot_tick = Some(tick);
                    tick
                }
            };
            let i = t.id.index();
            grow(start, i);
            let first = start[i].get_or_insert(tick);
            *first = (*first).min(tick);
            if t.stream_pos.is_none() {
                // A read-only transaction commits nothing anyone can see: its commit is placed
                // at its last snapshot, so a session successor taking the same snapshot starts
                // no earlier than it committed (at tick + 1 it seemed to break session order).
                grow(commit, i);
                let last = commit[i].get_or_insert(tick);
                *last = (*last).max(tick);
            }
        }
        for t in txns {
            let i = t.id.index();
            if let (Some(Some(s)), Some(Some(c))) = (start.get(i), commit.get(i)) {
                if c <= s && t.stream_pos.is_some() && self.conflicts.len() < MAX_CONFLICTS {
                    self.conflicts.push(format!("{}'s own snapshot sees its commit", t.label));
                }
            }
        }
    }

    /// Numbers, in stream order, the commits no snapshot fed so far has seen: the end of
    /// the history, or a cut (every later snapshot sees them all, and they come first in
    /// the stream, so the first later snapshot would number them the same way).
    pub(crate) fn close(&mut self, commit: &mut Vec<Option<u64>>) {
        let mut rest: Vec<(u32, u64, TxnId)> =
            self.unassigned.iter().map(|(x, (p, w))| (*p, *x, *w)).collect();
        rest.sort_unstable();
        self.unassigned.clear();
        for (_, x, w) in rest {
            self.assign(x, w, commit);
        }
    }

    fn assign(&mut self, x: u64, w: TxnId, commit: &mut Vec<Option<u64>>) {
        self.assigned.insert(x);
        self.max_assigned = self.max_assigned.max(Some(x));
        if commit.len() <= w.index() {
            commit.resize(w.index() + 1, None);
        }
        commit[w.index()] = Some(self.next);
        self.next += 1;
        self.last_snapshot_tick = None;
    }
}

/// Orders every snapshot and every visible commit, see the module doc.
pub(crate) fn build(h: &History, facts: &[TxnFacts], m: &Matched) -> Timeline {
    let n = h.txns.len();
    let txns: Vec<TickTxn<'_>> = h
        .txn_ids()
        .filter(|t| h.txn(*t).is_committed() || m.stream_pos[t.index()].is_some())
        .map(|t| TickTxn {
            id: t,
            label: h.txn_label(t),
            logged_xid: m.stream_pos[t.index()].and(m.xid[t.index()]),
            stream_pos: m.stream_pos[t.index()],
            snapshots: if h.txn(t).is_committed() {
                facts[t.index()].snapshots().collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    let mut tl = Timeline { start: vec![None; n], commit: vec![None; n], conflicts: Vec::new() };
    let mut ticker = Ticker::new();
    ticker.add(&txns, &mut tl.start, &mut tl.commit);
    ticker.close(&mut tl.commit);
    tl.conflicts = ticker.conflicts;
    tl
}

/// Records the ticks as the transactions' `start_ts` and `commit_ts`.
pub(crate) fn apply(h: &mut History, tl: &Timeline) {
    for (i, txn) in h.txns.iter_mut().enumerate() {
        if let Some(s) = tl.start[i] {
            txn.set_start_ts(Some(Timestamp::new(s)));
        }
        if let Some(c) = tl.commit[i] {
            txn.set_commit_ts(Some(Timestamp::new(c)));
        }
    }
}
