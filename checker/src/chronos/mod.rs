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

mod explain;
mod state;
pub(crate) mod timeline;

use isocert_history::{History, KvHistory, KvOpKind, KvValue, ObjId, Timestamp, TxnId};

use crate::{Anomaly, CheckError, CheckStats, CheckerKind, IsolationLevel, Report};
pub(crate) use explain::{
    ext as explain_ext, int as explain_int, no_conflict as explain_no_conflict, session as explain_session,
    sort as sort_anomalies, ReadAt, Source,
};
pub(crate) use state::ObjState;
use timeline::{Phase, Span};

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
    let mut sim = Sim::new(&kv, level)?;
    let ops = kv.op_count();
    for b in 0..sim.pending_in_block.len() {
        if sim.pending_in_block[b] == 0 {
            kv.free_block(b);
        }
    }
    let events = std::mem::take(&mut sim.events);
    for ev in &events {
        let t = TxnId(ev.txn);
        match ev.phase {
            Phase::Start => sim.start(&kv, t),
            Phase::Commit => sim.commit(&mut kv, t),
            Phase::Atomic => {
                sim.start(&kv, t);
                sim.commit(&mut kv, t);
            }
        }
    }
    drop(events);
    let mut report = Report::new(level, CheckerKind::Chronos);
    report.stats = CheckStats { txns: kv.len(), committed: sim.checked, ops, ..CheckStats::default() };
    if sim.skipped_unknown > 0 {
        report.notes.push(format!(
            "{} transactions of unknown outcome without timestamps were left out",
            sim.skipped_unknown
        ));
    }
    let mut anomalies = sim.anomalies;
    sort_anomalies(&mut anomalies);
    report.anomalies = anomalies;
    Ok((report, kv))
}

/// The simulation state of Algorithm 2.
struct Sim {
    level: IsolationLevel,
    spans: Vec<Option<Span>>,
    /// Session predecessor (among checked transactions) of each transaction, or `NONE`.
    prev_in_session: Vec<u32>,
    events: Vec<timeline::EventKey>,
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
    anomalies: Vec<Anomaly>,
    checked: usize,
    skipped_unknown: usize,
}

impl Sim {
    fn new(kv: &KvHistory, level: IsolationLevel) -> Result<Sim, CheckError> {
        let n = kv.len();
        let objects = kv.dict().object_count();
        let mut spans = Vec::with_capacity(n);
        let mut prev_in_session = vec![NONE; n];
        let mut last_in_session = vec![NONE; kv.dict().session_count()];
        let mut events = Vec::with_capacity(n * 2);
        let mut pending_in_block = vec![0u32; n.div_ceil(KvHistory::BLOCK)];
        let (mut checked, mut skipped_unknown) = (0, 0);
        for t in kv.txn_ids() {
            let span = timeline::span_of(kv, t, level, CheckerKind::Chronos)?;
            if let Some(span) = span {
                checked += 1;
                let s = kv.session(t).index();
                prev_in_session[t.index()] = last_in_session[s];
                last_in_session[s] = t.0;
                events.push(span.start);
                if !span.is_atomic() {
                    events.push(span.commit);
                }
                pending_in_block[t.index() / KvHistory::BLOCK] += 1;
            } else if kv.status(t) == isocert_history::Status::Unknown {
                skipped_unknown += 1;
            }
            spans.push(span);
        }
        events.sort_unstable();
        let front =
            (0..objects).map(|o| ObjState::initial(kv, kv.initial_value(ObjId::from_index(o)))).collect();
        Ok(Sim {
            level,
            spans,
            prev_in_session,
            events,
            front,
            front_src: vec![NONE; objects],
            ongoing: vec![Vec::new(); objects],
            atomic_ts: vec![Timestamp::default(); objects],
            atomic_writers: vec![Vec::new(); objects],
            local: vec![ObjState::Unset; objects],
            local_stamp: vec![NONE; objects],
            write_stamp: vec![NONE; objects],
            commit_stamp: vec![NONE; objects],
            pending_in_block,
            anomalies: Vec::new(),
            checked,
            skipped_unknown,
        })
    }

    fn span(&self, t: u32) -> Span {
        self.spans[t as usize].expect("only checked transactions have events")
    }

    /// The start event: Session, then Int and Ext for each read in program order.
    fn start(&mut self, kv: &KvHistory, t: TxnId) {
        let serializable = self.level == IsolationLevel::Serializable;
        let span = self.span(t.0);
        let prev = self.prev_in_session[t.index()];
        if prev != NONE && self.span(prev).commit > span.start {
            self.anomalies.push(explain::session(kv, TxnId(prev), t, serializable));
        }
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
                            self.anomalies.push(explain::ext(
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
                        self.anomalies.push(explain::int(
                            kv,
                            t,
                            i as u32,
                            op.obj(),
                            &self.local[k],
                            &seen_state(),
                        ));
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
        for op in kv.ops(t) {
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
                for &o in ongoing.iter() {
                    let spans = (span, self.spans[o as usize].expect("ongoing writers are checked"));
                    self.anomalies.push(explain::no_conflict(kv, t, TxnId(o), op.obj(), spans));
                }
                if span.is_atomic() {
                    if self.atomic_ts[k] != span.commit.ts || self.atomic_writers[k].is_empty() {
                        self.atomic_ts[k] = span.commit.ts;
                        self.atomic_writers[k].clear();
                    }
                    for &o in &self.atomic_writers[k] {
                        let spans = (self.span(o), span);
                        self.anomalies.push(explain::no_conflict(kv, TxnId(o), t, op.obj(), spans));
                    }
                    self.atomic_writers[k].push(t.0);
                }
            }
            match kind {
                KvOpKind::Write => self.front[k].write(op.value()),
                _ => self.front[k].append(op.value()),
            }
            self.front_src[k] = t.0;
        }
        let b = t.index() / KvHistory::BLOCK;
        self.pending_in_block[b] -= 1;
        if self.pending_in_block[b] == 0 {
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
