//! What a check finds: the verdict, the anomalies and the evidence behind each.

use std::fmt;

use isocert_history::{ObjId, OpRef, TxnId};
use rustc_hash::FxHashMap;

use crate::{CheckerKind, IsolationLevel, SessionOrder};

/// The kind of an anomaly. Cyclic kinds follow Adya's phenomena; the others are reads or
/// certificates that no isolation level can explain; the Chronos/Aion axioms come last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AnomalyKind {
    /// Write cycle: a cycle of write-dependencies only.
    G0,
    /// Aborted read: a committed transaction read a version written by an aborted one.
    G1a,
    /// Intermediate read: a committed transaction read a version its writer later overwrote.
    G1b,
    /// Circular information flow: a cycle of write- and read-dependencies.
    G1c,
    /// A cycle with at least one item anti-dependency (and no predicate anti-dependency).
    G2Item,
    /// A cycle with at least one anti-dependency, predicate anti-dependencies included.
    G2,
    /// Snapshot isolation violation: interference (G-SIa) or missed effects (G-SIb)
    /// against the start-dependencies of the transactions' timestamps.
    GSi,
    /// Read committed (Biswas and Enea, black-box): no commit order lets every transaction's
    /// reads be monotonic: a read saw a version older than one the transaction had already
    /// observed through an earlier read (a cycle of session order, read dependencies and
    /// the write orders those reads force).
    NonMonotonicRead,
    /// Read atomic (black-box): a transaction saw some of another transaction's writes but
    /// not all of them, or not those of its session's earlier transactions (a cycle through
    /// the write orders that forces).
    FracturedRead,
    /// Causal consistency (black-box): a transaction missed a write that causally precedes
    /// it through session order and reads (a cycle through the write orders that forces).
    CausalityViolation,
    /// A read returned a value that no transaction wrote.
    GarbageRead,
    /// A transaction read something other than its own latest write or its earlier read.
    InternalInconsistency,
    /// Two writes installed the same value of one object, so reads are ambiguous.
    DuplicateWrite,
    /// A predicate operation's rows differ from what its version set says it matched.
    ResultSetMismatch,
    /// The history and the certificate disagree (a read the version order cannot explain,
    /// a version order naming a transaction that did not write the object, ...).
    CertificateContradiction,
    /// Replay in the serialization order (Enne) returned something the history did not see.
    ReplayDivergence,
    /// Two reads of one list disagree on its order: one is not a prefix of the longest
    /// read (Elle's `incompatible-order`), so no single version order explains both.
    IncompatibleOrder,
    /// A list read holds some element twice (Elle's `duplicate-elements`); each append
    /// happens once, so no version looked like that.
    DuplicateElements,
    /// Chronos/Aion: a session saw its own earlier transactions out of order.
    Session,
    /// Chronos/Aion: internal consistency axiom (reads follow the transaction's own writes).
    Int,
    /// Chronos/Aion: external consistency axiom (reads see the snapshot's latest writes).
    Ext,
    /// Chronos/Aion: two concurrent transactions wrote the same object (SI's first-committer-wins).
    NoConflict,
    /// A cycle through real-time order: no serial order both explains the reads and puts
    /// every transaction after those that completed before it was invoked (strict
    /// serializability; linearizability for single-operation transactions).
    RealTime,
    /// A statement-level promise the database documents (history header `promises`,
    /// `write-from-replaced`): an update installed a row that is not its `SET` evaluated on
    /// the version it replaced, a lost update inside one statement (Berenson et al.'s cursor
    /// stability, Adya's G-cursor, at the grain of a statement).
    StatementLostUpdate,
    /// A statement-level promise the database documents (`write-to-qualifying`): an update
    /// or delete replaced a version that does not satisfy its `WHERE`.
    NonQualifyingWrite,
}

impl AnomalyKind {
    /// Every kind, in declaration order.
    pub const ALL: [AnomalyKind; 25] = [
        AnomalyKind::G0,
        AnomalyKind::G1a,
        AnomalyKind::G1b,
        AnomalyKind::G1c,
        AnomalyKind::G2Item,
        AnomalyKind::G2,
        AnomalyKind::GSi,
        AnomalyKind::NonMonotonicRead,
        AnomalyKind::FracturedRead,
        AnomalyKind::CausalityViolation,
        AnomalyKind::GarbageRead,
        AnomalyKind::InternalInconsistency,
        AnomalyKind::DuplicateWrite,
        AnomalyKind::ResultSetMismatch,
        AnomalyKind::CertificateContradiction,
        AnomalyKind::ReplayDivergence,
        AnomalyKind::IncompatibleOrder,
        AnomalyKind::DuplicateElements,
        AnomalyKind::Session,
        AnomalyKind::Int,
        AnomalyKind::Ext,
        AnomalyKind::NoConflict,
        AnomalyKind::RealTime,
        AnomalyKind::StatementLostUpdate,
        AnomalyKind::NonQualifyingWrite,
    ];

    /// The kebab-case name used in JSON and on the command line (`g2-item`).
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "g0",
            AnomalyKind::G1a => "g1a",
            AnomalyKind::G1b => "g1b",
            AnomalyKind::G1c => "g1c",
            AnomalyKind::G2Item => "g2-item",
            AnomalyKind::G2 => "g2",
            AnomalyKind::GSi => "g-si",
            AnomalyKind::NonMonotonicRead => "non-monotonic-read",
            AnomalyKind::FracturedRead => "fractured-read",
            AnomalyKind::CausalityViolation => "causality-violation",
            AnomalyKind::GarbageRead => "garbage-read",
            AnomalyKind::InternalInconsistency => "internal-inconsistency",
            AnomalyKind::DuplicateWrite => "duplicate-write",
            AnomalyKind::ResultSetMismatch => "result-set-mismatch",
            AnomalyKind::CertificateContradiction => "certificate-contradiction",
            AnomalyKind::ReplayDivergence => "replay-divergence",
            AnomalyKind::IncompatibleOrder => "incompatible-order",
            AnomalyKind::DuplicateElements => "duplicate-elements",
            AnomalyKind::Session => "session",
            AnomalyKind::Int => "int",
            AnomalyKind::Ext => "ext",
            AnomalyKind::NoConflict => "no-conflict",
            AnomalyKind::RealTime => "real-time",
            AnomalyKind::StatementLostUpdate => "statement-lost-update",
            AnomalyKind::NonQualifyingWrite => "non-qualifying-write",
        }
    }

    /// The kind named `name` (kebab-case, as [`AnomalyKind::as_str`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        AnomalyKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether a history showing this anomaly violates `level`. G0 violates every level,
    /// G1 everything above read-uncommitted, G2-item repeatable-read and serializable, G2
    /// serializable, G-SI snapshot isolation; reads nobody can explain violate every level.
    /// The black-box kinds: a non-monotonic read violates everything above read-uncommitted,
    /// a fractured read read atomic and the levels above it that forbid G2-item or G-SI, a
    /// causality violation causal consistency, snapshot isolation and serializable. Strict
    /// serializability forbids what serializable does, and cycles through real time. The
    /// statement-level kinds break a promise the database makes for every statement it
    /// runs, whatever the level (they are only looked for where the history declares it).
    pub fn violates(self, level: IsolationLevel) -> bool {
        use IsolationLevel::*;
        match self {
            AnomalyKind::G1a | AnomalyKind::G1b | AnomalyKind::G1c | AnomalyKind::NonMonotonicRead => {
                level != ReadUncommitted
            }
            AnomalyKind::FracturedRead => !matches!(level, ReadUncommitted | ReadCommitted),
            AnomalyKind::CausalityViolation => {
                matches!(level, Causal | SnapshotIsolation | Serializable | StrictSerializable)
            }
            AnomalyKind::G2Item => matches!(level, RepeatableRead | Serializable | StrictSerializable),
            AnomalyKind::G2 => matches!(level, Serializable | StrictSerializable),
            AnomalyKind::RealTime => level == StrictSerializable,
            AnomalyKind::GSi | AnomalyKind::NoConflict => level == SnapshotIsolation,
            _ => true,
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a dependency edge between two transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EdgeKind {
    /// Write-dependency: `to` installed the next version of an object after `from`'s.
    Ww,
    /// Read-dependency: `to` read a version `from` installed.
    Wr,
    /// Item anti-dependency: `from` read a version and `to` installed the next one.
    Rw,
    /// Predicate read-dependency: `from` installed a version that changed the matches of
    /// a predicate read by `to`, and `to` saw that version or a later one.
    PredicateWr,
    /// Predicate anti-dependency: `from`'s predicate read saw a version, and `to`
    /// installed a later version that changes the predicate's matches.
    PredicateRw,
    /// Start-dependency: `from` committed before `to` started (snapshot isolation).
    StartDep,
    /// Session order: `from` came before `to` in the same session.
    Session,
    /// Real-time order: `from` completed before `to` was invoked (strict serializability).
    RealTime,
}

impl EdgeKind {
    /// The kebab-case name (`predicate-rw`).
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::PredicateWr => "predicate-wr",
            EdgeKind::PredicateRw => "predicate-rw",
            EdgeKind::StartDep => "start-dep",
            EdgeKind::Session => "session",
            EdgeKind::RealTime => "real-time",
        }
    }

    /// Whether this is an anti-dependency (item or predicate).
    pub fn is_anti(self) -> bool {
        matches!(self, EdgeKind::Rw | EdgeKind::PredicateRw)
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an edge of a counterexample rests on, kept apart from parsing to the report so that
/// nothing inferred or chosen is ever shown as observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeBasis {
    /// The history shows it: a read returned the version (wr), the session's order, the
    /// clients' real times.
    Observed,
    /// It follows from the certificate (its version order, version sets or timestamps) or,
    /// without one, from what the reads imply: a read-modify-write, the order an Elle list
    /// read shows, an order every other choice would close a forbidden cycle with.
    Derived,
    /// A solver chose it among the orders that remain possible; another choice may exist.
    Chosen,
}

impl EdgeBasis {
    /// The basis an edge of `kind` has when nothing was chosen: read dependencies, session
    /// and real-time order are observed, every other kind is derived.
    pub fn of_kind(kind: EdgeKind) -> EdgeBasis {
        match kind {
            EdgeKind::Wr | EdgeKind::Session | EdgeKind::RealTime => EdgeBasis::Observed,
            _ => EdgeBasis::Derived,
        }
    }

    /// The name used in reports and JSON (`observed`, `derived`, `chosen`).
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeBasis::Observed => "observed",
            EdgeBasis::Derived => "derived",
            EdgeBasis::Chosen => "chosen",
        }
    }
}

impl fmt::Display for EdgeBasis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One explained edge of a counterexample cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The transaction the dependency starts at.
    pub from: TxnId,
    /// The transaction that depends on `from`.
    pub to: TxnId,
    /// The kind of dependency.
    pub kind: EdgeKind,
    /// The object the dependency is about (none for start-dependencies and session order).
    pub obj: Option<ObjId>,
    /// The reading or predicate operation involved, if any.
    pub op: Option<OpRef>,
    /// One sentence a person can check against the files, e.g. "T12 read x=4 written by
    /// T7; T19 installed the next version of x".
    pub explanation: String,
    /// Whether the history shows the edge, it is derived, or a solver chose it.
    pub basis: EdgeBasis,
}

/// One anomaly with its evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anomaly {
    /// What kind of anomaly.
    pub kind: AnomalyKind,
    /// The transactions involved (the cycle's, in cycle order, or the reader and writers).
    pub txns: Vec<TxnId>,
    /// The operations involved (the offending reads, the predicate operations).
    pub ops: Vec<OpRef>,
    /// The objects involved.
    pub objects: Vec<ObjId>,
    /// What happened, in a sentence or two.
    pub explanation: String,
    /// For cyclic anomalies, the shortest cycle found, each edge explained; empty otherwise.
    pub cycle: Vec<Edge>,
}

impl Anomaly {
    /// A non-cyclic anomaly.
    pub fn new(kind: AnomalyKind, txns: Vec<TxnId>, explanation: impl Into<String>) -> Self {
        Anomaly {
            kind,
            txns,
            ops: Vec::new(),
            objects: Vec::new(),
            explanation: explanation.into(),
            cycle: Vec::new(),
        }
    }

    /// Adds the operations involved.
    pub fn with_ops(mut self, ops: Vec<OpRef>) -> Self {
        self.ops = ops;
        self
    }

    /// Adds the objects involved.
    pub fn with_objects(mut self, objects: Vec<ObjId>) -> Self {
        self.objects = objects;
        self
    }
}

/// Sizes of what a checker looked at, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Transactions in the history.
    pub txns: usize,
    /// Committed transactions (and unknown ones the certificate shows committed).
    pub committed: usize,
    /// Operations in the history.
    pub ops: usize,
    /// Dependency edges built (Emme), or operations replayed (Enne).
    pub edges: usize,
    /// Emme: item reads whose value several versions of the object hold (typically "no
    /// row" of an object that was unborn and later deleted), whose version the
    /// certificate's version sets named.
    pub reads_resolved_by_certificate: usize,
    /// Emme: such reads the certificate names no version for; they add no dependency
    /// edges, so a cycle through them goes unseen.
    pub ambiguous_reads: usize,
}

/// The result of a check: the level, the checker that ran, and every anomaly found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The level checked.
    pub level: IsolationLevel,
    /// The checker that actually ran (never [`CheckerKind::Auto`]).
    pub checker: CheckerKind,
    /// Which definition of the level was checked: with session order (the default) or
    /// without (Adya's).
    pub session_order: SessionOrder,
    /// The anomalies found; empty when the history satisfies the level.
    pub anomalies: Vec<Anomaly>,
    /// What was looked at.
    pub stats: CheckStats,
    /// Notes on how the input was interpreted (unknown transactions taken as committed, ...).
    pub notes: Vec<String>,
    /// The database whose documented statement-level promises were checked beside the
    /// level (the history header's `promises`): reports say "read-committed (as PostgreSQL
    /// documents it)". `None`: the level as Adya defines it.
    pub documented_by: Option<Box<str>>,
    /// Black-box checkers, on a valid verdict: the version order they found (per object,
    /// its writers oldest first), so `--certificate-out` can hand it to Emme.
    pub inferred_version_order: Option<FxHashMap<ObjId, Vec<TxnId>>>,
}

impl Report {
    /// An empty (valid) report.
    pub fn new(level: IsolationLevel, checker: CheckerKind) -> Self {
        Report {
            level,
            checker,
            session_order: SessionOrder::Included,
            anomalies: Vec::new(),
            stats: CheckStats::default(),
            notes: Vec::new(),
            documented_by: None,
            inferred_version_order: None,
        }
    }

    /// The level as checked: `read-committed`, or `read-committed (as PostgreSQL documents it)`
    /// when the database's statement-level promises were checked too.
    pub fn level_checked(&self) -> String {
        match &self.documented_by {
            Some(db) => format!("{} (as {db} documents it)", self.level),
            None => self.level.to_string(),
        }
    }

    /// Whether the history satisfies the level: no anomaly was found.
    pub fn is_valid(&self) -> bool {
        self.anomalies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_round_trip() {
        for kind in AnomalyKind::ALL {
            assert_eq!(AnomalyKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(AnomalyKind::from_name("G2"), None);
        assert_eq!(AnomalyKind::from_name("incompatible-order"), Some(AnomalyKind::IncompatibleOrder));
        assert_eq!(AnomalyKind::from_name("duplicate-elements"), Some(AnomalyKind::DuplicateElements));
    }

    #[test]
    fn levels_forbid_what_adya_says() {
        use IsolationLevel::*;
        // Every anomaly kind against every level, written from the definitions: Adya's
        // PL-1 (G0), PL-2 (+ G1a, G1b, G1c), PL-2.99 (+ G2-item), PL-3 (+ G2), PL-SI
        // (G0, G1, G-SI, first-committer-wins; write skew G2-item and G2 allowed); Biswas and
        // Enea's read committed, read atomic and causal axioms for the black-box kinds. Broken
        // data and certificates (garbage reads, duplicate writes, contradictions, replay
        // divergences, session and axiom violations) violate every level.
        // Columns: read uncommitted, read committed, read atomic, causal, repeatable read,
        // snapshot isolation, serializable, strict serializable.
        let levels = [
            ReadUncommitted,
            ReadCommitted,
            ReadAtomic,
            Causal,
            RepeatableRead,
            SnapshotIsolation,
            Serializable,
            StrictSerializable,
        ];
        let (f, t) = (false, true);
        let table: [(AnomalyKind, [bool; 8]); 25] = [
            (AnomalyKind::G0, [t; 8]),
            (AnomalyKind::G1a, [f, t, t, t, t, t, t, t]),
            (AnomalyKind::G1b, [f, t, t, t, t, t, t, t]),
            (AnomalyKind::G1c, [f, t, t, t, t, t, t, t]),
            (AnomalyKind::G2Item, [f, f, f, f, t, f, t, t]),
            (AnomalyKind::G2, [f, f, f, f, f, f, t, t]),
            (AnomalyKind::GSi, [f, f, f, f, f, t, f, f]),
            (AnomalyKind::NoConflict, [f, f, f, f, f, t, f, f]),
            (AnomalyKind::NonMonotonicRead, [f, t, t, t, t, t, t, t]),
            (AnomalyKind::FracturedRead, [f, f, t, t, t, t, t, t]),
            (AnomalyKind::CausalityViolation, [f, f, f, t, f, t, t, t]),
            (AnomalyKind::GarbageRead, [t; 8]),
            (AnomalyKind::InternalInconsistency, [t; 8]),
            (AnomalyKind::DuplicateWrite, [t; 8]),
            (AnomalyKind::ResultSetMismatch, [t; 8]),
            (AnomalyKind::CertificateContradiction, [t; 8]),
            (AnomalyKind::ReplayDivergence, [t; 8]),
            (AnomalyKind::IncompatibleOrder, [t; 8]),
            (AnomalyKind::DuplicateElements, [t; 8]),
            (AnomalyKind::Session, [t; 8]),
            (AnomalyKind::Int, [t; 8]),
            (AnomalyKind::Ext, [t; 8]),
            (AnomalyKind::RealTime, [f, f, f, f, f, f, f, t]),
            (AnomalyKind::StatementLostUpdate, [t; 8]),
            (AnomalyKind::NonQualifyingWrite, [t; 8]),
        ];
        for (kind, forbidden) in table {
            for (level, want) in levels.iter().zip(forbidden) {
                assert_eq!(kind.violates(*level), want, "{kind} at {level:?}");
            }
        }
        // The table lists every kind there is.
        let listed: Vec<String> = table.iter().map(|(k, _)| k.to_string()).collect();
        for name in AnomalyKind::ALL.iter().map(ToString::to_string) {
            assert!(listed.contains(&name), "{name} is missing from the table");
        }
    }
}
