//! Per-object versions ordered by commit event, and the pending external reads of each
//! object ordered by start event: Aion's `frontier_ts` and `ongoing_ts`, kept per object.
//!
//! The state an object shows at a point is found by walking back from that point to the
//! nearest version that sets the whole value (for plain values, the one just before), then
//! folding the appends after it (lists). NoConflict with a late transaction is a range
//! query around its span; the writers' spans live in the checker, indexed by transaction.
//!
//! Layout: the commit keys (24 bytes each) are one deque, searched by galloping from the
//! end (arrivals are nearly in order); each version's writer and effect sit in a parallel
//! deque of 24-byte entries, touched only once the position is known. The usual effect, a
//! plain write, is stored inline; list appends and folded lists are boxed.

use std::collections::VecDeque;

use isocert_history::{KvHistory, KvValue, ObjId};

use crate::chronos::timeline::{EventKey, Span};
use crate::chronos::ObjState;

/// What one committed transaction did to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Effect {
    /// The whole state it installed (its last write, or a collected prefix), if any.
    pub(crate) base: Option<ObjState>,
    /// Elements it appended after `base` (or after the state before it).
    pub(crate) appends: Vec<KvValue>,
}

/// An effect as stored: a plain write inline, anything else boxed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stored {
    /// The writer set the object to this plain value.
    Set(KvValue),
    /// Appends, a list base, or no effect on the state.
    Other(Box<Effect>),
}

impl Stored {
    fn new(effect: Effect) -> Stored {
        match effect {
            Effect { base: Some(ObjState::Plain(v)), appends } if appends.is_empty() => Stored::Set(v),
            e => Stored::Other(Box::new(e)),
        }
    }

    /// The whole state this effect installs, if any.
    fn base(&self) -> Option<ObjState> {
        match self {
            Stored::Set(v) => Some(ObjState::Plain(*v)),
            Stored::Other(e) => e.base.clone(),
        }
    }

    fn sets_base(&self) -> bool {
        match self {
            Stored::Set(_) => true,
            Stored::Other(e) => e.base.is_some(),
        }
    }

    fn appends(&self) -> &[KvValue] {
        match self {
            Stored::Set(_) => &[],
            Stored::Other(e) => &e.appends,
        }
    }
}

/// One version's payload, beside its commit key: the writer and what it did.
#[derive(Clone, Debug)]
struct Version {
    writer: u32,
    effect: Stored,
}

/// Versions and pending readers of one object, each kept sorted in a deque: arrivals are
/// nearly in timestamp order, so inserts land near the back, finalization and collection
/// remove near the front, and lookups are binary searches.
#[derive(Debug, Default)]
pub(crate) struct ObjVersions {
    /// Commit events of the versions, ascending.
    keys: VecDeque<EventKey>,
    /// The version at the same position of `keys`.
    versions: VecDeque<Version>,
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

    /// Drops the reads numbered below `first_pending` (their verdicts are final) from the
    /// front of the index. Reads become final in number order and the index is in start
    /// order, so a final read behind a pending one stays until the pending one is final
    /// (at most the reads of one delay window); [`ObjVersions::readers_between`] returns
    /// such reads too, and callers skip them by number.
    pub(crate) fn drop_final_readers(&mut self, first_pending: u64) {
        while self.readers.front().is_some_and(|&(_, read)| read < first_pending) {
            self.readers.pop_front();
        }
    }

    /// Positions (for [`ObjVersions::reader`]) of the indexed reads whose start is after
    /// `after` and at most `until` (unbounded: `None`); final ones still indexed included
    /// ([`ObjVersions::drop_final_readers`]).
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

    /// Adds `writer`'s version at its commit event.
    pub(crate) fn insert_version(&mut self, commit: EventKey, writer: u32, effect: Effect) {
        let at = gallop_back(&self.keys, |k| *k < commit);
        self.keys.insert(at, commit);
        self.versions.insert(at, Version { writer, effect: Stored::new(effect) });
    }

    /// Whether some version commits at or after `at`.
    pub(crate) fn has_versions_from(&self, at: EventKey) -> bool {
        self.keys.back().is_some_and(|k| *k >= at)
    }

    /// The state visible just before `at`, and who installed it (`None`: the initial value).
    pub(crate) fn state_before(&self, kv: &KvHistory, obj: ObjId, at: EventKey) -> (ObjState, Option<u32>) {
        let end = gallop_back(&self.keys, |k| *k < at);
        if end == 0 {
            return (ObjState::initial(kv, kv.initial_value(obj)), None);
        }
        let last = &self.versions[end - 1];
        if let Stored::Set(v) = last.effect {
            return (ObjState::Plain(v), Some(last.writer));
        }
        let mut appends: Vec<&[KvValue]> = Vec::new();
        let mut base = None;
        for v in self.versions.range(..end).rev() {
            let more = v.effect.appends();
            if !more.is_empty() {
                appends.push(more);
            }
            if let Some(b) = v.effect.base() {
                base = Some(b);
                break;
            }
        }
        let mut state = base.unwrap_or_else(|| ObjState::initial(kv, kv.initial_value(obj)));
        for list in appends.into_iter().rev() {
            for &e in list {
                state.append(e);
            }
        }
        (state, Some(last.writer))
    }

    /// Writers whose spans may overlap `span`: commit events from the timestamp of its
    /// start up to its commit plus the longest span seen.
    pub(crate) fn possibly_concurrent(&self, span: Span) -> impl Iterator<Item = u32> + '_ {
        let lo = EventKey::floor(span.start.ts);
        let hi = EventKey::ceil(from128(ts128(span.commit.ts).saturating_add(self.max_span)));
        let from = gallop_back(&self.keys, |k| *k < lo);
        let to = gallop_back(&self.keys, |k| *k <= hi);
        self.versions.range(from..to.max(from)).map(|v| v.writer)
    }

    /// Records a writer's span length.
    pub(crate) fn note_span(&mut self, span: Span) {
        let len = ts128(span.commit.ts) - ts128(span.start.ts);
        self.max_span = self.max_span.max(len);
    }

    /// The first version after `after` that sets the whole state (appends do not), if any:
    /// readers from `after` up to it see the new version's effect.
    pub(crate) fn next_base_after(&self, after: EventKey) -> Option<EventKey> {
        let from = gallop_back(&self.keys, |k| *k <= after);
        let i = self.versions.range(from..).position(|v| v.effect.sets_base())?;
        Some(self.keys[from + i])
    }

    /// Replaces the versions before `watermark` by one that holds their folded state, so
    /// memory stays bounded. Returns the number of versions dropped.
    pub(crate) fn collect_below(&mut self, kv: &KvHistory, obj: ObjId, watermark: EventKey) -> usize {
        let below = gallop_front(&self.keys, |k| *k < watermark);
        if below < 2 {
            return 0;
        }
        let (state, _) = self.state_before(kv, obj, watermark);
        let last_key = self.keys[below - 1];
        let writer = self.versions[below - 1].writer;
        self.keys.drain(..below);
        self.versions.drain(..below);
        self.keys.push_front(last_key);
        let effect = Stored::new(Effect { base: Some(state), appends: Vec::new() });
        self.versions.push_front(Version { writer, effect });
        below - 1
    }

    /// Number of versions held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use isocert_history::{v1, Scalar, Timestamp};
    use isocert_random::rand::Rng as _;

    use super::*;
    use crate::chronos::timeline::Phase;

    /// A history with one object (initial value 0), for the initial state.
    fn one_object() -> KvHistory {
        let text = r#"{"id":0,"session":0,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":0,"value":1}]}"#;
        let h = v1::read_history(text.as_bytes()).unwrap();
        let mut kv = KvHistory::from_history(&h).unwrap();
        kv.set_default_initial(Some(&Scalar::Int(0)));
        kv
    }

    fn key(rng: &mut impl isocert_random::rand::Rng, txn: u32) -> EventKey {
        let phase = [Phase::Commit, Phase::Atomic, Phase::Start][rng.random_range(0..3usize)];
        EventKey { ts: Timestamp::hlc(rng.random_range(0..60), rng.random_range(0..2)), phase, txn }
    }

    fn effect(rng: &mut impl isocert_random::rand::Rng) -> Effect {
        let v = |rng: &mut dyn isocert_random::rand::RngCore| KvValue::Int(rng.random_range(0..100));
        match rng.random_range(0..6) {
            0..=2 => Effect { base: Some(ObjState::Plain(v(rng))), appends: Vec::new() },
            3 => Effect { base: None, appends: (0..rng.random_range(1..3)).map(|_| v(rng)).collect() },
            4 => Effect { base: Some(ObjState::List(vec![v(rng)])), appends: vec![v(rng)] },
            _ => Effect { base: Some(ObjState::Plain(v(rng))), appends: vec![v(rng)] },
        }
    }

    /// The reference: every version in a `BTreeMap`, the state folded from the initial value.
    fn model_state(
        kv: &KvHistory,
        model: &BTreeMap<EventKey, (u32, Effect)>,
        at: EventKey,
    ) -> (ObjState, Option<u32>) {
        let mut state = ObjState::initial(kv, kv.initial_value(ObjId(0)));
        let mut writer = None;
        for (_, (w, e)) in model.range(..at) {
            writer = Some(*w);
            if let Some(b) = &e.base {
                state = b.clone();
            }
            for &x in &e.appends {
                state.append(x);
            }
        }
        (state, writer)
    }

    #[test]
    fn versions_and_readers_agree_with_a_btreemap_model() {
        let kv = one_object();
        for seed in 0..200u64 {
            let mut rng = isocert_random::seeded(seed);
            let mut o = ObjVersions::default();
            let mut model: BTreeMap<EventKey, (u32, Effect)> = BTreeMap::new();
            let mut readers: BTreeSet<(EventKey, u64)> = BTreeSet::new();
            let mut max_span = 0u128;
            let mut watermark = EventKey::floor(Timestamp::hlc(0, 0));
            let mut next_txn = 0u32;
            let mut next_read = 0u64;
            let mut first_pending = 0u64;
            for _ in 0..rng.random_range(1..300) {
                // Queries at or after the watermark (below it, versions are folded).
                let txn = rng.random_range(0..1000);
                let mut at = key(&mut rng, txn);
                if at < watermark {
                    at = watermark;
                }
                match rng.random_range(0..10) {
                    0..=3 => {
                        next_txn += 1;
                        let mut commit = key(&mut rng, next_txn);
                        if commit < watermark {
                            commit.ts = Timestamp::hlc(watermark.ts.wall + 1, 0);
                        }
                        let e = effect(&mut rng);
                        let start = EventKey {
                            ts: Timestamp::hlc(commit.ts.wall.saturating_sub(rng.random_range(0..5)), 0),
                            phase: Phase::Start,
                            txn: next_txn,
                        };
                        let span = Span { start, commit };
                        o.note_span(span);
                        max_span = max_span.max(ts128(commit.ts) - ts128(start.ts));
                        o.insert_version(commit, next_txn, e.clone());
                        model.insert(commit, (next_txn, e));
                    }
                    4 | 5 => assert_eq!(
                        o.state_before(&kv, ObjId(0), at),
                        model_state(&kv, &model, at),
                        "seed {seed}"
                    ),
                    6 => {
                        let want = model
                            .range((std::ops::Bound::Excluded(at), std::ops::Bound::Unbounded))
                            .find(|(_, (_, e))| e.base.is_some())
                            .map(|(k, _)| *k);
                        assert_eq!(o.next_base_after(at), want, "seed {seed}");
                        assert_eq!(o.has_versions_from(at), model.range(at..).next().is_some());
                    }
                    7 => {
                        // Starts after the watermark's timestamp, so no folded version is in range.
                        let start = EventKey { ts: Timestamp::hlc(at.ts.wall + 1, 0), ..at };
                        let commit =
                            EventKey { ts: Timestamp::hlc(at.ts.wall + rng.random_range(1..6), 0), ..at };
                        let span = Span { start, commit };
                        let lo = EventKey::floor(start.ts);
                        let hi = EventKey::ceil(from128(ts128(commit.ts) + max_span));
                        let want: Vec<u32> = model.range(lo..=hi).map(|(_, (w, _))| *w).collect();
                        assert_eq!(o.possibly_concurrent(span).collect::<Vec<_>>(), want, "seed {seed}");
                    }
                    8 => {
                        // Reads are numbered in order and become final in number order.
                        if rng.random_range(0..2) == 0 || readers.is_empty() {
                            next_read += 1;
                            o.add_reader(at, next_read);
                            readers.insert((at, next_read));
                        } else {
                            let &oldest = readers.iter().min_by_key(|(_, r)| *r).unwrap();
                            readers.remove(&oldest);
                            first_pending = oldest.1 + 1;
                            o.drop_final_readers(first_pending);
                            assert!(o.readers.front().is_none_or(|&(_, r)| r >= first_pending));
                        }
                        let until = (rng.random_range(0..2) == 0).then(|| key(&mut rng, 0));
                        let got: Vec<_> = o
                            .readers_between(at, until)
                            .map(|i| o.reader(i))
                            .filter(|(_, r)| *r >= first_pending)
                            .collect();
                        let want: Vec<_> = readers
                            .iter()
                            .filter(|(k, _)| *k > at && until.is_none_or(|u| *k <= u))
                            .copied()
                            .collect();
                        assert_eq!(got, want, "seed {seed}");
                    }
                    _ => {
                        watermark = at;
                        let before = o.len();
                        let dropped = o.collect_below(&kv, ObjId(0), watermark);
                        assert_eq!(o.len(), before - dropped);
                        // At most one (folded) version is left below the watermark.
                        let below = model.range(..watermark).count().min(1);
                        assert_eq!(o.len(), model.range(watermark..).count() + below, "seed {seed}");
                    }
                }
            }
        }
    }

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
