//! CockroachDB changefeed messages, and the version log they add up to.
//!
//! Shapes (CockroachDB's docs pages "Changefeed Messages" and "Create and Configure
//! Changefeeds"; the encoder is `pkg/ccl/changefeedccl/encoder_json.go`): a changefeed
//! created `WITH updated, mvcc_timestamp, diff, resolved` in the default `wrapped`
//! envelope emits, per row change, the key as a JSON array of the primary key columns
//! (`[1]`) and the value
//! `{"after": {...}, "before": {...}, "updated": "WALL.LOGICAL", "mvcc_timestamp": "WALL.LOGICAL"}`,
//! with `"after": null` for a delete; and, on its own, `{"resolved": "WALL.LOGICAL"}`: no
//! change at or below that timestamp is emitted after it (on that partition, for Kafka).
//! Timestamps are Go's `%d.%010d` of the HLC (`hlc.Timestamp.AsOfSystemTime`). A sinkless
//! changefeed returns rows `(table STRING, key BYTES, value BYTES)`, a resolved row with
//! `table` and `key` NULL; Kafka carries the same key and value in each message.
//!
//! Delivery is at least once and ordered per key only: [`FeedLog`] drops redeliveries by
//! (table, key, `updated`), groups the changes into transactions by `updated` (all writes
//! of a CockroachDB transaction carry its commit timestamp; recovery splits a group
//! should two transactions share one), orders them by HLC, and tracks the watermark (the
//! lowest of the partitions' resolved timestamps). The log is complete up to a commit
//! timestamp once the watermark reaches it.

use std::collections::BTreeMap;
use std::sync::Arc;

use isocert_history::{Scalar, Timestamp};
use isocert_recovery::{parse_hlc, CommittedTxn, RawLog, RawLogError, RowChange};
use serde_json::{Map, Value as Json};

/// One changefeed message.
#[derive(Clone, Debug, PartialEq)]
pub enum FeedMessage {
    /// A row change.
    Change(FeedChange),
    /// A resolved timestamp: nothing at or below it is emitted after this message.
    Resolved(Timestamp),
}

/// A row as (column, value) pairs, in the order the message lists them.
pub type FeedRow = Vec<(Arc<str>, Scalar)>;

/// One row change of a changefeed.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedChange {
    /// The table (the sinkless row's `table`, the Kafka topic without its prefix).
    pub table: String,
    /// The primary key (single-column keys only).
    pub key: Scalar,
    /// The row after the change; `None` for a delete.
    pub after: Option<FeedRow>,
    /// The row before it (`diff`), `None` when absent or not asked for.
    pub before: Option<FeedRow>,
    /// `updated`: the commit timestamp of the transaction that made the change.
    pub updated: Timestamp,
    /// `mvcc_timestamp`, when asked for (equal to `updated` outside backfills).
    pub mvcc_timestamp: Option<Timestamp>,
}

fn scalar(v: &Json) -> Result<Scalar, String> {
    Ok(match v {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Scalar::Int(i),
            None => Scalar::Float(n.as_f64().ok_or_else(|| format!("number {n} out of range"))?),
        },
        Json::String(s) => Scalar::Text(s.as_str().into()),
        other => return Err(format!("{other} is not a scalar column value")),
    })
}

fn row(v: &Json, field: &str) -> Result<Option<FeedRow>, String> {
    match v {
        Json::Null => Ok(None),
        Json::Object(cols) => cols
            .iter()
            .map(|(c, v)| Ok((Arc::from(c.as_str()), scalar(v).map_err(|e| format!("{field}.{c}: {e}"))?)))
            .collect::<Result<Vec<_>, String>>()
            .map(Some),
        other => Err(format!("{field}: {other} is neither a row object nor null")),
    }
}

fn timestamp(obj: &Map<String, Json>, field: &str) -> Result<Option<Timestamp>, String> {
    match obj.get(field) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => parse_hlc(s).map(Some).map_err(|e| format!("{field}: {e}")),
        Some(other) => Err(format!("{field}: {other} is not an HLC timestamp string")),
    }
}

/// A JSON document that may arrive as bytes, text, or (in a capture file) already parsed
/// or as a string holding the JSON (`cockroach sql --format=ndjson` prints BYTES so).
fn document(v: &Json, field: &str) -> Result<Json, String> {
    match v {
        Json::String(s) => serde_json::from_str(s).map_err(|e| format!("{field}: not JSON ({e})")),
        other => Ok(other.clone()),
    }
}

/// Parses one message: `table` and `key` as the sink delivered them (`None` on a sinkless
/// resolved row), `value` the envelope.
///
/// # Errors
/// A message that is not a wrapped JSON envelope with `updated`, or a key that is not a
/// one-element array; the message names the field.
pub fn parse_message(table: Option<&str>, key: Option<&Json>, value: &Json) -> Result<FeedMessage, String> {
    let value = document(value, "value")?;
    let obj = value.as_object().ok_or_else(|| format!("value: {value} is not a JSON object"))?;
    if let Some(resolved) = timestamp(obj, "resolved")? {
        return Ok(FeedMessage::Resolved(resolved));
    }
    if !obj.contains_key("after") {
        return Err(
            "value: no \"after\" field (the changefeed must use the wrapped envelope, CockroachDB's default)"
                .into(),
        );
    }
    let updated = timestamp(obj, "updated")?
        .ok_or("value: no \"updated\" field (create the changefeed WITH updated)")?;
    let after = row(&obj["after"], "after")?;
    let before = obj.get("before").map(|b| row(b, "before")).transpose()?.flatten();
    let table = table.ok_or("table: missing on a row change")?.to_string();
    let key = match key.map(|k| document(k, "key")).transpose()? {
        Some(Json::Array(parts)) if parts.len() == 1 => scalar(&parts[0]).map_err(|e| format!("key: {e}"))?,
        Some(Json::Array(parts)) => {
            return Err(format!(
                "key: {} columns; isocert's tables have a one-column primary key",
                parts.len()
            ))
        }
        Some(other) => return Err(format!("key: {other} is not a JSON array")),
        None => return Err("key: missing on a row change".into()),
    };
    Ok(FeedMessage::Change(FeedChange {
        table,
        key,
        after,
        before,
        updated,
        mvcc_timestamp: timestamp(obj, "mvcc_timestamp")?,
    }))
}

/// Decodes a BYTES column as pgwire's text format shows it (`\x5b315d`: hex), or text.
///
/// # Errors
/// Bad hex.
pub fn bytes_text(text: &str) -> Result<Json, String> {
    let raw = match text.strip_prefix("\\x") {
        Some(hex) => {
            if hex.len() % 2 != 0 {
                return Err(format!("odd-length hex {text:?}"));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| format!("bad hex ({e})"))?;
            String::from_utf8(bytes).map_err(|e| format!("not UTF-8 ({e})"))?
        }
        None => text.to_string(),
    };
    serde_json::from_str(&raw).map_err(|e| format!("not JSON ({e}): {raw}"))
}

/// One line of a capture file: `{"table": T, "key": [...], "value": {...}}` (key and value
/// may also be strings holding that JSON), or `{"resolved": "..."}`, or a sinkless
/// resolved row `{"table": null, "key": null, "value": {"resolved": "..."}}`; an optional
/// `"partition"` (a Kafka partition) keeps resolved timestamps per partition.
///
/// # Errors
/// A line of another shape, naming the field.
pub fn parse_capture_line(line: &str) -> Result<(u32, FeedMessage), String> {
    let v: Json = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let partition = match obj.get("partition") {
        None | Some(Json::Null) => 0,
        Some(p) => p
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| format!("partition: {p} is not a partition number"))?,
    };
    if obj.contains_key("resolved") {
        return parse_message(None, None, &v).map(|m| (partition, m));
    }
    let value = obj.get("value").ok_or("no \"value\" field (nor \"resolved\")")?;
    let table = match obj.get("table") {
        None | Some(Json::Null) => None,
        Some(Json::String(t)) => Some(t.as_str()),
        Some(other) => return Err(format!("table: {other} is not a string")),
    };
    let key = obj.get("key").filter(|k| !k.is_null());
    parse_message(table, key, value).map(|m| (partition, m))
}

/// One transaction's changes: (table, key text) -> (key, row after).
type TxnChanges = BTreeMap<(String, String), (Scalar, Option<FeedRow>)>;

/// The changes of a changefeed so far, deduplicated, with the watermark.
#[derive(Clone, Debug, Default)]
pub struct FeedLog {
    /// Per commit timestamp, its changes: (table, key) -> row after.
    txns: BTreeMap<Timestamp, TxnChanges>,
    /// Per partition, its highest resolved timestamp.
    resolved: BTreeMap<u32, Timestamp>,
    duplicates: usize,
    late: usize,
    changes: usize,
    /// Partitions that must each have resolved before there is a watermark (Kafka: the
    /// topic's partition count; 0 or 1 for a sinkless feed).
    partitions: u32,
}

impl FeedLog {
    /// An empty log.
    pub fn new() -> Self {
        FeedLog::default()
    }

    /// Adds one message received on `partition` (0 for a sinkless feed). Returns whether it
    /// added a change (a redelivery adds nothing).
    ///
    /// # Errors
    /// Two different changes of one row at one timestamp (a transaction emits only its
    /// last change of a row), naming the row.
    pub fn push(&mut self, partition: u32, message: FeedMessage) -> Result<bool, String> {
        match message {
            FeedMessage::Resolved(ts) => {
                let slot = self.resolved.entry(partition).or_insert(ts);
                *slot = (*slot).max(ts);
                Ok(false)
            }
            FeedMessage::Change(c) => {
                let id = (c.table.clone(), c.key.to_string());
                let txn = self.txns.entry(c.updated).or_default();
                if let Some((_, seen)) = txn.get(&id) {
                    if *seen != c.after {
                        return Err(format!(
                            "{}[{}]: two different changes at {} (a transaction emits one change per row)",
                            c.table, c.key, c.updated
                        ));
                    }
                    self.duplicates += 1;
                    return Ok(false);
                }
                if self.resolved.get(&partition).is_some_and(|r| c.updated <= *r) {
                    // At-least-once allows it only as a redelivery; count it for the report.
                    self.late += 1;
                }
                txn.insert(id, (c.key, c.after));
                self.changes += 1;
                Ok(true)
            }
        }
    }

    /// Expects `partitions` partitions (Kafka: the topic's count): no watermark until each
    /// has sent a resolved timestamp.
    pub fn expect_partitions(&mut self, partitions: u32) {
        self.partitions = partitions;
    }

    /// The watermark: the lowest resolved timestamp over the partitions (`None` before
    /// every expected partition has resolved once).
    pub fn watermark(&self) -> Option<Timestamp> {
        if (self.resolved.len() as u32) < self.partitions {
            return None;
        }
        self.resolved.values().min().copied()
    }

    /// The watermark with `partitions` partitions expected (Kafka: the topic's count).
    pub fn watermark_of(&self, partitions: u32) -> Option<Timestamp> {
        (self.resolved.len() as u32 >= partitions).then(|| self.watermark()).flatten()
    }

    /// The newest commit timestamp seen.
    pub fn last_commit(&self) -> Option<Timestamp> {
        self.txns.keys().next_back().copied()
    }

    /// Whether every change committed at or before `ts` has arrived (the watermark passed it).
    pub fn covers(&self, ts: Timestamp) -> bool {
        self.watermark().is_some_and(|w| w >= ts)
    }

    /// Whether the watermark passed the last change: the certificate is complete.
    pub fn is_complete(&self) -> bool {
        self.last_commit().is_none_or(|c| self.covers(c))
    }

    /// Transactions (distinct commit timestamps) seen.
    pub fn txn_count(&self) -> usize {
        self.txns.len()
    }

    /// Row changes seen, redeliveries left out.
    pub fn change_count(&self) -> usize {
        self.changes
    }

    /// Redeliveries dropped.
    pub fn duplicates(&self) -> usize {
        self.duplicates
    }

    /// New changes that arrived at or below their partition's resolved timestamp (which
    /// CockroachDB promises not to happen).
    pub fn late(&self) -> usize {
        self.late
    }

    /// The log as a [`RawLog`]: one committed transaction per commit timestamp, in HLC
    /// order, `commit_lsn` its position from 1, `commit_time` the wall time in
    /// nanoseconds, `commit_ts` the HLC timestamp, `xid` 0 (a changefeed names no
    /// transaction), rows in (table, key) order.
    pub fn to_raw_log(&self) -> RawLog {
        let mut log = RawLog::new();
        for (i, (ts, changes)) in self.txns.iter().enumerate() {
            let changes = changes
                .iter()
                .map(|((table, _), (key, after))| RowChange {
                    table: Arc::from(table.as_str()),
                    key: key.clone(),
                    row: after.clone(),
                })
                .collect();
            log.push(CommittedTxn {
                xid: 0,
                commit_lsn: i as u64 + 1,
                end_lsn: i as u64 + 1,
                commit_time: i64::try_from(ts.wall).unwrap_or(i64::MAX),
                commit_ts: Some(*ts),
                changes,
            });
        }
        log
    }
}

/// Reads a capture file (one [`parse_capture_line`] per line, blank lines skipped) into a
/// [`FeedLog`].
///
/// # Errors
/// [`RawLogError::Line`] naming the line (field `changefeed`) and what is wrong with it.
pub fn read_capture(input: impl std::io::BufRead) -> Result<FeedLog, RawLogError> {
    let mut log = FeedLog::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| RawLogError::Line { line: i + 1, field: "changefeed".into(), message };
        let (partition, message) = parse_capture_line(&line).map_err(bad)?;
        log.push(partition, message).map_err(bad)?;
    }
    Ok(log)
}

/// Writes one message as a capture-file line (what [`parse_capture_line`] reads).
pub fn capture_line(table: Option<&str>, key: Option<&Json>, value: &Json, partition: Option<u32>) -> String {
    let mut obj = Map::new();
    if let Some(p) = partition {
        obj.insert("partition".into(), p.into());
    }
    obj.insert("table".into(), table.map_or(Json::Null, |t| Json::String(t.into())));
    obj.insert("key".into(), key.cloned().unwrap_or(Json::Null));
    obj.insert("value".into(), value.clone());
    Json::Object(obj).to_string()
}

#[cfg(test)]
#[path = "changefeed_tests.rs"]
mod tests;
