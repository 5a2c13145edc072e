//! The flags that shape a workload's table and plans physically (`isocert run`): layout,
//! secondary index, filler rows, each session's access path, the maintenance session and
//! `count(*)` aggregates. The adapter renders them (docs/WORKLOADS.md, "Tables, plans and
//! maintenance"); `run.json` records them.

use isocert_workload::{AccessPath, SecondaryIndex, TableLayout, WorkloadConfig};
use serde_json::{json, Value as Json};

/// How the workload's table is laid out and read.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct PhysicalArgs {
    /// The table's layout: plain, hash, list or range (partitioned on the primary key;
    /// needs --no-deletes), inheritance (refused by PostgreSQL for now, with a note).
    #[arg(long, value_name = "LAYOUT", default_value = "plain")]
    layout: TableLayout,
    /// A secondary index on the table's first non-key columns: none, btree, hash or brin.
    #[arg(long, value_name = "KIND", default_value = "none")]
    index: SecondaryIndex,
    /// Rows beyond the workload's keys that no plan touches, so that pages fill and VACUUM
    /// has work.
    #[arg(long, value_name = "N", default_value_t = 0)]
    filler_rows: u32,
    /// The access path each session's planner is pushed to, comma-separated, taken by the
    /// sessions in turn: any, seq, index, index-only, bitmap, parallel.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    access_paths: Vec<AccessPath>,
    /// Run a maintenance session beside the workload (PostgreSQL: VACUUM, ANALYZE,
    /// CHECKPOINT, REINDEX TABLE CONCURRENTLY, CREATE/DROP INDEX CONCURRENTLY, looped, on
    /// the workload's table only).
    #[arg(long)]
    maintenance: bool,
    /// Let the predicate workload's aggregates include count(*) besides min and max.
    #[arg(long)]
    count_aggregates: bool,
}

impl PhysicalArgs {
    /// Sets the physical parts of `cfg`.
    pub(crate) fn apply(&self, cfg: &mut WorkloadConfig) {
        cfg.design.layout = self.layout;
        cfg.design.index = self.index;
        cfg.design.filler_rows = self.filler_rows;
        cfg.access_paths.clone_from(&self.access_paths);
        cfg.maintenance = self.maintenance;
        cfg.count_aggregates = self.count_aggregates;
    }
}

/// The physical parts of `cfg`, for `run.json` and `hunt.json`.
pub(crate) fn physical_json(cfg: &WorkloadConfig) -> Json {
    json!({
        "layout": cfg.design.layout.as_str(),
        "index": cfg.design.index.as_str(),
        "filler_rows": cfg.design.filler_rows,
        "access_paths": cfg.access_paths.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "maintenance": cfg.maintenance,
        "count_aggregates": cfg.count_aggregates,
    })
}
