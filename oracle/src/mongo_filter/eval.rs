//! Evaluating a [`Filter`] on a document.

use std::cmp::Ordering;

use isocert_history::{Row, Scalar, Table};

use super::value::{cmp_values, MValue, Val};
use super::{Clause, FieldRef, Filter, Op};

/// What a document holds at a field.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FieldState<'a> {
    /// The field is not there.
    Missing,
    /// Null or missing: the history model does not tell them apart (a SQL NULL column).
    NullOrMissing,
    /// The field's value.
    Present(Val<'a>),
}

/// A document a filter can be evaluated on.
pub(crate) trait Document {
    /// The state of `field`.
    fn field(&self, field: &FieldRef) -> FieldState<'_>;
}

/// A history object version seen as a document.
#[derive(Clone, Copy, Debug)]
pub(crate) enum HistoryDoc<'a> {
    /// A key-value object: `{_id: key, value: value}`.
    Kv {
        /// The key.
        key: &'a Scalar,
        /// The value.
        value: &'a Scalar,
    },
    /// A row of a table: a field per column.
    Row {
        /// The object's key.
        key: &'a Scalar,
        /// The row.
        row: &'a Row,
        /// Its table (for fields resolved by name).
        table: &'a Table,
    },
}

impl Document for HistoryDoc<'_> {
    fn field(&self, field: &FieldRef) -> FieldState<'_> {
        match (*self, field) {
            (HistoryDoc::Kv { key, .. }, FieldRef::Key) => FieldState::Present(Val::of_scalar(key)),
            // The adapter always writes the `value` field, so a null value is a null field.
            (HistoryDoc::Kv { value, .. }, FieldRef::KvValue) => FieldState::Present(Val::of_scalar(value)),
            (HistoryDoc::Row { key, .. }, FieldRef::Key) => FieldState::Present(Val::of_scalar(key)),
            (HistoryDoc::Row { row, .. }, FieldRef::Column(c)) => column_state(row.get(*c)),
            (HistoryDoc::Row { row, table, .. }, FieldRef::Name(name)) => match table.column(name) {
                Some(c) => column_state(row.get(c)),
                None => FieldState::Missing,
            },
            _ => FieldState::Missing,
        }
    }
}

/// A column's state: SQL NULL is "null or missing".
fn column_state(s: &Scalar) -> FieldState<'_> {
    match s {
        Scalar::Null => FieldState::NullOrMissing,
        _ => FieldState::Present(Val::of_scalar(s)),
    }
}

/// Whether `doc` matches `filter`.
///
/// # Errors
/// A message when the answer depends on what the document model cannot tell (`$exists`
/// on a field that is null or missing).
pub(crate) fn evaluate(filter: &Filter, doc: &dyn Document) -> Result<bool, String> {
    for clause in &filter.clauses {
        let ok = match clause {
            Clause::And(parts) => all(parts, doc)?,
            Clause::Or(parts) => any(parts, doc)?,
            Clause::Nor(parts) => !any(parts, doc)?,
            Clause::Field { field, ops } => ops_match(ops, doc.field(field), field)?,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn all(parts: &[Filter], doc: &dyn Document) -> Result<bool, String> {
    for p in parts {
        if !evaluate(p, doc)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn any(parts: &[Filter], doc: &dyn Document) -> Result<bool, String> {
    for p in parts {
        if evaluate(p, doc)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn ops_match(ops: &[Op], state: FieldState<'_>, field: &FieldRef) -> Result<bool, String> {
    for op in ops {
        if !op_match(op, state, field)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn op_match(op: &Op, state: FieldState<'_>, field: &FieldRef) -> Result<bool, String> {
    Ok(match op {
        Op::Eq(v) => eq_match(state, v),
        Op::Ne(v) => !eq_match(state, v),
        Op::In(list) => list.iter().any(|v| eq_match(state, v)),
        Op::Nin(list) => !list.iter().any(|v| eq_match(state, v)),
        Op::Gt(v) => cmp_match(state, v, Cmp::Gt),
        Op::Gte(v) => cmp_match(state, v, Cmp::Gte),
        Op::Lt(v) => cmp_match(state, v, Cmp::Lt),
        Op::Lte(v) => cmp_match(state, v, Cmp::Lte),
        Op::Exists(want) => match state {
            FieldState::Missing => !want,
            FieldState::Present(_) => *want,
            FieldState::NullOrMissing => {
                return Err(format!(
                "$exists on {}: the history records a null column, which may be a null or a missing field",
                field_label(field)
            ))
            }
        },
        Op::Not(inner) => !ops_match(inner, state, field)?,
    })
}

fn field_label(field: &FieldRef) -> String {
    match field {
        FieldRef::Key => "_id".into(),
        FieldRef::KvValue => "value".into(),
        FieldRef::Column(c) => format!("column #{}", c.index()),
        FieldRef::Name(n) => format!("{n:?}"),
    }
}

/// Equality: null matches null or missing; an array matches when it equals the operand or
/// one of its elements does.
fn eq_match(state: FieldState<'_>, v: &MValue) -> bool {
    match state {
        FieldState::Missing | FieldState::NullOrMissing => matches!(v, MValue::Null),
        FieldState::Present(x) => {
            let equal = |a: Val<'_>| cmp_values(a, v.view()) == Ordering::Equal;
            equal(x) || matches!(x, Val::Array(items) if items.iter().any(|e| equal(e.view())))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmp {
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A range comparison: only values in the operand's type bracket; NaN only equals NaN;
/// `$gte`/`$lte` with null behave as equality with null; arrays by any element (or whole).
fn cmp_match(state: FieldState<'_>, v: &MValue, cmp: Cmp) -> bool {
    if matches!(v, MValue::Null) {
        return matches!(cmp, Cmp::Gte | Cmp::Lte) && eq_match(state, v);
    }
    let FieldState::Present(x) = state else {
        return false;
    };
    let operand = v.view();
    let check = |a: Val<'_>| -> bool {
        if a.canonical() != operand.canonical() {
            return false;
        }
        if a.is_nan() || operand.is_nan() {
            return matches!(cmp, Cmp::Gte | Cmp::Lte) && a.is_nan() && operand.is_nan();
        }
        let o = cmp_values(a, operand);
        match cmp {
            Cmp::Gt => o == Ordering::Greater,
            Cmp::Gte => o != Ordering::Less,
            Cmp::Lt => o == Ordering::Less,
            Cmp::Lte => o != Ordering::Greater,
        }
    };
    check(x) || matches!(x, Val::Array(items) if items.iter().any(|e| check(e.view())))
}
