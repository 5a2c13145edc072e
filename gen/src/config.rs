//! The generator's knobs, checked before a run starts.

use std::str::FromStr;

pub use isocert_random::Distribution;

use isocert_history::{IsolationLevel, UnknownName};

use crate::{GenError, Injection};

/// The isolation levels the simulated store runs, as its concurrency control:
///
/// - [`IsolationLevel::Serializable`] (the default): snapshot isolation (snapshot reads,
///   first-committer-wins) plus commit-time validation of every read and predicate read; a
///   transaction whose reads changed before it commits aborts. Committed transactions
///   serialize in commit-timestamp order, read-only ones at their start timestamp
///   (`commit_ts == start_ts`). These histories satisfy snapshot isolation as well, so an
///   injected anomaly is the only reason any level rejects them.
/// - [`IsolationLevel::SnapshotIsolation`]: reads from the start snapshot,
///   first-committer-wins on writes. Write skew is allowed, so serializability checks may
///   reject these histories.
pub const SIMULATED_LEVELS: [IsolationLevel; 2] =
    [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation];

/// Parses the level the simulated store runs (`--isolation`): one of [`SIMULATED_LEVELS`],
/// spelled `serializable` (`ser`) or `snapshot-isolation` (`si`).
///
/// # Errors
/// [`UnknownName`] naming the two choices.
pub fn parse_simulated_level(s: &str) -> Result<IsolationLevel, UnknownName> {
    match s {
        "serializable" | "ser" => Ok(IsolationLevel::Serializable),
        "snapshot-isolation" | "si" => Ok(IsolationLevel::SnapshotIsolation),
        _ => Err(UnknownName {
            what: "isolation level",
            given: s.into(),
            choices: "serializable (ser), snapshot-isolation (si)",
        }),
    }
}

/// What the objects of the generated history are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DataModel {
    /// [`DataModel::SqlTable`] when `predicate_ratio > 0`, else [`DataModel::KeyValue`].
    #[default]
    Auto,
    /// Table `kv`: integer keys, unique integer values, keys start absent.
    KeyValue,
    /// Table `kv` as lists: writes are appends of unique integers, reads return the list.
    ListAppend,
    /// Table `t` with int columns `id` (the key), `c0` (what predicates range over), `c1`
    /// (a unique stamp, so every written row is unique) and `c2`; every row exists initially.
    SqlTable,
}

impl DataModel {
    /// The command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DataModel::Auto => "auto",
            DataModel::KeyValue => "kv",
            DataModel::ListAppend => "list-append",
            DataModel::SqlTable => "table",
        }
    }
}

impl FromStr for DataModel {
    type Err = GenError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DataModel::Auto),
            "kv" | "key-value" => Ok(DataModel::KeyValue),
            "list-append" | "list" => Ok(DataModel::ListAppend),
            "table" | "sql" => Ok(DataModel::SqlTable),
            _ => Err(GenError::UnknownName(UnknownName {
                what: "data model",
                given: s.into(),
                choices: "auto, kv, list-append, table",
            })),
        }
    }
}

/// Transactions in flight at once in [`GenConfig::chronos`].
const CHRONOS_CONCURRENCY: usize = 8;

/// Every knob of a generation run. [`GenConfig::default`] is a small key-value history;
/// [`GenConfig::chronos`] is the Chronos benchmark's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Number of transactions in the history (committed and aborted).
    pub txns: usize,
    /// Number of client sessions running transactions concurrently.
    pub sessions: usize,
    /// Operations per transaction.
    pub ops_per_txn: usize,
    /// Number of keys (objects, or rows of the SQL table).
    pub keys: usize,
    /// Fraction of item operations that are reads (the rest write or append).
    pub read_ratio: f64,
    /// Blind transactions (Viper's BlindW): with `Some(r)`, each transaction is read-only
    /// with probability `r` and write-only otherwise, instead of mixing its operations by
    /// `read_ratio` (0.5 is BlindW-RW, 0.9 BlindW-RM).
    pub read_only_txns: Option<f64>,
    /// Fraction of operations that are predicate operations (select, predicate update,
    /// predicate delete over ranges of `c0`); needs the SQL table.
    pub predicate_ratio: f64,
    /// How keys are picked.
    pub distribution: Distribution,
    /// The seed: the same configuration and seed give the same bytes.
    pub seed: u64,
    /// The simulated store's concurrency control: one of [`SIMULATED_LEVELS`].
    pub isolation: IsolationLevel,
    /// What the objects are.
    pub model: DataModel,
    /// At most this many transactions run at once (0: one per session). Fewer in flight
    /// means fewer conflicts, so fewer aborts on hot keys.
    pub concurrency: usize,
    /// Item writes re-draw (up to 8 times) a key that another running transaction already
    /// wrote, as a client spreading its load would: far fewer first-committer-wins aborts
    /// on hot keys, at the price of a slightly flatter key distribution for writes.
    pub avoid_conflicts: bool,
    /// An anomaly to inject into the otherwise valid history.
    pub inject: Option<Injection>,
    /// Write every predicate operation's version set row by row instead of as its
    /// snapshot (the compact form, docs/FORMAT.md), which is the default.
    pub explicit_version_sets: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            txns: 100,
            sessions: 4,
            ops_per_txn: 5,
            keys: 10,
            read_ratio: 0.5,
            read_only_txns: None,
            predicate_ratio: 0.0,
            distribution: Distribution::Uniform,
            seed: 0,
            isolation: IsolationLevel::Serializable,
            model: DataModel::Auto,
            concurrency: 0,
            avoid_conflicts: false,
            inject: None,
            explicit_version_sets: false,
        }
    }
}

impl GenConfig {
    /// The Chronos benchmark's shape: 50 sessions, 1,000 keys, zipfian, 50% reads,
    /// 15 operations per transaction, key-value, snapshot isolation.
    pub fn chronos(txns: usize, seed: u64) -> Self {
        GenConfig {
            txns,
            sessions: 50,
            ops_per_txn: 15,
            keys: 1000,
            read_ratio: 0.5,
            read_only_txns: None,
            predicate_ratio: 0.0,
            distribution: Distribution::Zipfian,
            seed,
            isolation: IsolationLevel::SnapshotIsolation,
            model: DataModel::KeyValue,
            concurrency: CHRONOS_CONCURRENCY,
            avoid_conflicts: true,
            inject: None,
            explicit_version_sets: false,
        }
    }

    /// How many transactions may run at once.
    pub fn max_in_flight(&self) -> usize {
        if self.concurrency == 0 {
            self.sessions
        } else {
            self.concurrency.min(self.sessions)
        }
    }

    /// The data model after resolving [`DataModel::Auto`].
    pub fn data_model(&self) -> DataModel {
        match self.model {
            DataModel::Auto if self.predicate_ratio > 0.0 => DataModel::SqlTable,
            DataModel::Auto => DataModel::KeyValue,
            m => m,
        }
    }

    /// Checks the knobs.
    ///
    /// # Errors
    /// [`GenError::BadKnob`] naming the knob when a count is zero or too large, a ratio is
    /// outside `[0, 1]`, predicates are asked of a model without a SQL table, or the
    /// injection cannot be applied to this model.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |knob: &'static str, message: String| Err(GenError::BadKnob { knob, message });
        if !SIMULATED_LEVELS.contains(&self.isolation) {
            return bad(
                "isolation",
                format!(
                    "the simulated store runs serializable or snapshot-isolation, not {}",
                    self.isolation
                ),
            );
        }
        if self.sessions == 0 {
            return bad("sessions", "needs at least one session".into());
        }
        if self.ops_per_txn == 0 {
            return bad("ops-per-txn", "needs at least one operation per transaction".into());
        }
        if self.keys == 0 {
            return bad("keys", "needs at least one key".into());
        }
        if self.keys > 1 << 30 || self.txns > u32::MAX as usize / 2 || self.sessions > 1 << 20 {
            return bad("txns/keys/sessions", "too large for 32-bit ids".into());
        }
        for (knob, r) in [
            ("read-ratio", self.read_ratio),
            ("predicate-ratio", self.predicate_ratio),
            ("read-only-txns", self.read_only_txns.unwrap_or(0.0)),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return bad(knob, format!("{r} is not between 0 and 1"));
            }
        }
        let model = self.data_model();
        if self.predicate_ratio > 0.0 && model != DataModel::SqlTable {
            return bad(
                "predicate-ratio",
                format!("predicates range over the SQL table; the {} model has none", model.as_str()),
            );
        }
        if let Some(kind) = self.inject {
            if model == DataModel::ListAppend {
                return bad(
                    "inject",
                    "injection is supported on the kv and table models, not list-append".into(),
                );
            }
            if kind.needs_predicates() && self.predicate_ratio <= 0.0 {
                return bad("inject", format!("{kind} needs predicate operations (set predicate-ratio > 0)"));
            }
            if self.keys < kind.keys_needed() {
                return bad("inject", format!("{kind} needs at least {} keys", kind.keys_needed()));
            }
            if self.txns == 0 && kind.edits_in_place() {
                return bad("inject", format!("{kind} edits a generated transaction; generate at least one"));
            }
        }
        Ok(())
    }
}
