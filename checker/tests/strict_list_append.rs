//! Strict serializability of list-append histories (Jepsen's main workload with `:time`;
//! issue 28): the order the reads show and real-time order are facts, only the order of the
//! appends no read shows is searched (Cobra with real-time edges).
//!
//! A brute-force reference replays every total order of the transactions that keeps session
//! order and real time (a transaction that completed before another was invoked comes
//! first): the history is strictly serializable exactly when one of them explains every
//! read (each read returns the list as the appends before it left it).

mod common;

use common::permutations;
use isocert_checker::{
    check, AnomalyKind, CheckError, CheckerKind, EdgeBasis, EdgeKind, IsolationLevel, Report,
};
use isocert_history::{v1, Certificate, History};
use isocert_oracle::Interpreter;
use isocert_random::rand::Rng;
use isocert_random::SeededRng;

/// One operation: an append of a unique element to a list, or a read of a whole list.
#[derive(Clone, Debug)]
enum Op {
    Append(u8, i64),
    Read(u8, Vec<i64>),
}

/// A random transaction: its session, its real-time interval and its operations.
#[derive(Clone, Debug)]
struct Txn {
    session: u8,
    invoked_at: i64,
    completed_at: i64,
    ops: Vec<Op>,
}

/// A random history: transactions of appends and reads over one or two lists, each read
/// showing a prefix of a random order of the list's appenders (then the reader's own
/// earlier appends), in a few sessions, with random real-time intervals (one after another
/// within a session).
fn generate(rng: &mut SeededRng) -> Vec<Txn> {
    let keys = rng.random_range(1..=2u8);
    let n = rng.random_range(2..=5usize);
    let sessions = rng.random_range(1..=n as u8);
    let mut shapes: Vec<Vec<(u8, bool)>> = Vec::new();
    for _ in 0..n {
        shapes.push(
            (0..rng.random_range(1..=3))
                .map(|_| (rng.random_range(0..keys), rng.random_bool(0.55)))
                .collect(),
        );
    }
    let element = |t: usize, i: usize| (t * 10 + i) as i64 + 1;
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); usize::from(keys)];
    for (key, writers) in order.iter_mut().enumerate() {
        writers
            .extend((0..n).filter(|&t| shapes[t].iter().any(|&(k, append)| append && usize::from(k) == key)));
        for i in (1..writers.len()).rev() {
            writers.swap(i, rng.random_range(0..=i));
        }
    }
    let appended = |t: usize, key: u8, upto: usize| -> Vec<i64> {
        shapes[t][..upto]
            .iter()
            .enumerate()
            .filter(|(_, &(k, append))| append && k == key)
            .map(|(i, _)| element(t, i))
            .collect()
    };
    let mut txns = Vec::new();
    let mut clock = vec![0i64; usize::from(sessions)];
    for t in 0..n {
        let mut ops = Vec::new();
        for (i, &(key, append)) in shapes[t].iter().enumerate() {
            if append {
                ops.push(Op::Append(key, element(t, i)));
                continue;
            }
            let writers = &order[usize::from(key)];
            let own = appended(t, key, i);
            let mine = writers.iter().position(|&w| w == t).unwrap_or(writers.len());
            // After its own append a transaction sees everything before it, then its own.
            let len = if own.is_empty() { rng.random_range(0..=mine) } else { mine };
            let mut shown: Vec<i64> =
                writers[..len].iter().flat_map(|&w| appended(w, key, shapes[w].len())).collect();
            shown.extend(own);
            ops.push(Op::Read(key, shown));
        }
        // A session's transactions run one after another, as a client's do; sessions overlap.
        let session = rng.random_range(0..sessions);
        let invoked_at = clock[usize::from(session)] + rng.random_range(0..8i64);
        let completed_at = invoked_at + rng.random_range(0..6i64);
        clock[usize::from(session)] = completed_at;
        txns.push(Txn { session, invoked_at, completed_at, ops });
    }
    txns
}

/// `txns` as v1 text.
fn v1_text(txns: &[Txn]) -> String {
    let mut lines = String::new();
    for (t, txn) in txns.iter().enumerate() {
        let ops: Vec<String> = txn
            .ops
            .iter()
            .map(|op| match op {
                Op::Append(key, e) => format!(r#"{{"f":"append","key":{key},"value":{e}}}"#),
                Op::Read(key, shown) if shown.is_empty() => {
                    format!(r#"{{"f":"r","key":{key},"value":null}}"#)
                }
                Op::Read(key, shown) => format!(
                    r#"{{"f":"r","key":{key},"value":[{}]}}"#,
                    shown.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                ),
            })
            .collect();
        lines.push_str(&format!(
            r#"{{"id":{},"session":{},"invoked_at":{},"completed_at":{},"ops":[{}]}}"#,
            t + 1,
            txn.session,
            txn.invoked_at,
            txn.completed_at,
            ops.join(",")
        ));
        lines.push('\n');
    }
    lines
}

/// Whether some total order of `txns` that keeps session order (file order within a
/// session) and, when `real_time`, real-time order explains every read.
fn brute_force(txns: &[Txn], real_time: bool) -> bool {
    let before = |a: usize, b: usize| {
        (txns[a].session == txns[b].session && a < b)
            || (real_time && txns[a].completed_at < txns[b].invoked_at)
    };
    let mut found = false;
    let mut p: Vec<usize> = (0..txns.len()).collect();
    permutations(&mut p, 0, &mut |order| {
        if found || order.iter().enumerate().any(|(i, &b)| order[i + 1..].iter().any(|&a| before(a, b))) {
            return;
        }
        let mut lists: Vec<Vec<i64>> = vec![Vec::new(); 2];
        found = order.iter().all(|&t| {
            txns[t].ops.iter().all(|op| match op {
                Op::Append(key, e) => {
                    lists[usize::from(*key)].push(*e);
                    true
                }
                Op::Read(key, shown) => lists[usize::from(*key)] == *shown,
            })
        });
    });
    found
}

fn load(text: &str) -> History {
    v1::read_history(text.as_bytes()).expect("the history reads")
}

fn run(h: &History, level: IsolationLevel, checker: CheckerKind) -> Result<Report, CheckError> {
    let oracle = Interpreter::new(h).expect("no predicates");
    check(h, &Certificate::default(), level, checker, &oracle)
}

#[test]
fn strict_serializability_of_list_appends_agrees_with_brute_force() {
    let mut rng = isocert_random::seeded(20261130);
    let (mut valid, mut not_serializable, mut serializable_only, mut searched) = (0, 0, 0, 0);
    for case in 0..2_500 {
        let txns = generate(&mut rng);
        let text = v1_text(&txns);
        let h = load(&text);
        let report = run(&h, IsolationLevel::StrictSerializable, CheckerKind::Auto).expect("checks");
        if txns.iter().flat_map(|t| &t.ops).any(|op| matches!(op, Op::Append(..))) {
            assert_eq!(report.checker, CheckerKind::Cobra, "auto picks cobra for list appends");
        }
        searched += usize::from(
            report
                .notes
                .iter()
                .any(|n| n.contains("pair(s) of writers was open") && !n.contains("order of 0 pair")),
        );
        let expected = brute_force(&txns, true);
        assert_eq!(report.is_valid(), expected, "case {case}:\n{text}\n{:?}", report.anomalies);
        let serializable = brute_force(&txns, false);
        match (expected, serializable) {
            (true, _) => valid += 1,
            (false, false) => not_serializable += 1,
            (false, true) => {
                serializable_only += 1;
                // No serial order explains the reads and keeps real time: the cycle goes
                // through real-time order, and every edge says what it rests on.
                let a =
                    report.anomalies.iter().find(|a| a.kind == AnomalyKind::RealTime).unwrap_or_else(|| {
                        panic!("case {case}: a real-time anomaly: {:?}\n{text}", report.anomalies)
                    });
                assert!(a.cycle.iter().any(|e| e.kind == EdgeKind::RealTime), "case {case}: {:?}", a.cycle);
                for e in &a.cycle {
                    let marked = ["(certain)", "(forced", "(given", "(chosen"]
                        .iter()
                        .any(|m| e.explanation.contains(m));
                    let searched = report.checker == CheckerKind::Cobra;
                    assert!(
                        marked || !searched,
                        "case {case}: an edge without its origin: {}",
                        e.explanation
                    );
                    if e.kind == EdgeKind::RealTime {
                        assert_eq!(e.basis, EdgeBasis::Observed);
                        assert!(e.explanation.contains("completed (at"), "{}", e.explanation);
                    }
                }
            }
        }
    }
    // Each verdict is well represented, so neither the search nor the real-time edges go
    // untested.
    assert!(valid > 300, "{valid} valid");
    assert!(not_serializable > 300, "{not_serializable} not serializable");
    assert!(serializable_only > 100, "{serializable_only} serializable but not strictly");
    assert!(searched > 100, "{searched} histories with appends no read orders");
}

/// T1 appends 1 to x and completes at 10; T2, invoked at `invoked`, reads x empty.
fn stale_read(invoked: i64) -> History {
    load(&format!(
        r#"{{"id":1,"session":1,"invoked_at":0,"completed_at":10,"ops":[{{"f":"append","key":"x","value":1}}]}}
{{"id":2,"session":2,"invoked_at":{invoked},"completed_at":30,"ops":[{{"f":"r","key":"x","value":null}},{{"f":"append","key":"y","value":2}}]}}
"#
    ))
}

#[test]
fn a_stale_list_read_after_a_completed_append_is_a_real_time_anomaly_and_its_overlapping_twin_passes() {
    let r = run(&stale_read(20), IsolationLevel::StrictSerializable, CheckerKind::Auto).expect("checks");
    let kinds: Vec<AnomalyKind> = r.anomalies.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [AnomalyKind::RealTime], "{:?}", r.anomalies);
    let edges: Vec<(u32, u32, EdgeKind)> =
        r.anomalies[0].cycle.iter().map(|e| (e.from.0, e.to.0, e.kind)).collect();
    assert_eq!(edges.len(), 2, "{edges:?}");
    assert!(edges.iter().any(|e| e.2 == EdgeKind::RealTime) && edges.iter().any(|e| e.2 == EdgeKind::Rw));
    assert!(
        r.anomalies[0]
            .cycle
            .iter()
            .any(|e| e.explanation == "T1 completed (at 10) before T2 was invoked (at 20) (certain)"),
        "{:?}",
        r.anomalies[0].cycle
    );
    // Serializable either way (T2 first); strictly so once the two overlap.
    assert!(run(&stale_read(20), IsolationLevel::Serializable, CheckerKind::Cobra)
        .expect("checks")
        .is_valid());
    let twin = run(&stale_read(5), IsolationLevel::StrictSerializable, CheckerKind::Cobra).expect("checks");
    assert!(twin.is_valid(), "{:?}", twin.anomalies);
}

#[test]
fn a_list_append_history_without_real_times_is_refused_by_name() {
    let h = load(
        r#"{"id":1,"session":1,"ops":[{"f":"append","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":[1]}]}
"#,
    );
    for checker in [CheckerKind::Auto, CheckerKind::Cobra] {
        let e = run(&h, IsolationLevel::StrictSerializable, checker).expect_err("no real times").to_string();
        assert!(e.contains("cobra") && e.contains("T1 has no invoked_at / completed_at"), "{e}");
    }
    // PolySI decides snapshot isolation only, and says so.
    let e =
        run(&stale_read(20), IsolationLevel::StrictSerializable, CheckerKind::Polysi).expect_err("refused");
    assert!(e.to_string().contains("polysi"), "{e}");
}
