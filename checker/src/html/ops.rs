//! A transaction's operations as a list, shown when its node or bar is clicked.

use std::fmt::Write as _;

use isocert_history::{History, Op, ResultRow, TxnId, ValueId};

use super::esc;

/// How many operations of one transaction are listed; the rest are counted.
const MAX_OPS: usize = 200;
/// How many rows of one predicate operation are listed.
const MAX_ROWS: usize = 8;

/// Appends `<div class="txn-ops" id="ops-<txn>">` with a header and one `<li>` per operation.
pub(super) fn txn_ops(out: &mut String, h: &History, t: TxnId) {
    let txn = h.txn(t);
    let ts = |v: Option<isocert_history::Timestamp>| v.map_or(String::new(), |v| v.to_string());
    let mut head =
        format!("{} · session {} · {}", h.txn_label(t), h.session_name(txn.session), txn.status.as_str());
    if txn.start_ts().is_some() || txn.commit_ts().is_some() {
        let _ = write!(head, " · start_ts {} · commit_ts {}", ts(txn.start_ts()), ts(txn.commit_ts()));
    }
    let _ = write!(out, "<div class=\"txn-ops\" id=\"ops-{}\"><h5>{}</h5><ol>", t.0, esc(&head));
    for (i, op) in txn.ops.iter().enumerate().take(MAX_OPS) {
        let _ = write!(out, "<li data-op=\"{}:{i}\">{}</li>", t.0, esc(&op_text(h, op)));
    }
    out.push_str("</ol>");
    if txn.ops.len() > MAX_OPS {
        let _ = write!(out, "<p>… and {} more operations</p>", txn.ops.len() - MAX_OPS);
    }
    out.push_str("</div>\n");
}

fn rows_text(h: &History, rows: &[ResultRow]) -> String {
    let mut parts: Vec<String> = rows
        .iter()
        .take(MAX_ROWS)
        .map(|r| {
            if r.value == ValueId::ABSENT {
                h.object_label(r.obj)
            } else {
                format!("{} = {}", h.object_label(r.obj), h.value_label(r.obj, r.value))
            }
        })
        .collect();
    if rows.len() > MAX_ROWS {
        parts.push(format!("… {} more", rows.len() - MAX_ROWS));
    }
    format!(
        "{} row{}{}{}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        if rows.is_empty() { "" } else { ": " },
        parts.join(", ")
    )
}

/// One operation in words: `read kv[x] → 1`, `write kv[x] := 2`, `select from t where … → 2 rows: …`.
pub(crate) fn op_text(h: &History, op: &Op) -> String {
    let pred = |p| {
        let p = h.predicate(p);
        (h.table(p.table).name.to_string(), p.sql.to_string())
    };
    match op {
        Op::Read { obj, value } if *value == ValueId::ABSENT => {
            format!("read {} → no row", h.object_label(*obj))
        }
        Op::Read { obj, value } => format!("read {} → {}", h.object_label(*obj), h.value_label(*obj, *value)),
        Op::Write { obj, value } if *value == ValueId::ABSENT => format!("delete {}", h.object_label(*obj)),
        Op::Write { obj, value } => {
            format!("write {} := {}", h.object_label(*obj), h.value_label(*obj, *value))
        }
        Op::Append { obj, element } => format!("append {element} to {}", h.object_label(*obj)),
        Op::Select { predicate, rows } => {
            let (table, sql) = pred(*predicate);
            format!("select from {table} where {sql} → {}", rows_text(h, rows))
        }
        Op::Update { predicate, set, rows } => {
            let (table, sql) = pred(*predicate);
            let t = h.predicate(*predicate).table;
            let cols = &h.table(t).columns;
            let set: Vec<String> = set
                .iter()
                .map(|(c, a)| {
                    let v = match a {
                        isocert_history::Assign::Const(v) => v.to_string(),
                        isocert_history::Assign::Expr(e) => e.sql.to_string(),
                    };
                    format!("{} = {v}", cols.get(c.index()).map(|c| &**c).unwrap_or("?"))
                })
                .collect();
            format!("update {table} set {} where {sql} → {}", set.join(", "), rows_text(h, rows))
        }
        Op::Delete { predicate, rows } => {
            let (table, sql) = pred(*predicate);
            format!("delete from {table} where {sql} → {}", rows_text(h, rows))
        }
        Op::Aggregate { predicate, function, column, result } => {
            let (table, sql) = pred(*predicate);
            let t = h.predicate(*predicate).table;
            let col = column
                .and_then(|c| h.table(t).columns.get(c.index()).map(|c| c.to_string()))
                .unwrap_or_else(|| "*".into());
            format!("select {}({col}) from {table} where {sql} → {result}", function.as_str())
        }
    }
}
