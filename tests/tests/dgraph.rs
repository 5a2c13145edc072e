//! Dgraph (issue 12): the session over HTTP, timestamp-ordering recovery from the history
//! alone, and the checkers (Chronos and Aion straight from the timestamps, Emme from the
//! certificate), on answers shaped exactly like Dgraph Alpha's, served by a scripted
//! loopback HTTP server; and the whole `isocert run --db dgraph://...` against a live
//! cluster when `ISOCERT_DGRAPH_URL` is set (otherwise a visible `SKIPPED:` line).
//!
//! Where the shapes come from: Dgraph's `dgraph/cmd/alpha/http.go` (queryHandler writes
//! `{"data":...,"extensions":{"txn":{"start_ts":N},...}}`; mutationHandler
//! `{"data":{"code":"Success","message":"Done","uids":{...}},"extensions":{"txn":{"start_ts":N,
//! "keys":[...],"preds":[...]}}}`; handleCommit reads `{"keys":[...],"preds":[...]}` and
//! answers `{"data":{"code":"Success","message":"Done"},"extensions":{"txn":{"start_ts":N,
//! "commit_ts":M}}}`; errors are `x.SetStatus`'s `{"errors":[{"message":...,"extensions":
//! {"code":"ErrorInvalidRequest"}}]}`, an abort's message dgo's `ErrAborted`, "Transaction has
//! been aborted. Please retry") and the "Raw HTTP" client guide of Dgraph's documentation.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use isocert_adapters::dgraph::DgraphSession;
use isocert_adapters::{
    int_row, CommitOutcome, Database, Dgraph, IsolationLevel, RecordedOp, Session, Step, TableSpec,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TABLE: TableSpec = TableSpec::integers("items", &["id", "v"]);

/// What the fake Alpha received: (path with query, body).
type Requests = Arc<Mutex<Vec<(String, String)>>>;

/// Serves the scripted answers in order, one per request (a JSON body, or `None` to close
/// the connection without answering: a lost answer); records every request.
async fn fake_alpha(script: Vec<Option<&str>>) -> (String, Requests) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let requests: Requests = Arc::default();
    let seen = requests.clone();
    let script: Vec<Option<String>> = script.into_iter().map(|s| s.map(str::to_string)).collect();
    tokio::spawn(async move {
        let mut script = script.into_iter();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            let header_end = loop {
                if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            };
            let head = String::from_utf8_lossy(&request[..header_end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while request.len() < header_end + length {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let path =
                head.lines().next().unwrap_or_default().split(' ').nth(1).unwrap_or_default().to_string();
            let body = String::from_utf8_lossy(&request[header_end..]).to_string();
            seen.lock().unwrap().push((path, body));
            match script.next().flatten() {
                Some(answer) => {
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                }
                // A lost answer: the request arrived, nothing comes back.
                None => drop(socket),
            }
        }
    });
    (format!("dgraph://{address}"), requests)
}

async fn session(url: &str) -> DgraphSession {
    Dgraph::from_url(url).unwrap().connect().await.unwrap()
}

fn paths(requests: &Requests) -> Vec<String> {
    requests.lock().unwrap().iter().map(|(p, _)| p.clone()).collect()
}

const Q_KEY1: &str = r#"{"data":{"q":[{"uid":"0x2","c0":1,"c1":10}]},"extensions":{"server_latency":{"parsing_ns":12000,"processing_ns":900000,"encoding_ns":30000,"assign_timestamp_ns":500000,"total_ns":1500000},"txn":{"start_ts":100},"metrics":{"num_uids":{"isocert.items.id":1,"isocert.items.v":1,"uid":1}}}}"#;
const Q_NONE: &str = r#"{"data":{"q":[]},"extensions":{"txn":{"start_ts":100}}}"#;
const MUTATED: &str = r#"{"data":{"code":"Success","message":"Done","queries":null,"uids":{"row":"0x3"}},"extensions":{"server_latency":{"parsing_ns":20000,"processing_ns":4000000,"total_ns":4100000},"txn":{"start_ts":100,"keys":["2e8l4xw1q4w5v","3gms1hldoxyb0"],"preds":["1-0-isocert.items.id","1-0-isocert.items.v"]}}}"#;
const Q_RANGE: &str = r#"{"data":{"q":[{"uid":"0x3","c0":2,"c1":22},{"uid":"0x2","c0":1,"c1":10}]},"extensions":{"txn":{"start_ts":100}}}"#;
const COMMITTED: &str = r#"{"data":{"code":"Success","message":"Done"},"extensions":{"txn":{"start_ts":100,"commit_ts":105,"preds":["1-0-isocert.items.id","1-0-isocert.items.v"]}}}"#;
const ABORTED: &str = r#"{"errors":[{"message":"Transaction has been aborted. Please retry","extensions":{"code":"ErrorInvalidRequest"}}]}"#;

#[tokio::test]
async fn a_transaction_records_its_start_and_commit_ts_and_sends_dgraph_its_keys() {
    let (url, requests) =
        fake_alpha(vec![Some(Q_KEY1), Some(Q_NONE), Some(MUTATED), Some(Q_RANGE), Some(COMMITTED)]).await;
    let mut s = session(&url).await;
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    let read = s.execute(&TABLE, &Step::Read { key: 1 }, &mut facts).await.unwrap();
    assert_eq!(read[0].0, RecordedOp::Read { key: 1, row: Some(int_row(vec![1, 10])) });
    let write = s.execute(&TABLE, &Step::Upsert { row: int_row(vec![2, 22]) }, &mut facts).await.unwrap();
    assert_eq!(write[0].0, RecordedOp::Write { key: 2, row: Some(int_row(vec![2, 22])) });
    let select = s.execute(&TABLE, &Step::Select { predicate: "v >= 5".into() }, &mut facts).await.unwrap();
    // The history records the DQL filter (the `dgraph` dialect), rows by key.
    assert_eq!(
        select[0].0,
        RecordedOp::Select {
            predicate: "ge(v, 5)".into(),
            rows: vec![int_row(vec![1, 10]), int_row(vec![2, 22])]
        }
    );
    assert!(matches!(s.commit(&mut facts).await, CommitOutcome::Committed));
    assert_eq!((facts.start_ts, facts.commit_ts), (Some(100), Some(105)));

    assert_eq!(
        paths(&requests),
        ["/query", "/query?startTs=100", "/mutate?startTs=100", "/query?startTs=100", "/commit?startTs=100"]
    );
    let requests = requests.lock().unwrap();
    assert!(requests[0].1.contains("eq(isocert.items.id, 1)"), "{}", requests[0].1);
    assert!(requests[2].1.contains(r#""uid":"_:row""#) && requests[2].1.contains(r#""isocert.items.v":22"#));
    assert!(requests[3].1.contains("@filter(ge(isocert.items.v, 5))"), "{}", requests[3].1);
    assert_eq!(
        requests[4].1,
        r#"{"keys":["2e8l4xw1q4w5v","3gms1hldoxyb0"],"preds":["1-0-isocert.items.id","1-0-isocert.items.v"]}"#
    );
}

#[tokio::test]
async fn an_abort_at_commit_is_retryable_and_rolled_back() {
    let (url, requests) = fake_alpha(vec![Some(Q_NONE), Some(MUTATED), Some(ABORTED), Some(ABORTED)]).await;
    let mut s = session(&url).await;
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    s.execute(&TABLE, &Step::Upsert { row: int_row(vec![2, 22]) }, &mut facts).await.unwrap();
    let CommitOutcome::AbortedRetryable(e) = s.commit(&mut facts).await else { panic!("expected an abort") };
    assert!(e.is_retryable() && e.to_string().contains("aborted"), "{e}");
    s.note_error(&mut facts, &e);
    assert_eq!(facts.error.as_deref(), Some("aborted"));
    assert_eq!(facts.commit_ts, None);
    // Nothing is open any more: rolling back sends nothing.
    s.rollback().await.unwrap();
    assert_eq!(paths(&requests).len(), 3);
}

#[tokio::test]
async fn an_abort_of_a_mutation_ends_the_attempt_as_retryable_and_the_rollback_aborts() {
    let (url, requests) =
        fake_alpha(vec![Some(Q_NONE), Some(MUTATED), Some(Q_NONE), Some(ABORTED), Some(ABORTED)]).await;
    let mut s = session(&url).await;
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    s.execute(&TABLE, &Step::Upsert { row: int_row(vec![2, 22]) }, &mut facts).await.unwrap();
    let e = s.execute(&TABLE, &Step::Upsert { row: int_row(vec![3, 33]) }, &mut facts).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    // Aborting a transaction Dgraph already aborted answers the abort error: fine.
    s.rollback().await.unwrap();
    assert_eq!(paths(&requests)[4], "/commit?startTs=100&abort=true");
}

#[tokio::test]
async fn a_lost_commit_answer_makes_the_attempt_unknown() {
    let (url, _) = fake_alpha(vec![Some(Q_NONE), Some(MUTATED), None]).await;
    let mut s = session(&url).await;
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    s.execute(&TABLE, &Step::Upsert { row: int_row(vec![2, 22]) }, &mut facts).await.unwrap();
    let CommitOutcome::Unknown(e) = s.commit(&mut facts).await else { panic!("expected an unknown outcome") };
    assert!(e.is_connection_lost(), "{e}");
    s.note_error(&mut facts, &e);
    assert_eq!(
        (facts.start_ts, facts.commit_ts, facts.error.as_deref()),
        (Some(100), None, Some("connection"))
    );
}

#[tokio::test]
async fn read_only_transactions_are_not_committed_and_bad_answers_are_named() {
    let other = r#"{"data":{"q":[]},"extensions":{"txn":{"start_ts":999}}}"#;
    let (url, requests) = fake_alpha(vec![Some(Q_KEY1), Some(Q_NONE), Some(Q_NONE), Some(other)]).await;
    let mut s = session(&url).await;
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    s.execute(&TABLE, &Step::Read { key: 1 }, &mut facts).await.unwrap();
    let delete = s.execute(&TABLE, &Step::Delete { key: 5 }, &mut facts).await.unwrap();
    assert!(delete.is_empty(), "deleting an absent key is no operation");
    assert!(matches!(s.commit(&mut facts).await, CommitOutcome::Committed));
    assert_eq!((facts.start_ts, facts.commit_ts), (Some(100), None));
    assert_eq!(paths(&requests).len(), 2, "no /commit for a transaction that mutated nothing");

    // An answer naming another transaction is refused, not mixed in.
    let mut facts = s.begin(IsolationLevel::RepeatableRead).await.unwrap();
    s.execute(&TABLE, &Step::Read { key: 1 }, &mut facts).await.unwrap();
    let e = s.execute(&TABLE, &Step::Read { key: 2 }, &mut facts).await.unwrap_err();
    assert!(!e.is_retryable() && e.to_string().contains("start_ts 999"), "{e}");

    let e = s.begin(IsolationLevel::Serializable).await.unwrap_err().to_string();
    assert!(e.contains("snapshot isolation") && e.contains("repeatable-read"), "{e}");
    let e = Dgraph::start_server(&[]).await.unwrap_err().to_string();
    assert!(e.contains("docker compose up -d --wait dgraph"), "{e}");
}

const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"dgraph","initial":[{"key":1,"value":0},{"key":2,"value":0}]}"#;

/// A kv run on Dgraph as the session records it (table `kv`, one node per key): T1 and T2 run
/// concurrently (T2 starts at 105, before T1 commits at 110); T3 reads afterwards and
/// mutates nothing (no commit_ts). With `predicate`, T2 also reads a DQL range (Emme checks
/// it; Chronos and Aion take item operations only). `anomaly`: "lost-update" makes T2 also
/// overwrite key 1, which T1 wrote; "stale-read" makes T3 read key 1's initial value at 130,
/// after T1's commit.
fn recorded_run(anomaly: Option<&str>, predicate: bool) -> String {
    let t2_extra = if anomaly == Some("lost-update") {
        r#",{"f":"r","key":1,"value":0},{"f":"w","key":1,"value":12}"#
    } else {
        ""
    };
    let range = if predicate {
        r#"{"f":"select","table":"kv","where":"ge(value, 0) AND lt(key, 3)","rows":[{"key":1,"value":0},{"key":2,"value":0}]},"#
    } else {
        ""
    };
    let t3_reads = if anomaly == Some("stale-read") { 0 } else { 11 };
    [
        HEADER.to_string(),
        r#"{"id":1,"session":1,"ops":[{"f":"r","key":1,"value":0},{"f":"w","key":1,"value":11}],"meta":{"isolation":"repeatable-read","start_ts":100,"commit_ts":110}}"#.to_string(),
        format!(
            r#"{{"id":2,"session":2,"ops":[{range}{{"f":"r","key":2,"value":0}},{{"f":"w","key":2,"value":22}}{t2_extra}],"meta":{{"isolation":"repeatable-read","start_ts":105,"commit_ts":120}}}}"#
        ),
        format!(
            r#"{{"id":3,"session":3,"ops":[{{"f":"r","key":1,"value":{t3_reads}}},{{"f":"r","key":2,"value":22}}],"meta":{{"isolation":"repeatable-read","start_ts":130}}}}"#
        ),
    ]
    .join("\n")
}

fn isocert(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let o = Command::new(isocert_tests::isocert_bin()).args(args).current_dir(dir).output().unwrap();
    (
        o.status.code(),
        format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

/// `isocert recover --database dgraph` from the history alone (no raw-log.jsonl), then
/// Chronos and Aion on the timestamps it wrote into the history (item operations) and Emme
/// on the certificate (with a DQL range read); returns each checker's exit and output.
fn recover_and_check(anomaly: Option<&str>) -> Vec<(&'static str, Option<i32>, String)> {
    let dir = tempfile::tempdir().unwrap();
    for (name, predicate) in [("items", false), ("range", true)] {
        std::fs::write(dir.path().join(format!("{name}.jsonl")), recorded_run(anomaly, predicate)).unwrap();
        let (history, cert, out) =
            (format!("{name}.jsonl"), format!("{name}-cert.json"), format!("{name}-history.jsonl"));
        let args =
            ["recover", "--database", "dgraph", "--history", &history, "--out", &cert, "--history-out", &out];
        let (code, text) = isocert(&args, dir.path());
        assert_eq!(code, Some(0), "recover {name}:\n{text}");
    }
    let mut results = Vec::new();
    for checker in ["chronos", "aion"] {
        let args =
            ["check", "items-history.jsonl", "--isolation", "snapshot-isolation", "--checker", checker];
        let (code, out) = isocert(&args, dir.path());
        results.push((checker, code, out));
    }
    let args = [
        "check",
        "range-history.jsonl",
        "--certificate",
        "range-cert.json",
        "--isolation",
        "snapshot-isolation",
        "--checker",
        "emme",
    ];
    let (code, out) = isocert(&args, dir.path());
    results.push(("emme", code, out));
    results
}

#[test]
fn a_recorded_dgraph_run_certifies_snapshot_isolation_from_its_timestamps() {
    for (checker, code, out) in recover_and_check(None) {
        assert_eq!(code, Some(0), "{checker}:\n{out}");
    }
}

#[test]
fn a_lost_update_in_a_dgraph_run_is_rejected_by_every_checker() {
    for (checker, code, out) in recover_and_check(Some("lost-update")) {
        assert_eq!(code, Some(1), "{checker}:\n{out}");
    }
}

#[test]
fn a_stale_read_in_a_dgraph_run_is_rejected_by_every_checker() {
    for (checker, code, out) in recover_and_check(Some("stale-read")) {
        assert_eq!(code, Some(1), "{checker}:\n{out}");
    }
}

#[test]
fn tied_commit_timestamps_are_refused_naming_both_writers() {
    let dir = tempfile::tempdir().unwrap();
    let tied = recorded_run(Some("lost-update"), false)
        .replace(r#""start_ts":105,"commit_ts":120"#, r#""start_ts":105,"commit_ts":110"#);
    std::fs::write(dir.path().join("run.jsonl"), tied).unwrap();
    let (code, out) = isocert(
        &["recover", "--database", "dgraph", "--history", "run.jsonl", "--out", "cert.json"],
        dir.path(),
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("same timestamp") && out.contains("T1") && out.contains("T2"), "{out}");
}

/// `isocert run` against a live Dgraph, kv and predicate workloads.
#[test]
fn live_dgraph_runs_certify_snapshot_isolation() {
    let Some(url) = isocert_testsupport::DGRAPH.live_url() else { return };
    for workload in ["kv", "predicate"] {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(isocert_tests::isocert_bin())
            .args(["run", "--db", &url, "--workload", workload, "--isolation", "repeatable-read"])
            .args(["--txns", "400", "--sessions", "4", "--reset-tables", "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "{workload}:\n{text}");
        if workload != "kv" {
            // Chronos takes item operations only; the predicate run was checked by Emme.
            continue;
        }
        let dir = out.path().to_str().unwrap();
        let history = format!("{dir}/history.jsonl");
        let (code, text) = isocert(
            &["check", &history, "--isolation", "snapshot-isolation", "--checker", "chronos"],
            out.path(),
        );
        assert_eq!(code, Some(0), "chronos on the {workload} run:\n{text}");
    }
}
