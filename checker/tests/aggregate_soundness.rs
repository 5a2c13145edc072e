//! Emme's aggregate dependencies (checker/src/emme/dependence.rs) against brute force: on
//! thousands of small random histories of aggregate reads and writes, whenever Emme says
//! serializable, some serial order that keeps the certificate's version order must give
//! every aggregate the result it returned. (Emme may reject a history some order would
//! replay: its dependencies are sufficient, not necessary.) Both verdicts must occur often.

mod common;

use common::permutations;
use isocert_checker::{check, CheckerKind, IsolationLevel};
use isocert_history::v1;
use isocert_oracle::Interpreter;
use isocert_random::rand::seq::SliceRandom;
use isocert_random::rand::Rng;
use isocert_random::SeededRng;

const FUNCTIONS: [&str; 4] = ["min", "max", "count", "sum"];

/// An aggregate read `function(value) WHERE value >= bound` and what its version set saw
/// (per key, the index into that key's version order, 0 = initial).
#[derive(Clone, Debug)]
struct Aggregate {
    function: &'static str,
    bound: i64,
    seen: Vec<usize>,
    result: Option<i64>,
}

/// One committed transaction: its aggregates first, then its writes `(key, value)`.
#[derive(Clone, Debug)]
struct Txn {
    reads: Vec<Aggregate>,
    writes: Vec<(usize, i64)>,
}

/// `function` over the matched values, SQL style (NULL over nothing except count).
fn evaluate(function: &str, bound: i64, values: impl Iterator<Item = i64>) -> Option<i64> {
    let matched: Vec<i64> = values.filter(|&v| v >= bound).collect();
    match function {
        "count" => Some(matched.len() as i64),
        "sum" => (!matched.is_empty()).then(|| matched.iter().sum()),
        "min" => matched.iter().copied().min(),
        _ => matched.iter().copied().max(),
    }
}

/// A random history over `keys` keys (initial value 0) and a version order per key; each
/// aggregate's version set takes a random version of every key older than the reader's
/// own (it reads before it writes), and
/// its result is the aggregate over that set (so results never contradict version sets).
fn generate(rng: &mut SeededRng) -> (Vec<Txn>, Vec<Vec<usize>>) {
    let keys = rng.random_range(1..=3usize);
    let n = rng.random_range(2..=5usize);
    let mut txns: Vec<Txn> = Vec::new();
    let mut used: Vec<Vec<i64>> = vec![vec![0]; keys];
    for _ in 0..n {
        let mut writes = Vec::new();
        for (key, values) in used.iter_mut().enumerate() {
            if rng.random_bool(0.5) {
                let value = loop {
                    let v = rng.random_range(1..=6i64);
                    if !values.contains(&v) {
                        break v;
                    }
                    if values.len() > 6 {
                        break 100 + values.len() as i64;
                    }
                };
                values.push(value);
                writes.push((key, value));
            }
        }
        txns.push(Txn { reads: Vec::new(), writes });
    }
    let mut order: Vec<Vec<usize>> = Vec::new();
    for key in 0..keys {
        let mut writers: Vec<usize> = (0..n).filter(|&t| txns[t].writes.iter().any(|w| w.0 == key)).collect();
        writers.shuffle(rng);
        order.push(writers);
    }
    let value_at = |txns: &[Txn], key: usize, index: usize| -> i64 {
        if index == 0 {
            0
        } else {
            txns[order[key][index - 1]].writes.iter().find(|w| w.0 == key).expect("writer").1
        }
    };
    for t in 0..n {
        for _ in 0..rng.random_range(1..=2) {
            let mut seen = Vec::new();
            for writers in &order {
                // A read before the transaction's own write sees an earlier version.
                let newest = writers.iter().position(|&w| w == t).unwrap_or(writers.len());
                seen.push(rng.random_range(0..=newest));
            }
            let function = FUNCTIONS[rng.random_range(0..FUNCTIONS.len())];
            let bound = rng.random_range(0..=6i64);
            let result =
                evaluate(function, bound, seen.iter().enumerate().map(|(k, &i)| value_at(&txns, k, i)));
            txns[t].reads.push(Aggregate { function, bound, seen, result });
        }
    }
    (txns, order)
}

fn history_text(txns: &[Txn], keys: usize) -> String {
    let initial: Vec<String> = (0..keys).map(|k| format!("{{\"key\":{k},\"value\":0}}")).collect();
    let mut out =
        format!("{{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{}]}}\n", initial.join(","));
    for (t, txn) in txns.iter().enumerate() {
        let mut ops: Vec<String> = txn
            .reads
            .iter()
            .map(|a| {
                let result = a.result.map_or("null".to_string(), |r| r.to_string());
                format!(
                    "{{\"f\":\"aggregate\",\"table\":\"kv\",\"where\":\"value >= {}\",\"function\":\"{}\",\"column\":\"value\",\"result\":{result}}}",
                    a.bound, a.function
                )
            })
            .collect();
        ops.extend(txn.writes.iter().map(|(k, v)| format!("{{\"f\":\"w\",\"key\":{k},\"value\":{v}}}")));
        out.push_str(&format!("{{\"id\":{},\"session\":{},\"ops\":[{}]}}\n", t + 1, t + 1, ops.join(",")));
    }
    out
}

fn certificate_text(txns: &[Txn], order: &[Vec<usize>]) -> String {
    let entries: Vec<String> = order
        .iter()
        .enumerate()
        .map(|(k, ws)| {
            let ws: Vec<String> = ws.iter().map(|t| (t + 1).to_string()).collect();
            format!("{{\"key\":{k},\"writers\":[{}]}}", ws.join(","))
        })
        .collect();
    let mut sets = Vec::new();
    for (t, txn) in txns.iter().enumerate() {
        for (op, a) in txn.reads.iter().enumerate() {
            let versions: Vec<String> = a
                .seen
                .iter()
                .enumerate()
                .map(|(k, &i)| {
                    let writer = if i == 0 { "null".to_string() } else { (order[k][i - 1] + 1).to_string() };
                    format!("{{\"key\":{k},\"writer\":{writer}}}")
                })
                .collect();
            sets.push(format!("{{\"txn\":{},\"op\":{op},\"versions\":[{}]}}", t + 1, versions.join(",")));
        }
    }
    format!(
        "{{\"format\":\"isocert-certificate\",\"version\":1,\"version_order\":[{}],\"version_sets\":[{}]}}",
        entries.join(","),
        sets.join(",")
    )
}

/// Whether some serial order keeping every key's version order replays every aggregate.
fn some_order_replays(txns: &[Txn], order: &[Vec<usize>], keys: usize) -> bool {
    let mut p: Vec<usize> = (0..txns.len()).collect();
    let mut found = false;
    permutations(&mut p, 0, &mut |serial| {
        if found {
            return;
        }
        let rank = |t: usize| serial.iter().position(|&u| u == t).expect("in the order");
        if order.iter().any(|ws| ws.windows(2).any(|w| rank(w[0]) > rank(w[1]))) {
            return;
        }
        let mut state = vec![0i64; keys];
        for &t in serial {
            for a in &txns[t].reads {
                if evaluate(a.function, a.bound, state.iter().copied()) != a.result {
                    return;
                }
            }
            for &(k, v) in &txns[t].writes {
                state[k] = v;
            }
        }
        found = true;
    });
    found
}

#[test]
fn emme_accepts_aggregates_only_when_some_serial_order_replays_them() {
    let mut rng = isocert_random::seeded(20261124);
    let (mut accepted, mut rejected, mut replayable_rejected) = (0, 0, 0);
    for case in 0..4_000 {
        let (txns, order) = generate(&mut rng);
        let keys = order.len();
        let history = history_text(&txns, keys);
        let cert = certificate_text(&txns, &order);
        let mut h = v1::read_history(history.as_bytes()).expect("generated history reads");
        let c = v1::read_certificate(cert.as_bytes(), &mut h).expect("generated certificate reads");
        let oracle = Interpreter::new(&h).expect("predicates compile");
        let report = check(&h, &c, IsolationLevel::Serializable, CheckerKind::Emme, &oracle).expect("checks");
        let replays = some_order_replays(&txns, &order, keys);
        if report.is_valid() {
            accepted += 1;
            assert!(replays, "case {case}: Emme accepted, but no serial order replays it:\n{history}{cert}");
        } else {
            rejected += 1;
            replayable_rejected += usize::from(replays);
        }
    }
    assert!(accepted > 300 && rejected > 300, "{accepted} accepted, {rejected} rejected");
    // Emme is allowed to be stricter than replay; say how much, so a regression that
    // rejects everything shows.
    assert!(replayable_rejected < rejected, "{replayable_rejected} of {rejected} rejections replay");
}
