//! Enne: replay in the certificate's serialization order (Algorithm 4).
//!
//! The committed transactions run one after another in the expected order against a
//! current state (one value per object). Every item read must return the current value;
//! every predicate operation's rows (and every aggregate) must be what the predicate
//! matches in the current state. Writes apply what the history says was written. Each
//! divergence is reported and replay goes on, so all of them are found. Predicates find
//! their candidate rows through ordered indexes of the constrained column, kept in step
//! with the state, instead of scanning the table.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;

use isocert_history::{
    is_opaque_value, Certificate, ColId, History, ObjId, Op, OpRef, Status, TableId, TxnId, ValueId,
};
use isocert_oracle::MatchesOracle;
use rustc_hash::FxHashMap;

use crate::aggregate::{aggregate, same_result};
use crate::colindex::{key_of, usable_constraints, Key, Range};
use crate::emme::WEAK_HINT;
use crate::values::{column_value, ValueStore};
use crate::versions::{writer_label, INITIAL};
use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind, IsolationLevel, Report};

/// A column value in an ordered index: numbers before text.
#[derive(Clone, Debug, PartialEq)]
enum IndexKey {
    Num(f64),
    Text(Box<str>),
}

impl Eq for IndexKey {}

impl PartialOrd for IndexKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for IndexKey {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (IndexKey::Num(a), IndexKey::Num(b)) => a.total_cmp(b),
            (IndexKey::Text(a), IndexKey::Text(b)) => a.cmp(b),
            (IndexKey::Num(_), IndexKey::Text(_)) => Ordering::Less,
            (IndexKey::Text(_), IndexKey::Num(_)) => Ordering::Greater,
        }
    }
}

fn index_key(h: &History, obj: ObjId, value: ValueId, col: ColId) -> Option<IndexKey> {
    column_value(h, obj, value, col).and_then(|s| key_of(s, h.dialect)).map(|k| match k {
        Key::Num(n) => IndexKey::Num(n),
        Key::Text(t) => IndexKey::Text(t.into()),
    })
}

/// The replay state.
struct Replay<'a, 'h> {
    h: &'h History,
    oracle: &'a dyn MatchesOracle,
    values: ValueStore<'h>,
    state: Vec<ValueId>,
    writer: Vec<u32>,
    table_objects: Vec<Vec<ObjId>>,
    indexes: FxHashMap<(TableId, ColId), BTreeSet<(IndexKey, u32)>>,
    anomalies: Vec<Anomaly>,
    /// Who first installed each (object, value): a second installer is a duplicate write.
    installers: FxHashMap<(ObjId, ValueId), u32>,
    /// The certificate's writers identify versions: a value installed twice is two versions
    /// (a replay compares each read with the state it reaches, so none is ambiguous).
    writer_identity: bool,
}

impl Replay<'_, '_> {
    fn installed(&mut self, obj: ObjId, value: ValueId, t: TxnId, i: u32) {
        if value == ValueId::ABSENT || self.writer_identity {
            return;
        }
        let first = *self.installers.entry((obj, value)).or_insert(t.0);
        if first != t.0 && !is_opaque_value(self.h, obj, value) {
            let h = self.h;
            let mut txns = vec![t];
            if first != INITIAL {
                txns.insert(0, TxnId(first));
            }
            self.anomalies.push(
                Anomaly::new(
                    AnomalyKind::DuplicateWrite,
                    txns,
                    format!(
                        "{} and {} both installed {}={}, so reads of that value are ambiguous",
                        writer_label(h, first),
                        h.txn_label(t),
                        h.object_label(obj),
                        self.values.label(obj, value)
                    ),
                )
                .with_ops(vec![OpRef { txn: t, op: i }])
                .with_objects(vec![obj]),
            );
        }
    }

    fn set(&mut self, obj: ObjId, value: ValueId, t: TxnId) {
        let h = self.h;
        let table = h.object(obj).table;
        let old = self.state[obj.index()];
        for (&(tab, col), index) in self.indexes.iter_mut() {
            if tab == table {
                if let Some(k) = index_key(h, obj, old, col) {
                    index.remove(&(k, obj.0));
                }
                if let Some(k) = index_key(h, obj, value, col) {
                    index.insert((k, obj.0));
                }
            }
        }
        self.state[obj.index()] = value;
        self.writer[obj.index()] = t.0;
    }

    fn current(&self, obj: ObjId) -> String {
        let v = self.state[obj.index()];
        format!(
            "{} (written by {})",
            self.values.label(obj, v),
            writer_label(self.h, self.writer[obj.index()])
        )
    }

    fn candidates(&mut self, table: TableId, pred: isocert_history::PredId) -> Vec<ObjId> {
        let h = self.h;
        let bounds = self.oracle.bounds(pred);
        let usable = usable_constraints(&bounds, h.dialect);
        let Some((col, ranges)) = usable.into_iter().next() else {
            return self.table_objects[table.index()].clone();
        };
        let index = self.indexes.entry((table, col)).or_insert_with(|| {
            self.table_objects[table.index()]
                .iter()
                .filter_map(|&o| index_key(h, o, self.state[o.index()], col).map(|k| (k, o.0)))
                .collect()
        });
        let mut out = Vec::new();
        for r in ranges {
            let (lo, hi) = match r {
                Range::Num(lo, hi) => {
                    (Bound::Included((IndexKey::Num(lo), 0)), Bound::Included((IndexKey::Num(hi), u32::MAX)))
                }
                Range::Text(lo, hi) => (
                    Bound::Included((IndexKey::Text(lo.unwrap_or("").into()), 0)),
                    match hi {
                        Some(hi) => Bound::Included((IndexKey::Text(hi.into()), u32::MAX)),
                        None => Bound::Unbounded,
                    },
                ),
            };
            out.extend(index.range((lo, hi)).map(|(_, o)| ObjId(*o)));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn predicate_op(&mut self, t: TxnId, i: u32, op: &Op) -> Result<(), CheckError> {
        let h = self.h;
        let Some(pred) = op.predicate() else { return Ok(()) };
        let table = h.predicate(pred).table;
        let mut expected = Vec::new();
        for obj in self.candidates(table, pred) {
            let v = self.state[obj.index()];
            if v != ValueId::ABSENT
                && self.values.is_history_value(v)
                && self.oracle.matches(h, pred, obj, v)?
            {
                expected.push((obj, v));
            }
        }
        let what = format!(
            "{} ({} where {})",
            crate::words::nth_op(h, t, i),
            h.table(table).name,
            h.predicate(pred).sql
        );
        let message = match op {
            Op::Aggregate { function, column, result, .. } => {
                let want = aggregate(h, *function, *column, &expected);
                (!same_result(result, &want))
                    .then(|| format!("{what} returned {result}; replay gives {want}"))
            }
            Op::Select { rows, .. } | Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                let select = matches!(op, Op::Select { .. });
                let mut got: Vec<(ObjId, ValueId)> = rows.iter().map(|r| (r.obj, r.value)).collect();
                got.sort_unstable();
                let same = if select {
                    got == expected
                } else {
                    got.len() == expected.len() && got.iter().zip(&expected).all(|(a, b)| a.0 == b.0)
                };
                (!same).then(|| {
                    let extra: Vec<String> = got
                        .iter()
                        .filter(|(o, v)| !expected.iter().any(|(p, w)| p == o && (!select || v == w)))
                        .take(5)
                        .map(|&(o, v)| {
                            if select {
                                format!("{}={}", h.object_label(o), self.values.label(o, v))
                            } else {
                                h.object_label(o)
                            }
                        })
                        .collect();
                    let missing: Vec<String> = expected
                        .iter()
                        .filter(|(o, v)| !got.iter().any(|(p, w)| p == o && (!select || v == w)))
                        .take(5)
                        .map(|&(o, _)| format!("{}={}", h.object_label(o), self.current(o)))
                        .collect();
                    format!(
                        "{what} does not match the replay; returned but not matching: [{}]; matching but not \
                         returned: [{}]",
                        extra.join(", "),
                        missing.join(", ")
                    )
                })
            }
            _ => None,
        };
        if let Some(message) = message {
            self.anomalies.push(
                Anomaly::new(AnomalyKind::ReplayDivergence, vec![t], message)
                    .with_ops(vec![OpRef { txn: t, op: i }]),
            );
        }
        Ok(())
    }
}

/// Runs Enne.
pub(crate) fn check(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    if level.black_box_only() {
        return Err(CheckError::UnsupportedLevel { checker: CheckerKind::Enne, level, hint: WEAK_HINT });
    }
    if level != IsolationLevel::Serializable {
        return Err(CheckError::UnsupportedLevel {
            checker: CheckerKind::Enne,
            level,
            hint:
                "Enne replays a serialization order, which only serializability promises; use --checker emme",
        });
    }
    let order = cert.serialization_order.as_ref().ok_or_else(|| CheckError::MissingCertificateData {
        what: "serialization order in the certificate".to_string(),
        level,
        checker: CheckerKind::Enne,
    })?;
    let mut report = Report::new(level, CheckerKind::Enne);
    let mut table_objects = vec![Vec::new(); h.tables().len()];
    for o in 0..h.object_count() {
        let obj = ObjId::from_index(o);
        table_objects[h.object(obj).table.index()].push(obj);
    }
    let mut replay = Replay {
        h,
        oracle,
        values: ValueStore::new(h),
        state: vec![ValueId::ABSENT; h.object_count()],
        writer: vec![INITIAL; h.object_count()],
        table_objects,
        indexes: FxHashMap::default(),
        anomalies: Vec::new(),
        installers: FxHashMap::default(),
        writer_identity: cert.writer_identity,
    };
    for &(obj, v) in &h.initial {
        replay.state[obj.index()] = v;
        replay.installers.insert((obj, v), INITIAL);
    }
    let mut listed = vec![false; h.txns.len()];
    let mut replayed = 0usize;
    for &t in order {
        let txn = h.txn(t);
        if std::mem::replace(&mut listed[t.index()], true) {
            replay.anomalies.push(Anomaly::new(
                AnomalyKind::CertificateContradiction,
                vec![t],
                format!("{} appears twice in the serialization order", h.txn_label(t)),
            ));
            continue;
        }
        if txn.status == Status::Aborted {
            replay.anomalies.push(Anomaly::new(
                AnomalyKind::CertificateContradiction,
                vec![t],
                format!("{} aborted, but the serialization order lists it", h.txn_label(t)),
            ));
            continue;
        }
        report.stats.committed += 1;
        for (i, op) in txn.ops.iter().enumerate() {
            replayed += 1;
            let i = i as u32;
            match op {
                Op::Read { obj, value } => {
                    if replay.state[obj.index()] != replay.values.as_version(*value) {
                        let message = format!(
                            "{} read {}={}, but replaying the serialization order gives {}",
                            h.txn_label(t),
                            h.object_label(*obj),
                            replay.values.label(*obj, *value),
                            replay.current(*obj)
                        );
                        replay.anomalies.push(
                            Anomaly::new(AnomalyKind::ReplayDivergence, vec![t], message)
                                .with_ops(vec![OpRef { txn: t, op: i }])
                                .with_objects(vec![*obj]),
                        );
                    }
                }
                Op::Write { obj, value } => {
                    replay.installed(*obj, *value, t, i);
                    replay.set(*obj, *value, t);
                }
                Op::Append { obj, element } => {
                    let v = replay.values.append(replay.state[obj.index()], element);
                    replay.set(*obj, v, t);
                }
                Op::Select { .. } | Op::Aggregate { .. } => replay.predicate_op(t, i, op)?,
                Op::Update { rows, .. } => {
                    replay.predicate_op(t, i, op)?;
                    for r in rows {
                        replay.installed(r.obj, r.value, t, i);
                        replay.set(r.obj, r.value, t);
                    }
                }
                Op::Delete { rows, .. } => {
                    replay.predicate_op(t, i, op)?;
                    rows.iter().for_each(|r| replay.set(r.obj, ValueId::ABSENT, t));
                }
            }
        }
    }
    session_order(h, order, &listed, &mut replay.anomalies);
    for t in h.txn_ids() {
        if h.txn(t).status == Status::Committed && !listed[t.index()] {
            replay.anomalies.push(Anomaly::new(
                AnomalyKind::CertificateContradiction,
                vec![t],
                format!("{} committed, but the serialization order does not list it", h.txn_label(t)),
            ));
        }
    }
    if h.txns.iter().any(|t| t.status == Status::Unknown) {
        report.notes.push(
            "transactions with unknown outcome are replayed when the serialization order lists them and \
             ignored otherwise"
                .into(),
        );
    }
    report.stats.txns = h.txns.len();
    report.stats.ops = h.txns.iter().map(|t| t.ops.len()).sum();
    report.stats.edges = replayed;
    report.anomalies = replay.anomalies;
    Ok(report)
}

/// Session order (the default definition): the serialization order must keep each session's
/// transactions in their session's order. Without it (`SessionOrder::Excluded`) every
/// transaction is its own session and this finds nothing.
fn session_order(h: &History, order: &[TxnId], listed: &[bool], anomalies: &mut Vec<Anomaly>) {
    let mut position = vec![u32::MAX; h.txns.len()];
    for (i, &t) in order.iter().enumerate() {
        if position[t.index()] == u32::MAX {
            position[t.index()] = i as u32;
        }
    }
    let mut last: Vec<Option<TxnId>> = vec![None; h.session_count()];
    for t in h.txn_ids().filter(|t| listed[t.index()] && h.txn(*t).status != Status::Aborted) {
        let session = h.txn(t).session.index();
        if let Some(before) = last[session].replace(t) {
            if position[before.index()] > position[t.index()] {
                anomalies.push(Anomaly::new(
                    AnomalyKind::Session,
                    vec![before, t],
                    format!(
                        "the serialization order puts {} before {}, which precedes it in their session",
                        h.txn_label(t),
                        h.txn_label(before)
                    ),
                ));
            }
        }
    }
}
