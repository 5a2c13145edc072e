//! Conversions between JSON and the model's scalars, rows and values.

use serde_json::Value as Json;

use crate::{History, Scalar, TableId, Value, ValueId};

/// A JSON scalar as a [`Scalar`], or a message saying why it is not one.
pub(crate) fn scalar(json: &Json) -> Result<Scalar, String> {
    Ok(match json {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => number(n)?,
        Json::String(s) => Scalar::Text(s.as_str().into()),
        Json::Array(_) => return Err("expected a scalar, found an array".into()),
        Json::Object(_) => return Err("expected a scalar, found an object".into()),
    })
}

/// A JSON number as a [`Scalar`]: an integer or a float.
pub(crate) fn number(n: &serde_json::Number) -> Result<Scalar, String> {
    if let Some(i) = n.as_i64() {
        Ok(Scalar::Int(i))
    } else if n.is_u64() {
        Err(format!("integer {n} does not fit a signed 64-bit integer"))
    } else {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if !f.is_finite() {
            return Err(crate::value::out_of_float_range(n));
        }
        // serde_json reads an integer literal beyond the 64-bit range as the nearest
        // float: two different such integers could then compare equal. Refuse it.
        if f.fract() == 0.0 && f.abs() >= 2f64.powi(63) {
            return Err(format!(
                "number {n} is outside the 64-bit integer range and would lose its exact value; \
                 write it as a string"
            ));
        }
        Ok(Scalar::Float(f))
    }
}

/// A key or id: an integer or a string.
pub(crate) fn key(json: &Json) -> Result<Scalar, String> {
    match json {
        Json::Number(_) | Json::String(_) => match scalar(json)? {
            Scalar::Float(_) => Err("expected an integer or a string, found a float".into()),
            s => Ok(s),
        },
        other => Err(format!("expected an integer or a string, found {}", kind(other))),
    }
}

/// The JSON type name of a value, for messages.
pub(crate) fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Interns the value of an object of `table`: `null` is absent, a kv value is a scalar,
/// a list read is an array of scalars, a SQL row is an object of columns (the transaction
/// lines' reader, [`super::raw::value`], on a borrowed view of `json`).
pub(crate) fn value(h: &mut History, table: TableId, json: &Json) -> Result<ValueId, String> {
    super::raw::value(h, table, &super::raw::RawJson::from(json))
}

/// A value as v1 JSON (the inverse of [`value`]).
pub(crate) fn value_to_json(h: &History, table: TableId, id: ValueId) -> Json {
    match h.value(id) {
        Value::Absent => Json::Null,
        Value::Scalar(s) => s.to_json(),
        Value::List(items) => Json::Array(items.iter().map(Scalar::to_json).collect()),
        Value::Row(row) => {
            let columns = &h.table(table).columns;
            let mut map = serde_json::Map::new();
            for (i, s) in row.columns().iter().enumerate() {
                if !s.is_null() {
                    map.insert(columns[i].to_string(), s.to_json());
                }
            }
            Json::Object(map)
        }
    }
}
