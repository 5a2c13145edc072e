//! The simulation: sessions run interleaved transactions against the multi-version store.
//!
//! Every step picks a random session and runs one operation of its transaction (starting
//! one when the session is idle). Reads see the transaction's start snapshot and its own
//! writes; writes are buffered and installed at commit. Under snapshot isolation a commit
//! aborts when another transaction committed a version of an object it writes since it
//! started (first-committer-wins); under serializability it also aborts when any object it
//! read, or any row that could change one of its predicate reads, got a new version since it
//! started (serializable snapshot isolation), so serializable histories satisfy snapshot
//! isolation too. Read-only transactions commit at their start timestamp.

use rustc_hash::FxHashMap;

use crate::cert::CertBuilder;
use crate::inject::Planted;
use crate::record::{OpRec, Outcome, PredSpec, RowVal, Seen, SeenWriter, Sink, TxnRecord, Val};
use crate::store::{Store, Version, INITIAL, UNBORN};
use isocert_history::IsolationLevel;

use crate::{DataModel, GenConfig, GenError};
use isocert_random::rand::Rng as _;
use isocert_random::{KeyChooser, SeededRng};

/// Counts of what a run produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Committed transactions.
    pub committed: usize,
    /// Aborted transactions.
    pub aborted: usize,
    /// Operations over all transactions.
    pub ops: usize,
    /// What the injection did, in a sentence naming the transactions (empty without one).
    pub injected: String,
}

/// How many keys a write draws before settling for a claimed one.
const AVOIDANCE_TRIES: usize = 8;

/// A running transaction's private state (reused across a session's transactions).
#[derive(Debug, Default)]
struct Active {
    start_ts: u64,
    ops_left: usize,
    /// Blind transactions: whether every item operation reads (`Some(true)`) or writes.
    blind: Option<bool>,
    ops: Vec<OpRec>,
    /// Own latest write per object.
    buffer: FxHashMap<u32, Val>,
    /// Objects in first-write order.
    write_log: Vec<u32>,
    /// Own appended elements per list.
    appends: FxHashMap<u32, Vec<i64>>,
    /// Objects read from the snapshot (not from own writes).
    item_reads: Vec<u32>,
    /// Predicate reads and how many objects the transaction had written before each.
    pred_reads: Vec<(PredSpec, usize)>,
}

impl Active {
    fn reset(&mut self, start_ts: u64, ops: usize) {
        self.start_ts = start_ts;
        self.ops_left = ops;
        self.ops = Vec::with_capacity(ops);
        self.buffer.clear();
        self.write_log.clear();
        self.appends.clear();
        self.item_reads.clear();
        self.pred_reads.clear();
    }

    fn buffer_write(&mut self, obj: u32, val: Val) {
        if self.buffer.insert(obj, val).is_none() {
            self.write_log.push(obj);
        }
    }
}

/// The whole simulation state; injections reach into it to plant their anomaly.
#[derive(Debug)]
pub(crate) struct Sim<'c> {
    pub(crate) cfg: &'c GenConfig,
    pub(crate) model: DataModel,
    pub(crate) rng: SeededRng,
    chooser: KeyChooser,
    pub(crate) store: Store,
    /// The last timestamp handed out.
    pub(crate) clock: u64,
    /// The next unique value (kv value, row stamp `c1`, list element).
    pub(crate) stamp: i64,
    pub(crate) next_id: u32,
    pub(crate) cert: Option<CertBuilder>,
    pub(crate) stats: GenStats,
    sessions: Vec<Option<Active>>,
    active: Vec<u32>,
    spare: Vec<Active>,
    started: usize,
    /// Objects written by running transactions, and by which session (conflict avoidance).
    claims: FxHashMap<u32, u32>,
    pub(crate) planted: Planted,
}

impl<'c> Sim<'c> {
    pub(crate) fn new(cfg: &'c GenConfig, keep_certificate: bool) -> Self {
        let model = cfg.data_model();
        Sim {
            cfg,
            model,
            rng: isocert_random::seeded(cfg.seed),
            chooser: KeyChooser::new(cfg.distribution, cfg.keys as u64),
            store: Store::new(cfg.keys),
            clock: 0,
            stamp: 1,
            next_id: 0,
            cert: keep_certificate
                .then(|| CertBuilder { explicit: cfg.explicit_version_sets, ..CertBuilder::default() }),
            stats: GenStats::default(),
            sessions: (0..cfg.sessions).map(|_| None).collect(),
            active: Vec::new(),
            spare: Vec::new(),
            started: 0,
            claims: FxHashMap::default(),
            planted: Planted::new(cfg.inject, cfg.txns),
        }
    }

    /// Runs the whole simulation into `sink`, injection included.
    pub(crate) fn run(&mut self, sink: &mut dyn Sink) -> Result<(), GenError> {
        let initial = self.initial_versions();
        for &(obj, val) in &initial {
            self.store.set_initial(obj, val);
        }
        sink.initial(self.model, &initial)?;
        let in_flight = self.cfg.max_in_flight();
        while self.started < self.cfg.txns || !self.active.is_empty() {
            let may_start = self.started < self.cfg.txns && self.active.len() < in_flight;
            let session = if may_start {
                self.rng.random_range(0..self.cfg.sessions) as u32
            } else {
                self.active[self.rng.random_range(0..self.active.len())]
            };
            self.step(session, sink)?;
        }
        crate::inject::finish(self, sink)
    }

    fn initial_versions(&mut self) -> Vec<(u32, Val)> {
        if self.model != DataModel::SqlTable {
            return Vec::new();
        }
        (0..self.cfg.keys as u32).map(|k| (k, Val::Row(self.random_row()))).collect()
    }

    /// A fresh row: `c0` in the predicates' domain, a unique `c1`, a small `c2`.
    pub(crate) fn random_row(&mut self) -> RowVal {
        let c0 = self.rng.random_range(0..self.cfg.keys) as i64;
        let c2 = self.rng.random_range(0..10) as i64;
        RowVal { c0, c1: self.next_stamp(), c2 }
    }

    pub(crate) fn next_stamp(&mut self) -> i64 {
        let s = self.stamp;
        self.stamp += 1;
        s
    }

    pub(crate) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The oldest snapshot a running transaction may still read.
    fn horizon(&self) -> u64 {
        self.active
            .iter()
            .filter_map(|&s| self.sessions[s as usize].as_ref().map(|a| a.start_ts))
            .min()
            .unwrap_or(self.clock)
    }

    fn step(&mut self, session: u32, sink: &mut dyn Sink) -> Result<(), GenError> {
        let Some(mut txn) = self.sessions[session as usize].take() else {
            let mut txn = self.spare.pop().unwrap_or_default();
            let start = self.tick();
            txn.reset(start, self.cfg.ops_per_txn);
            txn.blind = self.cfg.read_only_txns.map(|r| self.rng.random_bool(r));
            self.sessions[session as usize] = Some(txn);
            self.active.push(session);
            self.started += 1;
            return Ok(());
        };
        if txn.ops_left > 0 {
            txn.ops_left -= 1;
            let op = self.next_op(session, &mut txn);
            txn.ops.push(op);
            self.sessions[session as usize] = Some(txn);
            return Ok(());
        }
        let pos = self.active.iter().position(|&s| s == session).expect("active session listed");
        self.active.swap_remove(pos);
        self.finish(session, &mut txn, sink)?;
        self.spare.push(txn);
        Ok(())
    }

    fn next_op(&mut self, session: u32, txn: &mut Active) -> OpRec {
        if self.model == DataModel::SqlTable && self.rng.random_bool(self.cfg.predicate_ratio) {
            return self.predicate_op(txn);
        }
        let read = match txn.blind {
            Some(read_only) => read_only,
            None => self.rng.random_bool(self.cfg.read_ratio),
        };
        let obj = if read || !self.cfg.avoid_conflicts {
            self.chooser.pick(&mut self.rng) as u32
        } else {
            self.pick_unclaimed(session, txn.start_ts)
        };
        match (self.model, read) {
            (DataModel::ListAppend, true) => {
                let committed = match self.store.visible(obj, txn.start_ts).val {
                    Val::List(len) => self.store.list_prefix(obj, len),
                    _ => &[],
                };
                let mut elems = committed.to_vec();
                if let Some(own) = txn.appends.get(&obj) {
                    elems.extend_from_slice(own);
                }
                // A list read depends on the committed prefix even after own appends.
                txn.item_reads.push(obj);
                OpRec::ReadList { obj, elems }
            }
            (DataModel::ListAppend, false) => {
                let elem = self.next_stamp();
                txn.appends.entry(obj).or_default().push(elem);
                if !txn.buffer.contains_key(&obj) {
                    txn.buffer_write(obj, Val::List(0));
                }
                OpRec::Append { obj, elem }
            }
            (_, true) => {
                let val = match txn.buffer.get(&obj) {
                    Some(&v) => v,
                    None => {
                        txn.item_reads.push(obj);
                        self.store.visible(obj, txn.start_ts).val
                    }
                };
                OpRec::Read { obj, val }
            }
            (model, false) => {
                let val = if model == DataModel::SqlTable {
                    Val::Row(self.random_row())
                } else {
                    Val::Int(self.next_stamp())
                };
                txn.buffer_write(obj, val);
                OpRec::Write { obj, val }
            }
        }
    }

    /// A key to write that no other running transaction has written and nobody committed
    /// since `start_ts`, if one turns up in a few tries (conflict avoidance); else the last
    /// key drawn.
    fn pick_unclaimed(&mut self, session: u32, start_ts: u64) -> u32 {
        let mut obj = 0;
        for _ in 0..AVOIDANCE_TRIES {
            obj = self.chooser.pick(&mut self.rng) as u32;
            let unclaimed = self.claims.get(&obj).is_none_or(|&s| s == session);
            if unclaimed && self.store.latest(obj).ts <= start_ts {
                break;
            }
        }
        self.claims.entry(obj).or_insert(session);
        obj
    }

    pub(crate) fn random_predicate(&mut self) -> PredSpec {
        let keys = self.cfg.keys as i64;
        let width = 1 + self.rng.random_range(0..(self.cfg.keys / 20).max(2)) as i64;
        let lo = self.rng.random_range(0..self.cfg.keys) as i64 - width / 2;
        match self.rng.random_range(0..3) {
            0 => PredSpec::Range { lo, hi: (lo + width).min(keys + 1) },
            1 => PredSpec::Between { lo, hi: lo + width - 1 },
            _ => PredSpec::RangeExcept { lo, hi: lo + width, c2: self.rng.random_range(0..10) },
        }
    }

    fn predicate_op(&mut self, txn: &mut Active) -> OpRec {
        let pred = self.random_predicate();
        let (seen, matched) = self.evaluate(pred, txn.start_ts, &txn.buffer);
        txn.pred_reads.push((pred, txn.write_log.len()));
        let roll = self.rng.random_range(0..10);
        if roll < 6 {
            return OpRec::Select { pred, rows: matched, seen, seen_at: txn.start_ts };
        }
        if roll < 9 {
            let set_c1 = self.next_stamp();
            let rows: Vec<(u32, RowVal)> =
                matched.into_iter().map(|(o, r)| (o, RowVal { c1: set_c1, ..r })).collect();
            for &(o, r) in &rows {
                txn.buffer_write(o, Val::Row(r));
            }
            return OpRec::Update { pred, set_c1, rows, seen, seen_at: txn.start_ts };
        }
        let rows: Vec<u32> = matched.into_iter().map(|(o, _)| o).collect();
        for &o in &rows {
            txn.buffer_write(o, Val::Absent);
        }
        OpRec::Delete { pred, rows, seen, seen_at: txn.start_ts }
    }

    /// Evaluates `pred` on every row of the table as seen at `start_ts` through `buffer`:
    /// the version set (unborn rows omitted) and the matching rows.
    pub(crate) fn evaluate(
        &self,
        pred: PredSpec,
        start_ts: u64,
        buffer: &FxHashMap<u32, Val>,
    ) -> (Vec<Seen>, Vec<(u32, RowVal)>) {
        let rows = self.table_rows();
        let mut seen = Vec::with_capacity(rows as usize);
        let mut matched = Vec::new();
        for obj in 0..rows {
            let (writer, val) = match buffer.get(&obj) {
                Some(&v) => (SeenWriter::Own, v),
                None => {
                    let v = self.store.visible(obj, start_ts);
                    let writer = match v.writer {
                        UNBORN => continue,
                        INITIAL => SeenWriter::Initial,
                        w => SeenWriter::Txn(w),
                    };
                    (writer, v.val)
                }
            };
            seen.push(Seen { obj, writer });
            if let (true, Val::Row(r)) = (pred.matches(val), val) {
                matched.push((obj, r));
            }
        }
        (seen, matched)
    }

    /// Rows of the SQL table the simulation knows (keys plus injected rows).
    pub(crate) fn table_rows(&self) -> u32 {
        (self.cfg.keys + self.planted.extra_rows) as u32
    }

    /// Whether the transaction may commit under the configured isolation.
    fn validates(&self, txn: &Active) -> bool {
        let start = txn.start_ts;
        let first_committer = txn.write_log.iter().all(|&o| self.store.latest(o).ts <= start);
        match self.cfg.isolation {
            IsolationLevel::SnapshotIsolation => first_committer,
            // Serializable, the other simulated level (`GenConfig::validate`).
            _ => {
                if !first_committer || txn.item_reads.iter().any(|&o| self.store.latest(o).ts > start) {
                    return false;
                }
                txn.pred_reads.iter().all(|&(pred, own_before)| {
                    let own = &txn.write_log[..own_before];
                    (0..self.table_rows()).filter(|o| !own.contains(o)).all(|o| {
                        let later = self.store.committed_after(o, start);
                        later.is_empty() || {
                            let seen = self.store.visible(o, start).val;
                            !pred.matches(seen) && later.iter().all(|v| !pred.matches(v.val))
                        }
                    })
                })
            }
        }
    }

    fn finish(&mut self, session: u32, txn: &mut Active, sink: &mut dyn Sink) -> Result<(), GenError> {
        if self.cfg.avoid_conflicts {
            for obj in &txn.write_log {
                if self.claims.get(obj) == Some(&session) {
                    self.claims.remove(obj);
                }
            }
        }
        let read_only = txn.write_log.is_empty();
        let commits = read_only || self.validates(txn);
        let id = self.next_id;
        self.next_id += 1;
        let mut rec = TxnRecord {
            id,
            session,
            outcome: if commits { Outcome::Committed } else { Outcome::Aborted },
            start_ts: txn.start_ts,
            commit_ts: None,
            ops: std::mem::take(&mut txn.ops),
        };
        if commits {
            let commit_ts = if read_only { txn.start_ts } else { self.tick() };
            rec.commit_ts = Some(commit_ts);
            let horizon = self.horizon();
            for &obj in &txn.write_log {
                let val = match txn.buffer[&obj] {
                    Val::List(_) => Val::List(self.store.extend_list(obj, &txn.appends[&obj])),
                    v => v,
                };
                self.store.install(obj, Version { ts: commit_ts, writer: id, val }, horizon);
            }
        }
        crate::inject::maybe_edit(self, &mut rec);
        self.emit(&rec, &txn.write_log, sink)
    }

    /// Sends a finished transaction to the sink and the certificate.
    pub(crate) fn emit(
        &mut self,
        rec: &TxnRecord,
        installed: &[u32],
        sink: &mut dyn Sink,
    ) -> Result<(), GenError> {
        match rec.outcome {
            Outcome::Committed => self.stats.committed += 1,
            Outcome::Aborted => self.stats.aborted += 1,
        }
        self.stats.ops += rec.ops.len();
        if let Some(cert) = &mut self.cert {
            cert.record(rec, installed);
        }
        sink.txn(rec)
    }
}
