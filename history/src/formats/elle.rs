//! Jepsen/Elle histories: EDN (`history.edn`) and elle-cli's JSON rendering.
//!
//! A history is a sequence of operation maps, one per line or inside one vector/array:
//! `{:type :invoke, :f :txn, :value [[:append 5 1] [:r 5 nil]], :process 0, :index 0}`
//! followed by its completion (`:ok`, `:fail`, `:info`). Micro-ops: `[:r k v]`, `[:w k v]`,
//! `[:append k v]`, and Elle's closed-predicate `[:insert k v]`, `[:delete k]`,
//! `[:rp pred {k v}]` with `:true`, `[:= v]` or `[:mod m r]` predicates.
//!
//! For list-append histories the reader also derives the version order by traceability
//! ([`list_append_certificate`](super::list_append_certificate)), so Emme can check a Jepsen
//! history with no database help; reads that disagree on a prefix are listed in the notes.
//!
//! Written histories carry isocert's transaction ids and text session names in the extra
//! keys `:isocert/txn` and `:isocert/session` (Elle ignores keys it does not know).

use std::io::{BufRead, BufReader, Read, Write};

use serde_json::Value as Json;

use super::closed_universe::closed_universe_certificate;
use super::edn::{Edn, EdnReader};
use super::elle_ops::{sql_to_predicate, ElleBuilder, SESSION_KEY, TXN_KEY};
use super::kvutil::{at_op, unsupported};
use super::traceability::list_append_certificate;
use super::Imported;
use crate::model::KV_TABLE;
use crate::{FormatError, History, Op, Scalar, Status, Value, ValueId};

/// Reads a Jepsen EDN history (one operation per line, or one vector of operations).
///
/// Operation maps are read as they complete, a line at a time (a map may span lines), so
/// memory holds the history, not the file; a history that is one vector is read whole.
///
/// # Errors
/// A [`FormatError`] naming the line and the field (`type`, `process`, `value[2]`, ...).
pub fn read_elle_edn<R: Read>(input: R) -> Result<Imported, FormatError> {
    /// A form still open after this many lines: read the rest of the file whole rather than
    /// re-parse an ever longer text.
    const MAX_FORM_LINES: usize = 1_000;
    let mut input = BufReader::new(input);
    let mut builder = ElleBuilder::new();
    let (mut line, mut pending) = (String::new(), String::new());
    let (mut line_no, mut pending_start, mut pending_lines) = (0, 0, 0);
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(|e| FormatError::reading_line(e, line_no + 1))? == 0 {
            break;
        }
        line_no += 1;
        if pending.is_empty() {
            let t = line.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            if t.is_empty() || t.starts_with(';') {
                continue;
            }
            if t.starts_with('[') || t.starts_with('(') {
                let mut rest = std::mem::take(&mut line);
                input.read_to_string(&mut rest).map_err(|e| FormatError::reading_line(e, line_no))?;
                return read_edn_forms(builder, &rest, line_no);
            }
            pending_start = line_no;
        }
        pending.push_str(&line);
        pending_lines += 1;
        let mut reader = EdnReader::new(&pending).starting_at_line(pending_start);
        let mut forms = Vec::new();
        let complete = loop {
            match reader.next_form() {
                Ok(Some(form)) => forms.push(form),
                Ok(None) => break true,
                Err(_) if reader.exhausted() => break false,
                Err(e) => return Err(e),
            }
        };
        if complete {
            for (l, form) in forms {
                push_form(&mut builder, l, form)?;
            }
            pending.clear();
            pending_lines = 0;
        } else if pending_lines >= MAX_FORM_LINES {
            input.read_to_string(&mut pending).map_err(|e| FormatError::reading_line(e, line_no))?;
            return read_edn_forms(builder, &pending, pending_start);
        }
    }
    if !pending.is_empty() {
        let mut reader = EdnReader::new(&pending).starting_at_line(pending_start);
        while reader.next_form()?.is_some() {}
    }
    finish(builder)
}

fn read_edn_forms(mut builder: ElleBuilder, text: &str, first_line: usize) -> Result<Imported, FormatError> {
    let mut reader = EdnReader::new(text).starting_at_line(first_line);
    while let Some((line, form)) = reader.next_form()? {
        push_form(&mut builder, line, form)?;
    }
    finish(builder)
}

/// An operation map, or a vector of them.
fn push_form(builder: &mut ElleBuilder, line: usize, form: Edn) -> Result<(), FormatError> {
    match form {
        Edn::Vector(ops) => ops.into_iter().try_for_each(|op| builder.push(line, op)),
        op => builder.push(line, op),
    }
}

/// Reads elle-cli's JSON rendering: one array of operation objects, or one object per line.
///
/// Files with one operation per line (with or without the enclosing `[`, `]` and commas) are
/// read line by line; anything else is parsed as one document.
///
/// # Errors
/// A [`FormatError`] naming the line (or, for a multi-line array, the element) and the field.
pub fn read_elle_json<R: BufRead>(mut input: R) -> Result<Imported, FormatError> {
    let mut builder = ElleBuilder::new();
    let mut line = String::new();
    let mut before = String::new();
    let mut line_no = 0;
    let mut offset = 0usize;
    let mut pushed = false;
    // One operation per line inside one array: `[` before the first, `]` after the last.
    let (mut opened, mut closed) = (false, false);
    loop {
        line.clear();
        let read = input.read_line(&mut line).map_err(|e| FormatError::reading_line(e, line_no + 1))?;
        if read == 0 {
            break;
        }
        line_no += 1;
        let mut t = line.trim();
        if closed && !t.is_empty() {
            return Err(FormatError::Syntax {
                line: line_no,
                message: format!("text after the end of the history's array (byte {offset})"),
            });
        }
        if !opened {
            if let Some(rest) = t.strip_prefix('[') {
                opened = true;
                t = rest.trim_start();
            }
        }
        if opened {
            if let Some(rest) =
                t.strip_suffix(']').filter(|r| r.trim_end().is_empty() || r.trim_end().ends_with('}'))
            {
                closed = true;
                t = rest.trim_end();
            }
        }
        let t = t.trim_end_matches(',').trim();
        offset += read;
        if t.is_empty() {
            if !pushed {
                before.push_str(&line);
            }
            continue;
        }
        if let Some(inexact) = crate::value::inexact_number_in_json(t.as_bytes()) {
            return Err(FormatError::invalid(line_no, inexact.field, inexact.message));
        }
        match serde_json::from_str::<Json>(t) {
            Ok(op @ Json::Object(_)) => {
                let op = json_to_edn(&op).map_err(|m| FormatError::invalid(line_no, "value", m))?;
                builder.push(line_no, op)?;
                pushed = true;
            }
            _ if !pushed => {
                before.push_str(&line);
                input.read_to_string(&mut before).map_err(|e| FormatError::reading_line(e, line_no + 1))?;
                return read_json_document(builder, &before);
            }
            Err(e) => return Err(FormatError::Syntax { line: line_no, message: e.to_string() }),
            Ok(other) => {
                return Err(FormatError::Syntax {
                    line: line_no,
                    message: format!(
                        "expected an operation object, found {}",
                        crate::quote_capped(&other.to_string())
                    ),
                })
            }
        }
    }
    if opened && !closed {
        return Err(FormatError::Syntax {
            line: line_no,
            message: format!(
                "the history is truncated: its array is not closed (no `]` before the end, byte {offset})"
            ),
        });
    }
    finish(builder)
}

fn read_json_document(mut builder: ElleBuilder, text: &str) -> Result<Imported, FormatError> {
    crate::value::refuse_inexact_numbers(text.as_bytes())?;
    let doc: Json = serde_json::from_str(text)
        .map_err(|e| FormatError::Syntax { line: e.line(), message: e.to_string() })?;
    let Json::Array(ops) = doc else {
        return Err(FormatError::invalid(1, "history", "expected an array of operations"));
    };
    for (i, op) in ops.iter().enumerate() {
        if !op.is_object() {
            return Err(FormatError::invalid(
                0,
                format!("[{i}]"),
                format!("expected an operation object, found {}", crate::quote_capped(&op.to_string())),
            ));
        }
        let op = json_to_edn(op).map_err(|m| FormatError::invalid(0, format!("[{i}]"), m))?;
        builder.push(0, op).map_err(|e| match e {
            FormatError::Invalid { field, message, .. } => {
                FormatError::invalid(0, format!("[{i}].{field}"), message)
            }
            other => other,
        })?;
    }
    finish(builder)
}

fn finish(builder: ElleBuilder) -> Result<Imported, FormatError> {
    let (history, notes) = builder.finish()?;
    let mut imported = Imported::plain(history);
    imported.notes = notes;
    let has_lists =
        imported.history.txns.iter().flat_map(|t| &t.ops).any(|op| matches!(op, Op::Append { .. }));
    if has_lists {
        let trace = list_append_certificate(&imported.history);
        for c in &trace.conflicts {
            imported.notes.push(format!("incompatible order: {}", c.explain(&imported.history)));
        }
        for r in &trace.duplicates {
            imported.notes.push(format!(
                "duplicate elements: {} (its operation {}) read a list with an element twice",
                imported.history.txn_label(r.txn),
                r.op + 1
            ));
        }
        if !trace.unordered.is_empty() {
            imported.notes.push(format!(
                "{} list object(s) have committed appends no read shows: their order is not guessed (each follows \
                 every version the reads show; no edge orders them against each other)",
                trace.unordered.len()
            ));
        }
        imported.certificate = Some(trace.certificate);
    } else if imported.history.txns.iter().flat_map(|t| &t.ops).any(|op| matches!(op, Op::Select { .. })) {
        match closed_universe_certificate(&imported.history) {
            Ok(certificate) => imported.certificate = Some(certificate),
            Err(why) => imported.notes.push(format!(
                "no closed-universe certificate: {why}; check it with the database's certificate"
            )),
        }
    }
    Ok(imported)
}

/// Jepsen's JSON as the EDN the builder reads; numbers through the v1 reader's rule, so an
/// integer beyond the 64-bit range is an error rather than a float that loses its value.
fn json_to_edn(j: &Json) -> Result<Edn, String> {
    Ok(match j {
        Json::Null => Edn::Nil,
        Json::Bool(b) => Edn::Bool(*b),
        Json::Number(_) => match crate::v1::json::scalar(j)? {
            crate::Scalar::Int(i) => Edn::Int(i),
            crate::Scalar::Float(f) => Edn::Float(f),
            other => return Err(format!("unexpected number {other:?}")),
        },
        Json::String(s) => Edn::Str(s.clone()),
        Json::Array(items) => Edn::Vector(items.iter().map(json_to_edn).collect::<Result<_, _>>()?),
        Json::Object(map) => Edn::Map(
            map.iter()
                .map(|(k, v)| Ok((Edn::Keyword(k.clone()), json_to_edn(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

fn edn_to_json(e: &Edn) -> Json {
    match e {
        Edn::Nil => Json::Null,
        Edn::Bool(b) => Json::Bool(*b),
        Edn::Int(i) => (*i).into(),
        Edn::Float(f) => serde_json::Number::from_f64(*f).map(Json::Number).unwrap_or(Json::Null),
        Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => Json::String(s.clone()),
        Edn::Vector(items) | Edn::Set(items) => Json::Array(items.iter().map(edn_to_json).collect()),
        Edn::Map(entries) => {
            if entries.iter().all(|(k, _)| matches!(k, Edn::Keyword(_))) {
                Json::Object(entries.iter().map(|(k, v)| (keyword_name(k), edn_to_json(v))).collect())
            } else {
                Json::Array(
                    entries.iter().map(|(k, v)| Json::Array(vec![edn_to_json(k), edn_to_json(v)])).collect(),
                )
            }
        }
        Edn::Tagged(_, form) => edn_to_json(form),
    }
}

fn keyword_name(k: &Edn) -> String {
    match k {
        Edn::Keyword(s) => s.clone(),
        _ => String::new(),
    }
}

/// Writes a history as Jepsen EDN, one operation per line (an invocation and a completion per
/// transaction).
///
/// # Errors
/// [`FormatError::Unsupported`] for SQL tables, rows, predicate updates/deletes, aggregates
/// and predicates other than `true`, `value = N`, `value % M = R`.
pub fn write_elle_edn<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    let mut line = String::new();
    for op in to_ops(h, "elle")? {
        line.clear();
        op.write_to(&mut line);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Writes a history as elle-cli JSON: an array with one operation object per line.
///
/// # Errors
/// As [`write_elle_edn`].
pub fn write_elle_json<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    let ops = to_ops(h, "elle-json")?;
    out.write_all(b"[")?;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n ")?;
        }
        serde_json::to_writer(&mut *out, &edn_to_json(op)).map_err(std::io::Error::from)?;
    }
    out.write_all(b"]\n")?;
    Ok(())
}

fn kw(s: &str) -> Edn {
    Edn::Keyword(s.into())
}

fn scalar_edn(s: &Scalar) -> Edn {
    match s {
        Scalar::Null => Edn::Nil,
        Scalar::Bool(b) => Edn::Bool(*b),
        Scalar::Int(i) => Edn::Int(*i),
        Scalar::Float(f) => Edn::Float(*f),
        Scalar::Text(t) => Edn::Str(t.to_string()),
    }
}

fn value_edn(h: &History, v: ValueId) -> Result<Edn, String> {
    Ok(match h.value(v) {
        Value::Absent => Edn::Nil,
        Value::Scalar(s) => scalar_edn(s),
        Value::List(items) => Edn::Vector(items.iter().map(scalar_edn).collect()),
        Value::Row(_) => return Err("SQL rows".into()),
    })
}

/// The micro-ops of a transaction: (as invoked, as completed).
fn micro_ops(
    h: &History,
    id: crate::TxnId,
    format: &'static str,
) -> Result<(Vec<Edn>, Vec<Edn>), FormatError> {
    let t = h.txn(id);
    let mut invoked = Vec::with_capacity(t.ops.len());
    let mut completed = Vec::with_capacity(t.ops.len());
    for (i, op) in t.ops.iter().enumerate() {
        let at = at_op(h, id, i);
        let fail = |m: String| unsupported(format, format!("{at}: {m}"));
        let key = |obj: crate::ObjId| -> Result<Edn, FormatError> {
            let o = h.object(obj);
            if &*h.table(o.table).name != KV_TABLE {
                return Err(fail(format!("table {} (Elle histories are key-value)", h.table(o.table).name)));
            }
            Ok(scalar_edn(&o.key))
        };
        let (inv, done) = match op {
            Op::Read { obj, value } => {
                let k = key(*obj)?;
                let v = value_edn(h, *value).map_err(fail)?;
                (Edn::Vector(vec![kw("r"), k.clone(), Edn::Nil]), Edn::Vector(vec![kw("r"), k, v]))
            }
            Op::Write { obj, value } if *value == ValueId::ABSENT => {
                let m = Edn::Vector(vec![kw("delete"), key(*obj)?]);
                (m.clone(), m)
            }
            Op::Write { obj, value } => {
                let k = key(*obj)?;
                let v = value_edn(h, *value).map_err(fail)?;
                let m = Edn::Vector(vec![kw("w"), k, v]);
                (m.clone(), m)
            }
            Op::Append { obj, element } => {
                let m = Edn::Vector(vec![kw("append"), key(*obj)?, scalar_edn(element)]);
                (m.clone(), m)
            }
            Op::Select { predicate, rows } => {
                let p = h.predicate(*predicate);
                if &*h.table(p.table).name != KV_TABLE {
                    return Err(fail("predicate reads of SQL tables".into()));
                }
                let pred = sql_to_predicate(&p.sql).ok_or_else(|| {
                    fail(format!(
                        "predicate {:?} is not a closed predicate (true, value = N, value % M = R)",
                        p.sql
                    ))
                })?;
                let mut result = Vec::with_capacity(rows.len());
                for r in rows {
                    result.push((key(r.obj)?, value_edn(h, r.value).map_err(fail)?));
                }
                (
                    Edn::Vector(vec![kw("rp"), pred.clone(), Edn::Nil]),
                    Edn::Vector(vec![kw("rp"), pred, Edn::Map(result)]),
                )
            }
            _ => return Err(fail("predicate updates, deletes and aggregates".into())),
        };
        invoked.push(inv);
        completed.push(done);
    }
    Ok((invoked, completed))
}

fn to_ops(h: &History, format: &'static str) -> Result<Vec<Edn>, FormatError> {
    let mut ops = Vec::with_capacity(2 * h.txns.len() + 2);
    let mut index = 0i64;
    let mut op = |kind: &str, process: i64, f: &str, value: Edn, extra: Vec<(Edn, Edn)>| {
        let mut m = vec![
            (kw("index"), Edn::Int(index)),
            (kw("type"), kw(kind)),
            (kw("process"), Edn::Int(process)),
            (kw("f"), kw(f)),
            (kw("value"), value),
        ];
        m.extend(extra);
        index += 1;
        Edn::Map(m)
    };
    if !h.initial.is_empty() {
        let mut init = Vec::with_capacity(h.initial.len());
        for &(obj, value) in &h.initial {
            let o = h.object(obj);
            if &*h.table(o.table).name != KV_TABLE {
                return Err(unsupported(format, "initial rows of SQL tables"));
            }
            init.push((scalar_edn(&o.key), value_edn(h, value).map_err(|m| unsupported(format, m))?));
        }
        ops.push(op("invoke", 0, "init", Edn::Map(init.clone()), Vec::new()));
        ops.push(op("ok", 0, "init", Edn::Map(init), Vec::new()));
    }
    for id in h.txn_ids() {
        let t = h.txn(id);
        let (process, session_extra) = match h.session_name(t.session) {
            Scalar::Int(p) => (*p, None),
            other => (t.session.index() as i64, Some(scalar_edn(other))),
        };
        let mut extra = vec![(kw(TXN_KEY), scalar_edn(&t.name))];
        if let Some(s) = session_extra {
            extra.push((kw(SESSION_KEY), s));
        }
        let (invoked, completed) = micro_ops(h, id, format)?;
        let kind = match t.status {
            Status::Committed => "ok",
            Status::Aborted => "fail",
            Status::Unknown => "info",
        };
        let done = if t.status == Status::Committed { completed } else { invoked.clone() };
        let time = |at: i64| -> Vec<(Edn, Edn)> {
            let mut e = extra.clone();
            if at != i64::MAX {
                e.push((kw("time"), Edn::Int(at)));
            }
            e
        };
        let (invoked_at, completed_at) =
            t.real_time().map_or((i64::MAX, i64::MAX), |rt| (rt.invoked_at, rt.completed_at));
        ops.push(op("invoke", process, "txn", Edn::Vector(invoked), time(invoked_at)));
        ops.push(op(kind, process, "txn", Edn::Vector(done), time(completed_at)));
    }
    Ok(ops)
}
