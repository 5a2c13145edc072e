//! MongoDB (issue 12): an oplog dump and a change-stream dump, shaped as MongoDB writes them,
//! through recovery by cluster time and the checkers (a lost update is rejected, the valid
//! history accepted); `isocert recover --database mongodb` on an oplog dump; and the whole
//! `isocert run --db mongodb://...` against a live replica set when `ISOCERT_MONGODB_URL`
//! is set (otherwise a visible `SKIPPED:` line).
//!
//! Shapes: oplog entries as `mongoexport -d local -c oplog.rs` writes them (relaxed extended
//! JSON; transactions as `applyOps` commands in `admin.$cmd` with `lsid`, `txnNumber`,
//! `prevOpTime`: the server's `oplog_entry.idl`); change events as the manual's "Change
//! Events" pages show them (`_id` resume token, `clusterTime`, `ns`, `documentKey`,
//! `fullDocument`, `lsid`, `txnNumber`); session facts as `MongoTxnFacts` records them.

use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel};
use isocert_history::v1;
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_recovery::{read_change_stream, read_oplog, recover_mongodb, RawLog};

const LSID: [&str; 3] = ["3K1x8V0aR3qv0mH0p3m7xg==", "c2Vzc2lvbi1iLXV1aWQtMQ==", "dGhpcmQtc2Vzc2lvbi0wMQ=="];

/// A committed transaction's `applyOps` entry writing `(key, value)` to `isocert.kv`.
fn oplog_txn(session: usize, txn: i64, at: (u32, u32), writes: &[(i64, i64)]) -> String {
    let ops: Vec<String> = writes
        .iter()
        .map(|(k, v)| {
            format!(
                r#"{{"op":"u","ns":"isocert.kv","ui":{{"$binary":{{"base64":"q83vEjRWeJCrze8SNFZ4kA==","subType":"04"}}}},"o":{{"$v":2,"diff":{{"u":{{"value":{v},"writer":{txn}}}}}}},"o2":{{"_id":{k}}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"lsid":{{"id":{{"$binary":{{"base64":"{}","subType":"04"}}}},"uid":{{"$binary":{{"base64":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","subType":"00"}}}}}},"txnNumber":{{"$numberLong":"{txn}"}},"op":"c","ns":"admin.$cmd","o":{{"applyOps":[{}]}},"ts":{{"$timestamp":{{"t":{},"i":{}}}}},"t":{{"$numberLong":"1"}},"v":{{"$numberLong":"2"}},"wall":{{"$date":"2024-05-01T10:00:00.000Z"}},"prevOpTime":{{"ts":{{"$timestamp":{{"t":0,"i":0}}}},"t":{{"$numberLong":"-1"}}}}}}"#,
        LSID[session],
        ops.join(","),
        at.0,
        at.1
    )
}

/// Two read-modify-write transactions of key 1 and a range reader. With `lost_update`, T2's
/// snapshot precedes T1's commit, yet both committed writes of key 1: snapshot isolation's
/// lost update, which MongoDB's write conflicts prevent, so the checker must reject it.
fn history(lost_update: bool) -> String {
    let t2_read = if lost_update { 0 } else { 10 };
    let t2_snapshot = if lost_update { (1_714_557_600, 1) } else { (1_714_557_601, 1) };
    let meta = |s: usize, n: i64, read: (u32, u32), commit: (u32, u32)| {
        format!(
            r#"{{"isolation":"repeatable-read","lsid":"{}","txn_number":{n},"read_ts":{{"t":{},"i":{}}},"commit_ts":{{"t":{},"i":{}}}}}"#,
            LSID[s], read.0, read.1, commit.0, commit.1
        )
    };
    [
        r#"{"format":"isocert-history","version":1,"dialect":"mongodb","initial":[{"key":1,"value":0},{"key":2,"value":0}]}"#.to_string(),
        format!(
            r#"{{"id":1,"session":1,"ops":[{{"f":"r","key":1,"value":0}},{{"f":"w","key":1,"value":10}}],"meta":{}}}"#,
            meta(0, 1, (1_714_557_600, 1), (1_714_557_601, 1))
        ),
        format!(
            r#"{{"id":2,"session":2,"ops":[{{"f":"r","key":1,"value":{t2_read}}},{{"f":"w","key":1,"value":20}}],"meta":{}}}"#,
            meta(1, 1, t2_snapshot, (1_714_557_601, 2))
        ),
        format!(
            r#"{{"id":3,"session":3,"ops":[{{"f":"select","table":"kv","where":"{{\"value\": {{\"$gte\": 0, \"$lt\": 15}}}}","rows":[{{"key":1,"value":10}},{{"key":2,"value":0}}]}}],"meta":{}}}"#,
            meta(2, 1, (1_714_557_601, 1), (1_714_557_601, 1))
        ),
    ]
    .join("\n")
}

fn oplog() -> String {
    [oplog_txn(0, 1, (1_714_557_601, 1), &[(1, 10)]), oplog_txn(1, 1, (1_714_557_601, 2), &[(1, 20)])]
        .join("\n")
}

fn verdict(text: &str, log: &RawLog) -> Vec<AnomalyKind> {
    let mut h = v1::read_history(text.as_bytes()).expect("history");
    let interpreter = Interpreter::new(&h).expect("the filters compile");
    let matcher =
        |h: &isocert_history::History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = recover_mongodb(&mut h, log, &matcher).expect("recovers");
    let interpreter = Interpreter::new(&h).unwrap();
    let report =
        check(&h, &recovered.certificate, IsolationLevel::SnapshotIsolation, CheckerKind::Emme, &interpreter)
            .unwrap();
    report.anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn an_oplog_dump_becomes_a_certificate_that_snapshot_isolation_accepts() {
    let log = read_oplog(oplog().as_bytes(), Some("isocert")).expect("oplog reads");
    assert_eq!(verdict(&history(false), &log), vec![]);
}

#[test]
fn a_lost_update_in_the_oplog_is_rejected() {
    let log = read_oplog(oplog().as_bytes(), Some("isocert")).expect("oplog reads");
    assert_eq!(verdict(&history(true), &log), vec![AnomalyKind::GSi]);
}

#[test]
fn the_same_commits_as_change_events_give_the_same_verdict() {
    let event = |token: &str, s: usize, at: (u32, u32), key: i64, value: i64| {
        format!(
            r#"{{"_id":{{"_data":"{token}"}},"operationType":"update","clusterTime":{{"$timestamp":{{"t":{},"i":{}}}}},"wallTime":{{"$date":"2024-05-01T10:00:01.000Z"}},"ns":{{"db":"isocert","coll":"kv"}},"documentKey":{{"_id":{key}}},"updateDescription":{{"updatedFields":{{"value":{value},"writer":1}},"removedFields":[],"truncatedArrays":[]}},"fullDocument":{{"_id":{key},"value":{value},"writer":1}},"lsid":{{"id":{{"$binary":{{"base64":"{}","subType":"04"}}}},"uid":{{"$binary":{{"base64":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","subType":"00"}}}}}},"txnNumber":{{"$numberLong":"1"}}}}"#,
            at.0, at.1, LSID[s]
        )
    };
    let stream = [
        event("826632120100000001", 0, (1_714_557_601, 1), 1, 10),
        event("826632120100000002", 1, (1_714_557_601, 2), 1, 20),
        // Delivered again after a resume.
        event("826632120100000002", 1, (1_714_557_601, 2), 1, 20),
    ]
    .join("\n");
    let log = read_change_stream(stream.as_bytes(), None).expect("events read");
    assert_eq!(log.len(), 2);
    assert_eq!(verdict(&history(false), &log), vec![]);
    assert_eq!(verdict(&history(true), &log), vec![AnomalyKind::GSi]);
}

/// `isocert recover --database mongodb --source OPLOG.jsonl` (the binary needs the feature).
/// Issue 46: a transaction whose snapshot the session only bracketed (`read_after`: the
/// session's `operationTime` before it; `read_before`: the first reply's; no `atClusterTime`,
/// which the driver does not expose). T1 writes key 1 at (…601,1). `t2` is T2's
/// transaction line (session 2, txn 1) and `t2_bracket` its bracket and commit.
fn bracketed(
    t2_ops: &str,
    t2_bracket: ((u32, u32), (u32, u32), (u32, u32)),
    t2_writes: bool,
) -> (String, RawLog) {
    let ((after_t, after_i), (before_t, before_i), (commit_t, commit_i)) = t2_bracket;
    let text = [
        r#"{"format":"isocert-history","version":1,"dialect":"mongodb","initial":[{"key":1,"value":0},{"key":2,"value":0}]}"#.to_string(),
        format!(
            r#"{{"id":1,"session":1,"ops":[{{"f":"w","key":1,"value":10}}],"meta":{{"isolation":"repeatable-read","lsid":"{}","txn_number":1,"read_ts":{{"t":1714557600,"i":1}},"commit_ts":{{"t":1714557601,"i":1}}}}}}"#,
            LSID[0]
        ),
        format!(
            r#"{{"id":2,"session":2,"ops":[{t2_ops}],"meta":{{"isolation":"repeatable-read","lsid":"{}","txn_number":1,"read_after":{{"t":{after_t},"i":{after_i}}},"read_before":{{"t":{before_t},"i":{before_i}}},"commit_ts":{{"t":{commit_t},"i":{commit_i}}}}}}}"#,
            LSID[1]
        ),
    ]
    .join("\n");
    let mut dump = vec![oplog_txn(0, 1, (1_714_557_601, 1), &[(1, 10)])];
    if t2_writes {
        dump.push(oplog_txn(1, 1, (commit_t, commit_i), &[(1, 20)]));
    }
    (text, read_oplog(dump.join("\n").as_bytes(), Some("isocert")).expect("oplog reads"))
}

/// The verdict at snapshot isolation, or the check's refusal.
fn checked(text: &str, log: &RawLog) -> Result<Vec<AnomalyKind>, String> {
    let mut h = v1::read_history(text.as_bytes()).expect("history");
    let interpreter = Interpreter::new(&h).expect("the filters compile");
    let matcher =
        |h: &isocert_history::History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = recover_mongodb(&mut h, log, &matcher).expect("recovers");
    let interpreter = Interpreter::new(&h).unwrap();
    check(&h, &recovered.certificate, IsolationLevel::SnapshotIsolation, CheckerKind::Emme, &interpreter)
        .map(|r| r.anomalies.iter().map(|a| a.kind).collect())
        .map_err(|e| e.to_string())
}

/// T2's select `value >= 5` returned nothing: its bracket (…600,5)–(…601,5) holds T1's
/// commit, and only a snapshot before it explains the empty result. The old rule took the
/// latest position (after T1) and reported a result-set mismatch MongoDB did not cause.
/// Near twin: a bracket that starts after T1's commit, where the empty result is wrong.
#[test]
fn a_bracketed_snapshot_is_placed_by_its_predicate_reads() {
    let select = r#"{"f":"select","table":"kv","where":"{\"value\": {\"$gte\": 5}}","rows":[]}"#;
    let (text, log) = bracketed(select, ((1_714_557_600, 5), (1_714_557_601, 5), (1_714_557_601, 6)), false);
    assert_eq!(checked(&text, &log), Ok(vec![]));
    let (text, log) = bracketed(select, ((1_714_557_601, 2), (1_714_557_601, 5), (1_714_557_601, 6)), false);
    assert_eq!(checked(&text, &log), Ok(vec![AnomalyKind::ResultSetMismatch]));
}

/// T2 blindly writes key 1 and commits at (…601,4); its bracket (…600,5)–(…601,3) holds
/// T1's commit of key 1, so whether the two were concurrent (a lost update) is unknown.
/// The old rule placed the snapshot after T1 and certified it VALID; it is now uncertified,
/// naming T2. Near twins: a bracket that ends before T1's commit (a lost update, G-SI) and
/// one that starts after it (VALID).
#[test]
fn a_blind_write_whose_bracket_holds_a_conflicting_commit_is_uncertified() {
    let write = r#"{"f":"w","key":1,"value":20}"#;
    let (text, log) = bracketed(write, ((1_714_557_600, 5), (1_714_557_601, 3), (1_714_557_601, 4)), true);
    let e = checked(&text, &log).unwrap_err();
    assert!(e.contains("uncertified") && e.contains("T2 op 0") && e.contains("no read time"), "{e}");
    let (text, log) = bracketed(write, ((1_714_557_600, 5), (1_714_557_600, 9), (1_714_557_601, 4)), true);
    assert_eq!(checked(&text, &log), Ok(vec![AnomalyKind::GSi]));
    let (text, log) = bracketed(write, ((1_714_557_601, 2), (1_714_557_601, 3), (1_714_557_601, 4)), true);
    assert_eq!(checked(&text, &log), Ok(vec![]));
}

#[cfg(feature = "mongodb")]
#[test]
fn isocert_recover_reads_an_oplog_dump() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("history.jsonl"), history(false)).unwrap();
    std::fs::write(dir.path().join("oplog.jsonl"), oplog()).unwrap();
    let o = std::process::Command::new(isocert_tests::isocert_bin())
        .args(["recover", "--database", "mongodb", "--history"])
        .arg(dir.path().join("history.jsonl"))
        .arg("--source")
        .arg(dir.path().join("oplog.jsonl"))
        .arg("--out")
        .arg(dir.path().join("certificate.json"))
        .output()
        .unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("recovered 2 commits"), "{text}");
}

/// `isocert run` against a live replica set: kv and predicate workloads, checked as
/// snapshot isolation, and `isocert recover` reproducing the certificate.
#[test]
fn live_mongodb_runs_certify_snapshot_isolation() {
    let Some(url) = isocert_testsupport::MONGODB.live_url() else { return };
    if !cfg!(feature = "mongodb") {
        panic!(
            "ISOCERT_MONGODB_URL is set but the tests were built without the adapter: \
             cargo test -p isocert-tests --features mongodb --test main mongodb"
        );
    }
    for workload in ["kv", "predicate"] {
        let out = tempfile::tempdir().unwrap();
        let o = std::process::Command::new(isocert_tests::isocert_bin())
            .args(["run", "--db", &url, "--workload", workload, "--isolation", "repeatable-read"])
            .args(["--txns", "300", "--sessions", "4", "--reset-tables", "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "{workload}:\n{text}");
        assert!(out.path().join("certificate.json").exists(), "{workload}:\n{text}");
        let o = std::process::Command::new(isocert_tests::isocert_bin())
            .args(["recover", "--database", "mongodb", "--history"])
            .arg(out.path().join("history.jsonl"))
            .arg("--out")
            .arg(out.path().join("recovered.json"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{workload}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// `isocert run --emit` against a live replica set (issue 36): a kv run at REPEATABLE READ
/// is published while it runs (cluster times from the change stream at each cut, snapshots
/// placed in their brackets) and checked by one member at snapshot isolation, whose
/// verdict is offline Chronos's on the saved history.
#[cfg(all(feature = "kafka", feature = "mongodb"))]
#[test]
fn live_mongodb_runs_are_published_while_they_run() {
    let Some(url) = isocert_testsupport::MONGODB.live_url() else { return };
    let Some(broker) = isocert_testsupport::KafkaBroker::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    isocert_tests::assert_live_kv_run_checked_online(
        broker.bootstrap(),
        dir.path(),
        &url,
        "repeatable-read",
        "300",
        "si",
    );
}
