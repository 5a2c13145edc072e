//! TiDB (issue 18): the MVCC capture, timestamp-ordering recovery and the checkers, on
//! payloads shaped exactly like TiDB's, served by a loopback HTTP server; and the whole
//! `isocert run --db tidb://...` against a live cluster when `ISOCERT_TIDB_URL` is set
//! (otherwise a visible `SKIPPED:` line).
//!
//! Where the shapes come from:
//! - `GET /mvcc/key/{db}/{table}/{handle}`: TiDB's `docs/tidb_http_api.md` answers
//!   `{"info":{"writes":[{"commit_ts":N,"short_value":"base64","start_ts":N}]}}`; TiDB 7.x
//!   wraps it as `{"key":"hex","region_id":N,"value":{"info":{...}}}`; record types are
//!   kvrpcpb `Op` numbers (Put = 0 left out by `omitempty`, Del = 1, Lock = 2, Rollback = 3);
//! - `short_value`: row format v2 (TiDB's `pkg/util/rowcodec`: 128, flags, u16 counts,
//!   u8 column ids, u16 end offsets, little-endian integers of 1/2/4/8 bytes), the integer
//!   primary key being the handle and not stored;
//! - the session facts: `@@tidb_current_ts`, `@@tidb_last_txn_info`'s `commit_ts` and
//!   `@@tidb_last_query_info`'s `for_update_ts`, as `TiDbTxnFacts` / `TiDbOpFacts` record them.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use isocert_adapters::tidb::MvccCapture;
use isocert_adapters::{ChangeCapture, TableSpec};
use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel};
use isocert_history::v1;
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_recovery::recover_tidb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TABLE: TableSpec = TableSpec::integers("items", &["id", "v"]);

/// Row format v2 of `items` with `v` (column id 2).
fn row_v2(v: i64) -> String {
    let mut bytes = vec![128u8, 0, 1, 0, 0, 0, 2];
    let data: Vec<u8> =
        if i64::from(v as i8) == v { vec![v as u8] } else { (v as i32).to_le_bytes().to_vec() };
    bytes.extend((data.len() as u16).to_le_bytes());
    bytes.extend(data);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The MVCC answer for one row: `(type, start_ts, commit_ts, Some(v))` records, in the
/// older plain shape or the newer wrapped one.
fn answer(records: &[(Option<u8>, u64, u64, Option<i64>)], wrapped: bool) -> String {
    let writes: Vec<String> = records
        .iter()
        .map(|(kind, start, commit, v)| {
            let mut fields = vec![format!("\"start_ts\":{start}"), format!("\"commit_ts\":{commit}")];
            if let Some(k) = kind {
                fields.push(format!("\"type\":{k}"));
            }
            if let Some(v) = v {
                fields.push(format!("\"short_value\":\"{}\"", row_v2(*v)));
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    let info = format!("{{\"writes\":[{}]}}", writes.join(","));
    if wrapped {
        format!("{{\"key\":\"7480000000000000FF3C5F72800000000000000100\",\"region_id\":4,\"value\":{{\"info\":{info}}}}}")
    } else {
        format!("{{\"info\":{info}}}")
    }
}

/// Serves `routes` (path -> JSON body) on a loopback port; other paths get 404.
async fn status_port(routes: HashMap<String, String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&request).lines().next().unwrap_or_default().to_string();
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                let (status, body) = match routes.get(&path) {
                    Some(body) => ("200 OK", body.clone()),
                    None => ("404 Not Found", "not found".to_string()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{address}")
}

const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"mysql","initial":[{"table":"items","key":1,"value":{"id":1,"v":0}},{"table":"items","key":2,"value":{"id":2,"v":0}}]}"#;

/// T1 and T2 run concurrently (T2 starts at 105, before T1 commits at 110); T3 reads
/// after both. `t2_writes_1` makes T2 also overwrite row 1, which T1 wrote: a lost update.
fn history(t2_writes_1: bool) -> String {
    let t2_extra = if t2_writes_1 {
        r#",{"f":"r","table":"items","key":1,"value":{"id":1,"v":0}},{"f":"w","table":"items","key":1,"value":{"id":1,"v":12}}"#
    } else {
        ""
    };
    [
        HEADER.to_string(),
        r#"{"id":1,"session":1,"ops":[{"f":"r","table":"items","key":1,"value":{"id":1,"v":0}},{"f":"w","table":"items","key":1,"value":{"id":1,"v":11}}],"meta":{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":100,"commit_ts":110}}"#.to_string(),
        format!(
            r#"{{"id":2,"session":2,"ops":[{{"f":"select","table":"items","where":"v >= 0","rows":[{{"key":1,"value":{{"id":1,"v":0}}}},{{"key":2,"value":{{"id":2,"v":0}}}}]}},{{"f":"w","table":"items","key":2,"value":{{"id":2,"v":22}}}}{t2_extra}],"meta":{{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":105,"commit_ts":120}}}}"#
        ),
        r#"{"id":3,"session":3,"ops":[{"f":"aggregate","table":"items","where":"v > 0","function":"count","result":2},{"f":"r","table":"items","key":2,"value":{"id":2,"v":22}}],"meta":{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":130}}"#.to_string(),
    ]
    .join("\n")
}

/// The status port's answers for that history: the initial load at 10/20 (before the
/// capture's baseline 50), a lock record, and the run's versions.
fn routes(t2_writes_1: bool) -> HashMap<String, String> {
    let mut key1 = vec![(None, 10, 20, Some(0)), (Some(2), 90, 95, None), (None, 100, 110, Some(11))];
    if t2_writes_1 {
        key1.push((None, 105, 120, Some(12)));
    }
    let key2 = vec![(None, 105, 120, Some(22)), (Some(3), 107, 107, None), (Some(0), 10, 20, Some(0))];
    HashMap::from([
        (
            "/status".to_string(),
            r#"{"connections":0,"version":"8.0.11-TiDB-v7.5.0","git_hash":"x"}"#.to_string(),
        ),
        ("/schema/test/items".to_string(), r#"{"id":110,"name":{"O":"items","L":"items"}}"#.to_string()),
        ("/mvcc/key/test/items/1".to_string(), answer(&key1, false)),
        ("/mvcc/key/test/items/2".to_string(), answer(&key2, true)),
    ])
}

/// Capture + recovery + check at snapshot isolation; returns the anomaly kinds.
async fn verdict(t2_writes_1: bool) -> Vec<AnomalyKind> {
    let url = status_port(routes(t2_writes_1)).await;
    let mut capture = MvccCapture::new(&url, "test", &TABLE, 50).unwrap();
    capture.wait_started(Duration::from_secs(5)).await.expect("the status port answers");
    let mut h = v1::read_history(history(t2_writes_1).as_bytes()).expect("history");
    let log = capture.finish(Some(&h)).await.expect("versions read");
    assert_eq!(log.len(), 2, "T1 and T2: the load, the lock and the rollback are no versions");
    let interpreter = Interpreter::new(&h).unwrap();
    let matcher =
        |h: &isocert_history::History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = recover_tidb(&mut h, &log, &matcher).expect("recovers");
    let interpreter = Interpreter::new(&h).unwrap();
    let report =
        check(&h, &recovered.certificate, IsolationLevel::SnapshotIsolation, CheckerKind::Emme, &interpreter)
            .unwrap();
    report.anomalies.iter().map(|a| a.kind).collect()
}

#[tokio::test]
async fn mvcc_payloads_become_a_certificate_that_snapshot_isolation_accepts() {
    assert_eq!(verdict(false).await, vec![]);
}

#[tokio::test]
async fn a_lost_update_in_the_mvcc_versions_is_rejected() {
    // Two concurrent writers of row 1 both committed: snapshot isolation's G-SI.
    assert_eq!(verdict(true).await, vec![AnomalyKind::GSi]);
}

/// Issue 33: a pessimistic REPEATABLE READ transaction's UPDATE is a "current read" at its
/// `for_update_ts` (TiDB's `pessimistic-transaction.md`; `transaction-isolation-levels.md`:
/// the current read is non-repeatable). T1 (start 100) reads row 1 = 0 from its snapshot, T2
/// (start 105) sets it to 12 and commits at 110, T1's UPDATE waits for no lock, reads 12 at
/// `for_update_ts` 112 and writes 11, committing at 115. Lost-update shaped, and TiDB's
/// documented behaviour: the level `TiDb::checked_as` gives pessimistic runs (read committed)
/// accepts it; snapshot isolation refuses it (G-SI), as it does the optimistic twin above,
/// where TiDB itself would have aborted T1.
#[tokio::test]
async fn a_pessimistic_lost_update_is_checked_at_the_level_tidb_documents() {
    use isocert_adapters::{Database, TiDb};

    let history = [
        HEADER,
        r#"{"id":1,"session":1,"ops":[{"f":"r","table":"items","key":1,"value":{"id":1,"v":0}},{"f":"w","table":"items","key":1,"value":{"id":1,"v":11}}],"meta":{"isolation":"repeatable-read","txn_mode":"pessimistic","start_ts":100,"commit_ts":115}}"#,
        r#"{"id":2,"session":2,"ops":[{"f":"w","table":"items","key":1,"value":{"id":1,"v":12}}],"meta":{"isolation":"repeatable-read","txn_mode":"pessimistic","start_ts":105,"commit_ts":110}}"#,
    ]
    .join("\n");
    let key1 = vec![(None, 10, 20, Some(0)), (None, 105, 110, Some(12)), (None, 100, 115, Some(11))];
    let mut routes = routes(false);
    routes.insert("/mvcc/key/test/items/1".to_string(), answer(&key1, false));
    routes.insert("/mvcc/key/test/items/2".to_string(), answer(&[(None, 10, 20, Some(0))], true));
    let url = status_port(routes).await;
    let mut capture = MvccCapture::new(&url, "test", &TABLE, 50).unwrap();
    capture.wait_started(Duration::from_secs(5)).await.unwrap();
    let mut h = v1::read_history(history.as_bytes()).expect("history");
    let log = capture.finish(Some(&h)).await.expect("versions read");
    let interpreter = Interpreter::new(&h).unwrap();
    let matcher =
        |h: &isocert_history::History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = recover_tidb(&mut h, &log, &matcher).expect("recovers");
    let interpreter = Interpreter::new(&h).unwrap();
    let kinds = |level| -> Vec<AnomalyKind> {
        check(&h, &recovered.certificate, level, CheckerKind::Emme, &interpreter)
            .unwrap()
            .anomalies
            .iter()
            .map(|a| a.kind)
            .collect()
    };
    let pessimistic = TiDb::from_url("tidb://root@127.0.0.1:4000/test?txn_mode=pessimistic").unwrap();
    let documented = pessimistic.checked_as(IsolationLevel::RepeatableRead);
    assert_eq!(documented, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(documented), vec![], "TiDB's documented current read");
    assert_eq!(kinds(IsolationLevel::SnapshotIsolation), vec![AnomalyKind::GSi]);
}

#[tokio::test]
async fn a_status_port_that_is_not_there_is_named_before_the_run() {
    let mut capture = MvccCapture::new("http://127.0.0.1:9", "test", &TABLE, 50).unwrap();
    let e = capture.wait_started(Duration::from_secs(5)).await.unwrap_err().to_string();
    assert!(e.contains("status port") && e.contains("?status=HOST:PORT"), "{e}");
    // A body that is not the API's names the row.
    let url =
        status_port(HashMap::from([("/mvcc/key/test/items/1".to_string(), "{\"info\":7}".to_string())]))
            .await;
    let capture = MvccCapture::new(&url, "test", &TABLE, 50).unwrap();
    let e = capture.versions(1).await.unwrap_err().to_string();
    assert!(e.contains("items[1]") && e.contains("JSON"), "{e}");
}

/// `isocert run` against a live TiDB, both transaction modes, kv and predicate workloads.
#[test]
fn live_tidb_runs_certify_snapshot_isolation() {
    let Some(url) = isocert_testsupport::TIDB.live_url() else { return };
    let status = std::env::var("ISOCERT_TIDB_STATUS_URL").ok().filter(|s| !s.is_empty());
    for mode in ["pessimistic", "optimistic"] {
        for workload in ["kv", "predicate"] {
            let mut full = format!("{url}{}txn_mode={mode}", if url.contains('?') { '&' } else { '?' });
            if let Some(s) = &status {
                full.push_str(&format!("&status={s}"));
            }
            let out = tempfile::tempdir().unwrap();
            let o = Command::new(isocert_tests::isocert_bin())
                .args(["run", "--db", &full, "--workload", workload, "--isolation", "repeatable-read"])
                .args(["--txns", "400", "--sessions", "4", "--reset-tables", "--out"])
                .arg(out.path())
                .output()
                .unwrap();
            let text =
                format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            assert_eq!(o.status.code(), Some(0), "{mode} {workload}:\n{text}");
            assert!(out.path().join("certificate.json").exists());
        }
    }
}

/// `isocert run --emit` against a live TiDB (issue 36): optimistic kv at REPEATABLE READ is
/// published while it runs with the timestamps the sessions recorded, checked by one member
/// at snapshot isolation, whose verdict is offline Chronos's on the saved history; the run
/// found every published timestamp equal to the recovered one (else it exits 2).
#[cfg(feature = "kafka")]
#[test]
fn live_tidb_runs_are_published_while_they_run() {
    let Some(url) = isocert_testsupport::TIDB.live_url() else { return };
    let Some(broker) = isocert_testsupport::KafkaBroker::start() else { return };
    let full = format!("{url}{}txn_mode=optimistic", if url.contains('?') { '&' } else { '?' });
    let dir = tempfile::tempdir().unwrap();
    isocert_tests::assert_live_kv_run_checked_online(
        broker.bootstrap(),
        dir.path(),
        &full,
        "repeatable-read",
        "400",
        "si",
    );
}
