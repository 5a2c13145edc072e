//! Helpers: a one-row history per question.

use isocert_history::{Dialect, History, Scalar, KV_TABLE};
use isocert_oracle::{Interpreter, OracleError};

/// A scalar from a short literal: `null`, `true`, integers, floats, anything else is text.
pub(crate) fn s(v: &str) -> Scalar {
    if v == "null" {
        Scalar::Null
    } else if v == "true" || v == "false" {
        Scalar::Bool(v == "true")
    } else if let Ok(i) = v.parse::<i64>() {
        Scalar::Int(i)
    } else if let Ok(f) = v.parse::<f64>() {
        Scalar::Float(f)
    } else {
        Scalar::Text(v.into())
    }
}

/// The three-valued result of `sql` on a row of table `t` with the given columns.
pub(crate) fn eval_row_in(
    dialect: Dialect,
    columns: &[(&str, Scalar)],
    sql: &str,
) -> Result<Option<bool>, OracleError> {
    let mut h = History::new();
    h.dialect = dialect;
    let t = h.intern_table("t");
    let cols: Vec<_> = columns.iter().map(|(n, v)| (h.intern_column(t, n), v.clone())).collect();
    let value = h.intern_row(&cols);
    let obj = h.intern_object(t, Scalar::Int(1));
    let pred = h.intern_predicate(t, sql);
    let i = Interpreter::new(&h)?;
    i.truth(&h, pred, obj, value)
}

/// [`eval_row_in`] in the PostgreSQL dialect.
pub(crate) fn eval_row(columns: &[(&str, Scalar)], sql: &str) -> Result<Option<bool>, OracleError> {
    eval_row_in(Dialect::Postgres, columns, sql)
}

/// The three-valued result of `sql` on a kv object `key` holding `value`.
pub(crate) fn eval_kv(key: Scalar, value: Scalar, sql: &str) -> Result<Option<bool>, OracleError> {
    let mut h = History::new();
    let t = h.intern_table(KV_TABLE);
    let value = h.intern_value(isocert_history::Value::Scalar(value));
    let obj = h.intern_object(t, key);
    let pred = h.intern_predicate(t, sql);
    let i = Interpreter::new(&h)?;
    i.truth(&h, pred, obj, value)
}
