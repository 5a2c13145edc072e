//! The PostgreSQL rule: history + logical-replication log -> certificate.
//!
//! - Version order: per row, the commit order of the replication stream (a second writer
//!   of a row waits for the first, so per row the stream order is the real order).
//! - Version sets: per predicate operation and row, the newest version whose writer the
//!   operation's snapshot sees (`xid < xmax`, not running, committed), or the transaction's
//!   own latest write; at READ COMMITTED, UPDATE/DELETE re-checks are recovered. Per item
//!   read whose value several versions hold, the one version its snapshot sees.
//! - Timestamps: `start_ts`/`commit_ts` consistent with every snapshot, for SI's
//!   start-dependencies (see the timeline module).
//! - Serialization order: a dependency-respecting order for Enne.

mod facts;
mod foreign;
mod item_reads;
mod serial;
mod timeline;
mod version_sets;

use isocert_history::{Certificate, History};

use crate::{RawLog, RecoveryError};

pub use foreign::{add_foreign_writers, values_the_history_holds};
pub use version_sets::RowMatcher;

/// The former name of [`Recovered`].
pub type PostgresRecovery = Recovered;

/// What recovery produced besides the certificate, for the run report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Committed transactions in the replication stream.
    pub logged_txns: usize,
    /// Row changes in the replication stream.
    pub logged_changes: usize,
    /// Transactions of unknown outcome the stream showed committed.
    pub resolved_committed: usize,
    /// Transactions of unknown outcome (with a known xid) the stream showed never committed.
    pub resolved_aborted: usize,
    /// Predicate operations given a version set.
    pub version_sets: usize,
    /// Item reads given the version they saw (isocert extension): the reads whose value
    /// several versions of the object hold, such as "no row" of a row deleted before.
    pub item_read_versions: usize,
    /// Rows whose version a READ COMMITTED UPDATE/DELETE re-evaluated (EvalPlanQual).
    pub rechecked_rows: usize,
    /// Reads whose version the log could not pin down (several candidates remained; the
    /// rule took one and says which in its warnings). PostgreSQL's snapshots leave none.
    pub ambiguous_reads: usize,
    /// Returned versions that were not the newest while their reader ran, by the log's
    /// positions (taken from the row's value anyway).
    pub outside_window: usize,
    /// Whether the recovered dependencies have a cycle, so that no order respects them all
    /// and the serialization order falls back to commit visibility (only a history that
    /// is not serializable has one; Enne will then report it).
    pub serialization_cycle: bool,
}

/// The recovered certificate, with statistics and warnings (what every recovery rule returns).
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    /// Version order, version sets and serialization order.
    pub certificate: Certificate,
    /// Counts, for the report.
    pub stats: RecoveryStats,
    /// Facts that do not fit the database's design (PostgreSQL: snapshots that are not nested): the
    /// certificate is still produced and the checkers will judge, but a reader should know.
    pub warnings: Vec<String>,
}

/// Recovers the certificate of a PostgreSQL history from the logical-replication log of
/// the same run, and records derived `start_ts`/`commit_ts` on the history's
/// transactions; unknown outcomes the log settles become committed or aborted.
///
/// `matcher` tells whether a row version matches a predicate (the oracle); it is asked
/// only for READ COMMITTED UPDATE/DELETE statements, to recover what they re-evaluated.
///
/// # Errors
/// A [`RecoveryError`] when the `meta` facts are malformed, or history and log disagree
/// (a logged write the history lacks, a committed write the log lacks, differing values).
pub fn recover_postgres(
    h: &mut History,
    log: &RawLog,
    matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let facts = facts::read_facts(h)?;
    let ids: Vec<Option<u64>> = facts.iter().map(|f| f.xid).collect();
    // The stream carries 32-bit xids; the client records full 64-bit ones.
    let matched = crate::matching::match_log(h, &ids, log, |xid| u64::from(xid as u32))?;
    let tl = timeline::build(h, &facts, &matched);
    timeline::apply(h, &tl);
    let h: &History = h;
    let cx = version_sets::Context::new(h, &facts, &matched, &tl, matcher);
    let (mut sets, set_stats) = version_sets::compute(&cx)?;
    let predicate_sets = sets.len();
    let item_read_versions = item_reads::add_entries(&cx, &mut sets);
    let (serial, cyclic) = serial::order(&cx, &sets)?;
    let warnings = tl.conflicts.clone();
    let stats = RecoveryStats {
        logged_txns: log.len(),
        logged_changes: log.change_count(),
        resolved_committed: matched.resolved_committed,
        resolved_aborted: matched.resolved_aborted,
        version_sets: predicate_sets,
        item_read_versions,
        rechecked_rows: set_stats.rechecked_rows,
        serialization_cycle: cyclic,
        ..RecoveryStats::default()
    };
    let certificate = Certificate {
        version_order: Some(matched.version_order),
        version_sets: Some(sets),
        snapshot_sets: None,
        serialization_order: Some(serial),
        // The log names each version's writer (its xid) and reads of a value several
        // versions hold are named in the version sets (item_reads).
        writer_identity: true,
    };
    Ok(Recovered { certificate, stats, warnings })
}

#[cfg(test)]
mod tests;
