//! Cobra/PolySI: anomalies with valid twins, certain vs chosen edges, and the brute-force
//! oracle (every commit order with snapshots) agreeing on thousands of random histories
//! with blind writes, where the version order is not implied by the reads.

use isocert_history::{v1, Certificate};
use isocert_random::rand::Rng as _;

use super::check;
use crate::mtc::tests::oracle::{self, Rng, Txn};
use crate::{AnomalyKind, CheckError, CheckerKind, IsolationLevel, Report};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;
const HEADER: &str =
    r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}"#;

fn run(body: &str, level: IsolationLevel) -> Report {
    let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).expect("test history parses");
    let checker = if level == SER { CheckerKind::Cobra } else { CheckerKind::Polysi };
    check(&h, level, checker, None).expect("sat checker runs")
}

#[test]
fn blind_writes_need_an_order_search_and_pruning_refutes_a_bad_one() {
    // T1 and T2 blindly write x and y; T3 reads x from T1 and y from T2, so T2's write of x
    // came before T1's and T1's write of y before T2's: no single order explains it.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"y","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2},{"f":"w","key":"y","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":1},{"f":"r","key":"y","value":2}]}"#;
    // Pruning sees it: T2 before T1 on x (else T3's read of x closes a cycle), T1 before T2
    // on y, and those two forced orders make a cycle.
    let ser = run(bad, SER);
    assert_eq!(ser.anomalies.len(), 1, "{:#?}", ser.anomalies);
    let a = &ser.anomalies[0];
    assert!(a.explanation.contains("certain and forced edges"), "{}", a.explanation);
    assert!(
        a.cycle
            .iter()
            .all(|e| e.explanation.contains("(forced: the other order of these writes closes a cycle)")),
        "{:#?}",
        a.cycle
    );
    assert!(!run(bad, SI).is_valid());
    // Twin: T3 reads both from T2, which wrote last.
    let good = bad.replace(r#"{"f":"r","key":"x","value":1}"#, r#"{"f":"r","key":"x","value":2}"#);
    assert!(run(&good, SER).is_valid());
    assert!(run(&good, SI).is_valid());
}

#[test]
fn write_skew_with_blind_writes_is_serializability_only() {
    let skew = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}"#;
    assert!(run(skew, SI).is_valid());
    let ser = run(skew, SER);
    assert_eq!(ser.anomalies.iter().map(|a| a.kind).collect::<Vec<_>>(), [AnomalyKind::G2Item]);
    assert!(ser.anomalies[0].cycle.iter().all(|e| e.explanation.ends_with("(certain)")));
}

#[test]
fn levels_and_shapes_are_checked() {
    let h = v1::read_history(
        format!("{HEADER}\n{}", r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":0}]}"#).as_bytes(),
    )
    .unwrap();
    assert!(check(&h, SER, CheckerKind::Cobra, None).unwrap_err().to_string().contains("initial value"));
    assert!(matches!(check(&h, SI, CheckerKind::Cobra, None), Err(CheckError::UnsupportedLevel { .. })));
    assert!(matches!(check(&h, SER, CheckerKind::Polysi, None), Err(CheckError::UnsupportedLevel { .. })));
}

/// Random histories of up to six transactions: reads and blind or read-modify writes,
/// read values drawn from the key's values, internal reads mostly consistent.
fn random_general(rng: &mut Rng) -> (Vec<Txn>, u8) {
    let keys = 2 + rng.random_range(0..2) as u8;
    let n = 2 + rng.random_range(0..5) as usize;
    let sessions = 1 + rng.random_range(0..3) as u32;
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
                committed: rng.random_range(0..8) != 0,
                ops,
            }
        })
        .collect();
    let mut pool: Vec<Vec<i64>> = vec![vec![0]; keys as usize];
    for t in &txns {
        let mut last: Vec<(u8, i64)> = Vec::new();
        for &(k, w, v) in &t.ops {
            if w {
                last.retain(|e| e.0 != k);
                last.push((k, v));
            }
        }
        for (k, v) in last {
            pool[k as usize].push(v);
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
            op.2 = match mine {
                Some(v) if rng.random_range(0..10) != 0 => v,
                _ => {
                    let choices = &pool[op.0 as usize];
                    choices[rng.random_range(0..choices.len() as u64) as usize]
                }
            };
            own.retain(|e| e.0 != op.0);
            own.push((op.0, op.2));
        }
    }
    (txns, keys)
}

#[test]
fn sat_checkers_agree_with_brute_force_on_thousands_of_random_histories() {
    let (mut valid, mut invalid) = ([0usize; 2], [0usize; 2]);
    // How the invalid verdicts were reached: the solver proved it, or pruning did.
    let (mut proved, mut forced) = ([0usize; 2], [0usize; 2]);
    for seed in 0..3000u64 {
        let mut rng = isocert_random::seeded(seed ^ 0x5A5A);
        let (txns, keys) = random_general(&mut rng);
        let text = oracle::to_v1(&txns, keys);
        let h = v1::read_history(text.as_bytes()).unwrap();
        for (i, (level, checker, si)) in
            [(SER, CheckerKind::Cobra, false), (SI, CheckerKind::Polysi, true)].into_iter().enumerate()
        {
            let expected = oracle::brute_force(&txns, keys, si);
            let got = check(&h, level, checker, None).unwrap();
            assert_eq!(got.is_valid(), expected, "seed {seed} at {level}:\n{text}\n{:#?}", got.anomalies);
            if expected {
                valid[i] += 1;
                let order = got.inferred_version_order.clone().expect("a valid verdict carries its order");
                if !si {
                    // The order found is a certificate Emme accepts.
                    let cert = Certificate { version_order: Some(order), ..Certificate::default() };
                    let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
                    let emme = crate::check(&h, &cert, SER, CheckerKind::Emme, &oracle).unwrap();
                    assert!(emme.is_valid(), "seed {seed}:\n{text}\n{:#?}", emme.anomalies);
                }
            } else {
                invalid[i] += 1;
                let by_solver = got.notes.iter().any(|n| n.contains("found no acyclic order"));
                if by_solver {
                    // The proof is explained by a minimal core: its pairs and cycles, the
                    // cycle shown among them with at least one edge the solver chose.
                    let a = &got.anomalies[got.anomalies.len() - 1];
                    assert!(
                        a.explanation.contains("minimal unsatisfiable core"),
                        "seed {seed}: {}",
                        a.explanation
                    );
                    assert!(
                        a.cycle.iter().any(|e| e.explanation.contains("chosen by the solver")),
                        "seed {seed}"
                    );
                }
                proved[i] += by_solver as usize;
                forced[i] +=
                    got.anomalies.iter().flat_map(|a| &a.cycle).any(|e| e.explanation.contains("(forced"))
                        as usize;
            }
        }
    }
    for i in 0..2 {
        assert!(valid[i] > 300 && invalid[i] > 300, "valid {valid:?} invalid {invalid:?}");
        assert!(proved[i] > 0 && forced[i] > 0, "solver proofs {proved:?}, forced cycles {forced:?}");
    }
}

#[test]
fn a_given_partial_version_order_is_fixed_and_the_rest_searched() {
    // T3 then T4 (one session) read x = 2, then x = 1: T2's write came before T1's. T5's
    // blind write of x is listed nowhere below, so the search places it.
    let body = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":2}]}
{"id":4,"session":3,"ops":[{"f":"r","key":"x","value":1}]}
{"id":5,"session":4,"ops":[{"f":"w","key":"x","value":5}]}"#;
    let with = |writers: &str, level: IsolationLevel| {
        let mut h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).unwrap();
        let cert = v1::read_certificate(
            format!(r#"{{"version_order":[{{"key":"x","writers":{writers}}}]}}"#).as_bytes(),
            &mut h,
        )
        .unwrap();
        let checker = if level == SER { CheckerKind::Cobra } else { CheckerKind::Polysi };
        check(&h, level, checker, cert.version_order.as_ref()).unwrap()
    };
    for level in [SER, SI] {
        assert!(run(body, level).is_valid(), "without a certificate the search finds T2, T1");
        let good = with("[2, 1]", level);
        assert!(good.is_valid(), "{level}: {:#?}", good.anomalies);
        assert!(good.notes.iter().any(|n| n.contains("fixed 1 order(s)")), "{:?}", good.notes);
        let order = good.inferred_version_order.as_ref().expect("a valid verdict carries its order");
        assert_eq!(order.values().next().map(Vec::len), Some(3), "T5 is placed too: {order:?}");
        let bad = with("[1, 2]", level);
        assert_eq!(bad.anomalies.len(), 1, "{level}: {:#?}", bad.anomalies);
        assert!(
            bad.anomalies[0].cycle.iter().any(|e| e
                .explanation
                .ends_with("(given by the certificate's version order, or shown by the list reads)")),
            "{:#?}",
            bad.anomalies[0].cycle
        );
    }
}

#[test]
fn given_partial_orders_agree_with_brute_force_on_random_histories() {
    let names = ["x", "y", "z"];
    let (mut valid, mut invalid) = (0usize, 0usize);
    // Verdicts the given order changed: valid without it, invalid with it.
    let mut refuted_by_given = 0usize;
    for seed in 0..1500u64 {
        let mut rng = isocert_random::seeded(seed ^ 0x6177);
        let (txns, keys) = random_general(&mut rng);
        // Per key, a random subset of its committed writers in a random order.
        let mut listed: Vec<Vec<usize>> = Vec::new();
        for k in 0..keys {
            let mut ws: Vec<usize> = (0..txns.len())
                .filter(|&t| txns[t].committed && txns[t].ops.iter().any(|o| o.1 && o.0 == k))
                .collect();
            ws.retain(|_| rng.random_range(0..3) != 0);
            for i in (1..ws.len()).rev() {
                ws.swap(i, rng.random_range(0..=i as u64) as usize);
            }
            listed.push(ws);
        }
        let text = oracle::to_v1(&txns, keys);
        let mut h = v1::read_history(text.as_bytes()).unwrap();
        let entries: Vec<String> = (0..keys as usize)
            .filter(|&k| !listed[k].is_empty())
            .map(|k| {
                let ids: Vec<String> = listed[k].iter().map(|t| (t + 1).to_string()).collect();
                format!(r#"{{"key":"{}","writers":[{}]}}"#, names[k], ids.join(","))
            })
            .collect();
        let cert_text = format!(r#"{{"version_order":[{}]}}"#, entries.join(","));
        let cert = v1::read_certificate(cert_text.as_bytes(), &mut h).unwrap();
        let respects = |perm: &[usize]| {
            let pos = |t: usize| perm.iter().position(|&x| x == t);
            listed.iter().all(|ws| ws.windows(2).all(|w| pos(w[0]) < pos(w[1])))
        };
        for (level, checker, si) in [(SER, CheckerKind::Cobra, false), (SI, CheckerKind::Polysi, true)] {
            let expected = oracle::brute_force_where(&txns, keys, si, respects);
            let got = check(&h, level, checker, cert.version_order.as_ref()).unwrap();
            assert_eq!(
                got.is_valid(),
                expected,
                "seed {seed} at {level}:\n{text}\n{cert_text}\n{:#?}",
                got.anomalies
            );
            if expected {
                valid += 1;
            } else {
                invalid += 1;
                refuted_by_given += oracle::brute_force(&txns, keys, si) as usize;
            }
        }
    }
    assert!(valid > 300 && invalid > 300, "valid {valid}, invalid {invalid}");
    assert!(
        refuted_by_given > 100,
        "the given orders refuted only {refuted_by_given} otherwise valid histories"
    );
}

/// The simple path pruning is compared with: every known order of two writers is kept as
/// its own edges (no closure, no covers), and each open pair's two orders are tried by
/// building the whole graph with that order's edges and sorting it topologically, until a
/// round forces nothing. `None` when the known edges close a forbidden cycle; else the
/// pairs left open, as `(obj, a, b)` with `a < b`.
fn naive_prune(
    h: &isocert_history::History,
    si: bool,
) -> Option<Vec<(isocert_history::ObjId, isocert_history::TxnId, isocert_history::TxnId)>> {
    use super::polygraph::{forbidden_graph, Origin, Polygraph};
    use super::reach::topological_order;
    let kv = isocert_history::KvHistory::from_history(h).unwrap();
    let inf = crate::mtc::infer(&kv, &crate::items::WriteSites::build(&kv));
    let pg = Polygraph::build(&kv, &inf);
    let mut known: Vec<(isocert_history::ObjId, isocert_history::TxnId, isocert_history::TxnId)> = Vec::new();
    for (&(obj, w), kids) in &inf.children {
        if let isocert_history::Writer::Txn(a) = w {
            known.extend(kids.iter().map(|&b| (obj, a, b)));
        }
    }
    let rmw = known.clone();
    let with = |orders: &[(isocert_history::ObjId, isocert_history::TxnId, isocert_history::TxnId)]| {
        let (mut deps, mut anti) = (pg.deps.clone(), pg.anti.clone());
        for &(obj, a, b) in orders {
            pg.order_edges(obj, a, b, Origin::Forced, |e| {
                if e.2.dep.kind == crate::EdgeKind::Ww {
                    deps.push(e)
                } else {
                    anti.push(e)
                }
            });
        }
        topological_order(&forbidden_graph(pg.n, &deps, &anti, si)).is_none()
    };
    loop {
        let extra: Vec<_> = known.iter().copied().filter(|o| !rmw.contains(o)).collect();
        if with(&extra) {
            return None;
        }
        let mut open = Vec::new();
        let mut forced = Vec::new();
        for key in &pg.keys {
            for (i, &a) in key.writers.iter().enumerate() {
                for &b in &key.writers[i + 1..] {
                    if known.contains(&(key.obj, a, b)) || known.contains(&(key.obj, b, a)) {
                        continue;
                    }
                    let try_order = |first, second| {
                        let mut orders = extra.clone();
                        orders.push((key.obj, first, second));
                        with(&orders)
                    };
                    match (try_order(a, b), try_order(b, a)) {
                        (true, false) => forced.push((key.obj, b, a)),
                        (false, true) => forced.push((key.obj, a, b)),
                        _ => open.push((key.obj, a, b)),
                    }
                }
            }
        }
        if forced.is_empty() {
            open.sort_unstable();
            return Some(open);
        }
        known.extend(forced);
    }
}

#[test]
fn pruning_by_chains_and_by_sweeps_agree_with_a_naive_fixpoint() {
    use super::polygraph::{forbidden_graph, Polygraph};
    use super::prune::{prune, Engine};
    use super::reach::topological_order;
    let (mut cyclic, mut open_left, mut forced_some) = (0usize, 0usize, 0usize);
    for seed in 0..1500u64 {
        let mut rng = isocert_random::seeded(seed ^ 0x7072);
        let (txns, keys) = random_general(&mut rng);
        let text = oracle::to_v1(&txns, keys);
        let h = v1::read_history(text.as_bytes()).unwrap();
        let kv = isocert_history::KvHistory::from_history(&h).unwrap();
        let inf = crate::mtc::infer(&kv, &crate::items::WriteSites::build(&kv));
        for si in [false, true] {
            let run = |engine| {
                let mut pg = Polygraph::build(&kv, &inf);
                let pruned = prune(&mut pg, si, 64, engine);
                // The last round's orders may close a cycle no later round looks for.
                let cyclic = pruned.cycle.is_some()
                    || topological_order(&forbidden_graph(pg.n, &pg.deps, &pg.anti, si)).is_none();
                let mut open: Vec<_> = pg.pairs.iter().map(|p| (p.obj, p.a, p.b)).collect();
                open.sort_unstable();
                if cyclic {
                    open.clear();
                }
                (cyclic, open, pruned.forced)
            };
            let chains = run(Engine::Auto);
            let sweeps = run(Engine::Batched);
            assert_eq!(chains, sweeps, "seed {seed}, si {si}:\n{text}");
            match naive_prune(&h, si) {
                None => {
                    assert!(chains.0, "seed {seed}, si {si}: the naive pruning met a cycle:\n{text}");
                    cyclic += 1;
                }
                Some(open) => {
                    assert!(!chains.0, "seed {seed}, si {si}: only pruning met a cycle:\n{text}");
                    assert_eq!(chains.1, open, "seed {seed}, si {si}:\n{text}");
                    open_left += !open.is_empty() as usize;
                    forced_some += (chains.2 > 0) as usize;
                }
            }
        }
    }
    assert!(
        cyclic > 100 && open_left > 100 && forced_some > 100,
        "cyclic {cyclic}, open pairs left {open_left}, some forced {forced_some}"
    );
}
