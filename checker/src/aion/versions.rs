//! Per-object versions ordered by commit event, and the pending external reads of each
//! object ordered by start event: Aion's `frontier_ts` and `ongoing_ts`, kept per object.
//!
//! The state an object shows at a point is found by walking back from that point to the
//! nearest version that sets the whole value (for plain values, the one just before), then
//! folding the appends after it (lists). Writers keep their spans, so NoConflict with a
//! late transaction is a range query around its span.

use std::collections::VecDeque;

use isocert_history::{KvHistory, KvValue, ObjId};

use crate::chronos::timeline::{EventKey, Span};
use crate::chronos::ObjState;

/// What one committed transaction did to one object.
#[derive(Clone, Debug)]
pub(crate) struct Effect {
    /// The whole state it installed (its last write, or a collected prefix), if any.
    pub(crate) base: Option<ObjState>,
    /// Elements it appended after `base` (or after the state before it).
    pub(crate) appends: Vec<KvValue>,
}

/// One version: its writer, the writer's span and the effect.
#[derive(Clone, Debug)]
pub(crate) struct Version {
    pub(crate) writer: u32,
    pub(crate) span: Span,
    pub(crate) effect: Effect,
}

/// Versions and pending readers of one object, each kept sorted in a deque: arrivals are
/// nearly in timestamp order, so inserts land near the back, finalization and collection
/// remove near the front, and lookups are binary searches.
#[derive(Debug, Default)]
pub(crate) struct ObjVersions {
    /// Versions by commit event.
    versions: VecDeque<(EventKey, Version)>,
    /// Pending external reads: the reader's start event (which names the reader) and the
    /// read's number in the stream of external reads.
    readers: VecDeque<(EventKey, u64)>,
    /// The longest writer span seen (commit minus start, as 128-bit timestamps).
    max_span: u128,
}

/// A timestamp as one 128-bit number (wall then logical), for span arithmetic.
pub(crate) fn ts128(ts: isocert_history::Timestamp) -> u128 {
    (u128::from(ts.wall) << 64) | u128::from(ts.logical)
}

fn from128(x: u128) -> isocert_history::Timestamp {
    isocert_history::Timestamp::hlc((x >> 64) as u64, x as u64)
}

/// The first index where `pred` turns false (it must hold on a prefix), searching from the
/// back with doubling steps: O(log d) for an answer d places from the end.
fn gallop_back<T>(dq: &VecDeque<T>, pred: impl Fn(&T) -> bool) -> usize {
    let mut hi = dq.len();
    let mut step = 1;
    let lo = loop {
        if step > hi {
            break 0;
        }
        let i = hi - step;
        if pred(&dq[i]) {
            break i + 1;
        }
        hi = i;
        step *= 2;
    };
    bisect(dq, lo, hi, pred)
}

/// As [`gallop_back`], searching from the front (answers near the start are cheap).
fn gallop_front<T>(dq: &VecDeque<T>, pred: impl Fn(&T) -> bool) -> usize {
    let n = dq.len();
    let mut lo = 0;
    let mut step = 1;
    let hi = loop {
        let i = lo + step - 1;
        if i >= n {
            break n;
        }
        if !pred(&dq[i]) {
            break i;
        }
        lo = i + 1;
        step *= 2;
    };
    bisect(dq, lo, hi, pred)
}

/// Binary search for the first index in `lo..hi` where `pred` is false.
fn bisect<T>(dq: &VecDeque<T>, mut lo: usize, mut hi: usize, pred: impl Fn(&T) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(&dq[mid]) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl ObjVersions {
    /// Indexes a pending external read.
    pub(crate) fn add_reader(&mut self, start: EventKey, read: u64) {
        let entry = (start, read);
        let at = gallop_back(&self.readers, |e| *e < entry);
        self.readers.insert(at, entry);
    }

    /// Removes a pending external read from the index (its verdict is final).
    pub(crate) fn remove_reader(&mut self, start: EventKey, read: u64) {
        let entry = (start, read);
        let at = gallop_front(&self.readers, |e| *e < entry);
        if self.readers.get(at) == Some(&entry) {
            self.readers.remove(at);
        }
    }

    /// Positions (for [`ObjVersions::reader`]) of the pending reads whose start is after
    /// `after` and at most `until` (unbounded: `None`).
    pub(crate) fn readers_between(&self, after: EventKey, until: Option<EventKey>) -> std::ops::Range<usize> {
        let from = gallop_back(&self.readers, |(k, _)| *k <= after);
        let to = match until {
            Some(u) => gallop_back(&self.readers, |(k, _)| *k <= u),
            None => self.readers.len(),
        };
        from..to.max(from)
    }

    /// The pending read at position `k`: its reader's start event and its number.
    pub(crate) fn reader(&self, k: usize) -> (EventKey, u64) {
        self.readers[k]
    }

    /// Adds a version at its commit event.
    pub(crate) fn insert_version(&mut self, commit: EventKey, version: Version) {
        let at = gallop_back(&self.versions, |(k, _)| *k < commit);
        self.versions.insert(at, (commit, version));
    }

    /// Whether some version commits at or after `at`.
    pub(crate) fn has_versions_from(&self, at: EventKey) -> bool {
        self.versions.back().is_some_and(|(k, _)| *k >= at)
    }

    /// The state visible just before `at`, and who installed it (`None`: the initial value).
    pub(crate) fn state_before(&self, kv: &KvHistory, obj: ObjId, at: EventKey) -> (ObjState, Option<u32>) {
        let end = gallop_back(&self.versions, |(k, _)| *k < at);
        let mut appends: Vec<&[KvValue]> = Vec::new();
        let mut writer = None;
        let mut base = None;
        for (_, v) in self.versions.range(..end).rev() {
            if writer.is_none() {
                writer = Some(v.writer);
            }
            if !v.effect.appends.is_empty() {
                appends.push(&v.effect.appends);
            }
            if let Some(b) = &v.effect.base {
                base = Some(b.clone());
                break;
            }
        }
        let mut state = base.unwrap_or_else(|| ObjState::initial(kv, kv.initial_value(obj)));
        for list in appends.into_iter().rev() {
            for &e in list {
                state.append(e);
            }
        }
        (state, writer)
    }

    /// Writers whose spans may overlap `span`: commit events from the timestamp of its
    /// start up to its commit plus the longest span seen.
    pub(crate) fn possibly_concurrent(&self, span: Span) -> impl Iterator<Item = &Version> {
        let lo = EventKey::floor(span.start.ts);
        let hi = EventKey::ceil(from128(ts128(span.commit.ts).saturating_add(self.max_span)));
        let from = gallop_back(&self.versions, |(k, _)| *k < lo);
        let to = gallop_back(&self.versions, |(k, _)| *k <= hi);
        self.versions.range(from..to.max(from)).map(|(_, v)| v)
    }

    /// Records a writer's span length.
    pub(crate) fn note_span(&mut self, span: Span) {
        let len = ts128(span.commit.ts) - ts128(span.start.ts);
        self.max_span = self.max_span.max(len);
    }

    /// The first version after `after` that sets the whole state (appends do not), if any:
    /// readers from `after` up to it see the new version's effect.
    pub(crate) fn next_base_after(&self, after: EventKey) -> Option<EventKey> {
        let from = gallop_back(&self.versions, |(k, _)| *k <= after);
        self.versions.range(from..).find(|(_, v)| v.effect.base.is_some()).map(|(k, _)| *k)
    }

    /// Replaces the versions before `watermark` by one that holds their folded state, so
    /// memory stays bounded. Returns the number of versions dropped.
    pub(crate) fn collect_below(&mut self, kv: &KvHistory, obj: ObjId, watermark: EventKey) -> usize {
        let below = gallop_front(&self.versions, |(k, _)| *k < watermark);
        if below < 2 {
            return 0;
        }
        let (state, _) = self.state_before(kv, obj, watermark);
        let (last_key, last) = &self.versions[below - 1];
        let keep = (
            *last_key,
            Version {
                writer: last.writer,
                span: last.span,
                effect: Effect { base: Some(state), appends: Vec::new() },
            },
        );
        self.versions.drain(..below);
        self.versions.push_front(keep);
        below - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_searches_agree_with_partition_point() {
        for n in 0..40usize {
            let dq: VecDeque<usize> = (0..n).map(|i| i * 2).collect();
            for x in 0..(2 * n + 2) {
                let want = dq.partition_point(|&v| v < x);
                assert_eq!(gallop_back(&dq, |&v| v < x), want, "n={n} x={x}");
                assert_eq!(gallop_front(&dq, |&v| v < x), want, "n={n} x={x}");
            }
        }
    }
}
