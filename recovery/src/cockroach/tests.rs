use isocert_history::{v1, Timestamp};

use super::*;

#[test]
fn hlc_decimals_parse_as_pairs() {
    assert_eq!(parse_hlc("1700000000123456789.0000000003").unwrap(), Timestamp::hlc(1700000000123456789, 3));
    assert_eq!(parse_hlc("1700000000123456789.0000000000").unwrap(), Timestamp::hlc(1700000000123456789, 0));
    assert_eq!(parse_hlc("5.1").unwrap(), Timestamp::hlc(5, 1_000_000_000));
    assert_eq!(parse_hlc("42").unwrap(), Timestamp::new(42));
    assert_eq!(parse_hlc("1700000000000000000.0000000002?").unwrap(), Timestamp::hlc(1700000000000000000, 2));
    assert!(parse_hlc("1.00000000001").unwrap_err().contains("1.00000000001"));
    assert!(parse_hlc("x.1").is_err());
    let facts = CrdbTxnFacts { commit_ts: Some("7.0000000001".into()), ..CrdbTxnFacts::default() };
    assert_eq!(facts.commit_timestamp().unwrap(), Some(Timestamp::hlc(7, 1)));
}

const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"postgres","initial":[{"table":"items","key":1,"value":{"id":1,"v":0}},{"table":"items","key":2,"value":{"id":2,"v":0}}]}"#;

#[test]
fn a_predicate_update_and_another_write_of_its_row_are_refused_naming_the_transaction() {
    let text = format!(
        "{HEADER}\n{}",
        r#"{"id":7,"session":1,"ops":[{"f":"update","table":"items","where":"v = 0","set":{"v":5},"rows":[{"key":1,"value":{"id":1,"v":5}},{"key":2,"value":{"id":2,"v":5}}]},{"f":"w","table":"items","key":2,"value":{"id":2,"v":9}}]}"#
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    let e = single_change_per_row(&h).unwrap_err().to_string();
    assert!(e.contains("7") && e.contains("ops 0 and 1") && e.contains("last change"), "{e}");
    // Its near twin: the other write is to a row the update did not touch.
    let text = format!(
        "{HEADER}\n{}",
        r#"{"id":7,"session":1,"ops":[{"f":"update","table":"items","where":"v = 0 AND id = 1","set":{"v":5},"rows":[{"key":1,"value":{"id":1,"v":5}}]},{"f":"w","table":"items","key":2,"value":{"id":2,"v":9}}]}"#
    );
    single_change_per_row(&v1::read_history(text.as_bytes()).unwrap()).unwrap();
}

mod recovery {
    use std::sync::Arc;

    use isocert_history::{v1, Scalar, Status, Timestamp};

    use crate::{recover_cockroach, CommittedTxn, RawLog, RowChange};

    const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"postgres","initial":[{"table":"items","key":1,"value":{"id":1,"v":0}},{"table":"items","key":2,"value":{"id":2,"v":0}}]}"#;

    fn write(key: i64, v: i64, wall: u64, logical: u64, pos: u64) -> CommittedTxn {
        let row = vec![(Arc::from("id"), Scalar::Int(key)), (Arc::from("v"), Scalar::Int(v))];
        CommittedTxn {
            xid: 0,
            commit_lsn: pos,
            end_lsn: pos,
            commit_time: wall as i64,
            commit_ts: Some(Timestamp::hlc(wall, logical)),
            changes: vec![RowChange { table: "items".into(), key: Scalar::Int(key), row: Some(row) }],
        }
    }

    #[test]
    fn unknown_commits_are_settled_by_the_feed_and_weaker_levels_found_by_value() {
        // T1: serializable, commit at 100.0. T2: unknown outcome (the COMMIT answer was lost),
        // its write is in the feed at 200.0. T3: unknown and not in the feed. T4: READ
        // COMMITTED (no cluster_logical_timestamp), reads row 1 at T1's version, writes row 2
        // at 300.2.
        let text = [
            HEADER,
            r#"{"id":1,"session":1,"ops":[{"f":"w","table":"items","key":1,"value":{"id":1,"v":11}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","commit_ts":"100.0000000000"}}"#,
            r#"{"id":2,"session":2,"status":"unknown","ops":[{"f":"w","table":"items","key":2,"value":{"id":2,"v":22}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","error":"40003"}}"#,
            r#"{"id":3,"session":3,"status":"unknown","ops":[{"f":"w","table":"items","key":1,"value":{"id":1,"v":33}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","error":"connection"}}"#,
            r#"{"id":4,"session":4,"ops":[{"f":"r","table":"items","key":1,"value":{"id":1,"v":11}},{"f":"w","table":"items","key":2,"value":{"id":2,"v":44}}],"meta":{"isolation":"read-committed","effective_isolation":"read-committed"}}"#,
        ]
        .join("\n");
        let mut h = v1::read_history(text.as_bytes()).unwrap();
        let mut log = RawLog::new();
        log.push(write(1, 11, 100, 0, 1));
        log.push(write(2, 22, 200, 0, 2));
        log.push(write(2, 44, 300, 2, 3));
        let recovered = recover_cockroach(&mut h, &log, &|_, _, _, _| Ok(true)).unwrap();
        let status: Vec<Status> = h.txns.iter().map(|t| t.status).collect();
        assert_eq!(status, [Status::Committed, Status::Committed, Status::Aborted, Status::Committed]);
        assert_eq!((recovered.stats.resolved_committed, recovered.stats.resolved_aborted), (1, 1));
        assert_eq!(h.txns[3].commit_ts(), Some(Timestamp::hlc(300, 2)));
        // Serializable reads sit just below the commit timestamp.
        assert_eq!(h.txns[0].start_ts(), Some(Timestamp::hlc(99, u64::MAX)));
        let order = recovered.certificate.version_order.unwrap();
        assert_eq!(order.values().map(Vec::len).sum::<usize>(), 3);
        // T4 ran at READ COMMITTED: the commit timestamps are no serial order of this history.
        assert_eq!(h.serial_order, isocert_history::SerialOrder::Unknown);
        // Without it, every transaction serializes at its commit timestamp.
        let serializable: Vec<&str> = text.lines().take(4).collect();
        let mut h = v1::read_history(serializable.join("\n").as_bytes()).unwrap();
        h.serial_order = isocert_history::SerialOrder::Unknown;
        let mut log = RawLog::new();
        log.push(write(1, 11, 100, 0, 1));
        log.push(write(2, 22, 200, 0, 2));
        recover_cockroach(&mut h, &log, &|_, _, _, _| Ok(true)).unwrap();
        assert_eq!(h.serial_order, isocert_history::SerialOrder::CommitTs);
    }

    /// The live rule ([`crate::RecordedLiveTicks::commit_ordered`] over
    /// [`crate::cockroach_timestamps`]) gives each serializable transaction the timestamps
    /// recovery writes (the commit timestamp read before COMMIT, the snapshot just below
    /// it), and promises commit order at SERIALIZABLE as recovery records it. A transaction
    /// at READ COMMITTED (no commit timestamp of its own) stops it.
    #[test]
    fn live_ticks_are_the_recovered_timestamps_at_serializable() {
        use crate::{cockroach_timestamps, LiveTicks, RecordedLiveTicks};
        use isocert_history::{IsolationLevel, SerialOrder, TxnId};
        let lines = [
            HEADER,
            r#"{"id":1,"session":1,"ops":[{"f":"w","table":"items","key":1,"value":{"id":1,"v":11}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","commit_ts":"100.0000000000"}}"#,
            r#"{"id":2,"session":2,"ops":[{"f":"r","table":"items","key":1,"value":{"id":1,"v":11}},{"f":"w","table":"items","key":2,"value":{"id":2,"v":22}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","commit_ts":"200.0000000003"}}"#,
            r#"{"id":3,"session":1,"ops":[{"f":"r","table":"items","key":2,"value":{"id":2,"v":22}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","commit_ts":"250.0000000000"}}"#,
        ]
        .join("\n");
        let live = v1::read_history(lines.as_bytes()).unwrap();
        let mut rule = RecordedLiveTicks::commit_ordered(cockroach_timestamps);
        let txns: Vec<_> = live.txn_ids().map(|t| (t, live.txn(t))).collect();
        let published = rule.group(&txns, &mut std::collections::VecDeque::new()).unwrap();
        let mut h = v1::read_history(lines.as_bytes()).unwrap();
        let mut log = RawLog::new();
        log.push(write(1, 11, 100, 0, 1));
        log.push(write(2, 22, 200, 3, 2));
        recover_cockroach(&mut h, &log, &|_, _, _, _| Ok(true)).unwrap();
        let recovered: Vec<_> =
            h.txns.iter().map(|t| Some((t.start_ts().unwrap(), t.commit_ts().unwrap()))).collect();
        assert_eq!(published, recovered);
        assert_eq!(h.serial_order, SerialOrder::CommitTs);
        assert_eq!(rule.serial_order(IsolationLevel::Serializable), SerialOrder::CommitTs);
        assert_eq!(rule.serial_order(IsolationLevel::ReadCommitted), SerialOrder::Unknown);

        let rc = format!(
            "{HEADER}\n{}",
            r#"{"id":4,"session":4,"ops":[{"f":"w","table":"items","key":2,"value":{"id":2,"v":44}}],"meta":{"isolation":"read-committed","effective_isolation":"read-committed"}}"#
        );
        let rc = v1::read_history(rc.as_bytes()).unwrap();
        let e = RecordedLiveTicks::commit_ordered(cockroach_timestamps)
            .group(&[(TxnId(0), rc.txn(TxnId(0)))], &mut std::collections::VecDeque::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("read-committed") && e.contains("changefeed"), "{e}");
    }

    /// Issue 46, REPEATABLE READ: CockroachDB gives no snapshot timestamp, only the versions
    /// returned bound it. T1 (SERIALIZABLE) writes row 2 at 200.0; T2 (REPEATABLE READ)
    /// read row 1's initial version (`crdb_internal_mvcc_timestamp` 10.0, the load) and
    /// writes row 2, committing at 300.0. Its snapshot lies in [10, 300): before T1's commit
    /// (a lost update) or after it. The old rule put it at 10 (a G-SI CockroachDB may not
    /// have caused); now its write is marked read-time-unknown. Near twin: T2 read row 2 and
    /// got T1's version, so its snapshot is at or after 200: placed there, nothing marked.
    #[test]
    fn a_repeatable_read_snapshot_is_only_bounded_by_the_versions_returned() {
        use isocert_history::HiddenReason;
        let rr = r#""meta":{"isolation":"repeatable-read","effective_isolation":"repeatable-read"}"#;
        let t1 = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"items","key":2,"value":{"id":2,"v":22}}],"meta":{"isolation":"serializable","effective_isolation":"serializable","commit_ts":"200.0000000000"}}"#;
        let run = |read: &str| {
            let t2 = format!(
                r#"{{"id":2,"session":2,"ops":[{read},{{"f":"w","table":"items","key":2,"value":{{"id":2,"v":33}}}}],{rr}}}"#
            );
            let mut h = v1::read_history([HEADER, t1, &t2].join("\n").as_bytes()).unwrap();
            let mut log = RawLog::new();
            log.push(write(2, 22, 200, 0, 1));
            log.push(write(2, 33, 300, 0, 2));
            let recovered = recover_cockroach(&mut h, &log, &|_, _, _, _| Ok(true)).unwrap();
            (h, recovered)
        };
        let (h, recovered) = run(
            r#"{"f":"r","table":"items","key":1,"value":{"id":1,"v":0},"meta":{"mvcc_ts":"10.0000000000"}}"#,
        );
        let marks: Vec<(u32, HiddenReason)> =
            recovered.certificate.hidden_reads.iter().map(|r| (r.at.op, r.why)).collect();
        assert_eq!(marks, [(1, HiddenReason::ReadTimeUnknown)], "{:?}", recovered.warnings);
        assert!(recovered.warnings.iter().any(|w| w.contains("T2 op 1") && w.contains("items[2]")));
        assert_eq!(h.txns[1].start_ts(), Some(Timestamp::hlc(10, 0)));
        let (h, recovered) = run(
            r#"{"f":"r","table":"items","key":2,"value":{"id":2,"v":22},"meta":{"mvcc_ts":"200.0000000000"}}"#,
        );
        assert!(recovered.certificate.hidden_reads.is_empty(), "{:?}", recovered.warnings);
        assert_eq!(h.txns[1].start_ts(), Some(Timestamp::hlc(200, 0)));
        assert_eq!(recovered.stats.sources.reads_within_bounds, 1);
    }
}
