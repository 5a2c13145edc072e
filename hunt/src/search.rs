//! Choosing the next trial: spend more of the budget where the server aborts most.
//!
//! Concurrency control works hardest where it aborts transactions (serialization
//! failures, deadlocks, lock timeouts): that is where its bugs, if any, get exercised. The
//! search keeps the aborts per attempt of every finished trial; a third of the trials are
//! drawn at random over the whole space (so no workload or setting is starved), the rest
//! are neighbours of the trials that aborted most (each favourite chosen with a weight
//! that grows with its abort rate and shrinks with how often its cell was tried already).
//! Nothing here knows any particular bug.

use isocert_random::SeededRng;
use rand::Rng;
use serde::Serialize;

use crate::params::{Space, TrialParams};

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
    trials: u32,
}

/// How many of the best-aborting trials the search moves from.
const FAVOURITES: usize = 4;

/// The share of trials drawn at random over the whole space.
const EXPLORE: f64 = 0.35;

impl Search {
    /// A search over `space` from `seed`.
    pub fn new(space: Space, seed: u64) -> Self {
        Search { space, rng: isocert_random::seeded(seed ^ 0x4855_4e54), scores: Vec::new(), trials: 0 }
    }

    /// The parameters of the next trial.
    pub fn next_trial(&mut self) -> TrialParams {
        let n = self.trials;
        self.trials += 1;
        // The first trials go once through every workload, then explore or exploit.
        if (n as usize) < self.space.workloads.len() || self.scores.is_empty() {
            let mut p = self.space.random(&mut self.rng, n);
            p.workload = self.space.workloads[n as usize % self.space.workloads.len()];
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
        self.space.neighbour(&from, &mut self.rng)
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
        let first: Vec<TrialParams> = (0..5).map(|_| search.next_trial()).collect();
        let kinds: Vec<WorkloadKind> = first.iter().map(|p| p.workload).collect();
        assert_eq!(kinds, WorkloadKind::ALL.to_vec(), "every workload first");
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
}
