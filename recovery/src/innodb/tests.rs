//! The InnoDB rule on small hand-written histories and binary logs: which version each
//! read is given, per level and kind of read.

use isocert_history::{v1, History, ObjId, OpRef, Scalar, Status, TxnId, Writer};

use super::*;
use crate::{CommittedTxn, RowChange};

/// A log transaction: GTID sequence `seq`, ending at binlog.000001 offset `1000 * seq`,
/// writing `key = value` pairs of table kv (`None`: delete).
fn logged(seq: u64, writes: &[(i64, Option<i64>)]) -> CommittedTxn {
    let key = binlog_key("binlog.000001", 1000 * seq).unwrap();
    CommittedTxn {
        xid: seq,
        commit_lsn: key,
        end_lsn: key,
        commit_time: 0,
        commit_ts: None,
        changes: writes
            .iter()
            .map(|&(k, v)| RowChange {
                table: "kv".into(),
                key: Scalar::Int(k),
                row: v.map(|v| vec![("key".into(), Scalar::Int(k)), ("value".into(), Scalar::Int(v))]),
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

/// The snapshot fact just after log transaction `seq`.
fn snap(seq: u64) -> String {
    format!("\"snapshot\":\"binlog.000001:{}\"", 1000 * seq)
}

fn never_matches(
) -> impl Fn(&History, isocert_history::PredId, ObjId, isocert_history::ValueId) -> Result<bool, String> {
    |_, _, _, _| Ok(false)
}

fn t(h: &History, id: i64) -> TxnId {
    h.txn_ids().find(|&x| h.txn(x).name == Scalar::Int(id)).unwrap()
}

fn seen(r: &Recovered, h: &History, txn: i64, op: u32) -> Vec<Writer> {
    let set = r
        .certificate
        .version_sets
        .as_ref()
        .unwrap()
        .get(&OpRef { txn: t(h, txn), op })
        .cloned()
        .unwrap_or_default();
    set.iter().map(|s| s.writer).collect()
}

const HEADER: &str =
    r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":0},{"key":2,"value":0}]}"#;

#[test]
fn repeatable_read_selects_read_the_snapshot_and_the_log_orders_versions() {
    // T1 and T2 write key 1 (log order T1, T2); T3's snapshot was taken after T1 only, so
    // its plain SELECT saw T1's version although T2 committed before T3 read.
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"repeatable-read\",{},\"gtid\":\"0-1-1\"}}}}\n\
         {{\"id\":2,\"session\":2,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":20}}],\"meta\":{{\"isolation\":\"repeatable-read\",{},\"gtid\":\"0-1-2\"}}}}\n\
         {{\"id\":3,\"session\":3,\"ops\":[{{\"f\":\"select\",\"table\":\"kv\",\"where\":\"value > 100\",\"rows\":[]}}],\"meta\":{{\"isolation\":\"repeatable-read\",{},\"before_commit_gtid\":\"0-1-2\"}}}}",
        snap(0),
        snap(0),
        snap(1)
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log = log(vec![logged(1, &[(1, Some(10))]), logged(2, &[(1, Some(20))])]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    let obj = h.object_by_key(h.table_by_name("kv").unwrap(), &Scalar::Int(1)).unwrap();
    assert_eq!(r.certificate.version_order.as_ref().unwrap()[&obj], vec![t(&h, 1), t(&h, 2)]);
    assert_eq!(seen(&r, &h, 3, 0), vec![Writer::Txn(t(&h, 1)), Writer::Initial]);
    assert_eq!(r.stats.ambiguous_reads, 0);
    // Timestamps: T3 started after T1's commit and before T2's.
    let ts = |id| (h.txn(t(&h, id)).start_ts().unwrap().wall, h.txn(t(&h, id)).commit_ts().unwrap().wall);
    assert!(ts(1).1 < ts(3).0 && ts(3).0 < ts(2).1, "{:?} {:?} {:?}", ts(1), ts(2), ts(3));
    // T3 is serialized before T2 (it read before T2's write) but commits after it: at
    // REPEATABLE READ the commit order is no serial order.
    assert_eq!(h.serial_order, isocert_history::SerialOrder::Unknown);
}

#[test]
fn serializable_reads_see_the_newest_versions_at_commit() {
    // T3 (serializable) began before T1 and T2 committed, then read with locks and wrote
    // key 2: its locking read of key 1 saw T2's version, the newest before its own commit.
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"serializable\",{},\"gtid\":\"0-1-1\"}}}}\n\
         {{\"id\":2,\"session\":2,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":20}}],\"meta\":{{\"isolation\":\"serializable\",{},\"gtid\":\"0-1-2\"}}}}\n\
         {{\"id\":3,\"session\":3,\"ops\":[{{\"f\":\"select\",\"table\":\"kv\",\"where\":\"value > 100\",\"rows\":[]}},{{\"f\":\"w\",\"key\":2,\"value\":30}}],\"meta\":{{\"isolation\":\"serializable\",{},\"gtid\":\"0-1-3\"}}}}\n\
         {{\"id\":4,\"session\":4,\"ops\":[{{\"f\":\"select\",\"table\":\"kv\",\"where\":\"value > 100\",\"rows\":[]}}],\"meta\":{{\"isolation\":\"serializable\",{},\"before_commit_gtid\":\"0-1-1\"}}}}",
        snap(0),
        snap(0),
        snap(0),
        snap(0)
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log =
        log(vec![logged(1, &[(1, Some(10))]), logged(2, &[(1, Some(20))]), logged(3, &[(2, Some(30))])]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    assert_eq!(seen(&r, &h, 3, 0), vec![Writer::Txn(t(&h, 2)), Writer::Initial]);
    // T4 wrote nothing; its locks were held when the log ended at T1.
    assert_eq!(seen(&r, &h, 4, 0), vec![Writer::Txn(t(&h, 1)), Writer::Initial]);
    assert_eq!(r.stats.ambiguous_reads, 0);
    // The ticks say the same to the timestamp checkers: each started at its commit point,
    // not at the snapshot it took before T1 (its reads never used it). At the snapshot, a
    // read-only T4 would be judged to have read T1's write from the future.
    let ts = |id| (h.txn(t(&h, id)).start_ts().unwrap().wall, h.txn(t(&h, id)).commit_ts().unwrap().wall);
    assert!(ts(2).1 < ts(3).0 && ts(3).0 < ts(3).1, "{:?} {:?}", ts(2), ts(3));
    assert!(ts(1).1 < ts(4).0 && ts(4).0 == ts(4).1 && ts(4).1 < ts(2).1, "{:?} {:?}", ts(1), ts(4));
    // Locks held until commit: the commit order is the serial order.
    assert_eq!(h.serial_order, isocert_history::SerialOrder::CommitTs);
}

#[test]
fn read_committed_reads_are_pinned_by_values_and_else_counted_as_ambiguous() {
    // T3 (read committed) ran while T1 and T2 committed. Its first select returned key 1
    // at T2's value: exact. Its second returned nothing: every version of key 1 in its
    // window fails the predicate, so which one it saw is ambiguous.
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"read-committed\",{},\"gtid\":\"0-1-1\"}}}}\n\
         {{\"id\":2,\"session\":2,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":20}}],\"meta\":{{\"isolation\":\"read-committed\",{},\"gtid\":\"0-1-2\"}}}}\n\
         {{\"id\":3,\"session\":3,\"ops\":[{{\"f\":\"select\",\"table\":\"kv\",\"where\":\"key = 1\",\"rows\":[{{\"key\":1,\"value\":20}}]}},{{\"f\":\"select\",\"table\":\"kv\",\"where\":\"value > 100\",\"rows\":[]}}],\"meta\":{{\"isolation\":\"read-committed\",{},\"before_commit_gtid\":\"0-1-2\"}}}}",
        snap(0),
        snap(0),
        snap(0)
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log = log(vec![logged(1, &[(1, Some(10))]), logged(2, &[(1, Some(20))])]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    assert_eq!(seen(&r, &h, 3, 0)[0], Writer::Txn(t(&h, 2)));
    assert_eq!(seen(&r, &h, 3, 1)[0], Writer::Initial, "the earliest candidate");
    assert_eq!(r.stats.ambiguous_reads, 1);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

#[test]
fn unknown_outcomes_are_settled_by_the_log() {
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"status\":\"unknown\",\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"serializable\",{}}}}}\n\
         {{\"id\":2,\"session\":2,\"status\":\"unknown\",\"ops\":[{{\"f\":\"w\",\"key\":2,\"value\":20}}],\"meta\":{{\"isolation\":\"serializable\",{},\"gtid\":\"0-1-9\"}}}}",
        snap(0),
        snap(0)
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log = log(vec![logged(1, &[(1, Some(10))])]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    assert_eq!(h.txn(t(&h, 1)).status, Status::Committed, "matched by the value it wrote");
    assert_eq!(h.txn(t(&h, 2)).status, Status::Aborted, "its GTID is not in the log");
    assert_eq!((r.stats.resolved_committed, r.stats.resolved_aborted), (1, 1));
}

#[test]
fn malformed_facts_and_missing_writes_are_errors_naming_them() {
    let bad = format!("{HEADER}\n{{\"id\":1,\"session\":1,\"ops\":[],\"meta\":{{\"isolation\":\"serializable\",\"snapshot\":\"nowhere\"}}}}");
    let mut h = v1::read_history(bad.as_bytes()).unwrap();
    let e = recover_innodb(&mut h, &RawLog::new(), &never_matches()).unwrap_err().to_string();
    assert!(e.contains("snapshot") && e.contains("nowhere"), "{e}");

    let committed = format!(
        "{HEADER}\n{{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"serializable\",{},\"gtid\":\"0-1-1\"}}}}",
        snap(0)
    );
    let mut h = v1::read_history(committed.as_bytes()).unwrap();
    let e = recover_innodb(&mut h, &RawLog::new(), &never_matches()).unwrap_err().to_string();
    assert!(e.contains("T1") && e.contains("kv[1]"), "{e}");
}

/// A REPEATABLE READ history: T1 writes key 1 = 10 (log 1), T2 writes key 1 = 20 (log 2),
/// then T3 (snapshot `reported`) reads key 1 = `read` and writes key `written` (log 3).
/// T3 is invoked at `invoked`; T1 and T2 completed at 10 and 20.
fn rr_history(reported: u64, read: i64, written: i64, invoked: i64) -> (History, Recovered) {
    let rr = |extra: String| format!("\"meta\":{{\"isolation\":\"repeatable-read\",{extra}}}");
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"invoked_at\":1,\"completed_at\":10,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],{}}}\n\
         {{\"id\":2,\"session\":2,\"invoked_at\":11,\"completed_at\":20,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":20}}],{}}}\n\
         {{\"id\":3,\"session\":3,\"invoked_at\":{invoked},\"completed_at\":40,\"ops\":[{{\"f\":\"r\",\"key\":1,\"value\":{read}}},{{\"f\":\"w\",\"key\":{written},\"value\":30}}],{}}}",
        rr(format!("{},\"gtid\":\"0-1-1\"", snap(0))),
        rr(format!("{},\"gtid\":\"0-1-2\"", snap(1))),
        rr(format!("{},\"gtid\":\"0-1-3\"", snap(reported))),
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log = log(vec![
        logged(1, &[(1, Some(10))]),
        logged(2, &[(1, Some(20))]),
        logged(3, &[(written, Some(30))]),
    ]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    (h, r)
}

/// Whether T3 started after T2 committed, by the recovered timestamps.
fn started_after_t2(h: &History) -> bool {
    h.txn(t(h, 3)).start_ts().unwrap().wall > h.txn(t(h, 2)).commit_ts().unwrap().wall
}

#[test]
fn a_reported_snapshot_position_the_reads_rule_out_is_placed_where_they_put_it() {
    // MariaDB reported T3's snapshot after T1 only, yet T3 read T2's 20: its read view held
    // T2 (docs/MARIADB.md). The start is placed after T2, with a warning.
    let (h, r) = rr_history(1, 20, 2, 30);
    assert!(started_after_t2(&h));
    assert!(r.warnings.iter().any(|w| w.contains("1 REPEATABLE READ snapshot position")), "{:?}", r.warnings);
    // Near-twin: the reported position agrees with the read; nothing moves, nothing said.
    let (h, r) = rr_history(1, 10, 2, 30);
    assert!(!started_after_t2(&h));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn a_lost_update_the_reads_prove_stays_and_one_they_cannot_prove_is_not_claimed() {
    // T3 read T1's 10 (so its snapshot is before T2) and then overwrote T2's 20: at every
    // position its read allows, it overwrote a version it did not see. Start kept.
    let (h, r) = rr_history(1, 10, 1, 30);
    assert!(!started_after_t2(&h), "the lost update is provable");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // T3 read key 2 (never written: no evidence) and overwrote T2's version of key 1 with a
    // reported snapshot before T2: only the reported position says it missed T2, and that
    // position is not exactly the read view, so the start moves after T2 and it is said.
    let text = format!(
        "{HEADER}\n\
         {{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":10}}],\"meta\":{{\"isolation\":\"repeatable-read\",{},\"gtid\":\"0-1-1\"}}}}\n\
         {{\"id\":3,\"session\":3,\"ops\":[{{\"f\":\"r\",\"key\":2,\"value\":0}},{{\"f\":\"w\",\"key\":1,\"value\":30}}],\"meta\":{{\"isolation\":\"repeatable-read\",{},\"gtid\":\"0-1-2\"}}}}",
        snap(0),
        snap(0)
    );
    let mut h = v1::read_history(text.as_bytes()).unwrap();
    let log = log(vec![logged(1, &[(1, Some(10))]), logged(2, &[(1, Some(30))])]);
    let r = recover_innodb(&mut h, &log, &never_matches()).unwrap();
    assert!(h.txn(t(&h, 3)).start_ts().unwrap().wall > h.txn(t(&h, 1)).commit_ts().unwrap().wall);
    assert!(r.warnings.iter().any(|w| w.contains("no anomaly is claimed")), "{:?}", r.warnings);
}

#[test]
fn a_commit_acknowledged_before_a_transaction_began_is_in_its_snapshot() {
    // T3 was invoked (25) after T2's commit was acknowledged (20), but MariaDB reported its
    // snapshot after T1 only; its read of key 1 = 20 agrees with the acknowledgement.
    let (h, _) = rr_history(1, 20, 2, 25);
    assert!(started_after_t2(&h));
    // Invoked before T2 was acknowledged, with a read of 10: the reported position stands.
    let (h, r) = rr_history(1, 10, 2, 15);
    assert!(!started_after_t2(&h));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}
