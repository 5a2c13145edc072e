//! Isolation levels and checker choices, with their command-line spellings.

use std::fmt;
use std::str::FromStr;

/// An isolation level a history is checked against, weakest first (Adya's PL levels plus
/// snapshot isolation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IsolationLevel {
    /// PL-1: only write cycles (G0) are forbidden.
    ReadUncommitted,
    /// PL-2: G1 (aborted reads, intermediate reads, cycles of write/read dependencies) is forbidden.
    ReadCommitted,
    /// PL-2.99: G1 and item anti-dependency cycles (G2-item) are forbidden.
    RepeatableRead,
    /// PL-SI: G1 and G-SI (interference and missed effects against start-dependencies).
    SnapshotIsolation,
    /// PL-3: G1 and every cycle, predicate anti-dependencies included (G2).
    Serializable,
}

impl IsolationLevel {
    /// Every level, weakest first.
    pub const ALL: [IsolationLevel; 5] = [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
        IsolationLevel::RepeatableRead,
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Serializable,
    ];

    /// The long, kebab-case name (`snapshot-isolation`).
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read-uncommitted",
            IsolationLevel::ReadCommitted => "read-committed",
            IsolationLevel::RepeatableRead => "repeatable-read",
            IsolationLevel::SnapshotIsolation => "snapshot-isolation",
            IsolationLevel::Serializable => "serializable",
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
            "snapshot-isolation" | "si" | "snapshot" => IsolationLevel::SnapshotIsolation,
            "repeatable-read" | "rr" => IsolationLevel::RepeatableRead,
            "read-committed" | "rc" => IsolationLevel::ReadCommitted,
            "read-uncommitted" | "ru" => IsolationLevel::ReadUncommitted,
            _ => {
                return Err(ParseNameError {
                    what: "isolation level",
                    given: s.to_string(),
                    expected: "serializable (ser), snapshot-isolation (si), repeatable-read (rr), \
                               read-committed (rc), read-uncommitted (ru)",
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
    /// from the read-modify-writes, no certificate needed (serializable, snapshot isolation).
    Mtc,
    /// Black-box serializability without a certificate (Cobra-style polygraph, SAT).
    Cobra,
    /// Black-box snapshot isolation without a certificate (PolySI-style polygraph, SAT).
    Polysi,
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
            _ => {
                return Err(ParseNameError {
                    what: "checker",
                    given: s.to_string(),
                    expected: "auto, emme, enne, chronos, aion, mtc, cobra, polysi",
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
        assert_eq!("SI".parse(), Ok(IsolationLevel::SnapshotIsolation));
        assert_eq!("rr".parse(), Ok(IsolationLevel::RepeatableRead));
        assert_eq!("rc".parse(), Ok(IsolationLevel::ReadCommitted));
        assert_eq!("ru".parse(), Ok(IsolationLevel::ReadUncommitted));
        let err = "linearizable".parse::<IsolationLevel>().unwrap_err();
        assert!(err.to_string().contains("linearizable") && err.to_string().contains("serializable"));
    }

    #[test]
    fn checkers_parse() {
        assert_eq!("Enne".parse(), Ok(CheckerKind::Enne));
        assert_eq!("auto".parse(), Ok(CheckerKind::Auto));
        assert_eq!("MTC".parse(), Ok(CheckerKind::Mtc));
        assert!("elle".parse::<CheckerKind>().is_err());
    }
}
