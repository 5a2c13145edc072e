//! Streaming reader of v1 histories.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value as Json;

use super::json;
use super::raw::{self, RawJson, RawMap, Text};
use crate::model::KV_TABLE;
use crate::{
    AggregateFn, Assign, FormatError, History, Op, RealTime, ResultRow, Status, Timestamp, Transaction,
    TxnId, UnknownName, ValueId,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    format: String,
    version: u32,
    #[serde(default)]
    initial: Vec<RawInitial>,
    #[serde(default)]
    dialect: Option<String>,
    #[serde(default)]
    meta: Option<Json>,
    #[serde(default)]
    serial_order: Option<String>,
    #[serde(default)]
    isolation: Option<String>,
    promises: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInitial {
    #[serde(default)]
    table: Option<String>,
    key: Json,
    value: Json,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTxn<'a> {
    #[serde(borrow)]
    id: RawJson<'a>,
    #[serde(borrow)]
    session: RawJson<'a>,
    #[serde(default, borrow)]
    status: Option<Text<'a>>,
    #[serde(borrow)]
    ops: Vec<RawOp<'a>>,
    #[serde(default, borrow)]
    start_ts: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    commit_ts: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    invoked_at: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    completed_at: Option<RawJson<'a>>,
    #[serde(default)]
    meta: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp<'a> {
    #[serde(borrow)]
    f: Text<'a>,
    #[serde(default, borrow)]
    table: Option<Text<'a>>,
    #[serde(default, borrow)]
    key: Option<RawJson<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    value: Option<RawJson<'a>>,
    #[serde(default, borrow, rename = "where")]
    predicate: Option<Text<'a>>,
    #[serde(default, borrow)]
    set: Option<RawMap<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    excluded: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    rows: Option<Vec<RawRow<'a>>>,
    #[serde(default, borrow)]
    function: Option<Text<'a>>,
    #[serde(default, borrow)]
    column: Option<Text<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<RawJson<'a>>,
    #[serde(default)]
    meta: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRow<'a> {
    #[serde(borrow)]
    key: RawJson<'a>,
    #[serde(default, borrow, deserialize_with = "present")]
    value: Option<RawJson<'a>>,
}

/// Deserializes a field that may hold `null`, telling `null` (Some(Null)) from missing (None).
fn present<'de: 'a, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RawJson<'a>>, D::Error> {
    RawJson::deserialize(d).map(Some)
}

/// Reads a v1 history one transaction at a time, interning as it goes.
///
/// The reader owns the [`History`] it builds; [`HistoryReader::next_txn`] appends one
/// transaction and returns its id, so online checkers see transactions as they arrive.
#[derive(Debug)]
pub struct HistoryReader<R> {
    input: R,
    history: History,
    line: usize,
    buf: String,
    seen_content: bool,
}

impl<R: BufRead> HistoryReader<R> {
    /// A reader over `input` (a file, standard input, a socket).
    pub fn new(input: R) -> Self {
        HistoryReader { input, history: History::new(), line: 0, buf: String::new(), seen_content: false }
    }

    /// The history read so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The history read so far, for callers that add to it (tests, importers).
    pub fn history_mut(&mut self) -> &mut History {
        &mut self.history
    }

    /// The number of the last line read (1-based).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Finishes reading and returns the history.
    pub fn into_history(self) -> History {
        self.history
    }

    /// Reads the next transaction, skipping blank lines and the header.
    ///
    /// # Errors
    /// A [`FormatError`] naming the line and field of malformed input.
    pub fn next_txn(&mut self) -> Result<Option<TxnId>, FormatError> {
        loop {
            self.buf.clear();
            if self.input.read_line(&mut self.buf).map_err(|e| FormatError::reading_line(e, self.line + 1))?
                == 0
            {
                return Ok(None);
            }
            self.line += 1;
            let text = self.buf.trim();
            if text.is_empty() {
                continue;
            }
            if !text.starts_with('{') {
                return Err(FormatError::Syntax {
                    line: self.line,
                    message: "expected a JSON object (one transaction per line)".into(),
                });
            }
            if let Some(inexact) = crate::value::inexact_number_in_json(text.as_bytes()) {
                return Err(FormatError::invalid(self.line, inexact.field, inexact.message));
            }
            let first = !self.seen_content;
            self.seen_content = true;
            if first && looks_like_header(text) {
                let raw: RawHeader = serde_json::from_str(text).map_err(|e| syntax(self.line, &e))?;
                let line = self.line;
                apply_header(&mut self.history, raw, line)?;
                continue;
            }
            let raw: RawTxn = serde_json::from_str(text).map_err(|e| {
                if looks_like_header(text) {
                    FormatError::invalid(self.line, "format", HEADER_NOT_FIRST)
                } else {
                    syntax(self.line, &e)
                }
            })?;
            let line = self.line;
            return convert_txn(&mut self.history, raw, line).map(Some);
        }
    }
}

/// Reads a whole v1 history.
///
/// # Errors
/// A [`FormatError`] naming the line and field of the first malformed line.
pub fn read_history<R: BufRead>(input: R) -> Result<History, FormatError> {
    let mut reader = HistoryReader::new(input);
    while reader.next_txn()?.is_some() {}
    Ok(reader.into_history())
}

/// What [`read_history_bytes`] does with adapter facts (`meta` on transactions and
/// operations): recovery reads them, checkers ignore them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterFacts {
    /// Keep them: a history that has any is read by the general reader.
    Keep,
    /// Leave them out when that lets the fast reader read the history (for checking).
    Skip,
}

/// Reads a whole v1 history held in memory, through the fast key-value reader
/// (the parser of [`crate::read_kv_v1_bytes`], each transaction converted as it is parsed)
/// when the history has only item reads, writes and appends
/// of table `kv`, else through the general reader ([`read_history`]).
///
/// The result is the general reader's: the same transactions and the same interned ids
/// (tables, objects, values, sessions), and for input either reader refuses, the general
/// reader's error naming the line and field. With [`AdapterFacts::Skip`], `meta` fields
/// are left out of an item-only history instead of sending it to the general reader.
///
/// # Errors
/// A [`FormatError`] naming the line and field of the first malformed line.
pub fn read_history_bytes(bytes: &[u8], facts: AdapterFacts) -> Result<History, FormatError> {
    // The reading window sized to the input, up to the usual 4 MB, as `read_kv_v1_bytes`.
    let window = (bytes.len() + 1).next_power_of_two().clamp(1 << 12, 1 << 22);
    match crate::kv::read_history_through(bytes, window) {
        Ok((history, skipped_meta)) if facts == AdapterFacts::Skip || !skipped_meta => Ok(history),
        _ => read_history(bytes),
    }
}

/// As [`read_history_bytes`], taking the bytes (a pipe's input, read whole because the
/// general reader may need it a second time; [`crate::open`] streams a file instead).
///
/// # Errors
/// As [`read_history_bytes`].
pub fn read_history_vec(bytes: Vec<u8>, facts: AdapterFacts) -> Result<History, FormatError> {
    let window = (bytes.len() + 1).next_power_of_two().clamp(1 << 12, 1 << 22);
    match crate::kv::read_history_through(bytes.as_slice(), window) {
        Ok((history, skipped_meta)) if facts == AdapterFacts::Skip || !skipped_meta => Ok(history),
        _ => read_history(bytes.as_slice()),
    }
}

/// The error for a header (a line with `format`) after the first line: read as a
/// transaction, it said "unknown field `format`".
pub(crate) const HEADER_NOT_FIRST: &str =
    "a header line (one with `format`) may only be the first line of the file; this line comes after it";

fn looks_like_header(text: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, Json>>(text).is_ok_and(|m| m.contains_key("format"))
}

fn syntax(line: usize, e: &serde_json::Error) -> FormatError {
    // serde_json appends " at line 1 column N"; the line of a JSON Lines file is ours.
    FormatError::Syntax { line, message: crate::error::json_message(e) }
}

fn apply_header(h: &mut History, raw: RawHeader, line: usize) -> Result<(), FormatError> {
    if raw.format != "isocert-history" {
        return Err(FormatError::invalid(
            line,
            "format",
            format!("expected \"isocert-history\", found {:?}", raw.format),
        ));
    }
    if raw.version != 1 {
        return Err(FormatError::invalid(
            line,
            "version",
            format!("this isocert reads version 1, found {}", raw.version),
        ));
    }
    h.meta = raw.meta.filter(|m| !m.is_null()).map(Box::new);
    if let Some(d) = raw.dialect {
        h.dialect =
            d.parse().map_err(|e: UnknownName| FormatError::invalid(line, "dialect", e.to_string()))?;
    }
    if let Some(o) = raw.serial_order {
        h.serial_order =
            o.parse().map_err(|e: UnknownName| FormatError::invalid(line, "serial_order", e.to_string()))?;
    }
    if let Some(level) = raw.isolation {
        h.isolation = Some(
            level.parse().map_err(|e: UnknownName| FormatError::invalid(line, "isolation", e.to_string()))?,
        );
    }
    if let Some(p) = raw.promises.filter(|p| !p.is_null()) {
        h.promises = Some(header_promises(&p).map_err(|(field, m)| FormatError::invalid(line, field, m))?);
    }
    // A set of the objects listed so far keeps the duplicate check linear (issue 28: a
    // header of 100,000 initial values took 8.8 s scanning the list).
    let mut listed: rustc_hash::FxHashSet<crate::ObjId> = h.initial.iter().map(|&(o, _)| o).collect();
    for (i, init) in raw.initial.into_iter().enumerate() {
        let field = |f: &str| format!("initial[{i}].{f}");
        let table = h.intern_table(init.table.as_deref().unwrap_or(KV_TABLE));
        let key = json::key(&init.key).map_err(|m| FormatError::invalid(line, field("key"), m))?;
        let obj = h.intern_object(table, key);
        let value =
            json::value(h, table, &init.value).map_err(|m| FormatError::invalid(line, field("value"), m))?;
        if !listed.insert(obj) {
            return Err(FormatError::invalid(line, field("key"), "object listed twice in initial"));
        }
        h.initial.push((obj, value));
    }
    Ok(())
}

/// Parses the header's `promises`: `{"database": NAME, "statements": [PROMISE, ...]}`.
pub(crate) fn header_promises(json: &Json) -> Result<crate::Promises, (String, String)> {
    let Json::Object(map) = json else {
        return Err(("promises".into(), format!("expected an object, found {}", json::kind(json))));
    };
    if let Some(extra) = map.keys().find(|k| *k != "database" && *k != "statements") {
        return Err((format!("promises.{extra}"), "unknown field (expected database and statements)".into()));
    }
    let database = match map.get("database") {
        Some(Json::String(s)) if !s.trim().is_empty() => s.as_str().into(),
        Some(other) => return Err(("promises.database".into(), format!("expected a name, found {other}"))),
        None => return Err(("promises.database".into(), "missing".into())),
    };
    let Some(Json::Array(list)) = map.get("statements") else {
        return Err(("promises.statements".into(), "expected an array of promise names".into()));
    };
    let mut statements = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let field = format!("promises.statements[{i}]");
        let Json::String(name) = item else { return Err((field, format!("expected a name, found {item}"))) };
        let promise: crate::StatementPromise =
            name.parse().map_err(|e: UnknownName| (field.clone(), e.to_string()))?;
        if statements.contains(&promise) {
            return Err((field, format!("{promise} is listed twice")));
        }
        statements.push(promise);
    }
    statements.sort_unstable();
    Ok(crate::Promises { database, statements })
}

/// Parses a timestamp field: integer, `"WALL.LOGICAL"` string or `{"p":..,"l":..}`.
pub(crate) fn timestamp(json: &Json) -> Result<Timestamp, String> {
    match json {
        Json::Number(n) => n
            .as_u64()
            .map(Timestamp::new)
            .ok_or_else(|| format!("timestamp {n} is not a non-negative integer")),
        Json::String(s) => Timestamp::parse_str(s),
        Json::Object(map) => {
            let part = |name: &str| -> Result<u64, String> {
                match map.get(name) {
                    Some(Json::Number(n)) => {
                        n.as_u64().ok_or_else(|| format!("{name}: {n} is not a non-negative integer"))
                    }
                    Some(Json::String(s)) => {
                        s.parse().map_err(|_| format!("{name}: {s:?} is not a non-negative integer"))
                    }
                    Some(other) => Err(format!("{name}: expected an integer, found {}", json::kind(other))),
                    None => Err(format!("missing {name:?}")),
                }
            };
            if let Some(extra) = map.keys().find(|k| *k != "p" && *k != "l") {
                return Err(format!("unknown field {extra:?} (expected p and l)"));
            }
            Ok(Timestamp::hlc(part("p")?, part("l")?))
        }
        other => Err(format!("expected a timestamp, found {}", json::kind(other))),
    }
}

fn convert_txn(h: &mut History, raw: RawTxn, line: usize) -> Result<TxnId, FormatError> {
    let bad = |field: String, message: String| FormatError::invalid(line, field, message);
    let name = raw::key(&raw.id).map_err(|m| bad("id".into(), m))?;
    let session = raw::key(&raw.session).map_err(|m| bad("session".into(), m))?;
    let session = h.intern_session(session);
    let status = match raw.status.as_ref().map(|t| t.0.as_ref()) {
        None | Some("committed") => Status::Committed,
        Some("aborted") => Status::Aborted,
        Some("unknown") => Status::Unknown,
        Some(other) => {
            return Err(bad(
                "status".into(),
                format!("expected committed, aborted or unknown, found {other:?}"),
            ))
        }
    };
    let mut ops = Vec::with_capacity(raw.ops.len());
    let mut op_meta = Vec::new();
    for (i, op) in raw.ops.into_iter().enumerate() {
        if let Some(meta) = op.meta.clone() {
            op_meta.push((i as u32, meta));
        }
        ops.push(convert_op(h, op).map_err(|(field, m)| bad(format!("ops[{i}].{field}"), m))?);
    }
    let ts = |j: Option<RawJson>, field: &str| -> Result<_, FormatError> {
        j.filter(|j| !j.is_null())
            .map(|j| timestamp(&j.to_json()))
            .transpose()
            .map_err(|m| bad(field.into(), m))
    };
    let mut txn = Transaction::new(name, session, ops);
    txn.status = status;
    txn.set_start_ts(ts(raw.start_ts, "start_ts")?);
    txn.set_commit_ts(ts(raw.commit_ts, "commit_ts")?);
    txn.set_meta(raw.meta);
    txn.set_op_metas(op_meta);
    txn.set_real_time(
        real_time(raw.invoked_at, raw.completed_at).map_err(|(field, m)| bad(field.into(), m))?,
    );
    h.push_txn(txn).map_err(|t| bad("id".into(), format!("transaction id {} appears twice", t.name)))
}

type OpError = (&'static str, String);

/// The project extension `invoked_at` / `completed_at`: both integers or both absent, and
/// the completion not before the invocation.
fn real_time(invoked: Option<RawJson>, completed: Option<RawJson>) -> Result<Option<RealTime>, OpError> {
    let int = |j: &RawJson, field: &'static str| {
        let n = match j {
            RawJson::Number(n) => n.as_i64(),
            _ => None,
        };
        n.ok_or_else(|| (field, format!("expected an integer (a time on the clients' clock), found {j}")))
    };
    match (invoked.filter(|j| !j.is_null()), completed.filter(|j| !j.is_null())) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(("completed_at", "missing: invoked_at needs completed_at".into())),
        (None, Some(_)) => Err(("invoked_at", "missing: completed_at needs invoked_at".into())),
        (Some(i), Some(c)) => {
            let (invoked_at, completed_at) = (int(&i, "invoked_at")?, int(&c, "completed_at")?);
            if completed_at < invoked_at {
                return Err((
                    "completed_at",
                    format!("{completed_at} is before invoked_at {invoked_at}: a transaction completes after it is invoked"),
                ));
            }
            Ok(Some(RealTime { invoked_at, completed_at }))
        }
    }
}

/// An update's `set`: per column a constant, or `{"expr": SQL}` (an expression over the
/// replaced row, which may name `excluded` when the op records the proposed row).
fn assignments(
    h: &mut History,
    table: crate::TableId,
    raw_set: &RawMap<'_>,
    excluded: Option<ValueId>,
) -> Result<Vec<(crate::ColId, Assign)>, OpError> {
    let mut set = Vec::with_capacity(raw_set.len());
    for (col, v) in &raw_set.0 {
        let assign = match v {
            RawJson::Object(members) => {
                let sql = match members.as_slice() {
                    [(k, RawJson::Str(sql))] if k == "expr" => sql,
                    [(k, other)] if k == "expr" => {
                        return Err(("set", format!("column {col}: expr must be SQL text, found {}", other.kind())))
                    }
                    _ => {
                        return Err((
                            "set",
                            format!("column {col}: an assignment is a scalar or {{\"expr\": SQL}}, found another object"),
                        ))
                    }
                };
                if sql.trim().is_empty() {
                    return Err(("set", format!("column {col}: empty expression")));
                }
                Assign::Expr(Box::new(crate::SetExpr { sql: sql.as_ref().into(), excluded }))
            }
            _ => Assign::Const(raw::scalar(v).map_err(|m| ("set", format!("column {col}: {m}")))?),
        };
        set.push((h.intern_column(table, col), assign));
    }
    Ok(set)
}

fn convert_op(h: &mut History, op: RawOp) -> Result<Op, OpError> {
    let table = h.intern_table(op.table.as_ref().map_or(KV_TABLE, |t| &t.0));
    let f: &str = &op.f.0;
    let forbid = |present: bool, field: &'static str| -> Result<(), OpError> {
        if present {
            Err((field, format!("not allowed on a {f:?} operation")))
        } else {
            Ok(())
        }
    };
    if f != "aggregate" {
        forbid(op.function.is_some(), "function")?;
        forbid(op.column.is_some(), "column")?;
        forbid(op.result.is_some(), "result")?;
    }
    match f {
        "aggregate" => {
            forbid(op.key.is_some(), "key")?;
            forbid(op.value.is_some(), "value")?;
            forbid(op.set.is_some(), "set")?;
            forbid(op.excluded.is_some(), "excluded")?;
            forbid(op.rows.is_some(), "rows")?;
            let sql = op.predicate.as_ref().map(|t| &*t.0).ok_or(("where", "missing".to_string()))?;
            if sql.trim().is_empty() {
                return Err(("where", "empty predicate".into()));
            }
            let predicate = h.intern_predicate(table, sql);
            let name = op.function.as_ref().map(|t| &*t.0).ok_or(("function", "missing".to_string()))?;
            let function = AggregateFn::parse(name)
                .ok_or(("function", format!("unknown aggregate {name:?} (min, max, count, sum)")))?;
            let column = match op.column.as_ref().map(|t| &*t.0) {
                None | Some("*") if function == AggregateFn::Count => None,
                None | Some("*") => return Err(("column", format!("{name} needs a column"))),
                Some(c) => Some(h.intern_column(table, c)),
            };
            let result = op.result.as_ref().ok_or(("result", "missing".to_string()))?;
            let result = raw::scalar(result).map_err(|m| ("result", m))?;
            Ok(Op::Aggregate { predicate, function, column, result })
        }
        "r" | "w" | "append" => {
            forbid(op.predicate.is_some(), "where")?;
            forbid(op.set.is_some(), "set")?;
            forbid(op.excluded.is_some(), "excluded")?;
            forbid(op.rows.is_some(), "rows")?;
            let key = op.key.as_ref().ok_or(("key", "missing".to_string()))?;
            let key = raw::key(key).map_err(|m| ("key", m))?;
            let obj = h.intern_object(table, key);
            let value = op.value.as_ref().ok_or(("value", "missing".to_string()))?;
            match f {
                "r" => Ok(Op::Read { obj, value: raw::value(h, table, value).map_err(|m| ("value", m))? }),
                "w" => {
                    if value.is_array() {
                        return Err((
                            "value",
                            "a write installs a scalar or a row, found an array (use append)".into(),
                        ));
                    }
                    Ok(Op::Write { obj, value: raw::value(h, table, value).map_err(|m| ("value", m))? })
                }
                _ => {
                    let element = raw::scalar(value).map_err(|m| ("value", m))?;
                    if element.is_null() {
                        return Err(("value", "cannot append null".into()));
                    }
                    Ok(Op::Append { obj, element })
                }
            }
        }
        "select" | "update" | "delete" => {
            forbid(op.key.is_some(), "key")?;
            forbid(op.value.is_some(), "value")?;
            let sql = op.predicate.as_ref().map(|t| &*t.0).ok_or(("where", "missing".to_string()))?;
            if sql.trim().is_empty() {
                return Err(("where", "empty predicate".into()));
            }
            let predicate = h.intern_predicate(table, sql);
            let raw_rows = op.rows.ok_or(("rows", "missing".to_string()))?;
            let mut rows = Vec::with_capacity(raw_rows.len());
            for r in &raw_rows {
                let key = raw::key(&r.key).map_err(|m| ("rows", m))?;
                let obj = h.intern_object(table, key);
                let value = match (f, &r.value) {
                    ("delete", None) => ValueId::ABSENT,
                    ("delete", Some(_)) => return Err(("rows", "a deleted row has only a key".into())),
                    (_, None) => return Err(("rows", "a row needs its value".into())),
                    (_, Some(v)) => {
                        let id = raw::value(h, table, v).map_err(|m| ("rows", m))?;
                        if id == ValueId::ABSENT {
                            return Err(("rows", "a returned row cannot be null".into()));
                        }
                        id
                    }
                };
                if rows.iter().any(|x: &ResultRow| x.obj == obj) {
                    return Err(("rows", format!("key {} appears twice", h.object(obj).key)));
                }
                rows.push(ResultRow { obj, value });
            }
            match f {
                "select" => {
                    forbid(op.set.is_some(), "set")?;
                    forbid(op.excluded.is_some(), "excluded")?;
                    Ok(Op::Select { predicate, rows: rows.into() })
                }
                "update" => {
                    let raw_set = op.set.ok_or(("set", "missing".to_string()))?;
                    let excluded = match &op.excluded {
                        None => None,
                        Some(v) => match raw::value(h, table, v).map_err(|m| ("excluded", m))? {
                            ValueId::ABSENT => {
                                return Err(("excluded", "the proposed row cannot be null".into()))
                            }
                            id => Some(id),
                        },
                    };
                    let set = assignments(h, table, &raw_set, excluded)?;
                    if excluded.is_some() && !set.iter().any(|(_, a)| matches!(a, Assign::Expr(_))) {
                        return Err((
                            "excluded",
                            "only an update with an expression assignment reads it".into(),
                        ));
                    }
                    Ok(Op::Update { predicate, set: set.into(), rows: rows.into() })
                }
                _ => {
                    forbid(op.set.is_some(), "set")?;
                    forbid(op.excluded.is_some(), "excluded")?;
                    Ok(Op::Delete { predicate, rows: rows.into() })
                }
            }
        }
        other => Err((
            "f",
            format!("unknown operation {other:?} (r, w, append, select, update, delete, aggregate)"),
        )),
    }
}
