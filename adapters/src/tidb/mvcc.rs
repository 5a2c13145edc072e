//! TiDB's version source: the status port's MVCC API, `GET /mvcc/key/{db}/{table}/{handle}`,
//! read for every row the history names once the run is over.
//!
//! The answer (TiDB's `docs/tidb_http_api.md`; newer servers wrap it as
//! `{"key":..., "region_id":..., "value": {"info": ...}}`) lists the row's MVCC records in
//! `info.writes`: `start_ts`, `commit_ts`, `type` (kvrpcpb `Op`: Put = 0, left out by Go's
//! `omitempty`; Del = 1; Lock = 2; Rollback = 3) and, for a small value, `short_value`
//! (base64 of the stored row, `row_codec.rs`); a larger value is in `info.values`
//! (`start_ts`, `value`). Lock and Rollback records install no version and are dropped.
//!
//! The records of all rows, grouped by `(commit_ts, start_ts)`, become the run's
//! [`RawLog`]: one committed transaction per writer in commit-timestamp order, `xid` =
//! `start_ts` (what the client recorded as `@@tidb_current_ts`), `commit_time` =
//! `commit_ts`. Versions committed before the capture started are the initial rows.
//!
//! TiKV garbage-collects versions older than `tidb_gc_life_time` (10 minutes by default);
//! a run longer than that loses its early versions. isocert never changes the setting on
//! a user's cluster: docs/TIDB.md says to raise it for long runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use isocert_history::{History, Scalar, Timestamp};
use isocert_recovery::{CommittedTxn, RawLog, RowChange};
use serde::Deserialize;
use tokio::task::JoinSet;

use super::row_codec::decode_row;
use crate::seam::{ChangeCapture, TableSpec};
use crate::AdapterError;

/// Requests in flight at once while reading the versions.
const CONCURRENT_REQUESTS: usize = 16;

/// One version of a row from the MVCC API: its writer's timestamps and the row it
/// installed (`None`: deleted), as `(column, value)` in the table's column order.
#[derive(Clone, Debug, PartialEq)]
pub struct MvccVersion {
    /// The writer's start timestamp.
    pub start_ts: u64,
    /// The writer's commit timestamp.
    pub commit_ts: u64,
    /// The row, or `None` for a delete.
    pub row: Option<Vec<(Arc<str>, Scalar)>>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    info: Option<Info>,
    value: Option<Wrapped>,
}

#[derive(Debug, Deserialize)]
struct Wrapped {
    info: Option<Info>,
}

#[derive(Debug, Default, Deserialize)]
struct Info {
    #[serde(default)]
    writes: Vec<Write>,
    #[serde(default)]
    values: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct Write {
    #[serde(rename = "type", default)]
    kind: Option<serde_json::Value>,
    #[serde(default)]
    start_ts: u64,
    #[serde(default)]
    commit_ts: u64,
    short_value: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Value {
    #[serde(default)]
    start_ts: u64,
    value: Option<String>,
}

/// What a write record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Put,
    Delete,
    /// Lock, Rollback and the rest: no version.
    Other,
}

fn kind(v: Option<&serde_json::Value>) -> Result<Kind, String> {
    Ok(match v {
        None | Some(serde_json::Value::Null) => Kind::Put,
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(0) => Kind::Put,
            Some(1) => Kind::Delete,
            Some(_) => Kind::Other,
            None => return Err(format!("type {n} is not a record type")),
        },
        Some(serde_json::Value::String(s)) => match s.as_str() {
            "Put" => Kind::Put,
            "Del" | "Delete" => Kind::Delete,
            _ => Kind::Other,
        },
        Some(other) => return Err(format!("type {other} is not a record type")),
    })
}

/// Parses one MVCC API answer for the row with primary key `key` of `table`: its versions,
/// oldest first.
///
/// # Errors
/// An answer that is not the API's JSON, a Put whose value is missing or not a row of
/// integers, each naming the record.
pub fn parse_mvcc(body: &[u8], table: &TableSpec, key: i64) -> Result<Vec<MvccVersion>, AdapterError> {
    let bad = |message: String| AdapterError::Protocol {
        message: format!("TiDB's MVCC API for {}[{key}]: {message}", table.name),
    };
    let answer: Answer =
        serde_json::from_slice(body).map_err(|e| bad(format!("not the API's JSON ({e})")))?;
    let info = answer.info.or(answer.value.and_then(|w| w.info)).unwrap_or_default();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut versions = Vec::new();
    for (i, w) in info.writes.iter().enumerate() {
        let at = |m: String| bad(format!("writes[{i}] (start_ts {}): {m}", w.start_ts));
        let row = match kind(w.kind.as_ref()).map_err(&at)? {
            Kind::Other => continue,
            Kind::Delete => None,
            Kind::Put => {
                let encoded = match &w.short_value {
                    Some(v) => v.clone(),
                    None => info
                        .values
                        .iter()
                        .find(|v| v.start_ts == w.start_ts)
                        .and_then(|v| v.value.clone())
                        .ok_or_else(|| {
                            at("a Put with neither short_value nor a value of its start_ts".into())
                        })?,
                };
                let bytes =
                    b64.decode(encoded.as_bytes()).map_err(|e| at(format!("value is not base64 ({e})")))?;
                let decoded = decode_row(&bytes).map_err(|e| at(e.to_string()))?;
                Some(row_of(table, key, &decoded).map_err(at)?)
            }
        };
        if w.commit_ts == 0 || w.start_ts == 0 {
            return Err(at("a version without start_ts or commit_ts".into()));
        }
        versions.push(MvccVersion { start_ts: w.start_ts, commit_ts: w.commit_ts, row });
    }
    versions.sort_by_key(|v| (v.commit_ts, v.start_ts));
    Ok(versions)
}

/// The decoded `(column id, value)` pairs as the table's row: TiDB numbers columns from 1
/// in table order; the integer primary key is the row's handle, not stored in the value.
fn row_of(
    table: &TableSpec,
    key: i64,
    decoded: &[(u32, Option<i64>)],
) -> Result<Vec<(Arc<str>, Scalar)>, String> {
    let mut row: Vec<(Arc<str>, Scalar)> =
        table.columns.iter().map(|c| (Arc::from(*c), Scalar::Null)).collect();
    row[0].1 = Scalar::Int(key);
    for &(id, value) in decoded {
        let slot = (id as usize).checked_sub(1).and_then(|i| row.get_mut(i)).ok_or_else(|| {
            format!("column id {id}, but {} has {} columns", table.name, table.columns.len())
        })?;
        slot.1 = value.map_or(Scalar::Null, Scalar::Int);
    }
    Ok(row)
}

/// The versions of many rows as a [`RawLog`]: one committed transaction per writer, in
/// `(commit_ts, start_ts)` order, leaving out what committed at or before `baseline_ts`.
pub fn versions_to_log(table: &TableSpec, versions: &[(i64, Vec<MvccVersion>)], baseline_ts: u64) -> RawLog {
    let mut writers: BTreeMap<(u64, u64), Vec<RowChange>> = BTreeMap::new();
    for (key, list) in versions {
        for v in list.iter().filter(|v| v.commit_ts > baseline_ts) {
            writers.entry((v.commit_ts, v.start_ts)).or_default().push(RowChange {
                table: Arc::from(table.name),
                key: Scalar::Int(*key),
                row: v.row.clone(),
            });
        }
    }
    let mut log = RawLog::new();
    for (position, ((commit_ts, start_ts), changes)) in writers.into_iter().enumerate() {
        log.push(CommittedTxn {
            xid: start_ts,
            commit_lsn: position as u64 + 1,
            end_lsn: position as u64 + 1,
            commit_time: commit_ts as i64,
            commit_ts: Some(Timestamp::new(commit_ts)),
            changes,
        });
    }
    log
}

/// Reads the versions of a table's rows from the status port after the run.
#[derive(Debug)]
pub struct MvccCapture {
    client: reqwest::Client,
    status_url: String,
    database: String,
    table: TableSpec,
    baseline_ts: u64,
}

impl MvccCapture {
    /// A capture of `table` in `database` through the status port at `status_url`;
    /// versions committed at or before `baseline_ts` (a timestamp taken after the table
    /// was loaded) are the initial rows.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        status_url: &str,
        database: &str,
        table: &TableSpec,
        baseline_ts: u64,
    ) -> Result<Self, AdapterError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| AdapterError::Protocol { message: format!("building the HTTP client: {e}") })?;
        Ok(MvccCapture {
            client,
            status_url: status_url.trim_end_matches('/').to_string(),
            database: database.to_string(),
            table: *table,
            baseline_ts,
        })
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, AdapterError> {
        get(&self.client, &format!("{}{path}", self.status_url)).await
    }

    /// The versions of the row with primary key `key`.
    ///
    /// # Errors
    /// The request fails or the answer is not the API's.
    pub async fn versions(&self, key: i64) -> Result<Vec<MvccVersion>, AdapterError> {
        let body = self.get(&format!("/mvcc/key/{}/{}/{key}", self.database, self.table.name)).await?;
        parse_mvcc(&body, &self.table, key)
    }
}

async fn get(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, AdapterError> {
    let failed = |e: String| AdapterError::Protocol { message: format!("TiDB status port: GET {url}: {e}") };
    let response = client.get(url).send().await.map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| failed(e.to_string()))?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        return Err(failed(format!("HTTP {status}: {text}")));
    }
    Ok(body.to_vec())
}

impl ChangeCapture for MvccCapture {
    async fn wait_started(&mut self, _timeout: Duration) -> Result<(), AdapterError> {
        // Fail before the workload runs when the status port is not there or does not see
        // the table.
        self.get("/status").await.map_err(|e| AdapterError::Protocol {
            message: format!(
                "{e} (the MVCC API is on TiDB's status port, 10080 by default: name it with ?status=HOST:PORT in the tidb:// URL)"
            ),
        })?;
        self.get(&format!("/schema/{}/{}", self.database, self.table.name)).await.map(|_| ())
    }

    fn recorded(&self) -> usize {
        0
    }

    async fn finish(self, history: Option<&History>) -> Result<RawLog, AdapterError> {
        let Some(h) = history else { return Ok(RawLog::new()) };
        let Some(table) = h.table_by_name(self.table.name) else { return Ok(RawLog::new()) };
        let mut keys: Vec<i64> = (0..h.object_count())
            .map(|i| h.object(isocert_history::ObjId::from_index(i)))
            .filter(|o| o.table == table)
            .filter_map(|o| match o.key {
                Scalar::Int(k) => Some(k),
                _ => None,
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let this = Arc::new(self);
        let mut versions: Vec<(i64, Vec<MvccVersion>)> = Vec::with_capacity(keys.len());
        let mut tasks = JoinSet::new();
        for key in keys {
            if tasks.len() >= CONCURRENT_REQUESTS {
                let done = tasks.join_next().await.expect("a task is running");
                versions.push(done.map_err(|e| AdapterError::Protocol { message: e.to_string() })??);
            }
            let capture = Arc::clone(&this);
            tasks.spawn(async move { capture.versions(key).await.map(|v| (key, v)) });
        }
        while let Some(done) = tasks.join_next().await {
            versions.push(done.map_err(|e| AdapterError::Protocol { message: e.to_string() })??);
        }
        versions.sort_by_key(|(k, _)| *k);
        Ok(versions_to_log(&this.table, &versions, this.baseline_ts))
    }
}
