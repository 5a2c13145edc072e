//! Version sets of predicate operations, from the recorded snapshots.
//!
//! A predicate operation evaluated, for each row of its table, the newest version whose
//! writer its snapshot sees, unless its own transaction wrote the row earlier (then its
//! own latest write). At READ COMMITTED an UPDATE or DELETE that finds a row changed by a
//! writer its snapshot does not see re-evaluates the predicate on the newest version
//! (EvalPlanQual); [`adjust_for_recheck`] recovers what such a statement really evaluated.

use isocert_history::{History, ObjId, Op, OpRef, PredId, SeenVersion, TableId, TxnId, ValueId, Writer};
use rustc_hash::{FxHashMap, FxHashSet};

use super::facts::TxnFacts;
use super::timeline::Timeline;
use crate::matching::Matched;
use crate::{PgSnapshot, RecoveryError, RowMatcher};

/// Everything the version-set computation looks up.
pub(crate) struct Context<'a> {
    pub(crate) h: &'a History,
    pub(crate) facts: &'a [TxnFacts],
    pub(crate) m: &'a Matched,
    pub(crate) tl: &'a Timeline,
    pub(crate) matcher: RowMatcher<'a>,
    initial: FxHashMap<ObjId, ValueId>,
    /// Per table, its objects that have a version (initial or written), sorted.
    pub(crate) objects_of: Vec<Vec<ObjId>>,
    /// Per transaction, the first snapshot of the next transaction of its session: it
    /// sees every commit that happened before the transaction ended.
    session_next: Vec<Option<&'a PgSnapshot>>,
}

/// How many rows the EvalPlanQual recovery re-assigned.
#[derive(Debug, Default)]
pub(crate) struct SetStats {
    pub(crate) rechecked_rows: usize,
}

impl<'a> Context<'a> {
    pub(crate) fn new(
        h: &'a History,
        facts: &'a [TxnFacts],
        m: &'a Matched,
        tl: &'a Timeline,
        matcher: RowMatcher<'a>,
    ) -> Self {
        let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
        let mut objects_of: Vec<Vec<ObjId>> = vec![Vec::new(); h.tables().len()];
        let mut seen: FxHashSet<ObjId> = FxHashSet::default();
        for obj in initial.keys().chain(m.version_order.keys()) {
            if seen.insert(*obj) {
                objects_of[h.object(*obj).table.index()].push(*obj);
            }
        }
        objects_of.iter_mut().for_each(|v| v.sort_unstable());
        let mut session_next = vec![None; h.txns.len()];
        let mut following: Vec<Option<&PgSnapshot>> = vec![None; h.session_count()];
        for t in (0..h.txns.len()).rev().map(TxnId::from_index) {
            let session = h.txn(t).session.index();
            session_next[t.index()] = following[session];
            if let Some(first) = facts[t.index()].snapshots().next() {
                following[session] = Some(first);
            }
        }
        Context { h, facts, m, tl, matcher, initial, objects_of, session_next }
    }

    fn xid(&self, t: TxnId) -> u64 {
        self.m.xid[t.index()].unwrap_or(u64::MAX)
    }

    /// Index in the object's version order of the newest version that `reader`'s
    /// snapshot `snap` sees. PostgreSQL leaves the reader's own xid out of `xip`, so its
    /// own (later) version is excluded here; its earlier writes are handled by the caller.
    pub(crate) fn latest_visible(&self, obj: ObjId, snap: &PgSnapshot, reader: TxnId) -> Option<usize> {
        let order = self.m.version_order.get(&obj)?;
        order.partition_point(|w| *w != reader && snap.sees(self.xid(*w))).checked_sub(1)
    }

    /// The version of `obj` at index `k` of its version order (`None`: before the first).
    pub(crate) fn writer_at(&self, obj: ObjId, k: Option<usize>) -> Option<Writer> {
        match k {
            Some(k) => Some(Writer::Txn(self.m.version_order[&obj][k])),
            None => self.initial.contains_key(&obj).then_some(Writer::Initial),
        }
    }

    /// Whether `obj` has an initial version.
    pub(crate) fn initial_has(&self, obj: ObjId) -> bool {
        self.initial.contains_key(&obj)
    }

    pub(crate) fn value_of(&self, obj: ObjId, w: Writer) -> ValueId {
        match w {
            Writer::Initial => self.initial.get(&obj).copied().unwrap_or(ValueId::ABSENT),
            Writer::Txn(t) => self.m.final_value.get(&(t, obj)).copied().unwrap_or(ValueId::ABSENT),
        }
    }

    pub(crate) fn matches(
        &self,
        r: OpRef,
        pred: PredId,
        obj: ObjId,
        value: ValueId,
    ) -> Result<bool, RecoveryError> {
        (self.matcher)(self.h, pred, obj, value).map_err(|message| RecoveryError::Oracle {
            txn: self.h.txn_label(r.txn),
            op: r.op as usize,
            object: self.h.object_label(obj),
            message,
        })
    }
}

/// Computes the version set of every predicate operation of every committed transaction.
pub(crate) fn compute(
    cx: &Context<'_>,
) -> Result<(FxHashMap<OpRef, Vec<SeenVersion>>, SetStats), RecoveryError> {
    let h = cx.h;
    let mut sets = FxHashMap::default();
    let mut stats = SetStats::default();
    for t in h.txn_ids() {
        let txn = h.txn(t);
        if !txn.is_committed() {
            continue;
        }
        let facts = &cx.facts[t.index()];
        // Objects this transaction wrote, with the op indices that wrote them.
        let mut own: FxHashMap<ObjId, u32> = FxHashMap::default();
        for (i, op) in txn.ops.iter().enumerate() {
            let r = OpRef { txn: t, op: i as u32 };
            if let Some(pred) = op.predicate() {
                let snap = facts.snapshot_of(r.op).ok_or_else(|| RecoveryError::Meta {
                    txn: h.txn_label(t),
                    field: format!("ops[{i}].meta.snapshot"),
                    message: "a predicate operation needs the snapshot it read from".into(),
                })?;
                let table = h.predicate(pred).table;
                let mut set = snapshot_set(cx, table, snap, &own, t);
                if facts.read_committed && matches!(op, Op::Update { .. } | Op::Delete { .. }) {
                    stats.rechecked_rows += adjust_for_recheck(cx, r, pred, op, &own, &mut set)?;
                }
                sets.insert(r, set);
            }
            let mut mark = |obj: ObjId| {
                own.entry(obj).or_insert(i as u32);
            };
            match op {
                Op::Write { obj, .. } => mark(*obj),
                Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                    rows.iter().for_each(|row| mark(row.obj))
                }
                _ => {}
            }
        }
    }
    Ok((sets, stats))
}

fn snapshot_set(
    cx: &Context<'_>,
    table: TableId,
    snap: &PgSnapshot,
    own: &FxHashMap<ObjId, u32>,
    t: TxnId,
) -> Vec<SeenVersion> {
    let objects = cx.objects_of.get(table.index()).map(Vec::as_slice).unwrap_or(&[]);
    let mut set = Vec::with_capacity(objects.len());
    for &obj in objects {
        let writer = if own.contains_key(&obj) {
            Some(Writer::Txn(t))
        } else {
            cx.writer_at(obj, cx.latest_visible(obj, snap, t))
        };
        if let Some(writer) = writer {
            set.push(SeenVersion { obj, writer });
        }
    }
    set
}

/// EvalPlanQual: rows the statement changed were evaluated at the version it overwrote;
/// rows it skipped although their snapshot version matched were re-evaluated on a newer
/// version that no longer matched. Returns how many rows changed version.
fn adjust_for_recheck(
    cx: &Context<'_>,
    r: OpRef,
    pred: PredId,
    op: &Op,
    own: &FxHashMap<ObjId, u32>,
    set: &mut Vec<SeenVersion>,
) -> Result<usize, RecoveryError> {
    let (Op::Update { rows, .. } | Op::Delete { rows, .. }) = op else { return Ok(0) };
    let t = r.txn;
    let changed: FxHashSet<ObjId> = rows.iter().map(|row| row.obj).collect();
    let facts = &cx.facts[t.index()];
    // A version the re-check saw committed before the statement ended, so the next
    // snapshot of the transaction, or else of its session, sees it; else it committed
    // before the transaction did; with none of these known, any newer version may have.
    let later = facts.snapshot_after(r.op).or(cx.session_next[t.index()]);
    let own_commit = cx.m.stream_pos[t.index()].and(cx.tl.commit[t.index()]);
    let committed_in_time = |w: TxnId| match later {
        Some(s) => s.sees(cx.xid(w)),
        None => match (own_commit, cx.tl.commit[w.index()]) {
            (Some(mine), Some(theirs)) => theirs < mine,
            _ => true,
        },
    };
    let mut adjusted = 0;
    for obj in &changed {
        if own.contains_key(obj) {
            continue;
        }
        let Some(order) = cx.m.version_order.get(obj) else { continue };
        let Some(k) = order.iter().position(|w| *w == t) else { continue };
        let Some(overwritten) = cx.writer_at(*obj, k.checked_sub(1)) else { continue };
        match set.iter_mut().find(|v| v.obj == *obj) {
            Some(v) if v.writer == overwritten => {}
            Some(v) => {
                v.writer = overwritten;
                adjusted += 1;
            }
            None => {
                set.push(SeenVersion { obj: *obj, writer: overwritten });
                adjusted += 1;
            }
        }
    }
    let mut found_deleted: Vec<ObjId> = Vec::new();
    for v in set.iter_mut() {
        if changed.contains(&v.obj) || own.contains_key(&v.obj) {
            continue;
        }
        if !cx.matches(r, pred, v.obj, cx.value_of(v.obj, v.writer))? {
            continue;
        }
        // The snapshot version matched but the statement left the row alone: it found a
        // newer version that no longer matched. Take the first such committed in time.
        let Some(order) = cx.m.version_order.get(&v.obj) else { continue };
        let from = match v.writer {
            Writer::Initial => 0,
            Writer::Txn(w) => order.iter().position(|x| *x == w).map_or(order.len(), |k| k + 1),
        };
        for &w in &order[from..] {
            if w == t || !committed_in_time(w) {
                break;
            }
            if cx.m.reinserted.contains(&(w, v.obj)) {
                // `w` deleted the row and inserted it anew: the re-check followed the old
                // row's chain to its deletion and found no live row.
                found_deleted.push(v.obj);
                adjusted += 1;
                break;
            }
            if !cx.matches(r, pred, v.obj, cx.value_of(v.obj, Writer::Txn(w)))? {
                v.writer = Writer::Txn(w);
                adjusted += 1;
                break;
            }
        }
    }
    set.retain(|v| !found_deleted.contains(&v.obj));
    set.sort_unstable_by_key(|v| v.obj);
    Ok(adjusted)
}
