//! PostgreSQL snapshots as `pg_current_snapshot()` prints them, their visibility rule, and
//! the widening of 32-bit xids next to them.

use std::fmt;
use std::str::FromStr;

/// A PostgreSQL MVCC snapshot `xmin:xmax:xip,...` (64-bit transaction ids).
///
/// Transaction ids are the 64-bit "full" xids of `pg_current_xact_id()` (epoch included), so
/// they compare without wraparound. (`isocert-adapters` re-exports this type as `Snapshot`.)
///
/// A committed writer `x` is visible iff `x < xmax` and `x` is not in `xip`; every id
/// below `xmin` has finished, so `xip` only lists ids in `xmin..xmax`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PgSnapshot {
    /// The oldest transaction id still running when the snapshot was taken.
    pub xmin: u64,
    /// One past the newest finished transaction id; ids at or above it are invisible.
    pub xmax: u64,
    /// The ids in `xmin..xmax` that were still running (sorted, without duplicates).
    pub xip: Vec<u64>,
}

impl PgSnapshot {
    /// Whether a version written by transaction `xid` is visible to this snapshot,
    /// provided that `xid` committed: `xid < xmax` and `xid` not in progress.
    ///
    /// The caller must know the writer committed (aborted writers are never visible); a
    /// transaction also sees its own writes, which this rule does not cover.
    #[inline]
    pub fn sees(&self, xid: u64) -> bool {
        xid < self.xmax && (xid < self.xmin || self.xip.binary_search(&xid).is_err())
    }

    /// Widens a 32-bit xid (the `xmin` column, pgoutput's `Begin.xid`) to the full 64-bit
    /// xid nearest this snapshot's `xmax`: the one within 2^31 of it, as PostgreSQL relates
    /// the two. Ids that would fall below zero stay in epoch 0.
    pub fn widen(&self, xid: u32) -> u64 {
        widen_xid(xid, self.xmax)
    }
}

/// Widens a 32-bit xid to the full 64-bit xid nearest `reference` (within 2^31 of it).
pub fn widen_xid(xid: u32, reference: u64) -> u64 {
    let epoch = reference & !0xffff_ffff;
    let candidate = epoch | u64::from(xid);
    const HALF: u64 = 1 << 31;
    if candidate > reference.saturating_add(HALF) && candidate >= 1 << 32 {
        candidate - (1 << 32)
    } else if candidate.saturating_add(HALF) < reference {
        candidate + (1 << 32)
    } else {
        candidate
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
        ids.dedup();
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

    #[test]
    fn parses_prints_and_applies_visibility() {
        let s: PgSnapshot = "100:104:102,100".parse().unwrap();
        assert_eq!(s.xip, vec![100, 102]);
        assert_eq!(s.to_string(), "100:104:100,102");
        assert!(s.sees(99));
        assert!(!s.sees(100));
        assert!(s.sees(101));
        assert!(!s.sees(102));
        assert!(s.sees(103));
        assert!(!s.sees(104));
        let empty: PgSnapshot = "7:7:".parse().unwrap();
        assert!(empty.sees(6) && !empty.sees(7));
        assert_eq!(empty.to_string(), "7:7:");
    }

    #[test]
    fn widens_32_bit_xids_next_to_the_reference() {
        assert_eq!(widen_xid(726, 727), 726);
        assert_eq!(widen_xid(800, 727), 800);
        let epoch1 = 1u64 << 32;
        assert_eq!(widen_xid(5, epoch1 + 10), epoch1 + 5);
        // Just before the wrap: the xid belongs to the previous epoch.
        assert_eq!(widen_xid(u32::MAX - 1, epoch1 + 10), epoch1 - 2);
        // Just after: a reference at the end of epoch 0 and a small xid of epoch 1.
        assert_eq!(widen_xid(3, epoch1 - 5), epoch1 + 3);
        let s: PgSnapshot = "4294967300:4294967310:".parse().unwrap();
        assert_eq!(s.widen(8), epoch1 + 8);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in ["", "1:2", "1:2:3:4", "a:2:", "3:2:", "1:5:7", "1:5:x"] {
            assert!(bad.parse::<PgSnapshot>().is_err(), "{bad:?} accepted");
        }
    }
}
