//! Database timestamps: integers, CockroachDB HLC strings and `{p,l}` pairs.

use std::fmt;

/// A start or commit timestamp, compared as the pair (wall, logical).
///
/// Integers become `wall` with `logical = 0`; the HLC string `"WALL.LOGICAL"` and the
/// object `{"p":WALL,"l":LOGICAL}` keep both parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    /// Physical (wall-clock) part, or the whole integer timestamp.
    pub wall: u64,
    /// Logical counter that breaks ties between equal wall times.
    pub logical: u64,
}

impl Timestamp {
    /// A plain integer timestamp.
    pub const fn new(wall: u64) -> Self {
        Timestamp { wall, logical: 0 }
    }

    /// A hybrid-logical-clock timestamp.
    pub const fn hlc(wall: u64, logical: u64) -> Self {
        Timestamp { wall, logical }
    }

    /// Parses `"WALL"` or `"WALL.LOGICAL"` (CockroachDB's decimal form: the digits after
    /// the dot are the logical counter, so `"5.0000000001"` is (5, 1)).
    pub fn parse_str(s: &str) -> Result<Self, String> {
        let (wall, logical) = match s.split_once('.') {
            Some((w, l)) => (w, Some(l)),
            None => (s, None),
        };
        let digits = |part: &str, what: &str| -> Result<u64, String> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("timestamp {s:?}: {what} part is not a non-negative integer"));
            }
            part.parse::<u64>().map_err(|_| format!("timestamp {s:?}: {what} part does not fit 64 bits"))
        };
        Ok(Timestamp {
            wall: digits(wall, "wall")?,
            logical: match logical {
                Some(l) => digits(l, "logical")?,
                None => 0,
            },
        })
    }

    /// The timestamp as v1 JSON: an integer when there is no logical part, else the HLC string.
    pub fn to_json(self) -> serde_json::Value {
        if self.logical == 0 {
            self.wall.into()
        } else {
            serde_json::Value::String(self.to_string())
        }
    }
}

/// What a history's commit timestamps say about the order a serializable run serialized
/// its transactions in: the header's `serial_order` (docs/FORMAT.md).
///
/// Chronos and Aion check serializability by running every transaction atomically at its
/// commit timestamp. That is right where the database serializes in commit order
/// (CockroachDB, MariaDB's locking SERIALIZABLE) and too strict where it does not:
/// PostgreSQL's SSI may serialize a transaction before one that committed earlier, so a
/// read the commit order cannot explain is no anomaly there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SerialOrder {
    /// A serializable run serializes its transactions in commit-timestamp order (the
    /// default: the Chronos paper's reading of a history with timestamps).
    #[default]
    CommitTs,
    /// The timestamps order snapshots and commits but not necessarily the serialization: a
    /// violation of commit order at serializability is no fact (header `"unknown"`).
    Unknown,
}

impl SerialOrder {
    /// The header spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SerialOrder::CommitTs => "commit_ts",
            SerialOrder::Unknown => "unknown",
        }
    }
}

/// The header's spellings; both v1 readers parse `serial_order` with it.
impl std::str::FromStr for SerialOrder {
    type Err = crate::UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "commit_ts" => Ok(SerialOrder::CommitTs),
            "unknown" => Ok(SerialOrder::Unknown),
            _ => Err(crate::UnknownName {
                what: "serial_order",
                given: s.to_string(),
                choices: "commit_ts or unknown",
            }),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.logical == 0 {
            write!(f, "{}", self.wall)
        } else {
            write!(f, "{}.{:010}", self.wall, self.logical)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_strings_compare_as_pairs() {
        let a = Timestamp::parse_str("1700000000000000000.0000000001").unwrap();
        let b = Timestamp::parse_str("1700000000000000000.0000000002").unwrap();
        let c = Timestamp::parse_str("1700000000000000001").unwrap();
        assert_eq!(a, Timestamp::hlc(1_700_000_000_000_000_000, 1));
        assert!(a < b && b < c);
        assert_eq!(a.to_string(), "1700000000000000000.0000000001");
    }

    #[test]
    fn rejects_garbage() {
        assert!(Timestamp::parse_str("12a").is_err());
        assert!(Timestamp::parse_str("-3").is_err());
        assert!(Timestamp::parse_str("1.").is_err());
    }
}
