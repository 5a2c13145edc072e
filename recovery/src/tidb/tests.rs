//! The timestamp-ordering rule on small histories whose facts and versions are shaped as
//! the TiDB adapter records them (docs/TIDB.md): `meta.start_ts` from `@@tidb_current_ts`,
//! `meta.commit_ts` from `@@tidb_last_txn_info`, `read_ts` from `@@tidb_last_query_info`,
//! and a log sorted by commit timestamp with `xid` = start_ts, `commit_time` = commit_ts.

use isocert_history::{v1, History, OpRef, Scalar, Status, TxnId, Writer};

use super::recover_tidb;
use crate::{CommittedTxn, RawLog, RecoveryError, RowChange};

const HEADER: &str = r#"{"format":"isocert-history","version":1,"initial":[{"table":"t","key":1,"value":{"id":1,"v":0}},{"table":"t","key":2,"value":{"id":2,"v":0}}]}"#;

fn history(lines: &[&str]) -> History {
    let text = std::iter::once(HEADER).chain(lines.iter().copied()).collect::<Vec<_>>().join("\n");
    v1::read_history(text.as_bytes()).expect("history")
}

/// A logged transaction writing `(key, v)` pairs of table `t`.
fn logged(position: u64, start_ts: u64, commit_ts: u64, writes: &[(i64, Option<i64>)]) -> CommittedTxn {
    CommittedTxn {
        xid: start_ts,
        commit_lsn: position,
        end_lsn: position,
        commit_time: commit_ts as i64,
        commit_ts: None,
        changes: writes
            .iter()
            .map(|&(key, v)| RowChange {
                table: "t".into(),
                key: Scalar::Int(key),
                row: v.map(|v| vec![("id".into(), Scalar::Int(key)), ("v".into(), Scalar::Int(v))]),
            })
            .collect(),
    }
}

fn log(txns: Vec<CommittedTxn>) -> RawLog {
    let mut log = RawLog::new();
    for t in txns {
        assert!(log.push(t));
    }
    log
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
fn reads_see_the_newest_version_committed_at_their_timestamp() {
    let mut h = history(&[
        r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"isolation":"repeatable-read","txn_mode":"pessimistic","start_ts":100,"commit_ts":110}}"#,
        r#"{"id":2,"session":2,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":0}},{"f":"select","table":"t","where":"v >= 0","rows":[{"key":1,"value":{"id":1,"v":0}},{"key":2,"value":{"id":2,"v":0}}]},{"f":"update","table":"t","where":"id = 1","set":{"v":20},"rows":[{"key":1,"value":{"id":1,"v":20}}],"meta":{"read_ts":120}}],"meta":{"isolation":"repeatable-read","txn_mode":"pessimistic","start_ts":105,"commit_ts":130}}"#,
        r#"{"id":3,"session":3,"status":"unknown","ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":30}}],"meta":{"isolation":"repeatable-read","start_ts":140}}"#,
    ]);
    let log = log(vec![
        logged(1, 100, 110, &[(1, Some(10))]),
        logged(2, 105, 130, &[(1, Some(20))]),
        logged(3, 140, 150, &[(2, Some(30))]),
    ]);
    let r = recover_tidb(&mut h, &log, &never).expect("recovers");
    let order = r.certificate.version_order.as_ref().unwrap();
    let key1 = h.object_by_key(h.table_by_name("t").unwrap(), &Scalar::Int(1)).unwrap();
    assert_eq!(order[&key1], vec![TxnId(0), TxnId(1)]);
    let sets = r.certificate.version_sets.as_ref().unwrap();
    // T2 started at 105: its plain reads saw the initial row 1; its UPDATE read at 120,
    // after T1's commit at 110 (pessimistic locking read).
    assert_eq!(sets[&OpRef { txn: TxnId(1), op: 0 }][0].writer, Writer::Initial);
    assert!(sets[&OpRef { txn: TxnId(1), op: 1 }].iter().all(|s| s.writer == Writer::Initial));
    let update = &sets[&OpRef { txn: TxnId(1), op: 2 }];
    assert!(update.iter().any(|s| s.obj == key1 && s.writer == Writer::Txn(TxnId(0))), "{update:?}");
    // The unknown commit is settled by its version; timestamps come from the log.
    assert_eq!(h.txns[2].status, Status::Committed);
    assert_eq!(r.stats.resolved_committed, 1);
    assert_eq!(h.txns[1].start_ts().as_ref().map(ToString::to_string).as_deref(), Some("105"));
    assert_eq!(h.txns[1].commit_ts().as_ref().map(ToString::to_string).as_deref(), Some("130"));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn history_and_versions_must_agree() {
    let writer = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"isolation":"repeatable-read","start_ts":100,"commit_ts":110}}"#;
    // The committed write has no version.
    let e = recover_tidb(&mut history(&[writer]), &RawLog::new(), &never).unwrap_err();
    assert!(matches!(e, RecoveryError::MissingWrite { .. }), "{e}");
    // A version with another value.
    let e = recover_tidb(&mut history(&[writer]), &log(vec![logged(1, 100, 110, &[(1, Some(11))])]), &never)
        .unwrap_err();
    assert!(matches!(e, RecoveryError::ValueMismatch { .. }), "{e}");
    // A version by a start timestamp no transaction recorded.
    let e = recover_tidb(&mut history(&[writer]), &log(vec![logged(1, 99, 110, &[(1, Some(10))])]), &never)
        .unwrap_err();
    assert!(matches!(e, RecoveryError::UnknownWriter { .. }), "{e}");
    // A committed transaction without its start timestamp.
    let bare = r#"{"id":1,"session":1,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":0}}],"meta":{"isolation":"repeatable-read"}}"#;
    let e = recover_tidb(&mut history(&[bare]), &RawLog::new(), &never).unwrap_err().to_string();
    assert!(e.contains("start_ts"), "{e}");
    // A client commit_ts that disagrees with the versions' is reported, the versions win.
    let mut h = history(&[writer]);
    let r = recover_tidb(&mut h, &log(vec![logged(1, 100, 111, &[(1, Some(10))])]), &never).unwrap();
    assert!(r.warnings[0].contains("110") && r.warnings[0].contains("111"), "{:?}", r.warnings);
}

/// The live rule ([`crate::RecordedLiveTicks`] over [`super::tidb_timestamps`]) gives each
/// committed transaction, group by group, the timestamps recovery writes when the MVCC
/// versions agree with the sessions; a read-only transaction (`commit_ts` 0) commits at its
/// start, as in recovery. An unknown outcome stops it (recovery settles it by the versions).
#[test]
fn live_ticks_are_the_recovered_timestamps_and_unknown_outcomes_stop_them() {
    use crate::{LiveTicks, RecordedLiveTicks};
    let lines = [
        r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":100,"commit_ts":110}}"#,
        r#"{"id":2,"session":2,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":115,"commit_ts":0}}"#,
        r#"{"id":3,"session":1,"ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":30}}],"meta":{"isolation":"repeatable-read","txn_mode":"optimistic","start_ts":120,"commit_ts":125}}"#,
    ];
    let live_history = history(&lines);
    let mut rule = RecordedLiveTicks::new(super::tidb_timestamps);
    let mut published = Vec::new();
    for group in [&[0usize, 1][..], &[2]] {
        let txns: Vec<(TxnId, &isocert_history::Transaction)> =
            group.iter().map(|&i| (TxnId(i as u32), &live_history.txns[i])).collect();
        published.extend(rule.group(&txns, &mut std::collections::VecDeque::new()).unwrap());
    }
    let mut h = history(&lines);
    let log = log(vec![logged(1, 100, 110, &[(1, Some(10))]), logged(2, 120, 125, &[(2, Some(30))])]);
    recover_tidb(&mut h, &log, &never).expect("recovers");
    let recovered: Vec<_> =
        h.txns.iter().map(|t| Some((t.start_ts().unwrap(), t.commit_ts().unwrap()))).collect();
    assert_eq!(published, recovered);
    assert_eq!(rule.low(), isocert_history::Timestamp::new(125), "the watermark: the highest timestamp");
    assert_eq!(h.serial_order, isocert_history::SerialOrder::Unknown, "snapshot isolation");
    assert_eq!(rule.serial_order(isocert_history::IsolationLevel::RepeatableRead), h.serial_order);

    let unknown = history(&[
        r#"{"id":4,"session":3,"status":"unknown","ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":40}}],"meta":{"isolation":"repeatable-read","start_ts":140}}"#,
    ]);
    let e = RecordedLiveTicks::new(super::tidb_timestamps)
        .group(&[(TxnId(0), &unknown.txns[0])], &mut std::collections::VecDeque::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown"), "{e}");
}
