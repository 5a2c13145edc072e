//! Chronos: offline timestamp-based checking of snapshot isolation and serializability
//! (Algorithm 2 of the Chronos/Aion paper).
//!
//! The start and commit events of the committed transactions are sorted by timestamp
//! ([`timeline`] says how ties run) and simulated one by one. A start event checks the
//! Session axiom (the session's previous transaction committed no later than this one
//! starts), Int (an internal read returns the transaction's own last read or write of the
//! object) and Ext (an external read returns the last value committed before the start);
//! a commit event checks NoConflict (no other transaction writing the same object is still
//! running) and installs the transaction's writes in the frontier. Under serializability
//! every transaction runs atomically at its commit timestamp. Every violation is reported,
//! not only the first. Objects may hold plain values or lists (appends).
//!
//! Memory: the simulation keeps one state per object plus the running transactions'
//! writers per object; the operations of a block of transactions are freed as soon as all
//! of its transactions have committed in the simulation, so memory falls as it proceeds.
//! [`ChronosStream`] runs the same simulation while the history is read (`stream`).

mod explain;
mod serial_order;
mod state;
mod stream;
pub(crate) mod timeline;

use std::collections::VecDeque;

use isocert_history::{History, KvHistory, KvOpKind, KvValue, ObjId, Timestamp, TxnId};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{Anomaly, CheckError, CheckStats, CheckerKind, IsolationLevel, Report};
pub(crate) use explain::{
    ext as explain_ext, int as explain_int, no_conflict as explain_no_conflict, session as explain_session,
    sort as sort_anomalies, ReadAt, Source,
};
pub use serial_order::{commit_order_decides, settle_serial_order};
pub(crate) use state::ObjState;
pub use stream::{ChronosStream, StreamStop};
use timeline::{EventKey, Phase, Span};

const NONE: u32 = u32::MAX;

/// Checks a general history with Chronos: converts it to a [`KvHistory`] and runs
/// [`check_chronos_kv`].
///
/// # Errors
/// As [`check_chronos_kv`], plus [`CheckError::UnsupportedHistory`] for predicate operations.
pub fn check_chronos(h: &History, level: IsolationLevel) -> Result<Report, CheckError> {
    let kv = KvHistory::from_history(h)
        .map_err(|e| CheckError::UnsupportedHistory { checker: CheckerKind::Chronos, what: e.to_string() })?;
    check_chronos_kv(kv, level).map(|(report, _)| report)
}

/// Checks a compact history with Chronos at `level` (snapshot isolation or serializable).
///
/// Takes the history by value so it can free operations as the simulation passes them;
/// returns it (with its operations freed, names and timestamps kept) for rendering.
///
/// # Errors
/// [`CheckError::UnsupportedLevel`] below snapshot isolation,
/// [`CheckError::MissingCertificateData`] for a committed transaction without timestamps,
/// [`CheckError::UnsupportedHistory`] for one that starts after it commits.
pub fn check_chronos_kv(mut kv: KvHistory, level: IsolationLevel) -> Result<(Report, KvHistory), CheckError> {
    timeline::supported(level, CheckerKind::Chronos)?;
    let mut sim = Sim::new(level, None);
    for t in kv.txn_ids() {
        sim.add(&kv, t)?;
    }
    for b in 0..sim.pending_in_block.len() {
        if sim.pending_in_block[b] == 0 {
            kv.free_block(b);
        }
    }
    let mut events = std::mem::take(&mut sim.events);
    events.sort_unstable();
    sim.run(&mut kv, &events);
    drop(events);
    let report = settle_serial_order(sim.report(&kv), kv.dict().serial_order)?;
    Ok((report, kv))
}

/// Reference counts of transactions a streaming check may still name in a report: the
/// last writer of each object (an Ext explanation names it), the last transaction of each
/// session and the session predecessor of each transaction not yet started (a Session
/// explanation names it); transactions named in an anomaly are kept for good.
#[derive(Debug, Default)]
struct Refs {
    /// Counts of the transactions in the simulation's window, by index from its base.
    window: VecDeque<u32>,
    /// Counts of retired transactions still named.
    kept: FxHashMap<u32, u32>,
    /// Transactions named in anomalies.
    named: FxHashSet<u32>,
}

/// The simulation state of Algorithm 2.
///
/// Per-transaction state is a window of transactions from `base` on: the whole history
/// for [`check_chronos_kv`], the transactions not yet retired for a streaming check
/// ([`ChronosStream`]).
#[derive(Debug)]
struct Sim {
    level: IsolationLevel,
    /// Index of the first transaction of the window.
    base: usize,
    spans: VecDeque<Option<Span>>,
    /// Session predecessor (among checked transactions) of each transaction and its commit
    /// event, or `NONE`.
    prev_in_session: VecDeque<(u32, EventKey)>,
    /// The last checked transaction of each session read so far, and its commit event.
    last_in_session: Vec<(u32, EventKey)>,
    events: Vec<EventKey>,
    /// The frontier: each object's last committed state and who committed it.
    front: Vec<ObjState>,
    front_src: Vec<u32>,
    /// Running transactions that write each object.
    ongoing: Vec<Vec<u32>>,
    /// Atomic writers of each object at its last atomic timestamp.
    atomic_ts: Vec<Timestamp>,
    atomic_writers: Vec<Vec<u32>>,
    /// The running transaction's own view (int_val) and which objects it set, by stamp.
    local: Vec<ObjState>,
    local_stamp: Vec<u32>,
    write_stamp: Vec<u32>,
    commit_stamp: Vec<u32>,
    pending_in_block: Vec<u32>,
    /// Blocks whose transactions have all been added (a block is freed only then).
    complete_blocks: usize,
    anomalies: Vec<Anomaly>,
    checked: usize,
    skipped_unknown: usize,
    ops: usize,
    /// Reference counts, for a streaming check that retires transactions.
    refs: Option<Refs>,
}

impl Sim {
    fn new(level: IsolationLevel, refs: Option<Refs>) -> Sim {
        Sim {
            level,
            base: 0,
            spans: VecDeque::new(),
            prev_in_session: VecDeque::new(),
            last_in_session: Vec::new(),
            events: Vec::new(),
            front: Vec::new(),
            front_src: Vec::new(),
            ongoing: Vec::new(),
            atomic_ts: Vec::new(),
            atomic_writers: Vec::new(),
            local: Vec::new(),
            local_stamp: Vec::new(),
            write_stamp: Vec::new(),
            commit_stamp: Vec::new(),
            pending_in_block: Vec::new(),
            complete_blocks: usize::MAX,
            anomalies: Vec::new(),
            checked: 0,
            skipped_unknown: 0,
            ops: 0,
            refs,
        }
    }

    /// Adds transaction `t` (the next in file order): its span, session predecessor and
    /// events. Returns its span (`None` when it is not checked).
    fn add(&mut self, kv: &KvHistory, t: TxnId) -> Result<Option<Span>, CheckError> {
        let span = timeline::span_of(kv, t, self.level, CheckerKind::Chronos)?;
        let b = t.index() / KvHistory::BLOCK;
        if self.pending_in_block.len() <= b {
            self.pending_in_block.resize(b + 1, 0);
        }
        self.ops += kv.ops(t).len();
        let mut prev = (NONE, EventKey::floor(Timestamp::default()));
        if let Some(span) = span {
            self.checked += 1;
            let s = kv.session(t).index();
            if self.last_in_session.len() <= s {
                self.last_in_session.resize(s + 1, prev);
            }
            prev = std::mem::replace(&mut self.last_in_session[s], (t.0, span.commit));
            self.events.push(span.start);
            if !span.is_atomic() {
                self.events.push(span.commit);
            }
            self.pending_in_block[b] += 1;
        } else if kv.status(t) == isocert_history::Status::Unknown {
            self.skipped_unknown += 1;
        }
        self.spans.push_back(span);
        self.prev_in_session.push_back(prev);
        if let Some(refs) = &mut self.refs {
            // The last transaction of its session; the predecessor's count carries over
            // to its role as this transaction's predecessor.
            refs.window.push_back(u32::from(span.is_some()));
        }
        Ok(span)
    }

    /// Grows the per-object state to the objects interned so far.
    fn ensure_objects(&mut self, kv: &KvHistory) {
        let objects = kv.dict().object_count();
        for o in self.front.len()..objects {
            self.front.push(ObjState::initial(kv, kv.initial_value(ObjId::from_index(o))));
        }
        self.front_src.resize(objects, NONE);
        self.ongoing.resize(objects, Vec::new());
        self.atomic_ts.resize(objects, Timestamp::default());
        self.atomic_writers.resize(objects, Vec::new());
        self.local.resize(objects, ObjState::Unset);
        self.local_stamp.resize(objects, NONE);
        self.write_stamp.resize(objects, NONE);
        self.commit_stamp.resize(objects, NONE);
    }

    /// Simulates `events` (sorted) in order.
    fn run(&mut self, kv: &mut KvHistory, events: &[EventKey]) {
        self.ensure_objects(kv);
        for ev in events {
            let t = TxnId(ev.txn);
            match ev.phase {
                Phase::Start => self.start(kv, t),
                Phase::Commit => self.commit(kv, t),
                Phase::Atomic => {
                    self.start(kv, t);
                    self.commit(kv, t);
                }
            }
        }
    }

    /// The report once every event ran.
    fn report(self, kv: &KvHistory) -> Report {
        let mut report = Report::new(self.level, CheckerKind::Chronos);
        report.stats =
            CheckStats { txns: kv.len(), committed: self.checked, ops: self.ops, ..CheckStats::default() };
        if self.skipped_unknown > 0 {
            report.notes.push(format!(
                "{} transactions of unknown outcome without timestamps were left out",
                self.skipped_unknown
            ));
        }
        let mut anomalies = self.anomalies;
        sort_anomalies(&mut anomalies);
        report.anomalies = anomalies;
        report
    }

    fn span(&self, t: u32) -> Span {
        self.spans[t as usize - self.base].expect("only checked transactions have events")
    }

    /// Records an anomaly (a streaming check keeps the transactions it names).
    fn push(&mut self, a: Anomaly) {
        if let Some(refs) = &mut self.refs {
            refs.named.extend(a.txns.iter().map(|t| t.0));
        }
        self.anomalies.push(a);
    }

    fn inc(&mut self, t: u32) {
        if let Some(refs) = &mut self.refs {
            match (t as usize).checked_sub(self.base) {
                Some(i) => refs.window[i] += 1,
                None => *refs.kept.entry(t).or_default() += 1,
            }
        }
    }

    fn dec(&mut self, kv: &mut KvHistory, t: u32) {
        if let Some(refs) = &mut self.refs {
            match (t as usize).checked_sub(self.base) {
                Some(i) => refs.window[i] -= 1,
                None => {
                    let count = refs.kept.get_mut(&t).expect("a retired transaction still named is counted");
                    *count -= 1;
                    if *count == 0 {
                        refs.kept.remove(&t);
                        if !refs.named.contains(&t) {
                            kv.release(TxnId(t));
                        }
                    }
                }
            }
        }
    }

    /// Retires the window's first block (all its transactions committed in the
    /// simulation): its operations are freed and its transactions leave the window and the
    /// history's columns, but for those a report may still name.
    fn retire_first_block(&mut self, kv: &mut KvHistory) {
        let n = KvHistory::BLOCK.min(self.spans.len());
        let b = self.base / KvHistory::BLOCK;
        kv.free_block(b);
        let refs = self.refs.as_mut().expect("only a streaming check retires");
        let mut keep = Vec::with_capacity(n);
        for (j, count) in refs.window.drain(..n).enumerate() {
            let t = (self.base + j) as u32;
            if count > 0 {
                refs.kept.insert(t, count);
            }
            keep.push(count > 0 || refs.named.contains(&t));
        }
        let base = self.base;
        kv.retire(base + n, |t| keep[t.index() - base]);
        self.spans.drain(..n);
        self.prev_in_session.drain(..n);
        self.base += n;
    }

    /// The start event: Session, then Int and Ext for each read in program order.
    fn start(&mut self, kv: &mut KvHistory, t: TxnId) {
        let serializable = self.level == IsolationLevel::Serializable;
        let span = self.span(t.0);
        let (prev, prev_commit) = self.prev_in_session[t.index() - self.base];
        if prev != NONE && prev_commit > span.start {
            self.push(explain::session(kv, TxnId(prev), t, serializable));
        }
        self.reads(kv, t, serializable);
        if prev != NONE {
            self.dec(kv, prev);
        }
    }

    /// Int and Ext for each read of `t`, in program order; its own view of what it writes.
    fn reads(&mut self, kv: &KvHistory, t: TxnId, serializable: bool) {
        let stamp = t.0;
        for (i, op) in kv.ops(t).iter().enumerate() {
            let k = op.obj().index();
            let v = op.value();
            match op.kind() {
                KvOpKind::Read => {
                    let seen_state = || read_state_of(kv, v);
                    if self.local_stamp[k] != stamp {
                        if !self.front[k].explains(kv, v) {
                            let source = match self.front_src[k] {
                                NONE => Source::Initial,
                                w => Source::Txn(TxnId(w)),
                            };
                            self.push(explain::ext(
                                kv,
                                ReadAt { txn: t, op: i as u32, obj: op.obj() },
                                &self.front[k],
                                source,
                                &seen_state(),
                                serializable,
                            ));
                        }
                        self.local_stamp[k] = stamp;
                    } else if !self.local[k].explains(kv, v) {
                        self.push(explain::int(kv, t, i as u32, op.obj(), &self.local[k], &seen_state()));
                    }
                    self.local[k] = seen_state();
                }
                KvOpKind::Write => {
                    self.local_stamp[k] = stamp;
                    self.local[k] = ObjState::Plain(v);
                    self.register_writer(k, t.0);
                }
                KvOpKind::Append => {
                    if self.local_stamp[k] != stamp {
                        self.local_stamp[k] = stamp;
                        self.local[k] = self.front[k].clone();
                    }
                    self.local[k].append(v);
                    self.register_writer(k, t.0);
                }
            }
        }
    }

    fn register_writer(&mut self, k: usize, t: u32) {
        if self.write_stamp[k] != t {
            self.write_stamp[k] = t;
            self.ongoing[k].push(t);
        }
    }

    /// The commit event: NoConflict for each object written, then the frontier update.
    fn commit(&mut self, kv: &mut KvHistory, t: TxnId) {
        let span = self.span(t.0);
        let stamp = t.0;
        for j in 0..kv.ops(t).len() {
            let op = kv.ops(t)[j];
            let kind = op.kind();
            if kind == KvOpKind::Read {
                continue;
            }
            let k = op.obj().index();
            if self.commit_stamp[k] != stamp {
                self.commit_stamp[k] = stamp;
                let ongoing = &mut self.ongoing[k];
                if let Some(pos) = ongoing.iter().position(|&o| o == t.0) {
                    ongoing.swap_remove(pos);
                }
                for i in 0..self.ongoing[k].len() {
                    let o = self.ongoing[k][i];
                    let spans = (span, self.span(o));
                    self.push(explain::no_conflict(kv, t, TxnId(o), op.obj(), spans));
                }
                if span.is_atomic() {
                    if self.atomic_ts[k] != span.commit.ts || self.atomic_writers[k].is_empty() {
                        self.atomic_ts[k] = span.commit.ts;
                        self.atomic_writers[k].clear();
                    }
                    for i in 0..self.atomic_writers[k].len() {
                        let o = self.atomic_writers[k][i];
                        let spans = (self.span(o), span);
                        self.push(explain::no_conflict(kv, TxnId(o), t, op.obj(), spans));
                    }
                    self.atomic_writers[k].push(t.0);
                }
            }
            match kind {
                KvOpKind::Write => self.front[k].write(op.value()),
                _ => self.front[k].append(op.value()),
            }
            let old = std::mem::replace(&mut self.front_src[k], t.0);
            if self.refs.is_some() && old != t.0 {
                self.inc(t.0);
                if old != NONE {
                    self.dec(kv, old);
                }
            }
        }
        let b = t.index() / KvHistory::BLOCK;
        self.pending_in_block[b] -= 1;
        if self.pending_in_block[b] == 0 && b < self.complete_blocks {
            kv.free_block(b);
        }
    }
}

/// The state a read of `v` shows (a list value is a list state).
#[inline]
pub(crate) fn read_state_of(kv: &KvHistory, v: KvValue) -> ObjState {
    match v {
        KvValue::Interned(_) => ObjState::from_read(kv, v),
        plain => ObjState::Plain(plain),
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod stream_tests;
