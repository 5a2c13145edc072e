//! What every recovery rule returns ([`Recovered`]: the certificate, its [`RecoveryStats`]
//! and warnings) and how a rule asks which rows a predicate matches ([`RowMatcher`]): shared
//! by the PostgreSQL, InnoDB and timestamp-order rules, the adapters and the commands.

use isocert_history::{Certificate, History, ObjId, PredId, ValueId};

/// Decides whether version `value` of object `obj` matches predicate `pred`.
pub type RowMatcher<'a> = &'a dyn Fn(&History, PredId, ObjId, ValueId) -> Result<bool, String>;

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
    /// Operations whose read time the database did not give and whose versions the bounds
    /// known leave undecided: marked in the certificate's `hidden_reads`
    /// (`read-time-unknown`), so the check is uncertified (exit 2).
    pub unknown_read_times: usize,
    /// Returned versions that were not the newest while their reader ran, by the log's
    /// positions (taken from the row's value anyway).
    pub outside_window: usize,
    /// Where the timestamp-ordering rule's facts came from (the other rules take every
    /// fact from the database's log and the snapshots it reported).
    pub sources: FactSources,
    /// Whether the recovered dependencies have a cycle, so that no order respects them all
    /// and the serialization order falls back to commit visibility (only a history that
    /// is not serializable has one; Enne will then report it).
    pub serialization_cycle: bool,
}

/// Where the facts of a certificate recovered by timestamp ordering came from (issue 46:
/// a fact is what the database told, never a guess), for the run report and `recover`'s
/// summary (docs/RECOVERY.md, "Where each fact comes from").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FactSources {
    /// Commit timestamps read from the database's own log (changefeed `updated`, oplog or
    /// change-stream cluster time, TiDB's MVCC API).
    pub commits_from_log: usize,
    /// Commit timestamps the database returned to the client and no log confirms (Dgraph's
    /// `commit_ts`, a commit whose writes the log does not show).
    pub commits_returned: usize,
    /// Reads given versions at a read time the database returned (TiDB's and Dgraph's
    /// `start_ts`, MongoDB's `atClusterTime`, a serializable CockroachDB transaction's
    /// commit timestamp).
    pub reads_at_returned_time: usize,
    /// Reads given versions within bounds, every time in which gives the same versions:
    /// the versions the database returned (`crdb_internal_mvcc_timestamp`) and a bracket
    /// the client measured (MongoDB's `operationTime` before and after).
    pub reads_within_bounds: usize,
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
