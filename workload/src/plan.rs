//! Transaction plans: what each generated transaction will do, decided from the seed and
//! the plan number alone (values that must be unique are drawn when the plan runs).

use isocert_history::AggregateFn;
use isocert_random::SeededRng;
use rand::Rng;

use crate::schema::ITEMS_C2_VALUES;
use crate::{WorkloadConfig, WorkloadKind};
use isocert_random::KeyChooser;

/// One planned statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// Item read of one key.
    Read { key: i64 },
    /// `UPDATE ... WHERE pk = key` with a fresh value; recorded only if the row existed.
    Update { key: i64, columns: Vec<i64> },
    /// `INSERT ... ON CONFLICT (pk) DO UPDATE` with a fresh value: always installs a version.
    Upsert { key: i64, columns: Vec<i64> },
    /// Item read, then an upsert of a value derived from what was read.
    ReadModifyWrite { key: i64 },
    /// `DELETE ... WHERE pk = key`; recorded only if a row was deleted.
    Delete { key: i64 },
    /// `SELECT * FROM table WHERE predicate`.
    Select { predicate: String },
    /// `UPDATE table SET column = constant, <unique column> = fresh WHERE predicate`.
    PredicateUpdate { predicate: String, column: &'static str, constant: i64 },
    /// `DELETE FROM table WHERE predicate`.
    PredicateDelete { predicate: String },
    /// `SELECT function(column) FROM table WHERE predicate`.
    Aggregate { predicate: String, function: AggregateFn, column: &'static str },
    /// Append a fresh element to the list at the key (the append workload).
    Append { key: i64 },
    /// `UPDATE table SET n = n + add, <unique column> = fresh WHERE id = key`.
    Increment { key: i64, add: i64 },
    /// `UPDATE table SET n = n + add, <unique column> = fresh WHERE predicate`.
    PredicateIncrement { predicate: String, add: i64 },
    /// `INSERT ... VALUES (key, add, fresh) ON CONFLICT (id) DO UPDATE SET n = t.n +
    /// EXCLUDED.n, v = EXCLUDED.v` on a row that exists.
    UpsertIncrement { key: i64, add: i64 },
    /// `MERGE INTO table USING (VALUES (key, add, fresh)) ... WHEN MATCHED THEN UPDATE SET
    /// n = t.n + add, v = fresh` on a row that exists (planned only where the database has
    /// `MERGE`: [`Planner::merge`]).
    MergeIncrement { key: i64, add: i64 },
    /// Roll the transaction back instead of committing it (always the plan's last step).
    ClientAbort,
}

/// How many plans of the append workload pass before its window of live keys moves on by
/// one key: a key is live for `keys * APPEND_KEY_SLIDE` plans, which bounds its appends
/// (about `APPEND_KEY_SLIDE * max_txn_len / 4` on average) and keeps most keys fresh.
const APPEND_KEY_SLIDE: u64 = 8;

/// Generates plan number `i` of a run, deterministically.
#[derive(Clone, Debug)]
pub(crate) struct Planner {
    kind: WorkloadKind,
    seed: u64,
    chooser: KeyChooser,
    pairs: KeyChooser,
    c1_values: i64,
    deletes: bool,
    predicate_writes_alone: bool,
    max_txn_len: u32,
    client_abort_rate: f64,
    count_aggregates: bool,
    /// Whether the database runs `MERGE` ([`isocert_adapters::Database::has_merge`]): the
    /// counter workload then issues it for half of its single-key increments.
    pub(crate) merge: bool,
}

impl Planner {
    /// A planner for `cfg`.
    pub(crate) fn new(cfg: &WorkloadConfig) -> Self {
        Planner {
            kind: cfg.kind,
            seed: cfg.seed,
            chooser: KeyChooser::new(cfg.distribution, u64::from(cfg.keys)),
            pairs: KeyChooser::new(cfg.distribution, u64::from((cfg.keys / 2).max(1))),
            c1_values: items_c1_values(cfg.keys),
            deletes: cfg.deletes,
            predicate_writes_alone: cfg.predicate_writes_alone,
            max_txn_len: cfg.max_txn_len.max(1),
            client_abort_rate: cfg.client_abort_rate,
            count_aggregates: cfg.count_aggregates,
            merge: false,
        }
    }

    /// The steps of plan `i`.
    pub(crate) fn plan(&self, i: u64) -> Vec<Step> {
        let mut rng = isocert_random::seeded(self.seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut plan = match self.kind {
            WorkloadKind::Kv => self.kv_plan(&mut rng),
            WorkloadKind::Skew => self.skew_plan(&mut rng),
            WorkloadKind::Predicate => self.predicate_plan(&mut rng),
            WorkloadKind::Mini => self.mini_plan(&mut rng),
            WorkloadKind::Append => self.append_plan(i, &mut rng),
            WorkloadKind::Counter => self.counter_plan(&mut rng),
        };
        if !self.deletes {
            plan = plan.into_iter().map(|step| self.without_delete(step, &mut rng)).collect();
        }
        if self.client_abort_rate > 0.0 && rng.random_bool(self.client_abort_rate) {
            plan.push(Step::ClientAbort);
        }
        plan
    }

    /// A delete turned into the update of the same rows.
    fn without_delete(&self, step: Step, rng: &mut SeededRng) -> Step {
        match step {
            Step::Delete { key } => {
                let columns =
                    if self.kind == WorkloadKind::Predicate { self.item_columns(rng) } else { Vec::new() };
                Step::Update { key, columns }
            }
            Step::PredicateDelete { predicate } => Step::PredicateUpdate {
                predicate,
                column: "c2",
                constant: rng.random_range(0..ITEMS_C2_VALUES),
            },
            other => other,
        }
    }

    fn key(&self, rng: &mut SeededRng) -> i64 {
        self.chooser.pick(rng) as i64
    }

    /// Elle's list-append transaction: one to `max_txn_len` operations, each a read or an
    /// append (even odds) of a key in the window of live keys, which moves on with the plan
    /// number (see [`APPEND_KEY_SLIDE`]).
    fn append_plan(&self, i: u64, rng: &mut SeededRng) -> Vec<Step> {
        let window = (i / APPEND_KEY_SLIDE) as i64;
        let len = rng.random_range(1..=self.max_txn_len);
        (0..len)
            .map(|_| {
                let key = window + self.key(rng);
                if rng.random_bool(0.5) {
                    Step::Read { key }
                } else {
                    Step::Append { key }
                }
            })
            .collect()
    }

    fn kv_plan(&self, rng: &mut SeededRng) -> Vec<Step> {
        let len = rng.random_range(1..=self.max_txn_len);
        (0..len)
            .map(|_| {
                let key = self.key(rng);
                match rng.random_range(0..100) {
                    0..35 => Step::Read { key },
                    35..55 => Step::ReadModifyWrite { key },
                    55..75 => Step::Upsert { key, columns: Vec::new() },
                    75..92 => Step::Update { key, columns: Vec::new() },
                    _ => Step::Delete { key },
                }
            })
            .collect()
    }

    /// Reads both keys of a pair and writes one: two such transactions on the same pair,
    /// each writing a different key, are a write skew under snapshot isolation.
    fn skew_plan(&self, rng: &mut SeededRng) -> Vec<Step> {
        let pair = self.pairs.pick(rng) as i64;
        let (a, b) = (2 * pair, 2 * pair + 1);
        let mut steps = vec![Step::Read { key: a }, Step::Read { key: b }];
        if rng.random_bool(0.9) {
            let key = if rng.random_bool(0.5) { a } else { b };
            steps.push(Step::Upsert { key, columns: Vec::new() });
        }
        steps
    }

    /// A mini-transaction (MTC, Definition 8): one or two reads and at most two writes,
    /// each write preceded by a read of its key (a read-modify-write), on distinct keys.
    fn mini_plan(&self, rng: &mut SeededRng) -> Vec<Step> {
        let x = self.key(rng);
        // A second key, distinct from the first (none when the table has a single row).
        let y = (0..16).map(|_| self.key(rng)).find(|&k| k != x);
        let shape = rng.random_range(0u32..100);
        match (shape, y) {
            (0..20, _) | (20..35, None) => vec![Step::Read { key: x }],
            (20..35, Some(y)) => vec![Step::Read { key: x }, Step::Read { key: y }],
            (35..65, _) | (65.., None) => vec![Step::ReadModifyWrite { key: x }],
            (65..80, Some(y)) => vec![Step::Read { key: y }, Step::ReadModifyWrite { key: x }],
            (_, Some(y)) => vec![Step::ReadModifyWrite { key: x }, Step::ReadModifyWrite { key: y }],
        }
    }

    fn item_columns(&self, rng: &mut SeededRng) -> Vec<i64> {
        vec![rng.random_range(0..self.c1_values), rng.random_range(0..ITEMS_C2_VALUES)]
    }

    /// One to `max_txn_len` statements on the counters: mostly increments of one key or of
    /// the rows a predicate matches (on `id`, or on `n`, which the increments change), with
    /// item and range reads between them. Where the database has `MERGE`, 15% of the
    /// statements are `MERGE` increments of one key (taken from the plain increments).
    fn counter_plan(&self, rng: &mut SeededRng) -> Vec<Step> {
        let len = rng.random_range(1..=self.max_txn_len.min(3));
        (0..len)
            .map(|_| {
                let key = self.key(rng);
                let add = rng.random_range(1..=5);
                match rng.random_range(0..100) {
                    15..30 if self.merge => Step::MergeIncrement { key, add },
                    0..30 => Step::Increment { key, add },
                    30..45 => Step::UpsertIncrement { key, add },
                    45..70 => Step::PredicateIncrement { predicate: self.counter_predicate(rng), add },
                    70..85 => Step::Read { key },
                    _ => Step::Select { predicate: self.counter_predicate(rng) },
                }
            })
            .collect()
    }

    fn counter_predicate(&self, rng: &mut SeededRng) -> String {
        let low = self.key(rng);
        match rng.random_range(0..100) {
            0..40 => format!("id BETWEEN {low} AND {}", low + rng.random_range(1..=2)),
            40..70 => format!("n % 2 = {}", rng.random_range(0..2)),
            _ => {
                let n = rng.random_range(0..40);
                format!("n >= {n} AND n < {}", n + rng.random_range(5..=20))
            }
        }
    }

    fn predicate(&self, rng: &mut SeededRng) -> String {
        let c1 = rng.random_range(0..self.c1_values);
        let c2 = rng.random_range(0..ITEMS_C2_VALUES);
        match rng.random_range(0..100) {
            0..45 => format!("c1 BETWEEN {c1} AND {}", c1 + rng.random_range(0..=2)),
            45..60 => format!("c2 = {c2}"),
            60..72 => format!("c1 >= {c1} AND c2 < {}", c2.max(1)),
            72..82 => format!("c2 IN ({c2}, {})", (c2 + 3) % ITEMS_C2_VALUES),
            82..92 => {
                let low = self.key(rng);
                format!("id BETWEEN {low} AND {}", low + rng.random_range(1..=3))
            }
            _ => format!("c1 = {c1} OR c2 = {c2}"),
        }
    }

    fn narrow_predicate(&self, rng: &mut SeededRng) -> String {
        let c1 = rng.random_range(0..self.c1_values);
        let c2 = rng.random_range(0..ITEMS_C2_VALUES);
        format!("c1 = {c1} AND c2 <= {c2}")
    }

    fn predicate_update(&self, rng: &mut SeededRng, predicate: String) -> Step {
        if rng.random_bool(0.6) {
            Step::PredicateUpdate { predicate, column: "c1", constant: rng.random_range(0..self.c1_values) }
        } else {
            Step::PredicateUpdate { predicate, column: "c2", constant: rng.random_range(0..ITEMS_C2_VALUES) }
        }
    }

    fn aggregate(&self, rng: &mut SeededRng, predicate: String) -> Step {
        let function = if rng.random_bool(0.5) { AggregateFn::Min } else { AggregateFn::Max };
        let column = ["v", "c2", "c1"][rng.random_range(0..3)];
        // count(*) needs no column: a bitmap or index-only scan may answer it from the
        // index and the visibility map alone.
        if self.count_aggregates && rng.random_bool(0.4) {
            return Step::Aggregate { predicate, function: AggregateFn::Count, column: "*" };
        }
        Step::Aggregate { predicate, function, column }
    }

    fn item_step(&self, rng: &mut SeededRng) -> Step {
        let key = self.key(rng);
        match rng.random_range(0..100) {
            0..35 => Step::Read { key },
            35..55 => Step::ReadModifyWrite { key },
            55..85 => Step::Upsert { key, columns: self.item_columns(rng) },
            85..95 => Step::Update { key, columns: self.item_columns(rng) },
            _ => Step::Delete { key },
        }
    }

    /// Transaction shapes that make predicate anomalies likely at read committed: a range
    /// read twice around other writes (phantoms), a read of a range followed by an update
    /// of it (predicate lost update), rows moved between ranges, deletes and re-inserts.
    fn predicate_plan(&self, rng: &mut SeededRng) -> Vec<Step> {
        let p = self.predicate(rng);
        match rng.random_range(0..100) {
            0..25 => {
                let mut steps = vec![Step::Select { predicate: p.clone() }];
                for _ in 0..rng.random_range(0..=2) {
                    steps.push(self.item_step(rng));
                }
                steps.push(Step::Select { predicate: p });
                steps
            }
            25..50 => {
                let read = if rng.random_bool(0.7) {
                    Step::Select { predicate: p.clone() }
                } else {
                    self.aggregate(rng, p.clone())
                };
                vec![read, self.predicate_update(rng, p)]
            }
            50..65 => {
                let other = self.predicate(rng);
                let item = if self.predicate_writes_alone {
                    Step::Read { key: self.key(rng) }
                } else {
                    self.item_step(rng)
                };
                vec![self.predicate_update(rng, p), item, Step::Select { predicate: other }]
            }
            65..75 => {
                let key = self.key(rng);
                let delete = Step::PredicateDelete { predicate: self.narrow_predicate(rng) };
                if self.predicate_writes_alone {
                    vec![delete, Step::Read { key }]
                } else {
                    vec![delete, Step::Upsert { key, columns: self.item_columns(rng) }]
                }
            }
            75..85 => vec![self.aggregate(rng, p), self.item_step(rng)],
            _ => (0..rng.random_range(1..=4)).map(|_| self.item_step(rng)).collect(),
        }
    }
}

/// How many of the first `plans` plans of `cfg` end with a rollback the client chose
/// ([`WorkloadConfig::client_abort_rate`]): the aborted attempts a run records that the
/// database did not cause.
pub fn client_aborted_plans(cfg: &WorkloadConfig, plans: u64) -> u64 {
    if cfg.client_abort_rate <= 0.0 {
        return 0;
    }
    let planner = Planner::new(cfg);
    (0..plans).filter(|&i| planner.plan(i).last() == Some(&Step::ClientAbort)).count() as u64
}

/// How many distinct `c1` values the items table uses for `keys` rows: about four rows each.
pub(crate) fn items_c1_values(keys: u32) -> i64 {
    i64::from((keys / 4).max(4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_adapters::IsolationLevel;

    use crate::WorkloadConfig;

    #[test]
    fn plans_depend_only_on_seed_and_number() {
        let cfg = WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::ReadCommitted);
        let a = Planner::new(&cfg);
        let b = Planner::new(&cfg);
        for i in 0..50 {
            assert_eq!(a.plan(i), b.plan(i));
        }
        let mut other = cfg.clone();
        other.seed = 1;
        let c = Planner::new(&other);
        assert!((0..50).any(|i| a.plan(i) != c.plan(i)));
    }

    #[test]
    fn keys_stay_in_range_and_skew_plans_read_a_pair() {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Skew, IsolationLevel::RepeatableRead);
        cfg.keys = 6;
        let p = Planner::new(&cfg);
        for i in 0..200 {
            let plan = p.plan(i);
            let (Step::Read { key: a }, Step::Read { key: b }) = (&plan[0], &plan[1]) else {
                panic!("{plan:?}")
            };
            assert_eq!(a % 2, 0);
            assert_eq!(*b, a + 1);
            assert!(*b < 6);
        }
        let kv = Planner::new(&WorkloadConfig::new(WorkloadKind::Kv, IsolationLevel::Serializable));
        for i in 0..200 {
            for step in kv.plan(i) {
                let key = match step {
                    Step::Read { key }
                    | Step::Update { key, .. }
                    | Step::Upsert { key, .. }
                    | Step::ReadModifyWrite { key }
                    | Step::Delete { key } => key,
                    other => panic!("kv plan has {other:?}"),
                };
                assert!((0..16).contains(&key));
            }
        }
    }

    #[test]
    fn counter_plans_merge_only_where_the_database_has_it() {
        let cfg = WorkloadConfig::new(WorkloadKind::Counter, IsolationLevel::ReadCommitted);
        let merges = |p: &Planner| {
            (0..400).flat_map(|i| p.plan(i)).filter(|s| matches!(s, Step::MergeIncrement { .. })).count()
        };
        let mut p = Planner::new(&cfg);
        assert_eq!(merges(&p), 0);
        p.merge = true;
        assert!(merges(&p) > 0);
    }

    #[test]
    fn without_deletes_plans_delete_nothing() {
        for kind in [WorkloadKind::Kv, WorkloadKind::Predicate] {
            let mut cfg = WorkloadConfig::new(kind, IsolationLevel::RepeatableRead);
            cfg.deletes = false;
            let p = Planner::new(&cfg);
            let steps: Vec<Step> = (0..500).flat_map(|i| p.plan(i)).collect();
            assert!(!steps.iter().any(|s| matches!(s, Step::Delete { .. } | Step::PredicateDelete { .. })));
            assert!(steps.iter().any(|s| matches!(s, Step::Update { .. })));
        }
    }

    #[test]
    fn predicate_writes_alone_share_their_transaction_with_reads_only() {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::Serializable);
        cfg.predicate_writes_alone = true;
        let p = Planner::new(&cfg);
        let mut predicate_writers = 0;
        for i in 0..2000 {
            let steps = p.plan(i);
            let is_write =
                |s: &Step| !matches!(s, Step::Read { .. } | Step::Select { .. } | Step::Aggregate { .. });
            let predicate = steps
                .iter()
                .filter(|s| matches!(s, Step::PredicateUpdate { .. } | Step::PredicateDelete { .. }))
                .count();
            if predicate > 0 {
                predicate_writers += 1;
                assert_eq!(steps.iter().filter(|s| is_write(s)).count(), 1, "plan {i}: {steps:?}");
            }
        }
        assert!(predicate_writers > 300, "{predicate_writers}");
        // Without the flag the mixed shapes stay (they find more anomalies elsewhere).
        let mixed = Planner::new(&WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::Serializable));
        assert!((0..2000).any(|i| {
            let steps = mixed.plan(i);
            steps.iter().any(|s| matches!(s, Step::PredicateDelete { .. }))
                && steps.iter().any(|s| matches!(s, Step::Upsert { .. }))
        }));
    }

    #[test]
    fn predicate_plans_mix_every_predicate_operation() {
        let p = Planner::new(&WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::ReadCommitted));
        let steps: Vec<Step> = (0..500).flat_map(|i| p.plan(i)).collect();
        assert!(steps.iter().any(|s| matches!(s, Step::Select { .. })));
        assert!(steps.iter().any(|s| matches!(s, Step::PredicateUpdate { .. })));
        assert!(steps.iter().any(|s| matches!(s, Step::PredicateDelete { .. })));
        assert!(steps.iter().any(|s| matches!(s, Step::Aggregate { function: AggregateFn::Min, .. })));
        assert!(steps.iter().any(|s| matches!(s, Step::Aggregate { function: AggregateFn::Max, .. })));
        assert!(steps.iter().any(|s| matches!(s, Step::Upsert { .. })));
    }

    #[test]
    fn append_plans_read_and_append_live_keys_that_retire() {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Append, IsolationLevel::Serializable);
        cfg.keys = 4;
        let p = Planner::new(&cfg);
        let mut appends_per_key = std::collections::BTreeMap::<i64, u32>::new();
        let (mut reads, mut aborts) = (0, 0);
        for i in 0..4000 {
            let plan = p.plan(i);
            let window = (i / APPEND_KEY_SLIDE) as i64;
            let body = match plan.last() {
                Some(Step::ClientAbort) => {
                    aborts += 1;
                    &plan[..plan.len() - 1]
                }
                _ => &plan[..],
            };
            assert!((1..=4).contains(&body.len()), "plan {i}: {plan:?}");
            for step in body {
                match step {
                    Step::Read { key } => {
                        reads += 1;
                        assert!((window..window + 4).contains(key));
                    }
                    Step::Append { key } => {
                        assert!((window..window + 4).contains(key));
                        *appends_per_key.entry(*key).or_default() += 1;
                    }
                    other => panic!("an append plan has {other:?}"),
                }
            }
        }
        assert!(appends_per_key.len() > 400, "keys retire: {} keys used", appends_per_key.len());
        assert!(appends_per_key.values().all(|&n| n <= 60), "appends per key stay bounded");
        assert!(reads > 2000 && (100..300).contains(&aborts), "{reads} reads, {aborts} client aborts");
    }

    #[test]
    fn mini_plans_are_mini_transactions() {
        let p = Planner::new(&WorkloadConfig::new(WorkloadKind::Mini, IsolationLevel::Serializable));
        let mut shapes = std::collections::BTreeSet::new();
        for i in 0..500 {
            let plan = p.plan(i);
            let (mut reads, mut writes, mut keys) = (0, 0, Vec::new());
            for step in &plan {
                match step {
                    Step::Read { .. } => reads += 1,
                    Step::ReadModifyWrite { .. } => {
                        reads += 1;
                        writes += 1;
                    }
                    other => panic!("a mini-transaction has {other:?}"),
                }
                let (Step::Read { key } | Step::ReadModifyWrite { key }) = step else { unreachable!() };
                keys.push(*key);
            }
            assert!((1..=2).contains(&reads) && writes <= 2, "plan {i}: {plan:?}");
            let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
            assert_eq!(distinct.len(), keys.len(), "plan {i} touches a key twice: {plan:?}");
            shapes.insert((reads, writes));
        }
        let every = [(1, 0), (2, 0), (1, 1), (2, 1), (2, 2)].into_iter().collect();
        assert_eq!(shapes, every, "every mini-transaction shape occurs");
        let mut one = WorkloadConfig::new(WorkloadKind::Mini, IsolationLevel::Serializable);
        one.keys = 1;
        let p = Planner::new(&one);
        assert!((0..100).all(|i| p.plan(i).len() == 1), "one row: one operation per transaction");
    }
}
