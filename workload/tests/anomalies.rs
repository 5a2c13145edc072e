//! The workloads provoke what they are designed for: write skew under repeatable read (and
//! never under serializable), phantoms under read committed (and never with a transaction
//! snapshot), and unknown commit outcomes when connections die during COMMIT.

use std::collections::HashMap;

use isocert_adapters::IsolationLevel;
use isocert_history::{History, ObjId, Op, Status, ValueId};
use isocert_workload::{WorkloadConfig, WorkloadKind};

use crate::facts::verify_facts;
use crate::support::run_workload;

/// Pairs of committed transactions that read the same versions of both keys of a pair and
/// each wrote a different key of it: a write skew.
fn write_skews(h: &History) -> usize {
    // (versions read of the pair, key written) per committed writer
    let mut by_reads: HashMap<Vec<(ObjId, ValueId)>, Vec<ObjId>> = HashMap::new();
    for t in h.txns.iter().filter(|t| t.is_committed()) {
        let reads: Vec<(ObjId, ValueId)> = t
            .ops
            .iter()
            .filter_map(|o| match o {
                Op::Read { obj, value } => Some((*obj, *value)),
                _ => None,
            })
            .collect();
        let written = t.ops.iter().find_map(|o| match o {
            Op::Write { obj, .. } => Some(*obj),
            _ => None,
        });
        if let (2, Some(w)) = (reads.len(), written) {
            by_reads.entry(reads).or_default().push(w);
        }
    }
    by_reads
        .values()
        .map(|ws| if ws.windows(2).any(|p| p[0] != p[1]) || ws.iter().any(|w| *w != ws[0]) { 1 } else { 0 })
        .sum()
}

fn skew_run(name: &str, isolation: IsolationLevel) -> History {
    let mut cfg = WorkloadConfig::new(WorkloadKind::Skew, isolation);
    cfg.txns = 400;
    cfg.sessions = 8;
    cfg.keys = 4;
    let h = run_workload(name, &cfg);
    verify_facts(&h, isolation);
    h
}

#[test]
fn repeatable_read_lets_write_skew_through_and_serializable_does_not() {
    if !crate::support::pg_available() {
        return;
    }
    let rr = skew_run("wl_anom_skew_rr", IsolationLevel::RepeatableRead);
    assert!(write_skews(&rr) > 0, "no write skew in {} transactions at repeatable read", rr.txns.len());
    let ser = skew_run("wl_anom_skew_ser", IsolationLevel::Serializable);
    assert_eq!(write_skews(&ser), 0, "serializable committed a write skew");
    assert!(ser.txns.iter().any(|t| t.status == Status::Aborted), "serializable aborted nothing");
}

/// Transactions that ran the same predicate twice, wrote nothing in between, and got
/// different rows: a phantom (non-repeatable predicate read).
fn phantoms(h: &History) -> usize {
    h.txns
        .iter()
        .filter(|t| t.is_committed())
        .filter(|t| {
            let ops = &t.ops;
            ops.iter().enumerate().any(|(i, a)| {
                let Op::Select { predicate: p, rows: r1 } = a else { return false };
                ops[i + 1..]
                    .iter()
                    .take_while(|o| !o.is_write())
                    .any(|b| matches!(b, Op::Select { predicate: q, rows: r2 } if q == p && sorted(r1) != sorted(r2)))
            })
        })
        .count()
}

fn sorted(rows: &[isocert_history::ResultRow]) -> Vec<(ObjId, ValueId)> {
    let mut v: Vec<_> = rows.iter().map(|r| (r.obj, r.value)).collect();
    v.sort();
    v
}

/// Committed transactions that read a predicate and then updated rows of it whose version
/// had changed in between (the update's statement snapshot shows another writer than the
/// select saw): the update overwrote a version the transaction never read, a lost update.
fn predicate_lost_updates(h: &History) -> usize {
    let mut count = 0;
    for t in h.txns.iter().filter(|t| t.is_committed()) {
        for (i, op) in t.ops.iter().enumerate() {
            let Op::Select { predicate, rows } = op else { continue };
            let select_xmins = t.op_meta(i).and_then(|m| m["xmins"].as_array()).expect("select xmins");
            for (j, later) in t.ops.iter().enumerate().skip(i + 1) {
                let Op::Update { predicate: q, rows: updated, .. } = later else { continue };
                if q != predicate {
                    continue;
                }
                let candidates = t.op_meta(j).and_then(|m| m["candidates"].as_array()).expect("candidates");
                for u in updated {
                    let isocert_history::Scalar::Int(key) = h.object(u.obj).key else {
                        panic!("integer keys")
                    };
                    let seen = rows.iter().position(|r| r.obj == u.obj).map(|p| select_xmins[p].as_u64());
                    let at_update =
                        candidates.iter().find(|c| c[0].as_i64() == Some(key)).and_then(|c| c[1].as_u64());
                    if let (Some(seen), Some(at_update)) = (seen, at_update) {
                        if seen != Some(at_update) {
                            count += 1;
                        }
                    }
                }
            }
        }
    }
    count
}

#[test]
fn read_committed_shows_phantoms_and_predicate_lost_updates_and_snapshots_do_not() {
    if !crate::support::pg_available() {
        return;
    }
    let run = |name: &str, isolation| {
        let mut cfg = WorkloadConfig::new(WorkloadKind::Predicate, isolation);
        cfg.txns = 1000;
        cfg.sessions = 8;
        let h = run_workload(name, &cfg);
        verify_facts(&h, isolation);
        h
    };
    let rc = run("wl_anom_pred_rc", IsolationLevel::ReadCommitted);
    assert!(phantoms(&rc) > 0, "no phantom in {} transactions at read committed", rc.txns.len());
    assert!(predicate_lost_updates(&rc) > 0, "no predicate lost update in {} transactions", rc.txns.len());
    let rr = run("wl_anom_pred_rr", IsolationLevel::RepeatableRead);
    assert_eq!(phantoms(&rr), 0);
}

#[test]
fn connections_killed_before_commit_are_recorded_unknown() {
    if !crate::support::pg_available() {
        return;
    }
    let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, IsolationLevel::ReadCommitted);
    cfg.txns = 200;
    cfg.sessions = 4;
    cfg.disconnect_rate = 0.1;
    let h = run_workload("wl_anom_unknown", &cfg);
    let checked = verify_facts(&h, IsolationLevel::ReadCommitted);
    assert!(checked.unknown > 0, "{checked:?}");
    // The client killed them before COMMIT: nobody may ever read what they wrote.
    let unknown_writes: Vec<(ObjId, ValueId)> = h
        .txns
        .iter()
        .filter(|t| t.status == Status::Unknown)
        .flat_map(|t| &t.ops)
        .filter_map(|o| match o {
            Op::Write { obj, value } if *value != ValueId::ABSENT => Some((*obj, *value)),
            _ => None,
        })
        .collect();
    assert!(!unknown_writes.is_empty());
    for t in h.txns.iter().filter(|t| t.status != Status::Unknown) {
        for o in &t.ops {
            if let Op::Read { obj, value } = o {
                assert!(!unknown_writes.contains(&(*obj, *value)), "read a write of a killed transaction");
            }
        }
    }
    // Sessions reconnected and went on: every session has transactions after its first unknown one.
    let unknown_sessions: Vec<_> =
        h.txns.iter().filter(|t| t.status == Status::Unknown).map(|t| t.session).collect();
    for s in unknown_sessions {
        let last = h.txns.iter().rposition(|t| t.session == s).unwrap();
        let first_unknown =
            h.txns.iter().position(|t| t.session == s && t.status == Status::Unknown).unwrap();
        assert!(last > first_unknown || checked.committed as u64 >= cfg.txns);
    }
    for t in h.txns.iter().filter(|t| t.status == Status::Unknown) {
        let meta = t.meta().unwrap();
        assert!(meta.get("sqlstate").is_some(), "{meta}");
    }
}
