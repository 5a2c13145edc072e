//! The one error type of certificate recovery.

/// Why a certificate could not be recovered from a history and a raw version log.
///
/// Every variant names the transaction (by its label in the history, e.g. `T17`) and the
/// fact at fault, so that a client bug, an incomplete log and a database bug can be told apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryError {
    /// An adapter fact in a transaction's or operation's `meta` is missing or malformed.
    #[error("{txn}: meta field {field}: {message}")]
    Meta {
        /// The transaction label.
        txn: String,
        /// The field, e.g. `xid` or `ops[3].meta.snapshot`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Two history transactions claim the same transaction id.
    #[error("{first} and {second} both record xid {xid}")]
    DuplicateXid {
        /// The id.
        xid: u64,
        /// The first transaction.
        first: String,
        /// The second transaction.
        second: String,
    },
    /// The log holds a committed transaction that no history transaction matches.
    #[error("the replication stream has a committed transaction (xid {xid}, commit LSN {lsn}) that the history does not record; its first change: {change}")]
    UnknownWriter {
        /// The stream's transaction id.
        xid: u64,
        /// Its commit position, as PostgreSQL prints it.
        lsn: String,
        /// Its first row change, for the reader.
        change: String,
    },
    /// The history says the transaction aborted, but the database committed it.
    #[error("{txn} is recorded as aborted but the replication stream committed it (xid {xid})")]
    AbortedButCommitted {
        /// The transaction label.
        txn: String,
        /// Its xid.
        xid: u64,
    },
    /// A committed transaction's writes are absent from the log.
    #[error(
        "{txn} committed ({}) but its write of {object} is not in the replication stream",
        .xid.map_or_else(|| "no xid recorded".to_string(), |x| format!("xid {x}"))
    )]
    MissingWrite {
        /// The transaction label.
        txn: String,
        /// Its xid, if the client recorded one.
        xid: Option<u64>,
        /// The object written.
        object: String,
    },
    /// The log shows a write the history's transaction does not record.
    #[error(
        "the replication stream shows {txn} writing {object} = {value}, which the history does not record"
    )]
    UnrecordedWrite {
        /// The transaction label.
        txn: String,
        /// The object.
        object: String,
        /// The value the stream carries.
        value: String,
    },
    /// The history and the log disagree on the value a transaction installed.
    #[error("{txn} installed {object} = {logged} according to the replication stream, but the history records {recorded}")]
    ValueMismatch {
        /// The transaction label.
        txn: String,
        /// The object.
        object: String,
        /// What the stream says.
        logged: String,
        /// What the history says.
        recorded: String,
    },
    /// The history's claimed initial version of a row is not the one its own initial load
    /// (a value it may see) left before its first snapshot.
    #[error("the history's initial version of {object} is {claimed}, but {found}")]
    InitialMismatch {
        /// The object.
        object: String,
        /// What the history claims.
        claimed: String,
        /// What the log shows before the history's first snapshot.
        found: String,
    },
    /// A live run's transactions cannot be given final ticks as they complete (an outcome
    /// only the whole log settles, a stream out of the run's order); recovery after the
    /// run still can.
    #[error("live ticks: {message}")]
    Live {
        /// What stopped them.
        message: String,
    },
    /// A history operation the PostgreSQL rule cannot place (e.g. a list append).
    #[error("{txn} op {op}: {message}")]
    Unsupported {
        /// The transaction label.
        txn: String,
        /// The operation index.
        op: usize,
        /// What is not supported.
        message: String,
    },
    /// The matches oracle failed on a row while recovering what an UPDATE/DELETE re-evaluated.
    #[error("{txn} op {op}: the matches oracle failed on {object}: {message}")]
    Oracle {
        /// The transaction label.
        txn: String,
        /// The operation index.
        op: usize,
        /// The object.
        object: String,
        /// The oracle's message.
        message: String,
    },
}
