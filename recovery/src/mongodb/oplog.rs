//! `local.oplog.rs` entries (extended JSON lines) -> [`RawLog`].
//!
//! Shapes (MongoDB manual, "Replica Set Oplog" and "Production Considerations" for
//! transactions; server source `src/mongo/db/repl/oplog_entry.idl`):
//! - a write outside a transaction: `{"op":"i"|"u"|"d","ns":"db.coll","o":{..},"o2":{"_id":..},"ts":{"$timestamp":..}}`;
//! - a transaction: one command entry `{"op":"c","ns":"admin.$cmd","o":{"applyOps":[ops..]},
//!   "lsid":{"id":UUID},"txnNumber":N,"ts":..,"prevOpTime":..}` (ops shaped like the above);
//! - a large transaction: entries whose `o` has `"partialTxn":true`, chained by
//!   `prevOpTime`, ending in an `applyOps` without it;
//! - a prepared transaction: `applyOps` with `"prepare":true`, then `{"o":{"commitTransaction":1,
//!   "commitTimestamp":TS}}` (or `abortTransaction`); its writes become visible at
//!   `commitTimestamp`;
//! - updates: `$v: 2` diffs `{"$v":2,"diff":{"u":{f:v},"i":{f:v},"d":{f:false}}}`, the older
//!   `{"$set":..,"$unset":..}`, or a replacement document.
//!
//! An aborted transaction never reaches the oplog (its writes are not logged until commit),
//! except a prepared one, whose `abortTransaction` drops the prepared writes here.

use std::io::BufRead;
use std::sync::Arc;

use isocert_history::{Scalar, Timestamp};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value as Json};

use super::ext_json::{document, scalar, timestamp, txn_xid};
use crate::{CommittedTxn, RawLog, RawLogError, RowChange};

/// A document's fields, in order.
pub(crate) type Doc = Vec<(Arc<str>, Scalar)>;

/// Transactions as they are found, with every document's current state (to turn partial
/// updates into whole rows), then sorted by commit time.
#[derive(Debug, Default)]
pub(crate) struct LogBuilder {
    /// Current state per (collection, `_id`).
    pub(crate) docs: FxHashMap<(Arc<str>, Scalar), Doc>,
    txns: Vec<(Timestamp, CommittedTxn)>,
    seen: FxHashSet<(Timestamp, u64)>,
}

impl LogBuilder {
    /// Records a committed transaction at `commit_ts`; a repeat (same time, same id) is
    /// dropped and reported `false`.
    pub(crate) fn emit(&mut self, xid: u64, commit_ts: Timestamp, changes: Vec<RowChange>) -> bool {
        if !self.seen.insert((commit_ts, xid)) {
            return false;
        }
        let lsn = (commit_ts.wall << 32) | (commit_ts.logical & 0xFFFF_FFFF);
        self.txns.push((
            commit_ts,
            CommittedTxn {
                xid,
                commit_lsn: lsn,
                end_lsn: lsn,
                commit_time: commit_ts.wall as i64,
                commit_ts: Some(commit_ts),
                changes,
            },
        ));
        true
    }

    /// The log in commit-time order.
    ///
    /// # Errors
    /// As [`LogBuilder::take_sorted`].
    pub(crate) fn finish(mut self) -> Result<RawLog, RawLogError> {
        let mut log = RawLog::new();
        for t in self.take_sorted()? {
            log.push(t);
        }
        Ok(log)
    }

    /// The transactions emitted since the last call, in commit-time order (documents'
    /// state and the repeats seen are kept for what follows).
    ///
    /// # Errors
    /// Two different transactions committing at one cluster time (MongoDB gives every
    /// commit its own oplog time, so the input is inconsistent).
    pub(crate) fn take_sorted(&mut self) -> Result<Vec<CommittedTxn>, RawLogError> {
        let mut txns = std::mem::take(&mut self.txns);
        txns.sort_by_key(|(ts, t)| (*ts, t.xid));
        for pair in txns.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(RawLogError::Line {
                    line: 0,
                    field: "ts".into(),
                    message: format!(
                        "two transactions (ids {:#x} and {:#x}) commit at the same cluster time {}",
                        pair[0].1.xid, pair[1].1.xid, pair[0].0
                    ),
                });
            }
        }
        Ok(txns.into_iter().map(|(_, t)| t).collect())
    }
}

/// What the reader keeps of a transaction not yet committed.
#[derive(Debug, Default)]
struct Pending {
    changes: Vec<RowChange>,
    prepared: bool,
}

/// Reads an oplog dump (one entry per line, extended JSON) into a [`RawLog`]: committed
/// transactions and single writes, ordered by commit cluster time, `xid` from
/// [`super::mongo_txn_xid`] (0 for writes outside a session's transaction), `commit_ts` =
/// `Timestamp(t, i)` as the HLC pair (t, i). Only namespaces of `database` are kept (every
/// database but `admin`, `config` and `local` when `None`). Repeated entries (a dump
/// resumed from an earlier position) are read once.
///
/// # Errors
/// [`RawLogError::Line`] naming the line and field of an entry that is not a valid oplog
/// entry or holds a value the history cannot (an array, an embedded document).
pub fn read_oplog(input: impl BufRead, database: Option<&str>) -> Result<RawLog, RawLogError> {
    let mut b = LogBuilder::default();
    let mut pending: FxHashMap<u64, Pending> = FxHashMap::default();
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let lineno = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let bad =
            |field: &str, message: String| RawLogError::Line { line: lineno, field: field.into(), message };
        let entry: Json = serde_json::from_str(&line).map_err(|e| bad("entry", e.to_string()))?;
        let Json::Object(entry) = entry else { return Err(bad("entry", "not a JSON object".into())) };
        let op = entry.get("op").and_then(Json::as_str).ok_or_else(|| bad("op", "missing".into()))?;
        let ts =
            entry.get("ts").and_then(timestamp).ok_or_else(|| bad("ts", "not a {\"$timestamp\"}".into()))?;
        let xid = txn_xid(&entry).map_err(|(f, m)| bad(&f, m))?;
        match op {
            "n" => {}
            "i" | "u" | "d" => {
                let mut changes = Vec::new();
                if let Some(c) = write_op(&mut b, &entry, database).map_err(|(f, m)| bad(&f, m))? {
                    changes.push(c);
                    b.emit(xid.unwrap_or(0), ts, changes);
                }
            }
            "c" => {
                let o = entry.get("o").and_then(Json::as_object).ok_or_else(|| bad("o", "missing".into()))?;
                if let Some(ops) = o.get("applyOps") {
                    let ops = ops.as_array().ok_or_else(|| bad("o.applyOps", "not an array".into()))?;
                    let key = xid.unwrap_or(0);
                    let mut p = pending.remove(&key).unwrap_or_default();
                    for (i, inner) in ops.iter().enumerate() {
                        let inner = inner
                            .as_object()
                            .ok_or_else(|| bad(&format!("o.applyOps[{i}]"), "not an object".into()))?;
                        if let Some(c) = write_op(&mut b, inner, database)
                            .map_err(|(f, m)| bad(&format!("o.applyOps[{i}].{f}"), m))?
                        {
                            p.changes.push(c);
                        }
                    }
                    let flag = |name: &str| o.get(name).and_then(Json::as_bool).unwrap_or(false);
                    if flag("partialTxn") || flag("prepare") {
                        p.prepared |= flag("prepare");
                        pending.insert(key, p);
                    } else if !p.changes.is_empty() {
                        b.emit(key, ts, p.changes);
                    }
                } else if o.contains_key("commitTransaction") {
                    let key = xid.ok_or_else(|| {
                        bad("lsid", "a commitTransaction entry needs lsid and txnNumber".into())
                    })?;
                    let p = pending.remove(&key).ok_or_else(|| {
                        bad(
                            "o.commitTransaction",
                            "commits a transaction whose prepared entries are not in the dump".into(),
                        )
                    })?;
                    let at = match o.get("commitTimestamp") {
                        Some(v) => timestamp(v)
                            .ok_or_else(|| bad("o.commitTimestamp", "not a {\"$timestamp\"}".into()))?,
                        None => ts,
                    };
                    if !p.changes.is_empty() {
                        b.emit(key, at, p.changes);
                    }
                } else if o.contains_key("abortTransaction") {
                    if let Some(key) = xid {
                        pending.remove(&key);
                    }
                }
                // Other commands (create, drop, createIndexes, ...) change no document.
            }
            other => return Err(bad("op", format!("unknown operation {other:?}"))),
        }
    }
    b.finish()
}

/// The collection of namespace `ns` if it is kept.
pub(crate) fn collection<'a>(ns: &'a str, database: Option<&str>) -> Option<&'a str> {
    let (db, coll) = ns.split_once('.')?;
    let keep = match database {
        Some(d) => db == d,
        None => !matches!(db, "admin" | "config" | "local"),
    };
    (keep && !coll.starts_with("system.") && !coll.starts_with('$')).then_some(coll)
}

/// One insert, update or delete entry (top level or inside `applyOps`) as a row change,
/// updating the document state; `None` for a namespace that is not kept.
fn write_op(
    b: &mut LogBuilder,
    e: &Map<String, Json>,
    database: Option<&str>,
) -> Result<Option<RowChange>, (String, String)> {
    let missing = |f: &str| (f.to_string(), "missing".to_string());
    let op = e.get("op").and_then(Json::as_str).ok_or_else(|| missing("op"))?;
    let ns = e.get("ns").and_then(Json::as_str).ok_or_else(|| missing("ns"))?;
    if op == "n" || op == "c" {
        return Ok(None);
    }
    let Some(coll) = collection(ns, database) else { return Ok(None) };
    let table: Arc<str> = coll.into();
    let o = e.get("o").and_then(Json::as_object).ok_or_else(|| missing("o"))?;
    let id_of = |doc: &Map<String, Json>, field: &str| -> Result<Scalar, (String, String)> {
        let id = doc.get("_id").ok_or_else(|| (format!("{field}._id"), "missing".to_string()))?;
        scalar(id).map_err(|m| (format!("{field}._id"), m))
    };
    match op {
        "i" => {
            let key = id_of(o, "o")?;
            let doc = document(o).map_err(|(f, m)| (format!("o.{f}"), m))?;
            b.docs.insert((table.clone(), key.clone()), doc.clone());
            Ok(Some(RowChange { table, key, row: Some(doc) }))
        }
        "d" => {
            let key = id_of(o, "o")?;
            b.docs.remove(&(table.clone(), key.clone()));
            Ok(Some(RowChange { table, key, row: None }))
        }
        "u" => {
            let o2 = e.get("o2").and_then(Json::as_object).ok_or_else(|| missing("o2"))?;
            let key = id_of(o2, "o2")?;
            let slot = (table.clone(), key.clone());
            let mut doc = b.docs.remove(&slot).unwrap_or_else(|| vec![(Arc::from("_id"), key.clone())]);
            apply_update(&mut doc, o).map_err(|(f, m)| (format!("o.{f}"), m))?;
            b.docs.insert(slot, doc.clone());
            Ok(Some(RowChange { table, key, row: Some(doc) }))
        }
        other => Err(("op".into(), format!("unknown operation {other:?}"))),
    }
}

fn set_field(doc: &mut Doc, name: &str, v: Scalar) {
    match doc.iter_mut().find(|(k, _)| &**k == name) {
        Some(slot) => slot.1 = v,
        None => doc.push((name.into(), v)),
    }
}

/// Applies an update's `o`: a `$v: 2` diff, `$set`/`$unset`, or a replacement document.
fn apply_update(doc: &mut Doc, o: &Map<String, Json>) -> Result<(), (String, String)> {
    let fields = |v: &Json, at: &str| -> Result<Vec<(String, Json)>, (String, String)> {
        let m = v.as_object().ok_or_else(|| (at.to_string(), "not an object".to_string()))?;
        Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    };
    let set = |doc: &mut Doc, v: &Json, at: &str| -> Result<(), (String, String)> {
        for (k, v) in fields(v, at)? {
            if k == "writer" {
                continue;
            }
            set_field(doc, &k, scalar(&v).map_err(|m| (format!("{at}.{k}"), m))?);
        }
        Ok(())
    };
    if let Some(diff) = o.get("diff") {
        let d = diff.as_object().ok_or_else(|| ("diff".to_string(), "not an object".to_string()))?;
        for (section, body) in d {
            match section.as_str() {
                "u" | "i" => set(doc, body, &format!("diff.{section}"))?,
                "d" => {
                    for (k, _) in fields(body, "diff.d")? {
                        doc.retain(|(f, _)| **f != *k);
                    }
                }
                s => {
                    return Err((
                        format!("diff.{s}"),
                        "a nested diff (the history's documents are flat)".to_string(),
                    ))
                }
            }
        }
        return Ok(());
    }
    if o.keys().any(|k| k.starts_with('$') && k != "$v") {
        if let Some(v) = o.get("$set") {
            set(doc, v, "$set")?;
        }
        if let Some(v) = o.get("$unset") {
            for (k, _) in fields(v, "$unset")? {
                doc.retain(|(f, _)| **f != *k);
            }
        }
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "$v" | "$set" | "$unset")) {
            return Err((k.clone(), "an update operator the oplog does not use".into()));
        }
        return Ok(());
    }
    // A replacement: the whole new document.
    *doc = document(o)?;
    Ok(())
}

/// The `_id` of a document key (`{"_id": ..}`) as a scalar.
pub(crate) fn key_of(v: &Json, field: &str) -> Result<Scalar, (String, String)> {
    let id = v.get("_id").ok_or_else(|| (format!("{field}._id"), "missing".to_string()))?;
    scalar(id).map_err(|m| (format!("{field}._id"), m))
}
