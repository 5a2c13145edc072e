//! Aion: online timestamp-based checking (Algorithm 3 of the Chronos/Aion paper).
//!
//! Transactions arrive one at a time in any timestamp order (each session's in session
//! order). On arrival, a transaction is checked for Session (against the previous arrival
//! of its session), Int, and Ext (each external read against the object's state just
//! before the transaction's start, from the versions received so far); each object it
//! writes gets a new version, which re-checks NoConflict against the writers whose spans
//! overlap and re-checks Ext for the pending readers that now see the new version. An Ext
//! verdict is tentative until a configurable delay has passed ([`AionDelay`]): a late
//! writer may still justify a read. Session, Int and NoConflict verdicts are final at once.
//!
//! Garbage collection: every [`AionOptions::gc_every`] arrivals, the versions of each
//! object older than the watermark (the earliest start among transactions whose Ext
//! verdict is still pending) fold into one, and readers leave the index from its front once
//! their verdict is final. A transaction that arrives after the watermark passed its start
//! is checked against the folded state and counted in the report's notes. Once every
//! transaction has arrived, the verdicts are Chronos's.
//!
//! Online over partitions (docs/ONLINE.md): with an [`AionScope`] a checker owns one
//! partition's objects and sessions ([`Partitioning`]) and ignores the rest of each
//! transaction it receives; with [`AionDelay::Watermark`] an Ext verdict becomes final when
//! the producers' [`Watermark`] says nothing still to arrive commits at or before the read's
//! start, and versions are collected only below the watermark's start bound. A partition
//! may receive only its share of a transaction ([`Partitioning::split_line`]): the
//! operations on its objects, with their numbers in the whole transaction
//! ([`Aion::receive_part`]), so explanations cite the operations offline Chronos cites.

mod versions;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use isocert_history::{History, KvHistory, KvOpKind, KvValue, ObjId, Timestamp, TxnId};

use crate::chronos::timeline::{self, EventKey, Span};
use crate::chronos::{sort_anomalies, ObjState, Source};
use crate::{Anomaly, CheckError, CheckStats, CheckerKind, IsolationLevel, Partitioning, Report};
use versions::{Effect, ObjVersions};

const NONE: u32 = u32::MAX;

/// When a tentative Ext verdict becomes final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AionDelay {
    /// After this many further transactions have arrived (deterministic; for files).
    Arrivals(usize),
    /// After this much wall-clock time since the transaction arrived (for live streams).
    Time(Duration),
    /// When the producers' watermark passes the transaction's start: once
    /// [`Aion::complete_below`] says no transaction still to arrive commits before a bound
    /// above the start, every version the read could see is there (online checking).
    /// Versions are then collected only below the watermark's start bound too.
    Watermark,
}

/// What the producers promise about the transactions still to arrive (online checking):
/// each starts at or after `start` and commits at or after `commit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Watermark {
    /// No transaction still to arrive starts before this.
    pub start: Timestamp,
    /// No transaction still to arrive commits before this.
    pub commit: Timestamp,
}

impl Watermark {
    /// The watermark past every timestamp: nothing more will arrive.
    pub const END: Watermark = Watermark {
        start: Timestamp { wall: u64::MAX, logical: u64::MAX },
        commit: Timestamp { wall: u64::MAX, logical: u64::MAX },
    };

    /// The lower of two producers' promises, bound by bound.
    pub fn min(self, other: Watermark) -> Watermark {
        Watermark { start: self.start.min(other.start), commit: self.commit.min(other.commit) }
    }
}

/// The part of the history one checker owns, when the checks are split across partitions
/// ([`Partitioning`]): Int, Ext and NoConflict of the objects of partition `owned`, and
/// Session of its sessions; operations on other objects and other sessions' order are
/// left to the checkers of their partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AionScope {
    /// How objects and sessions are dealt out.
    pub partitioning: Partitioning,
    /// The partition this checker owns.
    pub owned: u32,
}

/// Aion's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AionOptions {
    /// Snapshot isolation or serializable.
    pub level: IsolationLevel,
    /// When an Ext verdict becomes final.
    pub delay: AionDelay,
    /// Garbage-collect versions every this many arrivals.
    pub gc_every: usize,
    /// Check only one partition's objects and sessions (`None`: everything).
    pub scope: Option<AionScope>,
}

impl AionOptions {
    /// Defaults: verdicts final after 10,000 further arrivals, GC every 4,096 arrivals.
    pub fn new(level: IsolationLevel) -> Self {
        AionOptions { level, delay: AionDelay::Arrivals(10_000), gc_every: 4096, scope: None }
    }
}

/// One external read awaiting its final verdict.
#[derive(Clone, Copy, Debug)]
struct ExtRead {
    op: u32,
    obj: ObjId,
    seen: KvValue,
    ok: bool,
}

/// A transaction with pending external reads: its reads are the next `reads` entries of
/// [`Aion::reads`] (pending transactions are finalized in arrival order, so their reads
/// leave the queue from the front).
#[derive(Debug)]
struct Pending {
    txn: u32,
    reads: u32,
    due_arrival: u64,
    due_time: Option<Instant>,
}

/// The online checker. Feed it with [`Aion::receive`]; collect final anomalies with
/// [`Aion::take_final`]; end with [`Aion::finish`].
#[derive(Debug)]
pub struct Aion {
    options: AionOptions,
    spans: Vec<Option<Span>>,
    session_last: Vec<u32>,
    objects: Vec<ObjVersions>,
    /// The external reads of the pending transactions, in arrival order; the front one is
    /// read number `reads_base` of the stream (the numbers the version index holds).
    reads: VecDeque<ExtRead>,
    reads_base: u64,
    pending: VecDeque<Pending>,
    /// Scratch buffers of [`Aion::check_reads`], kept to avoid allocating per transaction.
    local: Vec<(ObjId, ObjState)>,
    writes: Vec<(ObjId, Effect)>,
    dirty: Vec<u32>,
    dirty_mark: Vec<bool>,
    watermark: Option<EventKey>,
    arrivals: u64,
    since_gc: usize,
    checked: usize,
    ops: usize,
    late: usize,
    collected: usize,
    final_anomalies: Vec<Anomaly>,
    taken: usize,
    /// Whether each object (by id) and each session is owned, under a scope: 0 not yet
    /// known, 1 owned, 2 another partition's.
    owned_objects: Vec<u8>,
    owned_sessions: Vec<u8>,
    /// What is promised about the transactions still to arrive ([`Aion::complete_below`]).
    bound: Option<Watermark>,
    /// Transactions that arrived committing before the bound already given.
    beyond_bound: usize,
}

impl Aion {
    /// A checker with `options`.
    ///
    /// # Errors
    /// [`CheckError::UnsupportedLevel`] below snapshot isolation.
    pub fn new(options: AionOptions) -> Result<Aion, CheckError> {
        timeline::supported(options.level, CheckerKind::Aion)?;
        Ok(Aion {
            options,
            spans: Vec::new(),
            session_last: Vec::new(),
            objects: Vec::new(),
            reads: VecDeque::new(),
            reads_base: 0,
            pending: VecDeque::new(),
            local: Vec::new(),
            writes: Vec::new(),
            dirty: Vec::new(),
            dirty_mark: Vec::new(),
            watermark: None,
            arrivals: 0,
            since_gc: 0,
            checked: 0,
            ops: 0,
            late: 0,
            collected: 0,
            final_anomalies: Vec::new(),
            taken: 0,
            owned_objects: Vec::new(),
            owned_sessions: Vec::new(),
            bound: None,
            beyond_bound: 0,
        })
    }

    /// Checks the newly arrived transaction `t` of `kv` (its operations must still be there;
    /// Aion does not look at them again, so the caller may free them afterwards).
    ///
    /// # Errors
    /// [`CheckError::MissingCertificateData`] for a committed transaction without
    /// timestamps, [`CheckError::UnsupportedHistory`] for one that starts after it commits.
    pub fn receive(&mut self, kv: &KvHistory, t: TxnId) -> Result<(), CheckError> {
        self.receive_numbered(kv, t, None)
    }

    /// [`Aion::receive`] for one partition's share of a transaction
    /// ([`Partitioning::split_line`]): `t` holds only some of the transaction's operations,
    /// and `op_numbers[i]` is the number of its operation `i` in the whole transaction, the
    /// number explanations cite (so they read as the offline check's).
    ///
    /// # Errors
    /// As [`Aion::receive`]; [`CheckError::UnsupportedHistory`] when `op_numbers` does not
    /// have one number per operation of `t`.
    pub fn receive_part(&mut self, kv: &KvHistory, t: TxnId, op_numbers: &[u32]) -> Result<(), CheckError> {
        if op_numbers.len() != kv.ops(t).len() {
            return Err(CheckError::UnsupportedHistory {
                checker: CheckerKind::Aion,
                what: format!(
                    "{} has {} operations but {} operation numbers",
                    kv.txn_label(t),
                    kv.ops(t).len(),
                    op_numbers.len()
                ),
            });
        }
        self.receive_numbered(kv, t, Some(op_numbers))
    }

    fn receive_numbered(
        &mut self,
        kv: &KvHistory,
        t: TxnId,
        numbers: Option<&[u32]>,
    ) -> Result<(), CheckError> {
        self.arrivals += 1;
        let span = timeline::span_of(kv, t, self.options.level, CheckerKind::Aion)?;
        if self.spans.len() <= t.index() {
            self.spans.resize(t.index() + 1, None);
        }
        self.spans[t.index()] = span;
        if self.objects.len() < kv.dict().object_count() {
            self.objects.resize_with(kv.dict().object_count(), ObjVersions::default);
            self.dirty_mark.resize(kv.dict().object_count(), false);
        }
        if let Some(span) = span {
            self.checked += 1;
            self.ops += kv.ops(t).len();
            if self.watermark.is_some_and(|w| span.start < w) {
                self.late += 1;
            }
            if self.bound.is_some_and(|b| span.commit.ts < b.commit) {
                self.beyond_bound += 1;
            }
            if self.owns_session(kv, t) {
                self.check_session(kv, t, span);
            }
            let mut writes = self.check_reads(kv, t, span, numbers);
            for (obj, effect) in writes.drain(..) {
                self.install(kv, t, span, obj, effect);
            }
            self.writes = writes;
        }
        self.finalize_due(kv);
        self.since_gc += 1;
        if self.since_gc >= self.options.gc_every {
            self.since_gc = 0;
            self.collect(kv);
        }
        Ok(())
    }

    fn check_session(&mut self, kv: &KvHistory, t: TxnId, span: Span) {
        let s = kv.session(t).index();
        if self.session_last.len() <= s {
            self.session_last.resize(s + 1, NONE);
        }
        let prev = self.session_last[s];
        if prev != NONE {
            let prev_span = self.spans[prev as usize].expect("session predecessors are checked");
            if prev_span.commit > span.start {
                let serializable = self.options.level == IsolationLevel::Serializable;
                self.final_anomalies.push(crate::chronos::explain_session(kv, TxnId(prev), t, serializable));
            }
        }
        self.session_last[s] = t.0;
    }

    /// Int at once, Ext tentatively; returns each written object's effect (in the scratch
    /// buffer `self.writes`, which the caller hands back).
    /// `numbers` are the operations' numbers in the whole transaction when `t` is a part
    /// of it (their indexes otherwise).
    fn check_reads(
        &mut self,
        kv: &KvHistory,
        t: TxnId,
        span: Span,
        numbers: Option<&[u32]>,
    ) -> Vec<(ObjId, Effect)> {
        let mut local = std::mem::take(&mut self.local);
        let mut writes = std::mem::take(&mut self.writes);
        local.clear();
        writes.clear();
        let first_read = self.reads_base + self.reads.len() as u64;
        let mut reads = 0u32;
        for (i, op) in kv.ops(t).iter().enumerate() {
            let obj = op.obj();
            if !self.owns_object(kv, obj) {
                continue;
            }
            let v = op.value();
            let number = numbers.map_or(i as u32, |n| n[i]);
            let slot = local.iter().position(|(o, _)| *o == obj);
            match op.kind() {
                KvOpKind::Read => {
                    let seen = crate::chronos::read_state_of(kv, v);
                    match slot {
                        None => {
                            let versions = &mut self.objects[obj.index()];
                            let (state, _) = versions.state_before(kv, obj, span.start);
                            let ok = state.explains(kv, v);
                            versions.add_reader(span.start, first_read + u64::from(reads));
                            self.reads.push_back(ExtRead { op: number, obj, seen: v, ok });
                            reads += 1;
                            local.push((obj, seen));
                        }
                        Some(j) => {
                            if !local[j].1.explains(kv, v) {
                                self.final_anomalies.push(crate::chronos::explain_int(
                                    kv,
                                    t,
                                    number,
                                    obj,
                                    &local[j].1,
                                    &seen,
                                ));
                            }
                            local[j].1 = seen;
                        }
                    }
                }
                kind => {
                    let j = match slot {
                        Some(j) => j,
                        None => {
                            // A write replaces the state: only an append needs the one before.
                            let state = if kind == KvOpKind::Write {
                                ObjState::Unset
                            } else {
                                self.objects[obj.index()].state_before(kv, obj, span.start).0
                            };
                            local.push((obj, state));
                            local.len() - 1
                        }
                    };
                    let w = match writes.iter().position(|(o, _)| *o == obj) {
                        Some(w) => w,
                        None => {
                            writes.push((obj, Effect { base: None, appends: Vec::new() }));
                            writes.len() - 1
                        }
                    };
                    if kind == KvOpKind::Write {
                        local[j].1.write(v);
                        writes[w].1 = Effect { base: Some(ObjState::Plain(v)), appends: Vec::new() };
                    } else {
                        local[j].1.append(v);
                        writes[w].1.appends.push(v);
                    }
                }
            }
        }
        self.local = local;
        if reads > 0 {
            let due_time = match self.options.delay {
                AionDelay::Time(d) => Some(Instant::now() + d),
                AionDelay::Arrivals(_) | AionDelay::Watermark => None,
            };
            let due_arrival = match self.options.delay {
                AionDelay::Arrivals(n) => self.arrivals + n as u64,
                AionDelay::Time(_) | AionDelay::Watermark => u64::MAX,
            };
            self.pending.push_back(Pending { txn: t.0, reads, due_arrival, due_time });
        }
        writes
    }

    /// Installs `t`'s version of `obj`: NoConflict against overlapping writers, then Ext
    /// re-checks for the pending readers that now see it.
    fn install(&mut self, kv: &KvHistory, t: TxnId, span: Span, obj: ObjId, effect: Effect) {
        let o = &mut self.objects[obj.index()];
        for writer in o.possibly_concurrent(span) {
            let other = self.spans[writer as usize].expect("writers are checked");
            if writer != t.0 && span.concurrent(other) {
                let (first, second) = if other.commit < span.commit {
                    ((TxnId(writer), other), (t, span))
                } else {
                    ((t, span), (TxnId(writer), other))
                };
                self.final_anomalies.push(crate::chronos::explain_no_conflict(
                    kv,
                    first.0,
                    second.0,
                    obj,
                    (first.1, second.1),
                ));
            }
        }
        o.note_span(span);
        let sets_base = effect.base.is_some();
        o.insert_version(span.commit, t.0, effect);
        let until = if sets_base { o.next_base_after(span.commit) } else { None };
        let o = &self.objects[obj.index()];
        for k in o.readers_between(span.commit, until) {
            let (at, read) = o.reader(k);
            if read < self.reads_base {
                // Final already; it leaves the index from the front.
                continue;
            }
            let (state, _) = o.state_before(kv, obj, at);
            let r = &mut self.reads[(read - self.reads_base) as usize];
            r.ok = state.explains(kv, r.seen);
        }
        if !self.dirty_mark[obj.index()] {
            self.dirty_mark[obj.index()] = true;
            self.dirty.push(obj.0);
        }
    }

    fn finalize_due(&mut self, kv: &KvHistory) {
        let now = match self.options.delay {
            AionDelay::Time(_) => Some(Instant::now()),
            AionDelay::Arrivals(_) | AionDelay::Watermark => None,
        };
        while let Some(p) = self.pending.front() {
            let due = p.due_arrival <= self.arrivals
                || matches!((p.due_time, now), (Some(d), Some(n)) if d <= n)
                || (self.options.delay == AionDelay::Watermark
                    && self
                        .bound
                        .is_some_and(|b| self.spans[p.txn as usize].is_some_and(|s| s.start.ts < b.commit)));
            if !due {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            self.finalize(kv, &p);
        }
    }

    /// Makes the Ext verdicts of `p` (the oldest pending transaction) final: reports the
    /// reads still unexplained.
    fn finalize(&mut self, kv: &KvHistory, p: &Pending) {
        let t = p.txn;
        let span = self.spans[t as usize].expect("pending transactions are checked");
        let serializable = self.options.level == IsolationLevel::Serializable;
        for _ in 0..p.reads {
            let read = self.reads.pop_front().expect("a pending transaction's reads are queued");
            self.reads_base += 1;
            let o = &mut self.objects[read.obj.index()];
            o.drop_final_readers(self.reads_base);
            if !read.ok {
                let (state, writer) = o.state_before(kv, read.obj, span.start);
                let source = writer.map_or(Source::Initial, |w| Source::Txn(TxnId(w)));
                let seen = crate::chronos::read_state_of(kv, read.seen);
                self.final_anomalies.push(crate::chronos::explain_ext(
                    kv,
                    crate::chronos::ReadAt { txn: TxnId(t), op: read.op, obj: read.obj },
                    &state,
                    source,
                    &seen,
                    serializable,
                ));
            }
        }
    }

    /// Folds versions below the watermark (the earliest start still pending).
    fn collect(&mut self, kv: &KvHistory) {
        let mut watermark =
            self.pending.iter().filter_map(|p| self.spans[p.txn as usize]).map(|s| s.start).min();
        if self.options.delay == AionDelay::Watermark {
            // Transactions still to arrive may start long before the pending ones.
            let Some(bound) = self.bound else { return };
            let floor = EventKey::floor(bound.start);
            watermark = Some(watermark.map_or(floor, |w| w.min(floor)));
        }
        let Some(watermark) = watermark else { return };
        self.watermark = Some(self.watermark.map_or(watermark, |w| w.max(watermark)));
        for obj in std::mem::take(&mut self.dirty) {
            self.dirty_mark[obj as usize] = false;
            let o = &mut self.objects[obj as usize];
            self.collected += o.collect_below(kv, ObjId(obj), watermark);
            if o.has_versions_from(watermark) {
                self.dirty_mark[obj as usize] = true;
                self.dirty.push(obj);
            }
        }
    }

    /// Takes the producers' watermark: with [`AionDelay::Watermark`], the Ext verdicts of
    /// the transactions that start before its commit bound become final (in arrival order:
    /// one waits for those that arrived before it), and versions below its start bound may
    /// be collected. Bounds lower than ones given before are ignored.
    pub fn complete_below(&mut self, kv: &KvHistory, bound: Watermark) {
        let bound = match self.bound {
            Some(old) => {
                Watermark { start: old.start.max(bound.start), commit: old.commit.max(bound.commit) }
            }
            None => bound,
        };
        if self.bound == Some(bound) {
            return;
        }
        self.bound = Some(bound);
        self.finalize_due(kv);
    }

    /// How many transactions arrived committing before a bound given to
    /// [`Aion::complete_below`] earlier: a producer broke its watermark, and verdicts made
    /// final before may be wrong.
    pub fn beyond_watermark(&self) -> usize {
        self.beyond_bound
    }

    /// Whether this checker owns object `obj` (always, without a scope).
    fn owns_object(&mut self, kv: &KvHistory, obj: ObjId) -> bool {
        let Some(scope) = self.options.scope else { return true };
        let i = obj.index();
        if self.owned_objects.len() <= i {
            self.owned_objects.resize(kv.dict().object_count().max(i + 1), 0);
        }
        if self.owned_objects[i] == 0 {
            let dict = kv.dict();
            let object = dict.object(obj);
            let part = scope.partitioning.of_object(&dict.table(object.table).name, &object.key);
            self.owned_objects[i] = if part == scope.owned { 1 } else { 2 };
        }
        self.owned_objects[i] == 1
    }

    /// Whether this checker owns the session of `t` (always, without a scope).
    fn owns_session(&mut self, kv: &KvHistory, t: TxnId) -> bool {
        let Some(scope) = self.options.scope else { return true };
        let s = kv.session(t);
        let i = s.index();
        if self.owned_sessions.len() <= i {
            self.owned_sessions.resize(kv.dict().session_count().max(i + 1), 0);
        }
        if self.owned_sessions[i] == 0 {
            let part = scope.partitioning.of_session(kv.dict().session_name(s));
            self.owned_sessions[i] = if part == scope.owned { 1 } else { 2 };
        }
        self.owned_sessions[i] == 1
    }

    /// Anomalies that became final since the last call (for live output).
    pub fn take_final(&mut self) -> &[Anomaly] {
        let from = self.taken;
        self.taken = self.final_anomalies.len();
        &self.final_anomalies[from..]
    }

    /// Number of transactions with an Ext verdict still pending.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Ends the stream: every pending verdict becomes final; returns the report.
    pub fn finish(mut self, kv: &KvHistory) -> Report {
        while let Some(p) = self.pending.pop_front() {
            self.finalize(kv, &p);
        }
        let mut report = Report::new(self.options.level, CheckerKind::Aion);
        report.stats = CheckStats {
            txns: self.arrivals as usize,
            committed: self.checked,
            ops: self.ops,
            ..CheckStats::default()
        };
        if self.beyond_bound > 0 {
            report.notes.push(format!(
                "{} transactions arrived committing before the producers' watermark had passed their \
                 commit; verdicts made final before they arrived may be wrong",
                self.beyond_bound
            ));
        }
        if self.late > 0 {
            report.notes.push(format!(
                "{} transactions arrived after the garbage-collection watermark passed their start; \
                 they were checked against collected state (raise --aion-delay)",
                self.late
            ));
        }
        let mut anomalies = self.final_anomalies;
        sort_anomalies(&mut anomalies);
        report.anomalies = anomalies;
        report
    }
}

/// Runs Aion over `kv` with transactions arriving in `order` (every transaction once).
///
/// # Errors
/// As [`Aion::new`] and [`Aion::receive`].
pub fn check_aion_kv(
    kv: &KvHistory,
    order: impl IntoIterator<Item = TxnId>,
    options: AionOptions,
) -> Result<Report, CheckError> {
    let mut aion = Aion::new(options)?;
    for t in order {
        aion.receive(kv, t)?;
    }
    crate::settle_serial_order(aion.finish(kv), kv.dict().serial_order)
}

/// Runs Aion over a general history, transactions arriving in file order.
///
/// # Errors
/// As [`check_aion_kv`], plus [`CheckError::UnsupportedHistory`] for predicate operations.
pub fn check_aion(h: &History, level: IsolationLevel) -> Result<Report, CheckError> {
    let kv = KvHistory::from_history(h)
        .map_err(|e| CheckError::UnsupportedHistory { checker: CheckerKind::Aion, what: e.to_string() })?;
    check_aion_kv(&kv, kv.txn_ids(), AionOptions::new(level))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod partition_tests;
