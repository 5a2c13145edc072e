//! Statement-level promises a database documents beyond Adya's level (the history header's
//! `promises`, declared beside each adapter), checked with the certificate's version order:
//!
//! - *write-to-qualifying*: the version an `UPDATE`/`DELETE` (and a `MERGE` or an upsert,
//!   recorded as one) replaced — its own earlier version, else its immediate predecessor
//!   in the version order — satisfies the statement's `WHERE` (the oracle evaluates it on
//!   that version). Else [`AnomalyKind::NonQualifyingWrite`].
//! - *write-from-replaced*: the row an expression update installed is its `SET` evaluated
//!   (by the oracle) on that replaced version, the other columns unchanged. Else
//!   [`AnomalyKind::StatementLostUpdate`]: a lost update inside one statement, Berenson et
//!   al.'s cursor stability and Adya's G-cursor at the grain of a statement.
//!
//! The third promise, *one-snapshot*, is what a recovery's per-statement snapshot sets
//! already express (docs/RECOVERY.md); it adds no check here.

use isocert_history::{
    Assign, Certificate, History, ObjId, Op, OpRef, Scalar, StatementPromise, Status, TxnId, Value, ValueId,
    Writer,
};
use isocert_oracle::{Assignments, MatchesOracle};
use rustc_hash::FxHashMap;

use crate::{Anomaly, AnomalyKind, CheckError, Report};

/// Checks the statement-level promises `h`'s header declares against `cert`'s version order
/// and adds an anomaly per broken one to `report`; names the definition checked
/// ([`Report::documented_by`]). Nothing happens when the header declares none of the
/// write promises; without a version order the report says they were not checked.
///
/// # Errors
/// [`CheckError::Oracle`] when an expression or a predicate cannot be evaluated on the
/// version it replaced (exit code 2: the verdict would rest on a guess).
pub(crate) fn check_promises(
    h: &History,
    cert: &Certificate,
    oracle: &dyn MatchesOracle,
    report: &mut Report,
) -> Result<(), CheckError> {
    let Some(promises) = &h.promises else { return Ok(()) };
    let qualifying = promises.makes(StatementPromise::WriteToQualifying);
    let from_replaced = promises.makes(StatementPromise::WriteFromReplaced);
    if !qualifying && !from_replaced {
        report.documented_by = Some(promises.database.clone());
        return Ok(());
    }
    let Some(order) = &cert.version_order else {
        report.notes.push(format!(
            "statement promises not checked: the certificate has no version order (the level checked is Adya's, \
             not as {} documents it)",
            promises.database
        ));
        return Ok(());
    };
    let versions = Versions::new(h, order);
    let assignments = Assignments::new(h);
    compile_all(h, &assignments)?;
    for t in h.txn_ids().filter(|&t| h.txn(t).status != Status::Aborted) {
        let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let at = OpRef { txn: t, op: i as u32 };
            match op {
                Op::Write { obj, value } => {
                    own.insert(*obj, *value);
                }
                Op::Update { predicate, rows, .. } | Op::Delete { predicate, rows } => {
                    for r in rows.iter() {
                        let replaced = match own.get(&r.obj) {
                            Some(&v) => Some((Writer::Txn(t), v)),
                            None => versions.replaced(t, r.obj),
                        };
                        own.insert(r.obj, r.value);
                        let Some((writer, value)) = replaced else { continue };
                        let replaced = Replaced { obj: r.obj, writer, value };
                        if qualifying && !oracle.matches(h, *predicate, r.obj, value)? {
                            report.anomalies.push(non_qualifying(h, at, op, &replaced));
                            continue;
                        }
                        if from_replaced && op.has_expressions() && value != ValueId::ABSENT {
                            let check =
                                Computed { h, assignments: &assignments, versions: &versions, at, op };
                            if let Some(a) = check.stale(&replaced, r.value)? {
                                report.anomalies.push(a);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    report.documented_by = Some(promises.database.clone());
    Ok(())
}

/// Compiles every expression of the transactions that did not abort, so that a bad one is an
/// error naming its transaction, operation and column whether or not a row reached it.
fn compile_all(h: &History, assignments: &Assignments) -> Result<(), CheckError> {
    for t in h.txn_ids().filter(|&t| h.txn(t).status != Status::Aborted) {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let Op::Update { predicate, set, .. } = op else { continue };
            let table = h.predicate(*predicate).table;
            for (c, a) in set.iter() {
                let Assign::Expr(e) = a else { continue };
                assignments
                    .compile(h, table, e)
                    .map_err(|e| located(h, OpRef { txn: t, op: i as u32 }, *c, e))?;
            }
        }
    }
    Ok(())
}

/// An assignment's error, naming where the expression is: `T9's operation 1, set.n: ...`.
fn located(
    h: &History,
    at: OpRef,
    column: isocert_history::ColId,
    e: isocert_oracle::OracleError,
) -> CheckError {
    let Op::Update { predicate, .. } = &h.txn(at.txn).ops[at.op as usize] else { return e.into() };
    let table = h.table(h.predicate(*predicate).table);
    let name = table.columns.get(column.index()).map_or("?", |n| &**n);
    match e {
        isocert_oracle::OracleError::Assignment { sql, message } => isocert_oracle::OracleError::Assignment {
            sql,
            message: format!("{}, set.{name}: {message}", crate::words::nth_op(h, at.txn, at.op)),
        }
        .into(),
        other => other.into(),
    }
}

/// The version a statement replaced: of which object, whose, what it held.
struct Replaced {
    obj: ObjId,
    writer: Writer,
    value: ValueId,
}

/// The versions of each object: the initial one, then each writer's last write, in the
/// certificate's version order.
struct Versions<'a> {
    order: &'a FxHashMap<ObjId, Vec<TxnId>>,
    /// Each (object, writer)'s position in the object's version order.
    position: FxHashMap<(ObjId, TxnId), usize>,
    /// What each writer's last write of each object installed.
    last: FxHashMap<(TxnId, ObjId), ValueId>,
    initial: FxHashMap<ObjId, ValueId>,
}

impl<'a> Versions<'a> {
    fn new(h: &History, order: &'a FxHashMap<ObjId, Vec<TxnId>>) -> Self {
        let mut position = FxHashMap::default();
        for (&obj, writers) in order {
            for (i, &w) in writers.iter().enumerate() {
                position.insert((obj, w), i);
            }
        }
        let mut last = FxHashMap::default();
        for t in h.txn_ids().filter(|&t| h.txn(t).status != Status::Aborted) {
            for op in &h.txn(t).ops {
                match op {
                    Op::Write { obj, value } => {
                        last.insert((t, *obj), *value);
                    }
                    Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                        rows.iter().for_each(|r| {
                            last.insert((t, r.obj), r.value);
                        });
                    }
                    _ => {}
                }
            }
        }
        Versions { order, position, last, initial: h.initial.iter().copied().collect() }
    }

    /// The version `t`'s first write of `obj` replaced: its predecessor in the version
    /// order (`None` when `t` is not in the object's order, a contradiction Emme reports).
    fn replaced(&self, t: TxnId, obj: ObjId) -> Option<(Writer, ValueId)> {
        let &pos = self.position.get(&(obj, t))?;
        Some(match pos {
            0 => (Writer::Initial, self.value(Writer::Initial, obj)),
            _ => {
                let w = Writer::Txn(self.order[&obj][pos - 1]);
                (w, self.value(w, obj))
            }
        })
    }

    /// The version `writer` installed of `obj` (absent for an unborn object or an append).
    fn value(&self, writer: Writer, obj: ObjId) -> ValueId {
        match writer {
            Writer::Initial => self.initial.get(&obj).copied().unwrap_or(ValueId::ABSENT),
            Writer::Txn(t) => self.last.get(&(t, obj)).copied().unwrap_or(ValueId::ABSENT),
        }
    }

    /// Every version of `obj`, oldest first.
    fn all(&self, obj: ObjId) -> impl Iterator<Item = (Writer, ValueId)> + '_ {
        let writers = self.order.get(&obj).map_or(&[][..], Vec::as_slice);
        std::iter::once(Writer::Initial)
            .chain(writers.iter().map(|&w| Writer::Txn(w)))
            .map(move |w| (w, self.value(w, obj)))
    }
}

/// One expression update's row, checked against the version it replaced.
struct Computed<'c> {
    h: &'c History,
    assignments: &'c Assignments,
    versions: &'c Versions<'c>,
    at: OpRef,
    op: &'c Op,
}

impl Computed<'_> {
    /// The row the update computes from version `base` of `obj`: `base` with its SET applied.
    fn row_from(&self, obj: ObjId, base: ValueId) -> Result<Vec<Scalar>, CheckError> {
        let Op::Update { set, .. } = self.op else { unreachable!("an update") };
        let table = self.h.object(obj).table;
        let mut row = columns(self.h, base);
        for (c, a) in set.iter() {
            let v = self
                .assignments
                .evaluate(self.h, table, a, obj, base)
                .map_err(|e| located(self.h, self.at, *c, e))?;
            if row.len() <= c.index() {
                row.resize(c.index() + 1, Scalar::Null);
            }
            row[c.index()] = v;
        }
        Ok(row)
    }

    /// The anomaly when `installed` is not the update's SET on the replaced version.
    fn stale(&self, replaced: &Replaced, installed: ValueId) -> Result<Option<Anomaly>, CheckError> {
        let expected = self.row_from(replaced.obj, replaced.value)?;
        let got = columns(self.h, installed);
        if same_row(&expected, &got) {
            return Ok(None);
        }
        // The version it was computed from, if any gives the installed row.
        let mut from = None;
        for (w, v) in self.versions.all(replaced.obj) {
            if v != ValueId::ABSENT
                && v != replaced.value
                && self.row_from(replaced.obj, v).is_ok_and(|r| same_row(&r, &got))
            {
                from = Some((w, v));
            }
        }
        Ok(Some(self.explain(replaced, &expected, &got, from)))
    }

    fn explain(
        &self,
        replaced: &Replaced,
        expected: &[Scalar],
        got: &[Scalar],
        from: Option<(Writer, ValueId)>,
    ) -> Anomaly {
        let h = self.h;
        let (t, obj) = (self.at.txn, replaced.obj);
        let cols = &h.table(h.object(obj).table).columns;
        let width = expected.len().max(got.len());
        let differing: Vec<usize> =
            (0..width).filter(|&c| !same_scalar(cell(expected, c), cell(got, c))).collect();
        let show = |row: &[Scalar]| -> String {
            let parts: Vec<String> = differing
                .iter()
                .map(|&c| format!("{} = {}", cols.get(c).map_or("?", |n| &**n), cell(row, c)))
                .collect();
            parts.join(", ")
        };
        let computed = match from {
            Some((w, v)) => {
                format!("computed from {} {}", version_label(h, w), h.value_label(obj, v))
            }
            None => format!("which no version of {} gives", h.object_label(obj)),
        };
        let explanation = format!(
            "{}'s {} wrote {} of {}, {computed}, but it replaced {} {}, from which its SET gives {} \
             (a lost update inside one statement: the database documents that the statement computes its new row \
             from the version it replaces)",
            h.txn_label(t),
            statement(h, self.op),
            show(got),
            h.object_label(obj),
            version_label(h, replaced.writer),
            h.value_label(obj, replaced.value),
            show(expected),
        );
        let mut txns = vec![t];
        for w in [Some(replaced.writer), from.map(|f| f.0)].into_iter().flatten().filter_map(Writer::txn) {
            if !txns.contains(&w) {
                txns.push(w);
            }
        }
        Anomaly::new(AnomalyKind::StatementLostUpdate, txns, explanation)
            .with_ops(vec![self.at])
            .with_objects(vec![obj])
    }
}

/// The anomaly of a statement that replaced a version its `WHERE` does not match.
fn non_qualifying(h: &History, at: OpRef, op: &Op, replaced: &Replaced) -> Anomaly {
    let pred = op.predicate().map(|p| &*h.predicate(p).sql).unwrap_or("?");
    let version = match replaced.value {
        ValueId::ABSENT => "where the row did not exist".to_string(),
        v => format!("{}, which does not satisfy {pred}", h.value_label(replaced.obj, v)),
    };
    let explanation = format!(
        "{}'s {} replaced {} of {} {version} (the database documents that the statement re-checks its \
         condition on the newest version and leaves a row that no longer matches)",
        h.txn_label(at.txn),
        statement(h, op),
        version_label(h, replaced.writer),
        h.object_label(replaced.obj),
    );
    let mut txns = vec![at.txn];
    if let Some(w) = replaced.writer.txn().filter(|&w| w != at.txn) {
        txns.push(w);
    }
    Anomaly::new(AnomalyKind::NonQualifyingWrite, txns, explanation)
        .with_ops(vec![at])
        .with_objects(vec![replaced.obj])
}

/// `UPDATE items SET n = n + 3, v = 77 WHERE id = 1` / `DELETE FROM items WHERE ...`.
fn statement(h: &History, op: &Op) -> String {
    let Some(p) = op.predicate() else { return "write".into() };
    let p = h.predicate(p);
    let table = h.table(p.table);
    match op {
        Op::Update { set, .. } => {
            let set: Vec<String> = set
                .iter()
                .map(|(c, a)| {
                    let v = match a {
                        Assign::Const(s) => s.to_string(),
                        Assign::Expr(e) => e.sql.to_string(),
                    };
                    format!("{} = {v}", table.columns.get(c.index()).map_or("?", |n| &**n))
                })
                .collect();
            format!("UPDATE {} SET {} WHERE {}", table.name, set.join(", "), p.sql)
        }
        _ => format!("DELETE FROM {} WHERE {}", table.name, p.sql),
    }
}

/// `T3's version` / `the initial version`.
fn version_label(h: &History, w: Writer) -> String {
    match w {
        Writer::Initial => "the initial version".into(),
        Writer::Txn(t) => format!("{}'s version", h.txn_label(t)),
    }
}

/// A version's columns (a key-value version as its one `value` column after the key).
fn columns(h: &History, v: ValueId) -> Vec<Scalar> {
    match h.value(v) {
        Value::Row(r) => r.columns().to_vec(),
        Value::Scalar(s) => vec![Scalar::Null, s.clone()],
        Value::Absent | Value::List(_) => Vec::new(),
    }
}

fn cell(row: &[Scalar], c: usize) -> &Scalar {
    const NULL: Scalar = Scalar::Null;
    row.get(c).unwrap_or(&NULL)
}

/// Equal as stored values: NULL equals NULL; numbers by SQL comparison (3 = 3.0).
fn same_scalar(a: &Scalar, b: &Scalar) -> bool {
    a == b || isocert_oracle::sql_cmp(a, b) == Some(std::cmp::Ordering::Equal)
}

fn same_row(a: &[Scalar], b: &[Scalar]) -> bool {
    (0..a.len().max(b.len())).all(|c| same_scalar(cell(a, c), cell(b, c)))
}
