//! The PostgreSQL facts of docs/POSTGRES.md are recorded and agree with each other: every
//! recorded row writer (`xmin`) is the `xid` of the transaction that wrote that value, is
//! visible in the snapshot the read ran under, and xids are unique.

use std::collections::HashMap;

use isocert_adapters::{IsolationLevel, Snapshot};
use isocert_history::{History, ObjId, Op, Status, TxnId, ValueId};
use isocert_workload::{WorkloadConfig, WorkloadKind};
use serde_json::Value as Json;

use crate::support::run_workload;

fn txn_meta(h: &History, t: TxnId) -> &serde_json::Map<String, Json> {
    h.txn(t).meta().and_then(Json::as_object).expect("every transaction has meta")
}

fn xid(h: &History, t: TxnId) -> Option<u64> {
    txn_meta(h, t).get("xid").and_then(Json::as_u64)
}

fn snapshot_of(text: Option<&Json>) -> Option<Snapshot> {
    text.and_then(Json::as_str).map(|s| s.parse().expect("recorded snapshots parse"))
}

/// The snapshot an operation ran under: the transaction's (RR/SER) or its own (RC).
fn op_snapshot(h: &History, t: TxnId, op: usize, isolation: IsolationLevel) -> Snapshot {
    let meta = h.txn(t).op_meta(op).and_then(Json::as_object);
    if isolation == IsolationLevel::ReadCommitted {
        assert!(txn_meta(h, t).get("snapshot").is_none(), "read committed has no transaction snapshot");
        snapshot_of(meta.and_then(|m| m.get("snapshot"))).expect("read committed ops carry a snapshot")
    } else {
        assert!(meta.is_none_or(|m| m.get("snapshot").is_none()), "RR/SER ops carry no snapshot");
        snapshot_of(txn_meta(h, t).get("snapshot")).expect("RR/SER transactions carry a snapshot")
    }
}

/// Counts what was checked, so tests can assert the checks ran.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    pub(crate) reads_with_writer: usize,
    pub(crate) predicate_rows: usize,
    pub(crate) committed: usize,
    pub(crate) aborted: usize,
    pub(crate) unknown: usize,
}

/// Asserts the recorded facts of `h`, run at `isolation`, are consistent.
pub(crate) fn verify_facts(h: &History, isolation: IsolationLevel) -> Checked {
    let mut checked = Checked::default();
    // Who wrote each (object, value), and the xid each transaction had.
    let mut writer: HashMap<(ObjId, ValueId), TxnId> = HashMap::new();
    let mut xids: HashMap<u64, TxnId> = HashMap::new();
    for t in h.txn_ids() {
        let txn = h.txn(t);
        assert_eq!(txn_meta(h, t).get("isolation").and_then(Json::as_str), Some(isolation.as_str()));
        match txn.status {
            Status::Committed => checked.committed += 1,
            Status::Aborted => {
                checked.aborted += 1;
                let state = txn_meta(h, t).get("sqlstate").and_then(Json::as_str);
                assert!(
                    matches!(state, Some("40001" | "40P01" | "57P01" | "connection")),
                    "aborted with {state:?}"
                );
            }
            Status::Unknown => checked.unknown += 1,
        }
        let wrote = txn.ops.iter().any(|op| match op {
            Op::Write { .. } => true,
            Op::Update { rows, .. } | Op::Delete { rows, .. } => !rows.is_empty(),
            _ => false,
        });
        if txn.status == Status::Committed {
            let mut line = Vec::new();
            isocert_history::v1::write_txn(h, t, &mut line).unwrap();
            let line = String::from_utf8_lossy(&line);
            // The converse does not hold: at read committed a statement that waited for a
            // row lock and then found nothing to change has an xid but no recorded write.
            assert!(!wrote || xid(h, t).is_some(), "a committed writer without xid: {line}");
            if isolation != IsolationLevel::ReadCommitted {
                assert!(wrote || xid(h, t).is_none(), "a read-only transaction with an xid: {line}");
            }
        }
        if let Some(x) = xid(h, t) {
            assert!(xids.insert(x, t).is_none(), "xid {x} recorded twice");
        }
        for op in &txn.ops {
            let mut install = |obj: ObjId, value: ValueId| {
                if value != ValueId::ABSENT {
                    let prev = writer.insert((obj, value), t);
                    assert!(prev.is_none_or(|p| p == t), "value {value:?} of {obj:?} written twice");
                }
            };
            match op {
                Op::Write { obj, value } => install(*obj, *value),
                Op::Update { rows, .. } => rows.iter().for_each(|r| install(r.obj, r.value)),
                _ => {}
            }
        }
    }
    let initial: HashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let setup_xid = h.txn_ids().find_map(|t| {
        h.txn(t).ops.iter().enumerate().find_map(|(i, op)| match op {
            Op::Read { obj, value } if initial.get(obj) == Some(value) => {
                h.txn(t).op_meta(i)?.get("xmin")?.as_u64()
            }
            _ => None,
        })
    });
    // The writer of (obj, value) as an xid: its transaction's, or setup's for initial rows.
    let expected_xmin = |reader: TxnId, obj: ObjId, value: ValueId| -> Option<u64> {
        match writer.get(&(obj, value)) {
            Some(&w) => {
                let x = xid(h, w);
                assert!(h.txn(w).status == Status::Committed || w == reader, "read of an uncommitted write");
                x
            }
            None => {
                assert_eq!(initial.get(&obj), Some(&value), "value read that nobody wrote");
                setup_xid
            }
        }
    };
    for t in h.txn_ids() {
        // An attempt that failed before reading its xid still knows it from its own writes.
        let own = xid(h, t).or_else(|| {
            let txn = h.txn(t);
            txn.ops.iter().enumerate().find_map(|(i, op)| match op {
                Op::Write { value, .. } if *value != ValueId::ABSENT => txn.op_meta(i)?.get("xmin")?.as_u64(),
                Op::Update { rows, .. } if !rows.is_empty() => txn.op_meta(i)?.get("xmins")?.get(0)?.as_u64(),
                _ => None,
            })
        });
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let meta = h.txn(t).op_meta(i).and_then(Json::as_object);
            let snap = op_snapshot(h, t, i, isolation);
            let visible = |x: u64| snap.sees(x) || Some(x) == own;
            match op {
                Op::Read { obj, value } if *value != ValueId::ABSENT => {
                    let x =
                        meta.and_then(|m| m.get("xmin")).and_then(Json::as_u64).expect("a row read has xmin");
                    if let Some(expected) = expected_xmin(t, *obj, *value) {
                        assert_eq!(x, expected, "T{} op {i}: xmin is not the writer's xid", h.txn(t).name);
                    }
                    assert!(
                        visible(x),
                        "T{} ({:?}, own {own:?}) op {i}: writer {x} invisible in {snap}",
                        h.txn(t).name,
                        h.txn(t).status
                    );
                    checked.reads_with_writer += 1;
                }
                Op::Select { rows, .. } => {
                    let xmins =
                        meta.and_then(|m| m.get("xmins")).and_then(Json::as_array).expect("select has xmins");
                    assert_eq!(xmins.len(), rows.len());
                    for (r, x) in rows.iter().zip(xmins) {
                        let x = x.as_u64().expect("xmin is an integer");
                        if let Some(expected) = expected_xmin(t, r.obj, r.value) {
                            assert_eq!(x, expected, "T{} op {i}: select row writer", h.txn(t).name);
                        }
                        assert!(visible(x), "T{} op {i}: row writer {x} invisible in {snap}", h.txn(t).name);
                        checked.predicate_rows += 1;
                    }
                }
                Op::Update { rows, .. } => {
                    let xmins =
                        meta.and_then(|m| m.get("xmins")).and_then(Json::as_array).expect("update has xmins");
                    assert_eq!(xmins.len(), rows.len());
                    assert!(
                        xmins.iter().all(|x| x.as_u64() == own || own.is_none()),
                        "new versions carry own xid"
                    );
                    if isolation == IsolationLevel::ReadCommitted {
                        let candidates: Vec<i64> = meta
                            .and_then(|m| m.get("candidates"))
                            .and_then(Json::as_array)
                            .expect("read committed updates carry candidates")
                            .iter()
                            .map(|c| c[0].as_i64().unwrap())
                            .collect();
                        for r in rows {
                            let key = match h.object(r.obj).key {
                                isocert_history::Scalar::Int(k) => k,
                                _ => panic!(),
                            };
                            assert!(candidates.contains(&key), "updated row {key} was no candidate");
                        }
                    }
                }
                _ => {}
            }
        }
    }
    checked
}

fn run_and_verify(
    name: &str,
    kind: WorkloadKind,
    isolation: IsolationLevel,
    txns: u64,
) -> (History, Checked) {
    let mut cfg = WorkloadConfig::new(kind, isolation);
    cfg.txns = txns;
    cfg.sessions = 6;
    cfg.keys = 12;
    let h = run_workload(name, &cfg);
    let checked = verify_facts(&h, isolation);
    // Every plan ends committed: aborted attempts were retried as new transactions.
    assert_eq!((checked.committed + checked.unknown) as u64, txns, "{checked:?}");
    assert!(checked.reads_with_writer > 0, "{checked:?}");
    // Session order: each session's transactions appear in the order it ran them, and the
    // next one sees the previous committed one's writes.
    for s in 0..cfg.sessions {
        let mine: Vec<TxnId> = h
            .txn_ids()
            .filter(|&t| h.session_name(h.txn(t).session) == &isocert_history::Scalar::Int(s.into()))
            .collect();
        for pair in mine.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if let (Status::Committed, Some(x)) = (h.txn(a).status, xid(&h, a)) {
                if let Some(first_op) = (0..h.txn(b).ops.len()).next() {
                    assert!(
                        op_snapshot(&h, b, first_op, isolation).sees(x),
                        "session {s}: next txn misses own commit"
                    );
                }
            }
        }
    }
    (h, checked)
}

#[test]
fn kv_facts_at_every_level() {
    if !crate::support::pg_available() {
        return;
    }
    for (name, isolation) in [
        ("wl_kv_ser", IsolationLevel::Serializable),
        ("wl_kv_rr", IsolationLevel::RepeatableRead),
        ("wl_kv_rc", IsolationLevel::ReadCommitted),
    ] {
        let (_, checked) = run_and_verify(name, WorkloadKind::Kv, isolation, 300);
        if isolation != IsolationLevel::ReadCommitted {
            assert!(checked.aborted > 0, "{isolation}: no serialization failure recorded: {checked:?}");
        }
    }
}

#[test]
fn predicate_facts_at_every_level() {
    if !crate::support::pg_available() {
        return;
    }
    for (name, isolation) in [
        ("wl_pred_ser", IsolationLevel::Serializable),
        ("wl_pred_rr", IsolationLevel::RepeatableRead),
        ("wl_pred_rc", IsolationLevel::ReadCommitted),
    ] {
        let (h, checked) = run_and_verify(name, WorkloadKind::Predicate, isolation, 300);
        assert!(checked.predicate_rows > 0, "{checked:?}");
        let kinds = |f: fn(&Op) -> bool| h.txns.iter().flat_map(|t| &t.ops).filter(|o| f(o)).count();
        assert!(kinds(|o| matches!(o, Op::Update { rows, .. } if !rows.is_empty())) > 0);
        assert!(kinds(|o| matches!(o, Op::Delete { rows, .. } if !rows.is_empty())) > 0);
        assert!(kinds(|o| matches!(o, Op::Aggregate { .. })) > 0);
    }
}

#[test]
fn skew_facts() {
    if !crate::support::pg_available() {
        return;
    }
    run_and_verify("wl_skew_rr", WorkloadKind::Skew, IsolationLevel::RepeatableRead, 300);
}
