//! Isolation levels and checker choices, with their command-line spellings.

use std::fmt;
use std::str::FromStr;

/// An isolation level a history is checked against, listed weakest first: Adya's PL levels,
/// snapshot isolation, and read atomic and causal consistency (Biswas and Enea's
/// definitions, checked black-box). Declaration order is a listing order: read atomic and
/// causal consistency include session order, which repeatable read does not, so those
/// levels are not comparable with repeatable read; `Ord` follows the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IsolationLevel {
    /// PL-1: only write cycles (G0) are forbidden.
    ReadUncommitted,
    /// PL-2: G1 (aborted reads, intermediate reads, cycles of write/read dependencies) is forbidden.
    ReadCommitted,
    /// Read atomic (Biswas and Enea): read committed, and a transaction that sees one write
    /// of another sees all of them (no fractured reads), session order included.
    ReadAtomic,
    /// Causal consistency (Biswas and Enea): read atomic, and a transaction sees every write
    /// that causally precedes it (through session order and reads).
    Causal,
    /// PL-2.99: G1 and item anti-dependency cycles (G2-item) are forbidden.
    RepeatableRead,
    /// PL-SI: G1 and G-SI (interference and missed effects against start-dependencies).
    SnapshotIsolation,
    /// PL-3: G1 and every cycle, predicate anti-dependencies included (G2).
    Serializable,
    /// Serializable in an order that also keeps real time: a transaction that completed
    /// before another was invoked comes first (from the clients' `invoked_at` /
    /// `completed_at`). On single-operation transactions it is linearizability.
    StrictSerializable,
}

impl IsolationLevel {
    /// Every level, weakest first.
    pub const ALL: [IsolationLevel; 8] = [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadAtomic,
        IsolationLevel::Causal,
        IsolationLevel::RepeatableRead,
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Serializable,
        IsolationLevel::StrictSerializable,
    ];

    /// The levels Emme checks against a certificate (Adya's levels and snapshot isolation),
    /// weakest first; read atomic and causal are decided black-box ([`CheckerKind::Weak`]).
    pub const CERTIFIED: [IsolationLevel; 5] = [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
        IsolationLevel::RepeatableRead,
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Serializable,
    ];

    /// Whether only a black-box checker decides this level: the weak checker read atomic
    /// and causal, MTC strict serializability.
    pub fn black_box_only(self) -> bool {
        matches!(
            self,
            IsolationLevel::ReadAtomic | IsolationLevel::Causal | IsolationLevel::StrictSerializable
        )
    }

    /// The long, kebab-case name (`snapshot-isolation`).
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read-uncommitted",
            IsolationLevel::ReadCommitted => "read-committed",
            IsolationLevel::ReadAtomic => "read-atomic",
            IsolationLevel::Causal => "causal",
            IsolationLevel::RepeatableRead => "repeatable-read",
            IsolationLevel::SnapshotIsolation => "snapshot-isolation",
            IsolationLevel::Serializable => "serializable",
            IsolationLevel::StrictSerializable => "strict-serializable",
        }
    }
}

impl fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A level or checker name that is not recognised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}; expected one of: {expected}")]
pub struct ParseNameError {
    /// What was being parsed ("isolation level", "checker").
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted spellings.
    pub expected: &'static str,
}

impl FromStr for IsolationLevel {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "serializable" | "ser" => IsolationLevel::Serializable,
            "strict-serializable" | "sser" | "strict-serializability" => IsolationLevel::StrictSerializable,
            "snapshot-isolation" | "si" | "snapshot" => IsolationLevel::SnapshotIsolation,
            "repeatable-read" | "rr" => IsolationLevel::RepeatableRead,
            "read-committed" | "rc" => IsolationLevel::ReadCommitted,
            "read-uncommitted" | "ru" => IsolationLevel::ReadUncommitted,
            "read-atomic" | "ra" => IsolationLevel::ReadAtomic,
            "causal" | "cc" | "causal-consistency" => IsolationLevel::Causal,
            _ => {
                return Err(ParseNameError {
                    what: "isolation level",
                    given: s.to_string(),
                    expected: "strict-serializable (sser), serializable (ser), snapshot-isolation (si), repeatable-read (rr), \
                               read-committed (rc), read-uncommitted (ru), read-atomic (ra), causal (cc)",
                })
            }
        })
    }
}

/// Which checker to run; [`CheckerKind::Auto`] lets [`check`](crate::check) choose from the
/// level and what the certificate holds (MTC when there is no certificate and the history
/// is made of mini-transactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CheckerKind {
    /// Enne when the level is serializable and the certificate has a serialization order,
    /// Emme otherwise.
    #[default]
    Auto,
    /// Adya dependency graph from the version order and version sets (every level).
    Emme,
    /// Replay in the certificate's serialization order (serializable).
    Enne,
    /// Offline timestamp-based checking (SI and SER, from start/commit timestamps).
    Chronos,
    /// Online timestamp-based checking.
    Aion,
    /// Black-box checking of mini-transaction histories (MTC): the version order follows
    /// from the read-modify-writes, no certificate needed (strict serializable,
    /// serializable, snapshot isolation).
    Mtc,
    /// Black-box serializability, and strict serializability with the clients' real times,
    /// without a certificate (Cobra-style polygraph, SAT).
    Cobra,
    /// Black-box snapshot isolation without a certificate (PolySI-style polygraph, SAT).
    Polysi,
    /// Black-box read committed, read atomic and causal consistency without a certificate
    /// (Biswas and Enea's axioms saturated in near-linear time, as AWDIT does).
    Weak,
}

impl CheckerKind {
    /// The lowercase name (`emme`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckerKind::Auto => "auto",
            CheckerKind::Emme => "emme",
            CheckerKind::Enne => "enne",
            CheckerKind::Chronos => "chronos",
            CheckerKind::Aion => "aion",
            CheckerKind::Mtc => "mtc",
            CheckerKind::Cobra => "cobra",
            CheckerKind::Polysi => "polysi",
            CheckerKind::Weak => "weak",
        }
    }
}

impl fmt::Display for CheckerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CheckerKind {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "auto" => CheckerKind::Auto,
            "emme" => CheckerKind::Emme,
            "enne" => CheckerKind::Enne,
            "chronos" => CheckerKind::Chronos,
            "aion" => CheckerKind::Aion,
            "mtc" => CheckerKind::Mtc,
            "cobra" => CheckerKind::Cobra,
            "polysi" => CheckerKind::Polysi,
            "weak" | "awdit" => CheckerKind::Weak,
            _ => {
                return Err(ParseNameError {
                    what: "checker",
                    given: s.to_string(),
                    expected: "auto, emme, enne, chronos, aion, mtc, cobra, polysi, weak",
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_long_names_and_aliases_and_display_long_names() {
        for level in IsolationLevel::ALL {
            assert_eq!(level.as_str().parse::<IsolationLevel>(), Ok(level));
            assert_eq!(level.to_string(), level.as_str());
        }
        assert_eq!("ser".parse(), Ok(IsolationLevel::Serializable));
        assert_eq!("sser".parse(), Ok(IsolationLevel::StrictSerializable));
        assert!(IsolationLevel::Serializable < IsolationLevel::StrictSerializable);
        assert_eq!("SI".parse(), Ok(IsolationLevel::SnapshotIsolation));
        assert_eq!("rr".parse(), Ok(IsolationLevel::RepeatableRead));
        assert_eq!("rc".parse(), Ok(IsolationLevel::ReadCommitted));
        assert_eq!("ru".parse(), Ok(IsolationLevel::ReadUncommitted));
        assert_eq!("ra".parse(), Ok(IsolationLevel::ReadAtomic));
        assert_eq!("read_atomic".parse(), Ok(IsolationLevel::ReadAtomic));
        assert_eq!("cc".parse(), Ok(IsolationLevel::Causal));
        assert_eq!("causal".parse(), Ok(IsolationLevel::Causal));
        assert!(IsolationLevel::ReadCommitted < IsolationLevel::ReadAtomic);
        assert!(IsolationLevel::ReadAtomic < IsolationLevel::Causal);
        assert!(IsolationLevel::Causal < IsolationLevel::SnapshotIsolation);
        assert!(IsolationLevel::CERTIFIED.iter().all(|l| !l.black_box_only()));
        assert_eq!(IsolationLevel::ALL.iter().filter(|l| l.black_box_only()).count(), 3);
        let err = "linearizable".parse::<IsolationLevel>().unwrap_err();
        assert!(err.to_string().contains("linearizable") && err.to_string().contains("serializable"));
    }

    #[test]
    fn checkers_parse() {
        assert_eq!("Enne".parse(), Ok(CheckerKind::Enne));
        assert_eq!("auto".parse(), Ok(CheckerKind::Auto));
        assert_eq!("MTC".parse(), Ok(CheckerKind::Mtc));
        assert_eq!("weak".parse(), Ok(CheckerKind::Weak));
        assert_eq!("AWDIT".parse(), Ok(CheckerKind::Weak));
        assert!("elle".parse::<CheckerKind>().is_err());
    }
}

/// Whether a level's definition orders each session's transactions: one meaning per level
/// name in every checker (docs/CHECKING.md, "One definition per level").
///
/// [`SessionOrder::Included`] is the default: a session is one client's connection, every
/// database isocert tests promises it reads its own earlier transactions, and most
/// definitions the checkers come from include it (PolySI, Viper, MTC, Chronos/TimeKiller,
/// AWDIT, Biswas and Enea's read atomic and causal, which need it). [`SessionOrder::Excluded`]
/// is Adya's original levels (Emme, Enne and Elle without process order), the explicit
/// choice `--no-session-order`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SessionOrder {
    /// A session's transactions come in its order in every serialization (and, at snapshot
    /// isolation, each one's snapshot includes its predecessors').
    #[default]
    Included,
    /// Adya's definitions: session order constrains nothing; each transaction is checked as
    /// if it were its own session.
    Excluded,
}

impl SessionOrder {
    /// How reports name the definition (`with session order`, `without session order`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionOrder::Included => "with session order",
            SessionOrder::Excluded => "without session order",
        }
    }
}

impl fmt::Display for SessionOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
