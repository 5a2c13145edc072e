//! The CockroachDB changefeed capture over real pgwire, against a loopback server that
//! speaks the protocol (startup, simple queries, rows) the way CockroachDB answers a
//! sinkless changefeed: `CREATE CHANGEFEED ...` returns a row description `(table, key,
//! value)` and then rows for as long as the connection lives (docs "Create and Configure
//! Changefeeds", sinkless changefeeds; BYTES columns in pgwire's text format are `\x` hex).
//! The first feed connection breaks after a resolved timestamp; the capture must reopen
//! the feed from that watermark, drop the redelivered change and wait for a resolved
//! timestamp past the end of the run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use isocert_adapters::{CaptureOptions, ChangeCapture, CockroachDb, Database, TableSpec};
use isocert_history::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TABLE: TableSpec = TableSpec::integers("items", &["id", "v"]);
const CURSOR: &str = "1700000000000000000.0000000000";
const A: &str = "1700000001000000000.0000000000";
const B: &str = "1700000002000000000.0000000003";
const C: &str = "1700000003000000000.0000000000";
const END: &str = "1700000003500000000.0000000000";
const RESOLVED: &str = "1700000004000000000.0000000000";

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend(((body.len() + 4) as u32).to_be_bytes());
    out.extend(body);
    out
}

fn row_description(names: &[&str]) -> Vec<u8> {
    let mut body = (names.len() as u16).to_be_bytes().to_vec();
    for name in names {
        body.extend(name.as_bytes());
        body.push(0);
        body.extend(0u32.to_be_bytes()); // table oid
        body.extend(0u16.to_be_bytes()); // column number
        body.extend(25u32.to_be_bytes()); // type: text
        body.extend((-1i16).to_be_bytes());
        body.extend((-1i32).to_be_bytes());
        body.extend(0u16.to_be_bytes()); // text format
    }
    message(b'T', &body)
}

fn data_row(values: &[Option<String>]) -> Vec<u8> {
    let mut body = (values.len() as u16).to_be_bytes().to_vec();
    for v in values {
        match v {
            None => body.extend((-1i32).to_be_bytes()),
            Some(v) => {
                body.extend((v.len() as u32).to_be_bytes());
                body.extend(v.as_bytes());
            }
        }
    }
    message(b'D', &body)
}

fn hex(text: &str) -> String {
    format!("\\x{}", text.bytes().map(|b| format!("{b:02x}")).collect::<String>())
}

fn change(key: i64, v: Option<i64>, at: &str) -> Vec<u8> {
    let after = v.map_or("null".to_string(), |v| format!("{{\"id\": {key}, \"v\": {v}}}"));
    let value =
        format!(r#"{{"after": {after}, "before": null, "mvcc_timestamp": "{at}", "updated": "{at}"}}"#);
    data_row(&[Some("items".into()), Some(hex(&format!("[{key}]"))), Some(hex(&value))])
}

fn resolved(at: &str) -> Vec<u8> {
    data_row(&[None, None, Some(hex(&format!(r#"{{"resolved": "{at}"}}"#)))])
}

const READY: &[u8] = &[b'Z', 0, 0, 0, 5, b'I'];

/// What the server saw: the changefeed statements, in order.
type Seen = Arc<Mutex<Vec<String>>>;

async fn serve(mut socket: TcpStream, seen: Seen, clock: Arc<Mutex<Vec<&'static str>>>) {
    // Startup: length, protocol 3.0, parameters.
    let mut len = [0u8; 4];
    if socket.read_exact(&mut len).await.is_err() {
        return;
    }
    let mut startup = vec![0u8; u32::from_be_bytes(len) as usize - 4];
    socket.read_exact(&mut startup).await.unwrap();
    let mut hello = message(b'R', &0u32.to_be_bytes()); // AuthenticationOk
    hello.extend(READY);
    socket.write_all(&hello).await.unwrap();
    loop {
        let mut head = [0u8; 5];
        if socket.read_exact(&mut head).await.is_err() {
            return;
        }
        let mut body = vec![0u8; u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize - 4];
        socket.read_exact(&mut body).await.unwrap();
        if head[0] != b'Q' {
            return; // Terminate
        }
        let sql = String::from_utf8_lossy(&body).trim_end_matches('\0').to_string();
        let mut out = Vec::new();
        if sql.starts_with("SELECT cluster_logical_timestamp()") {
            let now = clock.lock().unwrap().remove(0);
            out.extend(row_description(&["cluster_logical_timestamp"]));
            out.extend(data_row(&[Some(now.to_string())]));
            out.extend(message(b'C', b"SELECT 1\0"));
            out.extend(READY);
            socket.write_all(&out).await.unwrap();
        } else if sql.starts_with("CREATE CHANGEFEED") {
            let first = {
                let mut s = seen.lock().unwrap();
                s.push(sql);
                s.len() == 1
            };
            out.extend(row_description(&["table", "key", "value"]));
            if first {
                // T1 writes row 1 at A; resolved A; T2 writes row 2 at B; then the
                // connection breaks.
                out.extend(change(1, Some(11), A));
                out.extend(resolved(A));
                out.extend(change(2, Some(22), B));
                socket.write_all(&out).await.unwrap();
                return;
            }
            // Reopened from A: B again (a redelivery), T3 deletes row 1 at C, resolved.
            out.extend(change(2, Some(22), B));
            out.extend(change(1, None, C));
            out.extend(resolved(RESOLVED));
            socket.write_all(&out).await.unwrap();
            // The feed goes on until the client closes the connection.
            let mut rest = Vec::new();
            let _ = socket.read_to_end(&mut rest).await;
            return;
        } else {
            out.extend(message(b'C', b"SET\0"));
            out.extend(READY);
            socket.write_all(&out).await.unwrap();
        }
    }
}

#[tokio::test]
async fn the_sinkless_changefeed_is_reopened_from_its_watermark_and_waited_for() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    // cluster_logical_timestamp(): the capture's cursor, then the end of the run.
    let clock = Arc::new(Mutex::new(vec![CURSOR, END]));
    {
        let (seen, clock) = (seen.clone(), clock.clone());
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                tokio::spawn(serve(socket, seen.clone(), clock.clone()));
            }
        });
    }
    let db = CockroachDb::from_url(&format!("cockroachdb://root@127.0.0.1:{port}/defaultdb?sslmode=disable"))
        .unwrap();
    let options =
        CaptureOptions { run_name: "t".into(), mode: None, poll_interval: Duration::from_millis(100) };
    let mut capture = db.start_capture(&TABLE, &options).await.unwrap();
    capture.wait_started(Duration::from_secs(10)).await.unwrap();
    let log = tokio::time::timeout(Duration::from_secs(30), capture.finish(None)).await.unwrap().unwrap();

    let feeds = seen.lock().unwrap().clone();
    assert_eq!(feeds.len(), 2, "{feeds:?}");
    assert!(
        feeds[0].contains(&format!("cursor = '{CURSOR}'"))
            && feeds[0].contains("WITH updated, mvcc_timestamp, diff"),
        "{}",
        feeds[0]
    );
    assert!(feeds[1].contains(&format!("cursor = '{A}'")), "reopened from the watermark: {}", feeds[1]);
    let stamps: Vec<Option<Timestamp>> = log.txns().iter().map(|t| t.commit_ts).collect();
    let expected: Vec<Option<Timestamp>> =
        [A, B, C].iter().map(|s| Some(isocert_recovery::parse_hlc(s).unwrap())).collect();
    assert_eq!(stamps, expected);
    assert_eq!(log.change_count(), 3, "the redelivered change of row 2 is recorded once");
    assert!(log.txns()[2].changes[0].row.is_none(), "row 1 deleted at C");
}

#[tokio::test]
async fn a_changefeed_that_cannot_start_is_reported_before_the_run() {
    // Nothing listens there: the capture's first connection fails.
    let db = CockroachDb::from_url("cockroachdb://root@127.0.0.1:9/defaultdb").unwrap();
    let options =
        CaptureOptions { run_name: "t".into(), mode: Some("poll".into()), poll_interval: Duration::ZERO };
    let e = db.start_capture(&TABLE, &options).await.unwrap_err().to_string();
    assert!(e.contains("sinkless or --changefeed kafka://") && e.contains("--replication poll"), "{e}");
    let options = CaptureOptions { mode: None, ..options };
    let e = db.start_capture(&TABLE, &options).await.unwrap_err().to_string();
    assert!(e.contains("127.0.0.1:9"), "{e}");
}

fn complete(tag: &str) -> Vec<u8> {
    message(b'C', format!("{tag}\0").as_bytes())
}

fn error(code: &str, text: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (field, value) in [(b'S', "ERROR"), (b'V', "ERROR"), (b'C', code), (b'M', text)] {
        body.push(field);
        body.extend(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    message(b'E', &body)
}

/// A CockroachDB session's answers: `SHOW session_id`, `BEGIN ...; SHOW
/// transaction_isolation` (READ COMMITTED is not enabled: CockroachDB runs SERIALIZABLE and
/// says so), a read with `crdb_internal_mvcc_timestamp`, an upsert, and four COMMITs:
/// committed, restarted (40001), statement completion unknown (40003), ambiguous result.
async fn serve_session(mut socket: TcpStream, queries: Seen) {
    let mut len = [0u8; 4];
    socket.read_exact(&mut len).await.unwrap();
    let mut startup = vec![0u8; u32::from_be_bytes(len) as usize - 4];
    socket.read_exact(&mut startup).await.unwrap();
    let mut hello = message(b'R', &0u32.to_be_bytes());
    hello.extend(READY);
    socket.write_all(&hello).await.unwrap();
    let mut commits = 0;
    loop {
        let mut head = [0u8; 5];
        if socket.read_exact(&mut head).await.is_err() {
            return;
        }
        let mut body = vec![0u8; u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize - 4];
        socket.read_exact(&mut body).await.unwrap();
        if head[0] != b'Q' {
            return;
        }
        let sql = String::from_utf8_lossy(&body).trim_end_matches('\0').to_string();
        queries.lock().unwrap().push(sql.clone());
        let mut out = Vec::new();
        if sql == "SHOW session_id" {
            out.extend(row_description(&["session_id"]));
            out.extend(data_row(&[Some("17a6d5f4c6b2e0f8000000000000002a".into())]));
            out.extend(complete("SHOW 1"));
        } else if sql.starts_with("BEGIN") {
            out.extend(complete("BEGIN"));
            out.extend(row_description(&["transaction_isolation"]));
            out.extend(data_row(&[Some("serializable".into())]));
            out.extend(complete("SHOW 1"));
        } else if sql.starts_with("SELECT crdb_internal_mvcc_timestamp") {
            out.extend(row_description(&["crdb_internal_mvcc_timestamp", "id", "v"]));
            out.extend(data_row(&[Some(A.into()), Some("1".into()), Some("10".into())]));
            out.extend(complete("SELECT 1"));
        } else if sql.starts_with("UPSERT") {
            out.extend(complete("INSERT 0 1"));
        } else if sql.starts_with("SELECT cluster_logical_timestamp()") {
            commits += 1;
            match commits {
                1 => {
                    out.extend(row_description(&["cluster_logical_timestamp"]));
                    out.extend(data_row(&[Some(B.into())]));
                    out.extend(complete("SELECT 1"));
                    out.extend(complete("COMMIT"));
                }
                2 => out.extend(error(
                    "40001",
                    "restart transaction: TransactionRetryWithProtoRefreshError: ReadWithinUncertaintyIntervalError",
                )),
                3 => out.extend(error("40003", "statement completion unknown")),
                _ => out.extend(error("XX000", "result is ambiguous: error=rpc error (last error: EOF)")),
            }
        } else {
            out.extend(complete("ROLLBACK"));
        }
        out.extend(READY);
        socket.write_all(&out).await.unwrap();
    }
}

#[tokio::test]
async fn the_session_records_timestamps_and_classifies_restarts_and_ambiguous_commits() {
    use isocert_adapters::{int_row, CommitOutcome, IsolationLevel, RecordedOp, Session, Step};

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let queries: Seen = Arc::default();
    {
        let queries = queries.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve_session(socket, queries.clone()));
            }
        });
    }
    let db = CockroachDb::from_url(&format!("cockroachdb://root@127.0.0.1:{port}/defaultdb")).unwrap();
    let mut session = db.connect().await.unwrap();
    assert_eq!(session.server_id(), 42, "the low bits of the session id");

    let mut facts = session.begin(IsolationLevel::Serializable).await.unwrap();
    let ops = session.execute(&TABLE, &Step::Read { key: 1 }, &mut facts).await.unwrap();
    assert_eq!(ops[0].0, RecordedOp::Read { key: 1, row: Some(int_row(vec![1, 10])) });
    assert_eq!(ops[0].1.mvcc_ts.as_deref(), Some(A));
    let ops = session.execute(&TABLE, &Step::Upsert { row: int_row(vec![1, 11]) }, &mut facts).await.unwrap();
    assert_eq!(ops[0].0, RecordedOp::Write { key: 1, row: Some(int_row(vec![1, 11])) });
    assert!(matches!(session.commit(&mut facts).await, CommitOutcome::Committed));
    assert_eq!(facts.commit_ts.as_deref(), Some(B));
    assert_eq!(facts.effective_isolation.as_deref(), Some("serializable"));

    // READ COMMITTED on a cluster that has not enabled it runs (and commits) as SERIALIZABLE.
    let mut facts = session.begin(IsolationLevel::ReadCommitted).await.unwrap();
    assert_eq!(
        (facts.isolation.as_str(), facts.effective_isolation.as_deref()),
        ("read-committed", Some("serializable"))
    );
    match session.commit(&mut facts).await {
        CommitOutcome::AbortedRetryable(e) => {
            assert_eq!(e.code(), Some("40001"));
            session.note_error(&mut facts, &e);
            assert_eq!(facts.error.as_deref(), Some("40001"));
        }
        other => panic!("a restart is retryable: {other:?}"),
    }
    session.rollback().await.unwrap();
    for expected in ["40003", "XX000"] {
        let mut facts = session.begin(IsolationLevel::Serializable).await.unwrap();
        match session.commit(&mut facts).await {
            CommitOutcome::Unknown(e) => assert_eq!(e.code(), Some(expected)),
            other => panic!("{expected} leaves the commit unknown: {other:?}"),
        }
    }
    let sent = queries.lock().unwrap().clone();
    assert!(
        sent.contains(
            &"BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED; SHOW transaction_isolation".to_string()
        ),
        "{sent:?}"
    );
    assert!(
        sent.iter().any(|q| q.starts_with("UPSERT INTO \"items\" (\"id\", \"v\") VALUES (1, 11)")),
        "{sent:?}"
    );
    assert!(sent.contains(&"SELECT cluster_logical_timestamp()::STRING; COMMIT".to_string()), "{sent:?}");
}
