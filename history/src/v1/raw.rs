//! A JSON tree borrowed from the line it was parsed from, for the v1 history reader.
//!
//! The reader used to build a `serde_json::Value` for every key, value and row of every
//! line: a heap string per text and per column name, a map per row, all dropped at the end
//! of the line. [`RawJson`] holds the same tree with its strings borrowed from the input
//! (owned only when they contain escapes) and objects as vectors of pairs, so a line costs
//! a few small vectors. Object members keep the order and the duplicate-key rule of the
//! `serde_json` map this crate builds (`preserve_order`): a repeated key keeps its first
//! position and takes its last value.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value as Json};

use crate::{History, Scalar, TableId, Value, ValueId};

/// One JSON value, its strings borrowed from the input where they have no escapes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RawJson<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as `serde_json` reads it.
    Number(Number),
    /// A string.
    Str(Cow<'a, str>),
    /// An array.
    Array(Vec<RawJson<'a>>),
    /// An object, its members in document order (a repeated key once).
    Object(Vec<(Cow<'a, str>, RawJson<'a>)>),
}

impl<'a> From<&'a Json> for RawJson<'a> {
    /// A view of a `serde_json` tree, its strings borrowed.
    fn from(json: &'a Json) -> Self {
        match json {
            Json::Null => RawJson::Null,
            Json::Bool(b) => RawJson::Bool(*b),
            Json::Number(n) => RawJson::Number(n.clone()),
            Json::String(s) => RawJson::Str(Cow::Borrowed(s)),
            Json::Array(items) => RawJson::Array(items.iter().map(RawJson::from).collect()),
            Json::Object(map) => RawJson::Object(
                map.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), RawJson::from(v))).collect(),
            ),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

/// A map of borrowed keys to values (`set` of an update), with [`RawJson::Object`]'s rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RawMap<'a>(pub(crate) Vec<(Cow<'a, str>, RawJson<'a>)>);

impl RawMap<'_> {
    /// The number of members.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MapOnly)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = RawJson<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(RawJson::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(RawJson::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(RawJson::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // serde_json's own Value turns a non-finite float into null (a delete, in a write):
        // JSON text has no such number, so one that overflows is refused, not nulled.
        Number::from_f64(v).map(RawJson::Number).ok_or_else(|| E::custom(crate::value::out_of_float_range(v)))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(RawJson::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(RawJson::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(RawJson::Str(Cow::Owned(v)))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(RawJson::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        RawJson::deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RawJson::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(RawJson::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        MapOnly.visit_map(map).map(|m| RawJson::Object(m.0))
    }
}

/// Objects up to this many members look for a repeated key linearly.
const LINEAR_KEYS: usize = 16;

/// Visits an object only (a borrowed key per member).
struct MapOnly;

impl<'de> Visitor<'de> for MapOnly {
    type Value = RawMap<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members: Vec<(Cow<'de, str>, RawJson<'de>)> =
            Vec::with_capacity(map.size_hint().unwrap_or(0));
        // Rows have a few columns: a linear search for a repeated key, until an object is
        // large enough for an index to pay (so a huge object stays linear time).
        let mut index: Option<HashMap<Cow<'de, str>, usize>> = None;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let value: RawJson<'de> = map.next_value()?;
            if index.is_none() && members.len() >= LINEAR_KEYS {
                index = Some(members.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect());
            }
            let found = match &mut index {
                Some(index) => match index.get(&key.0) {
                    Some(&i) => Some(i),
                    None => {
                        index.insert(key.0.clone(), members.len());
                        None
                    }
                },
                None => members.iter().position(|(k, _)| *k == key.0),
            };
            match found {
                Some(i) => members[i].1 = value,
                None => members.push((key.0, value)),
            }
        }
        Ok(RawMap(members))
    }
}

/// A string (an object key, an operation's name, a table), borrowed when it has no escapes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl RawJson<'_> {
    /// The owned `serde_json` value (for the rare fields whose parsers take one).
    pub(crate) fn to_json(&self) -> Json {
        match self {
            RawJson::Null => Json::Null,
            RawJson::Bool(b) => Json::Bool(*b),
            RawJson::Number(n) => Json::Number(n.clone()),
            RawJson::Str(s) => Json::String(s.to_string()),
            RawJson::Array(items) => Json::Array(items.iter().map(RawJson::to_json).collect()),
            RawJson::Object(members) => {
                Json::Object(members.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect())
            }
        }
    }

    /// Whether this is `null`.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, RawJson::Null)
    }

    /// Whether this is an array.
    pub(crate) fn is_array(&self) -> bool {
        matches!(self, RawJson::Array(_))
    }

    /// The JSON type name, for messages (as [`super::json::kind`]).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            RawJson::Null => "null",
            RawJson::Bool(_) => "a boolean",
            RawJson::Number(_) => "a number",
            RawJson::Str(_) => "a string",
            RawJson::Array(_) => "an array",
            RawJson::Object(_) => "an object",
        }
    }
}

impl fmt::Display for RawJson<'_> {
    /// The compact JSON text, as `serde_json::Value` prints it.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(&self.to_json(), f)
    }
}

/// A JSON scalar as a [`Scalar`] (as [`super::json::scalar`]).
pub(crate) fn scalar(json: &RawJson<'_>) -> Result<Scalar, String> {
    Ok(match json {
        RawJson::Null => Scalar::Null,
        RawJson::Bool(b) => Scalar::Bool(*b),
        RawJson::Number(n) => super::json::number(n)?,
        RawJson::Str(s) => Scalar::Text(s.as_ref().into()),
        RawJson::Array(_) => return Err("expected a scalar, found an array".into()),
        RawJson::Object(_) => return Err("expected a scalar, found an object".into()),
    })
}

/// A key or id: an integer or a string (as [`super::json::key`]).
pub(crate) fn key(json: &RawJson<'_>) -> Result<Scalar, String> {
    match json {
        RawJson::Number(_) | RawJson::Str(_) => match scalar(json)? {
            Scalar::Float(_) => Err("expected an integer or a string, found a float".into()),
            s => Ok(s),
        },
        other => Err(format!("expected an integer or a string, found {}", other.kind())),
    }
}

/// Interns the value of an object of `table` (as [`super::json::value`]).
pub(crate) fn value(h: &mut History, table: TableId, json: &RawJson<'_>) -> Result<ValueId, String> {
    match json {
        RawJson::Null => Ok(ValueId::ABSENT),
        RawJson::Array(items) => {
            let items = items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?;
            Ok(h.intern_value(Value::List(items.into_boxed_slice())))
        }
        RawJson::Object(members) => {
            if h.table(table).is_kv() {
                return Err("table kv holds scalars, found an object (name another table for rows)".into());
            }
            let mut cols = Vec::with_capacity(members.len());
            for (name, v) in members {
                let s = scalar(v).map_err(|e| format!("column {name}: {e}"))?;
                cols.push((h.intern_column(table, name), s));
            }
            Ok(h.intern_row(&cols))
        }
        other => {
            if !h.table(table).is_kv() {
                return Err(format!(
                    "a row of table {} must be an object of columns, found {}",
                    h.table(table).name,
                    other.kind()
                ));
            }
            Ok(h.intern_value(Value::Scalar(scalar(other)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every JSON text reads to the tree `serde_json::Value` reads, member order and
    /// repeated keys included.
    #[test]
    fn same_tree_as_serde_json_value() {
        for text in [
            r#"{"a":1,"b":[true,null,"x\"y"],"c":{"z":1.5,"a":-3}}"#,
            r#"{"k":1,"j":2,"k":3}"#,
            &wide_object_with_repeats(),
            r#"[18446744073709551615, -9223372036854775808, 1e300, "\u00e9"]"#,
            r#""plain""#,
        ] {
            let raw: RawJson = serde_json::from_str(text).unwrap();
            let owned: Json = serde_json::from_str(text).unwrap();
            assert_eq!(raw.to_json(), owned, "{text}");
            assert_eq!(raw.to_string(), owned.to_string(), "{text}");
        }
    }

    /// An object past the linear-search size, with repeated keys on both sides of it.
    fn wide_object_with_repeats() -> String {
        let members: Vec<String> = (0..40).map(|i| format!("\"c{}\":{i}", i % 23)).collect();
        format!("{{{}}}", members.join(","))
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let raw: RawJson = serde_json::from_str(r#"{"plain":"abc","esc":"a\nb"}"#).unwrap();
        let RawJson::Object(m) = raw else { panic!("not an object") };
        assert!(matches!(m[0].0, Cow::Borrowed(_)) && matches!(m[0].1, RawJson::Str(Cow::Borrowed(_))));
        assert!(matches!(m[1].1, RawJson::Str(Cow::Owned(_))));
    }
}
