//! The raw version log: committed transactions in commit order, as a change stream reports them.

use std::sync::Arc;

use isocert_history::Scalar;

/// One row change of a committed transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table the row belongs to (without schema).
    pub table: Arc<str>,
    /// The row's primary key.
    pub key: Scalar,
    /// The new row as (column, value) pairs, primary key included; `None` for a delete.
    pub row: Option<Vec<(Arc<str>, Scalar)>>,
}

/// A committed transaction as the change stream reports it.
///
/// Its identity and positions are opaque outside its adapter and recovery rule: only the
/// adapter that captured the log and the rule that reads it give them meaning (the field
/// names are PostgreSQL's, where they began). Every other component only compares
/// positions for order.
#[derive(Clone, Debug, PartialEq)]
pub struct CommittedTxn {
    /// The database's id of the transaction as the stream carries it, opaque (PostgreSQL:
    /// the 32-bit xid of Begin; MariaDB: the binlog Xid event's id; 0 when the stream has
    /// none, as in changefeeds).
    pub xid: u64,
    /// Position of the commit in the stream, opaque, strictly increasing (PostgreSQL: the
    /// commit LSN; MariaDB: binlog file number << 32 | offset of the commit event).
    pub commit_lsn: u64,
    /// Position just past the commit, opaque: acknowledging it to the database
    /// acknowledges this transaction and every earlier one.
    pub end_lsn: u64,
    /// The commit time the database reported, in the adapter's unit (PostgreSQL:
    /// microseconds since 2000-01-01; MariaDB: the event header's Unix seconds).
    pub commit_time: i64,
    /// The row changes in the order the transaction made them (a row may change twice).
    pub changes: Vec<RowChange>,
}

/// Committed transactions in commit order, deduplicated by commit position so that a
/// consumer that reconnects and receives a transaction again records it once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawLog {
    txns: Vec<CommittedTxn>,
}

impl RawLog {
    /// An empty log.
    pub fn new() -> Self {
        RawLog::default()
    }

    /// Appends `txn` unless a transaction at or after its commit position is already
    /// recorded (a redelivery after a reconnect); returns whether it was appended.
    pub fn push(&mut self, txn: CommittedTxn) -> bool {
        if self.last_commit_lsn().is_some_and(|last| txn.commit_lsn <= last) {
            return false;
        }
        self.txns.push(txn);
        true
    }

    /// The commit position of the last recorded transaction.
    pub fn last_commit_lsn(&self) -> Option<u64> {
        self.txns.last().map(|t| t.commit_lsn)
    }

    /// The recorded transactions, in commit order.
    pub fn txns(&self) -> &[CommittedTxn] {
        &self.txns
    }

    /// Number of recorded transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Number of recorded row changes.
    pub fn change_count(&self) -> usize {
        self.txns.iter().map(|t| t.changes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(lsn: u64) -> CommittedTxn {
        CommittedTxn { xid: lsn, commit_lsn: lsn, end_lsn: lsn + 1, commit_time: 0, changes: Vec::new() }
    }

    #[test]
    fn redelivered_transactions_are_recorded_once() {
        let mut log = RawLog::new();
        assert!(log.push(txn(10)));
        assert!(log.push(txn(20)));
        assert!(!log.push(txn(10)));
        assert!(!log.push(txn(20)));
        assert!(log.push(txn(30)));
        assert_eq!(log.txns().iter().map(|t| t.commit_lsn).collect::<Vec<_>>(), vec![10, 20, 30]);
    }
}
