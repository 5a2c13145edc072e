//! Matching a captured log's transactions to the history's, and the version order: shared
//! by every recovery rule whose client records an id of each transaction that the log also
//! carries (PostgreSQL: the xid; MariaDB: the GTID sequence number).

use isocert_history::{History, ObjId, Op, Scalar, Status, TableId, TxnId, Value, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{RawLog, RecoveryError, RowChange};

/// The result of matching: who wrote what, in which order.
#[derive(Debug, Default)]
pub(crate) struct Matched {
    /// Per object, its writers in commit order.
    pub(crate) version_order: FxHashMap<ObjId, Vec<TxnId>>,
    /// Per history transaction, its position in the stream (commit order), if it committed writes.
    pub(crate) stream_pos: Vec<Option<u32>>,
    /// Per history transaction, the id the client recorded (PostgreSQL: its full 64-bit
    /// xid; MariaDB: its GTID sequence number), or the log's id once matched.
    pub(crate) xid: Vec<Option<u64>>,
    /// The value each committed writer left on each object it wrote.
    pub(crate) final_value: FxHashMap<(TxnId, ObjId), ValueId>,
    /// Rows a transaction deleted and then inserted again: PostgreSQL's insert makes a new
    /// row version chain, so a statement following the old chain finds the row deleted.
    pub(crate) reinserted: FxHashSet<(TxnId, ObjId)>,
    /// Unknown-status transactions the stream showed committed.
    pub(crate) resolved_committed: usize,
    /// Unknown-status transactions the stream showed never committed.
    pub(crate) resolved_aborted: usize,
}

/// The last value each transaction's operations leave on each object, in first-write order.
pub(crate) fn final_writes(h: &History, t: TxnId) -> Result<Vec<(ObjId, ValueId)>, RecoveryError> {
    writes_and_appends(h, t, None)
}

/// The elements a transaction appended, per list object in first-append order.
type Appended = Vec<(ObjId, Vec<Scalar>)>;

/// [`final_writes`], with list appends collected into `appends` (per object, the elements in
/// program order) instead of refused; without `appends` an append is an error, for the
/// rules that have no list appends.
fn writes_and_appends(
    h: &History,
    t: TxnId,
    mut appends: Option<&mut Appended>,
) -> Result<Vec<(ObjId, ValueId)>, RecoveryError> {
    let mut out: Vec<(ObjId, ValueId)> = Vec::new();
    let mut set = |obj: ObjId, value: ValueId| match out.iter_mut().find(|(o, _)| *o == obj) {
        Some(slot) => slot.1 = value,
        None => out.push((obj, value)),
    };
    for (i, op) in h.txn(t).ops.iter().enumerate() {
        match op {
            Op::Write { obj, value } => set(*obj, *value),
            Op::Update { rows, .. } => rows.iter().for_each(|r| set(r.obj, r.value)),
            Op::Delete { rows, .. } => rows.iter().for_each(|r| set(r.obj, ValueId::ABSENT)),
            Op::Append { obj, element } => match appends.as_deref_mut() {
                Some(appends) => match appends.iter_mut().find(|(o, _)| o == obj) {
                    Some((_, elements)) => elements.push(element.clone()),
                    None => appends.push((*obj, vec![element.clone()])),
                },
                None => {
                    return Err(RecoveryError::Unsupported {
                        txn: h.txn_label(t),
                        op: i,
                        message: "list appends have no recovery rule for this database".into(),
                    })
                }
            },
            Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. } => {}
        }
    }
    Ok(out)
}

/// The list a logged row holds in its list column (`val`, else its last column): the text
/// `1,5,9` that `CONCAT(val, ',', element)` built, as the elements the history appended
/// (integers where they parse). `None` when the row was deleted or holds no text.
fn logged_list(change: &RowChange) -> Option<Vec<Scalar>> {
    let row = change.row.as_ref()?;
    let (_, cell) = row.iter().find(|(c, _)| &**c == "val").or(row.last())?;
    let Scalar::Text(text) = cell else { return None };
    Some(
        text.split(',')
            .map(|e| e.parse::<i64>().map_or_else(|_| Scalar::Text(e.into()), Scalar::Int))
            .collect(),
    )
}

/// The value a logged row change installed, interned into `h`: the history's value for it
/// ([`logged_value`]), or a row of the logged columns when the history never saw one of
/// them (a foreign writer's row).
pub(crate) fn intern_logged_value(h: &mut History, table: TableId, change: &RowChange) -> ValueId {
    match logged_value(h, table, change) {
        Some(v) => h.intern_value(v),
        None => {
            let cells: Vec<_> = change
                .row
                .iter()
                .flatten()
                .map(|(name, v)| (h.intern_column(table, name), v.clone()))
                .collect();
            h.intern_row(&cells)
        }
    }
}

/// The history's value for a logged row change, or `None` when the row has a non-NULL
/// column the history never saw (so no recorded value can equal it).
pub(crate) fn logged_value(h: &History, table: TableId, change: &RowChange) -> Option<Value> {
    let Some(row) = &change.row else { return Some(Value::Absent) };
    let t = h.table(table);
    if t.is_kv() {
        let v = row.iter().find(|(c, _)| &**c == "value").map(|(_, v)| v.clone()).unwrap_or(Scalar::Null);
        return Some(Value::Scalar(v));
    }
    let mut columns = Vec::with_capacity(row.len());
    for (name, v) in row {
        match t.column(name) {
            Some(c) => columns.push((c, v.clone())),
            None if v.is_null() => {}
            None => return None,
        }
    }
    let width = columns.iter().map(|(c, _)| c.index() + 1).max().unwrap_or(0);
    let mut cells = vec![Scalar::Null; width];
    for (c, v) in columns {
        cells[c.index()] = v;
    }
    Some(Value::Row(isocert_history::Row::new(cells)))
}

fn describe(change: &RowChange) -> String {
    match &change.row {
        None => format!("delete {}[{}]", change.table, change.key),
        Some(row) => {
            let cells: Vec<String> = row.iter().map(|(c, v)| format!("{c}: {v}")).collect();
            format!("{}[{}] = {{{}}}", change.table, change.key, cells.join(", "))
        }
    }
}

fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// Matches every logged transaction to a history transaction (by the id the client
/// recorded, `ids[t]`, compared with the log's after `narrow`; or for an unknown-status
/// transaction that never learned its id, by the unique value it wrote), resolves unknown
/// statuses, checks that history and log agree on every write, and builds the version order.
pub(crate) fn match_log(
    h: &mut History,
    ids: &[Option<u64>],
    log: &RawLog,
    narrow: fn(u64) -> u64,
) -> Result<Matched, RecoveryError> {
    let n = h.txns.len();
    let mut m = Matched { stream_pos: vec![None; n], xid: vec![None; n], ..Matched::default() };
    let mut by_xid: FxHashMap<u64, TxnId> = FxHashMap::default();
    for t in h.txn_ids() {
        if let Some(x) = ids[t.index()] {
            if let Some(first) = by_xid.insert(narrow(x), t) {
                return Err(RecoveryError::DuplicateXid {
                    xid: x,
                    first: h.txn_label(first),
                    second: h.txn_label(t),
                });
            }
            m.xid[t.index()] = Some(x);
        }
    }
    // Unknown-status writers without an xid, by the (object, value) of each write.
    let mut by_write: FxHashMap<(ObjId, ValueId), TxnId> = FxHashMap::default();
    for t in h.txn_ids() {
        if h.txn(t).status == Status::Unknown && m.xid[t.index()].is_none() {
            for (obj, value) in writes_and_appends(h, t, Some(&mut Vec::new()))? {
                if value != ValueId::ABSENT {
                    by_write.insert((obj, value), t);
                }
            }
        }
    }

    let mut writes: Vec<(ObjId, &RowChange)> = Vec::new();
    let mut deleted: Vec<ObjId> = Vec::new();
    let mut reinserted: Vec<ObjId> = Vec::new();
    for (pos, ct) in log.txns().iter().enumerate() {
        writes.clear();
        deleted.clear();
        reinserted.clear();
        for change in &ct.changes {
            let obj = h
                .table_by_name(&change.table)
                .and_then(|table| h.object_by_key(table, &change.key))
                .ok_or_else(|| RecoveryError::UnknownWriter {
                    xid: ct.xid,
                    lsn: lsn_text(ct.commit_lsn),
                    change: format!("{} (an object the history never names)", describe(change)),
                })?;
            match writes.iter_mut().find(|(o, _)| *o == obj) {
                Some(slot) => slot.1 = change,
                None => writes.push((obj, change)),
            }
            if change.row.is_none() {
                deleted.push(obj);
            } else if deleted.contains(&obj) {
                reinserted.push(obj);
            }
        }
        let by_value = || {
            writes.iter().find_map(|(obj, change)| {
                let v = logged_value(h, h.object(*obj).table, change)?;
                by_write.get(&(*obj, h.value_id(&v)?)).copied()
            })
        };
        let t = match by_xid.get(&narrow(ct.xid)).copied().or_else(by_value) {
            Some(t) => t,
            None => {
                return Err(RecoveryError::UnknownWriter {
                    xid: ct.xid,
                    lsn: lsn_text(ct.commit_lsn),
                    change: ct.changes.first().map(describe).unwrap_or_else(|| "none".into()),
                })
            }
        };
        if m.stream_pos[t.index()].is_some() {
            return Err(RecoveryError::DuplicateXid {
                xid: ct.xid,
                first: h.txn_label(t),
                second: h.txn_label(t),
            });
        }
        match h.txn(t).status {
            Status::Aborted => {
                return Err(RecoveryError::AbortedButCommitted { txn: h.txn_label(t), xid: ct.xid })
            }
            Status::Unknown => {
                h.txns[t.index()].status = Status::Committed;
                m.resolved_committed += 1;
            }
            Status::Committed => {}
        }
        m.stream_pos[t.index()] = Some(pos as u32);
        m.reinserted.extend(reinserted.iter().map(|obj| (t, *obj)));
        m.xid[t.index()].get_or_insert(ct.xid);
        let mut appended = Appended::new();
        let recorded = writes_and_appends(h, t, Some(&mut appended))?;
        for (obj, change) in &writes {
            if let Some((_, elements)) = appended.iter().find(|(o, _)| o == obj) {
                // An append installs the list it found plus its elements: the logged list
                // must end with them, in order.
                let list = logged_list(change)
                    .filter(|l| l.ends_with(elements) && !recorded.iter().any(|(o, _)| o == obj));
                let Some(list) = list else {
                    return Err(RecoveryError::ValueMismatch {
                        txn: h.txn_label(t),
                        object: h.object_label(*obj),
                        logged: describe(change),
                        recorded: format!(
                            "a list ending with [{}]",
                            elements.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(",")
                        ),
                    });
                };
                let value = h.intern_value(Value::List(list.into()));
                let order = m.version_order.entry(*obj).or_default();
                if order.last() != Some(&t) {
                    order.push(t);
                }
                m.final_value.insert((t, *obj), value);
                continue;
            }
            let logged = logged_value(h, h.object(*obj).table, change);
            let Some(&(_, value)) = recorded.iter().find(|(o, _)| o == obj) else {
                return Err(RecoveryError::UnrecordedWrite {
                    txn: h.txn_label(t),
                    object: h.object_label(*obj),
                    value: describe(change),
                });
            };
            if logged.as_ref() != Some(h.value(value)) {
                return Err(RecoveryError::ValueMismatch {
                    txn: h.txn_label(t),
                    object: h.object_label(*obj),
                    logged: describe(change),
                    recorded: h.value_label(*obj, value),
                });
            }
            let order = m.version_order.entry(*obj).or_default();
            if order.last() != Some(&t) {
                order.push(t);
            }
            m.final_value.insert((t, *obj), value);
        }
        let written = recorded.iter().map(|(o, _)| o).chain(appended.iter().map(|(o, _)| o));
        if let Some(obj) = written.clone().find(|o| !writes.iter().any(|(w, _)| w == *o)) {
            return Err(RecoveryError::MissingWrite {
                txn: h.txn_label(t),
                xid: m.xid[t.index()],
                object: h.object_label(*obj),
            });
        }
        drop(written);
    }

    for i in 0..n {
        let t = TxnId::from_index(i);
        if m.stream_pos[i].is_some() {
            continue;
        }
        let status = h.txn(t).status;
        if status == Status::Unknown && m.xid[t.index()].is_some() {
            h.txns[t.index()].status = Status::Aborted;
            m.resolved_aborted += 1;
        } else if status == Status::Committed {
            let mut appended = Appended::new();
            let writes = writes_and_appends(h, t, Some(&mut appended))?;
            if let Some(obj) = writes.first().map(|(o, _)| o).or(appended.first().map(|(o, _)| o)) {
                return Err(RecoveryError::MissingWrite {
                    txn: h.txn_label(t),
                    xid: m.xid[t.index()],
                    object: h.object_label(*obj),
                });
            }
        }
    }
    Ok(m)
}

/// Records `op`'s writes in `own` (object -> the value the transaction last wrote), so that
/// its later reads see them.
pub(crate) fn record_own_writes(op: &Op, own: &mut FxHashMap<ObjId, ValueId>) {
    match op {
        Op::Write { obj, value } => {
            own.insert(*obj, *value);
        }
        Op::Update { rows, .. } => rows.iter().for_each(|r| {
            own.insert(r.obj, r.value);
        }),
        Op::Delete { rows, .. } => rows.iter().for_each(|r| {
            own.insert(r.obj, ValueId::ABSENT);
        }),
        // The list an append leaves is known only to the log: the object is the
        // transaction's own from now on, whatever it holds.
        Op::Append { obj, .. } => {
            own.entry(*obj).or_insert(ValueId::ABSENT);
        }
        _ => {}
    }
}
