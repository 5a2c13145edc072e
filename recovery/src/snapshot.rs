//! PostgreSQL snapshots as `pg_current_snapshot()` prints them.

use std::fmt;
use std::str::FromStr;

/// A PostgreSQL MVCC snapshot `xmin:xmax:xip,...` (64-bit transaction ids).
///
/// A committed writer `x` is visible iff `x < xmax` and `x` is not in `xip`; every id
/// below `xmin` has finished, so `xip` only lists ids in `xmin..xmax`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PgSnapshot {
    /// The oldest transaction id still running when the snapshot was taken.
    pub xmin: u64,
    /// One past the newest finished transaction id; ids at or above it are invisible.
    pub xmax: u64,
    /// The ids in `xmin..xmax` that were still running (sorted).
    pub xip: Vec<u64>,
}

impl PgSnapshot {
    /// Whether a version written by the committed transaction `xid` is visible.
    #[inline]
    pub fn sees(&self, xid: u64) -> bool {
        xid < self.xmax && (xid < self.xmin || self.xip.binary_search(&xid).is_err())
    }
}

/// Why a snapshot string could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotParseError(String);

impl fmt::Display for SnapshotParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SnapshotParseError {}

impl FromStr for PgSnapshot {
    type Err = SnapshotParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            |why: &str| SnapshotParseError(format!("snapshot {s:?}: {why} (expected xmin:xmax:xip,...)"));
        let mut parts = s.split(':');
        let (Some(xmin), Some(xmax), Some(xip), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not three colon-separated parts"));
        };
        let id =
            |t: &str| t.trim().parse::<u64>().map_err(|_| bad(&format!("{t:?} is not a transaction id")));
        let xmin = id(xmin)?;
        let xmax = id(xmax)?;
        let mut ids = Vec::new();
        for t in xip.split(',').filter(|t| !t.is_empty()) {
            ids.push(id(t)?);
        }
        ids.sort_unstable();
        if xmin > xmax {
            return Err(bad("xmin is above xmax"));
        }
        if ids.iter().any(|&x| x < xmin || x >= xmax) {
            return Err(bad("a running id lies outside xmin..xmax"));
        }
        Ok(PgSnapshot { xmin, xmax, xip: ids })
    }
}

impl fmt::Display for PgSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:", self.xmin, self.xmax)?;
        for (i, x) in self.xip.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_follows_xmax_and_running_ids() {
        let s: PgSnapshot = "100:104:100,102".parse().unwrap();
        assert!(s.sees(99));
        assert!(!s.sees(100));
        assert!(s.sees(101));
        assert!(!s.sees(102));
        assert!(s.sees(103));
        assert!(!s.sees(104));
        assert_eq!(s.to_string(), "100:104:100,102");
        let empty: PgSnapshot = "7:7:".parse().unwrap();
        assert!(empty.sees(6) && !empty.sees(7));
    }

    #[test]
    fn malformed_snapshots_are_rejected_with_the_text() {
        for bad in ["", "1:2", "1:2:3:4", "a:2:", "5:3:", "1:5:7"] {
            let err = bad.parse::<PgSnapshot>().unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }
}
