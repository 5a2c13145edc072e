//! The recorded histories have the v1 shape: they round-trip through the format, carry the
//! initial rows, and predicate operations record what their statements did.

use std::collections::HashSet;

use isocert_adapters::IsolationLevel;
use isocert_history::{v1, Op, Scalar, Status, Value};
use isocert_workload::{WorkloadConfig, WorkloadKind};

use crate::support::run_workload;

#[test]
fn kv_history_round_trips_through_v1() {
    if !crate::support::pg_available() {
        return;
    }
    let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, IsolationLevel::Serializable);
    cfg.txns = 200;
    cfg.sessions = 4;
    let h = run_workload("wl_shape_kv", &cfg);
    assert_eq!(h.initial.len(), 16, "every key is an initial row");
    assert_eq!(h.session_count(), 4);
    for (i, t) in h.txns.iter().enumerate() {
        assert_eq!(t.name, Scalar::Int(i as i64), "ids are the position in the history");
    }
    let mut first = Vec::new();
    v1::write_history(&h, &mut first).unwrap();
    let back = v1::read_history(first.as_slice()).expect("the written history reads back");
    assert_eq!(back.txns.len(), h.txns.len());
    let mut second = Vec::new();
    v1::write_history(&back, &mut second).unwrap();
    assert_eq!(String::from_utf8(first).unwrap(), String::from_utf8(second).unwrap());
}

#[test]
fn predicate_operations_record_their_effects() {
    if !crate::support::pg_available() {
        return;
    }
    let mut cfg = WorkloadConfig::new(WorkloadKind::Predicate, IsolationLevel::ReadCommitted);
    cfg.txns = 300;
    cfg.sessions = 6;
    let h = run_workload("wl_shape_pred", &cfg);
    let table = h.table_by_name("items").expect("table items");
    let columns: Vec<&str> = h.table(table).columns.iter().map(|c| &**c).collect();
    assert_eq!(columns, ["id", "c1", "c2", "v"]);
    let mut written_v: HashSet<i64> = HashSet::from([0]);
    let mut updates = 0;
    for t in &h.txns {
        for op in &t.ops {
            if let Some(p) = op.predicate() {
                assert_eq!(h.predicate(p).table, table);
            }
            match op {
                Op::Update { set, rows, .. } => {
                    updates += rows.len();
                    for r in rows {
                        let Value::Row(row) = h.value(r.value) else { panic!("an update installs rows") };
                        for (col, a) in set {
                            let Some(v) = a.constant() else { continue };
                            assert_eq!(row.get(*col), v, "the new row has the SET value");
                        }
                        let Scalar::Int(v) = row.get(isocert_history::ColId(3)) else { panic!("v") };
                        written_v.insert(*v);
                    }
                }
                Op::Delete { rows, .. } => assert!(rows.iter().all(|r| h.value(r.value).is_absent())),
                Op::Write { value, .. } => {
                    if let Value::Row(row) = h.value(*value) {
                        let Scalar::Int(v) = row.get(isocert_history::ColId(3)) else { panic!("v") };
                        written_v.insert(*v);
                    }
                }
                _ => {}
            }
        }
    }
    assert!(updates > 0);
    // A max/min of v returns a v some version had.
    for t in h.txns.iter().filter(|t| t.status == Status::Committed) {
        for op in &t.ops {
            if let Op::Aggregate { column: Some(c), result: Scalar::Int(r), .. } = op {
                if h.table(table).columns[c.index()].as_ref() == "v" {
                    assert!(written_v.contains(r), "aggregate returned v={r} nobody wrote");
                }
            }
        }
    }
}

#[test]
fn append_histories_record_appends_and_lists_that_trace_back() {
    if !crate::support::pg_available() {
        return;
    }
    let mut cfg = WorkloadConfig::new(WorkloadKind::Append, IsolationLevel::Serializable);
    cfg.txns = 300;
    cfg.sessions = 4;
    cfg.keys = 3;
    cfg.client_abort_rate = 0.2;
    let h = run_workload("wl_shape_append", &cfg);
    assert!(h.initial.is_empty(), "the append table starts empty");
    let ops = || h.txns.iter().flat_map(|t| &t.ops);
    let appends = ops().filter(|op| matches!(op, Op::Append { .. })).count();
    let long_lists = ops()
        .filter(|op| matches!(op, Op::Read { value, .. } if matches!(h.value(*value), Value::List(l) if l.len() > 1)))
        .count();
    assert!(
        appends > 200 && long_lists > 20,
        "{appends} appends, {long_lists} reads of lists longer than one"
    );
    // Client aborts are recorded as aborted attempts without a database error.
    let client_aborts = h
        .txns
        .iter()
        .filter(|t| t.status == Status::Aborted && t.meta().is_some_and(|m| m.get("sqlstate").is_none()))
        .count();
    assert_eq!(client_aborts as u64, isocert_workload::client_aborted_plans(&cfg, cfg.txns));
    // Black-box (Elle's traceability): every read is a prefix of its key's longest read,
    // and no element shows twice.
    let trace = isocert_history::formats::list_append_certificate(&h);
    assert!(trace.conflicts.is_empty() && trace.duplicates.is_empty(), "{:?}", trace.conflicts);
    let mut text = Vec::new();
    v1::write_history(&h, &mut text).unwrap();
    let back = v1::read_history(text.as_slice()).expect("the append history reads back");
    assert_eq!(back.txns.len(), h.txns.len());
}
