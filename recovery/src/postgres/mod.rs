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

pub(crate) mod facts;
mod foreign;
mod initial;
mod item_reads;
mod serial;
pub(crate) mod timeline;
mod version_sets;

use isocert_history::{Certificate, History, SerialOrder};

use crate::{RawLog, Recovered, RecoveryError, RecoveryStats, RowMatcher};

pub use facts::{PgOpFacts, PgTxnFacts};
pub use foreign::{add_foreign_writers, hide_foreign_values};
pub use initial::{initial_load, settle_initial, InitialVersion};

/// The former name of [`Recovered`].
pub type PostgresRecovery = Recovered;

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
    // SSI serializes a transaction before one that committed earlier when their
    // dependencies say so: the ticks order snapshots, not the serialization (which is
    // the certificate's serialization_order).
    h.serial_order = SerialOrder::Unknown;
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
        hidden_reads: Vec::new(),
    };
    Ok(Recovered { certificate, stats, warnings })
}

#[cfg(test)]
mod tests;
