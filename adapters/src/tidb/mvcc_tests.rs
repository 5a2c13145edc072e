//! The MVCC API's answers as TiDB serves them, and the prewrite locks a committed
//! transaction can leave on its secondary rows. Shapes: `GET /mvcc/key/{db}/{table}/{handle}`
//! answers `{"info": MvccInfo}` (TiDB's `docs/tidb_http_api.md`), newer servers wrap it
//! as `{"key": hex, "region_id": N, "value": {"info": MvccInfo}}` (TiDB 7.x); `MvccInfo` is
//! kvrpcpb's (`pingcap/kvproto` `proto/kvrpcpb.proto`: `MvccInfo { MvccLock lock; repeated
//! MvccWrite writes; repeated MvccValue values }`, `MvccLock { Op type; uint64 start_ts;
//! bytes primary; bytes short_value }`, `Op { Put = 0; Del = 1; Lock = 2; Rollback = 3;
//! Insert = 4; PessimisticLock = 5; CheckNotExists = 6 }`), marshalled by Go's
//! `encoding/json` (zero values left out by `omitempty`, bytes as base64).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const ITEMS: TableSpec = TableSpec::integers("items", &["id", "v"]);

/// Row format v2 of `items` with `v` (column id 2) as one byte, base64.
fn row(v: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([128, 0, 1, 0, 0, 0, 2, 1, 0, v])
}

fn write(start: u64, commit: u64, v: u8) -> String {
    format!(r#"{{"start_ts":{start},"commit_ts":{commit},"short_value":"{}"}}"#, row(v))
}

/// The row's primary key as TiDB encodes it (`t{table id}_r{handle}`), base64: what
/// `primary` holds.
const PRIMARY: &str = "dIAAAAAAAABuX3KAAAAAAAAAAQ==";

#[test]
fn a_prewrite_lock_is_reported_and_a_pessimistic_lock_is_not() {
    let locked = format!(
        r#"{{"info":{{"lock":{{"start_ts":105,"primary":"{PRIMARY}","short_value":"{}"}},"writes":[{}]}}}}"#,
        row(12),
        write(10, 20, 0)
    );
    let (versions, lock) = parse_mvcc_row(locked.as_bytes(), &ITEMS, 1).unwrap();
    assert_eq!((versions.len(), lock), (1, Some(PendingLock { start_ts: 105 })), "Put (type left out)");
    for (kind, holds) in
        [("1", true), ("4", true), ("\"Del\"", true), ("2", false), ("5", false), ("6", false)]
    {
        let body = format!(r#"{{"info":{{"lock":{{"type":{kind},"start_ts":105,"primary":"{PRIMARY}"}}}}}}"#);
        let (_, lock) = parse_mvcc_row(body.as_bytes(), &ITEMS, 1).unwrap();
        assert_eq!(lock.is_some(), holds, "lock type {kind}");
    }
    // The wrapped answer of TiDB 7.x carries the lock the same way.
    let wrapped = format!(
        r#"{{"key":"7480000000000000FF6E5F72800000000000000100","region_id":4,"value":{{"info":{{"lock":{{"start_ts":105,"primary":"{PRIMARY}"}}}}}}}}"#
    );
    assert_eq!(parse_mvcc_row(wrapped.as_bytes(), &ITEMS, 1).unwrap().1, Some(PendingLock { start_ts: 105 }));
}

#[test]
fn near_miss_answers_are_refused_naming_the_row_and_record() {
    for (body, needle) in [
        (r#"{"info":{"lock":{"type":0}}}"#.to_string(), "lock without start_ts"),
        (r#"{"info":{"lock":{"type":{"op":0},"start_ts":5}}}"#.to_string(), "lock: type"),
        (r#"{"info":{"writes":{"start_ts":1}}}"#.to_string(), "not the API's JSON"),
        (
            r#"{"info":{"writes":[{"start_ts":100,"short_value":"gAABAAAAAgEACw=="}]}}"#.to_string(),
            "without start_ts or commit_ts",
        ),
        (r#"{"info":{"writes":[{"start_ts":100,"commit_ts":110}]}}"#.to_string(), "neither short_value"),
        // serde would read these arrays as records' fields in order.
        (r#"{"info":{"writes":[[0,100,110,"gAABAAAAAgEACw=="]]}}"#.to_string(), "writes[0]"),
        (r#"{"info":{"lock":[0,105]}}"#.to_string(), "lock is"),
        (r#"{"info":[[],[],null]}"#.to_string(), "info is"),
    ] {
        let e = parse_mvcc_row(body.as_bytes(), &ITEMS, 7).unwrap_err().to_string();
        assert!(e.contains("items[7]") && e.contains(needle), "{body}: {e}");
    }
}

/// Serves the MVCC answers of row 1 in turn (the last one again once they run out).
async fn answers(bodies: Vec<String>) -> (String, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let queue = Arc::new(Mutex::new(VecDeque::from(bodies)));
    let served = Arc::new(Mutex::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let body = {
                let mut q = queue.lock().unwrap();
                if q.len() > 1 {
                    q.pop_front().unwrap()
                } else {
                    q.front().cloned().unwrap()
                }
            };
            *count.lock().unwrap() += 1;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    (format!("http://{address}"), served)
}

/// Issue 33: T (start 105) committed at 110 through its primary key on another row; this
/// secondary row still holds T's prewrite lock and no write record. Read at once, the row
/// lacked T's version, and recovery called a committed write missing. It is read again
/// until the lock is resolved.
#[tokio::test]
async fn a_committed_secondary_row_is_read_again_until_its_lock_is_resolved() {
    let locked = format!(
        r#"{{"info":{{"lock":{{"start_ts":105,"primary":"{PRIMARY}","short_value":"{}"}},"writes":[{}]}}}}"#,
        row(12),
        write(10, 20, 0)
    );
    let resolved = format!(r#"{{"info":{{"writes":[{},{}]}}}}"#, write(105, 110, 12), write(10, 20, 0));
    let (url, served) = answers(vec![locked.clone(), locked, resolved]).await;
    let capture = MvccCapture::new(&url, "test", &ITEMS, 50).unwrap();
    let versions = capture.versions(1).await.unwrap();
    let writers: Vec<(u64, u64)> = versions.iter().map(|v| (v.start_ts, v.commit_ts)).collect();
    assert_eq!(writers, [(10, 20), (105, 110)]);
    assert_eq!(*served.lock().unwrap(), 3);
}

#[tokio::test]
async fn a_lock_that_stays_is_an_error_naming_it_and_an_old_one_is_ignored() {
    let locked = format!(
        r#"{{"info":{{"lock":{{"start_ts":105,"primary":"{PRIMARY}"}},"writes":[{}]}}}}"#,
        write(10, 20, 0)
    );
    let (url, _) = answers(vec![locked]).await;
    let capture = MvccCapture::new(&url, "test", &ITEMS, 50).unwrap().lock_wait(Duration::from_millis(300));
    let e = capture.versions(1).await.unwrap_err().to_string();
    assert!(e.contains("items[1] still holds a lock of the transaction that started at 105"), "{e}");
    // A lock of a transaction older than the run (before the baseline) is not the run's.
    let capture = MvccCapture::new(&url, "test", &ITEMS, 200).unwrap().lock_wait(Duration::from_millis(300));
    assert_eq!(capture.versions(1).await.unwrap().len(), 1);
}
