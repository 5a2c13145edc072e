//! PostgreSQL snapshots (`pg_current_snapshot()`) and their visibility rule.

use std::fmt;
use std::str::FromStr;

use crate::AdapterError;

/// A PostgreSQL MVCC snapshot as `pg_current_snapshot()` prints it: `xmin:xmax:xip,...`.
///
/// Transaction ids are the 64-bit "full" xids of `pg_current_xact_id()` (epoch included), so
/// they compare without wraparound.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// The oldest transaction still running when the snapshot was taken.
    pub xmin: u64,
    /// One past the newest completed transaction: ids at or above it are invisible.
    pub xmax: u64,
    /// Transactions in `xmin..xmax` still running when the snapshot was taken (sorted).
    pub xip: Vec<u64>,
}

impl Snapshot {
    /// Whether a version written by transaction `xid` is visible to this snapshot,
    /// provided that `xid` committed: `xid < xmax` and `xid` not in progress.
    ///
    /// The caller must know the writer committed (aborted writers are never visible); a
    /// transaction also sees its own writes, which this rule does not cover.
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

impl FromStr for Snapshot {
    type Err = AdapterError;

    fn from_str(text: &str) -> Result<Self, AdapterError> {
        let bad = |reason| AdapterError::BadSnapshot { text: text.to_string(), reason };
        let mut parts = text.split(':');
        let (Some(xmin), Some(xmax), Some(xip), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected three fields xmin:xmax:xip"));
        };
        let xmin: u64 = xmin.parse().map_err(|_| bad("xmin is not an unsigned integer"))?;
        let xmax: u64 = xmax.parse().map_err(|_| bad("xmax is not an unsigned integer"))?;
        if xmin > xmax {
            return Err(bad("xmin is greater than xmax"));
        }
        let mut ids = Vec::new();
        if !xip.is_empty() {
            for id in xip.split(',') {
                let id: u64 = id.parse().map_err(|_| bad("an in-progress xid is not an unsigned integer"))?;
                if id < xmin || id >= xmax {
                    return Err(bad("an in-progress xid lies outside xmin..xmax"));
                }
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(Snapshot { xmin, xmax, xip: ids })
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:", self.xmin, self.xmax)?;
        for (i, id) in self.xip.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_applies_visibility() {
        let s: Snapshot = "100:104:102,100".parse().unwrap();
        assert_eq!(s.xip, vec![100, 102]);
        assert_eq!(s.to_string(), "100:104:100,102");
        assert!(s.sees(99));
        assert!(!s.sees(100));
        assert!(s.sees(101));
        assert!(!s.sees(102));
        assert!(s.sees(103));
        assert!(!s.sees(104));
        let empty: Snapshot = "7:7:".parse().unwrap();
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
        let s: Snapshot = "4294967300:4294967310:".parse().unwrap();
        assert_eq!(s.widen(8), epoch1 + 8);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in ["", "1:2", "1:2:3:4", "a:2:", "3:2:", "1:5:7", "1:5:x"] {
            assert!(bad.parse::<Snapshot>().is_err(), "{bad:?} accepted");
        }
    }
}
