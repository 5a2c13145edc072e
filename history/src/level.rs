//! Isolation levels: the one list of their names, aliases, order and meaning that every
//! crate uses (the checker checks at them, adapters run transactions at a subset of them,
//! the generator simulates two of them, and history files name them in `meta.isolation`).

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

/// An isolation level, what a history is checked against and what a database runs
/// transactions at (a database runs a subset, which it declares), listed weakest first: Adya's PL levels,
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
    /// weakest first; read atomic and causal are decided black-box (isocert-checker's weak checker).
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

impl FromStr for IsolationLevel {
    type Err = UnknownName;

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
                return Err(UnknownName {
                    what: "isolation level",
                    given: s.to_string(),
                    choices: "strict-serializable (sser), serializable (ser), snapshot-isolation (si), repeatable-read (rr), \
                               read-committed (rc), read-uncommitted (ru), read-atomic (ra), causal (cc)",
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
}
