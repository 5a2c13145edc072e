//! Where a REPEATABLE READ transaction's snapshot lies in the binary log, decided by what
//! the transaction read, not only by the position MariaDB reported.
//!
//! MariaDB reports each consistent snapshot's binary-log position
//! (`binlog_snapshot_position`), but that position is not always the read view InnoDB
//! uses: under concurrent commits it was seen one group commit ahead of the view and one
//! behind it, and even behind a commit already acknowledged to the same session
//! (docs/MARIADB.md, "The snapshot position is not the read view"). Taken at its word, it
//! made valid histories fail as snapshot isolation.
//!
//! The binary log's commit order is a fact (InnoDB makes commits visible in that order),
//! and a snapshot of that order is a position `p`: the first `p` logged transactions are
//! visible. Each plain read of a value narrows the positions that can explain it. Among
//! those, a position where the transaction's writes overwrote visible versions and its
//! session's earlier transactions are visible (what snapshot isolation requires) is taken
//! when one exists, the reported position when it is one of them, else the nearest. When
//! no position satisfies snapshot isolation, every placement the reads allow violates it,
//! so the anomaly the checker then reports does not depend on the reported position.

use isocert_history::{ValueId, Writer};

use super::Version;

/// A set of positions: sorted, disjoint, closed intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PositionSet(Vec<(usize, usize)>);

impl PositionSet {
    /// Every position from `lo` to `hi` (empty when `lo > hi`).
    pub(super) fn between(lo: usize, hi: usize) -> Self {
        PositionSet(if lo <= hi { vec![(lo, hi)] } else { Vec::new() })
    }

    /// Whether no position is in the set.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `p` is in the set.
    pub(super) fn contains(&self, p: usize) -> bool {
        self.0.iter().any(|&(lo, hi)| lo <= p && p <= hi)
    }

    /// Keeps only the positions `constraint` admits too; `None` (an object with no
    /// versions to tell by) constrains nothing.
    pub(super) fn narrow(&mut self, constraint: Option<PositionSet>) {
        if let Some(set) = constraint {
            *self = self.intersect(&set);
        }
    }

    /// The positions in both sets.
    pub(super) fn intersect(&self, other: &PositionSet) -> PositionSet {
        let mut out = Vec::new();
        for &(a, b) in &self.0 {
            for &(c, d) in &other.0 {
                let (lo, hi) = (a.max(c), b.min(d));
                if lo <= hi {
                    out.push((lo, hi));
                }
            }
        }
        out.sort_unstable();
        PositionSet(out)
    }

    /// The position of the set nearest to `p` (the earlier one on a tie); `None` when empty.
    pub(super) fn nearest(&self, p: usize) -> Option<usize> {
        self.0.iter().map(|&(lo, hi)| p.clamp(lo, hi)).min_by_key(|&q| (q.abs_diff(p), q))
    }

    /// The union of intervals, merged.
    fn union_of(mut intervals: Vec<(usize, usize)>) -> Self {
        intervals.sort_unstable();
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (lo, hi) in intervals {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        PositionSet(out)
    }
}

/// The snapshot positions at which a plain read of `value` could return it: where a
/// version holding it is the newest of `versions` (the object's, oldest first, the
/// reader's own left out). `None` when the object has no versions to tell by.
pub(super) fn read_admits(versions: &[Version], value: ValueId) -> Option<PositionSet> {
    let holds: Vec<bool> = versions.iter().map(|v| v.value == value).collect();
    admitted_where(versions, &holds)
}

/// The positions where one of the `versions` (the object's, oldest first, the reader's own
/// left out) for which `seen` is true is the newest: what a read that saw one of them
/// allows. `None` when the object has no versions to tell by.
pub(super) fn admitted_where(versions: &[Version], seen: &[bool]) -> Option<PositionSet> {
    if versions.is_empty() {
        return None;
    }
    let intervals = versions
        .iter()
        .enumerate()
        .filter(|(k, _)| seen[*k])
        .filter_map(|(k, v)| {
            // Visible from the position after its commit until the next version commits.
            let lo = v.pos.map_or(0, |i| i + 1);
            let hi = versions.get(k + 1).map_or(usize::MAX, |next| next.pos.unwrap_or(0));
            (lo <= hi).then_some((lo, hi))
        })
        .collect();
    Some(PositionSet::union_of(intervals))
}

/// The version a transaction's write of an object overwrote, among `versions` (the
/// object's, oldest first, its own included): its position in the log (`None`: the initial
/// version or the first one).
pub(super) fn overwritten_pos(versions: &[Version], writer: Writer) -> Option<usize> {
    let k = versions.iter().position(|v| v.writer == writer)?;
    versions[..k].last().and_then(|v| v.pos)
}

/// Where the snapshot lies: `reported` when the reads allow it and snapshot isolation holds
/// there; otherwise the nearest position that satisfies both (`required`: the positions
/// snapshot isolation allows); otherwise, when the reads rule the reported position out,
/// the nearest they allow; otherwise `reported`.
pub(super) fn place(reported: usize, read: &PositionSet, required: &PositionSet) -> usize {
    if read.is_empty() {
        return reported;
    }
    let both = read.intersect(required);
    if both.contains(reported) {
        return reported;
    }
    if let Some(p) = both.nearest(reported) {
        return p;
    }
    if read.contains(reported) {
        return reported;
    }
    read.nearest(reported).unwrap_or(reported)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position of `set` up to `max`, by brute force.
    fn members(set: &PositionSet, max: usize) -> Vec<usize> {
        (0..=max).filter(|&p| set.contains(p)).collect()
    }

    #[test]
    fn intersection_and_nearest_agree_with_brute_force() {
        let sets = [
            PositionSet::union_of(vec![(0, 2), (5, 7), (9, 9)]),
            PositionSet::union_of(vec![(1, 6)]),
            PositionSet::union_of(vec![(3, 3), (6, 12)]),
            PositionSet::between(4, 2),
        ];
        for a in &sets {
            for b in &sets {
                let both = a.intersect(b);
                let brute: Vec<usize> = (0..=12).filter(|&p| a.contains(p) && b.contains(p)).collect();
                assert_eq!(members(&both, 12), brute, "{a:?} and {b:?}");
                for p in 0..=12 {
                    let want = brute.iter().copied().min_by_key(|&q| (q.abs_diff(p), q));
                    assert_eq!(both.nearest(p), want, "{p} in {both:?}");
                }
            }
        }
    }

    fn version(pos: Option<usize>, value: u32, writer: Writer) -> Version {
        Version { pos, writer, value: ValueId(value) }
    }

    #[test]
    fn a_read_admits_the_positions_where_its_version_is_the_newest() {
        let t = |i| Writer::Txn(isocert_history::TxnId(i));
        // Initial 0, then log transactions 2 (value 5) and 6 (value 7).
        let versions =
            [version(None, 0, Writer::Initial), version(Some(2), 5, t(1)), version(Some(6), 7, t(2))];
        assert_eq!(members(&read_admits(&versions, ValueId(0)).unwrap(), 10), vec![0, 1, 2]);
        assert_eq!(members(&read_admits(&versions, ValueId(5)).unwrap(), 10), vec![3, 4, 5, 6]);
        assert_eq!(members(&read_admits(&versions, ValueId(7)).unwrap(), 10), vec![7, 8, 9, 10]);
        assert!(read_admits(&versions, ValueId(9)).unwrap().is_empty(), "a value nobody wrote");
        assert_eq!(read_admits(&[], ValueId(0)), None);
        assert_eq!(overwritten_pos(&versions, t(2)), Some(2));
        assert_eq!(overwritten_pos(&versions, t(1)), None);
    }

    #[test]
    fn the_reported_position_stands_unless_the_reads_or_isolation_rule_it_out() {
        let reads = PositionSet::between(3, 6);
        let required = PositionSet::between(5, 20);
        assert_eq!(place(5, &reads, &required), 5, "consistent: kept");
        assert_eq!(place(2, &reads, &required), 5, "the reads and SI put it at 5..6");
        assert_eq!(place(9, &reads, &required), 6);
        // No position satisfies both: the reads decide, SI is then violated anywhere.
        let lost = PositionSet::between(8, 20);
        assert_eq!(place(4, &reads, &lost), 4);
        assert_eq!(place(1, &reads, &lost), 3);
        // No read evidence: the reported position.
        assert_eq!(place(1, &PositionSet(Vec::new()), &required), 1);
    }
}
