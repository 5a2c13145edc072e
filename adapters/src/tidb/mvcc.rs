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
//! `info.lock` (kvrpcpb `MvccLock`: `type`, `start_ts`, `primary`, ...) is a Percolator lock
//! still on the row. A transaction commits when its primary key does; TiKV commits the
//! other keys afterwards, so a committed transaction's secondary row can hold a prewrite
//! lock (type Put, Del or Insert) and no write record yet, and reading it then would call a
//! committed write missing. Such a row is read again, after a SQL read of the row through
//! the TiDB server (which resolves the lock from the primary's status once it expires), up to
//! 30 s; a row still locked then is an error naming the lock, never a missing write.
//! Pessimistic locks (type PessimisticLock) hold no data and are ignored.
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
/// How long a row's prewrite lock may take to be resolved before the read fails.
const LOCK_WAIT: Duration = Duration::from_secs(30);

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
    lock: Option<Lock>,
}

#[derive(Debug, Deserialize)]
struct Lock {
    #[serde(rename = "type", default)]
    kind: Option<serde_json::Value>,
    #[serde(default)]
    start_ts: u64,
}

/// A Percolator lock left on a row by a transaction whose outcome TiKV has not yet written
/// into the row (a prewrite lock: its data is a write in flight or committed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingLock {
    /// The locking transaction's start timestamp.
    pub start_ts: u64,
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
/// As [`parse_mvcc_row`].
pub fn parse_mvcc(body: &[u8], table: &TableSpec, key: i64) -> Result<Vec<MvccVersion>, AdapterError> {
    parse_mvcc_row(body, table, key).map(|(versions, _)| versions)
}

/// Parses one MVCC API answer: the row's versions, oldest first, and the prewrite lock on
/// it, if any.
///
/// # Errors
/// An answer that is not the API's JSON, a Put whose value is missing or not a row of
/// integers, a lock without a start timestamp, each naming the record.
pub fn parse_mvcc_row(
    body: &[u8],
    table: &TableSpec,
    key: i64,
) -> Result<(Vec<MvccVersion>, Option<PendingLock>), AdapterError> {
    let bad = |message: String| AdapterError::Protocol {
        message: format!("TiDB's MVCC API for {}[{key}]: {message}", table.name),
    };
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("not the API's JSON ({e})")))?;
    records_are_objects(&json).map_err(|m| bad(format!("not the API's JSON ({m})")))?;
    let answer: Answer =
        serde_json::from_value(json).map_err(|e| bad(format!("not the API's JSON ({e})")))?;
    let info = answer.info.or(answer.value.and_then(|w| w.info)).unwrap_or_default();
    let lock = match &info.lock {
        None => None,
        Some(l) => {
            if l.start_ts == 0 {
                return Err(bad("a lock without start_ts".into()));
            }
            lock_holds_data(l.kind.as_ref())
                .map_err(|m| bad(format!("lock: {m}")))?
                .then_some(PendingLock { start_ts: l.start_ts })
        }
    };
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
    Ok((versions, lock))
}

/// Checks that the answer and its records are JSON objects: serde reads a struct from an
/// array too (`[100, 110]` as a record's fields in order), which no TiDB answer is.
fn records_are_objects(answer: &serde_json::Value) -> Result<(), String> {
    let object = |v: &serde_json::Value, what: &str| {
        if v.is_object() || v.is_null() {
            Ok(())
        } else {
            Err(format!("{what} is {v}, not an object"))
        }
    };
    object(answer, "the answer")?;
    let infos = [answer.get("info"), answer.get("value"), answer.pointer("/value/info")];
    for info in infos.into_iter().flatten() {
        object(info, "info")?;
        if let Some(lock) = info.get("lock") {
            object(lock, "lock")?;
        }
        for list in ["writes", "values"] {
            if let Some(serde_json::Value::Array(records)) = info.get(list) {
                for (i, r) in records.iter().enumerate() {
                    object(r, &format!("{list}[{i}]"))?;
                }
            }
        }
    }
    Ok(())
}

/// Whether a lock of this kvrpcpb `Op` carries a write (Put = 0 or absent, Del = 1,
/// Insert = 4; names as TiDB's JSON may spell them), not a bare lock (Lock = 2,
/// PessimisticLock = 5, ...).
fn lock_holds_data(v: Option<&serde_json::Value>) -> Result<bool, String> {
    Ok(match v {
        None | Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(op) => matches!(op, 0 | 1 | 4),
            None => return Err(format!("type {n} is not a lock type")),
        },
        Some(serde_json::Value::String(s)) => matches!(s.as_str(), "Put" | "Del" | "Delete" | "Insert"),
        Some(other) => return Err(format!("type {other} is not a lock type")),
    })
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
    /// The MySQL URL a SQL read of a locked row goes to (it makes TiDB resolve the lock).
    resolve_url: Option<String>,
    /// How long a lock may take to be resolved.
    lock_wait: Duration,
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
            resolve_url: None,
            lock_wait: LOCK_WAIT,
        })
    }

    /// Reads a row that holds a prewrite lock through the TiDB server at `mysql_url` too
    /// (`SELECT` by key), which resolves a lock whose transaction's primary is settled.
    pub fn resolving_locks_through(mut self, mysql_url: &str) -> Self {
        self.resolve_url = Some(mysql_url.to_string());
        self
    }

    /// How long a row's lock may take to be resolved (30 s unless set).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, AdapterError> {
        get(&self.client, &format!("{}{path}", self.status_url)).await
    }

    /// The versions of the row with primary key `key`, once no prewrite lock of a
    /// transaction that began after the baseline is left on it.
    ///
    /// # Errors
    /// The request fails, the answer is not the API's, or a lock stays longer than the
    /// lock wait.
    pub async fn versions(&self, key: i64) -> Result<Vec<MvccVersion>, AdapterError> {
        let path = format!("/mvcc/key/{}/{}/{key}", self.database, self.table.name);
        let deadline = tokio::time::Instant::now() + self.lock_wait;
        let mut pause = Duration::from_millis(100);
        loop {
            let (versions, lock) = parse_mvcc_row(&self.get(&path).await?, &self.table, key)?;
            let Some(lock) = lock.filter(|l| l.start_ts > self.baseline_ts) else { return Ok(versions) };
            if tokio::time::Instant::now() >= deadline {
                return Err(AdapterError::Protocol {
                    message: format!(
                        "{}[{key}] still holds a lock of the transaction that started at {} after {:?}: \
                         its outcome is not written into the row yet, so its version cannot be read \
                         (read the row through TiDB, e.g. SELECT it, and run `isocert recover` again)",
                        self.table.name, lock.start_ts, self.lock_wait
                    ),
                });
            }
            tracing::debug!("{}[{key}]: lock of {}; reading it again", self.table.name, lock.start_ts);
            if let Some(url) = &self.resolve_url {
                if let Err(e) = self.read_through_tidb(url, key).await {
                    tracing::debug!("{}[{key}]: {e}", self.table.name);
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// `SELECT` the row through TiDB: a read that meets a lock resolves it from the
    /// primary key's status (commits the row if the primary committed, rolls it back once
    /// the lock expired otherwise).
    async fn read_through_tidb(&self, url: &str, key: i64) -> Result<(), String> {
        use mysql_async::prelude::Queryable;
        let opts = mysql_async::Opts::from_url(url).map_err(|e| e.to_string())?;
        let mut conn = mysql_async::Conn::new(opts).await.map_err(|e| e.to_string())?;
        let sql = format!(
            "SELECT * FROM {} WHERE {} = {key}",
            crate::mysql_sql::quote(self.table.name),
            crate::mysql_sql::quote(self.table.pk())
        );
        let outcome = conn.query_drop(&sql).await.map_err(|e| format!("{sql}: {e}"));
        let _ = conn.disconnect().await;
        outcome
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

#[cfg(test)]
#[path = "mvcc_tests.rs"]
mod tests;
