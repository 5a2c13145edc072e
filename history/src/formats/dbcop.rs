//! dbcop's JSON histories: sessions of transactions of `Read`/`Write` events.
//!
//! Accepted shapes: the bare array of sessions (dbcop's WASM API) or the CLI's standalone
//! document `{"params":{...},"info":..,"start":..,"end":..,"data":[sessions]}`; events either
//! tagged (`{"Write":{"variable":0,"version":1}}`) or compact (`["w",0,1]`). A read of
//! `"version": null` saw the uninitialised variable; a read of version 0 with no write of 0
//! saw the initial state, which becomes the header's initial value 0 for that key.

use std::io::{Read, Write};

use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::kvutil::{self, IntOp};
use super::Imported;
use crate::model::KV_TABLE;
use crate::{FormatError, History, Op, Scalar, Status, Transaction, Value, ValueId};

const FORMAT: &str = "dbcop";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Standalone {
    #[serde(default)]
    #[allow(dead_code)]
    params: Option<Json>,
    #[serde(default)]
    #[allow(dead_code)]
    info: Option<Json>,
    #[serde(default)]
    #[allow(dead_code)]
    start: Option<Json>,
    #[serde(default)]
    #[allow(dead_code)]
    end: Option<Json>,
    data: Vec<Vec<RawTxn>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTxn {
    events: Vec<RawEvent>,
    #[serde(alias = "success")]
    committed: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEvent {
    Tagged(TaggedEvent),
    Compact(String, Json, Option<Json>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
enum TaggedEvent {
    Read { variable: Json, version: Option<Json> },
    Write { variable: Json, version: Json },
}

/// One dbcop event, resolved: `version: None` is a read of the uninitialised variable.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DbcopEvent {
    pub(crate) write: bool,
    pub(crate) variable: Scalar,
    pub(crate) version: Option<i64>,
}

/// One dbcop transaction: its events and whether it committed.
pub(crate) type DbcopTxn = (Vec<DbcopEvent>, bool);

/// Reads a dbcop JSON history.
///
/// # Errors
/// A [`FormatError`] naming the line (for JSON errors) or the session, transaction and event.
pub fn read_dbcop_json<R: Read>(mut input: R) -> Result<Imported, FormatError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    let text = FormatError::utf8_text(bytes)?;
    let syntax = |e: serde_json::Error| FormatError::Syntax {
        line: e.line(),
        message: crate::error::json_message(&e),
    };
    let sessions: Vec<Vec<RawTxn>> = if text.trim_start().starts_with('{') {
        serde_json::from_str::<Standalone>(&text).map_err(syntax)?.data
    } else {
        serde_json::from_str(&text).map_err(syntax)?
    };
    let mut resolved = Vec::with_capacity(sessions.len());
    for (s, session) in sessions.into_iter().enumerate() {
        let mut txns = Vec::with_capacity(session.len());
        for (t, txn) in session.into_iter().enumerate() {
            let mut events = Vec::with_capacity(txn.events.len());
            for (e, event) in txn.events.into_iter().enumerate() {
                let event = resolve(event)
                    .map_err(|m| FormatError::invalid(0, format!("data[{s}][{t}].events[{e}]"), m))?;
                events.push(event);
            }
            txns.push((events, txn.committed));
        }
        resolved.push(txns);
    }
    Ok(Imported::plain(build(resolved)))
}

fn resolve(event: RawEvent) -> Result<DbcopEvent, String> {
    let (write, variable, version) = match event {
        RawEvent::Tagged(TaggedEvent::Read { variable, version }) => (false, variable, version),
        RawEvent::Tagged(TaggedEvent::Write { variable, version }) => (true, variable, Some(version)),
        RawEvent::Compact(tag, variable, version) => match tag.as_str() {
            "r" => (false, variable, version),
            "w" => (true, variable, version),
            other => return Err(format!("unknown event tag {other:?} (r, w)")),
        },
    };
    let variable = match variable {
        Json::Number(n) => {
            Scalar::Int(n.as_i64().ok_or_else(|| format!("variable {n} is not a 64-bit integer"))?)
        }
        Json::String(s) => Scalar::Text(s.into()),
        other => return Err(format!("variable: expected an integer or a string, found {other}")),
    };
    let version = match version {
        None | Some(Json::Null) if !write => None,
        None | Some(Json::Null) => return Err("version: a write needs a version".into()),
        Some(Json::Number(n)) => {
            Some(n.as_i64().ok_or_else(|| format!("version {n} is not a 64-bit integer"))?)
        }
        Some(other) => return Err(format!("version: expected an integer, found {other}")),
    };
    Ok(DbcopEvent { write, variable, version })
}

/// Builds the history from resolved sessions: sessions named 1.., transactions named 1.. in
/// session order, version 0 read but never written becomes the initial value 0.
pub(crate) fn build(sessions: Vec<Vec<DbcopTxn>>) -> History {
    let mut h = History::new();
    let kv = h.intern_table(KV_TABLE);
    let mut written_zero = rustc_hash::FxHashSet::default();
    let mut read_zero = rustc_hash::FxHashSet::default();
    for e in sessions.iter().flatten().flat_map(|(events, _)| events) {
        if e.version == Some(0) {
            if e.write {
                written_zero.insert(e.variable.clone())
            } else {
                read_zero.insert(e.variable.clone())
            };
        }
    }
    let zero = h.intern_value(Value::Scalar(Scalar::Int(0)));
    let mut initial_keys: Vec<Scalar> = read_zero.difference(&written_zero).cloned().collect();
    initial_keys.sort();
    for key in &initial_keys {
        let obj = h.intern_object(kv, key.clone());
        h.initial.push((obj, zero));
    }
    let mut name = 0i64;
    for (s, session) in sessions.into_iter().enumerate() {
        let sid = h.intern_session(Scalar::Int(s as i64 + 1));
        for (events, committed) in session {
            name += 1;
            let mut ops = Vec::with_capacity(events.len());
            for e in events {
                let obj = h.intern_object(kv, e.variable.clone());
                let value = match e.version {
                    Some(v) => h.intern_value(Value::Scalar(Scalar::Int(v))),
                    None if initial_keys.binary_search(&e.variable).is_ok() => zero,
                    None => ValueId::ABSENT,
                };
                ops.push(if e.write { Op::Write { obj, value } } else { Op::Read { obj, value } });
            }
            let mut t = Transaction::new(Scalar::Int(name), sid, ops);
            if !committed {
                t.status = Status::Aborted;
            }
            h.push_txn(t).expect("dbcop transaction names are fresh");
        }
    }
    h
}

/// The history as dbcop sessions of (events, committed), for the dbcop writers.
pub(crate) fn to_sessions(h: &History, format: &'static str) -> Result<Vec<Vec<DbcopTxn>>, FormatError> {
    kvutil::check_initial_zero(h, format)?;
    let mut out = Vec::new();
    for session in kvutil::sessions(h) {
        let mut txns = Vec::with_capacity(session.len());
        for id in session {
            let t = h.txn(id);
            if t.status == Status::Unknown {
                return Err(kvutil::unsupported(format, format!("{}: status unknown", h.txn_label(id))));
            }
            let mut events = Vec::with_capacity(t.ops.len());
            for (i, op) in t.ops.iter().enumerate() {
                let at = kvutil::at_op(h, id, i);
                let (write, obj, value) = match op {
                    Op::Read { obj, value } => (false, *obj, *value),
                    Op::Write { obj, value } if *value != ValueId::ABSENT => (true, *obj, *value),
                    _ => {
                        return Err(kvutil::unsupported(format, format!("{at}: only item reads and writes")))
                    }
                };
                let o = h.object(obj);
                if &*h.table(o.table).name != KV_TABLE
                    || matches!(o.key, Scalar::Null | Scalar::Bool(_) | Scalar::Float(_))
                {
                    return Err(kvutil::unsupported(
                        format,
                        format!("{at}: only kv objects with integer or text keys"),
                    ));
                }
                let version = if value == ValueId::ABSENT {
                    None
                } else {
                    Some(kvutil::int_value(h, value, format, &at)?)
                };
                events.push(DbcopEvent { write, variable: o.key.clone(), version });
            }
            txns.push((events, t.is_committed()));
        }
        out.push(txns);
    }
    Ok(out)
}

/// Writes a history as a dbcop standalone JSON document.
///
/// # Errors
/// [`FormatError::Unsupported`] for anything but item reads and integer writes of the kv
/// table, deletes, unknown-status transactions and initial values other than 0.
pub fn write_dbcop_json<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    let sessions = to_sessions(h, FORMAT)?;
    let data: Vec<Json> = sessions
        .iter()
        .map(|s| {
            Json::Array(
                s.iter()
                    .map(|(events, committed)| {
                        let events: Vec<Json> = events
                            .iter()
                            .map(|e| {
                                let tag = if e.write { "Write" } else { "Read" };
                                json!({ tag: {"variable": e.variable.to_json(), "version": e.version} })
                            })
                            .collect();
                        json!({"events": events, "committed": committed})
                    })
                    .collect(),
            )
        })
        .collect();
    let n_event: usize = sessions.iter().flatten().map(|(e, _)| e.len()).sum();
    let doc = json!({
        "params": {"id": 0, "n_node": sessions.len(), "n_variable": h.object_count(),
                   "n_transaction": h.txns.len(), "n_event": n_event},
        "info": "written by isocert",
        "start": "1970-01-01T00:00:00+00:00",
        "end": "1970-01-01T00:00:00+00:00",
        "data": data,
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Integer events for the bincode writer (variables must be integers there).
pub(crate) fn int_event(e: &DbcopEvent, format: &'static str, at: &str) -> Result<IntOp, FormatError> {
    let Scalar::Int(key) = e.variable else {
        return Err(kvutil::unsupported(format, format!("{at}: variable {} is not an integer", e.variable)));
    };
    let value = e.version.unwrap_or(0);
    Ok(if e.write { IntOp::Write { key, value } } else { IntOp::Read { key, value } })
}
