//! The tables the workloads run on, their DDL and their initial rows.

use isocert_adapters::{ColumnType, TableSpec};
use rand::Rng;

use crate::plan::items_c1_values;
use crate::{WorkloadConfig, WorkloadKind};

/// The first key of the filler rows ([`crate::PhysicalDesign::filler_rows`]).
pub const FILLER_KEYS: i64 = 1_000_000_000;

/// How many distinct `c2` values the items table uses.
pub(crate) const ITEMS_C2_VALUES: i64 = 10;

/// A table: its name, primary key and columns. Every column is an integer; the primary key
/// comes first and the last column holds the unique value each write draws.
#[derive(Debug)]
pub(crate) struct Schema {
    /// The table name, in SQL and in the history.
    pub(crate) table: &'static str,
    /// All columns, primary key first, unique value column last.
    pub(crate) columns: &'static [&'static str],
    /// The column types; empty: every column is an integer.
    pub(crate) types: &'static [ColumnType],
}

/// The key-value table of the kv and skew workloads (v1's table `kv`).
pub(crate) const KV: Schema = Schema { table: "kv", columns: &["key", "value"], types: &[] };

/// The table of the predicate workload.
pub(crate) const ITEMS: Schema = Schema { table: "items", columns: &["id", "c1", "c2", "v"], types: &[] };

/// The table of the append workload, as Jepsen's PostgreSQL list-append test has it: the
/// key, a secondary key (equal to it) and the list as comma-separated text. It starts
/// empty: every key is born by its first append.
pub(crate) const APPEND: Schema = Schema {
    table: "append",
    columns: &["id", "sk", "val"],
    types: &[ColumnType::Integer, ColumnType::Integer, ColumnType::Text],
};

/// The table of the counter workload: the key, the counter its statements increment, and
/// the unique value each write draws.
pub(crate) const COUNTERS: Schema = Schema { table: "counters", columns: &["id", "n", "v"], types: &[] };

impl Schema {
    /// The schema of a workload.
    pub(crate) fn of(kind: WorkloadKind) -> &'static Schema {
        match kind {
            WorkloadKind::Kv | WorkloadKind::Skew | WorkloadKind::Mini => &KV,
            WorkloadKind::Predicate => &ITEMS,
            WorkloadKind::Append => &APPEND,
            WorkloadKind::Counter => &COUNTERS,
        }
    }

    /// Whether this is v1's key-value table, whose values are plain scalars.
    pub(crate) fn is_kv(&self) -> bool {
        self.table == KV.table
    }

    /// The table as the adapters see it (each renders its own DDL).
    pub(crate) fn spec(&self) -> TableSpec {
        TableSpec { types: self.types, ..TableSpec::integers(self.table, self.columns) }
    }

    /// Whether reads of this table are lists (the append workload's).
    pub(crate) fn is_list(&self) -> bool {
        self.table == APPEND.table
    }

    /// A full row from its key, the planned middle columns (missing ones are 0) and the
    /// fresh unique value.
    pub(crate) fn row(&self, key: i64, planned: &[i64], fresh: i64) -> Vec<i64> {
        let mut row = Vec::with_capacity(self.columns.len());
        row.push(key);
        for i in 0..self.columns.len() - 2 {
            row.push(planned.get(i).copied().unwrap_or(0));
        }
        row.push(fresh);
        row
    }

    /// The rows `setup` inserts: every key, unique value column 0.
    pub(crate) fn initial_rows(&self, cfg: &WorkloadConfig) -> Vec<Vec<i64>> {
        if self.is_list() {
            return Vec::new();
        }
        let mut rng = isocert_random::seeded(cfg.seed ^ 0x5eed);
        let c1_values = items_c1_values(cfg.keys);
        let mut rows: Vec<Vec<i64>> = (0..i64::from(cfg.keys))
            .map(|key| {
                let middle = [rng.random_range(0..c1_values), rng.random_range(0..ITEMS_C2_VALUES)];
                self.row(key, &middle, 0)
            })
            .collect();
        // Filler rows fill pages (VACUUM and the visibility map then have work); their keys
        // lie beyond every key a plan names and their other columns (-1) outside every
        // predicate, so no plan touches them.
        rows.extend((0..i64::from(cfg.design.filler_rows)).map(|i| self.row(FILLER_KEYS + i, &[-1, -1], 0)));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_adapters::IsolationLevel;

    #[test]
    fn rows_have_key_first_and_fresh_value_last() {
        assert_eq!(KV.row(3, &[], 9), vec![3, 9]);
        assert_eq!(ITEMS.row(3, &[1, 2], 9), vec![3, 1, 2, 9]);
        let cfg = WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::ReadCommitted);
        let rows = ITEMS.initial_rows(&cfg);
        assert_eq!(rows.len(), 16);
        assert!(rows
            .iter()
            .enumerate()
            .all(|(i, r)| r[0] == i as i64 && r[3] == 0 && r[2] < ITEMS_C2_VALUES));
        let mut cfg = cfg;
        cfg.design.filler_rows = 3;
        let rows = ITEMS.initial_rows(&cfg);
        assert_eq!(rows.len(), 19);
        assert_eq!(rows[18], vec![FILLER_KEYS + 2, -1, -1, 0]);
    }
}
