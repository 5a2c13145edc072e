//! Unit tests of the PostgreSQL rule on small hand-written histories and logs.

use isocert_history::{v1, History, ObjId, OpRef, PredId, Scalar, Status, TxnId, Value, ValueId, Writer};

use crate::{recover_postgres, CommittedTxn, PostgresRecovery, RawLog, RecoveryError, RowChange};

fn history(lines: &[&str]) -> History {
    v1::read_history(lines.join("\n").as_bytes()).unwrap()
}

/// A logged kv transaction: `(key, Some(value))` writes, `(key, None)` deletes.
fn logged(xid: u64, lsn: u64, writes: &[(i64, Option<i64>)]) -> CommittedTxn {
    let changes = writes
        .iter()
        .map(|&(k, v)| RowChange {
            table: "kv".into(),
            key: Scalar::Int(k),
            row: v.map(|v| vec![("key".into(), Scalar::Int(k)), ("value".into(), Scalar::Int(v))]),
        })
        .collect();
    CommittedTxn { xid, commit_lsn: lsn, end_lsn: lsn + 1, commit_time: 0, commit_ts: None, changes }
}

fn log(txns: Vec<CommittedTxn>) -> RawLog {
    let mut log = RawLog::new();
    txns.into_iter().for_each(|t| assert!(log.push(t)));
    log
}

/// The interpreter stand-in for kv predicates of the form `value > N`.
fn value_above(h: &History, pred: PredId, _obj: ObjId, value: ValueId) -> Result<bool, String> {
    let sql = &h.predicate(pred).sql;
    let bound: i64 =
        sql.strip_prefix("value > ").and_then(|n| n.parse().ok()).ok_or("unsupported predicate")?;
    Ok(matches!(h.value(value), Value::Scalar(Scalar::Int(v)) if *v > bound))
}

fn recover(h: &mut History, log: &RawLog) -> Result<PostgresRecovery, RecoveryError> {
    recover_postgres(h, log, &value_above)
}

fn t(h: &History, name: i64) -> TxnId {
    h.txn_by_name(&Scalar::Int(name)).unwrap()
}

fn obj(h: &History, key: i64) -> ObjId {
    h.object_by_key(h.table_by_name("kv").unwrap(), &Scalar::Int(key)).unwrap()
}

fn seen(r: &PostgresRecovery, h: &History, txn: i64, op: u32, key: i64) -> Option<Writer> {
    let sets = r.certificate.version_sets.as_ref().unwrap();
    sets[&OpRef { txn: t(h, txn), op }].iter().find(|v| v.obj == obj(h, key)).map(|v| v.writer)
}

#[test]
fn version_order_is_stream_order_and_snapshots_pick_visible_versions() {
    // T1 (xid 100) and T2 (xid 101) write key 1 in that order; T3's snapshot was taken
    // while T2 was running, T4's after both.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":20}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[{"key":1,"value":10}]}],"meta":{"xid":null,"snapshot":"101:102:101"}}"#,
        r#"{"id":4,"session":3,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[{"key":1,"value":20}]}],"meta":{"xid":null,"snapshot":"102:102:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(101, 2, &[(1, Some(20))])]))
        .unwrap();
    let order = &r.certificate.version_order.as_ref().unwrap()[&obj(&h, 1)];
    assert_eq!(order, &vec![t(&h, 1), t(&h, 2)]);
    assert_eq!(seen(&r, &h, 3, 0, 1), Some(Writer::Txn(t(&h, 1))));
    assert_eq!(seen(&r, &h, 4, 0, 1), Some(Writer::Txn(t(&h, 2))));
    // Timestamps: a writer is visible to a snapshot iff it committed before the start.
    let ts = |n: i64| (h.txn(t(&h, n)).start_ts().unwrap(), h.txn(t(&h, n)).commit_ts().unwrap());
    assert!(ts(1).1 < ts(3).0 && ts(3).0 < ts(2).1 && ts(2).1 < ts(4).0);
    assert!(ts(1).0 < ts(1).1 && ts(2).0 < ts(2).1);
    // The ticks order snapshots; SSI may serialize out of commit order.
    assert_eq!(h.serial_order, isocert_history::SerialOrder::Unknown);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.stats.logged_txns, 2);
    assert_eq!(r.stats.version_sets, 2);
}

#[test]
fn own_writes_and_unborn_rows_in_version_sets() {
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":1}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":2,"value":5},{"f":"select","table":"kv","where":"value > 0","rows":[{"key":1,"value":1},{"key":2,"value":5}]}],"meta":{"xid":300,"snapshot":"300:300:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[{"key":1,"value":1}]}],"meta":{"snapshot":"300:300:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(300, 9, &[(2, Some(5))])])).unwrap();
    assert_eq!(seen(&r, &h, 1, 1, 1), Some(Writer::Initial));
    assert_eq!(seen(&r, &h, 1, 1, 2), Some(Writer::Txn(t(&h, 1))));
    assert_eq!(seen(&r, &h, 2, 0, 1), Some(Writer::Initial));
    assert_eq!(seen(&r, &h, 2, 0, 2), None, "key 2 is unborn for T2's snapshot");
}

#[test]
fn unknown_outcomes_are_settled_by_the_stream() {
    let mut h = history(&[
        r#"{"id":1,"session":0,"status":"unknown","ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100}}"#,
        r#"{"id":2,"session":1,"status":"unknown","ops":[{"f":"w","key":2,"value":20}],"meta":{"xid":101}}"#,
        r#"{"id":3,"session":2,"status":"unknown","ops":[{"f":"w","key":3,"value":30}]}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(102, 2, &[(3, Some(30))])]))
        .unwrap();
    assert_eq!(h.txn(t(&h, 1)).status, Status::Committed);
    assert_eq!(h.txn(t(&h, 2)).status, Status::Aborted);
    assert_eq!(h.txn(t(&h, 3)).status, Status::Committed, "matched by the unique value it wrote");
    assert_eq!((r.stats.resolved_committed, r.stats.resolved_aborted), (2, 1));
}

#[test]
fn disagreements_between_history_and_log_are_errors() {
    let base = r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100}}"#;
    let mut h = history(&[base]);
    let err = recover(&mut h, &RawLog::new()).unwrap_err();
    assert!(matches!(err, RecoveryError::MissingWrite { .. }), "{err}");
    assert!(err.to_string().contains("T1") && err.to_string().contains("kv[1]"), "{err}");

    let mut h = history(&[base]);
    let err = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(11))])])).unwrap_err();
    assert!(matches!(err, RecoveryError::ValueMismatch { .. }), "{err}");

    let mut h = history(&[base]);
    let err = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(105, 2, &[(1, Some(12))])]))
        .unwrap_err();
    assert!(matches!(err, RecoveryError::UnknownWriter { xid: 105, .. }), "{err}");
    assert!(err.to_string().contains("0/2"), "{err}");

    let mut h = history(&[
        r#"{"id":1,"session":0,"status":"aborted","ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100}}"#,
    ]);
    let err = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))])])).unwrap_err();
    assert!(matches!(err, RecoveryError::AbortedButCommitted { .. }), "{err}");

    let mut h = history(&[base]);
    let err = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10)), (2, Some(3))])])).unwrap_err();
    assert!(
        matches!(err, RecoveryError::UnknownWriter { .. } | RecoveryError::UnrecordedWrite { .. }),
        "{err}"
    );

    let mut h = history(&[r#"{"id":1,"session":0,"ops":[],"meta":{"xid":"abc"}}"#]);
    let err = recover(&mut h, &RawLog::new()).unwrap_err();
    assert!(err.to_string().contains("T1: meta field xid"), "{err}");
    for (meta, expected) in [
        (r#"{"xid":true}"#, "T1: meta field xid: true is not a transaction id"),
        (r#"{"xid":-3}"#, "T1: meta field xid: -3 is not a transaction id"),
        (r#"{"xid":"7","isolation":5}"#, "T1: meta field isolation: 5: invalid type"),
        (r#"{"xid":7,"snapshot":[1]}"#, "T1: meta field snapshot: [1] is not a snapshot string"),
        (r#"{"xid":7,"snapshot":"9:1:"}"#, "T1: meta field snapshot: "),
    ] {
        let mut h = history(&[&format!(r#"{{"id":1,"session":0,"ops":[],"meta":{meta}}}"#)]);
        let err = recover(&mut h, &RawLog::new()).unwrap_err().to_string();
        assert!(err.contains(expected), "{meta}: {err}");
    }
    // Unknown keys (another tool's facts) are ignored; a decimal-text xid is read.
    let mut h = history(&[r#"{"id":1,"session":0,"ops":[],"meta":{"xid":"7","tool":{"x":1}}}"#]);
    assert!(recover(&mut h, &RawLog::new()).is_ok());

    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[]}],"meta":{"xid":null}}"#,
    ]);
    let err = recover(&mut h, &RawLog::new()).unwrap_err();
    assert!(err.to_string().contains("ops[0].meta.snapshot"), "{err}");
}

#[test]
fn read_committed_update_evaluated_the_version_it_overwrote() {
    // T2 (RC) updates every row with value > 5. Its statement snapshot predates T1's
    // update of key 1 (10 -> 11), so it waited for T1 and re-evaluated 11 (EvalPlanQual).
    // It skipped key 2: its snapshot version 7 matched, but T3 had since changed it to 1.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":10},{"key":2,"value":7}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":11}],"meta":{"xid":100,"isolation":"read committed"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"w","key":2,"value":1}],"meta":{"xid":102,"isolation":"read committed"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"kv","where":"value > 5","set":{"value":12},"rows":[{"key":1,"value":12}],"meta":{"snapshot":"100:101:100"}},{"f":"r","key":9,"value":null,"meta":{"snapshot":"103:103:"}}],"meta":{"xid":101,"isolation":"read committed"}}"#,
    ]);
    let lg = log(vec![
        logged(100, 1, &[(1, Some(11))]),
        logged(102, 2, &[(2, Some(1))]),
        logged(101, 3, &[(1, Some(12))]),
    ]);
    let r = recover(&mut h, &lg).unwrap();
    assert_eq!(
        seen(&r, &h, 2, 0, 1),
        Some(Writer::Txn(t(&h, 1))),
        "the overwritten version, not the snapshot's"
    );
    assert_eq!(seen(&r, &h, 2, 0, 2), Some(Writer::Txn(t(&h, 3))), "the newer version that stopped matching");
    assert_eq!(r.stats.rechecked_rows, 2);

    // The same statement at REPEATABLE READ keeps its snapshot versions.
    let mut h2 = h.clone();
    for txn in &mut h2.txns {
        let xid = txn.meta().unwrap()["xid"].clone();
        txn.set_meta(Some(
            serde_json::json!({"xid": xid, "isolation": "repeatable read", "snapshot": "100:101:100"}),
        ));
    }
    let r = recover(&mut h2, &lg).unwrap();
    assert_eq!(seen(&r, &h2, 2, 0, 1), Some(Writer::Initial));
    assert_eq!(seen(&r, &h2, 2, 0, 2), Some(Writer::Initial));
    assert_eq!(r.stats.rechecked_rows, 0);
}

#[test]
fn skipped_row_keeps_its_snapshot_version_when_no_newer_one_stopped_matching() {
    // The snapshot version matched, no newer version exists: PostgreSQL would have updated
    // the row, so the recovered set must keep the matching version (the checker then
    // reports the mismatch instead of recovery hiding it).
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":2,"value":7}]}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"kv","where":"value > 5","set":{"value":12},"rows":[],"meta":{"snapshot":"100:100:"}}],"meta":{"xid":null,"isolation":"read committed"}}"#,
    ]);
    let r = recover(&mut h, &RawLog::new()).unwrap();
    assert_eq!(seen(&r, &h, 2, 0, 2), Some(Writer::Initial));
    assert_eq!(r.stats.rechecked_rows, 0);
}

#[test]
fn serialization_order_follows_anti_dependencies_not_commit_order() {
    // T1 reads key 1's initial version, T2 overwrites key 1 and commits first, then T1
    // commits its write of key 2: serializable as T1, T2 but not in commit order.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":1}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":1},{"f":"w","key":2,"value":5}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":2}],"meta":{"xid":101,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(101, 1, &[(1, Some(2))]), logged(100, 2, &[(2, Some(5))])]))
        .unwrap();
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 1), t(&h, 2)]));
    assert!(h.txn(t(&h, 2)).commit_ts() < h.txn(t(&h, 1)).commit_ts());
}

#[test]
fn snapshots_that_are_not_nested_are_reported() {
    // T3 sees T1 but not T2, T4 sees T2 but not T1: a long fork.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":2,"value":20}],"meta":{"xid":101}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"r","key":1,"value":10}],"meta":{"snapshot":"101:102:101"}}"#,
        r#"{"id":4,"session":3,"ops":[{"f":"r","key":2,"value":20},{"f":"r","key":1,"value":10}],"meta":{"snapshot":"100:102:100"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(101, 2, &[(2, Some(20))])]))
        .unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("does not see xid"), "{:?}", r.warnings);

    // The nested twin: T4 also sees T1.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":2,"value":20}],"meta":{"xid":101}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"r","key":1,"value":10}],"meta":{"snapshot":"101:102:101"}}"#,
        r#"{"id":4,"session":3,"ops":[{"f":"r","key":2,"value":20}],"meta":{"snapshot":"102:102:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(101, 2, &[(2, Some(20))])]))
        .unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn sql_rows_compare_by_column_name() {
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"a":3,"b":"x"}}],"meta":{"xid":100}}"#,
    ]);
    let row = |b: &str| RowChange {
        table: "t".into(),
        key: Scalar::Int(1),
        row: Some(vec![
            ("b".into(), Scalar::from(b)),
            ("id".into(), Scalar::Int(1)),
            ("a".into(), Scalar::Int(3)),
        ]),
    };
    let ok = log(vec![CommittedTxn {
        xid: 100,
        commit_lsn: 1,
        end_lsn: 2,
        commit_time: 0,
        commit_ts: None,
        changes: vec![row("x")],
    }]);
    assert!(recover(&mut h.clone(), &ok).is_ok());
    let bad = log(vec![CommittedTxn {
        xid: 100,
        commit_lsn: 1,
        end_lsn: 2,
        commit_time: 0,
        commit_ts: None,
        changes: vec![row("y")],
    }]);
    let err = recover(&mut h, &bad).unwrap_err();
    assert!(err.to_string().contains("b: \"y\""), "{err}");
}

#[test]
fn a_snapshot_does_not_see_its_own_transaction_commit() {
    // PostgreSQL leaves the running transaction's own xid out of its snapshots' `xip`:
    // T1's second statement snapshot "100:101:" lists no running id, yet T1 (xid 100) is
    // not committed for it. Its select comes before its own write of key 2.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":2,"value":1}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10,"meta":{"snapshot":"100:100:"}},{"f":"select","table":"kv","where":"value > 0","rows":[{"key":1,"value":10},{"key":2,"value":1}],"meta":{"snapshot":"100:101:"}},{"f":"w","key":2,"value":20,"meta":{"snapshot":"100:101:"}}],"meta":{"xid":100,"isolation":"read-committed"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":10}],"meta":{"snapshot":"101:101:","isolation":"repeatable-read"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10)), (2, Some(20))])])).unwrap();
    assert_eq!(seen(&r, &h, 1, 1, 1), Some(Writer::Txn(t(&h, 1))), "its own earlier write");
    assert_eq!(seen(&r, &h, 1, 1, 2), Some(Writer::Initial), "not its own later write");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert!(h.txn(t(&h, 1)).commit_ts() < h.txn(t(&h, 2)).start_ts());
    assert!(h.txn(t(&h, 1)).start_ts() < h.txn(t(&h, 1)).commit_ts());
}

#[test]
fn a_recheck_that_meets_a_delete_and_reinsert_finds_no_live_row() {
    // T1 deletes key 1 and inserts it again (a new row version chain in PostgreSQL). T2's
    // READ COMMITTED update matched key 1's snapshot version, waited for T1, followed the
    // old chain to its deletion and skipped the row, although T1's final row matches.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":10}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":null},{"f":"w","key":1,"value":11}],"meta":{"xid":100,"isolation":"read-committed"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"kv","where":"value > 5","set":{"value":12},"rows":[],"meta":{"snapshot":"100:101:100"}}],"meta":{"xid":101,"isolation":"read-committed"}}"#,
        r#"{"id":3,"session":1,"ops":[{"f":"r","key":1,"value":11}],"meta":{"snapshot":"102:102:","isolation":"read-committed"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, None), (1, Some(11))])])).unwrap();
    assert_eq!(seen(&r, &h, 2, 0, 1), None, "no live row: the old chain ended in a deletion");
    assert_eq!(r.stats.rechecked_rows, 1);

    // Its twin: T1 only updates the row (one chain), so the re-check sees 11, which matches;
    // the recovered set keeps the matching version and the checker will object.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":10}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":11}],"meta":{"xid":100,"isolation":"read-committed"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"kv","where":"value > 5","set":{"value":12},"rows":[],"meta":{"snapshot":"100:101:100"}}],"meta":{"xid":101,"isolation":"read-committed"}}"#,
        r#"{"id":3,"session":1,"ops":[{"f":"r","key":1,"value":11}],"meta":{"snapshot":"102:102:","isolation":"read-committed"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(11))])])).unwrap();
    assert_eq!(seen(&r, &h, 2, 0, 1), Some(Writer::Initial));
    assert_eq!(r.stats.rechecked_rows, 0);
}

#[test]
fn serialization_order_puts_a_predicate_read_before_the_phantom_it_missed() {
    // T1's select saw no row with value > 5; T2 inserted one (key 1 = 10) and committed
    // before T1 committed its write of key 3. Serial order: T1 then T2, against commit order.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"kv","where":"value > 5","rows":[]},{"f":"w","key":3,"value":30}],"meta":{"xid":101,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(101, 2, &[(3, Some(30))])]))
        .unwrap();
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 1), t(&h, 2)]));

    // The twin where T2's row does not match: commit order (T2 first) is kept.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"kv","where":"value > 50","rows":[]},{"f":"w","key":3,"value":30}],"meta":{"xid":101,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(1, Some(10))]), logged(101, 2, &[(3, Some(30))])]))
        .unwrap();
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 2), t(&h, 1)]));
}

#[test]
fn a_predicate_read_comes_after_the_writer_where_its_row_stopped_matching() {
    // Key 1: T1 writes 10 (matches value > 5), T2 writes 2 (stops matching), T3 writes 3.
    // R's select saw T3's version and returned nothing, so R must follow T2, though the
    // version it saw is not the one where the row stopped matching. P (committing last)
    // read the initial key 5 that T2 overwrote, so T2 waits for P; R, committed before P,
    // was once ordered before T2, where the replay still sees T1's matching 10.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":5,"value":0}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":2},{"f":"w","key":5,"value":4}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"w","key":1,"value":3}],"meta":{"xid":102,"snapshot":"102:102:"}}"#,
        r#"{"id":4,"session":3,"ops":[{"f":"select","table":"kv","where":"value > 5","rows":[]},{"f":"w","key":7,"value":70}],"meta":{"xid":103,"snapshot":"103:103:"}}"#,
        r#"{"id":5,"session":4,"ops":[{"f":"r","key":5,"value":0},{"f":"w","key":6,"value":1}],"meta":{"xid":104,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(
        &mut h,
        &log(vec![
            logged(100, 1, &[(1, Some(10))]),
            logged(101, 2, &[(1, Some(2)), (5, Some(4))]),
            logged(102, 3, &[(1, Some(3))]),
            logged(103, 4, &[(7, Some(70))]),
            logged(104, 6, &[(6, Some(1))]),
        ]),
    )
    .unwrap();
    assert_eq!(seen(&r, &h, 4, 0, 1), Some(Writer::Txn(t(&h, 3))));
    let order = r.certificate.serialization_order.clone().unwrap();
    let at = |name| order.iter().position(|&x| x == t(&h, name)).unwrap();
    assert!(at(5) < at(2), "P before T2: {order:?}");
    assert!(at(2) < at(4), "R after T2, where key 1 stopped matching: {order:?}");
}

#[test]
fn write_skew_leaves_no_serialization_order_and_says_so() {
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":1},{"key":2,"value":2}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":1},{"f":"w","key":2,"value":20}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":2},{"f":"w","key":1,"value":10}],"meta":{"xid":101,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(2, Some(20))]), logged(101, 2, &[(1, Some(10))])]))
        .unwrap();
    assert!(r.stats.serialization_cycle);
    assert_eq!(r.certificate.serialization_order.as_ref().map(Vec::len), Some(2));

    // Its twin: T2 read T1's write of key 2, so T1 then T2 is serial.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":1},{"key":2,"value":2}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":1},{"f":"w","key":2,"value":20}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":20},{"f":"w","key":1,"value":10}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(2, Some(20))]), logged(101, 2, &[(1, Some(10))])]))
        .unwrap();
    assert!(!r.stats.serialization_cycle);
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 1), t(&h, 2)]));
}

#[test]
fn ambiguous_item_reads_name_the_version_their_snapshot_sees() {
    // Key 1 is unborn, inserted by T1 (xid 100), deleted by T2 (xid 101) and again by T7
    // (xid 103): "no row" is three versions, so each such read gets the one its snapshot saw.
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":null}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"r","key":1,"value":null}],"meta":{"xid":null,"snapshot":"100:100:"}}"#,
        r#"{"id":4,"session":3,"ops":[{"f":"r","key":1,"value":null}],"meta":{"xid":null,"snapshot":"102:102:"}}"#,
        r#"{"id":5,"session":4,"ops":[{"f":"r","key":1,"value":null,"meta":{"snapshot":"100:100:"}},{"f":"r","key":1,"value":null,"meta":{"snapshot":"102:102:"}}],"meta":{"xid":null,"isolation":"read-committed"}}"#,
        r#"{"id":6,"session":5,"ops":[{"f":"r","key":1,"value":10}],"meta":{"xid":null,"snapshot":"101:101:"}}"#,
        r#"{"id":7,"session":6,"ops":[{"f":"w","key":1,"value":null},{"f":"r","key":1,"value":null}],"meta":{"xid":103,"snapshot":"103:103:"}}"#,
        r#"{"id":8,"session":7,"ops":[{"f":"r","key":1,"value":null}],"meta":{"xid":null}}"#,
    ]);
    let r = recover(
        &mut h,
        &log(vec![
            logged(100, 1, &[(1, Some(10))]),
            logged(101, 2, &[(1, None)]),
            logged(103, 3, &[(1, None)]),
        ]),
    )
    .unwrap();
    assert_eq!(seen(&r, &h, 3, 0, 1), Some(Writer::Initial), "T3's snapshot sees neither writer");
    assert_eq!(seen(&r, &h, 4, 0, 1), Some(Writer::Txn(t(&h, 2))), "T4's sees T2's delete");
    assert_eq!(
        seen(&r, &h, 5, 0, 1),
        Some(Writer::Initial),
        "read committed: the first statement's snapshot"
    );
    assert_eq!(seen(&r, &h, 5, 1, 1), Some(Writer::Txn(t(&h, 2))), "and the second's");
    let sets = r.certificate.version_sets.as_ref().unwrap();
    assert!(!sets.contains_key(&OpRef { txn: t(&h, 6), op: 0 }), "x=10 is one version: no entry");
    assert!(!sets.contains_key(&OpRef { txn: t(&h, 7), op: 1 }), "a read of its own delete: no entry");
    assert!(!sets.contains_key(&OpRef { txn: t(&h, 8), op: 0 }), "no snapshot recorded: no entry");
    assert!(sets.values().all(|s| s.len() == 1));
    assert_eq!((r.stats.item_read_versions, r.stats.version_sets), (4, 0));
    // The serialization order puts T3 before T1 (it saw the unborn row) and T4 after T2.
    let order = r.certificate.serialization_order.as_ref().unwrap();
    let at = |n: i64| order.iter().position(|&x| x == t(&h, n)).unwrap();
    assert!(at(3) < at(1) && at(2) < at(4) && at(4) < at(7), "{order:?}");
}

/// Issue 32: the initial load is decided by position (snapshots and xids), never by the
/// history's claimed initial values.
#[test]
fn the_initial_load_is_what_committed_before_every_snapshot_of_the_history() {
    let xids = |log: &RawLog, n: usize| log.txns()[..n].iter().map(|t| t.xid).collect::<Vec<_>>();
    // The setup (10), another client's change (11), the history's T1 (20) and another
    // foreign change (12, committed after T2's snapshot was taken: 12 is running in it).
    let full = log(vec![
        logged(10, 100, &[(1, Some(0)), (2, Some(0))]),
        logged(11, 110, &[(2, Some(-7))]),
        logged(20, 120, &[(1, Some(5))]),
        logged(12, 130, &[(2, Some(-8))]),
    ]);
    let claims = |initial: &str| {
        history(&[
            &format!(r#"{{"format":"isocert-history","version":1,"initial":[{initial}]}}"#),
            r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":20,"snapshot":"12:20:12"}}"#,
            r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"12:21:12"}}"#,
        ])
    };
    // Whatever the history claims, right or wrong, the same prefix: 10 and 11.
    for initial in
        [r#"{"key":1,"value":0},{"key":2,"value":-7}"#, r#"{"key":1,"value":3},{"key":2,"value":9}"#, ""]
    {
        let h = claims(initial);
        assert_eq!(crate::initial_load(&h, &full).unwrap(), 2, "{initial}");
    }
    // A transaction running in some snapshot (xip) ends the prefix, even one below xmin of
    // another snapshot: 11 runs in T2's snapshot.
    let h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":20,"snapshot":"12:20:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"11:21:11"}}"#,
    ]);
    assert_eq!(xids(&full, crate::initial_load(&h, &full).unwrap()), [10]);
    // Committed after the first snapshot (xmax 11: 11 is not seen) but before a later one:
    // not in the prefix, though the later snapshot sees it.
    let h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"r","key":2,"value":0}],"meta":{"xid":null,"snapshot":"11:11:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"20:20:"}}"#,
    ]);
    assert_eq!(xids(&full, crate::initial_load(&h, &full).unwrap()), [10]);
    // Read committed: every statement's snapshot counts; the second statement's is the
    // first one that 11 committed before, the first statement's does not see it.
    let h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":0,"meta":{"snapshot":"11:11:"}},{"f":"r","key":2,"value":-7,"meta":{"snapshot":"12:12:"}}],"meta":{"xid":null,"isolation":"read-committed"}}"#,
    ]);
    assert_eq!(xids(&full, crate::initial_load(&h, &full).unwrap()), [10]);
    // A history transaction's own xid ends the prefix even when every snapshot sees it.
    let h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":2,"value":-7}],"meta":{"xid":11}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"30:30:"}}"#,
    ]);
    assert_eq!(xids(&full, crate::initial_load(&h, &full).unwrap()), [10]);
    // No snapshot recorded: nothing places the history's start, so no prefix is taken.
    let h = history(&[r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":20}}"#]);
    assert_eq!(crate::initial_load(&h, &full).unwrap(), 0);
    // An unknown outcome with neither xid nor snapshot may be any of the early commits.
    let h = history(&[
        r#"{"id":1,"session":0,"status":"unknown","ops":[{"f":"w","key":2,"value":-7}],"meta":{"xid":null}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"30:30:"}}"#,
    ]);
    assert_eq!(crate::initial_load(&h, &full).unwrap(), 0);
    // 32-bit stream xids next to 64-bit snapshots of epoch 1.
    let epoch = 1u64 << 32;
    let wide = log(vec![logged(10, 100, &[(1, Some(0))]), logged(11, 110, &[(2, Some(-7))])]);
    let h = history(&[&format!(
        r#"{{"id":1,"session":0,"ops":[{{"f":"r","key":2,"value":0}}],"meta":{{"xid":null,"snapshot":"{}:{}:"}}}}"#,
        epoch + 11,
        epoch + 11
    )]);
    assert_eq!(xids(&wide, crate::initial_load(&h, &wide).unwrap()), [10]);
}

/// Issue 32: the initial versions are what the initial load left, whatever the history
/// claims: its own rows shown (a wrong claim of them named), others' hidden unless revealed.
#[test]
fn initial_versions_are_the_loads_effect_and_never_depend_on_a_hidden_claim() {
    let load = log(vec![logged(10, 100, &[(1, Some(0)), (2, Some(0))]), logged(11, 110, &[(2, Some(-7))])]);
    let claiming = |initial: &str, meta: &str| {
        history(&[
            &format!(r#"{{"format":"isocert-history","version":1,"initial":[{initial}]{meta}}}"#),
            r#"{"id":1,"session":0,"ops":[{"f":"r","key":2,"value":-7}],"meta":{"xid":null,"snapshot":"12:12:"}}"#,
        ])
    };
    let own = r#","meta":{"initial_xids":[10]}"#;
    let settled = |initial: &str, meta: &str, reveal: bool| {
        let mut h = claiming(initial, meta);
        let shown = crate::settle_initial(&mut h, load.txns(), reveal);
        shown.map(|s| {
            let label =
                |(o, v): (ObjId, Option<ValueId>)| (h.object_label(o), v.map(|v| h.value_label(o, v)));
            let initial: Vec<_> = h.initial.iter().map(|&(o, v)| label((o, Some(v)))).collect();
            (s.into_iter().map(label).collect::<Vec<_>>(), initial)
        })
    };
    // Row 2's last writer before the snapshot is another client's: hidden, whether the
    // history's claim of it is right (-7), wrong (9) or absent.
    let right = settled(r#"{"key":1,"value":0},{"key":2,"value":-7}"#, own, false).unwrap();
    for wrong in [r#"{"key":1,"value":0},{"key":2,"value":9}"#, r#"{"key":1,"value":0}"#] {
        assert_eq!(settled(wrong, own, false).unwrap(), right, "{wrong}");
    }
    let kv = |k: i64| format!("kv[{k}]");
    assert_eq!(right.0, [(kv(1), Some("0".to_string())), (kv(2), None)]);
    assert!(right.1[1].1.as_deref().is_some_and(|v| !v.contains('7')), "the stand-in: {:?}", right.1);
    // Its own row, claimed wrong: an error naming the row.
    let e = settled(r#"{"key":1,"value":3}"#, own, false).unwrap_err().to_string();
    assert!(e.contains("kv[1]") && e.contains("own initial load"), "{e}");
    // A claimed row the load never wrote: an error too (a position, not a value).
    let e = settled(r#"{"key":1,"value":0},{"key":5,"value":1}"#, own, false).unwrap_err().to_string();
    assert!(e.contains("kv[5]") && e.contains("no change committed before"), "{e}");
    // Revealed: the logged value, whatever the claim of the other client's row.
    let revealed = settled(r#"{"key":1,"value":0},{"key":2,"value":9}"#, own, true).unwrap();
    assert_eq!(revealed.0, [(kv(1), Some("0".to_string())), (kv(2), Some("-7".to_string()))]);
    // Without `initial_xids`, no row is the history's own: everything is hidden.
    let none = settled(r#"{"key":1,"value":3}"#, "", false).unwrap();
    assert_eq!(none.0, [(kv(1), None), (kv(2), None)]);
    let e = settled("", r#","meta":{"initial_xids":"10"}"#, false).unwrap_err().to_string();
    assert!(e.contains("initial_xids"), "{e}");
}

#[test]
fn foreign_writers_become_transactions_of_their_own_and_recovery_places_them() {
    let mut h = history(&[
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":20,"snapshot":"20:20:"}}"#,
        r#"{"id":2,"session":0,"ops":[{"f":"r","key":1,"value":-1}],"meta":{"xid":null,"snapshot":"23:23:"}}"#,
    ]);
    let full = log(vec![logged(20, 120, &[(1, Some(5))]), logged(21, 130, &[(1, Some(-1)), (2, Some(-2))])]);
    let foreign = crate::add_foreign_writers(&mut h, &full).unwrap();
    assert_eq!(foreign.len(), 1);
    assert_eq!(h.txn(foreign[0]).name, Scalar::Text("~1".into()));
    let r = recover(&mut h, &full).unwrap();
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&obj(&h, 1)], vec![t(&h, 1), foreign[0]]);
}

/// Issue 32: hidden foreign values never enter recovery, so nothing it computes depends on
/// whether a history's claimed value equals one. Foreign transactions are told by xid alone.
#[test]
fn hidden_foreign_values_are_stand_ins_and_a_right_guess_changes_nothing() {
    let lines = |guess: i64| {
        history(&[
            r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":20,"snapshot":"20:20:"}}"#,
            &format!(
                r#"{{"id":2,"session":1,"ops":[{{"f":"r","key":1,"value":{guess}}}],"meta":{{"xid":null,"snapshot":"23:23:"}}}}"#
            ),
        ])
    };
    let full = log(vec![logged(20, 120, &[(1, Some(5))]), logged(21, 130, &[(1, Some(-1)), (2, None)])]);
    let recovered = |guess: i64| {
        let mut h = lines(guess);
        let hidden = crate::hide_foreign_values(&h, &full).unwrap().expect("a foreign transaction");
        // The recorded transaction's change is kept; the foreign one's are stand-ins, its
        // delete included.
        assert_eq!(hidden.txns()[0], full.txns()[0]);
        assert!(hidden.txns()[1].changes.iter().all(|c| c.row.as_deref() == Some(&[][..])));
        let foreign = crate::add_foreign_writers(&mut h, &hidden).unwrap();
        let r = recover(&mut h, &hidden).unwrap();
        for op in &h.txn(foreign[0]).ops {
            let isocert_history::Op::Write { obj, value } = op else { panic!("a write") };
            assert!(isocert_history::is_opaque_value(&h, *obj, *value));
        }
        (
            r.certificate.version_order.map(|o| o.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
            r.certificate.version_sets.map(|s| s.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
            r.certificate.serialization_order,
        )
    };
    assert_eq!(recovered(-1), recovered(-7), "the right guess (-1) and a wrong one recover alike");
    // Nothing to hide: no transaction of the log is foreign.
    let own = log(vec![logged(20, 120, &[(1, Some(5))])]);
    assert!(crate::hide_foreign_values(&lines(5), &own).unwrap().is_none());
    // A transaction of unknown outcome without an xid could only be told from a foreign one
    // by its values: refused, whatever the values are.
    let unknown = history(&[
        r#"{"id":1,"session":0,"status":"unknown","ops":[{"f":"w","key":1,"value":-1}],"meta":{"xid":null}}"#,
    ]);
    let e = crate::hide_foreign_values(&unknown, &full).unwrap_err().to_string();
    assert!(e.contains("hidden values"), "{e}");
}

/// A logged row of the append workload's table: `val` holds the list as text.
fn logged_list(xid: u64, lsn: u64, key: i64, list: &str) -> CommittedTxn {
    let row = vec![
        ("id".into(), Scalar::Int(key)),
        ("sk".into(), Scalar::Int(key)),
        ("val".into(), Scalar::Text(list.into())),
    ];
    let changes = vec![RowChange { table: "append".into(), key: Scalar::Int(key), row: Some(row) }];
    CommittedTxn { xid, commit_lsn: lsn, end_lsn: lsn + 1, commit_time: 0, commit_ts: None, changes }
}

#[test]
fn list_appends_are_matched_by_the_elements_the_logged_list_ends_with() {
    let lines = [
        r#"{"id":1,"session":0,"ops":[{"f":"append","table":"append","key":7,"value":1}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","table":"append","key":7,"value":[1]},{"f":"append","table":"append","key":7,"value":2},{"f":"append","table":"append","key":7,"value":3}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"r","table":"append","key":7,"value":[1,2,3]}],"meta":{"snapshot":"102:102:"}}"#,
    ];
    let mut h = history(&lines);
    let good = log(vec![logged_list(100, 1, 7, "1"), logged_list(101, 2, 7, "1,2,3")]);
    let r = recover(&mut h, &good).unwrap();
    let o = h.object_by_key(h.table_by_name("append").unwrap(), &Scalar::Int(7)).unwrap();
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&o], vec![t(&h, 1), t(&h, 2)]);

    // The near-twin: the log says T2 left a list that does not end with what it appended.
    let mut h = history(&lines);
    let bad = log(vec![logged_list(100, 1, 7, "1"), logged_list(101, 2, 7, "1,3,2")]);
    let e = recover(&mut h, &bad).unwrap_err().to_string();
    assert!(e.contains("a list ending with [2,3]") && e.contains("1,3,2"), "{e}");
}

/// Issue 32, list tables: a foreign append is masked like any foreign write (its row becomes
/// the stand-in, which its synthetic writer installs), recovery still matches the history's
/// appends against the logged lists (which hold the foreign element) and places the foreign
/// version between them, and a right or wrong guess of the list a history read changes
/// nothing recovery computes.
#[test]
fn a_foreign_append_is_masked_as_a_stand_in_and_the_lists_still_match() {
    let lines = |read: &str| {
        history(&[
            r#"{"id":1,"session":0,"ops":[{"f":"append","table":"append","key":7,"value":1}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
            &format!(
                r#"{{"id":2,"session":1,"ops":[{{"f":"r","table":"append","key":7,"value":{read}}},{{"f":"append","table":"append","key":7,"value":2}}],"meta":{{"xid":102,"snapshot":"102:102:"}}}}"#
            ),
            r#"{"id":3,"session":2,"ops":[{"f":"r","table":"append","key":7,"value":[1,9,2]}],"meta":{"snapshot":"103:103:"}}"#,
        ])
    };
    // Another client (xid 101) appends 9 between T1 and T2.
    let full = log(vec![
        logged_list(100, 1, 7, "1"),
        logged_list(101, 2, 7, "1,9"),
        logged_list(102, 3, 7, "1,9,2"),
    ]);
    let outcome = |read: &str| {
        let mut h = lines(read);
        let hidden = crate::hide_foreign_values(&h, &full).unwrap().expect("a foreign transaction");
        let masked = &hidden.txns()[1].changes[0];
        assert_eq!(masked.row.as_deref(), Some(&[][..]), "the foreign append's row is the stand-in");
        let foreign = crate::add_foreign_writers(&mut h, &hidden).unwrap();
        let r = recover(&mut h, &hidden).unwrap();
        let o = h.object_by_key(h.table_by_name("append").unwrap(), &Scalar::Int(7)).unwrap();
        let order = r.certificate.version_order.as_ref().unwrap()[&o].clone();
        assert_eq!(order, vec![t(&h, 1), foreign[0], t(&h, 2)]);
        let stand_in = h.txn(foreign[0]).ops.iter().find_map(|op| match op {
            isocert_history::Op::Write { value, .. } => Some(*value),
            _ => None,
        });
        assert!(isocert_history::is_opaque_value(&h, o, stand_in.unwrap()));
        let mut sets: Vec<String> = r
            .certificate
            .version_sets
            .iter()
            .flatten()
            .map(|(at, seen)| format!("{at:?} {seen:?}"))
            .collect();
        sets.sort();
        format!("{order:?} {sets:?} {:?}", r.certificate.serialization_order)
    };
    assert_eq!(outcome("[1,9]"), outcome("[1,8]"), "a guess of the foreign element changed the outcome");
}

/// The history of [`an_aggregate_is_ordered_only_against_what_decides_its_result`]: key 1
/// and `key2` hold the initial values 10 and `value2`; T1 reads key 3 and moves `moved` out
/// of `value > 5`; T2, on the same snapshot, reads `max(value)` of `value > 5` (10) and
/// overwrites key 3, so T1 precedes T2.
fn max_read_beside_a_moved_row(value2: i64, moved: i64) -> (History, PostgresRecovery) {
    let initial = format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"key":1,"value":10}},{{"key":2,"value":{value2}}},{{"key":3,"value":0}}]}}"#
    );
    let t1 = format!(
        r#"{{"id":1,"session":0,"ops":[{{"f":"r","key":3,"value":0}},{{"f":"w","key":{moved},"value":1}}],"meta":{{"xid":100,"snapshot":"100:100:"}}}}"#
    );
    let mut h = history(&[
        &initial,
        &t1,
        r#"{"id":2,"session":1,"ops":[{"f":"aggregate","table":"kv","where":"value > 5","function":"max","column":"value","result":10},{"f":"w","key":3,"value":3}],"meta":{"xid":101,"snapshot":"100:100:"}}"#,
    ]);
    let r = recover(&mut h, &log(vec![logged(100, 1, &[(moved, Some(1))]), logged(101, 2, &[(3, Some(3))])]))
        .unwrap();
    (h, r)
}

#[test]
fn an_aggregate_is_ordered_only_against_what_decides_its_result() {
    // Key 2 also held 10: the max stays 10 whichever of T1 and T2 runs first, so T1's
    // change of key 2 is no dependency of T2's read, and T1 then T2 is serial. Ordering
    // the read before every change of its matches made a cycle (CI: Enne replayed a
    // correct SERIALIZABLE run to false divergences).
    let (h, r) = max_read_beside_a_moved_row(10, 2);
    assert!(!r.stats.serialization_cycle);
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 1), t(&h, 2)]));

    // The twin: key 1 was the only row holding the max, and T1 moved it. T2 must precede
    // T1 (its max would differ after) and follow it (key 3): a write skew.
    let (_, r) = max_read_beside_a_moved_row(0, 1);
    assert!(r.stats.serialization_cycle);
}

#[test]
fn a_read_of_no_row_precedes_the_insert_it_missed() {
    // T1 deletes key 1; R (snapshot after T1) reads key 1 as no row and writes key 3; W
    // inserts key 1 again and commits before R. No row was held only by T1's delete, so
    // the read has no version set entry: R must still precede W, against commit order.
    let mut h = history(&[
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":1}]}"#,
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":null}],"meta":{"xid":100,"snapshot":"100:100:"}}"#,
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":null},{"f":"w","key":3,"value":30}],"meta":{"xid":102,"snapshot":"101:101:"}}"#,
        r#"{"id":3,"session":2,"ops":[{"f":"w","key":1,"value":5}],"meta":{"xid":101,"snapshot":"101:101:"}}"#,
    ]);
    let r = recover(
        &mut h,
        &log(vec![
            logged(100, 1, &[(1, None)]),
            logged(101, 2, &[(1, Some(5))]),
            logged(102, 3, &[(3, Some(30))]),
        ]),
    )
    .unwrap();
    assert!(!r.stats.serialization_cycle);
    assert_eq!(r.certificate.serialization_order, Some(vec![t(&h, 1), t(&h, 2), t(&h, 3)]));
}
