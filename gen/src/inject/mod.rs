//! Injected anomalies: a minimal change to a valid generated history so that exactly one
//! anomaly appears.
//!
//! Most kinds append a few transactions after everything generated (timestamps after every
//! other event, so nothing else sees them) on existing keys 0, 1 and 2 or on fresh keys;
//! `garbage-read` and `result-set-mismatch` edit one committed transaction in the middle of
//! the history; `certificate-contradiction` edits the certificate. docs/GEN.md lists, per
//! kind, the shape and the levels that must reject it.

mod edit;
mod shapes;

use std::fmt;
use std::str::FromStr;

use crate::record::Sink;
use crate::sim::Sim;
use crate::GenError;

pub(crate) use edit::maybe_edit;

/// An anomaly the generator can plant. Names are the checker's kebab-case anomaly names,
/// plus the classic shapes `lost-update`, `write-skew` and `phantom`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Injection {
    /// Write cycle (G0): two transactions write x and y; the version orders disagree.
    G0,
    /// Aborted read (G1a): a committed transaction reads an aborted transaction's write.
    G1a,
    /// Intermediate read (G1b): a transaction reads a value its writer overwrote.
    G1b,
    /// Circular information flow (G1c): two transactions read each other's writes.
    G1c,
    /// Item anti-dependency cycle (G2-item): three concurrent transactions, each reads the
    /// key the next one overwrites.
    G2Item,
    /// Predicate anti-dependency cycle (G2): two concurrent transactions each insert a row
    /// into the range the other selected.
    G2,
    /// Snapshot interference (G-SIa): a transaction reads a write that committed after it started.
    GSi,
    /// Lost update: two concurrent transactions read x and both write it (G-SIb, G2-item).
    LostUpdate,
    /// Write skew: two concurrent transactions read x and y, one writes x, the other y.
    WriteSkew,
    /// Phantom: a transaction's second select sees a row that a concurrent transaction
    /// inserted after its first select.
    Phantom,
    /// Garbage read: a read returns a value that nobody wrote.
    GarbageRead,
    /// Internal inconsistency: a transaction writes x twice and reads back its first write.
    InternalInconsistency,
    /// Duplicate write: two transactions install the same value of x.
    DuplicateWrite,
    /// Result-set mismatch: a select omits a row its version set says matched.
    ResultSetMismatch,
    /// Certificate contradiction: the version order of an object names a transaction that
    /// did not write it.
    CertificateContradiction,
    /// Chronos Session axiom: a transaction starts before its session's previous one commits.
    Session,
    /// Chronos Int axiom: a read after the transaction's own write returns another value.
    Int,
    /// Chronos Ext axiom: a read returns a committed value older than its snapshot's.
    Ext,
    /// Chronos NoConflict axiom: two concurrent transactions both write x.
    NoConflict,
}

const LEVELS_ALL: &[&str] =
    &["read-uncommitted", "read-committed", "repeatable-read", "snapshot-isolation", "serializable"];
const LEVELS_G1: &[&str] = &["read-committed", "repeatable-read", "snapshot-isolation", "serializable"];
const LEVELS_G2_ITEM: &[&str] = &["repeatable-read", "serializable"];
const LEVELS_SER: &[&str] = &["serializable"];
const LEVELS_SI: &[&str] = &["snapshot-isolation"];
const LEVELS_SI_SER: &[&str] = &["snapshot-isolation", "serializable"];
const LEVELS_RR_SI_SER: &[&str] = &["repeatable-read", "snapshot-isolation", "serializable"];

impl Injection {
    /// Every kind, in the order docs/GEN.md lists them.
    pub const ALL: [Injection; 19] = [
        Injection::G0,
        Injection::G1a,
        Injection::G1b,
        Injection::G1c,
        Injection::G2Item,
        Injection::G2,
        Injection::GSi,
        Injection::LostUpdate,
        Injection::WriteSkew,
        Injection::Phantom,
        Injection::GarbageRead,
        Injection::InternalInconsistency,
        Injection::DuplicateWrite,
        Injection::ResultSetMismatch,
        Injection::CertificateContradiction,
        Injection::Session,
        Injection::Int,
        Injection::Ext,
        Injection::NoConflict,
    ];

    /// The kebab-case name (`g2-item`).
    pub fn as_str(self) -> &'static str {
        match self {
            Injection::G0 => "g0",
            Injection::G1a => "g1a",
            Injection::G1b => "g1b",
            Injection::G1c => "g1c",
            Injection::G2Item => "g2-item",
            Injection::G2 => "g2",
            Injection::GSi => "g-si",
            Injection::LostUpdate => "lost-update",
            Injection::WriteSkew => "write-skew",
            Injection::Phantom => "phantom",
            Injection::GarbageRead => "garbage-read",
            Injection::InternalInconsistency => "internal-inconsistency",
            Injection::DuplicateWrite => "duplicate-write",
            Injection::ResultSetMismatch => "result-set-mismatch",
            Injection::CertificateContradiction => "certificate-contradiction",
            Injection::Session => "session",
            Injection::Int => "int",
            Injection::Ext => "ext",
            Injection::NoConflict => "no-conflict",
        }
    }

    /// The isolation levels (long names, as `isocert check --isolation` takes them) whose
    /// definition (the default one, with session order) the injected history violates, given
    /// its certificate and timestamps (start-dependencies for snapshot isolation). A checker that serializes by
    /// commit timestamp (Enne with the generated serialization order, Chronos's SER mode)
    /// may reject more; docs/GEN.md says where.
    pub fn rejected_at(self) -> &'static [&'static str] {
        match self {
            Injection::G0
            | Injection::GarbageRead
            | Injection::InternalInconsistency
            | Injection::DuplicateWrite
            | Injection::ResultSetMismatch
            | Injection::CertificateContradiction
            | Injection::Int => LEVELS_ALL,
            Injection::G1a | Injection::G1b | Injection::G1c => LEVELS_G1,
            Injection::G2Item | Injection::WriteSkew => LEVELS_G2_ITEM,
            Injection::G2 => LEVELS_SER,
            Injection::GSi | Injection::NoConflict | Injection::Ext | Injection::Session => LEVELS_SI,
            Injection::LostUpdate => LEVELS_RR_SI_SER,
            Injection::Phantom => LEVELS_SI_SER,
        }
    }

    /// Whether the anomaly exists only under the levels' default definition, with session
    /// order (`rejected_at`): a `session` injection (a transaction starting before its
    /// session's previous one committed) is snapshot isolation's violation of session order;
    /// without session order (Adya's definitions, `--no-session-order`) every checker
    /// accepts it. At serializable it is valid either way: only the order matters there,
    /// and the predecessor can still come first.
    pub fn needs_session_order(self) -> bool {
        self == Injection::Session
    }

    /// Whether the kind needs predicate operations (the SQL table and `predicate_ratio > 0`).
    pub fn needs_predicates(self) -> bool {
        matches!(self, Injection::G2 | Injection::Phantom | Injection::ResultSetMismatch)
    }

    /// How many keys the shape uses.
    pub fn keys_needed(self) -> usize {
        match self {
            Injection::G2Item => 3,
            Injection::G0 | Injection::G1c | Injection::WriteSkew | Injection::GSi | Injection::Session => 2,
            _ => 1,
        }
    }

    /// Whether the kind edits a generated transaction (rather than appending new ones).
    pub fn edits_in_place(self) -> bool {
        matches!(self, Injection::CertificateContradiction)
    }
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Injection {
    type Err = GenError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Injection::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            GenError::UnknownName(isocert_history::UnknownName {
                what: "injection kind",
                given: s.into(),
                choices: "g0, g1a, g1b, g1c, g2-item, g2, g-si, lost-update, write-skew, phantom, garbage-read, \
                       internal-inconsistency, duplicate-write, result-set-mismatch, certificate-contradiction, \
                       session, int, ext, no-conflict",
            })
        })
    }
}

/// The injection's progress during a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Planted {
    pub(crate) kind: Option<Injection>,
    /// In-place edits target the first eligible transaction with at least this id.
    pub(crate) edit_from: u32,
    /// Whether the in-place edit happened.
    pub(crate) edited: bool,
    /// Rows the injection added to the SQL table beyond `keys`.
    pub(crate) extra_rows: usize,
}

impl Planted {
    pub(crate) fn new(kind: Option<Injection>, txns: usize) -> Self {
        Planted { kind, edit_from: (txns / 2) as u32, edited: false, extra_rows: 0 }
    }
}

/// Plants the anomaly after the generated transactions, when the kind needs it.
pub(crate) fn finish(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<(), GenError> {
    let Some(kind) = sim.planted.kind else { return Ok(()) };
    match kind {
        Injection::GarbageRead | Injection::ResultSetMismatch if sim.planted.edited => Ok(()),
        Injection::GarbageRead => shapes::garbage_read(sim, sink),
        Injection::ResultSetMismatch => shapes::result_set_mismatch(sim, sink),
        Injection::CertificateContradiction => edit::certificate_contradiction(sim),
        _ => shapes::append(sim, sink, kind),
    }
}
