//! MongoDB capture and recovery on recorded payloads. Shapes:
//! - oplog entries: the server's `src/mongo/db/repl/oplog_entry.idl` (fields `ts`, `t`, `v`,
//!   `op`, `ns`, `ui`, `o`, `o2`, `lsid`, `txnNumber`, `prevOpTime`, `wall`) and the manual's
//!   "Replica Set Oplog" page, as `mongoexport --db local --collection oplog.rs` writes them
//!   (relaxed extended JSON v2: `{"$timestamp":{"t":..,"i":..}}`, `{"$numberLong":".."}`,
//!   `{"$binary":{"base64":..,"subType":"04"}}`); transactions as `applyOps` commands in
//!   `admin.$cmd`, large ones with `partialTxn: true`, prepared ones with `prepare: true` and
//!   a `commitTransaction` entry carrying `commitTimestamp`
//!   (`src/mongo/db/op_observer/op_observer_impl.cpp`); updates as `$v: 2` diffs
//!   (`src/mongo/db/update/document_diff_serialization.h`: sections `u`, `i`, `d`);
//! - change events: the manual's "Change Events" pages (`insert`, `update`, `replace`,
//!   `delete`), `_id` the resume token `{"_data": hex}`, `lsid`/`txnNumber` on events of a
//!   transaction, which share the commit's `clusterTime`.

use isocert_history::{v1, History, OpRef, Scalar, Status, Timestamp, TxnId, Writer};

use super::{mongo_txn_xid, read_change_stream, read_oplog, recover_mongodb};
use crate::RawLogError;

const LSID_A: &str = "3K1x8V0aR3qv0mH0p3m7xg==";
const LSID_B: &str = "c2Vzc2lvbi1iLXV1aWQtMQ==";
const UI: &str = r#"{"$binary":{"base64":"q83vEjRWeJCrze8SNFZ4kA==","subType":"04"}}"#;

fn lsid(id: &str) -> String {
    format!(
        r#"{{"id":{{"$binary":{{"base64":"{id}","subType":"04"}}}},"uid":{{"$binary":{{"base64":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","subType":"00"}}}}}}"#
    )
}

fn ts(t: u32, i: u32) -> String {
    format!(r#"{{"$timestamp":{{"t":{t},"i":{i}}}}}"#)
}

fn insert(key: i64, value: i64, writer: u64) -> String {
    format!(
        r#"{{"op":"i","ns":"isocert.kv","ui":{UI},"o":{{"_id":{key},"value":{value},"writer":"{writer}"}}}}"#
    )
}

fn update(key: i64, value: i64, writer: u64) -> String {
    format!(
        r#"{{"op":"u","ns":"isocert.kv","ui":{UI},"o":{{"$v":2,"diff":{{"u":{{"value":{value},"writer":"{writer}"}}}}}},"o2":{{"_id":{key}}}}}"#
    )
}

fn delete(key: i64) -> String {
    format!(r#"{{"op":"d","ns":"isocert.kv","ui":{UI},"o":{{"_id":{key}}}}}"#)
}

/// A transaction's `applyOps` entry; `extra` adds `partialTxn`/`prepare` flags.
fn apply_ops(session: &str, txn: i64, at: (u32, u32), ops: &[String], extra: &str) -> String {
    format!(
        r#"{{"lsid":{},"txnNumber":{{"$numberLong":"{txn}"}},"op":"c","ns":"admin.$cmd","o":{{"applyOps":[{}]{extra}}},"ts":{},"t":{{"$numberLong":"1"}},"v":{{"$numberLong":"2"}},"wall":{{"$date":"2023-11-14T22:13:20.000Z"}},"prevOpTime":{{"ts":{{"$timestamp":{{"t":0,"i":0}}}},"t":{{"$numberLong":"-1"}}}}}}"#,
        lsid(session),
        ops.join(","),
        ts(at.0, at.1)
    )
}

fn history(lines: &[&str]) -> History {
    let header = r#"{"format":"isocert-history","version":1,"dialect":"mongodb"}"#;
    let text = std::iter::once(header).chain(lines.iter().copied()).collect::<Vec<_>>().join("\n");
    v1::read_history(text.as_bytes()).expect("history")
}

/// A history transaction's meta: session, txn number, snapshot and commit cluster times.
fn meta(session: &str, txn: i64, read: Option<(u32, u32)>, commit: Option<(u32, u32)>) -> String {
    let mut m = format!(r#""lsid":"{session}","txn_number":{txn}"#);
    if let Some((t, i)) = read {
        m += &format!(r#","read_ts":{{"t":{t},"i":{i}}}"#);
    }
    if let Some((t, i)) = commit {
        m += &format!(r#","commit_ts":{{"t":{t},"i":{i}}}"#);
    }
    format!("{{{m}}}")
}

fn never(
    _: &History,
    _: isocert_history::PredId,
    _: isocert_history::ObjId,
    _: isocert_history::ValueId,
) -> Result<bool, String> {
    Ok(true)
}

#[test]
fn transactions_from_apply_ops_in_cluster_time_order() {
    let dump = [
        // A collection creation and a no-op: no document changes.
        format!(r#"{{"op":"c","ns":"isocert.$cmd","ui":{UI},"o":{{"create":"kv"}},"ts":{},"t":{{"$numberLong":"1"}}}}"#, ts(1_700_000_000, 1)),
        format!(r#"{{"op":"n","ns":"","o":{{"msg":"periodic noop"}},"ts":{},"t":{{"$numberLong":"1"}}}}"#, ts(1_700_000_000, 2)),
        apply_ops(LSID_A, 1, (1_700_000_001, 1), &[insert(1, 10, 1), insert(2, 20, 1)], ""),
        apply_ops(LSID_B, 4, (1_700_000_001, 2), &[update(1, 11, 2), delete(2)], ""),
    ]
    .join("\n");
    let log = read_oplog(dump.as_bytes(), Some("isocert")).expect("reads");
    assert_eq!(log.len(), 2);
    let t = &log.txns()[0];
    assert_eq!(t.xid, mongo_txn_xid(LSID_A, 1));
    assert_eq!(t.commit_ts, Some(Timestamp::hlc(1_700_000_001, 1)));
    assert_eq!(t.changes.len(), 2);
    assert_eq!(&*t.changes[0].table, "kv");
    // The writer tag is not a column.
    assert_eq!(
        t.changes[0].row.as_deref(),
        Some(&[("_id".into(), Scalar::Int(1)), ("value".into(), Scalar::Int(10))][..])
    );
    let u = &log.txns()[1];
    // The $v:2 diff applied to the inserted document gives the whole row.
    assert_eq!(
        u.changes[0].row.as_deref(),
        Some(&[("_id".into(), Scalar::Int(1)), ("value".into(), Scalar::Int(11))][..])
    );
    assert_eq!(u.changes[1].row, None);
    assert!(log.txns()[0].commit_lsn < log.txns()[1].commit_lsn);

    // Recovery: version order by cluster time, reads by snapshot time.
    let m1 = meta(LSID_A, 1, Some((1_700_000_000, 5)), Some((1_700_000_001, 1)));
    let m2 = meta(LSID_B, 4, Some((1_700_000_001, 1)), Some((1_700_000_001, 2)));
    let m3 = meta(LSID_A, 2, Some((1_700_000_001, 1)), None);
    let lines = [
        format!(
            r#"{{"id":1,"session":1,"ops":[{{"f":"w","key":1,"value":10}},{{"f":"w","key":2,"value":20}}],"meta":{m1}}}"#
        ),
        format!(
            r#"{{"id":2,"session":2,"ops":[{{"f":"r","key":1,"value":10}},{{"f":"w","key":1,"value":11}},{{"f":"w","key":2,"value":null}}],"meta":{m2}}}"#
        ),
        format!(
            r#"{{"id":3,"session":1,"ops":[{{"f":"select","table":"kv","where":"{{\"value\": {{\"$gte\": 0}}}}","rows":[{{"key":1,"value":10}},{{"key":2,"value":20}}]}}],"meta":{m3}}}"#
        ),
    ];
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let r = recover_mongodb(&mut h, &log, &never).expect("recovers");
    let key1 = h.object_by_key(h.table_by_name("kv").unwrap(), &Scalar::Int(1)).unwrap();
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&key1], vec![TxnId(0), TxnId(1)]);
    let sets = r.certificate.version_sets.as_ref().unwrap();
    assert_eq!(sets[&OpRef { txn: TxnId(1), op: 0 }][0].writer, Writer::Txn(TxnId(0)));
    // T3 read at (…001, 1): T1's versions, not T2's.
    assert!(sets[&OpRef { txn: TxnId(2), op: 0 }].iter().all(|s| s.writer == Writer::Txn(TxnId(0))));
    assert_eq!(h.txns[1].commit_ts(), Some(Timestamp::hlc(1_700_000_001, 2)));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Issue 33: the Rust driver keeps `txnNumber` on the pooled server session, so a test-client
/// session that gets a pooled `lsid` starts at that session's number (here 42, after earlier
/// transactions and retryable writes took it to 41), and a session reconnected after a
/// non-network error may get the same `lsid` again (43). Counting from 1 per test-client
/// session named both attempts `(lsid, 1)`: recovery then refused the log. The adapter now
/// records the number the driver sent (command monitoring, `adapters/src/mongodb/txn_numbers.rs`).
#[test]
fn issue_33_attempts_are_matched_by_the_txn_number_the_driver_sent() {
    let dump = [
        apply_ops(LSID_A, 42, (1_700_000_001, 1), &[insert(1, 10, 1)], ""),
        apply_ops(LSID_A, 43, (1_700_000_002, 1), &[update(1, 11, 2)], ""),
    ]
    .join("\n");
    let log = read_oplog(dump.as_bytes(), Some("isocert")).expect("reads");
    let txns = |first: i64, second: i64| {
        let m1 = meta(LSID_A, first, Some((1_700_000_000, 5)), Some((1_700_000_001, 1)));
        let m2 = meta(LSID_A, second, Some((1_700_000_001, 1)), Some((1_700_000_002, 1)));
        [
            format!(r#"{{"id":1,"session":1,"ops":[{{"f":"w","key":1,"value":10}}],"meta":{m1}}}"#),
            format!(
                r#"{{"id":2,"session":2,"ops":[{{"f":"r","key":1,"value":10}},{{"f":"w","key":1,"value":11}}],"meta":{m2}}}"#
            ),
        ]
    };
    // As the driver sent them: both attempts found, in cluster-time order.
    let lines = txns(42, 43);
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let r = recover_mongodb(&mut h, &log, &never).expect("recovers");
    let key1 = h.object_by_key(h.table_by_name("kv").unwrap(), &Scalar::Int(1)).unwrap();
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&key1], vec![TxnId(0), TxnId(1)]);
    // As a per-session count would have recorded them: the log's writers are unknown.
    let lines = txns(1, 1);
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let e = recover_mongodb(&mut h, &log, &never).expect_err("counted numbers name nothing in the log");
    assert!(e.to_string().contains("T1 and T2 both record xid"), "{e}");
}

#[test]
fn large_transactions_split_over_partial_entries_commit_at_the_last() {
    let dump = [
        apply_ops(LSID_A, 7, (1_700_000_010, 1), &[insert(1, 1, 7)], r#","partialTxn":true"#),
        // Another transaction commits between the parts: it is ordered before the large one.
        apply_ops(LSID_B, 1, (1_700_000_010, 2), &[insert(9, 90, 8)], ""),
        apply_ops(LSID_A, 7, (1_700_000_010, 3), &[insert(2, 2, 7)], r#","partialTxn":true"#),
        apply_ops(LSID_A, 7, (1_700_000_010, 4), &[insert(3, 3, 7)], r#","count":{"$numberLong":"3"}"#),
    ]
    .join("\n");
    let log = read_oplog(dump.as_bytes(), None).expect("reads");
    assert_eq!(log.len(), 2);
    assert_eq!(log.txns()[0].xid, mongo_txn_xid(LSID_B, 1));
    let big = &log.txns()[1];
    assert_eq!(big.xid, mongo_txn_xid(LSID_A, 7));
    assert_eq!(big.commit_ts, Some(Timestamp::hlc(1_700_000_010, 4)));
    let keys: Vec<&Scalar> = big.changes.iter().map(|c| &c.key).collect();
    assert_eq!(keys, [&Scalar::Int(1), &Scalar::Int(2), &Scalar::Int(3)]);
}

#[test]
fn prepared_transactions_commit_at_their_commit_timestamp_and_aborts_leave_nothing() {
    let commit = format!(
        r#"{{"lsid":{},"txnNumber":{{"$numberLong":"3"}},"op":"c","ns":"admin.$cmd","o":{{"commitTransaction":1,"commitTimestamp":{}}},"ts":{},"prevOpTime":{{"ts":{},"t":{{"$numberLong":"1"}}}}}}"#,
        lsid(LSID_A),
        ts(1_700_000_020, 2),
        ts(1_700_000_020, 5),
        ts(1_700_000_020, 1)
    );
    let abort = format!(
        r#"{{"lsid":{},"txnNumber":{{"$numberLong":"9"}},"op":"c","ns":"admin.$cmd","o":{{"abortTransaction":1}},"ts":{}}}"#,
        lsid(LSID_B),
        ts(1_700_000_020, 6)
    );
    let dump = [
        apply_ops(LSID_A, 3, (1_700_000_020, 1), &[insert(1, 5, 3)], r#","prepare":true"#),
        apply_ops(LSID_B, 9, (1_700_000_020, 3), &[insert(2, 6, 9)], r#","prepare":true"#),
        apply_ops(LSID_B, 8, (1_700_000_020, 4), &[insert(3, 7, 8)], ""),
        commit,
        abort,
    ]
    .join("\n");
    let log = read_oplog(dump.as_bytes(), None).expect("reads");
    let order: Vec<(u64, Option<Timestamp>)> = log.txns().iter().map(|t| (t.xid, t.commit_ts)).collect();
    assert_eq!(
        order,
        [
            (mongo_txn_xid(LSID_A, 3), Some(Timestamp::hlc(1_700_000_020, 2))),
            (mongo_txn_xid(LSID_B, 8), Some(Timestamp::hlc(1_700_000_020, 4))),
        ],
        "the prepared-then-aborted transaction is not a commit"
    );
}

#[test]
fn aborted_and_unknown_outcomes_settle_by_the_oplog() {
    // An aborted transaction is never in the oplog (writes are logged at commit); an
    // unknown one (UnknownTransactionCommitResult) is committed iff it is there.
    let dump = apply_ops(LSID_A, 2, (1_700_000_030, 1), &[insert(1, 12, 2)], "");
    let log = read_oplog(dump.as_bytes(), None).expect("reads");
    let aborted = meta(LSID_A, 1, Some((1_700_000_029, 1)), None);
    let unknown_in = meta(LSID_A, 2, Some((1_700_000_029, 1)), None);
    let unknown_out = meta(LSID_B, 5, Some((1_700_000_029, 1)), None);
    let lines = [
        format!(
            r#"{{"id":1,"session":1,"status":"aborted","ops":[{{"f":"w","key":1,"value":11}}],"meta":{aborted}}}"#
        ),
        format!(
            r#"{{"id":2,"session":1,"status":"unknown","ops":[{{"f":"w","key":1,"value":12}}],"meta":{unknown_in}}}"#
        ),
        format!(
            r#"{{"id":3,"session":2,"status":"unknown","ops":[{{"f":"w","key":2,"value":13}}],"meta":{unknown_out}}}"#
        ),
    ];
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let r = recover_mongodb(&mut h, &log, &never).expect("recovers");
    assert_eq!(h.txns[0].status, Status::Aborted);
    assert_eq!(h.txns[1].status, Status::Committed);
    assert_eq!(h.txns[2].status, Status::Aborted);
    assert_eq!((r.stats.resolved_committed, r.stats.resolved_aborted), (1, 1));
    // The commit time comes from the oplog: the client never learned it.
    assert_eq!(h.txns[1].commit_ts(), Some(Timestamp::hlc(1_700_000_030, 1)));
}

#[test]
fn repeated_entries_and_events_after_a_resume_are_read_once() {
    let a = apply_ops(LSID_A, 1, (1_700_000_040, 1), &[insert(1, 1, 1)], "");
    let b = apply_ops(LSID_A, 2, (1_700_000_040, 2), &[update(1, 2, 2)], "");
    let dump = [a.clone(), b.clone(), b, a].join("\n");
    let log = read_oplog(dump.as_bytes(), None).expect("reads");
    assert_eq!(log.len(), 2);
    assert_eq!(log.txns()[1].changes[0].row.as_ref().unwrap()[1].1, Scalar::Int(2));

    let ev = |token: &str, kind: &str, key: i64, value: Option<i64>, txn: i64, at: (u32, u32)| {
        let body = match (kind, value) {
            ("insert", Some(v)) => format!(r#","fullDocument":{{"_id":{key},"value":{v},"writer":"{txn}"}}"#),
            ("update", Some(v)) => format!(
                r#","updateDescription":{{"updatedFields":{{"value":{v},"writer":"{txn}"}},"removedFields":[],"truncatedArrays":[]}}"#
            ),
            _ => String::new(),
        };
        format!(
            r#"{{"_id":{{"_data":"{token}"}},"operationType":"{kind}","clusterTime":{},"wallTime":{{"$date":"2023-11-14T22:14:00.000Z"}},"ns":{{"db":"isocert","coll":"kv"}},"documentKey":{{"_id":{key}}}{body},"lsid":{},"txnNumber":{{"$numberLong":"{txn}"}}}}"#,
            ts(at.0, at.1),
            lsid(LSID_A)
        )
    };
    let e1 = ev("8265A1B2C3000000012B0429", "insert", 1, Some(1), 1, (1_700_000_040, 1));
    let e2 = ev("8265A1B2C3000000012B042A", "insert", 2, Some(5), 1, (1_700_000_040, 1));
    let e3 = ev("8265A1B2C3000000022B0429", "update", 1, Some(2), 2, (1_700_000_040, 2));
    let e4 = ev("8265A1B2C3000000032B0429", "delete", 2, None, 3, (1_700_000_040, 3));
    // The consumer resumed after e2 from an older token: e2 and e3 arrive again.
    let stream = [&e1, &e2, &e3, &e2, &e3, &e4].map(String::as_str).join("\n");
    let log = read_change_stream(stream.as_bytes(), Some("isocert")).expect("reads");
    assert_eq!(log.len(), 3);
    // One transaction's events share its clusterTime: grouped, not ties.
    assert_eq!(log.txns()[0].changes.len(), 2);
    assert_eq!(log.txns()[0].xid, mongo_txn_xid(LSID_A, 1));
    // The update without fullDocument is applied to the inserted document.
    assert_eq!(
        log.txns()[1].changes[0].row.as_deref(),
        Some(&[("_id".into(), Scalar::Int(1)), ("value".into(), Scalar::Int(2))][..])
    );
    assert_eq!(log.txns()[2].changes[0].row, None);
}

#[test]
fn timestamp_ties_order_by_increment_and_two_commits_at_one_time_are_refused() {
    // Same second, increments 2 and 10: ordered numerically (not as text).
    let dump = [
        apply_ops(LSID_A, 2, (1_700_000_050, 10), &[update(1, 3, 2)], ""),
        apply_ops(LSID_A, 1, (1_700_000_050, 2), &[insert(1, 1, 1)], ""),
    ]
    .join("\n");
    let log = read_oplog(dump.as_bytes(), None).expect("reads");
    assert_eq!(log.txns()[0].xid, mongo_txn_xid(LSID_A, 1));
    assert_eq!(log.txns()[1].commit_ts, Some(Timestamp::hlc(1_700_000_050, 10)));

    let tie = [
        apply_ops(LSID_A, 1, (1_700_000_050, 2), &[insert(1, 1, 1)], ""),
        apply_ops(LSID_B, 1, (1_700_000_050, 2), &[insert(2, 1, 1)], ""),
    ]
    .join("\n");
    let e = read_oplog(tie.as_bytes(), None).unwrap_err().to_string();
    assert!(e.contains("same cluster time"), "{e}");
}

#[test]
fn bad_entries_name_their_line_and_field() {
    let cases = [
        ("not json", 1, "entry"),
        (r#"{"op":"i","ns":"isocert.kv","o":{"_id":1}}"#, 1, "ts"),
        (
            &*format!(r#"{{"op":"i","ns":"isocert.kv","o":{{"_id":1,"value":[1,2]}},"ts":{}}}"#, ts(1, 1)),
            1,
            "o.value",
        ),
        (
            &*format!(
                r#"{{"op":"u","ns":"isocert.kv","o":{{"$v":2,"diff":{{"sa":{{"u":{{"b":1}}}}}}}},"o2":{{"_id":1}},"ts":{}}}"#,
                ts(1, 1)
            ),
            1,
            "o.diff.sa",
        ),
        (
            &*format!(
                r#"{{"op":"c","ns":"admin.$cmd","o":{{"applyOps":[{{"op":"i","ns":"isocert.kv","o":{{"value":1}}}}]}},"ts":{}}}"#,
                ts(1, 1)
            ),
            1,
            "o.applyOps[0].o._id",
        ),
        (&*format!(r#"{{"op":"x","ns":"isocert.kv","o":{{}},"ts":{}}}"#, ts(1, 1)), 1, "op"),
    ];
    for (text, line, field) in cases {
        let input = format!("\n{text}");
        match read_oplog(input.as_bytes(), None) {
            Err(RawLogError::Line { line: l, field: f, .. }) => {
                assert_eq!((l, f.as_str()), (line + 1, field), "{text}")
            }
            other => panic!("{text}: expected a line error, got {other:?}"),
        }
    }
}

/// T1 writes 1 at (…060,1), T2 at (…060,3). T3 only knows its snapshot lies between
/// (…060,0) and (…060,5); it read T1's value, so its snapshot is before T2's commit. The
/// oplog entries and the history lines.
fn bracketed_run() -> (Vec<String>, Vec<String>) {
    let dump = vec![
        apply_ops(LSID_A, 1, (1_700_000_060, 1), &[insert(1, 1, 1)], ""),
        apply_ops(LSID_A, 2, (1_700_000_060, 3), &[update(1, 2, 2)], ""),
    ];
    let lines = vec![
        format!(
            r#"{{"id":1,"session":1,"ops":[{{"f":"w","key":1,"value":1}}],"meta":{}}}"#,
            meta(LSID_A, 1, Some((1_700_000_059, 1)), Some((1_700_000_060, 1)))
        ),
        format!(
            r#"{{"id":2,"session":1,"ops":[{{"f":"w","key":1,"value":2}}],"meta":{}}}"#,
            meta(LSID_A, 2, Some((1_700_000_060, 1)), Some((1_700_000_060, 3)))
        ),
        format!(
            r#"{{"id":3,"session":2,"ops":[{{"f":"r","key":1,"value":1}}],"meta":{{"lsid":"{LSID_B}","txn_number":1,"read_after":{{"t":1700000060,"i":0}},"read_before":{{"t":1700000060,"i":5}},"commit_ts":{{"t":1700000060,"i":5}}}}}}"#
        ),
    ];
    (dump, lines)
}

#[test]
fn a_bracketed_snapshot_is_placed_by_the_item_reads() {
    let (dump, lines) = bracketed_run();
    let log = read_oplog(dump.join("\n").as_bytes(), None).expect("reads");
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let r = recover_mongodb(&mut h, &log, &never).expect("recovers");
    assert_eq!(h.txns[2].start_ts(), Some(Timestamp::hlc(1_700_000_060, 1)));
    assert_eq!(
        r.certificate.version_sets.as_ref().unwrap()[&OpRef { txn: TxnId(2), op: 0 }][0].writer,
        Writer::Txn(TxnId(0))
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Change events across server versions and the near misses of each. Shapes: the manual's
/// "Change Events" pages (MongoDB 6.0+: `wallTime`; `collectionUUID` with
/// `showExpandedEvents`; `fullDocument` on an update when the collection records post-images;
/// 5.0 and older: `update` events with only `updateDescription`), written as relaxed
/// extended JSON (`EJSON.stringify` with `relaxed: true`: a small `txnNumber` as a plain
/// number) or canonical (`{"$numberLong": ...}`); `replace` events carry the whole document.
#[test]
fn change_events_across_server_versions_and_their_near_misses() {
    let head = |token: &str, kind: &str, at: (u32, u32)| {
        format!(
            r#""_id":{{"_data":"{token}"}},"operationType":"{kind}","clusterTime":{},"ns":{{"db":"isocert","coll":"kv"}}"#,
            ts(at.0, at.1)
        )
    };
    let events = [
        // 6.0+, with the post-image and the expanded fields, txnNumber relaxed.
        format!(
            r#"{{{},"collectionUUID":{UI},"wallTime":{{"$date":"2023-11-14T22:14:00.000Z"}},"documentKey":{{"_id":1}},"fullDocument":{{"_id":1,"value":4,"writer":9}},"updateDescription":{{"updatedFields":{{"value":4,"writer":9}},"removedFields":[]}},"lsid":{},"txnNumber":7}}"#,
            head("82A1", "update", (1_700_000_060, 1)),
            lsid(LSID_A)
        ),
        // A replace, canonical txnNumber.
        format!(
            r#"{{{},"documentKey":{{"_id":2}},"fullDocument":{{"_id":2,"value":8}},"lsid":{},"txnNumber":{{"$numberLong":"8"}}}}"#,
            head("82A2", "replace", (1_700_000_061, 1)),
            lsid(LSID_A)
        ),
        // A write outside a transaction (no lsid): a transaction of its own.
        format!(r#"{{{},"documentKey":{{"_id":3}}}}"#, head("82A3", "delete", (1_700_000_062, 1))),
    ];
    let log = read_change_stream(events.join("\n").as_bytes(), Some("isocert")).expect("reads");
    assert_eq!(log.len(), 3);
    assert_eq!(log.txns()[0].xid, mongo_txn_xid(LSID_A, 7));
    assert_eq!(log.txns()[1].xid, mongo_txn_xid(LSID_A, 8));
    assert_eq!(
        log.txns()[0].changes[0].row.as_deref(),
        Some(&[("_id".into(), Scalar::Int(1)), ("value".into(), Scalar::Int(4))][..]),
        "the post-image wins, the writer tag is not a column"
    );
    assert_eq!(log.txns()[2].changes[0].row, None);

    let near_misses = [
        // No resume token.
        (r#"{"operationType":"insert"}"#.to_string(), "_id"),
        // clusterTime as a date, not a Timestamp.
        (
            r#"{"_id":{"_data":"82B1"},"operationType":"delete","clusterTime":{"$date":"2023-11-14T22:14:00.000Z"},"ns":{"db":"isocert","coll":"kv"},"documentKey":{"_id":1}}"#.to_string(),
            "clusterTime",
        ),
        // An update with neither a post-image nor an update description.
        (format!(r#"{{{},"documentKey":{{"_id":1}}}}"#, head("82B2", "update", (1, 1))), "updateDescription"),
        // An insert without its document.
        (format!(r#"{{{},"documentKey":{{"_id":1}}}}"#, head("82B3", "insert", (1, 1))), "fullDocument"),
        // A namespace without a collection.
        (
            format!(r#"{{"_id":{{"_data":"82B4"}},"operationType":"delete","clusterTime":{},"ns":{{"db":"isocert"}},"documentKey":{{"_id":1}}}}"#, ts(1, 1)),
            "ns",
        ),
    ];
    for (event, field) in near_misses {
        match read_change_stream(event.as_bytes(), Some("isocert")) {
            Err(RawLogError::Line { line: 1, field: f, .. }) => assert_eq!(f, field, "{event}"),
            other => panic!("{event}: expected a line error naming {field}, got {other:?}"),
        }
    }
}

/// The live rule ([`super::MongoLiveTicks`]) fed the run in two groups, each with the
/// stream's commits up to its cut (later ones may follow in the stream), gives every
/// transaction recovery's cluster times: commits from the stream, a bracketed snapshot
/// placed among the commits so far by the same rule. A commit of no recorded transaction
/// ahead of a group's own, and an unknown outcome, stop it.
#[test]
fn live_ticks_are_the_recovered_cluster_times() {
    use std::collections::VecDeque;

    use crate::{LiveTicks, MongoLiveTicks};

    let (mut dump, mut lines) = bracketed_run();
    dump.push(apply_ops(LSID_B, 2, (1_700_000_060, 7), &[insert(2, 4, 4)], ""));
    let log = read_oplog(dump.join("\n").as_bytes(), None).expect("reads");
    lines.push(format!(
        r#"{{"id":4,"session":2,"ops":[{{"f":"r","key":1,"value":2}},{{"f":"w","key":2,"value":4}}],"meta":{}}}"#,
        meta(LSID_B, 2, Some((1_700_000_060, 5)), Some((1_700_000_060, 7)))
    ));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let live = history(&lines);
    let mut rule = MongoLiveTicks::new();
    rule.initial(&live.initial);
    let mut stream: VecDeque<_> = log.txns().iter().cloned().collect();
    let mut published = Vec::new();
    for group in [&[0usize, 1, 2][..], &[3]] {
        let txns: Vec<_> = group.iter().map(|&i| (TxnId(i as u32), &live.txns[i])).collect();
        published.extend(rule.group(&txns, &mut stream).expect("live ticks"));
    }
    let mut h = history(&lines);
    recover_mongodb(&mut h, &log, &never).expect("recovers");
    let recovered: Vec<_> =
        h.txns.iter().map(|t| Some((t.start_ts().unwrap(), t.commit_ts().unwrap()))).collect();
    assert_eq!(published, recovered);
    assert_eq!(published[2].unwrap().0, Timestamp::hlc(1_700_000_060, 1), "placed before T2's commit");

    // Group 2 alone, with T1's commit (recorded in no group) ahead of its own: stopped.
    let mut fresh = MongoLiveTicks::new();
    let mut stream: VecDeque<_> = log.txns().iter().cloned().collect();
    let e = fresh.group(&[(TxnId(3), &live.txns[3])], &mut stream).unwrap_err().to_string();
    assert!(e.contains("no transaction recorded before it"), "{e}");
    let mut unknown = live.txns[3].clone();
    unknown.status = Status::Unknown;
    let e =
        MongoLiveTicks::new().group(&[(TxnId(3), &unknown)], &mut VecDeque::new()).unwrap_err().to_string();
    assert!(e.contains("unknown"), "{e}");
}

/// A change stream read in batches at cuts gives the transactions reading it whole gives,
/// an update without `fullDocument` applied to the document an earlier batch left.
#[test]
fn a_change_stream_read_in_batches_is_the_stream_read_whole() {
    let event = |token: &str, kind: &str, at: (u32, u32), txn: i64, body: &str| {
        format!(
            r#"{{"_id":{{"_data":"{token}"}},"operationType":"{kind}","clusterTime":{},"ns":{{"db":"isocert","coll":"kv"}},"documentKey":{{"_id":1}},{body},"lsid":{},"txnNumber":{txn}}}"#,
            ts(at.0, at.1),
            lsid(LSID_A)
        )
    };
    let first =
        event("01", "insert", (1_700_000_070, 1), 1, r#""fullDocument":{"_id":1,"value":1,"writer":"1"}"#);
    let second = event(
        "02",
        "update",
        (1_700_000_070, 2),
        2,
        r#""updateDescription":{"updatedFields":{"value":2},"removedFields":[]}"#,
    );
    let whole = read_change_stream(format!("{first}\n{second}").as_bytes(), Some("isocert")).unwrap();
    let mut reader = super::ChangeStreamReader::new(Some("isocert"));
    let mut batches = reader.read_batch(first.as_bytes()).unwrap();
    // The first event again (a resume), then the update.
    batches.extend(reader.read_batch(format!("{first}\n{second}").as_bytes()).unwrap());
    assert_eq!(batches, whole.txns());
    let e = reader.read_batch(b"{}".as_slice()).unwrap_err().to_string();
    assert!(e.contains("line 4"), "errors name the line in the whole stream: {e}");
}

/// Issue 46: a `predicate` run's table `items` has the key column `id`, its documents carry
/// `_id` (the adapter writes a row's first column as `_id`): recovery used to stop with a
/// value mismatch, so no predicate run on MongoDB could be certified. Shapes: the oplog as
/// above, in `isocert.items`.
#[test]
fn a_predicate_runs_documents_match_its_rows_by_the_key_column() {
    let items = |key: i64, v: i64, writer: u64| {
        format!(
            r#"{{"op":"i","ns":"isocert.items","ui":{UI},"o":{{"_id":{key},"c1":{key},"v":{v},"writer":"{writer}"}}}}"#
        )
    };
    let set_v = |key: i64, v: i64, writer: u64| {
        format!(
            r#"{{"op":"u","ns":"isocert.items","ui":{UI},"o":{{"$v":2,"diff":{{"u":{{"v":{v},"writer":"{writer}"}}}}}},"o2":{{"_id":{key}}}}}"#
        )
    };
    let dump = [
        apply_ops(LSID_A, 1, (1_700_000_060, 1), &[items(1, 10, 1), items(2, 20, 1)], ""),
        apply_ops(LSID_A, 2, (1_700_000_060, 2), &[set_v(1, 11, 2)], ""),
    ];
    let log = read_oplog(dump.join("\n").as_bytes(), None).expect("reads");
    let header = r#"{"format":"isocert-history","version":1,"dialect":"mongodb"}"#;
    let lines = [
        header.to_string(),
        format!(
            r#"{{"id":1,"session":1,"ops":[{{"f":"w","table":"items","key":1,"value":{{"id":1,"c1":1,"v":10}}}},{{"f":"w","table":"items","key":2,"value":{{"id":2,"c1":2,"v":20}}}}],"meta":{}}}"#,
            meta(LSID_A, 1, Some((1_700_000_059, 1)), Some((1_700_000_060, 1)))
        ),
        format!(
            r#"{{"id":2,"session":1,"ops":[{{"f":"select","table":"items","where":"{{\"v\": {{\"$gte\": 10}}}}","rows":[{{"key":1,"value":{{"id":1,"c1":1,"v":10}}}},{{"key":2,"value":{{"id":2,"c1":2,"v":20}}}}]}},{{"f":"w","table":"items","key":1,"value":{{"id":1,"c1":1,"v":11}}}}],"meta":{}}}"#,
            meta(LSID_A, 2, Some((1_700_000_060, 1)), Some((1_700_000_060, 2)))
        ),
    ];
    let mut h = v1::read_history(lines.join("\n").as_bytes()).expect("history");
    let r = recover_mongodb(&mut h, &log, &never).expect("the documents match the rows");
    let items = h.table_by_name("items").unwrap();
    let one = h.object_by_key(items, &Scalar::Int(1)).unwrap();
    assert_eq!(r.certificate.version_order.unwrap()[&one], vec![TxnId(0), TxnId(1)]);
}
