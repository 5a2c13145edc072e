//! The shared timestamp-ordering rule on small histories, with the facts given directly as
//! each adapter reads them from its database: without a log (Dgraph: only start and commit
//! timestamps), with a log matched by commit timestamp (CockroachDB: HLC `WALL.LOGICAL`), and
//! HLC ties. The TiDB flavour (a log matched by `start_ts`) is tested in `crate::tidb`.

use isocert_history::{v1, History, OpRef, Scalar, Status, Timestamp, TxnId, Writer};

use super::{recover_by_timestamps, LogMatch, TimestampFacts, VersionSource};
use crate::{CommittedTxn, RawLog, RecoveryError, RowChange};

const HEADER: &str = r#"{"format":"isocert-history","version":1,"initial":[{"table":"t","key":1,"value":{"id":1,"v":0}},{"table":"t","key":2,"value":{"id":2,"v":0}}]}"#;

fn history(lines: &[&str]) -> History {
    let text = std::iter::once(HEADER).chain(lines.iter().copied()).collect::<Vec<_>>().join("\n");
    v1::read_history(text.as_bytes()).expect("history")
}

/// Facts from `(start, commit)` pairs, one per transaction.
fn facts(times: &[(Option<Timestamp>, Option<Timestamp>)]) -> TimestampFacts {
    let mut f = TimestampFacts::with_len(times.len());
    for (i, (s, c)) in times.iter().enumerate() {
        f.start[i] = *s;
        f.commit[i] = *c;
    }
    f
}

fn ts(wall: u64) -> Option<Timestamp> {
    Some(Timestamp::new(wall))
}

fn hlc(wall: u64, logical: u64) -> Option<Timestamp> {
    Some(Timestamp::hlc(wall, logical))
}

fn key(h: &History, k: i64) -> isocert_history::ObjId {
    h.object_by_key(h.table_by_name("t").unwrap(), &Scalar::Int(k)).unwrap()
}

const W1: &str = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}]}"#;
const R_OLD: &str = r#"{"id":2,"session":2,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":0}},{"f":"select","table":"t","where":"v >= 0","rows":[{"key":1,"value":{"id":1,"v":0}},{"key":2,"value":{"id":2,"v":0}}]}]}"#;
const R_NEW: &str = r#"{"id":3,"session":3,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":10}}]}"#;

#[test]
fn without_a_log_writers_are_ordered_by_commit_timestamp() {
    let lost = r#"{"id":4,"session":4,"status":"unknown","ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":40}}]}"#;
    let mut h = history(&[W1, R_OLD, R_NEW, lost]);
    let f = facts(&[(ts(100), ts(110)), (ts(105), ts(106)), (ts(115), ts(116)), (ts(120), None)]);
    let r = recover_by_timestamps(&mut h, VersionSource::CommitTimestamps, &f).expect("recovers");
    let sets = r.certificate.version_sets.as_ref().unwrap();
    // T2 read at 105, before T1's commit at 110; T3 at 115, after it.
    assert_eq!(sets[&OpRef { txn: TxnId(1), op: 0 }][0].writer, Writer::Initial);
    assert!(sets[&OpRef { txn: TxnId(1), op: 1 }].iter().all(|s| s.writer == Writer::Initial));
    assert_eq!(sets[&OpRef { txn: TxnId(2), op: 0 }][0].writer, Writer::Txn(TxnId(0)));
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&key(&h, 1)], vec![TxnId(0)]);
    // The lost commit nobody read is left out as aborted; timestamps land in the history.
    assert_eq!(h.txns[3].status, Status::Aborted);
    assert_eq!(h.txns[0].commit_ts(), ts(110));
    assert_eq!(h.txns[2].start_ts(), ts(115));
}

#[test]
fn without_a_log_an_unknown_commit_that_was_read_is_refused() {
    let lost = r#"{"id":1,"session":1,"status":"unknown","ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}]}"#;
    let mut h = history(&[lost, R_NEW]);
    let f = facts(&[(ts(100), None), (ts(115), ts(116))]);
    let e = recover_by_timestamps(&mut h, VersionSource::CommitTimestamps, &f).unwrap_err().to_string();
    assert!(e.contains("unknown") && e.contains("T3"), "{e}");
    // Its near twin: nobody read the value, so recovery goes on.
    let mut h = history(&[lost]);
    assert!(
        recover_by_timestamps(&mut h, VersionSource::CommitTimestamps, &facts(&[(ts(100), None)])).is_ok()
    );
}

#[test]
fn two_writers_of_a_row_at_one_timestamp_are_refused_and_hlc_logical_parts_order_them() {
    let w2 = r#"{"id":2,"session":2,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":20}}]}"#;
    let mut h = history(&[W1, w2]);
    let tie = facts(&[(hlc(100, 0), hlc(110, 1)), (hlc(101, 0), hlc(110, 1))]);
    let e = recover_by_timestamps(&mut h, VersionSource::CommitTimestamps, &tie).unwrap_err();
    assert!(matches!(&e, RecoveryError::Meta { field, .. } if field == "commit_ts"), "{e}");
    // Same wall time, logical parts 2 and 1: T2 wrote first.
    let mut h = history(&[W1, w2]);
    let apart = facts(&[(hlc(100, 0), hlc(110, 2)), (hlc(101, 0), hlc(110, 1))]);
    let r = recover_by_timestamps(&mut h, VersionSource::CommitTimestamps, &apart).expect("recovers");
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&key(&h, 1)], vec![TxnId(1), TxnId(0)]);
}

#[test]
fn a_log_is_matched_by_commit_timestamp_and_statements_read_at_their_own_timestamp() {
    let change = |v: i64| RowChange {
        table: "t".into(),
        key: Scalar::Int(1),
        row: Some(vec![("id".into(), Scalar::Int(1)), ("v".into(), Scalar::Int(v))]),
    };
    let mut log = RawLog::new();
    log.push(CommittedTxn {
        xid: 0,
        commit_lsn: 1,
        end_lsn: 1,
        commit_time: 0,
        commit_ts: hlc(110, 3),
        changes: vec![change(10)],
    });
    let mut h = history(&[W1, R_OLD, R_NEW]);
    let mut f = facts(&[(hlc(100, 0), hlc(110, 3)), (hlc(105, 0), None), (hlc(105, 0), None)]);
    // T3's statement read at (111, 0), after T1's commit (read committed).
    f.read_ts.insert(OpRef { txn: TxnId(2), op: 0 }, Timestamp::new(111));
    let source = VersionSource::Log { log: &log, by: LogMatch::CommitTimestamp };
    let r = recover_by_timestamps(&mut h, source, &f).expect("recovers");
    let sets = r.certificate.version_sets.as_ref().unwrap();
    assert_eq!(sets[&OpRef { txn: TxnId(1), op: 0 }][0].writer, Writer::Initial);
    assert_eq!(sets[&OpRef { txn: TxnId(2), op: 0 }][0].writer, Writer::Txn(TxnId(0)));
    assert_eq!(h.txns[0].commit_ts(), hlc(110, 3));
    // A logged commit at a timestamp no client recorded is an unknown writer.
    let mut h = history(&[W1]);
    let f = facts(&[(hlc(100, 0), hlc(110, 4))]);
    let e = recover_by_timestamps(&mut h, source, &f).unwrap_err();
    assert!(matches!(e, RecoveryError::UnknownWriter { .. }), "{e}");
}
