//! The recorded histories have the expected shape and facts.

use isocert_history::{v1, Op, Status};
use isocert_workload::{Isolation, WorkloadConfig, WorkloadKind};

use crate::support::run_workload;

#[test]
fn kv_smoke() {
    let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, Isolation::Serializable);
    cfg.txns = 200;
    cfg.sessions = 4;
    let h = run_workload("wl_kv_smoke", &cfg);
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    eprintln!("{}", text.lines().take(12).collect::<Vec<_>>().join("\n"));
    assert!(h.txns.iter().filter(|t| t.status == Status::Committed).count() >= 200);
    assert!(h.txns.iter().any(|t| t.ops.iter().any(|o| matches!(o, Op::Write { .. }))));
}

#[test]
fn predicate_smoke() {
    let mut cfg = WorkloadConfig::new(WorkloadKind::Predicate, Isolation::ReadCommitted);
    cfg.txns = 300;
    cfg.sessions = 6;
    let h = run_workload("wl_pred_smoke", &cfg);
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    eprintln!("{}", text.lines().take(25).collect::<Vec<_>>().join("\n"));
    let aborted = h.txns.iter().filter(|t| t.status == Status::Aborted).count();
    eprintln!("txns {} aborted {aborted}", h.txns.len());
}
