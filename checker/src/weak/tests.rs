//! The weak checker: each level's violation with an accepted near-twin, reads no level
//! allows, level and shape refusals, and a brute-force oracle (every commit order, the
//! axioms checked as Biswas and Enea state them) agreeing with it on thousands of random
//! histories.

use isocert_history::v1;
use isocert_random::rand::Rng as _;

use super::check;
use crate::mtc::tests::oracle::{self, Rng, Txn};
use crate::{AnomalyKind, CheckError, CheckerKind, EdgeKind, IsolationLevel, Report};

const RC: IsolationLevel = IsolationLevel::ReadCommitted;
const RA: IsolationLevel = IsolationLevel::ReadAtomic;
const CC: IsolationLevel = IsolationLevel::Causal;
const HEADER: &str = r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0},{"key":"z","value":0}]}"#;

fn run(body: &str, level: IsolationLevel) -> Report {
    let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).expect("test history parses");
    check(&h, level).expect("weak checker runs")
}

fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

/// The verdicts at read committed, read atomic and causal.
fn verdicts(body: &str) -> [bool; 3] {
    [RC, RA, CC].map(|level| run(body, level).is_valid())
}

#[test]
fn non_monotonic_reads_inside_a_transaction_break_read_committed() {
    // T2 read T1's x and overwrote it; T3 read T2's x, then T1's older one.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":2},{"f":"r","key":"x","value":1}]}"#;
    let rc = run(bad, RC);
    assert_eq!(kinds(&rc), [AnomalyKind::NonMonotonicRead], "{:#?}", rc.anomalies);
    let a = &rc.anomalies[0];
    assert_eq!(a.cycle.len(), 2);
    let forced = a.cycle.iter().find(|e| e.kind == EdgeKind::Ww).expect("a forced write order");
    assert!(
        forced.explanation.contains("T2's write of kv[\"x\"] must come before T1's")
            && forced.explanation.contains("after it had read"),
        "{}",
        forced.explanation
    );
    assert_eq!(verdicts(bad), [false, false, false]);
    // Twin: the reads in the other order are a non-repeatable read, which read committed
    // allows and read atomic (a transaction sees all of T2's write or none) does not.
    let twin = bad.replace(
        r#"{"f":"r","key":"x","value":2},{"f":"r","key":"x","value":1}"#,
        r#"{"f":"r","key":"x","value":1},{"f":"r","key":"x","value":2}"#,
    );
    assert_eq!(verdicts(&twin), [true, false, false]);
    assert_eq!(kinds(&run(&twin, RA)), [AnomalyKind::FracturedRead]);
}

#[test]
fn reads_across_transactions_must_agree_on_one_order_at_read_committed() {
    // T3 reads x from T1 then y from T2: T1 before T2. T4 reads x from T2 then y from T1:
    // T2 before T1.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"y","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2},{"f":"w","key":"y","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":1},{"f":"r","key":"y","value":2}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"x","value":2},{"f":"r","key":"y","value":1}]}"#;
    let rc = run(bad, RC);
    assert_eq!(kinds(&rc), [AnomalyKind::NonMonotonicRead]);
    assert!(rc.anomalies[0].cycle.iter().all(|e| e.kind == EdgeKind::Ww), "{:#?}", rc.anomalies[0].cycle);
    let twin = bad.replace(
        r#"{"f":"r","key":"x","value":2},{"f":"r","key":"y","value":1}"#,
        r#"{"f":"r","key":"x","value":2},{"f":"r","key":"y","value":2}"#,
    );
    assert!(run(&twin, RC).is_valid());
}

#[test]
fn a_fractured_read_breaks_read_atomic_not_read_committed() {
    // T2 reads y's initial value, then x from T1, which wrote both.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"y","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"y","value":0},{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(verdicts(bad), [true, false, false]);
    let ra = run(bad, RA);
    assert_eq!(kinds(&ra), [AnomalyKind::FracturedRead]);
    let cycle = &ra.anomalies[0].cycle;
    assert_eq!(cycle.iter().map(|e| e.kind).collect::<Vec<_>>(), [EdgeKind::Wr, EdgeKind::Rw]);
    assert!(
        cycle[1].explanation.contains("T2 read the initial version of kv[\"y\"]"),
        "{}",
        cycle[1].explanation
    );
    // In the other order read committed sees it too: y's initial value after T1's x.
    let swapped = bad.replace(
        r#"{"f":"r","key":"y","value":0},{"f":"r","key":"x","value":1}"#,
        r#"{"f":"r","key":"x","value":1},{"f":"r","key":"y","value":0}"#,
    );
    assert_eq!(verdicts(&swapped), [false, false, false]);
    let twin = bad.replace(r#"{"f":"r","key":"y","value":0}"#, r#"{"f":"r","key":"y","value":1}"#);
    assert_eq!(verdicts(&twin), [true, true, true]);
}

#[test]
fn a_session_must_see_its_own_earlier_writes_from_read_atomic_up() {
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":1,"ops":[{"f":"r","key":"x","value":0}]}"#;
    assert_eq!(verdicts(bad), [true, false, false]);
    let ra = run(bad, RA);
    assert_eq!(ra.anomalies[0].cycle[0].kind, EdgeKind::Session);
    let other_session = bad.replace(r#""id":2,"session":1"#, r#""id":2,"session":2"#);
    assert_eq!(verdicts(&other_session), [true, true, true]);
}

#[test]
fn causality_through_reads_breaks_causal_only() {
    // T1 wrote x; T2 read it and wrote y; T3 read T2's y but x's initial value.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"y","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"y","value":2},{"f":"r","key":"x","value":0}]}"#;
    assert_eq!(verdicts(bad), [true, true, false]);
    let cc = run(bad, CC);
    assert_eq!(kinds(&cc), [AnomalyKind::CausalityViolation]);
    assert_eq!(cc.anomalies[0].cycle.len(), 3, "T1 -wr-> T2 -wr-> T3 -rw-> T1: {:#?}", cc.anomalies[0].cycle);
    let twin = bad.replace(r#"{"f":"r","key":"x","value":0}"#, r#"{"f":"r","key":"x","value":1}"#);
    assert_eq!(verdicts(&twin), [true, true, true]);
}

#[test]
fn causal_cycles_of_forced_orders_are_explained_with_their_chains() {
    // T4 (after T3, which read T1's x) reads T2's x: T1 before T2. T6 (after T5, which read
    // T2's x) reads T1's x: T2 before T1.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"y","value":3}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"y","value":3},{"f":"r","key":"x","value":2}]}
{"id":5,"session":5,"ops":[{"f":"r","key":"x","value":2},{"f":"w","key":"z","value":5}]}
{"id":6,"session":6,"ops":[{"f":"r","key":"z","value":5},{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(verdicts(bad), [true, true, false]);
    let cc = run(bad, CC);
    assert_eq!(kinds(&cc), [AnomalyKind::CausalityViolation]);
    let text: Vec<&str> = cc.anomalies[0].cycle.iter().map(|e| e.explanation.as_str()).collect();
    assert!(text.iter().any(|t| t.contains("T1 causally precedes T4 (T1 -> T3 -> T4)")), "{text:#?}");
    let twin = bad.replace(
        r#"{"f":"r","key":"z","value":5},{"f":"r","key":"x","value":1}"#,
        r#"{"f":"r","key":"z","value":5},{"f":"r","key":"x","value":2}"#,
    );
    assert_eq!(verdicts(&twin), [true, true, true]);
}

#[test]
fn reads_no_level_allows_are_reported_as_the_other_checkers_report_them() {
    let intermediate = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"x","value":2}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(intermediate, RC)), [AnomalyKind::G1b]);
    let fine = intermediate.replace(r#"{"f":"r","key":"x","value":1}"#, r#"{"f":"r","key":"x","value":2}"#);
    assert!(run(&fine, RC).is_valid());
    let aborted = r#"{"id":1,"session":1,"status":"aborted","ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(aborted, RC)), [AnomalyKind::G1a]);
    let garbage = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":7}]}"#;
    assert_eq!(kinds(&run(garbage, CC)), [AnomalyKind::GarbageRead]);
    let own = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"r","key":"x","value":0}]}"#;
    assert_eq!(kinds(&run(own, RC)), [AnomalyKind::InternalInconsistency]);
    let future =
        r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(future, RC)), [AnomalyKind::InternalInconsistency]);
    // A cycle of reads alone (with session order) is circular information flow.
    let flow = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"y","value":2},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"y","value":2}]}"#;
    assert_eq!(kinds(&run(flow, RC)), [AnomalyKind::G1c]);
}

#[test]
fn other_levels_and_shapes_are_refused() {
    let h = v1::read_history(
        format!("{HEADER}\n{}", r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":0}]}"#).as_bytes(),
    )
    .unwrap();
    let err = check(&h, RC).unwrap_err().to_string();
    assert!(err.contains("weak") && err.contains("initial value"), "{err}");
    for level in [IsolationLevel::Serializable, IsolationLevel::RepeatableRead] {
        assert!(matches!(
            check(&h, level),
            Err(CheckError::UnsupportedLevel { checker: CheckerKind::Weak, .. })
        ));
    }
}

/// Random histories of up to six transactions over up to three keys: blind writes (some
/// overwritten in their transaction), reads mostly of installed values, some of aborted or
/// intermediate ones, internal reads mostly consistent.
fn random_history(rng: &mut Rng) -> (Vec<Txn>, u8) {
    let keys = 2 + rng.random_range(0..2) as u8;
    let n = 2 + rng.random_range(0..5) as usize;
    let sessions = 1 + rng.random_range(0..4) as u32;
    let mut next = 1i64;
    let mut txns: Vec<Txn> = (0..n)
        .map(|_| {
            let len = 1 + rng.random_range(0..4) as usize;
            let ops = (0..len)
                .map(|_| {
                    let k = rng.random_range(0..keys as u64) as u8;
                    if rng.random_range(0..2) == 0 {
                        (k, false, -1)
                    } else {
                        next += 1;
                        (k, true, next - 1)
                    }
                })
                .collect();
            Txn {
                session: rng.random_range(0..sessions as u64) as u32,
                committed: rng.random_range(0..16) != 0,
                ops,
            }
        })
        .collect();
    let mut installed: Vec<Vec<i64>> = vec![vec![0]; keys as usize];
    let mut any: Vec<Vec<i64>> = vec![vec![0]; keys as usize];
    for t in &txns {
        for &(k, w, v) in t.ops.iter().filter(|o| o.1) {
            any[k as usize].push(v);
            let last = t.ops.iter().rev().find(|o| o.1 && o.0 == k).map(|o| o.2);
            if w && t.committed && last == Some(v) {
                installed[k as usize].push(v);
            }
        }
    }
    for t in &mut txns {
        let mut own: Vec<(u8, i64)> = Vec::new();
        for op in t.ops.iter_mut() {
            if op.1 {
                own.retain(|e| e.0 != op.0);
                own.push((op.0, op.2));
                continue;
            }
            let mine = own.iter().find(|e| e.0 == op.0).map(|e| e.1);
            let pool = if rng.random_range(0..30) == 0 { &any } else { &installed };
            op.2 = match mine {
                Some(v) if rng.random_range(0..20) != 0 => v,
                _ => {
                    let choices = &pool[op.0 as usize];
                    choices[rng.random_range(0..choices.len() as u64) as usize]
                }
            };
        }
    }
    (txns, keys)
}

/// Random histories executed one transaction after another, every read seeing the key's
/// latest version or, often, an older one (stale snapshots): all committed, all values
/// installed, so the verdicts turn on the order of what each transaction saw, which is where
/// read atomic and causal consistency differ.
fn random_stale(rng: &mut Rng) -> (Vec<Txn>, u8) {
    let keys = 2 + rng.random_range(0..2) as u8;
    let n = 3 + rng.random_range(0..4) as usize;
    let sessions = 2 + rng.random_range(0..3) as u32;
    let mut versions: Vec<Vec<i64>> = vec![vec![0]; keys as usize];
    let mut next = 1i64;
    let mut txns = Vec::with_capacity(n);
    for _ in 0..n {
        let len = 1 + rng.random_range(0..4) as usize;
        let mut ops: Vec<(u8, bool, i64)> = Vec::with_capacity(len);
        for _ in 0..len {
            let k = rng.random_range(0..keys as u64) as u8;
            let own = ops.iter().rev().find(|o| o.0 == k && o.1).map(|o| o.2);
            if rng.random_range(0..2) == 0 {
                next += 1;
                ops.push((k, true, next - 1));
            } else if let Some(v) = own {
                ops.push((k, false, v));
            } else {
                let vs = &versions[k as usize];
                let back = if rng.random_range(0..2) == 0 {
                    0
                } else {
                    rng.random_range(0..vs.len() as u64) as usize
                };
                ops.push((k, false, vs[vs.len() - 1 - back]));
            }
        }
        for k in 0..keys {
            if let Some(v) = ops.iter().rev().find(|o| o.0 == k && o.1).map(|o| o.2) {
                versions[k as usize].push(v);
            }
        }
        txns.push(Txn { session: rng.random_range(0..sessions as u64) as u32, committed: true, ops });
    }
    (txns, keys)
}

/// Brute force from the definitions: some total commit order of the committed transactions
/// (after the initial state) contains session order and reads and satisfies the level's
/// axiom for every read, and every read is explained (its own latest write, else a
/// committed transaction's last write of the object, never its own later write).
fn brute_force(txns: &[Txn], level: IsolationLevel) -> bool {
    const INIT: usize = usize::MAX;
    let committed: Vec<usize> = (0..txns.len()).filter(|&i| txns[i].committed).collect();
    // External reads (txn, op index, key, writer).
    let mut reads: Vec<(usize, usize, u8, usize)> = Vec::new();
    for &t in &committed {
        let mut own: Vec<(u8, i64)> = Vec::new();
        for (i, &(k, w, v)) in txns[t].ops.iter().enumerate() {
            if w {
                own.retain(|e| e.0 != k);
                own.push((k, v));
                continue;
            }
            if let Some(&(_, mine)) = own.iter().find(|e| e.0 == k) {
                if mine != v {
                    return false;
                }
                continue;
            }
            let writer = if v == 0 {
                INIT
            } else {
                let Some(w) =
                    (0..txns.len()).find(|&w| txns[w].ops.iter().any(|o| o.1 && o.0 == k && o.2 == v))
                else {
                    return false;
                };
                let last = txns[w].ops.iter().rev().find(|o| o.1 && o.0 == k).map(|o| o.2);
                if w == t || !txns[w].committed || last != Some(v) {
                    return false;
                }
                w
            };
            reads.push((t, i, k, writer));
        }
    }
    let n = txns.len();
    let mut before = vec![vec![false; n]; n]; // so ∪ wr
    for (a, &ta) in committed.iter().enumerate() {
        for &tb in &committed[a + 1..] {
            if txns[ta].session == txns[tb].session {
                before[ta][tb] = true;
            }
        }
    }
    for &(t, _, _, w) in &reads {
        if w != INIT {
            before[w][t] = true;
        }
    }
    let mut causal = before.clone();
    for m in 0..n {
        for a in 0..n {
            for b in 0..n {
                causal[a][b] |= causal[a][m] && causal[m][b];
            }
        }
    }
    let writes = |t: usize, k: u8| txns[t].ops.iter().any(|o| o.1 && o.0 == k);
    let premise = |t2: usize, t3: usize, at: usize| match level {
        IsolationLevel::ReadCommitted => reads.iter().any(|&(r, i, _, w)| r == t3 && i < at && w == t2),
        IsolationLevel::ReadAtomic => before[t2][t3],
        _ => causal[t2][t3],
    };
    let mut orders = Vec::new();
    oracle::permutations(committed.clone(), &mut orders);
    orders.iter().any(|order| {
        let mut pos = vec![usize::MAX; n];
        order.iter().enumerate().for_each(|(p, &t)| pos[t] = p);
        let rank = |t: usize| if t == INIT { None } else { Some(pos[t]) };
        let contains_base = (0..n).all(|a| (0..n).all(|b| !before[a][b] || pos[a] < pos[b]));
        contains_base
            && reads.iter().all(|&(t3, at, k, t1)| {
                committed.iter().all(|&t2| {
                    t2 == t1
                        || !writes(t2, k)
                        || !premise(t2, t3, at)
                        || matches!(rank(t1), Some(p1) if pos[t2] < p1)
                })
            })
    })
}

#[test]
fn the_weak_checker_agrees_with_brute_force_on_thousands_of_random_histories() {
    let mut valid = [0usize; 3];
    let mut invalid = [0usize; 3];
    // Histories valid at one level and not at the next, so each level's axiom is exercised.
    let mut separating = [0usize; 2];
    for seed in 0..6000u64 {
        let mut rng = isocert_random::seeded(seed ^ 0xC0FFEE);
        let (txns, keys) = if seed < 4000 { random_history(&mut rng) } else { random_stale(&mut rng) };
        let text = oracle::to_v1(&txns, keys);
        let h = v1::read_history(text.as_bytes()).unwrap();
        let mut got = [false; 3];
        for (i, level) in [RC, RA, CC].into_iter().enumerate() {
            let expected = brute_force(&txns, level);
            let report = check(&h, level).unwrap();
            assert_eq!(
                report.is_valid(),
                expected,
                "seed {seed} at {level}:\n{text}\n{:#?}",
                report.anomalies
            );
            got[i] = expected;
            if expected {
                valid[i] += 1;
            } else {
                invalid[i] += 1;
            }
        }
        assert!(got[0] || !got[1], "seed {seed}: read atomic holds where read committed does not");
        assert!(got[1] || !got[2], "seed {seed}: causal holds where read atomic does not");
        separating[0] += (got[0] && !got[1]) as usize;
        separating[1] += (got[1] && !got[2]) as usize;
    }
    for i in 0..3 {
        assert!(valid[i] > 300 && invalid[i] > 300, "valid {valid:?} invalid {invalid:?}");
    }
    assert!(
        separating[0] > 300 && separating[1] > 50,
        "separating histories {separating:?}, valid {valid:?}"
    );
}
