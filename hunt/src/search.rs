//! Choosing the next trial: spend more of the budget where the server aborts most.
//!
//! Concurrency control works hardest where it aborts transactions (serialization
//! failures, deadlocks, lock timeouts): that is where its bugs, if any, get exercised. The
//! search keeps the aborts per attempt of every finished trial; a third of the trials are
//! drawn at random over the whole space, the rest are neighbours of the trials that
//! aborted most (each favourite chosen with a weight that grows with its abort rate and
//! shrinks with how often its cell was tried already), made longer where they aborted
//! much (rare interleavings need many transactions at high contention). Whatever the
//! aborts say, every workload, layout, plan mix and maintenance setting keeps a floor of
//! trials (at least half its fair share): a bug that needs one family and makes the server
//! abort little (an SSI bug that needed `kv` at 4 keys and 15,000 transactions) is not
//! starved by a family that aborts much. Nothing here knows any particular bug.

use isocert_random::SeededRng;
use rand::Rng;
use serde::Serialize;

use isocert_workload::{SecondaryIndex, TableLayout};

use crate::params::{paths_name, plan_mixes, Space, TrialParams, LAYOUTS};

/// How a finished trial went, as the search sees it.
#[derive(Clone, Debug, Serialize)]
pub struct TrialScore {
    /// Its parameters.
    pub params: TrialParams,
    /// Attempts the server aborted (retryable errors), per attempt.
    pub abort_rate: f64,
}

/// The search state.
#[derive(Debug)]
pub struct Search {
    space: Space,
    rng: SeededRng,
    scores: Vec<TrialScore>,
    /// Every trial handed out (the floors count these, recorded or not).
    issued: Vec<TrialParams>,
    trials: u32,
}

/// How many of the best-aborting trials the search moves from.
const FAVOURITES: usize = 4;

/// The share of trials drawn at random over the whole space.
const EXPLORE: f64 = 0.35;

/// Every value of every family gets at least this share of its fair share of the trials.
const FLOOR: f64 = 0.5;

/// An abort rate from which a favourite's neighbours are made longer half of the time.
const CONTENDED: f64 = 0.3;

impl Search {
    /// A search over `space` from `seed`.
    pub fn new(space: Space, seed: u64) -> Self {
        Search {
            space,
            rng: isocert_random::seeded(seed ^ 0x4855_4e54),
            scores: Vec::new(),
            issued: Vec::new(),
            trials: 0,
        }
    }

    /// The parameters of the next trial.
    pub fn next_trial(&mut self) -> TrialParams {
        let p = self.choose();
        self.issued.push(p.clone());
        p
    }

    fn choose(&mut self) -> TrialParams {
        let n = self.trials;
        self.trials += 1;
        // The first trials go once through every workload, then explore or exploit.
        // ... on the default physical design (a plain table, the planner's own choice, no
        // maintenance): the baseline, before the physical families are swept.
        if (n as usize) < self.space.workloads.len() || self.scores.is_empty() {
            let mut p = self.space.random(&mut self.rng, n);
            p.workload = self.space.workloads[n as usize % self.space.workloads.len()];
            p.layout = TableLayout::Plain;
            p.index = SecondaryIndex::None;
            p.filler_rows = 0;
            p.access_paths.clear();
            p.maintenance = false;
            return p;
        }
        if let Some(p) = self.below_floor(n) {
            return p;
        }
        if self.rng.random_bool(EXPLORE) {
            return self.space.random(&mut self.rng, n);
        }
        let mut best: Vec<&TrialScore> = self.scores.iter().collect();
        best.sort_by(|a, b| b.abort_rate.total_cmp(&a.abort_rate));
        best.truncate(FAVOURITES);
        // Weight 1 + 10 x abort rate (a trial that aborted half its attempts is picked six
        // times as often as one that aborted none), divided by how often its cell (workload,
        // keys, sessions, transaction length) was tried already, so one contended cell does
        // not take the whole budget.
        let tried = |p: &TrialParams| {
            self.scores
                .iter()
                .filter(|s| {
                    let q = &s.params;
                    (q.workload, q.keys, q.sessions, q.max_txn_len)
                        == (p.workload, p.keys, p.sessions, p.max_txn_len)
                })
                .count() as f64
        };
        let weights: Vec<f64> = best.iter().map(|s| (1.0 + 10.0 * s.abort_rate) / tried(&s.params)).collect();
        let mut x = self.rng.random_range(0.0..weights.iter().sum::<f64>());
        let mut chosen = best[0];
        for (s, w) in best.iter().zip(&weights) {
            if x < *w {
                chosen = s;
                break;
            }
            x -= w;
        }
        let from = chosen.params.clone();
        let contended = chosen.abort_rate >= CONTENDED;
        let mut q = self.space.neighbour(&from, &mut self.rng);
        if contended && self.rng.random_bool(0.5) {
            q.txns = self.space.longer(from.txns.max(q.txns));
        }
        q
    }

    /// A random trial pinned to the value of a family that has fewer trials than its floor,
    /// if any (workloads first, then layouts, plan mixes, maintenance).
    fn below_floor(&mut self, n: u32) -> Option<TrialParams> {
        let floor = |values: usize| f64::from(n) * FLOOR / values.max(1) as f64;
        let count = |issued: &[TrialParams], f: &dyn Fn(&TrialParams) -> bool| {
            issued.iter().filter(|q| f(q)).count() as f64
        };
        let mut p = self.space.random(&mut self.rng, n);
        let workloads = self.space.workloads.clone();
        if let Some(w) =
            workloads.iter().find(|w| count(&self.issued, &|q| q.workload == **w) < floor(workloads.len()))
        {
            p.workload = *w;
            return Some(p);
        }
        if let Some(l) =
            LAYOUTS.iter().find(|l| count(&self.issued, &|q| q.layout == **l) < floor(LAYOUTS.len()))
        {
            p.layout = *l;
            return Some(p);
        }
        let mixes = plan_mixes();
        if let Some(m) = mixes.iter().find(|m| {
            count(&self.issued, &|q| paths_name(&q.access_paths) == paths_name(m)) < floor(mixes.len())
        }) {
            p.access_paths.clone_from(m);
            return Some(p);
        }
        if let Some(on) =
            [false, true].into_iter().find(|on| count(&self.issued, &|q| q.maintenance == *on) < floor(2))
        {
            p.maintenance = on;
            return Some(p);
        }
        None
    }

    /// Records how a trial went.
    pub fn record(&mut self, score: TrialScore) {
        self.scores.push(score);
    }

    /// Every trial recorded so far.
    pub fn scores(&self) -> &[TrialScore] {
        &self.scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_workload::WorkloadKind;

    #[test]
    fn the_search_moves_towards_aborts_and_keeps_exploring() {
        let space = Space { workloads: WorkloadKind::ALL.to_vec(), deletes: true, max_txns: 15000 };
        let mut search = Search::new(space, 7);
        let first: Vec<TrialParams> = (0..WorkloadKind::ALL.len()).map(|_| search.next_trial()).collect();
        let kinds: Vec<WorkloadKind> = first.iter().map(|p| p.workload).collect();
        assert_eq!(kinds, WorkloadKind::ALL.to_vec(), "every workload first");
        assert!(first
            .iter()
            .all(|p| p.layout == TableLayout::Plain && p.access_paths.is_empty() && !p.maintenance));
        // Only the append trial aborted: most later trials are its neighbours.
        for p in first {
            let abort_rate = if p.workload == WorkloadKind::Append { 0.6 } else { 0.0 };
            search.record(TrialScore { params: p, abort_rate });
        }
        let later: Vec<TrialParams> = (0..300).map(|_| search.next_trial()).collect();
        let count = |w: WorkloadKind| later.iter().filter(|p| p.workload == w).count();
        let append = count(WorkloadKind::Append);
        // Expected: 65% exploit, append weighted 7 against 1 for each other favourite.
        assert!(append > 120, "{append} of 300 trials near the aborting one");
        for w in WorkloadKind::ALL.into_iter().filter(|w| *w != WorkloadKind::Append) {
            assert!(count(w) > 0 && 2 * count(w) < append, "{w}: {} trials, append {append}", count(w));
        }
    }

    #[test]
    fn every_family_keeps_its_floor_however_the_aborts_pull() {
        let space = Space { workloads: WorkloadKind::ALL.to_vec(), deletes: true, max_txns: 15000 };
        let mut search = Search::new(space, 11);
        // Only skew ever aborts: without floors, kv would be starved as in issue 50's hunt.
        for _ in 0..200 {
            let p = search.next_trial();
            let abort_rate = if p.workload == WorkloadKind::Skew { 0.9 } else { 0.0 };
            search.record(TrialScore { params: p, abort_rate });
        }
        let scores = search.scores();
        let share = |f: &dyn Fn(&TrialParams) -> bool| scores.iter().filter(|s| f(&s.params)).count();
        for w in WorkloadKind::ALL {
            assert!(
                share(&|p| p.workload == w) >= 200 / WorkloadKind::ALL.len() / 2 - 1,
                "{w}: {}",
                share(&|p| p.workload == w)
            );
        }
        for l in LAYOUTS {
            assert!(share(&|p| p.layout == l) >= 200 / 4 / 2 - 1, "{l}");
        }
        for m in plan_mixes() {
            let name = paths_name(&m);
            assert!(share(&|p| paths_name(&p.access_paths) == name) >= 200 / 8 / 2 - 1, "{name}");
        }
        assert!(share(&|p| p.maintenance) >= 49 && share(&|p| !p.maintenance) >= 49);
        // The aborting family still gets most of the rest, and longer trials.
        assert!(share(&|p| p.workload == WorkloadKind::Skew) > 60);
        assert!(scores.iter().any(|s| s.params.workload == WorkloadKind::Skew && s.params.txns == 15000));
    }
}
