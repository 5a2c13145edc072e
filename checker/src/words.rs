//! Plain words for reports: what each anomaly class means to a reader of Adya's thesis.

use isocert_history::{History, TxnId};

use crate::{AnomalyKind, EdgeBasis, EdgeKind};

/// One sentence saying what an anomaly of class `kind` is, for summary tables (exhaustive on
/// purpose: a new class needs its sentence).
pub(crate) fn class_meaning(kind: AnomalyKind) -> &'static str {
    match kind {
        AnomalyKind::G0 => "write cycle: transactions overwrote each other's versions in a circle",
        AnomalyKind::G1a => "aborted read: a committed transaction saw a version an aborted transaction wrote",
        AnomalyKind::G1b => "intermediate read: a committed transaction saw a version its writer later overwrote",
        AnomalyKind::G1c => "circular information flow: a cycle of write and read dependencies",
        AnomalyKind::G2Item => {
            "a cycle with an item anti-dependency (one transaction missed another's write): write skew, lost update"
        }
        AnomalyKind::G2 => "a cycle with a predicate anti-dependency (a predicate read missed a later write): phantoms",
        AnomalyKind::GSi => "a snapshot isolation violation: a transaction missed a write committed before it started, or saw one committed after",
        AnomalyKind::NonMonotonicRead => {
            "non-monotonic read: a read saw a version older than one its transaction had already observed"
        }
        AnomalyKind::FracturedRead => {
            "fractured read: a transaction saw part of another's writes (or of its session's) but missed the rest"
        }
        AnomalyKind::CausalityViolation => {
            "causality violation: a transaction missed a write that causally precedes it (session order and reads)"
        }
        AnomalyKind::GarbageRead => "a read returned a value that no transaction wrote",
        AnomalyKind::InternalInconsistency => "a transaction did not see its own earlier write or read",
        AnomalyKind::DuplicateWrite => "two writes installed the same value of one object, so reads of it are ambiguous",
        AnomalyKind::ResultSetMismatch => "a predicate read returned rows that differ from the versions it evaluated",
        AnomalyKind::CertificateContradiction => "the history and the database's certificate disagree",
        AnomalyKind::ReplayDivergence => "replaying the transactions in the serialization order gives a different read",
        AnomalyKind::IncompatibleOrder => "two reads of one list disagree on its order",
        AnomalyKind::DuplicateElements => "a list read holds some element twice",
        AnomalyKind::Session => "a session saw its own earlier transactions out of order",
        AnomalyKind::Int => "a read inside a transaction did not follow the transaction's own writes",
        AnomalyKind::Ext => "a read did not see the latest write of its snapshot",
        AnomalyKind::NoConflict => "two concurrent transactions wrote the same object (snapshot isolation forbids it)",
        AnomalyKind::StatementLostUpdate => {
            "lost update inside one statement: an update's new row was not computed from the version it replaced"
        }
        AnomalyKind::NonQualifyingWrite => {
            "a statement updated or deleted a row whose newest version no longer satisfied its WHERE"
        }
        AnomalyKind::RealTime => {
            "real-time violation: no serial order explains the reads and puts each transaction after those that \
             completed before it was invoked"
        }
    }
}

/// The name of a dependency kind in Adya's words.
pub(crate) fn edge_meaning(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::Ww => "write-dependency",
        EdgeKind::Wr => "read-dependency",
        EdgeKind::Rw => "anti-dependency",
        EdgeKind::PredicateWr => "predicate read-dependency",
        EdgeKind::PredicateRw => "predicate anti-dependency",
        EdgeKind::StartDep => "start-dependency",
        EdgeKind::Session => "session order",
        EdgeKind::RealTime => "real-time order",
    }
}

/// What an edge's basis means, for the HTML report's table of dependencies.
pub(crate) fn basis_meaning(basis: EdgeBasis) -> &'static str {
    match basis {
        EdgeBasis::Observed => "observed: the history shows it",
        EdgeBasis::Derived => "derived: it follows from the certificate or from what the reads imply",
        EdgeBasis::Chosen => "chosen by the solver among the orders still possible",
    }
}

/// "T5's operation 3": operation index `i` (0-based, as in the file's `ops`) counted from 1,
/// the way a person reads a transaction (the HTML lists number them the same way).
pub(crate) fn nth_op(h: &History, t: TxnId, i: u32) -> String {
    format!("{}'s operation {}", h.txn_label(t), i + 1)
}
