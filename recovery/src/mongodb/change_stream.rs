//! Change stream events (extended JSON lines, as `watch()` returns them) -> [`RawLog`].
//!
//! Shapes (MongoDB manual, "Change Events": the `insert`, `update`, `replace` and `delete`
//! event pages): `{"_id":{"_data":TOKEN},"operationType":..,"clusterTime":{"$timestamp":..},
//! "ns":{"db":..,"coll":..},"documentKey":{"_id":..},"fullDocument":{..},
//! "updateDescription":{"updatedFields":{..},"removedFields":[..]},"lsid":{"id":UUID},
//! "txnNumber":N}`. Every event of one transaction carries the same `clusterTime` (the
//! commit's), `lsid` and `txnNumber`, and they arrive together; `_id` is the resume token,
//! so an event seen again after resuming is recognised by it.

use std::io::BufRead;
use std::sync::Arc;

use isocert_history::{Scalar, Timestamp};
use rustc_hash::FxHashSet;
use serde_json::{Map, Value as Json};

use super::ext_json::{document, scalar, timestamp, txn_xid};
use super::oplog::{key_of, LogBuilder};
use crate::{RawLog, RawLogError, RowChange};

/// The transaction being assembled: its (id, commit time) and changes.
type Group = Option<((u64, Timestamp), Vec<RowChange>)>;

/// Reads change events into a [`RawLog`]: events grouped into transactions by `lsid` +
/// `txnNumber` + `clusterTime` (a write outside a transaction is one of its own, `xid` 0),
/// `commit_ts` = `clusterTime` as the HLC pair (t, i), events repeated after a resume (the
/// same resume token) read once. Only namespaces of `database` are kept (all but `admin`,
/// `config`, `local` when `None`). Updates without `fullDocument` are applied to the
/// document as earlier events left it.
///
/// # Errors
/// [`RawLogError::Line`] naming the line and field of an event that is not a change event
/// or holds a value the history cannot.
pub fn read_change_stream(input: impl BufRead, database: Option<&str>) -> Result<RawLog, RawLogError> {
    let mut reader = ChangeStreamReader::new(database);
    reader.read(input)?;
    reader.builder.finish()
}

/// A change stream read in batches, as a live run takes it at each cut
/// ([`read_change_stream`] reads it whole): the documents' state and the resume tokens seen
/// carry over from batch to batch.
#[derive(Debug, Default)]
pub struct ChangeStreamReader {
    builder: LogBuilder,
    tokens: FxHashSet<String>,
    database: Option<String>,
    /// Lines read in earlier batches (errors name the line in the whole stream).
    lines: usize,
}

impl ChangeStreamReader {
    /// A reader keeping the namespaces of `database` (as [`read_change_stream`]).
    pub fn new(database: Option<&str>) -> ChangeStreamReader {
        ChangeStreamReader { database: database.map(str::to_string), ..ChangeStreamReader::default() }
    }

    /// Reads one batch of whole transactions (a batch ends where no transaction's events
    /// are still to come: at a cut) and returns its commits in cluster-time order.
    ///
    /// # Errors
    /// As [`read_change_stream`].
    pub fn read_batch(&mut self, input: impl BufRead) -> Result<Vec<crate::CommittedTxn>, RawLogError> {
        self.read(input)?;
        self.builder.take_sorted()
    }

    fn read(&mut self, input: impl BufRead) -> Result<(), RawLogError> {
        let (b, tokens, database) = (&mut self.builder, &mut self.tokens, self.database.as_deref());
        let mut group: Group = None;
        let first = self.lines;
        for (n, line) in input.lines().enumerate() {
            let line = line?;
            let lineno = first + n + 1;
            self.lines = lineno;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |field: &str, message: String| RawLogError::Line {
                line: lineno,
                field: field.into(),
                message,
            };
            let ev: Json = serde_json::from_str(&line).map_err(|e| bad("event", e.to_string()))?;
            let Json::Object(ev) = ev else { return Err(bad("event", "not a JSON object".into())) };
            let token = ev
                .get("_id")
                .map(Json::to_string)
                .ok_or_else(|| bad("_id", "missing resume token".into()))?;
            if !tokens.insert(token) {
                continue; // Delivered again after a resume.
            }
            let kind = ev
                .get("operationType")
                .and_then(Json::as_str)
                .ok_or_else(|| bad("operationType", "missing".into()))?;
            if !matches!(kind, "insert" | "update" | "replace" | "delete") {
                continue; // drop, rename, invalidate, DDL events: no document changes.
            }
            let ts = ev
                .get("clusterTime")
                .and_then(timestamp)
                .ok_or_else(|| bad("clusterTime", "not a {\"$timestamp\"}".into()))?;
            let ns = ev.get("ns").and_then(Json::as_object).ok_or_else(|| bad("ns", "missing".into()))?;
            let (Some(db), Some(coll)) =
                (ns.get("db").and_then(Json::as_str), ns.get("coll").and_then(Json::as_str))
            else {
                return Err(bad("ns", "needs db and coll".into()));
            };
            if super::oplog::collection(&format!("{db}.{coll}"), database).is_none() {
                continue;
            }
            let xid = txn_xid(&ev).map_err(|(f, m)| bad(&f, m))?;
            let change = change(b, kind, coll.into(), &ev).map_err(|(f, m)| bad(&f, m))?;
            match (xid, &mut group) {
                (Some(x), Some((key, changes))) if *key == (x, ts) => changes.push(change),
                (Some(x), _) => {
                    flush(b, group.take());
                    group = Some(((x, ts), vec![change]));
                }
                (None, _) => {
                    flush(b, group.take());
                    b.emit(0, ts, vec![change]);
                }
            }
        }
        flush(b, group.take());
        Ok(())
    }
}

fn flush(b: &mut LogBuilder, group: Group) {
    if let Some(((xid, ts), changes)) = group {
        b.emit(xid, ts, changes);
    }
}

fn change(
    b: &mut LogBuilder,
    kind: &str,
    table: Arc<str>,
    ev: &Map<String, Json>,
) -> Result<RowChange, (String, String)> {
    let key = key_of(ev.get("documentKey").unwrap_or(&Json::Null), "documentKey")?;
    let slot = (table.clone(), key.clone());
    let full = match ev.get("fullDocument") {
        Some(Json::Object(d)) => Some(document(d).map_err(|(f, m)| (format!("fullDocument.{f}"), m))?),
        _ => None,
    };
    let row = match (kind, full) {
        ("delete", _) => {
            b.docs.remove(&slot);
            return Ok(RowChange { table, key, row: None });
        }
        (_, Some(doc)) => doc,
        ("update", None) => {
            let desc = ev.get("updateDescription").and_then(Json::as_object).ok_or_else(|| {
                ("updateDescription".to_string(), "missing (and no fullDocument)".to_string())
            })?;
            let mut doc = b.docs.get(&slot).cloned().unwrap_or_else(|| vec![(Arc::from("_id"), key.clone())]);
            if let Some(Json::Object(fields)) = desc.get("updatedFields") {
                for (k, v) in fields {
                    if k == "writer" {
                        continue;
                    }
                    if k.contains('.') {
                        return Err((
                            format!("updateDescription.updatedFields.{k}"),
                            "a dotted path (the history's documents are flat)".into(),
                        ));
                    }
                    let v: Scalar =
                        scalar(v).map_err(|m| (format!("updateDescription.updatedFields.{k}"), m))?;
                    match doc.iter_mut().find(|(f, _)| **f == **k) {
                        Some(s) => s.1 = v,
                        None => doc.push((k.as_str().into(), v)),
                    }
                }
            }
            if let Some(Json::Array(removed)) = desc.get("removedFields") {
                for r in removed.iter().filter_map(Json::as_str) {
                    doc.retain(|(f, _)| **f != *r);
                }
            }
            doc
        }
        (k, None) => return Err(("fullDocument".into(), format!("a {k} event needs its fullDocument"))),
    };
    b.docs.insert(slot, row.clone());
    Ok(RowChange { table, key, row: Some(row) })
}
