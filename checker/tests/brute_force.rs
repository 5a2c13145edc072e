//! Emme and Enne against a naive checker written here from Adya's definitions, on
//! thousands of small random key-value histories with version-order certificates.
//!
//! The naive checker builds the direct serialization graph of the committed transactions
//! (write-dependencies ww along the version order, read-dependencies wr from each read's
//! writer, anti-dependencies rw from a read to the writer of the next version) and decides
//! each level by brute force over the graph: PL-1 forbids G0 (a ww cycle); PL-2 also G1a
//! (a read of an aborted write), G1b (a read of a value a committed transaction later
//! overwrote itself) and G1c (a ww/wr cycle); PL-2.99 and PL-3 also G2-item (any cycle).
//! Every level's verdict of Emme must match. Enne replays the certificate's serialization
//! order and ignores its version order (docs/CHECKING.md), so it is compared with a naive
//! replay of the same order; for serializable histories it is given an order of the graph,
//! which must replay.

mod common;

use common::permutations;
use isocert_checker::{check, CheckerKind, IsolationLevel};
use isocert_history::v1;
use isocert_oracle::Interpreter;
use isocert_random::rand::seq::SliceRandom;
use isocert_random::rand::Rng;
use isocert_random::SeededRng;

/// One generated transaction: committed or not, and its operations `(write, key, value)`.
#[derive(Clone, Debug)]
struct Txn {
    committed: bool,
    ops: Vec<(bool, u8, i64)>,
}

/// A random history over `keys` keys (initial value 0 each) and a random version order
/// per key over its committed writers. Reads see the initial value, a committed write
/// (its final or, rarely, an intermediate value), or, rarely, an aborted write; a
/// transaction never reads a key after writing it (no internal reads).
fn generate(rng: &mut SeededRng) -> (Vec<Txn>, Vec<Vec<usize>>, u8) {
    let keys = rng.random_range(1..=3u8);
    let n = rng.random_range(1..=5usize);
    let mut txns: Vec<Txn> = Vec::new();
    for t in 0..n {
        let mut ops = Vec::new();
        let mut written = Vec::new();
        for i in 0..rng.random_range(1..=4) {
            let key = rng.random_range(0..keys);
            if rng.random_bool(0.5) {
                ops.push((true, key, ((t + 1) * 100 + i) as i64));
                written.push(key);
            } else if !written.contains(&key) {
                ops.push((false, key, 0));
            }
        }
        txns.push(Txn { committed: rng.random_bool(0.85), ops });
    }
    // Values each key can show: 0 (initial) and every write.
    for t in 0..n {
        for i in 0..txns[t].ops.len() {
            let (write, key, _) = txns[t].ops[i];
            if write {
                continue;
            }
            let mut choices: Vec<i64> = vec![0];
            for (u, other) in txns.iter().enumerate() {
                if u == t {
                    continue;
                }
                let writes: Vec<i64> = other.ops.iter().filter(|o| o.0 && o.1 == key).map(|o| o.2).collect();
                if let Some(last) = writes.last() {
                    if other.committed || rng.random_bool(0.1) {
                        choices.push(*last);
                    }
                }
                if writes.len() > 1 && rng.random_bool(0.2) {
                    choices.push(writes[0]);
                }
            }
            txns[t].ops[i].2 = choices[rng.random_range(0..choices.len())];
        }
    }
    let mut order: Vec<Vec<usize>> = Vec::new();
    for key in 0..keys {
        let mut writers: Vec<usize> =
            (0..n).filter(|&t| txns[t].committed && txns[t].ops.iter().any(|o| o.0 && o.1 == key)).collect();
        writers.shuffle(rng);
        order.push(writers);
    }
    (txns, order, keys)
}

fn history_text(txns: &[Txn], keys: u8) -> String {
    let initial: Vec<String> = (0..keys).map(|k| format!("{{\"key\":{k},\"value\":0}}")).collect();
    let mut out =
        format!("{{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{}]}}\n", initial.join(","));
    for (t, txn) in txns.iter().enumerate() {
        let ops: Vec<String> = txn
            .ops
            .iter()
            .map(|(w, k, v)| {
                format!("{{\"f\":\"{}\",\"key\":{k},\"value\":{v}}}", if *w { "w" } else { "r" })
            })
            .collect();
        let status = if txn.committed { "committed" } else { "aborted" };
        out.push_str(&format!(
            "{{\"id\":{},\"session\":{},\"status\":\"{status}\",\"ops\":[{}]}}\n",
            t + 1,
            t + 1,
            ops.join(",")
        ));
    }
    out
}

fn certificate_text(order: &[Vec<usize>], serial: Option<&[usize]>) -> String {
    let entries: Vec<String> = order
        .iter()
        .enumerate()
        .map(|(k, ws)| {
            let ws: Vec<String> = ws.iter().map(|t| (t + 1).to_string()).collect();
            format!("{{\"key\":{k},\"writers\":[{}]}}", ws.join(","))
        })
        .collect();
    let serial = serial.map_or(String::new(), |s| {
        let s: Vec<String> = s.iter().map(|t| (t + 1).to_string()).collect();
        format!(",\"serialization_order\":[{}]", s.join(","))
    });
    format!(
        "{{\"format\":\"isocert-certificate\",\"version\":1,\"version_order\":[{}]{serial}}}",
        entries.join(",")
    )
}

/// Edge kinds of the naive graph.
const WW: u8 = 1;
const WR: u8 = 2;
const RW: u8 = 4;

/// The naive verdicts: which of PL-1, PL-2, PL-2.99 (= PL-3 here) the history satisfies.
struct Naive {
    g0: bool,
    g1: bool,
    g2: bool,
}

fn naive(txns: &[Txn], order: &[Vec<usize>]) -> Naive {
    let n = txns.len();
    // Node n is the initial transaction.
    let mut edges: Vec<Vec<(usize, u8)>> = vec![Vec::new(); n + 1];
    let add = |from: usize, to: usize, kind: u8, edges: &mut Vec<Vec<(usize, u8)>>| {
        if from != to {
            edges[from].push((to, kind));
        }
    };
    let final_write = |t: usize, key: u8| txns[t].ops.iter().rev().find(|o| o.0 && o.1 == key).map(|o| o.2);
    let mut g1ab = false;
    for (key, writers) in order.iter().enumerate() {
        let chain: Vec<usize> = std::iter::once(n).chain(writers.iter().copied()).collect();
        for w in chain.windows(2) {
            add(w[0], w[1], WW, &mut edges);
        }
        for (r, txn) in txns.iter().enumerate() {
            if !txn.committed {
                continue;
            }
            for &(write, k, value) in &txn.ops {
                if write || usize::from(k) != key {
                    continue;
                }
                // Who wrote the value read.
                let writer = if value == 0 {
                    Some(n)
                } else {
                    (0..n).find(|&w| txns[w].ops.iter().any(|o| o.0 && o.1 == k && o.2 == value))
                };
                let Some(w) = writer else { continue };
                if w != n && !txns[w].committed {
                    g1ab = true; // G1a
                    continue;
                }
                if w != n && final_write(w, k) != Some(value) {
                    g1ab = true; // G1b
                    continue;
                }
                add(w, r, WR, &mut edges);
                let at = chain.iter().position(|&x| x == w).expect("a committed writer is in the order");
                if let Some(&next) = chain.get(at + 1) {
                    add(r, next, RW, &mut edges);
                }
            }
        }
    }
    let cycle = |allowed: u8| has_cycle(&edges, allowed);
    Naive { g0: cycle(WW), g1: g1ab || cycle(WW | WR), g2: cycle(WW | WR | RW) }
}

/// Whether the graph restricted to edges of the `allowed` kinds has a cycle (DFS colours).
fn has_cycle(edges: &[Vec<(usize, u8)>], allowed: u8) -> bool {
    fn visit(v: usize, edges: &[Vec<(usize, u8)>], allowed: u8, colour: &mut [u8]) -> bool {
        colour[v] = 1;
        for &(w, kind) in &edges[v] {
            if kind & allowed == 0 {
                continue;
            }
            if colour[w] == 1 || (colour[w] == 0 && visit(w, edges, allowed, colour)) {
                return true;
            }
        }
        colour[v] = 2;
        false
    }
    let mut colour = vec![0u8; edges.len()];
    (0..edges.len()).any(|v| colour[v] == 0 && visit(v, edges, allowed, &mut colour))
}

fn verdict(history: &str, cert: &str, level: IsolationLevel, checker: CheckerKind) -> bool {
    let mut h = v1::read_history(history.as_bytes()).expect("generated history reads");
    let c = v1::read_certificate(cert.as_bytes(), &mut h).expect("generated certificate reads");
    let oracle = Interpreter::new(&h).expect("no predicates");
    check(&h, &c, level, checker, &oracle).expect("checks").is_valid()
}

#[test]
fn emme_agrees_with_the_definitions_at_every_level() {
    let mut rng = isocert_random::seeded(20261124);
    let mut counts = [0usize; 4];
    for case in 0..3_000 {
        let (txns, order, keys) = generate(&mut rng);
        let history = history_text(&txns, keys);
        let cert = certificate_text(&order, None);
        let want = naive(&txns, &order);
        for (i, (level, valid)) in [
            (IsolationLevel::ReadUncommitted, !want.g0),
            (IsolationLevel::ReadCommitted, !want.g0 && !want.g1),
            (IsolationLevel::RepeatableRead, !want.g0 && !want.g1 && !want.g2),
            (IsolationLevel::Serializable, !want.g0 && !want.g1 && !want.g2),
        ]
        .into_iter()
        .enumerate()
        {
            let got = verdict(&history, &cert, level, CheckerKind::Emme);
            assert_eq!(got, valid, "case {case} at {level:?}:\n{history}{cert}");
            counts[i] += usize::from(!valid);
        }
    }
    // The generator reaches every class (else the comparison proves little).
    assert!(counts.iter().all(|&c| c > 50), "rejections per level: {counts:?}");
}

#[test]
fn enne_agrees_with_the_definitions_at_serializable() {
    let mut rng = isocert_random::seeded(77);
    let (mut valid_seen, mut invalid_seen) = (0, 0);
    for case in 0..2_000 {
        let (txns, order, keys) = generate(&mut rng);
        let want = naive(&txns, &order);
        let serializable = !want.g0 && !want.g1 && !want.g2;
        // Enne replays a serialization order: give it a topological order of the graph when
        // there is one (the naive graph's committed nodes), else commit order.
        let committed: Vec<usize> = (0..txns.len()).filter(|&t| txns[t].committed).collect();
        let serial = topological(&txns, &order).unwrap_or(committed);
        let history = history_text(&txns, keys);
        let cert = certificate_text(&order, Some(&serial));
        let got = verdict(&history, &cert, IsolationLevel::Serializable, CheckerKind::Enne);
        assert_eq!(got, replays(&txns, &serial), "case {case}:\n{history}{cert}");
        if serializable {
            assert!(got, "case {case}: an order of an acyclic graph replays:\n{history}{cert}");
        }
        if serializable {
            valid_seen += 1;
        } else {
            invalid_seen += 1;
        }
    }
    assert!(valid_seen > 100 && invalid_seen > 100, "{valid_seen} valid, {invalid_seen} invalid");
}

/// Whether running the committed transactions serially in `serial` order, from the
/// initial values, gives every read the value it returned.
fn replays(txns: &[Txn], serial: &[usize]) -> bool {
    let mut current: std::collections::HashMap<u8, i64> = std::collections::HashMap::new();
    for &t in serial {
        for &(write, key, value) in &txns[t].ops {
            if write {
                current.insert(key, value);
            } else if current.get(&key).copied().unwrap_or(0) != value {
                return false;
            }
        }
    }
    true
}

/// A topological order of the committed transactions in the naive graph, if acyclic.
fn topological(txns: &[Txn], order: &[Vec<usize>]) -> Option<Vec<usize>> {
    let n = txns.len();
    let want = naive(txns, order);
    if want.g0 || want.g1 || want.g2 {
        return None;
    }
    // Rebuild the edges (the naive checker keeps them private to its verdict).
    let mut before: Vec<Vec<usize>> = vec![Vec::new(); n];
    for writers in order {
        for w in writers.windows(2) {
            before[w[1]].push(w[0]);
        }
    }
    for (r, txn) in txns.iter().enumerate() {
        if !txn.committed {
            continue;
        }
        for &(write, k, value) in &txn.ops {
            if write {
                continue;
            }
            let writers = &order[usize::from(k)];
            let at = if value == 0 {
                None
            } else {
                writers.iter().position(|&w| txns[w].ops.iter().any(|o| o.0 && o.1 == k && o.2 == value))
            };
            if let Some(i) = at {
                if writers[i] != r {
                    before[r].push(writers[i]);
                }
            }
            let next = at.map_or(0, |i| i + 1);
            if let Some(&w) = writers.get(next) {
                if w != r {
                    before[w].push(r);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut placed = vec![false; n];
    while out.len() < txns.iter().filter(|t| t.committed).count() {
        let t = (0..n).find(|&t| txns[t].committed && !placed[t] && before[t].iter().all(|&b| placed[b]))?;
        placed[t] = true;
        out.push(t);
    }
    Some(out)
}

#[test]
fn the_naive_cycle_search_finds_exactly_the_cycles() {
    // Small graphs: a cycle exists iff some permutation is not a topological order of all of
    // them; brute force over permutations of up to 5 nodes.
    let mut rng = isocert_random::seeded(5);
    for _ in 0..500 {
        let n = rng.random_range(1..=5usize);
        let mut edges: Vec<Vec<(usize, u8)>> = vec![Vec::new(); n];
        for (a, out) in edges.iter_mut().enumerate() {
            for b in 0..n {
                if a != b && rng.random_bool(0.25) {
                    out.push((b, WW));
                }
            }
        }
        let mut perm: Vec<usize> = (0..n).collect();
        let mut acyclic = false;
        permutations(&mut perm, 0, &mut |p| {
            let pos: Vec<usize> = (0..n).map(|v| p.iter().position(|&x| x == v).unwrap()).collect();
            if edges.iter().enumerate().all(|(a, es)| es.iter().all(|&(b, _)| pos[a] < pos[b])) {
                acyclic = true;
            }
        });
        assert_eq!(has_cycle(&edges, WW), !acyclic, "{edges:?}");
    }
}
