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

/// Orders every snapshot and every visible commit, see the module doc.
pub(crate) fn build(h: &History, facts: &[TxnFacts], m: &Matched) -> Timeline {
    let n = h.txns.len();
    let mut committed: Vec<(u64, TxnId)> = h
        .txn_ids()
        .filter(|t| m.stream_pos[t.index()].is_some())
        .filter_map(|t| m.xid[t.index()].map(|x| (x, t)))
        .collect();
    committed.sort_unstable();
    let is_committed = |x: u64| committed.binary_search_by_key(&x, |(c, _)| *c).is_ok();

    // Every snapshot with the number of committed writers it sees.
    let mut snaps: Vec<(usize, TxnId, &PgSnapshot, Option<u64>)> = Vec::new();
    for t in h.txn_ids() {
        if !h.txn(t).is_committed() {
            continue;
        }
        // PostgreSQL leaves a transaction's own xid out of its snapshots' running list:
        // its commit is not visible to them even though the xid is below xmax.
        let own = m.xid[t.index()].filter(|x| *x < u64::MAX && m.stream_pos[t.index()].is_some());
        for s in facts[t.index()].snapshots() {
            let below = committed.partition_point(|(x, _)| *x < s.xmax);
            let hidden = s.xip.iter().filter(|x| is_committed(**x)).count();
            let own_hidden = own.is_some_and(|x| s.sees(x));
            snaps.push((below - hidden - usize::from(own_hidden), t, s, own));
        }
    }
    snaps.sort_by_key(|(size, t, _, _)| (*size, *t));

    let mut tl = Timeline { start: vec![None; n], commit: vec![None; n], conflicts: Vec::new() };
    let mut unassigned: BTreeMap<u64, TxnId> = committed.iter().copied().collect();
    let mut assigned: FxHashSet<u64> = FxHashSet::default();
    let mut max_assigned: Option<u64> = None;
    let mut last_snapshot_tick: Option<u64> = None;
    let mut next: u64 = 1;
    let mut fresh: Vec<(u32, u64, TxnId)> = Vec::new();
    for (_, t, s, own) in &snaps {
        let sees = |x: u64| s.sees(x) && Some(x) != *own;
        if tl.conflicts.len() < MAX_CONFLICTS {
            let hidden_old = s.xip.iter().chain(own.iter()).find(|x| assigned.contains(x)).copied();
            let beyond = max_assigned.filter(|x| *x >= s.xmax);
            if let Some(x) = hidden_old.or(beyond) {
                tl.conflicts.push(format!(
                    "{}'s snapshot {s} does not see xid {x}, which a snapshot seeing fewer commits saw",
                    h.txn_label(*t)
                ));
            }
        }
        fresh.clear();
        fresh.extend(
            unassigned
                .range(..s.xmax)
                .filter(|(x, _)| sees(**x))
                .map(|(x, w)| (m.stream_pos[w.index()].unwrap_or(u32::MAX), *x, *w)),
        );
        fresh.sort_unstable();
        for &(_, x, w) in &fresh {
            unassigned.remove(&x);
            assigned.insert(x);
            max_assigned = max_assigned.max(Some(x));
            tl.commit[w.index()] = Some(next);
            next += 1;
            last_snapshot_tick = None;
        }
        let tick = match last_snapshot_tick {
            Some(tick) => tick,
            None => {
                let tick = next;
                next += 2;
                last_snapshot_tick = Some(tick);
                tick
            }
        };
        let start = tl.start[t.index()].get_or_insert(tick);
        *start = (*start).min(tick);
        if m.stream_pos[t.index()].is_none() {
            // A read-only transaction commits nothing anyone can see: its commit is placed
            // at its last snapshot, so a session successor taking the same snapshot starts
            // no earlier than it committed (at tick + 1 it seemed to break session order).
            let commit = tl.commit[t.index()].get_or_insert(tick);
            *commit = (*commit).max(tick);
        }
    }
    let mut rest: Vec<(u32, TxnId)> =
        unassigned.values().map(|w| (m.stream_pos[w.index()].unwrap_or(u32::MAX), *w)).collect();
    rest.sort_unstable();
    for (_, w) in rest {
        tl.commit[w.index()] = Some(next);
        next += 1;
    }
    for t in h.txn_ids() {
        if let (Some(s), Some(c)) = (tl.start[t.index()], tl.commit[t.index()]) {
            if c <= s && m.stream_pos[t.index()].is_some() && tl.conflicts.len() < MAX_CONFLICTS {
                tl.conflicts.push(format!("{}'s own snapshot sees its commit", h.txn_label(t)));
            }
        }
    }
    tl
}

/// Records the ticks as the transactions' `start_ts` and `commit_ts`.
pub(crate) fn apply(h: &mut History, tl: &Timeline) {
    for (i, txn) in h.txns.iter_mut().enumerate() {
        if let Some(s) = tl.start[i] {
            txn.start_ts = Some(Timestamp::new(s));
        }
        if let Some(c) = tl.commit[i] {
            txn.commit_ts = Some(Timestamp::new(c));
        }
    }
}
