//! Sorted indexes of column values, and turning a predicate's [`Bounds`] into index ranges.
//!
//! A predicate can only match a version whose constrained column lies in the predicate's
//! intervals, so a version that changes a predicate's matches has the old or the new
//! value in them. The index maps column values to version ids in SQL order: numbers (ints
//! and floats together) and, for the PostgreSQL dialect's C collation, text. Ranges are
//! widened to inclusive `f64` ends, which only adds candidates; the oracle decides.

use std::ops::Bound;

use isocert_history::{ColId, Dialect, Scalar};
use isocert_oracle::{Bounds, Interval};

/// A column value class that has a total SQL order the index can use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Key<'a> {
    /// Integer or float, compared numerically.
    Num(f64),
    /// Text in byte (C collation) order.
    Text(&'a str),
}

/// The index key of a scalar, if it has one.
pub(crate) fn key_of(s: &Scalar, dialect: Dialect) -> Option<Key<'_>> {
    match s {
        Scalar::Int(i) => Some(Key::Num(*i as f64)),
        Scalar::Float(f) if !f.is_nan() => Some(Key::Num(*f)),
        Scalar::Text(t) if dialect == Dialect::Postgres => Some(Key::Text(t)),
        _ => None,
    }
}

/// One inclusive range of index keys.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Range<'a> {
    /// Numbers from `low` to `high`, both inclusive.
    Num(f64, f64),
    /// Text from `low` to `high` (inclusive, `None` unbounded).
    Text(Option<&'a str>, Option<&'a str>),
}

fn num_bound(b: &Bound<Scalar>, unbounded: f64) -> Option<Option<f64>> {
    match b {
        Bound::Unbounded => Some(Some(unbounded)),
        Bound::Included(s) | Bound::Excluded(s) => match s {
            Scalar::Int(i) => Some(Some(*i as f64)),
            Scalar::Float(f) if !f.is_nan() => Some(Some(*f)),
            Scalar::Text(_) => Some(None),
            _ => None,
        },
    }
}

fn text_bound(b: &Bound<Scalar>) -> Option<Option<&str>> {
    match b {
        Bound::Unbounded => Some(None),
        Bound::Included(Scalar::Text(t)) | Bound::Excluded(Scalar::Text(t)) => Some(Some(t)),
        _ => None,
    }
}

fn interval_range(iv: &Interval, dialect: Dialect) -> Option<Range<'_>> {
    let (lo, hi) = (num_bound(&iv.low, f64::NEG_INFINITY)?, num_bound(&iv.high, f64::INFINITY)?);
    match (lo, hi) {
        (Some(lo), Some(hi)) => {
            // Widen by one unit in the last place so that int/float rounding never excludes.
            Some(Range::Num(
                lo - lo.abs() * f64::EPSILON - f64::MIN_POSITIVE,
                hi + hi.abs() * f64::EPSILON + f64::MIN_POSITIVE,
            ))
        }
        _ if dialect == Dialect::Postgres => Some(Range::Text(text_bound(&iv.low)?, text_bound(&iv.high)?)),
        _ => None,
    }
}

impl Range<'_> {
    /// Whether `key` lies in the range.
    pub(crate) fn contains(&self, key: &Key<'_>) -> bool {
        match (self, key) {
            (Range::Num(lo, hi), Key::Num(n)) => lo <= n && n <= hi,
            (Range::Text(lo, hi), Key::Text(t)) => {
                lo.is_none_or(|lo| lo <= *t) && hi.is_none_or(|hi| *t <= hi)
            }
            _ => false,
        }
    }
}

/// The usable constraints of `bounds`: per column, the index ranges it allows. A
/// constraint whose intervals the index cannot express is dropped (it only narrows).
pub(crate) fn usable_constraints(bounds: &Bounds, dialect: Dialect) -> Vec<(ColId, Vec<Range<'_>>)> {
    let mut out = Vec::new();
    'constraint: for c in &bounds.constraints {
        let mut ranges = Vec::with_capacity(c.intervals.len());
        for iv in &c.intervals {
            if matches!((&iv.low, &iv.high), (Bound::Unbounded, Bound::Unbounded)) {
                continue 'constraint;
            }
            match interval_range(iv, dialect) {
                Some(r) => ranges.push(r),
                None => continue 'constraint,
            }
        }
        out.push((c.column, ranges));
    }
    out
}

/// Version ids sorted by one column's value.
#[derive(Debug, Default)]
pub(crate) struct ColumnIndex<'a> {
    nums: Vec<(f64, u32)>,
    texts: Vec<(&'a str, u32)>,
}

impl<'a> ColumnIndex<'a> {
    /// An index of `(key, id)` pairs.
    pub(crate) fn build(entries: impl Iterator<Item = (Key<'a>, u32)>) -> Self {
        let mut index = ColumnIndex::default();
        for (k, id) in entries {
            match k {
                Key::Num(n) => index.nums.push((n, id)),
                Key::Text(t) => index.texts.push((t, id)),
            }
        }
        index.nums.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        index.texts.sort_unstable();
        index
    }

    fn num_slice(&self, lo: f64, hi: f64) -> &[(f64, u32)] {
        let a = self.nums.partition_point(|e| e.0 < lo);
        let b = self.nums.partition_point(|e| e.0 <= hi);
        &self.nums[a..b.max(a)]
    }

    fn text_slice(&self, lo: Option<&str>, hi: Option<&str>) -> &[(&'a str, u32)] {
        let a = lo.map_or(0, |lo| self.texts.partition_point(|e| e.0 < lo));
        let b = hi.map_or(self.texts.len(), |hi| self.texts.partition_point(|e| e.0 <= hi));
        &self.texts[a..b.max(a)]
    }

    /// How many ids lie in `ranges` (with repeats across overlapping ranges).
    pub(crate) fn count(&self, ranges: &[Range<'_>]) -> usize {
        ranges
            .iter()
            .map(|r| match r {
                Range::Num(lo, hi) => self.num_slice(*lo, *hi).len(),
                Range::Text(lo, hi) => self.text_slice(*lo, *hi).len(),
            })
            .sum()
    }

    /// Calls `f` with every id in `ranges` (an id may come more than once).
    pub(crate) fn for_each(&self, ranges: &[Range<'_>], mut f: impl FnMut(u32)) {
        for r in ranges {
            match r {
                Range::Num(lo, hi) => self.num_slice(*lo, *hi).iter().for_each(|e| f(e.1)),
                Range::Text(lo, hi) => self.text_slice(*lo, *hi).iter().for_each(|e| f(e.1)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_oracle::ColumnBounds;

    #[test]
    fn ranges_select_only_keys_inside_and_widen_never_narrow() {
        let index = ColumnIndex::build(
            [(Key::Num(1.0), 1), (Key::Num(5.0), 5), (Key::Num(9.0), 9), (Key::Text("b"), 20)].into_iter(),
        );
        let bounds = Bounds {
            constraints: vec![ColumnBounds {
                column: ColId(1),
                intervals: vec![Interval {
                    low: Bound::Excluded(Scalar::Int(1)),
                    high: Bound::Included(Scalar::Int(5)),
                }],
            }],
        };
        let usable = usable_constraints(&bounds, Dialect::Postgres);
        assert_eq!(usable.len(), 1);
        let mut ids = Vec::new();
        index.for_each(&usable[0].1, |id| ids.push(id));
        assert_eq!(ids, vec![1, 5], "excluded ends are widened to inclusive; 9 and text are out");
        let text = vec![Range::Text(Some("a"), None)];
        assert_eq!(index.count(&text), 1);
    }

    #[test]
    fn unbounded_or_unindexable_constraints_are_dropped() {
        let bounds = Bounds {
            constraints: vec![
                ColumnBounds {
                    column: ColId(0),
                    intervals: vec![Interval { low: Bound::Unbounded, high: Bound::Unbounded }],
                },
                ColumnBounds {
                    column: ColId(1),
                    intervals: vec![Interval {
                        low: Bound::Included(Scalar::Bool(true)),
                        high: Bound::Included(Scalar::Bool(true)),
                    }],
                },
            ],
        };
        assert!(usable_constraints(&bounds, Dialect::Postgres).is_empty());
    }
}
