//! Streaming Chronos: the simulation runs while the history is being read, so that neither
//! the operations nor the fields of transactions already simulated are held.
//!
//! Transactions are added in file order. Within a session, file order is session order,
//! and in a history whose sessions' timestamps grow along the session (every valid one),
//! no transaction read later starts before the last start read in its session. So the
//! *watermark* — the smallest over sessions of the first event's timestamp of the session's
//! last transaction read — bounds every event still to come, and the events before it run
//! in timestamp order exactly as the whole-history check runs them. A transaction whose
//! first event falls before a watermark already passed (a session whose timestamps go
//! back, or a new session starting in the past) stops the stream ([`StreamStop`]): the
//! caller then checks the whole history instead, so the verdict never depends on streaming.
//!
//! Once every transaction of a block of [`KvHistory::BLOCK`] has committed in the
//! simulation, its operations are freed and its transactions leave the history's columns,
//! except those a report may still name: anomalies' transactions, each object's last
//! writer (an Ext explanation names it), each session's last transaction and the session
//! predecessors of transactions not yet started (a Session explanation names them).

use isocert_history::{KvHistory, Timestamp, TxnId};

use super::timeline;
use super::{Refs, Sim};
use crate::{CheckError, CheckerKind, IsolationLevel, Report};

/// Why a streaming check stopped: the caller checks the whole history instead (which gives
/// the error, or the verdict).
#[derive(Debug)]
pub enum StreamStop {
    /// A transaction cannot be checked (missing timestamps, starting after it commits);
    /// the whole-history check reports it, after any reading error earlier in the file.
    Check(CheckError),
    /// A transaction's first event falls before events already simulated.
    OutOfOrder {
        /// The transaction (its label, `T` and its id).
        txn: String,
        /// Its first event's timestamp.
        at: Timestamp,
        /// The watermark the simulation had passed.
        watermark: Timestamp,
    },
}

impl std::fmt::Display for StreamStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamStop::Check(e) => write!(f, "{e}"),
            StreamStop::OutOfOrder { txn, at, watermark } => write!(
                f,
                "{txn} has an event at {at}, before {watermark} where the streaming simulation \
                 already was (its session's timestamps go back, or its session starts late)"
            ),
        }
    }
}

/// A Chronos check fed one transaction at a time, in file order.
///
/// ```text
/// let mut stream = ChronosStream::new(level)?;
/// for each transaction t read into kv: stream.push(&mut kv, t)?;
/// let report = stream.finish(&mut kv);
/// ```
///
/// The report equals [`check_chronos_kv`](super::check_chronos_kv)'s on the same history.
#[derive(Debug)]
pub struct ChronosStream {
    sim: Sim,
    /// The first event's timestamp of each session's last transaction read.
    session_first: Vec<Option<Timestamp>>,
    /// Every event before this timestamp has run.
    passed: Option<Timestamp>,
    /// Transactions added since the last simulation step.
    since_step: usize,
    /// Transactions added.
    added: usize,
}

/// Transactions between simulation steps (at least the number of sessions, so a step's
/// cost, which looks at every session, stays a constant per transaction).
const STEP: usize = 4096;

impl ChronosStream {
    /// A streaming check at `level` (snapshot isolation or serializable).
    ///
    /// # Errors
    /// [`CheckError::UnsupportedLevel`] below snapshot isolation.
    pub fn new(level: IsolationLevel) -> Result<Self, CheckError> {
        timeline::supported(level, CheckerKind::Chronos)?;
        let mut sim = Sim::new(level, Some(Refs::default()));
        sim.complete_blocks = 0;
        Ok(ChronosStream { sim, session_first: Vec::new(), passed: None, since_step: 0, added: 0 })
    }

    /// Adds transaction `t`, the next of `kv` in file order (transactions must be pushed
    /// in order, each once), and simulates what can be simulated.
    ///
    /// # Errors
    /// [`StreamStop`]: check the whole history instead.
    pub fn push(&mut self, kv: &mut KvHistory, t: TxnId) -> Result<(), StreamStop> {
        debug_assert_eq!(t.index(), self.added, "transactions are pushed in file order");
        let span = self.sim.add(kv, t).map_err(StreamStop::Check)?;
        self.added += 1;
        self.sim.complete_blocks = self.added / KvHistory::BLOCK;
        if let Some(span) = span {
            let first = span.start.ts;
            if let Some(watermark) = self.passed.filter(|&w| first < w) {
                return Err(StreamStop::OutOfOrder { txn: kv.txn_label(t), at: first, watermark });
            }
            let s = kv.session(t).index();
            if self.session_first.len() <= s {
                self.session_first.resize(s + 1, None);
            }
            self.session_first[s] = Some(first);
        }
        self.since_step += 1;
        if self.since_step >= STEP.max(self.session_first.len()) {
            self.since_step = 0;
            if let Some(watermark) = self.session_first.iter().flatten().min().copied() {
                self.step(kv, watermark);
            }
        }
        Ok(())
    }

    /// Runs the events before `watermark`, then frees and retires finished blocks.
    fn step(&mut self, kv: &mut KvHistory, watermark: Timestamp) {
        let mut events = std::mem::take(&mut self.sim.events);
        events.sort_unstable();
        let due = events.partition_point(|e| e.ts < watermark);
        self.sim.run(kv, &events[..due]);
        events.drain(..due);
        self.sim.events = events;
        self.passed = Some(watermark);
        self.retire(kv);
    }

    /// Frees the operations of complete blocks whose transactions all committed, and
    /// retires such blocks at the front of the window.
    fn retire(&mut self, kv: &mut KvHistory) {
        let complete = self.sim.complete_blocks;
        let first = self.sim.base / KvHistory::BLOCK;
        for b in first..complete {
            if self.sim.pending_in_block[b] == 0 {
                kv.free_block(b);
            }
        }
        while self.sim.base / KvHistory::BLOCK < complete
            && self.sim.pending_in_block[self.sim.base / KvHistory::BLOCK] == 0
        {
            self.sim.retire_first_block(kv);
        }
    }

    /// Transactions whose simulation state is held (the window not yet retired).
    pub fn window(&self) -> usize {
        self.sim.spans.len()
    }

    /// Transactions pushed so far.
    pub fn added(&self) -> usize {
        self.added
    }

    /// Events read but not yet simulated.
    pub fn pending_events(&self) -> usize {
        self.sim.events.len()
    }

    /// Runs every remaining event (the end of input) and gives the report.
    pub fn finish(mut self, kv: &mut KvHistory) -> Report {
        self.sim.complete_blocks = usize::MAX;
        let mut events = std::mem::take(&mut self.sim.events);
        events.sort_unstable();
        self.sim.run(kv, &events);
        for b in 0..self.sim.pending_in_block.len() {
            kv.free_block(b);
        }
        self.sim.report(kv)
    }
}
