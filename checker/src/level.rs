//! Checker choices and the session-order choice, with their command-line spellings; the
//! isolation levels themselves are `isocert_history::IsolationLevel`.

use std::fmt;
use std::str::FromStr;

use isocert_history::UnknownName;

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
    type Err = UnknownName;

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
                return Err(UnknownName {
                    what: "checker",
                    given: s.to_string(),
                    choices: "auto, emme, enne, chronos, aion, mtc, cobra, polysi, weak",
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
