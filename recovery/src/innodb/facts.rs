//! The facts a MariaDB session records per transaction (written into the history's `meta`
//! by the adapter from this very struct, read back here), and the binary-log positions
//! they name. docs/MARIADB.md documents the fields.

use isocert_history::{History, Transaction, TxnId};
use serde::{Deserialize, Serialize};

use crate::RecoveryError;

/// What a MariaDB session records about one transaction attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnoDbTxnFacts {
    /// The level, as isocert spells it (`repeatable-read`).
    pub isolation: String,
    /// `@@gtid_binlog_pos` before the transaction started, when no snapshot position is
    /// known (an older client): a lower bound of what it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_gtid: Option<String>,
    /// `binlog_snapshot_file:binlog_snapshot_position` of the transaction's consistent
    /// snapshot (`START TRANSACTION WITH CONSISTENT SNAPSHOT`, taken at every level): the
    /// storage engine had committed exactly the transactions whose commit ends at or before
    /// it. At REPEATABLE READ plain SELECTs read it; at other levels every read saw it or
    /// something newer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// `@@last_gtid` after COMMIT: the transaction's GTID (`domain-server-sequence`), absent
    /// for a transaction that wrote nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// `@@gtid_binlog_pos` just before COMMIT, while the transaction held its locks: every
    /// version it read was in the binary log by then, and a version a locking read saw was
    /// still the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_commit_gtid: Option<String>,
    /// Why the attempt failed: the server's error number, `connection` or `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a MariaDB session records per operation: for an aggregate, the rows it ranged
/// over (read by the same statement through a window function), so recovery knows which
/// version of each row the aggregate saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnoDbOpFacts {
    /// The rows an aggregate ranged over as `[key, value]` pairs, by key; the value is the
    /// table's unique value column, named by `value_column`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregated_rows: Option<Vec<[i64; 2]>>,
    /// The column whose value `aggregated_rows` lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_column: Option<String>,
    /// An item read made under a statement's row locks (a current read: a row an UPDATE
    /// matched and left as it was), which saw the newest version, not the snapshot's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub locking: bool,
}

/// The sequence number of a GTID or GTID position (`0-1-42` -> 42). A position listing
/// several replication domains (`0-1-42,1-2-7`) gives the one of domain 0, else the first.
pub fn gtid_seq(text: &str) -> Option<u64> {
    let parse = |g: &str| -> Option<(u64, u64)> {
        let mut parts = g.trim().split('-');
        let domain = parts.next()?.parse().ok()?;
        let _server: u64 = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some((domain, seq))
    };
    let all: Vec<(u64, u64)> =
        text.split(',').filter(|g| !g.trim().is_empty()).map(parse).collect::<Option<_>>()?;
    all.iter().find(|(d, _)| *d == 0).or(all.first()).map(|(_, s)| *s)
}

/// A binary-log position as one ordered number: the file's sequence number (the digits
/// after the last `.` of `binlog.000042`) in the high 32 bits, the offset in the low ones.
/// The change capture and the snapshot facts both use it, so they compare directly.
pub fn binlog_key(file: &str, offset: u64) -> Option<u64> {
    let number: u64 = file.rsplit_once('.')?.1.parse().ok()?;
    (offset < 1 << 32 && number < 1 << 32).then_some(number << 32 | offset)
}

/// [`binlog_key`] of `file:offset` text (the `snapshot` fact).
pub fn binlog_key_text(text: &str) -> Option<u64> {
    let (file, offset) = text.rsplit_once(':')?;
    binlog_key(file, offset.parse().ok()?)
}

/// The facts of operation `op` of transaction `t` (defaults when it has none).
pub(crate) fn read_op(h: &History, t: TxnId, op: usize) -> Result<InnoDbOpFacts, RecoveryError> {
    crate::meta::op_facts(h, t, op)
}

/// The facts of operation `op` of `txn` (a live rule has the transaction, not the history).
pub(crate) fn read_op_of(txn: &Transaction, op: usize) -> Result<InnoDbOpFacts, RecoveryError> {
    crate::meta::facts_of_op(txn, op)
}

/// The facts of every transaction of `h` (defaults for a transaction without `meta`).
pub(crate) fn read_facts(h: &History) -> Result<Vec<InnoDbTxnFacts>, RecoveryError> {
    h.txn_ids().map(|t| read_txn(h.txn(t))).collect()
}

/// The facts of `txn`, their GTIDs and positions checked.
pub(crate) fn read_txn(txn: &Transaction) -> Result<InnoDbTxnFacts, RecoveryError> {
    let bad = |field: &str, message: String| RecoveryError::Meta {
        txn: format!("T{}", txn.name),
        field: field.into(),
        message,
    };
    let facts: InnoDbTxnFacts = crate::meta::facts_of_txn(txn)?;
    for (field, value) in [
        ("start_gtid", &facts.start_gtid),
        ("gtid", &facts.gtid),
        ("before_commit_gtid", &facts.before_commit_gtid),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            if gtid_seq(v).is_none() {
                return Err(bad(field, format!("{v:?} is not a GTID (domain-server-sequence)")));
            }
        }
    }
    if let Some(s) = &facts.snapshot {
        if binlog_key_text(s).is_none() {
            return Err(bad("snapshot", format!("{s:?} is not a binary log position (file:offset)")));
        }
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtids_and_positions_parse_and_order() {
        assert_eq!(gtid_seq("0-1-42"), Some(42));
        assert_eq!(gtid_seq("1-2-7,0-1-42"), Some(42));
        assert_eq!(gtid_seq("3-1-9"), Some(9));
        assert_eq!(gtid_seq(""), None);
        assert_eq!(gtid_seq("0-1"), None);
        assert_eq!(gtid_seq("0-1-x"), None);
        let a = binlog_key("binlog.000001", 877).unwrap();
        let b = binlog_key("binlog.000002", 4).unwrap();
        assert!(a < b);
        assert_eq!(binlog_key_text("binlog.000001:877"), Some(a));
        assert_eq!(binlog_key_text("binlog:877"), None);
    }
}
