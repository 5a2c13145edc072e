//! Compact version sets (isocert extension, docs/FORMAT.md "Compact version sets"): a
//! predicate operation's version set given by the snapshot it read instead of row by row.
//!
//! Listed row by row, version sets grow as predicate operations × table size (a generated
//! 100,000-transaction predicate certificate is 627 MB); given as a snapshot, each is a
//! timestamp and the few rows where the database deviates from the snapshot rule. The rule,
//! for each object of the operation's table:
//!
//! 1. an object listed in `except` has the version named there; one in `unseen` is not in
//!    the set;
//! 2. else, when the operation's transaction wrote the object in an earlier operation, its
//!    own version;
//! 3. else the last writer in the certificate's version order, other than the operation's
//!    transaction, that committed with `commit_ts <= visible_through`;
//! 4. else the initial version, when the object has an initial value (an object unborn at
//!    the start is not in the set).
//!
//! This is the rule every timestamp-ordered database and PostgreSQL's recovered snapshot
//! ticks follow (docs/RECOVERY.md), so `except` stays empty but for re-checked rows.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::certificate::{OpRef, SeenVersion, Writer};
use crate::{Certificate, History, ObjId, Op, Status, TableId, Timestamp, TxnId, ValueId};

/// A version set given by a snapshot (module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotSet {
    /// Writers whose `commit_ts` is at or before this are visible.
    pub visible_through: Timestamp,
    /// Objects whose version is not the rule's: the version the operation evaluated.
    pub except: Vec<SeenVersion>,
    /// Objects the rule would list that the operation did not evaluate.
    pub unseen: Vec<ObjId>,
}

/// Why a compact version set cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compact version set of operation {op} of {txn}: {message}")]
pub struct SnapshotSetError {
    /// The operation's transaction, as a label.
    pub txn: String,
    /// The operation's index.
    pub op: u32,
    /// What is missing.
    pub message: String,
}

/// Resolves compact version sets against one history and version order: built once per
/// check, then asked per operation ([`SnapshotResolver::resolve_into`]).
#[derive(Debug)]
pub struct SnapshotResolver {
    /// Per object (by index): its writers in version order with their commit timestamps.
    writers: Vec<ObjectWriters>,
    /// Per table: its objects, in id order.
    objects: Vec<Vec<ObjId>>,
    /// Per object (by index): whether it has an initial (present) value.
    initial: Vec<bool>,
    /// Every write of an object with monotone writers, by commit timestamp: the snapshot the
    /// resolver stands at moves along it.
    commits: Vec<(Timestamp, ObjId)>,
    /// How many of `commits` the current snapshot sees.
    at: usize,
    /// Per object (by index): how many of its writers the current snapshot sees.
    visible: Vec<u32>,
    /// Whether [`Self::seek`] records the objects it changes (for [`Self::take_changes`]).
    record: bool,
    /// The objects whose newest visible writer may have changed since the last
    /// [`Self::take_changes`] (with repeats).
    changed: Vec<ObjId>,
}

/// What the current snapshot of a [`SnapshotResolver`] ([`SnapshotResolver::seek`]) shows of
/// one object, to an operation whose transaction did not write it and whose set lists no
/// exception for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotRow {
    /// The newest writer committed at or before the snapshot.
    Txn(TxnId),
    /// No writer is visible; the object has an initial value.
    Initial,
    /// No writer is visible and the object is unborn: it is not in the set.
    Unborn,
    /// The object's writers lack commit timestamps or are not ordered by them: only
    /// [`SnapshotResolver::resolve_object`] for the operation at hand can say.
    PerOperation,
}

/// One object's writers in version order.
#[derive(Debug, Default)]
struct ObjectWriters {
    txns: Vec<TxnId>,
    commit_ts: Vec<Option<Timestamp>>,
    /// Every writer has a commit timestamp and they increase along the version order: the
    /// newest visible writer is found by binary search.
    monotone: bool,
}

impl SnapshotResolver {
    /// Indexes `h` and the certificate's version order.
    pub fn new(h: &History, cert: &Certificate) -> Self {
        let mut writers: Vec<ObjectWriters> = Vec::new();
        writers.resize_with(h.object_count(), ObjectWriters::default);
        for (obj, order) in cert.version_order.iter().flatten() {
            let commit_ts: Vec<Option<Timestamp>> = order
                .iter()
                .map(|&w| {
                    let txn = h.txn(w);
                    (txn.status == Status::Committed).then_some(txn.commit_ts()).flatten()
                })
                .collect();
            let monotone = commit_ts.iter().all(Option::is_some) && commit_ts.windows(2).all(|p| p[0] < p[1]);
            if let Some(slot) = writers.get_mut(obj.index()) {
                *slot = ObjectWriters { txns: order.clone(), commit_ts, monotone };
            }
        }
        let mut objects = vec![Vec::new(); h.tables().len()];
        for o in 0..h.object_count() {
            let obj = ObjId::from_index(o);
            objects[h.object(obj).table.index()].push(obj);
        }
        let mut initial = vec![false; h.object_count()];
        for (obj, value) in &h.initial {
            if *value != ValueId::ABSENT {
                initial[obj.index()] = true;
            }
        }
        let mut commits: Vec<(Timestamp, ObjId)> = Vec::new();
        for (o, list) in writers.iter().enumerate() {
            if list.monotone {
                commits.extend(list.commit_ts.iter().flatten().map(|&ts| (ts, ObjId::from_index(o))));
            }
        }
        commits.sort_unstable();
        let visible = vec![0; writers.len()];
        SnapshotResolver {
            writers,
            objects,
            initial,
            commits,
            at: 0,
            visible,
            record: false,
            changed: Vec::new(),
        }
    }

    /// From now on, records the objects each move of the snapshot changes, for
    /// [`Self::take_changes`].
    pub fn record_changes(&mut self) {
        self.record = true;
    }

    /// Moves the current snapshot to `through` (as resolving a set read at `through` does).
    pub fn seek(&mut self, through: Timestamp) {
        self.move_to(through);
    }

    /// Swaps the objects whose [`Self::row`] may have changed since the last call (with
    /// repeats; empty unless [`Self::record_changes`] was called) into `out`, which is cleared.
    pub fn take_changes(&mut self, out: &mut Vec<ObjId>) {
        out.clear();
        std::mem::swap(out, &mut self.changed);
    }

    /// What the current snapshot shows of `obj` ([`SnapshotRow`]).
    pub fn row(&self, obj: ObjId) -> SnapshotRow {
        let Some(list) = self.writers.get(obj.index()) else { return SnapshotRow::PerOperation };
        if !list.monotone && !list.txns.is_empty() {
            return SnapshotRow::PerOperation;
        }
        match self.visible[obj.index()] as usize {
            0 if self.initial[obj.index()] => SnapshotRow::Initial,
            0 => SnapshotRow::Unborn,
            n => SnapshotRow::Txn(list.txns[n - 1]),
        }
    }

    /// The objects operation `at` wrote in its transaction's earlier operations: the set
    /// gives them the transaction's own version (rule 2).
    pub fn earlier_writes(h: &History, at: OpRef) -> FxHashSet<ObjId> {
        let mut own: FxHashSet<ObjId> = FxHashSet::default();
        for op in h.txn(at.txn).ops.iter().take(at.op as usize) {
            match op {
                Op::Write { obj, .. } => {
                    own.insert(*obj);
                }
                Op::Update { rows, .. } | Op::Delete { rows, .. } => own.extend(rows.iter().map(|r| r.obj)),
                _ => {}
            }
        }
        own
    }

    /// The version of `obj` in the set `snap` gives operation `at` (`None`: not in the set),
    /// by the module's rule; `own` is [`Self::earlier_writes`] of `at`. Moves the current
    /// snapshot to the set's.
    ///
    /// # Errors
    /// A writer the rule must place has no commit timestamp.
    pub fn resolve_object(
        &mut self,
        h: &History,
        at: OpRef,
        snap: &SnapshotSet,
        obj: ObjId,
        own: &FxHashSet<ObjId>,
    ) -> Result<Option<SeenVersion>, SnapshotSetError> {
        self.move_to(snap.visible_through);
        self.rule(h, at, snap, obj, own)
    }

    /// The module's rule for one object, at the current snapshot (which must be the set's).
    fn rule(
        &self,
        h: &History,
        at: OpRef,
        snap: &SnapshotSet,
        obj: ObjId,
        own: &FxHashSet<ObjId>,
    ) -> Result<Option<SeenVersion>, SnapshotSetError> {
        if let Some(e) = snap.except.iter().find(|e| e.obj == obj) {
            return Ok(Some(*e));
        }
        if snap.unseen.contains(&obj) {
            return Ok(None);
        }
        if own.contains(&obj) {
            return Ok(Some(SeenVersion { obj, writer: Writer::Txn(at.txn) }));
        }
        match self.newest_visible(obj, at.txn, snap.visible_through) {
            Ok(Some(w)) => Ok(Some(SeenVersion { obj, writer: Writer::Txn(w) })),
            Ok(None) if self.initial[obj.index()] => Ok(Some(SeenVersion { obj, writer: Writer::Initial })),
            Ok(None) => Ok(None),
            Err(w) => Err(SnapshotSetError {
                txn: h.txn_label(at.txn),
                op: at.op,
                message: format!(
                    "{} writes {} and has no commit timestamp to compare with the snapshot's",
                    h.txn_label(w),
                    h.object_label(obj)
                ),
            }),
        }
    }

    /// Moves the current snapshot to `through`: consecutive operations' snapshots are
    /// close (one session's next transaction, another session's concurrent one), so only the
    /// few commits in between are applied, and each object's newest visible writer is then
    /// one array read instead of a binary search over its versions (measured: 102 s to 3 s
    /// on gen's 100,000-transaction predicate history, docs/PERFORMANCE.md).
    fn move_to(&mut self, through: Timestamp) {
        while let Some(&(ts, obj)) = self.commits.get(self.at) {
            if ts > through {
                break;
            }
            self.visible[obj.index()] += 1;
            self.at += 1;
            if self.record {
                self.changed.push(obj);
            }
        }
        while self.at > 0 && self.commits[self.at - 1].0 > through {
            self.at -= 1;
            let obj = self.commits[self.at].1;
            self.visible[obj.index()] -= 1;
            if self.record {
                self.changed.push(obj);
            }
        }
    }

    /// The objects of `table`, in id order.
    pub fn objects(&self, table: TableId) -> &[ObjId] {
        self.objects.get(table.index()).map_or(&[], Vec::as_slice)
    }

    /// The version set `snap` gives operation `at` of `h`, written into `out` (cleared first)
    /// in object order.
    ///
    /// # Errors
    /// The operation is not a predicate operation, or a writer the rule must place has no
    /// commit timestamp.
    pub fn resolve_into(
        &mut self,
        h: &History,
        at: OpRef,
        snap: &SnapshotSet,
        out: &mut Vec<SeenVersion>,
    ) -> Result<(), SnapshotSetError> {
        out.clear();
        let ops = &h.txn(at.txn).ops;
        let table = match ops.get(at.op as usize).and_then(Op::predicate) {
            Some(p) => h.predicate(p).table,
            None => {
                return Err(SnapshotSetError {
                    txn: h.txn_label(at.txn),
                    op: at.op,
                    message: "the operation is not a predicate operation".into(),
                })
            }
        };
        let own = Self::earlier_writes(h, at);
        self.move_to(snap.visible_through);
        for &obj in self.objects.get(table.index()).map_or(&[][..], Vec::as_slice) {
            if let Some(seen) = self.rule(h, at, snap, obj, &own)? {
                out.push(seen);
            }
        }
        Ok(())
    }

    /// The last writer of `obj` in version order, other than `reader`, committed at or
    /// before `through`; `Err` names a writer without a commit timestamp.
    fn newest_visible(&self, obj: ObjId, reader: TxnId, through: Timestamp) -> Result<Option<TxnId>, TxnId> {
        let Some(list) = self.writers.get(obj.index()) else { return Ok(None) };
        if list.monotone {
            // The current snapshot is `through` (move_to).
            let n = self.visible[obj.index()] as usize;
            return Ok(list.txns[..n].iter().rev().copied().find(|&w| w != reader));
        }
        for (&w, &ts) in list.txns.iter().zip(&list.commit_ts).rev() {
            if w == reader {
                continue;
            }
            match ts {
                Some(ts) if ts <= through => return Ok(Some(w)),
                Some(_) => {}
                None => return Err(w),
            }
        }
        Ok(None)
    }
}

impl Certificate {
    /// Replaces every compact version set by the list it stands for, for consumers that
    /// read version sets row by row (reports, converters). Emme resolves them per
    /// operation instead.
    ///
    /// # Errors
    /// A [`SnapshotSetError`] when a set cannot be resolved.
    pub fn expand_snapshot_sets(&mut self, h: &History) -> Result<(), SnapshotSetError> {
        let Some(snapshots) = self.snapshot_sets.take() else { return Ok(()) };
        let mut resolver = SnapshotResolver::new(h, self);
        let sets = self.version_sets.get_or_insert_with(FxHashMap::default);
        for (at, snap) in snapshots {
            let mut out = Vec::new();
            resolver.resolve_into(h, at, &snap, &mut out)?;
            sets.insert(at, out);
        }
        Ok(())
    }
}

impl Certificate {
    /// Rewrites the predicate operations' version sets listed row by row as snapshots
    /// where that is shorter, for any source whose transactions carry commit timestamps
    /// (PostgreSQL's recovered snapshot ticks, the timestamp-ordered databases). Per
    /// operation, `visible_through` is the timestamp the most listed rows agree with (a
    /// sweep over the interval of timestamps that gives each row its listed version); the
    /// rows that disagree become `except`/`unseen`, checked by resolving the result, so
    /// [`Certificate::expand_snapshot_sets`] gives back exactly the lists. A set stays a list
    /// when more than a quarter of its rows would be exceptions. Returns how many sets were
    /// rewritten.
    pub fn compact_version_sets(&mut self, h: &History) -> usize {
        let Some(sets) = self.version_sets.take() else { return 0 };
        let mut resolver = SnapshotResolver::new(h, self);
        let mut snapshots = self.snapshot_sets.take().unwrap_or_default();
        let mut kept = FxHashMap::default();
        let mut resolved = Vec::new();
        let mut rewritten = 0;
        for (at, listed) in sets {
            let snap = h
                .txn(at.txn)
                .ops
                .get(at.op as usize)
                .and_then(Op::predicate)
                .and_then(|_| resolver.compact(h, at, &listed, &mut resolved));
            match snap {
                Some(snap) => {
                    snapshots.insert(at, snap);
                    rewritten += 1;
                }
                None => {
                    kept.insert(at, listed);
                }
            }
        }
        self.version_sets = Some(kept);
        if !snapshots.is_empty() {
            self.snapshot_sets = Some(snapshots);
        }
        rewritten
    }
}

impl SnapshotResolver {
    /// The snapshot form of `listed`, the version set of operation `at`, when it is short
    /// (module doc of [`Certificate::compact_version_sets`]); `scratch` is reused.
    fn compact(
        &mut self,
        h: &History,
        at: OpRef,
        listed: &[SeenVersion],
        scratch: &mut Vec<SeenVersion>,
    ) -> Option<SnapshotSet> {
        let table = h.predicate(h.txn(at.txn).ops[at.op as usize].predicate()?).table;
        if listed.iter().any(|s| h.object(s.obj).table != table) {
            return None;
        }
        // Candidate timestamps: where each listed row's version becomes the newest visible
        // one (+1) and where the next writer replaces it (-1).
        let mut events: Vec<(Timestamp, i32)> = Vec::with_capacity(2 * listed.len());
        let mut unbounded = 0i32;
        for s in listed {
            let Some(list) = self.writers.get(s.obj.index()) else { continue };
            let others = || list.txns.iter().zip(&list.commit_ts).filter(|(w, _)| **w != at.txn);
            let (lo, hi) = match s.writer {
                Writer::Txn(w) if w == at.txn => continue,
                Writer::Txn(w) => {
                    let mut after = others().skip_while(|(x, _)| **x != w);
                    let Some((_, Some(lo))) = after.next() else { continue };
                    (Some(*lo), after.next().and_then(|(_, ts)| *ts))
                }
                Writer::Initial => (None, others().next().and_then(|(_, ts)| *ts)),
            };
            match lo {
                Some(lo) => events.push((lo, 1)),
                None => unbounded += 1,
            }
            if let Some(hi) = hi {
                events.push((hi, -1));
            }
        }
        events.sort_unstable();
        let (mut best, mut best_count, mut count) = (Timestamp::default(), unbounded, unbounded);
        for (ts, delta) in events {
            count += delta;
            if count > best_count {
                (best, best_count) = (ts, count);
            }
        }
        let mut snap = SnapshotSet { visible_through: best, except: Vec::new(), unseen: Vec::new() };
        self.resolve_into(h, at, &snap, scratch).ok()?;
        // The differences, object by object (both lists in object order once sorted).
        let mut want: Vec<SeenVersion> = listed.to_vec();
        want.sort_unstable_by_key(|s| s.obj);
        let (mut i, mut j) = (0, 0);
        while i < want.len() || j < scratch.len() {
            match (want.get(i), scratch.get(j)) {
                (Some(w), Some(r)) if w.obj == r.obj => {
                    if w.writer != r.writer {
                        snap.except.push(*w);
                    }
                    i += 1;
                    j += 1;
                }
                (Some(w), r) if r.is_none_or(|r| w.obj < r.obj) => {
                    snap.except.push(*w);
                    i += 1;
                }
                (_, Some(r)) => {
                    snap.unseen.push(r.obj);
                    j += 1;
                }
                _ => unreachable!("one of the lists has an element left"),
            }
        }
        let exceptions = snap.except.len() + snap.unseen.len();
        (exceptions * 4 <= listed.len().max(4)).then_some(snap)
    }
}
