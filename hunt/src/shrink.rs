//! Shrinking a failing history: the smallest set of its transactions whose sub-history,
//! under the same certificate facts, still shows the same anomaly class.
//!
//! A sub-history keeps the chosen transactions (in file order, so sessions keep their
//! order) with their operations unchanged, and the certificate restricted to them: each
//! object's version order without the removed writers, the version sets of the kept
//! operations. A removal is accepted only when (1) no kept version set names a version a
//! removed transaction wrote (that fact would be lost), and (2) the check of the
//! sub-history still reports the anomaly class and no class the full history did not show
//! (a read whose writer was removed would show as a new class, a garbage read: it is
//! refused), and (3) no kept write followed, in the database's order, a deletion by a
//! removed transaction (it inserted its row; without the deletion it would read as an
//! overwrite the database never did, and its reproducer would not replay). The search starts from the anomaly's own transactions plus the writers of the
//! versions they read; if that set does not show the class, from the whole history. Then it
//! removes chunks of halving size, down to single transactions (delta debugging), then
//! leaves out single reads (whose writers may then go too), until neither step removes
//! anything: the result is 1-minimal, removing any one more transaction or read loses the
//! class.

use std::collections::{BTreeMap, BTreeSet};

use isocert_checker::{check, Anomaly, AnomalyKind, CheckerKind, IsolationLevel, Report};
use isocert_history::{
    Certificate, History, ObjId, Op, OpRef, Scalar, SeenVersion, Status, TxnId, Value, Writer,
};
use isocert_oracle::Interpreter;
use rustc_hash::FxHashMap;

use crate::HuntError;

/// The most checks one shrink runs (each check is of a small history once shrunk).
const MAX_CHECKS: usize = 4000;

/// A shrunk history.
#[derive(Debug)]
pub struct Shrunk {
    /// The sub-history.
    pub history: History,
    /// Its certificate (the original's facts restricted to the kept transactions).
    pub certificate: Certificate,
    /// Its check: shows the anomaly class.
    pub report: Report,
    /// The kept transactions, as ids of the original history.
    pub kept: Vec<TxnId>,
    /// The operations kept in them.
    pub ops: usize,
    /// The class it shows.
    pub kind: AnomalyKind,
    /// How many checks the search ran.
    pub checks: usize,
}

/// Which transactions, and which of their reads, a sub-history keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The kept transactions (ids of the original history).
    pub txns: BTreeSet<TxnId>,
    /// Per kept transaction, the indices of the reads it leaves out.
    pub dropped_reads: BTreeMap<TxnId, BTreeSet<u32>>,
}

impl Selection {
    /// Every operation of the transactions `txns`.
    pub fn of(txns: BTreeSet<TxnId>) -> Self {
        Selection { txns, dropped_reads: BTreeMap::new() }
    }

    fn without_txns(&self, gone: &[TxnId]) -> Self {
        let mut s = self.clone();
        for t in gone {
            s.txns.remove(t);
            s.dropped_reads.remove(t);
        }
        s
    }

    fn without_read(&self, t: TxnId, op: u32) -> Self {
        let mut s = self.clone();
        s.dropped_reads.entry(t).or_default().insert(op);
        s
    }

    /// Operations kept, over all kept transactions.
    pub fn ops(&self, h: &History) -> usize {
        self.txns
            .iter()
            .map(|t| h.txn(*t).ops.len() - self.dropped_reads.get(t).map_or(0, BTreeSet::len))
            .sum()
    }
}

/// The sub-history of `h` with the transactions and operations `keep` selects, and
/// `cert` restricted to them. `None` when a kept version set names a version a removed
/// transaction wrote.
pub fn sub_history(h: &History, cert: &Certificate, keep: &Selection) -> Option<(History, Certificate)> {
    let mut sub = h.without_txns();
    let mut map: FxHashMap<TxnId, TxnId> = FxHashMap::default();
    // Per kept transaction, the new index of each old op index (None: dropped).
    let mut op_map: FxHashMap<TxnId, Vec<Option<u32>>> = FxHashMap::default();
    for &t in &keep.txns {
        let mut txn = h.txn(t).clone();
        let dropped = keep.dropped_reads.get(&t);
        let mut index = Vec::with_capacity(txn.ops.len());
        let mut next = 0u32;
        for i in 0..txn.ops.len() as u32 {
            if dropped.is_some_and(|d| d.contains(&i)) {
                index.push(None);
            } else {
                index.push(Some(next));
                next += 1;
            }
        }
        if dropped.is_some() {
            let ops = std::mem::take(&mut txn.ops);
            txn.ops =
                ops.into_iter().enumerate().filter(|(i, _)| index[*i].is_some()).map(|(_, op)| op).collect();
            let op_meta =
                txn.op_metas().iter().filter_map(|(i, m)| Some((index[*i as usize]?, m.clone()))).collect();
            txn.set_op_metas(op_meta);
        }
        let id = sub.push_txn(txn).ok()?;
        map.insert(t, id);
        op_map.insert(t, index);
    }
    let mut out = Certificate { writer_identity: cert.writer_identity, ..Certificate::default() };
    if let Some(order) = &cert.version_order {
        let mut kept = FxHashMap::default();
        for (obj, writers) in order {
            // A kept write that followed a removed deletion inserted its row: without the
            // deletion the sub-history would have it overwrite the version before, a fact
            // the database never showed (and a reproducer could not replay it).
            let follows_removed_deletion = writers.windows(2).any(|pair| {
                map.contains_key(&pair[1]) && !map.contains_key(&pair[0]) && leaves_absent(h, pair[0], *obj)
            });
            if follows_removed_deletion {
                return None;
            }
            let w: Vec<TxnId> = writers.iter().filter_map(|t| map.get(t).copied()).collect();
            if !w.is_empty() {
                kept.insert(*obj, w);
            }
        }
        out.version_order = Some(kept);
    }
    if let Some(sets) = &cert.version_sets {
        let mut kept = FxHashMap::default();
        for (r, versions) in sets {
            let Some(&txn) = map.get(&r.txn) else { continue };
            let Some(op) = op_map[&r.txn].get(r.op as usize).copied().flatten() else { continue };
            let mut seen = Vec::with_capacity(versions.len());
            for v in versions {
                let writer = match v.writer {
                    Writer::Initial => Writer::Initial,
                    Writer::Txn(w) => Writer::Txn(*map.get(&w)?),
                };
                seen.push(SeenVersion { obj: v.obj, writer });
            }
            kept.insert(OpRef { txn, op }, seen);
        }
        out.version_sets = Some(kept);
    }
    if cert.snapshot_sets.as_ref().is_some_and(|s| !s.is_empty()) {
        // Compact sets name snapshots of the whole history: not restricted here.
        return None;
    }
    out.serialization_order =
        cert.serialization_order.as_ref().map(|o| o.iter().filter_map(|t| map.get(t).copied()).collect());
    Some((sub, out))
}

/// Whether transaction `w`'s last write of `obj` leaves it absent (a deletion).
pub(crate) fn leaves_absent(h: &History, w: TxnId, obj: ObjId) -> bool {
    let last = h.txn(w).ops.iter().rev().find_map(|op| match op {
        Op::Write { obj: o, value } if *o == obj => Some(*value == isocert_history::ValueId::ABSENT),
        Op::Delete { rows, .. } if rows.iter().any(|r| r.obj == obj) => Some(true),
        Op::Update { rows, .. } if rows.iter().any(|r| r.obj == obj) => Some(false),
        Op::Append { obj: o, .. } if *o == obj => Some(false),
        _ => None,
    });
    last.unwrap_or(false)
}

/// The writers of the versions transaction `t` read by value: for an item read, the
/// committed transactions whose last write of the object is that value; for a list read,
/// the appenders of its elements.
fn writers_read_by(h: &History, t: TxnId) -> Vec<TxnId> {
    let mut out = Vec::new();
    for op in &h.txn(t).ops {
        let Op::Read { obj, value } = op else { continue };
        match h.value(*value) {
            Value::List(items) => {
                for w in h.txn_ids().filter(|&w| w != t) {
                    if h.txn(w).ops.iter().any(|o| matches!(o, Op::Append { obj: o2, element } if o2 == obj && items.contains(element)))
                    {
                        out.push(w);
                    }
                }
            }
            Value::Absent => {}
            _ => {
                for w in h.txn_ids().filter(|&w| w != t && h.txn(w).status != Status::Aborted) {
                    let last = h.txn(w).ops.iter().rev().find_map(|o| match o {
                        Op::Write { obj: o2, value: v } if o2 == obj => Some(*v),
                        _ => None,
                    });
                    if last == Some(*value) {
                        out.push(w);
                    }
                }
            }
        }
    }
    out
}

/// What a shrink keeps checking.
struct Judge<'a> {
    h: &'a History,
    cert: &'a Certificate,
    level: IsolationLevel,
    kind: AnomalyKind,
    allowed: BTreeSet<AnomalyKind>,
    checks: usize,
}

impl Judge<'_> {
    /// The sub-history of `keep`, its certificate and report, when it shows the class.
    fn shows(&mut self, keep: &Selection) -> Option<(History, Certificate, Report)> {
        if self.checks >= MAX_CHECKS {
            return None;
        }
        self.checks += 1;
        let (sub, cert) = sub_history(self.h, self.cert, keep)?;
        let oracle = Interpreter::new(&sub).ok()?;
        let report = check(&sub, &cert, self.level, CheckerKind::Auto, &oracle).ok()?;
        let kinds: BTreeSet<AnomalyKind> = report.anomalies.iter().map(|a| a.kind).collect();
        (kinds.contains(&self.kind) && kinds.is_subset(&self.allowed)).then_some((sub, cert, report))
    }
}

/// Shrinks `h` (checked under `cert` at `level`, with report `report`) to a 1-minimal set
/// of transactions still showing the class of `anomaly`.
///
/// # Errors
/// [`HuntError::Check`] when even the whole history does not show the class (the check is
/// not reproducible on its own output, which would be a checker bug).
pub fn shrink(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    report: &Report,
    anomaly: &Anomaly,
) -> Result<Shrunk, HuntError> {
    let mut judge = Judge {
        h,
        cert,
        level,
        kind: anomaly.kind,
        allowed: report.anomalies.iter().map(|a| a.kind).collect(),
        checks: 0,
    };
    let mut start: BTreeSet<TxnId> = anomaly.txns.iter().copied().collect();
    for op in &anomaly.ops {
        start.insert(op.txn);
    }
    let around: Vec<TxnId> = start.iter().flat_map(|&t| writers_read_by(h, t)).collect();
    start.extend(around);
    let start = Selection::of(start);
    let mut keep = if judge.shows(&start).is_some() {
        start
    } else {
        let all = Selection::of(h.txn_ids().collect());
        if judge.shows(&all).is_none() {
            return Err(HuntError::Check(format!(
                "the history does not show {} again when checked on its own",
                anomaly.kind.as_str()
            )));
        }
        all
    };
    loop {
        keep = remove_txns(&mut judge, keep);
        let before = keep.clone();
        keep = remove_reads(&mut judge, h, keep);
        if keep == before {
            break;
        }
    }
    let (history, certificate, report) = judge
        .shows(&keep)
        .ok_or_else(|| HuntError::Check("the shrunk history no longer shows the class".into()))?;
    let ops = keep.ops(h);
    Ok(Shrunk {
        history,
        certificate,
        report,
        kept: keep.txns.into_iter().collect(),
        ops,
        kind: anomaly.kind,
        checks: judge.checks,
    })
}

/// Delta debugging over transactions: removes chunks of halving size while the class stays.
fn remove_txns(judge: &mut Judge<'_>, mut keep: Selection) -> Selection {
    let mut chunk = keep.txns.len().div_ceil(2).max(1);
    loop {
        let mut removed_any = false;
        let order: Vec<TxnId> = keep.txns.iter().rev().copied().collect();
        for piece in order.chunks(chunk) {
            if keep.txns.len() <= piece.len() {
                continue;
            }
            let candidate = keep.without_txns(piece);
            if judge.shows(&candidate).is_some() {
                keep = candidate;
                removed_any = true;
            }
        }
        if chunk == 1 && !removed_any {
            return keep;
        }
        if !removed_any || chunk > 1 {
            chunk = (chunk / 2).max(1);
        }
    }
}

/// Leaves out, one at a time, each read (item, predicate or aggregate) whose absence keeps
/// the class: the writers of what it read may then go too.
fn remove_reads(judge: &mut Judge<'_>, h: &History, mut keep: Selection) -> Selection {
    let txns: Vec<TxnId> = keep.txns.iter().copied().collect();
    for t in txns {
        for (i, op) in h.txn(t).ops.iter().enumerate().rev() {
            if !matches!(op, Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. }) {
                continue;
            }
            let candidate = keep.without_read(t, i as u32);
            if judge.shows(&candidate).is_some() {
                keep = candidate;
            }
        }
    }
    keep
}

/// The objects a history's transactions touch by key (item operations and appends), with
/// the scalar key of each, in first-touch order.
pub fn touched_objects(h: &History) -> Vec<(ObjId, Scalar)> {
    let mut out: Vec<(ObjId, Scalar)> = Vec::new();
    for t in &h.txns {
        for op in &t.ops {
            let obj = match op {
                Op::Read { obj, .. } | Op::Write { obj, .. } | Op::Append { obj, .. } => *obj,
                _ => continue,
            };
            if !out.iter().any(|(o, _)| *o == obj) {
                out.push((obj, h.object(obj).key.clone()));
            }
        }
    }
    out
}
