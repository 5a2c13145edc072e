//! From filter text (relaxed extended JSON) to a [`Filter`].

use isocert_history::Table;
use serde_json::{Map, Value as Json};

use super::value::{parse_decimal, MValue, Num};
use super::{Clause, FieldRef, Filter, Op};

/// Why a filter does not compile.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FilterError {
    /// Not JSON, or not a JSON object.
    Parse(String),
    /// An operator, path or value type the front end does not implement, by name.
    Unsupported(String),
    /// Not a valid MongoDB filter (MongoDB would reject it too).
    Invalid(String),
}

/// Extended JSON type wrappers that are values, not operators.
const NUMBER_WRAPPERS: [&str; 4] = ["$numberInt", "$numberLong", "$numberDouble", "$numberDecimal"];

/// Extended JSON types the history model cannot hold.
const OTHER_WRAPPERS: [&str; 12] = [
    "$oid",
    "$date",
    "$binary",
    "$uuid",
    "$timestamp",
    "$regularExpression",
    "$minKey",
    "$maxKey",
    "$symbol",
    "$code",
    "$undefined",
    "$dbPointer",
];

/// Compiles filter `text` against `table`.
pub(crate) fn compile_filter(text: &str, table: &Table) -> Result<Filter, FilterError> {
    let json: Json = serde_json::from_str(text).map_err(|e| FilterError::Parse(e.to_string()))?;
    let Json::Object(doc) = json else {
        return Err(FilterError::Parse("a filter is a JSON object (a query document)".into()));
    };
    filter(&doc, table)
}

fn filter(doc: &Map<String, Json>, table: &Table) -> Result<Filter, FilterError> {
    let mut clauses = Vec::with_capacity(doc.len());
    for (key, v) in doc {
        let clause = match key.as_str() {
            "$and" => Clause::And(filter_list(key, v, table)?),
            "$or" => Clause::Or(filter_list(key, v, table)?),
            "$nor" => Clause::Nor(filter_list(key, v, table)?),
            k if k.starts_with('$') => {
                return Err(FilterError::Unsupported(format!("top-level operator {k}")))
            }
            _ => Clause::Field { field: field_ref(key, table)?, ops: condition(key, v)? },
        };
        clauses.push(clause);
    }
    Ok(Filter { clauses })
}

fn filter_list(op: &str, v: &Json, table: &Table) -> Result<Vec<Filter>, FilterError> {
    let Json::Array(items) = v else {
        return Err(FilterError::Invalid(format!("{op} must be an array")));
    };
    if items.is_empty() {
        return Err(FilterError::Invalid(format!("{op} must be a nonempty array")));
    }
    items
        .iter()
        .map(|item| match item {
            Json::Object(d) => filter(d, table),
            _ => Err(FilterError::Invalid(format!("{op} argument's entries must be objects"))),
        })
        .collect()
}

fn field_ref(name: &str, table: &Table) -> Result<FieldRef, FilterError> {
    if name.is_empty() {
        return Err(FilterError::Invalid("an empty field name".into()));
    }
    if name.contains('.') {
        return Err(FilterError::Unsupported(format!(
            "dotted field path {name:?} (the history's documents are flat)"
        )));
    }
    if table.is_kv() {
        return match name {
            "_id" => Ok(FieldRef::Key),
            "value" => Ok(FieldRef::KvValue),
            other => Err(FilterError::Unsupported(format!(
                "field {other:?} of a key-value document (the history records only _id and value)"
            ))),
        };
    }
    Ok(match table.column(name) {
        Some(c) => FieldRef::Column(c),
        None if name == "_id" => FieldRef::Key,
        None => FieldRef::Name(name.into()),
    })
}

/// Whether an object is an operator document (its first key starts with `$` and it is not
/// an extended JSON value).
fn is_operator_doc(d: &Map<String, Json>) -> bool {
    match d.keys().next() {
        Some(k) => {
            k.starts_with('$')
                && !NUMBER_WRAPPERS.contains(&k.as_str())
                && !OTHER_WRAPPERS.contains(&k.as_str())
        }
        None => false,
    }
}

fn condition(field: &str, v: &Json) -> Result<Vec<Op>, FilterError> {
    match v {
        Json::Object(d) if is_operator_doc(d) => operators(field, d),
        _ => Ok(vec![Op::Eq(value(v)?)]),
    }
}

fn operators(field: &str, d: &Map<String, Json>) -> Result<Vec<Op>, FilterError> {
    let mut ops = Vec::with_capacity(d.len());
    for (op, arg) in d {
        let o = match op.as_str() {
            "$eq" => Op::Eq(value(arg)?),
            "$ne" => Op::Ne(value(arg)?),
            "$gt" => Op::Gt(value(arg)?),
            "$gte" => Op::Gte(value(arg)?),
            "$lt" => Op::Lt(value(arg)?),
            "$lte" => Op::Lte(value(arg)?),
            "$in" => Op::In(value_list(op, arg)?),
            "$nin" => Op::Nin(value_list(op, arg)?),
            "$exists" => Op::Exists(truthy(arg).ok_or_else(|| {
                FilterError::Invalid(format!("$exists on {field:?} takes a boolean or a number"))
            })?),
            "$not" => match arg {
                Json::Object(inner) if inner.keys().next().is_some_and(|k| k == "$regularExpression") => {
                    return Err(FilterError::Unsupported("$not with a regular expression".into()))
                }
                Json::Object(inner) if is_operator_doc(inner) => Op::Not(operators(field, inner)?),
                Json::Object(inner) if inner.is_empty() => {
                    return Err(FilterError::Invalid("$not cannot be empty".into()))
                }
                _ => return Err(FilterError::Invalid("$not needs a regex or a document".into())),
            },
            other if other.starts_with('$') => {
                return Err(FilterError::Unsupported(format!("operator {other}")))
            }
            other => {
                return Err(FilterError::Invalid(format!(
                    "field {field:?}: {other:?} mixed with operators (unknown operator)"
                )))
            }
        };
        ops.push(o);
    }
    Ok(ops)
}

fn truthy(v: &Json) -> Option<bool> {
    match v {
        Json::Bool(b) => Some(*b),
        Json::Number(n) => Some(n.as_f64().is_some_and(|f| f != 0.0)),
        _ => None,
    }
}

fn value_list(op: &str, v: &Json) -> Result<Vec<MValue>, FilterError> {
    match v {
        Json::Array(items) => items.iter().map(value).collect(),
        _ => Err(FilterError::Invalid(format!("{op} needs an array"))),
    }
}

/// A relaxed extended JSON value.
pub(crate) fn value(v: &Json) -> Result<MValue, FilterError> {
    Ok(match v {
        Json::Null => MValue::Null,
        Json::Bool(b) => MValue::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => MValue::Num(Num::Int(i)),
            None => MValue::Num(Num::Double(n.as_f64().unwrap_or(f64::NAN))),
        },
        Json::String(s) => MValue::Str(s.as_str().into()),
        Json::Array(items) => MValue::Array(items.iter().map(value).collect::<Result<_, _>>()?),
        Json::Object(d) => {
            if let Some(first) = d.keys().next().filter(|k| k.starts_with('$')) {
                return wrapper(first, d);
            }
            MValue::Doc(d.iter().map(|(k, v)| Ok((k.as_str().into(), value(v)?))).collect::<Result<_, _>>()?)
        }
    })
}

fn wrapper(key: &str, d: &Map<String, Json>) -> Result<MValue, FilterError> {
    if OTHER_WRAPPERS.contains(&key) {
        return Err(FilterError::Unsupported(format!("extended JSON type {key}")));
    }
    if !NUMBER_WRAPPERS.contains(&key) {
        if key == "$regex" {
            return Err(FilterError::Unsupported("operator $regex".into()));
        }
        return Err(FilterError::Invalid(format!("{key} in a value (an operator where a value belongs)")));
    }
    if d.len() != 1 {
        return Err(FilterError::Invalid(format!("{key} takes no sibling fields")));
    }
    let Some(Json::String(s)) = d.get(key) else {
        return Err(FilterError::Invalid(format!("{key} takes a string")));
    };
    let bad = || FilterError::Invalid(format!("{key}: {s:?} is not a number of that type"));
    Ok(MValue::Num(match key {
        "$numberInt" => Num::Int(s.parse::<i32>().map_err(|_| bad())?.into()),
        "$numberLong" => Num::Int(s.parse::<i64>().map_err(|_| bad())?),
        "$numberDouble" => Num::Double(match s.as_str() {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            other => other.parse::<f64>().map_err(|_| bad())?,
        }),
        _ => Num::Decimal(parse_decimal(s).ok_or_else(bad)?),
    }))
}
