//! Writer of v1 histories.

use std::io::Write;

use serde_json::{json, Map, Value as Json};

use super::json::value_to_json;
use crate::model::{Dialect, KV_TABLE};
use crate::{Assign, FormatError, History, Op, SerialOrder, TxnId};

/// Writes the header line when the history needs one (initial versions, a dialect, a
/// serial order other than commit order, the level to check, or header facts).
///
/// # Errors
/// I/O errors of `out`.
pub fn write_header<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    if h.initial.is_empty()
        && h.dialect == Dialect::Postgres
        && h.meta.is_none()
        && h.serial_order == SerialOrder::CommitTs
        && h.isolation.is_none()
        && h.promises.is_none()
    {
        return Ok(());
    }
    let mut header = Map::new();
    header.insert("format".into(), "isocert-history".into());
    header.insert("version".into(), 1.into());
    if h.dialect != Dialect::Postgres {
        header.insert("dialect".into(), h.dialect.as_str().into());
    }
    if h.serial_order != SerialOrder::CommitTs {
        header.insert("serial_order".into(), h.serial_order.as_str().into());
    }
    if let Some(level) = h.isolation {
        header.insert("isolation".into(), level.as_str().into());
    }
    if !h.initial.is_empty() {
        let initial: Vec<Json> = h
            .initial
            .iter()
            .map(|&(obj, value)| {
                let o = h.object(obj);
                let mut m = Map::new();
                let table = &h.table(o.table).name;
                if &**table != KV_TABLE {
                    m.insert("table".into(), table.to_string().into());
                }
                m.insert("key".into(), o.key.to_json());
                m.insert("value".into(), value_to_json(h, o.table, value));
                Json::Object(m)
            })
            .collect();
        header.insert("initial".into(), Json::Array(initial));
    }
    if let Some(meta) = &h.meta {
        header.insert("meta".into(), Json::clone(meta));
    }
    if let Some(p) = &h.promises {
        let statements: Vec<Json> = p.statements.iter().map(|s| s.as_str().into()).collect();
        header.insert("promises".into(), json!({"database": &*p.database, "statements": statements}));
    }
    serde_json::to_writer(&mut *out, &Json::Object(header)).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Writes one transaction as one line.
///
/// # Errors
/// I/O errors of `out`.
pub fn write_txn<W: Write>(h: &History, id: TxnId, out: &mut W) -> Result<(), FormatError> {
    let t = h.txn(id);
    let mut m = Map::new();
    m.insert("id".into(), t.name.to_json());
    m.insert("session".into(), h.session_name(t.session).to_json());
    if t.status != crate::Status::Committed {
        m.insert("status".into(), t.status.as_str().into());
    }
    if let Some(ts) = t.start_ts() {
        m.insert("start_ts".into(), ts.to_json());
    }
    if let Some(ts) = t.commit_ts() {
        m.insert("commit_ts".into(), ts.to_json());
    }
    if let Some(rt) = t.real_time() {
        m.insert("invoked_at".into(), rt.invoked_at.into());
        m.insert("completed_at".into(), rt.completed_at.into());
    }
    let ops: Vec<Json> = t
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let mut j = op_to_json(h, op);
            if let (Some(meta), Json::Object(map)) = (t.op_meta(i), &mut j) {
                map.insert("meta".into(), meta.clone());
            }
            j
        })
        .collect();
    m.insert("ops".into(), Json::Array(ops));
    if let Some(meta) = t.meta() {
        m.insert("meta".into(), meta.clone());
    }
    serde_json::to_writer(&mut *out, &Json::Object(m)).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Writes a whole history: the header when needed, then one line per transaction.
///
/// # Errors
/// I/O errors of `out`.
pub fn write_history<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    write_header(h, out)?;
    for id in h.txn_ids() {
        write_txn(h, id, out)?;
    }
    Ok(())
}

fn op_to_json(h: &History, op: &Op) -> Json {
    let item = |f: &str, obj, value: Json| {
        let o = h.object(obj);
        let mut m = Map::new();
        m.insert("f".into(), f.into());
        let table = &h.table(o.table).name;
        if &**table != KV_TABLE {
            m.insert("table".into(), table.to_string().into());
        }
        m.insert("key".into(), o.key.to_json());
        m.insert("value".into(), value);
        Json::Object(m)
    };
    let table_of = |obj| h.object(obj).table;
    match op {
        Op::Read { obj, value } => item("r", *obj, value_to_json(h, table_of(*obj), *value)),
        Op::Write { obj, value } => item("w", *obj, value_to_json(h, table_of(*obj), *value)),
        Op::Append { obj, element } => item("append", *obj, element.to_json()),
        Op::Aggregate { predicate, function, column, result } => {
            let p = h.predicate(*predicate);
            let table = h.table(p.table);
            let mut m = Map::new();
            m.insert("f".into(), "aggregate".into());
            m.insert("table".into(), table.name.to_string().into());
            m.insert("where".into(), p.sql.to_string().into());
            m.insert("function".into(), function.as_str().into());
            if let Some(c) = column {
                m.insert("column".into(), table.columns[c.index()].to_string().into());
            }
            m.insert("result".into(), result.to_json());
            Json::Object(m)
        }
        Op::Select { predicate, rows }
        | Op::Update { predicate, rows, .. }
        | Op::Delete { predicate, rows } => {
            let p = h.predicate(*predicate);
            let table = h.table(p.table);
            let (f, with_value) = match op {
                Op::Select { .. } => ("select", true),
                Op::Update { .. } => ("update", true),
                _ => ("delete", false),
            };
            let rows: Vec<Json> = rows
                .iter()
                .map(|r| {
                    let key = h.object(r.obj).key.to_json();
                    if with_value {
                        json!({"key": key, "value": value_to_json(h, p.table, r.value)})
                    } else {
                        json!({"key": key})
                    }
                })
                .collect();
            let mut m = Map::new();
            m.insert("f".into(), f.into());
            m.insert("table".into(), table.name.to_string().into());
            m.insert("where".into(), p.sql.to_string().into());
            if let Op::Update { set, .. } = op {
                let mut excluded = None;
                let set: Map<String, Json> = set
                    .iter()
                    .map(|(c, a)| {
                        let v = match a {
                            Assign::Const(v) => v.to_json(),
                            Assign::Expr(e) => {
                                excluded = excluded.or(e.excluded);
                                json!({"expr": &*e.sql})
                            }
                        };
                        (table.columns[c.index()].to_string(), v)
                    })
                    .collect();
                m.insert("set".into(), Json::Object(set));
                if let Some(row) = excluded {
                    m.insert("excluded".into(), value_to_json(h, p.table, row));
                }
            }
            m.insert("rows".into(), Json::Array(rows));
            Json::Object(m)
        }
    }
}
