//! What to run: workload kind, isolation level, size, key distribution, seed.

use std::fmt;
use std::str::FromStr;

use isocert_adapters::IsolationLevel;
pub use isocert_adapters::{AccessPath, PhysicalDesign, SecondaryIndex, TableLayout};
pub use isocert_random::Distribution;

use crate::WorkloadError;

/// The workloads the client can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// Item reads, blind updates, upserts, read-modify-writes and deletes on table `kv`.
    Kv,
    /// The kv operations plus range reads, predicate updates and deletes, and min/max
    /// aggregates on table `items`: predicate anomalies show at read committed.
    Predicate,
    /// Read two keys of a pair, write one of them: write skew, which repeatable read allows.
    Skew,
    /// Mini-transactions (MTC's design): one or two item reads and at most two writes, each
    /// write a read-modify-write of a key the transaction read, on table `kv`; no deletes.
    Mini,
    /// Elle's list append on SQL (Jepsen's pattern): table `append (id, sk, val)`, each
    /// append an upsert that concatenates a unique element onto the key's list, reads by
    /// primary key recorded as lists; keys are mostly fresh and retire after a bounded
    /// number of appends; some transactions abort by the client's choice after writing.
    Append,
    /// Statements that read and write at once on table `counters (id, n, v)`: increments
    /// `UPDATE counters SET n = n + k, v = FRESH WHERE id = K` and the same over a predicate
    /// (on `id` or on `n` itself, so concurrent increments move rows in and out of the
    /// `WHERE`), upserts `ON CONFLICT ... SET n = counters.n + EXCLUDED.n` and, where the
    /// server has it, `MERGE ... WHEN MATCHED THEN UPDATE SET n = t.n + s.n`, beside reads
    /// and range reads, on few hot keys. Recorded as expression updates: the checker
    /// evaluates each `SET` on the version it replaced, where the database documents it
    /// (docs/WORKLOADS.md). PostgreSQL only, for now: `isocert hunt`
    /// sweeps it where the adapter records expression updates.
    Counter,
}

impl WorkloadKind {
    /// The table the workload runs on.
    pub fn table(self) -> &'static str {
        match self {
            WorkloadKind::Kv | WorkloadKind::Skew | WorkloadKind::Mini => "kv",
            WorkloadKind::Predicate => "items",
            WorkloadKind::Append => "append",
            WorkloadKind::Counter => "counters",
        }
    }

    /// Every workload, in the order `isocert hunt` tries them.
    pub const ALL: [WorkloadKind; 6] = [
        WorkloadKind::Kv,
        WorkloadKind::Append,
        WorkloadKind::Predicate,
        WorkloadKind::Skew,
        WorkloadKind::Mini,
        WorkloadKind::Counter,
    ];

    /// The table the workload runs on, as adapters see it.
    pub fn table_spec(self) -> isocert_adapters::TableSpec {
        crate::schema::Schema::of(self).spec()
    }

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Kv => "kv",
            WorkloadKind::Predicate => "predicate",
            WorkloadKind::Skew => "skew",
            WorkloadKind::Mini => "mini",
            WorkloadKind::Append => "append",
            WorkloadKind::Counter => "counter",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WorkloadKind {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        Ok(match s {
            "kv" => WorkloadKind::Kv,
            "predicate" | "pred" => WorkloadKind::Predicate,
            "skew" | "write-skew" => WorkloadKind::Skew,
            "mini" | "mt" | "mini-transactions" => WorkloadKind::Mini,
            "append" | "list-append" => WorkloadKind::Append,
            "counter" | "counters" => WorkloadKind::Counter,
            _ => {
                return Err(WorkloadError::config(
                    "workload",
                    format!("unknown workload {s:?}: use kv, predicate, skew, mini, append or counter"),
                ))
            }
        })
    }
}

/// Everything that decides a run (besides the database's own scheduling).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConfig {
    /// Which workload.
    pub kind: WorkloadKind,
    /// The isolation level every transaction runs at.
    pub isolation: IsolationLevel,
    /// How many transaction plans to run to completion (aborted attempts are retried as new
    /// transactions and do not count).
    pub txns: u64,
    /// Concurrent sessions, one connection each.
    pub sessions: u32,
    /// Number of keys (rows); the skew workload uses `keys / 2` pairs.
    pub keys: u32,
    /// Key access distribution.
    pub distribution: Distribution,
    /// Seed of the plan generator (plan `i` depends only on the seed and `i`).
    pub seed: u64,
    /// Give up a plan after this many aborted attempts in a row.
    pub max_attempts: u32,
    /// Fault injection: the probability that the client kills a transaction's own
    /// connection right before `COMMIT` (the outcome is then recorded as `unknown`).
    pub disconnect_rate: f64,
    /// Whether plans delete rows. Without deletes every key keeps existing, so upserts
    /// never insert: this avoids PostgreSQL's delete-then-insert behaviour at repeatable
    /// read, which is not snapshot isolation (docs/POSTGRES.md). Deletes become updates.
    pub deletes: bool,
    /// Keep predicate updates and deletes apart from every other write of their transaction
    /// (for databases whose version source reports one change per row and transaction:
    /// `Database::ONE_CHANGE_PER_ROW`). Reads still share the transaction.
    pub predicate_writes_alone: bool,
    /// The most operations a kv or append transaction plans (at least 1; default 5 for kv,
    /// 4 for append, as Elle's list-append test); longer transactions overlap more.
    pub max_txn_len: u32,
    /// The probability that a plan ends with a rollback the client chose after its writes
    /// (recorded as aborted, not retried): the versions it wrote must never be read.
    pub client_abort_rate: f64,
    /// The table's physical design: layout, secondary index, filler rows (the adapter
    /// renders it, or notes what it ignores).
    pub design: PhysicalDesign,
    /// The access path each session's planner is pushed to: session `s` takes
    /// `access_paths[s % len]`; empty: the planner's own choice everywhere.
    pub access_paths: Vec<AccessPath>,
    /// Whether a session of its own loops over the adapter's maintenance statements
    /// (`VACUUM`, `ANALYZE`, ...) on the workload's table while the workload runs.
    pub maintenance: bool,
    /// Whether the predicate workload's aggregates include `count(*)` (besides min and max).
    pub count_aggregates: bool,
}

impl WorkloadConfig {
    /// A configuration with the defaults: 1000 transactions, 8 sessions, 16 keys, uniform,
    /// seed 0, 100 attempts per plan, no fault injection, deletes on.
    pub fn new(kind: WorkloadKind, isolation: IsolationLevel) -> Self {
        WorkloadConfig {
            kind,
            isolation,
            txns: 1000,
            sessions: 8,
            keys: 16,
            distribution: Distribution::Uniform,
            seed: 0,
            max_attempts: 100,
            disconnect_rate: 0.0,
            deletes: true,
            predicate_writes_alone: false,
            max_txn_len: if kind == WorkloadKind::Append { 4 } else { 5 },
            client_abort_rate: if kind == WorkloadKind::Append { 0.05 } else { 0.0 },
            design: PhysicalDesign::default(),
            access_paths: Vec::new(),
            maintenance: false,
            count_aggregates: false,
        }
    }

    /// The access path of session `session`.
    pub fn access_path(&self, session: u32) -> AccessPath {
        if self.access_paths.is_empty() {
            AccessPath::Any
        } else {
            self.access_paths[session as usize % self.access_paths.len()]
        }
    }

    /// The workload's table as the adapters see it, with this run's layout (a partitioned
    /// table changes what a write can return).
    pub fn table_spec(&self) -> isocert_adapters::TableSpec {
        let mut spec = self.kind.table_spec();
        spec.partitioned = self.design.layout.is_partitioned();
        spec
    }

    /// Checks that the numbers make sense.
    ///
    /// # Errors
    /// [`WorkloadError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.sessions == 0 {
            return Err(WorkloadError::config("sessions", "need at least one session"));
        }
        let min_keys = if self.kind == WorkloadKind::Skew { 2 } else { 1 };
        if self.keys < min_keys {
            return Err(WorkloadError::config(
                "keys",
                format!("the {} workload needs at least {min_keys} keys", self.kind),
            ));
        }
        if self.keys > 10_000_000 {
            return Err(WorkloadError::config("keys", "at most 10,000,000 keys"));
        }
        if self.max_attempts == 0 {
            return Err(WorkloadError::config("max_attempts", "need at least one attempt"));
        }
        if !(0.0..=1.0).contains(&self.disconnect_rate) {
            return Err(WorkloadError::config("disconnect_rate", "must lie in 0..=1"));
        }
        if !(0.0..=1.0).contains(&self.client_abort_rate) {
            return Err(WorkloadError::config("client_abort_rate", "must lie in 0..=1"));
        }
        if self.max_txn_len == 0 {
            return Err(WorkloadError::config("max_txn_len", "need at least one operation per transaction"));
        }
        if self.deletes && self.design.layout.is_partitioned() {
            return Err(WorkloadError::config(
                "deletes",
                format!(
                    "a {} partitioned table cannot record deletes (a DELETE cannot return the deleted \
                     version's writer there): run it without deletes",
                    self.design.layout
                ),
            ));
        }
        if self.design.filler_rows > 1_000_000 {
            return Err(WorkloadError::config("filler_rows", "at most 1,000,000 filler rows"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use isocert_adapters::parse_run_level;

    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for k in WorkloadKind::ALL {
            assert_eq!(k.as_str().parse::<WorkloadKind>().unwrap(), k);
        }
        for i in [IsolationLevel::Serializable, IsolationLevel::RepeatableRead, IsolationLevel::ReadCommitted]
        {
            assert_eq!(parse_run_level(&i.to_string()).unwrap(), i);
        }
        assert_eq!(parse_run_level("rc").unwrap(), IsolationLevel::ReadCommitted);
        for d in [Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot] {
            assert_eq!(d.as_str().parse::<Distribution>().unwrap(), d);
        }
        let err = parse_run_level("snapshot").unwrap_err().to_string();
        assert!(err.contains("isolation") && err.contains("snapshot"), "{err}");
        assert!("bank".parse::<WorkloadKind>().is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Skew, IsolationLevel::RepeatableRead);
        cfg.validate().unwrap();
        cfg.keys = 1;
        assert!(cfg.validate().unwrap_err().to_string().contains("keys"));
        cfg.keys = 4;
        cfg.sessions = 0;
        assert!(cfg.validate().unwrap_err().to_string().contains("sessions"));
        cfg.sessions = 2;
        cfg.design.layout = TableLayout::Hash;
        assert!(cfg.validate().unwrap_err().to_string().contains("deletes"));
        cfg.deletes = false;
        cfg.validate().unwrap();
        assert!(cfg.table_spec().partitioned);
    }

    #[test]
    fn sessions_take_access_paths_in_turn() {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, IsolationLevel::ReadCommitted);
        assert_eq!(cfg.access_path(3), AccessPath::Any);
        cfg.access_paths = vec![AccessPath::Seq, AccessPath::Bitmap];
        assert_eq!((cfg.access_path(0), cfg.access_path(3)), (AccessPath::Seq, AccessPath::Bitmap));
    }
}
