//! What one trial of a hunt runs: a point of the space of workloads and contention
//! settings, drawn at random or moved one step from a point that made the server abort.

use std::fmt;

use isocert_adapters::IsolationLevel;
use isocert_random::SeededRng;
use isocert_workload::{
    AccessPath, Distribution, PhysicalDesign, SecondaryIndex, TableLayout, WorkloadConfig, WorkloadKind,
};
use rand::Rng;
use serde::Serialize;

/// Key counts a trial may use: from 2 upward, few keys being where transactions collide.
pub(crate) const KEY_COUNTS: [u32; 8] = [2, 3, 4, 6, 8, 12, 16, 32];
/// Concurrent sessions a trial may use.
pub(crate) const SESSION_COUNTS: [u32; 5] = [2, 4, 8, 12, 16];
/// The most operations per transaction a trial may plan (kv and append).
pub(crate) const TXN_LENGTHS: [u32; 5] = [1, 2, 4, 6, 8];
/// Client abort probabilities a trial may use (a rollback the client chose after writing).
pub(crate) const CLIENT_ABORT_RATES: [f64; 3] = [0.0, 0.05, 0.2];
/// Transactions per trial: short trials cover the space, long ones let rare interleavings
/// happen (a known PostgreSQL bug needed 15,000 transactions on 4 keys).
pub(crate) const TRIAL_SIZES: [u64; 5] = [300, 1000, 3000, 8000, 15000];
/// Filler rows a trial's table may get (pages that fill, work for VACUUM).
pub(crate) const FILLER_ROWS: [u32; 3] = [0, 500, 3000];

/// The planner mixes a trial may give its sessions: the planner's own choice, one access
/// path for every session, or every path at once (sessions take them in turn).
pub(crate) fn plan_mixes() -> Vec<Vec<AccessPath>> {
    let mut mixes = vec![Vec::new()];
    mixes.extend(AccessPath::ALL.iter().filter(|p| **p != AccessPath::Any).map(|p| vec![*p]));
    mixes.push(AccessPath::ALL.iter().copied().filter(|p| *p != AccessPath::Any).collect());
    mixes
}

/// The layouts a hunt sweeps (inheritance is left out until the capture maps children).
pub(crate) const LAYOUTS: [TableLayout; 4] =
    [TableLayout::Plain, TableLayout::Hash, TableLayout::List, TableLayout::Range];

/// The parameters of one trial.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrialParams {
    /// The workload.
    #[serde(serialize_with = "as_text")]
    pub workload: WorkloadKind,
    /// Number of live keys.
    pub keys: u32,
    /// Concurrent sessions.
    pub sessions: u32,
    /// Key access distribution.
    #[serde(serialize_with = "as_text")]
    pub distribution: Distribution,
    /// Most operations per transaction (kv and append workloads).
    pub max_txn_len: u32,
    /// Whether plans delete rows (off with `--no-deletes`).
    pub deletes: bool,
    /// Probability of a client-chosen rollback after the writes.
    pub client_abort_rate: f64,
    /// Transactions to run to completion.
    pub txns: u64,
    /// Seed of the plans.
    pub seed: u64,
    /// The table's layout (a partitioned one runs without deletes).
    #[serde(serialize_with = "as_text")]
    pub layout: TableLayout,
    /// The secondary index.
    #[serde(serialize_with = "as_text")]
    pub index: SecondaryIndex,
    /// Filler rows no plan touches.
    pub filler_rows: u32,
    /// The sessions' access paths, taken in turn (empty: the planner's choice).
    #[serde(serialize_with = "paths_text")]
    pub access_paths: Vec<AccessPath>,
    /// Whether a maintenance session runs beside the workload.
    pub maintenance: bool,
}

fn paths_text<S: serde::Serializer>(paths: &[AccessPath], s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&paths_name(paths))
}

/// A plan mix in words: `any`, `bitmap`, `seq+index+...`.
pub(crate) fn paths_name(paths: &[AccessPath]) -> String {
    if paths.is_empty() {
        "any".to_string()
    } else {
        paths.iter().map(|p| p.as_str()).collect::<Vec<_>>().join("+")
    }
}

fn as_text<T: fmt::Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

impl TrialParams {
    /// The workload configuration of this trial at `isolation`.
    pub fn config(&self, isolation: IsolationLevel, one_change_per_row: bool) -> WorkloadConfig {
        let mut cfg = WorkloadConfig::new(self.workload, isolation);
        cfg.keys = self.keys.max(if self.workload == WorkloadKind::Skew { 2 } else { 1 });
        cfg.sessions = self.sessions;
        cfg.distribution = self.distribution;
        cfg.max_txn_len = self.max_txn_len;
        cfg.deletes = self.deletes && !self.layout.is_partitioned();
        cfg.client_abort_rate = self.client_abort_rate;
        cfg.txns = self.txns;
        cfg.seed = self.seed;
        cfg.predicate_writes_alone = one_change_per_row;
        cfg.design = PhysicalDesign { layout: self.layout, index: self.index, filler_rows: self.filler_rows };
        cfg.access_paths.clone_from(&self.access_paths);
        cfg.maintenance = self.maintenance;
        cfg.count_aggregates = true;
        cfg
    }

    /// The `isocert run` flags that run this trial's workload again.
    pub fn run_flags(&self) -> String {
        format!(
            "--workload {} --txns {} --sessions {} --keys {} --distribution {} --seed {}{} \
             --max-txn-len {} --client-abort-rate {}",
            self.workload,
            self.txns,
            self.sessions,
            self.keys,
            self.distribution,
            self.seed,
            if self.deletes && !self.layout.is_partitioned() { "" } else { " --no-deletes" },
            self.max_txn_len,
            self.client_abort_rate
        ) + &self.physical_flags()
    }

    /// The `isocert run` flags of the physical parts (empty for the defaults).
    fn physical_flags(&self) -> String {
        let mut flags = String::new();
        if self.layout != TableLayout::Plain {
            flags.push_str(&format!(" --layout {}", self.layout));
        }
        if self.index != SecondaryIndex::None {
            flags.push_str(&format!(" --index {}", self.index));
        }
        if self.filler_rows > 0 {
            flags.push_str(&format!(" --filler-rows {}", self.filler_rows));
        }
        if !self.access_paths.is_empty() {
            let paths: Vec<&str> = self.access_paths.iter().map(|p| p.as_str()).collect();
            flags.push_str(&format!(" --access-paths {}", paths.join(",")));
        }
        if self.maintenance {
            flags.push_str(" --maintenance");
        }
        flags + " --count-aggregates"
    }
}

impl fmt::Display for TrialParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} txns, {} sessions, {} keys {}, <= {} ops, aborts {}, {} table, {} index, {} filler, plans {}{}, seed {}",
            self.workload,
            self.txns,
            self.sessions,
            self.keys,
            self.distribution,
            self.max_txn_len,
            self.client_abort_rate,
            self.layout,
            self.index,
            self.filler_rows,
            paths_name(&self.access_paths),
            if self.maintenance { ", maintenance" } else { "" },
            self.seed
        )
    }
}

/// What the hunt may vary.
#[derive(Clone, Debug)]
pub struct Space {
    /// The workloads to sweep.
    pub workloads: Vec<WorkloadKind>,
    /// Whether plans may delete rows (trials then run with deletes or without them).
    pub deletes: bool,
    /// The largest trial, in transactions.
    pub max_txns: u64,
}

impl Space {
    /// A point drawn at random: short trials first, so the first minutes cover the space.
    pub fn random(&self, rng: &mut SeededRng, trial: u32) -> TrialParams {
        let sizes = self.sizes();
        // Early trials are short; later ones may be long.
        let size_cap = (1 + trial as usize / 4).min(sizes.len());
        TrialParams {
            workload: self.workloads[rng.random_range(0..self.workloads.len())],
            keys: pick(rng, &KEY_COUNTS),
            sessions: pick(rng, &SESSION_COUNTS),
            distribution: pick(rng, &[Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot]),
            max_txn_len: pick(rng, &TXN_LENGTHS),
            deletes: self.deletes && rng.random_bool(0.75),
            client_abort_rate: pick(rng, &CLIENT_ABORT_RATES),
            txns: sizes[rng.random_range(0..size_cap)],
            seed: rng.random(),
            layout: pick(rng, &LAYOUTS),
            index: pick(rng, SecondaryIndex::ALL),
            filler_rows: pick(rng, &FILLER_ROWS),
            access_paths: pick_mix(rng),
            maintenance: rng.random_bool(0.5),
        }
    }

    /// `p` moved one step along one dimension (more contention more often than less), with
    /// a new seed: the neighbourhood of a point where the server aborted much.
    pub fn neighbour(&self, p: &TrialParams, rng: &mut SeededRng) -> TrialParams {
        let mut q = p.clone();
        q.seed = rng.random();
        match rng.random_range(0..12) {
            8 => q.layout = pick(rng, &LAYOUTS),
            9 => q.index = pick(rng, SecondaryIndex::ALL),
            10 => q.access_paths = pick_mix(rng),
            11 => {
                q.maintenance = !p.maintenance;
                q.filler_rows = pick(rng, &FILLER_ROWS);
            }
            0 => q.keys = step(rng, &KEY_COUNTS, p.keys, 0.7),
            1 => q.sessions = step(rng, &SESSION_COUNTS, p.sessions, 0.3),
            2 => q.max_txn_len = step(rng, &TXN_LENGTHS, p.max_txn_len, 0.4),
            3 => {
                q.distribution =
                    pick(rng, &[Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot])
            }
            4 => q.client_abort_rate = pick(rng, &CLIENT_ABORT_RATES),
            5 => q.deletes = self.deletes && !p.deletes,
            // Longer runs of a good point: rare interleavings need many transactions.
            _ => q.txns = step(rng, &self.sizes(), p.txns, 0.2),
        }
        q
    }

    /// The next trial size above `txns` (the largest stays the largest).
    pub(crate) fn longer(&self, txns: u64) -> u64 {
        let sizes = self.sizes();
        sizes.iter().copied().find(|&s| s > txns).unwrap_or(*sizes.last().expect("at least one size"))
    }

    fn sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> = TRIAL_SIZES.iter().copied().filter(|&s| s <= self.max_txns).collect();
        if sizes.is_empty() {
            sizes.push(self.max_txns.max(1));
        }
        sizes
    }
}

fn pick<T: Copy>(rng: &mut SeededRng, choices: &[T]) -> T {
    choices[rng.random_range(0..choices.len())]
}

fn pick_mix(rng: &mut SeededRng) -> Vec<AccessPath> {
    let mixes = plan_mixes();
    mixes[rng.random_range(0..mixes.len())].clone()
}

/// The value next to `current` in `choices` (sorted): the smaller one with probability
/// `down`, else the larger one (staying put at either end).
fn step<T: Copy + PartialOrd>(rng: &mut SeededRng, choices: &[T], current: T, down: f64) -> T {
    let at = choices.iter().position(|c| *c >= current).unwrap_or(choices.len() - 1);
    if rng.random_bool(down) {
        choices[at.saturating_sub(1)]
    } else {
        choices[(at + 1).min(choices.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space { workloads: WorkloadKind::ALL.to_vec(), deletes: true, max_txns: 15000 }
    }

    #[test]
    fn random_points_cover_every_dimension_and_start_short() {
        let s = space();
        let mut rng = isocert_random::seeded(1);
        let first: Vec<TrialParams> = (0..4).map(|i| s.random(&mut rng, i)).collect();
        assert!(first.iter().all(|p| p.txns == 300), "the first trials are short");
        let many: Vec<TrialParams> = (0..400).map(|i| s.random(&mut rng, i)).collect();
        for w in WorkloadKind::ALL {
            assert!(many.iter().any(|p| p.workload == w), "{w} is tried");
        }
        assert!(many.iter().any(|p| p.keys == 2) && many.iter().any(|p| p.keys == 32));
        assert!(many.iter().any(|p| p.txns == 15000));
        assert!(many.iter().any(|p| p.deletes) && many.iter().any(|p| !p.deletes), "delete mixes vary");
        for l in LAYOUTS {
            assert!(many.iter().any(|p| p.layout == l), "{l} is tried");
        }
        for m in plan_mixes() {
            assert!(many.iter().any(|p| p.access_paths == m), "plans {} are tried", paths_name(&m));
        }
        assert!(many.iter().any(|p| p.maintenance) && many.iter().any(|p| p.filler_rows == 3000));
        assert!(many.iter().all(|p| p.config(IsolationLevel::Serializable, false).validate().is_ok()));
    }

    #[test]
    fn neighbours_differ_in_one_dimension_and_respect_the_space() {
        let mut s = space();
        s.deletes = false;
        s.max_txns = 3000;
        let mut rng = isocert_random::seeded(2);
        let p = s.random(&mut rng, 0);
        for _ in 0..200 {
            let q = s.neighbour(&p, &mut rng);
            assert_ne!(q.seed, p.seed);
            let changed = [
                q.keys != p.keys,
                q.sessions != p.sessions,
                q.max_txn_len != p.max_txn_len,
                q.distribution != p.distribution,
                q.client_abort_rate != p.client_abort_rate,
                q.txns != p.txns,
                q.deletes != p.deletes,
                q.layout != p.layout,
                q.index != p.index,
                q.access_paths != p.access_paths,
                q.maintenance != p.maintenance || q.filler_rows != p.filler_rows,
            ];
            assert!(changed.iter().filter(|c| **c).count() <= 1, "{p} -> {q}");
            assert!(!q.deletes && q.txns <= 3000 && q.workload == p.workload);
        }
    }
}
