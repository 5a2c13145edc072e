//! Viper (ViperBench) session logs: a directory of `J<thread>.log` files, one committed
//! transaction per line: `{"value":[mops], "isInitial":bool, "isFinal":bool, ...}`.
//!
//! Micro-ops (ViperBench's `JSONMop1`):
//!
//! | mop | meaning | model |
//! |---|---|---|
//! | `["r", k, v, is_dead]` | read | item read of row `{id:k, val:v, dead:is_dead}` (`v` null/`"nil"`: absent) |
//! | `["w", k, v, succ]` | write | item write of `{id:k, val:v, dead:false}` (left out when `succ` is false) |
//! | `["i", k, v, read_v, is_dead, succ]` | insert | read of the old row, then (if `succ`) write of `{id:k, val:v, dead:false}` |
//! | `["d", k, v, read_v, is_dead, succ]` | delete | read of the old row, then (if `succ`) write of the tombstone `{id:k, val:v, dead:true}` |
//! | `["range", k1, k2, live, dead]` | range read | `SELECT` over `id >= k1 AND id <= k2` returning live and dead rows |
//!
//! Rows live in table `viper` (columns `id`, `val`, `dead`): Viper deletes write a tombstone
//! with a unique value, and a read or a range can return it, so tombstones are rows with
//! `dead = true`. The initial transaction (`"isInitial": true`) becomes the initial versions;
//! other transaction fields (Viper's client timestamps, `isFinal`) are kept in the
//! transaction's `meta` under `"viper"` so that writing the history back restores them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value as Json};

use super::kvutil;
use super::Imported;
use crate::{
    FormatError, History, ObjId, Op, ResultRow, Scalar, SessionId, TableId, Transaction, Value, ValueId,
};

const FORMAT: &str = "viper";
/// The table Viper rows live in.
const TABLE: &str = "viper";

/// Reads every `J*.log` file of a Viper log directory, one session per file.
///
/// # Errors
/// A [`FormatError::InFile`] naming the file, the line and the micro-op field.
pub fn read_viper_dir(dir: &Path) -> Result<Imported, FormatError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| FormatError::Io(e).in_file(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('J') && n.ends_with(".log"))
        })
        .collect();
    files.sort_by_key(|p| session_name(p));
    if files.is_empty() {
        return Err(FormatError::invalid(0, "directory", "no J*.log files").in_file(dir));
    }
    let mut r = ViperReader::new();
    for file in &files {
        let f = std::fs::File::open(file).map_err(|e| FormatError::Io(e).in_file(file))?;
        r.read_log(session_name(file), BufReader::new(f)).map_err(|e| e.in_file(file))?;
    }
    let mut h = r.h;
    let corrected = align_dead_flags(&mut h);
    let mut imported = Imported::plain(h);
    if r.failed_writes > 0 {
        imported.notes.push(format!("{} writes marked unsuccessful were left out", r.failed_writes));
    }
    if corrected > 0 {
        imported.notes.push(format!(
            "{corrected} item reads flagged a version's liveness differently from the write that installed it; \
             the writer's flag was kept (IsoVista's Viper logs put the transaction's success there)"
        ));
    }
    Ok(imported)
}

/// Gives every item read of a value some write installed the liveness that write gave it.
///
/// ViperBench logs `["r", k, v, is_dead]`, but IsoVista's Viper serializer puts the
/// transaction's success flag in that slot; values are unique per key, so the writer's flag
/// is the truth. Returns how many reads were corrected.
fn align_dead_flags(h: &mut History) -> usize {
    let dead_of = |h: &History, v: ValueId| match h.value(v) {
        Value::Row(row) => {
            Some((row.get(crate::ColId(1)).clone(), matches!(row.get(crate::ColId(2)), Scalar::Bool(true))))
        }
        _ => None,
    };
    let mut written: rustc_hash::FxHashMap<(ObjId, Scalar), bool> = rustc_hash::FxHashMap::default();
    for t in &h.txns {
        for op in &t.ops {
            if let Op::Write { obj, value } = op {
                if let Some((val, dead)) = dead_of(h, *value) {
                    written.insert((*obj, val), dead);
                }
            }
        }
    }
    for &(obj, value) in &h.initial {
        if let Some((val, dead)) = dead_of(h, value) {
            written.insert((obj, val), dead);
        }
    }
    let mut fixes = Vec::new();
    for (t, txn) in h.txns.iter().enumerate() {
        for (i, op) in txn.ops.iter().enumerate() {
            if let Op::Read { obj, value } = op {
                if let Some((val, dead)) = dead_of(h, *value) {
                    if let Some(&truth) = written.get(&(*obj, val.clone())) {
                        if truth != dead {
                            fixes.push((t, i, *obj, val, truth));
                        }
                    }
                }
            }
        }
    }
    for &(t, i, obj, ref val, dead) in &fixes {
        let key = h.object(obj).key.clone();
        let cols =
            [(crate::ColId(0), key), (crate::ColId(1), val.clone()), (crate::ColId(2), Scalar::Bool(dead))];
        let value = h.intern_row(&cols);
        h.txns[t].ops[i] = Op::Read { obj, value };
    }
    fixes.len()
}

fn session_name(path: &Path) -> Scalar {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match stem.strip_prefix('J').and_then(|d| d.parse::<i64>().ok()) {
        Some(n) => Scalar::Int(n),
        None => Scalar::Text(stem.into()),
    }
}

struct ViperReader {
    h: History,
    table: TableId,
    failed_writes: usize,
    counter: i64,
    /// Where the initial transaction was (session, line): a history has one.
    initial_at: Option<(Scalar, usize)>,
}

type MopError = (String, String);

impl ViperReader {
    fn new() -> Self {
        let mut h = History::new();
        let table = h.intern_table(TABLE);
        for c in ["id", "val", "dead"] {
            h.intern_column(table, c);
        }
        ViperReader { h, table, failed_writes: 0, counter: 0, initial_at: None }
    }

    fn read_log<R: BufRead>(&mut self, session: Scalar, input: R) -> Result<(), FormatError> {
        let mut sid: Option<SessionId> = None;
        for (i, line) in input.lines().enumerate() {
            let line_no = i + 1;
            let line = line.map_err(|e| FormatError::reading_line(e, line_no))?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(inexact) = crate::value::inexact_number_in_json(line.as_bytes()) {
                return Err(FormatError::invalid(line_no, inexact.field, inexact.message));
            }
            let json: Json = serde_json::from_str(&line)
                .map_err(|e| FormatError::Syntax { line: line_no, message: format!("{e}") })?;
            let Json::Object(mut map) = json else {
                return Err(FormatError::Syntax {
                    line: line_no,
                    message: "expected a JSON object (one transaction per line)".into(),
                });
            };
            let Some(Json::Array(mops)) = map.remove("value") else {
                return Err(FormatError::invalid(line_no, "value", "missing, or not an array of micro-ops"));
            };
            let initial = map.get("isInitial").and_then(Json::as_bool).unwrap_or(false);
            let mut ops = Vec::with_capacity(mops.len());
            for (m, mop) in mops.iter().enumerate() {
                self.mop(mop, &mut ops)
                    .map_err(|(f, msg)| FormatError::invalid(line_no, format!("value[{m}]{f}"), msg))?;
            }
            if initial {
                if let Some((first_session, first_line)) = &self.initial_at {
                    return Err(FormatError::invalid(
                        line_no,
                        "isInitial",
                        format!(
                            "a second initial transaction (the first is at line {first_line} of log {}); \
                             a history has one, and merging or dropping either would change what the reads saw",
                            first_session
                        ),
                    ));
                }
                self.initial_at = Some((session.clone(), line_no));
                for op in ops {
                    match op {
                        Op::Write { obj, value } => self.set_initial(obj, value),
                        Op::Select { rows, .. } => rows.iter().for_each(|r| self.set_initial(r.obj, r.value)),
                        _ => {}
                    }
                }
                continue;
            }
            let sid = *sid.get_or_insert_with(|| self.h.intern_session(session.clone()));
            self.counter += 1;
            let mut t = Transaction::new(Scalar::Int(self.counter), sid, ops);
            if !map.is_empty() {
                t.set_meta(Some(json!({ "viper": Json::Object(map) })));
            }
            self.h
                .push_txn(t)
                .map_err(|_| FormatError::invalid(line_no, "value", "duplicate transaction"))?;
        }
        Ok(())
    }

    fn set_initial(&mut self, obj: ObjId, value: ValueId) {
        self.h.initial.retain(|(o, _)| *o != obj);
        self.h.initial.push((obj, value));
    }

    fn row(&mut self, key: &Scalar, val: &Json, dead: bool) -> Result<ValueId, String> {
        let val = match val {
            Json::Null => return Ok(ValueId::ABSENT),
            Json::String(s) if s == "nil" => return Ok(ValueId::ABSENT),
            Json::Number(n) => {
                Scalar::Int(n.as_i64().ok_or_else(|| format!("value {n} is not a 64-bit integer"))?)
            }
            other => return Err(format!("value: expected an integer or null, found {other}")),
        };
        let cols =
            [(crate::ColId(0), key.clone()), (crate::ColId(1), val), (crate::ColId(2), Scalar::Bool(dead))];
        Ok(self.h.intern_row(&cols))
    }

    fn mop(&mut self, mop: &Json, ops: &mut Vec<Op>) -> Result<(), MopError> {
        let err = |f: &str, m: String| (f.to_string(), m);
        let Json::Array(parts) = mop else {
            return Err(err("", "a micro-op is an array".into()));
        };
        let f = parts
            .first()
            .and_then(Json::as_str)
            .ok_or_else(|| err("[0]", "expected the op name (r, w, i, d, range)".into()))?;
        let need = match f {
            "r" | "w" => 4,
            "i" | "d" => 6,
            "range" => 5,
            other => return Err(err("[0]", format!("unknown micro-op {other:?} (r, w, i, d, range)"))),
        };
        if parts.len() < need {
            return Err(err("", format!("{f:?} needs {need} elements, found {}", parts.len())));
        }
        let flag =
            |i: usize| parts[i].as_bool().ok_or_else(|| err(&format!("[{i}]"), "expected a boolean".into()));
        if f == "range" {
            let bound = |i: usize| match &parts[i] {
                Json::Null => Ok(None),
                Json::String(s) if s == "nil" => Ok(None),
                Json::Number(n) => {
                    n.as_i64().map(Some).ok_or_else(|| err(&format!("[{i}]"), "not a 64-bit integer".into()))
                }
                other => {
                    Err(err(&format!("[{i}]"), format!("expected a key bound or \"nil\", found {other}")))
                }
            };
            let sql = match (bound(1)?, bound(2)?) {
                (None, None) => "true".to_string(),
                (Some(a), None) => format!("id >= {a}"),
                (None, Some(b)) => format!("id <= {b}"),
                (Some(a), Some(b)) => format!("id >= {a} AND id <= {b}"),
            };
            let predicate = self.h.intern_predicate(self.table, &sql);
            let mut rows = Vec::new();
            for (slot, dead) in [(3, false), (4, true)] {
                let Json::Array(records) = &parts[slot] else {
                    return Err(err(&format!("[{slot}]"), "expected an array of {id, val} records".into()));
                };
                for (r, rec) in records.iter().enumerate() {
                    let field = format!("[{slot}][{r}]");
                    let id = rec.get("id").ok_or_else(|| err(&field, "missing id".into()))?;
                    let key = key(id).map_err(|m| err(&field, m))?;
                    let val = rec.get("val").ok_or_else(|| err(&field, "missing val".into()))?;
                    let obj = self.h.intern_object(self.table, key.clone());
                    let value = self.row(&key, val, dead).map_err(|m| err(&field, m))?;
                    rows.push(ResultRow { obj, value });
                }
            }
            ops.push(Op::Select { predicate, rows: rows.into() });
            return Ok(());
        }
        let k = key(&parts[1]).map_err(|m| err("[1]", m))?;
        let obj = self.h.intern_object(self.table, k.clone());
        match f {
            "r" => {
                let value = self.row(&k, &parts[2], flag(3)?).map_err(|m| err("[2]", m))?;
                ops.push(Op::Read { obj, value });
            }
            "w" => {
                if flag(3)? {
                    let value = self.row(&k, &parts[2], false).map_err(|m| err("[2]", m))?;
                    ops.push(Op::Write { obj, value });
                } else {
                    self.failed_writes += 1;
                }
            }
            _ => {
                let old = self.row(&k, &parts[3], flag(4)?).map_err(|m| err("[3]", m))?;
                ops.push(Op::Read { obj, value: old });
                if flag(5)? {
                    let value = self.row(&k, &parts[2], f == "d").map_err(|m| err("[2]", m))?;
                    ops.push(Op::Write { obj, value });
                }
            }
        }
        Ok(())
    }
}

fn key(j: &Json) -> Result<Scalar, String> {
    match j {
        Json::Number(n) => {
            n.as_i64().map(Scalar::Int).ok_or_else(|| format!("key {n} is not a 64-bit integer"))
        }
        Json::String(s) => Ok(Scalar::Text(s.as_str().into())),
        other => Err(format!("key: expected an integer or a string, found {other}")),
    }
}

/// The (key, val, dead) of a Viper row value, or why it is not one.
fn row_parts(h: &History, obj: ObjId, value: ValueId, at: &str) -> Result<(Json, Json, bool), FormatError> {
    let o = h.object(obj);
    if &*h.table(o.table).name != TABLE {
        return Err(kvutil::unsupported(
            FORMAT,
            format!("{at}: table {} (Viper rows live in table viper)", h.table(o.table).name),
        ));
    }
    let key = o.key.to_json();
    match h.value(value) {
        Value::Absent => Ok((key, Json::Null, false)),
        Value::Row(row) => {
            let val = match row.get(crate::ColId(1)) {
                Scalar::Int(v) => json!(v),
                other => {
                    return Err(kvutil::unsupported(FORMAT, format!("{at}: val {other} is not an integer")))
                }
            };
            let dead = matches!(row.get(crate::ColId(2)), Scalar::Bool(true));
            if row.columns().len() > 3 {
                return Err(kvutil::unsupported(FORMAT, format!("{at}: rows have only id, val and dead")));
            }
            Ok((key, val, dead))
        }
        _ => Err(kvutil::unsupported(FORMAT, format!("{at}: not a row"))),
    }
}

/// The `id >= a AND id <= b` bounds of a range predicate isocert writes, as JSON (`"nil"`: open).
fn range_bounds(sql: &str) -> Option<(Json, Json)> {
    let num = |s: &str| s.trim().parse::<i64>().ok().map(Json::from);
    let nil = || Json::String("nil".into());
    if sql.trim() == "true" {
        return Some((nil(), nil()));
    }
    if let Some((a, b)) = sql.split_once(" AND ") {
        return Some((num(a.strip_prefix("id >= ")?)?, num(b.strip_prefix("id <= ")?)?));
    }
    if let Some(a) = sql.strip_prefix("id >= ") {
        return Some((num(a)?, nil()));
    }
    Some((nil(), num(sql.strip_prefix("id <= ")?)?))
}

fn txn_mops(h: &History, id: crate::TxnId) -> Result<Vec<Json>, FormatError> {
    let t = h.txn(id);
    let mut out = Vec::with_capacity(t.ops.len());
    let mut i = 0;
    while i < t.ops.len() {
        let at = kvutil::at_op(h, id, i);
        match &t.ops[i] {
            Op::Read { obj, value } => {
                let (k, v, dead) = row_parts(h, *obj, *value, &at)?;
                if let Some(Op::Write { obj: wobj, value: wval }) = t.ops.get(i + 1) {
                    let (_, wv, wdead) = row_parts(h, *wobj, *wval, &at)?;
                    if wobj == obj && wdead && *wval != ValueId::ABSENT {
                        out.push(json!(["d", k, wv, v, dead, true]));
                        i += 2;
                        continue;
                    }
                }
                out.push(json!(["r", k, v, dead]));
            }
            Op::Write { obj, value } => {
                let (k, v, dead) = row_parts(h, *obj, *value, &at)?;
                if dead || *value == ValueId::ABSENT {
                    return Err(kvutil::unsupported(
                        FORMAT,
                        format!("{at}: a delete not preceded by a read of the row"),
                    ));
                }
                out.push(json!(["w", k, v, true]));
            }
            Op::Select { predicate, rows } => {
                let p = h.predicate(*predicate);
                let (a, b) =
                    range_bounds(&p.sql).filter(|_| &*h.table(p.table).name == TABLE).ok_or_else(|| {
                        kvutil::unsupported(FORMAT, format!("{at}: predicate {:?} is not an id range", p.sql))
                    })?;
                let (mut live, mut dead) = (Vec::new(), Vec::new());
                for r in rows {
                    let (k, v, is_dead) = row_parts(h, r.obj, r.value, &at)?;
                    let rec = json!({"id": k, "sk": k, "val": v});
                    if is_dead {
                        dead.push(rec)
                    } else {
                        live.push(rec)
                    }
                }
                out.push(json!(["range", a, b, live, dead]));
            }
            _ => {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{at}: only reads, writes, deletes and id ranges"),
                ))
            }
        }
        i += 1;
    }
    Ok(out)
}

/// Writes a history as Viper session logs `J<session>.log` in `dir` (created if needed), with
/// the initial versions, if any, as an initial transaction in `Jinit.log`.
///
/// # Errors
/// [`FormatError::Unsupported`] for tables other than `viper`, non-integer values, predicates
/// other than id ranges, aborted or unknown transactions (Viper logs hold committed ones) and
/// tombstone writes not preceded by a read of the row.
pub fn write_viper_dir(h: &History, dir: &Path) -> Result<(), FormatError> {
    std::fs::create_dir_all(dir).map_err(|e| FormatError::Io(e).in_file(dir))?;
    let write = |name: String, text: String| -> Result<(), FormatError> {
        let path = dir.join(name);
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| FormatError::Io(e).in_file(&path))
    };
    if !h.initial.is_empty() {
        let mut mops = Vec::new();
        for &(obj, value) in &h.initial {
            let (k, v, _) = row_parts(h, obj, value, "initial")?;
            mops.push(json!(["w", k, v, true]));
        }
        write(
            "Jinit.log".into(),
            format!("{}\n", json!({"value": mops, "isInitial": true, "isFinal": false})),
        )?;
    }
    for (s, session) in kvutil::sessions(h).into_iter().enumerate() {
        let name = match h.session_name(SessionId::from_index(s)) {
            Scalar::Int(n) => format!("J{n}.log"),
            other => return Err(kvutil::unsupported(FORMAT, format!("session {other} is not an integer"))),
        };
        let mut text = String::new();
        for id in session {
            let t = h.txn(id);
            if !t.is_committed() {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{}: not committed (Viper logs hold committed transactions)", h.txn_label(id)),
                ));
            }
            let mut m = Map::new();
            if let Some(Json::Object(extra)) = t.meta().and_then(|m| m.get("viper")) {
                m.extend(extra.clone());
            }
            m.insert("value".into(), Json::Array(txn_mops(h, id)?));
            text.push_str(&Json::Object(m).to_string());
            text.push('\n');
        }
        write(name, text)?;
    }
    Ok(())
}
