//! CockroachDB's facts and the checks its changefeed imposes on a history (the recovery
//! itself is the shared timestamp-ordering rule).
//!
//! CockroachDB orders versions by their writers' HLC commit timestamps: a changefeed
//! emits each row change with its transaction's commit timestamp (`updated`), and the
//! client records, per transaction, `cluster_logical_timestamp()` just before COMMIT,
//! which fixes that timestamp (docs/COCKROACHDB.md). A changefeed emits only the last
//! change of a row per transaction, so a transaction whose predicate update (or delete)
//! also writes one of its rows by another operation cannot be recovered: the version the
//! predicate operation installed is never seen. [`single_change_per_row`] refuses such
//! histories, naming the transaction (the Emme paper's workload keeps that restriction).

use isocert_history::{History, ObjId, Op, Timestamp};
use serde::{Deserialize, Serialize};

use crate::RecoveryError;

mod recover;

pub use recover::{cockroach_timestamps, recover_cockroach};

/// What a CockroachDB session records about one transaction attempt (docs/COCKROACHDB.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrdbTxnFacts {
    /// The level asked for, as isocert spells it (`serializable`).
    pub isolation: String,
    /// `SHOW transaction_isolation` inside the transaction: the level CockroachDB runs,
    /// which is SERIALIZABLE when the cluster does not enable the one asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_isolation: Option<String>,
    /// `cluster_logical_timestamp()` just before COMMIT, `WALL.LOGICAL` (the commit
    /// timestamp when the commit succeeds); absent at READ COMMITTED, where the function
    /// is refused, and when the attempt failed before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ts: Option<String>,
    /// Why the attempt failed: the SQLSTATE (`40001`: restart, `40003`: ambiguous),
    /// `connection` or `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CrdbTxnFacts {
    /// The recorded commit timestamp, parsed.
    ///
    /// # Errors
    /// Text that is not an HLC decimal.
    pub fn commit_timestamp(&self) -> Result<Option<Timestamp>, String> {
        self.commit_ts.as_deref().map(parse_hlc).transpose()
    }
}

/// What a CockroachDB session records per statement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrdbOpFacts {
    /// An item read's `crdb_internal_mvcc_timestamp`: the timestamp of the version read
    /// (the provisional one for the transaction's own write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mvcc_ts: Option<String>,
    /// A predicate read's `crdb_internal_mvcc_timestamp` per row returned, in row order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mvcc_ts_rows: Option<Vec<String>>,
}

/// Parses an HLC timestamp as CockroachDB prints it: the DECIMAL `WALL.LOGICAL` with ten
/// logical digits (`cluster_logical_timestamp()`, `crdb_internal_mvcc_timestamp`, a
/// changefeed's `updated` and `resolved`, all made by Go's `%d.%010d`). A shorter
/// fraction is read as a decimal (`5.1` is logical 1000000000), a trailing `?` (the
/// synthetic flag some versions print) is dropped.
///
/// # Errors
/// Text that is not of that shape, naming it.
pub fn parse_hlc(text: &str) -> Result<Timestamp, String> {
    let t = text.trim().trim_end_matches('?');
    let padded;
    let t = match t.split_once('.') {
        Some((wall, logical)) if logical.len() < 10 && logical.bytes().all(|b| b.is_ascii_digit()) => {
            padded = format!("{wall}.{logical:0<10}");
            padded.as_str()
        }
        Some((_, logical)) if logical.len() > 10 => {
            return Err(format!("HLC timestamp {text:?}: more than 10 logical digits"));
        }
        _ => t,
    };
    Timestamp::parse_str(t).map_err(|e| format!("HLC {e}"))
}

/// Refuses a history in which a transaction's predicate update or delete writes a row that
/// another of its operations also writes: the changefeed shows only the row's last change
/// in that transaction, so the version the predicate operation installed (and what the
/// checker needs of it) cannot be recovered.
///
/// # Errors
/// [`RecoveryError::Unsupported`] naming the transaction, the operation and the row.
pub fn single_change_per_row(h: &History) -> Result<(), RecoveryError> {
    for t in h.txn_ids() {
        let ops = &h.txn(t).ops;
        let writes = |i: usize| -> Vec<ObjId> {
            match &ops[i] {
                Op::Write { obj, .. } => vec![*obj],
                Op::Update { rows, .. } => rows.iter().map(|r| r.obj).collect(),
                Op::Delete { rows, .. } => rows.iter().map(|r| r.obj).collect(),
                _ => Vec::new(),
            }
        };
        for (i, op) in ops.iter().enumerate() {
            if !matches!(op, Op::Update { .. } | Op::Delete { .. }) {
                continue;
            }
            let mine = writes(i);
            for (j, _) in ops.iter().enumerate().filter(|(j, _)| *j != i) {
                if let Some(obj) = writes(j).into_iter().find(|o| mine.contains(o)) {
                    return Err(RecoveryError::Unsupported {
                        txn: h.txn_label(t),
                        op: i.max(j),
                        message: format!(
                            "ops {} and {} both write {}: a CockroachDB changefeed emits only a row's last change \
                             per transaction, so a transaction with a predicate update or delete must not write \
                             the same rows otherwise (the workload keeps this restriction)",
                            i.min(j),
                            i.max(j),
                            h.object_label(obj)
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
