//! MTC: each anomaly with its valid twin, dbcop's three wrong shapes, shape refusals, and a
//! brute-force oracle (every serial order / every commit order with snapshots) agreeing
//! with MTC on thousands of random small mini-transaction histories.

use isocert_history::v1;

use super::check;
use crate::{check as check_any, AnomalyKind, CheckError, CheckerKind, IsolationLevel, Report};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;
const HEADER: &str =
    r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}"#;

fn run(body: &str, level: IsolationLevel) -> Report {
    let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).expect("test history parses");
    check(&h, level).expect("mtc runs")
}

fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn lost_update_is_rejected_at_both_levels_and_its_serial_twin_accepted() {
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":2}]}"#;
    let si = run(bad, SI);
    assert_eq!(kinds(&si), [AnomalyKind::GSi]);
    assert!(si.anomalies[0].explanation.contains("lost update"), "{}", si.anomalies[0].explanation);
    assert_eq!(si.anomalies[0].cycle.len(), 2);
    let ser = run(bad, SER);
    assert_eq!(kinds(&ser), [AnomalyKind::G2Item]);
    assert!(ser.anomalies[0].cycle.iter().all(|e| e.kind == crate::EdgeKind::Rw));
    let good = bad
        .replace(r#""value":0},{"f":"w","key":"x","value":2"#, r#""value":1},{"f":"w","key":"x","value":2"#);
    assert!(run(&good, SI).is_valid());
    assert!(run(&good, SER).is_valid());
}

#[test]
fn write_skew_is_serializability_only() {
    let skew = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}"#;
    assert!(run(skew, SI).is_valid());
    let ser = run(skew, SER);
    assert_eq!(kinds(&ser), [AnomalyKind::G2Item]);
    let text: Vec<&str> = ser.anomalies[0].cycle.iter().map(|e| e.explanation.as_str()).collect();
    assert!(text.iter().any(|t| t.contains("which T2 read and then overwrote")), "{text:?}");
    // Twin: T2 saw T1's write of x, so T1 then T2 explains everything.
    let serial = skew.replacen(
        r#""id":2,"session":2,"ops":[{"f":"r","key":"x","value":0}"#,
        r#""id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}"#,
        1,
    );
    assert!(run(&serial, SER).is_valid());
}

#[test]
fn long_fork_is_rejected_at_snapshot_isolation() {
    // T3 sees x's write but not y's, T4 the opposite.
    let fork = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":1},{"f":"r","key":"y","value":0}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":1}]}"#;
    assert_eq!(kinds(&run(fork, SI)), [AnomalyKind::GSi]);
    let agree = fork.replace(
        r#"{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":1}"#,
        r#"{"f":"r","key":"x","value":1},{"f":"r","key":"y","value":1}"#,
    );
    assert!(run(&agree, SI).is_valid());
}

#[test]
fn session_order_counts() {
    // T2 follows T1 in session 1 yet reads x before T1's write.
    let bad = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":1,"ops":[{"f":"r","key":"x","value":0}]}"#;
    let r = run(bad, SER);
    assert_eq!(kinds(&r), [AnomalyKind::G2Item]);
    assert!(r.anomalies[0].cycle.iter().any(|e| e.kind == crate::EdgeKind::Session));
    assert!(!run(bad, SI).is_valid());
    assert!(run(
        &bad.replace(
            r#""session":1,"ops":[{"f":"r","key":"x","value":0}]"#,
            r#""session":2,"ops":[{"f":"r","key":"x","value":0}]"#
        ),
        SER
    )
    .is_valid());
}

#[test]
fn reads_no_level_allows() {
    let aborted = r#"{"id":1,"session":1,"status":"aborted","ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(aborted, SER)), [AnomalyKind::G1a]);
    let intermediate = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1},{"f":"w","key":"x","value":2}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(intermediate, SI)), [AnomalyKind::G1b]);
    let garbage = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":7}]}"#;
    assert_eq!(kinds(&run(garbage, SER)), [AnomalyKind::GarbageRead]);
    let internal = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1},{"f":"r","key":"x","value":0}]}"#;
    assert_eq!(kinds(&run(internal, SER)), [AnomalyKind::InternalInconsistency]);
    // Twins: the committed final write, read back by its own transaction.
    let fine = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1},{"f":"r","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert!(run(fine, SER).is_valid());
}

/// dbcop rejects these three valid histories; MTC must accept them.
#[test]
fn dbcops_three_wrong_shapes_are_accepted() {
    // 1. A transaction reads its own write twice.
    let twice = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1},{"f":"r","key":"x","value":1},{"f":"r","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":2}]}"#;
    // 2. An aborted transaction reads its own write.
    let aborted_own = r#"{"id":1,"session":1,"status":"aborted","ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1},{"f":"r","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":2}]}"#;
    // 3. Aborted writes are not installed: T2 overwrites the initial version T1 also read.
    let aborted_write = r#"{"id":1,"session":1,"status":"aborted","ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":2}]}"#;
    for (name, h) in [("twice", twice), ("aborted-own", aborted_own), ("aborted-write", aborted_write)] {
        for level in [SI, SER] {
            let r = run(h, level);
            assert!(r.is_valid(), "{name} at {level}: {:?}", r.anomalies);
        }
    }
}

#[test]
fn histories_that_are_not_mini_transactions_are_refused_naming_the_transaction() {
    let h = v1::read_history(
        format!(
            "{HEADER}\n{}",
            r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":9,"session":2,"ops":[{"f":"w","key":"y","value":5}]}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let err = check(&h, SER).unwrap_err();
    assert!(matches!(err, CheckError::UnsupportedHistory { checker: CheckerKind::Mtc, .. }));
    let text = err.to_string();
    assert!(text.contains("T9 op 0 writes") && text.contains("without reading it first"), "{text}");
    let dup = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":1}]}"#;
    let h = v1::read_history(format!("{HEADER}\n{dup}").as_bytes()).unwrap();
    assert!(check(&h, SI).unwrap_err().to_string().contains("which T1 also wrote"));
    assert!(matches!(check(&h, IsolationLevel::ReadCommitted), Err(CheckError::UnsupportedLevel { .. })));
}

/// The refusal names the first operation in file order that breaks the shape, whether it is
/// a predicate operation (which the compact model cannot hold) or an item operation before
/// it; every black-box checker words its own.
#[test]
fn a_refusal_names_the_first_operation_in_file_order_predicates_included() {
    let select = r#"{"id":3,"session":3,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[]}]}"#;
    let blind = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}"#;
    let rmw = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}"#;
    let refusal = |body: String, level| {
        let h = v1::read_history(
            format!(
                "{HEADER}
{body}"
            )
            .as_bytes(),
        )
        .unwrap();
        check(&h, level).unwrap_err().to_string()
    };
    let first = refusal(
        format!(
            "{blind}
{select}"
        ),
        SER,
    );
    assert!(first.contains("T1 op 0 writes") && first.contains("without reading it first"), "{first}");
    let twin = refusal(
        format!(
            "{rmw}
{select}"
        ),
        SER,
    );
    assert!(twin.contains("T3 op 0 is a predicate read"), "{twin}");
    let deletes = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":null}]}"#;
    for checker in [CheckerKind::Cobra, CheckerKind::Weak] {
        let level = if checker == CheckerKind::Weak { IsolationLevel::ReadCommitted } else { SER };
        let h = v1::read_history(
            format!(
                "{HEADER}
{deletes}
{select}"
            )
            .as_bytes(),
        )
        .unwrap();
        let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
        let cert = isocert_history::Certificate::default();
        let e = check_any(&h, &cert, level, checker, &oracle).unwrap_err().to_string();
        assert!(e.contains("T1 op 0 deletes"), "{checker}: {e}");
        let h = v1::read_history(
            format!(
                "{HEADER}
{blind}
{select}"
            )
            .as_bytes(),
        )
        .unwrap();
        let e = check_any(&h, &cert, level, checker, &oracle).unwrap_err().to_string();
        assert!(e.contains("T3 op 0 is not an item read or write"), "{checker}: {e}");
    }
}

#[test]
fn auto_picks_mtc_without_a_certificate_and_refuses_other_shapes() {
    let body = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}"#;
    let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).unwrap();
    let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
    let cert = isocert_history::Certificate::default();
    let r = check_any(&h, &cert, SER, CheckerKind::Auto, &oracle).unwrap();
    assert_eq!(r.checker, CheckerKind::Mtc);
    let blind = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}"#;
    let h = v1::read_history(format!("{HEADER}\n{blind}").as_bytes()).unwrap();
    let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
    let r = check_any(&h, &cert, SER, CheckerKind::Auto, &oracle).unwrap();
    assert_eq!(r.checker, CheckerKind::Cobra);
    let r = check_any(&h, &cert, SI, CheckerKind::Auto, &oracle).unwrap();
    assert_eq!(r.checker, CheckerKind::Polysi);
    // A value written twice: no black-box checker applies, the certificate is asked for.
    let twice = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":1,"ops":[{"f":"w","key":"x","value":1}]}"#;
    let h = v1::read_history(format!("{HEADER}\n{twice}").as_bytes()).unwrap();
    let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
    assert!(matches!(
        check_any(&h, &cert, SER, CheckerKind::Auto, &oracle),
        Err(CheckError::MissingCertificateData { .. })
    ));
}

#[test]
fn the_inferred_certificate_lets_emme_agree() {
    let body = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":2},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":3}]}
{"id":3,"session":1,"ops":[{"f":"r","key":"y","value":3}]}"#;
    let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).unwrap();
    let cert = super::infer_mtc_certificate(&h).unwrap();
    let order = cert.version_order.as_ref().unwrap();
    let x = h.object_by_key(h.table_by_name("kv").unwrap(), &isocert_history::Scalar::Int(0)).or_else(|| {
        h.object_by_key(h.table_by_name("kv").unwrap(), &isocert_history::Scalar::Text("x".into()))
    });
    let x = x.expect("object x");
    assert_eq!(order[&x].iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1]);
    let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
    assert!(check_any(&h, &cert, SER, CheckerKind::Emme, &oracle).unwrap().is_valid());
}

pub(crate) mod oracle {
    //! Brute force over every order of the committed transactions, on histories of at most
    //! six transactions over two or three keys.

    /// A generated transaction: its session, whether it committed, and ops as
    /// (key, Some(value written) | None for a read, value).
    #[derive(Clone, Debug)]
    pub(crate) struct Txn {
        pub(crate) session: u32,
        pub(crate) committed: bool,
        /// (key, is_write, value)
        pub(crate) ops: Vec<(u8, bool, i64)>,
    }

    /// The external reads (first access of a key) of a transaction.
    fn external_reads(t: &Txn) -> Vec<(u8, i64)> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for &(k, w, v) in &t.ops {
            if !seen.contains(&k) {
                seen.push(k);
                if !w {
                    out.push((k, v));
                }
            }
        }
        out
    }

    /// The transaction's final writes.
    fn final_writes(t: &Txn) -> Vec<(u8, i64)> {
        let mut out: Vec<(u8, i64)> = Vec::new();
        for &(k, w, v) in &t.ops {
            if w {
                out.retain(|e| e.0 != k);
                out.push((k, v));
            }
        }
        out
    }

    /// Whether the internal reads return the transaction's own last read or write.
    fn internally_consistent(t: &Txn) -> bool {
        let mut last: Vec<(u8, i64)> = Vec::new();
        for &(k, w, v) in &t.ops {
            match last.iter_mut().find(|e| e.0 == k) {
                Some(e) if !w && e.1 != v => return false,
                Some(e) => e.1 = v,
                None => last.push((k, v)),
            }
        }
        true
    }

    pub(crate) fn permutations(items: Vec<usize>, out: &mut Vec<Vec<usize>>) {
        fn go(rest: &mut Vec<usize>, acc: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if rest.is_empty() {
                out.push(acc.clone());
                return;
            }
            for i in 0..rest.len() {
                let x = rest.remove(i);
                acc.push(x);
                go(rest, acc, out);
                acc.pop();
                rest.insert(i, x);
            }
        }
        go(&mut items.clone(), &mut Vec::new(), out);
    }

    /// Whether some commit order (respecting session order) with per-transaction snapshots
    /// explains every read: `si` lets a transaction read from an earlier prefix (its
    /// snapshot) provided no other writer of its keys commits in between (first committer
    /// wins); otherwise the snapshot is the prefix right before it (serializability).
    pub(crate) fn brute_force(txns: &[Txn], keys: u8, si: bool) -> bool {
        brute_force_where(txns, keys, si, |_| true)
    }

    /// [`brute_force`] over the commit orders `allowed` accepts only.
    pub(crate) fn brute_force_where(
        txns: &[Txn],
        keys: u8,
        si: bool,
        allowed: impl Fn(&[usize]) -> bool,
    ) -> bool {
        let committed: Vec<usize> = (0..txns.len()).filter(|&i| txns[i].committed).collect();
        if committed.iter().any(|&i| !internally_consistent(&txns[i])) {
            return false;
        }
        let mut perms = Vec::new();
        permutations(committed, &mut perms);
        'perm: for perm in perms.into_iter().filter(|p| allowed(p)) {
            // states[p]: the values after the first p transactions of the order.
            let mut states = vec![vec![0i64; keys as usize]];
            for &t in &perm {
                let mut s = states.last().unwrap().clone();
                for (k, v) in final_writes(&txns[t]) {
                    s[k as usize] = v;
                }
                states.push(s);
            }
            let mut snapshot = vec![0usize; txns.len()];
            for (p, &t) in perm.iter().enumerate() {
                let reads = external_reads(&txns[t]);
                let fits = |s: usize| reads.iter().all(|&(k, v)| states[s][k as usize] == v);
                let lowest = if si { 0 } else { p };
                let Some(s) = (lowest..=p).rev().find(|&s| fits(s)) else { continue 'perm };
                snapshot[t] = s;
                // First committer wins: no other writer of a key it writes commits after its snapshot.
                let writes: Vec<u8> = final_writes(&txns[t]).iter().map(|w| w.0).collect();
                for &other in &perm[s..p] {
                    if final_writes(&txns[other]).iter().any(|w| writes.contains(&w.0)) {
                        continue 'perm;
                    }
                }
            }
            // Session order: an earlier transaction of the session is in the later one's snapshot.
            for (a, &ta) in perm.iter().enumerate() {
                for &tb in &perm {
                    if ta < tb && txns[ta].session == txns[tb].session && snapshot[tb] <= a {
                        continue 'perm;
                    }
                }
            }
            return true;
        }
        false
    }

    use isocert_random::rand::Rng as _;
    pub(crate) use isocert_random::SeededRng as Rng;

    /// A random mini-transaction history: reads of one or two keys, some overwritten with
    /// fresh values, sometimes a read of the own write; read values drawn from the values
    /// of that key (initial, or anyone's write), so valid and invalid histories both occur.
    pub(crate) fn random(rng: &mut Rng) -> (Vec<Txn>, u8) {
        let keys = 2 + rng.random_range(0..2) as u8;
        let n = 2 + rng.random_range(0..5) as usize;
        let sessions = 1 + rng.random_range(0..3) as u32;
        let mut next_value = 1i64;
        let mut txns: Vec<Txn> = (0..n)
            .map(|_| {
                let mut ops = Vec::new();
                let first = rng.random_range(0..keys as u64) as u8;
                let mut read_keys = vec![first];
                if rng.random_range(0..2) == 0 {
                    let second = rng.random_range(0..keys as u64) as u8;
                    if second != first {
                        read_keys.push(second);
                    }
                }
                for &k in &read_keys {
                    ops.push((k, false, -1));
                }
                for &k in &read_keys {
                    if rng.random_range(0..3) != 0 {
                        ops.push((k, true, next_value));
                        next_value += 1;
                        if rng.random_range(0..4) == 0 {
                            ops.push((k, false, next_value - 1));
                        }
                    }
                }
                Txn {
                    session: rng.random_range(0..sessions as u64) as u32,
                    committed: rng.random_range(0..8) != 0,
                    ops,
                }
            })
            .collect();
        let mut pool: Vec<Vec<i64>> = vec![vec![0]; keys as usize];
        for t in &txns {
            for (k, v) in final_writes(t) {
                pool[k as usize].push(v);
            }
        }
        for t in &mut txns {
            for op in t.ops.iter_mut().filter(|op| !op.1 && op.2 == -1) {
                let choices = &pool[op.0 as usize];
                op.2 = choices[rng.random_range(0..choices.len() as u64) as usize];
            }
        }
        (txns, keys)
    }

    pub(crate) fn to_v1(txns: &[Txn], keys: u8) -> String {
        let names = ["x", "y", "z"];
        let initial: Vec<String> =
            (0..keys).map(|k| format!(r#"{{"key":"{}","value":0}}"#, names[k as usize])).collect();
        let mut out =
            format!(r#"{{"format":"isocert-history","version":1,"initial":[{}]}}"#, initial.join(","));
        for (i, t) in txns.iter().enumerate() {
            let ops: Vec<String> = t
                .ops
                .iter()
                .map(|&(k, w, v)| {
                    format!(
                        r#"{{"f":"{}","key":"{}","value":{v}}}"#,
                        if w { "w" } else { "r" },
                        names[k as usize]
                    )
                })
                .collect();
            let status = if t.committed { "committed" } else { "aborted" };
            out.push_str(&format!(
                "\n{{\"id\":{},\"session\":{},\"status\":\"{status}\",\"ops\":[{}]}}",
                i + 1,
                t.session,
                ops.join(",")
            ));
        }
        out
    }
}

#[test]
fn mtc_agrees_with_brute_force_on_thousands_of_random_histories() {
    let (mut valid, mut invalid) = ([0usize; 2], [0usize; 2]);
    for seed in 0..4000u64 {
        let mut rng = isocert_random::seeded(seed);
        let (txns, keys) = oracle::random(&mut rng);
        let text = oracle::to_v1(&txns, keys);
        let h = v1::read_history(text.as_bytes()).unwrap();
        for (i, (level, si)) in [(SER, false), (SI, true)].into_iter().enumerate() {
            let expected = oracle::brute_force(&txns, keys, si);
            let got = check(&h, level).unwrap();
            assert_eq!(got.is_valid(), expected, "seed {seed} at {level}:\n{text}\n{:#?}", got.anomalies);
            if expected {
                valid[i] += 1;
            } else {
                invalid[i] += 1;
            }
        }
    }
    // Both verdicts must be well represented, or the comparison proves little.
    for i in 0..2 {
        assert!(valid[i] > 400 && invalid[i] > 400, "valid {valid:?} invalid {invalid:?}");
    }
}

mod strict {
    //! Strict serializability: each real-time anomaly with its overlapping twin, refusal of
    //! untimed histories, lightweight transactions, and brute force over the serial orders
    //! that keep real time.

    use super::oracle::{self, Txn};
    use super::*;
    use crate::mtc::{infer, realtime};
    use crate::EdgeKind;
    use isocert_random::rand::Rng as _;

    const SSER: IsolationLevel = IsolationLevel::StrictSerializable;

    fn timed(id: u32, session: u32, span: (i64, i64), ops: &str) -> String {
        format!(
            r#"{{"id":{id},"session":{session},"invoked_at":{},"completed_at":{},"ops":[{ops}]}}"#,
            span.0, span.1
        )
    }

    const CAS_0_1: &str = r#"{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}"#;
    const READ_0: &str = r#"{"f":"r","key":"x","value":0}"#;

    #[test]
    fn a_stale_read_after_a_completed_write_is_serializable_but_not_strictly() {
        let stale = [timed(1, 1, (0, 10), CAS_0_1), timed(2, 2, (20, 30), READ_0)].join("\n");
        assert!(run(&stale, SER).is_valid());
        let r = run(&stale, SSER);
        assert_eq!(kinds(&r), [AnomalyKind::RealTime]);
        let rt =
            r.anomalies[0].cycle.iter().find(|e| e.kind == EdgeKind::RealTime).expect("a real-time edge");
        assert_eq!(rt.explanation, "T1 completed (at 10) before T2 was invoked (at 20)");
        assert!(r.anomalies[0].cycle.iter().any(|e| e.kind == EdgeKind::Rw), "{:#?}", r.anomalies[0].cycle);
        // Twin: the read overlaps the write, so it may come first.
        let overlapping = [timed(1, 1, (0, 10), CAS_0_1), timed(2, 2, (5, 30), READ_0)].join("\n");
        assert!(run(&overlapping, SSER).is_valid());
        // Completing exactly when the other is invoked is not "before".
        let touching = [timed(1, 1, (0, 10), CAS_0_1), timed(2, 2, (10, 30), READ_0)].join("\n");
        assert!(run(&touching, SSER).is_valid());
    }

    #[test]
    fn a_multi_key_real_time_cycle_goes_through_the_chain() {
        // T1 writes x; T2, invoked after T1 completed, writes y; T3 (overlapping both) reads
        // T2's y and the old x. Serializable as T2 T3 T1 (T2 -wr-> T3 -rw-> T1), but T1
        // completed before T2 was invoked.
        let body = [
            timed(1, 1, (0, 10), CAS_0_1),
            timed(2, 2, (20, 30), r#"{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}"#),
            timed(3, 3, (5, 40), r#"{"f":"r","key":"y","value":1},{"f":"r","key":"x","value":0}"#),
        ]
        .join("\n");
        assert!(run(&body, SER).is_valid());
        let r = run(&body, SSER);
        assert_eq!(kinds(&r), [AnomalyKind::RealTime]);
        let edges: Vec<(u32, u32, EdgeKind)> =
            r.anomalies[0].cycle.iter().map(|e| (e.from.0, e.to.0, e.kind)).collect();
        assert_eq!(edges, [(0, 1, EdgeKind::RealTime), (1, 2, EdgeKind::Wr), (2, 0, EdgeKind::Rw)]);
    }

    #[test]
    fn untimed_transactions_are_refused_naming_the_first() {
        let body =
            [timed(1, 1, (0, 10), CAS_0_1), format!(r#"{{"id":2,"session":2,"ops":[{READ_0}]}}"#)].join("\n");
        let h = v1::read_history(format!("{HEADER}\n{body}").as_bytes()).unwrap();
        match check(&h, SSER) {
            Err(CheckError::UnsupportedHistory { what, .. }) => {
                assert!(what.starts_with("T2 has no invoked_at"), "{what}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Auto picks MTC at strict serializability; Emme refuses the level.
        let cert = isocert_history::Certificate::default();
        let oracle = isocert_oracle::Interpreter::new(&h).unwrap();
        assert!(matches!(
            check_any(&h, &cert, SSER, CheckerKind::Emme, &oracle),
            Err(CheckError::UnsupportedLevel { .. })
        ));
        assert!(matches!(
            check_any(&h, &cert, SSER, CheckerKind::Auto, &oracle),
            Err(CheckError::UnsupportedHistory { checker: CheckerKind::Mtc, .. })
        ));
    }

    #[test]
    fn lightweight_transactions_are_checked_for_linearizability() {
        let cas = |id: u32, span, from: i64, to: i64| {
            timed(
                id,
                id,
                span,
                &format!(r#"{{"f":"r","key":"x","value":{from}}},{{"f":"w","key":"x","value":{to}}}"#),
            )
        };
        let read =
            |id: u32, span, v: i64| timed(id, id, span, &format!(r#"{{"f":"r","key":"x","value":{v}}}"#));
        // A failed compare-and-set that reads a version two writes old after both completed.
        let stale = [cas(1, (0, 10), 0, 1), cas(2, (20, 30), 1, 2), read(3, (40, 50), 1)].join("\n");
        let r = run(&stale, SSER);
        assert_eq!(kinds(&r), [AnomalyKind::RealTime]);
        let fresh = [cas(1, (0, 10), 0, 1), cas(2, (20, 30), 1, 2), read(3, (40, 50), 2)].join("\n");
        let r = run(&fresh, SSER);
        assert!(r.is_valid(), "{:#?}", r.anomalies);
        assert!(r.notes.iter().any(|n| n.contains("Algorithm 2")), "{:?}", r.notes);
        // The chain runs against real time: T2 builds on T1 but finished before T1 began.
        let backwards = [cas(1, (20, 30), 0, 1), cas(2, (0, 10), 1, 2)].join("\n");
        assert_eq!(kinds(&run(&backwards, SSER)), [AnomalyKind::RealTime]);
        assert!(run(&backwards, SER).is_valid());
    }

    /// Two reads of one session that real time orders the other way round: session order and
    /// real time together leave no order, though each alone does. Algorithm 2, which sees
    /// real time only, must not decide it; the twin, in session order in time, is valid.
    #[test]
    fn a_session_running_backwards_in_real_time_is_not_strictly_serializable() {
        let read =
            |id: u32, span, key: &str| timed(id, 1, span, &format!(r#"{{"f":"r","key":"{key}","value":0}}"#));
        let backwards = [read(1, (7, 8), "x"), read(2, (4, 6), "y")].join("\n");
        assert_eq!(kinds(&run(&backwards, SSER)), [AnomalyKind::RealTime]);
        assert!(run(&backwards, SER).is_valid());
        let forwards = [read(1, (4, 6), "x"), read(2, (7, 8), "y")].join("\n");
        let r = run(&forwards, SSER);
        assert!(r.is_valid(), "{:#?}", r.anomalies);
        assert!(r.notes.iter().any(|n| n.contains("Algorithm 2")), "{:?}", r.notes);
    }

    /// Random intervals for a generated history (a session's transactions in its order).
    fn spans(rng: &mut oracle::Rng, txns: &[Txn]) -> Vec<(i64, i64)> {
        let mut session_end: std::collections::HashMap<u32, i64> = Default::default();
        txns.iter()
            .enumerate()
            .map(|(i, t)| {
                // Roughly in file order, so that real time orders many pairs.
                let floor = session_end.get(&t.session).copied().unwrap_or(0).max(3 * i as i64);
                let start = floor + rng.random_range(0..8) as i64;
                let end = start + rng.random_range(0..4) as i64;
                session_end.insert(t.session, end + 1);
                (start, end)
            })
            .collect()
    }

    fn with_times(text: &str, spans: &[(i64, i64)]) -> String {
        let mut lines = text.lines();
        let mut out = lines.next().unwrap().to_string();
        for (line, (a, b)) in lines.zip(spans) {
            out.push('\n');
            out.push_str(&line.replacen(
                ",\"ops\"",
                &format!(",\"invoked_at\":{a},\"completed_at\":{b},\"ops\""),
                1,
            ));
        }
        out
    }

    fn keeps_real_time(spans: &[(i64, i64)]) -> impl Fn(&[usize]) -> bool + '_ {
        move |order: &[usize]| {
            order.iter().enumerate().all(|(i, &a)| order[i + 1..].iter().all(|&b| spans[b].1 >= spans[a].0))
        }
    }

    #[test]
    fn strict_serializability_agrees_with_brute_force_on_thousands_of_random_histories() {
        let (mut valid, mut invalid, mut ser_only) = (0, 0, 0);
        for seed in 0..4000u64 {
            let mut rng = isocert_random::seeded(seed ^ 0x55e7);
            let (txns, keys) = oracle::random(&mut rng);
            let spans = spans(&mut rng, &txns);
            let text = with_times(&oracle::to_v1(&txns, keys), &spans);
            let h = v1::read_history(text.as_bytes()).unwrap();
            let expected = oracle::brute_force_where(&txns, keys, false, keeps_real_time(&spans));
            let got = check(&h, SSER).unwrap();
            assert_eq!(got.is_valid(), expected, "seed {seed}:\n{text}\n{:#?}", got.anomalies);
            match (expected, oracle::brute_force(&txns, keys, false)) {
                (true, _) => valid += 1,
                (false, true) => ser_only += 1,
                (false, false) => invalid += 1,
            }
        }
        assert!(valid > 400 && invalid > 400 && ser_only > 50, "{valid} {invalid} {ser_only}");
    }

    /// Random lightweight-transaction histories: compare-and-sets and failed ones on two keys.
    fn random_lwt(rng: &mut oracle::Rng) -> (Vec<Txn>, u8) {
        let n = 2 + rng.random_range(0..5) as usize;
        let mut next = 1i64;
        let mut txns: Vec<Txn> = (0..n)
            .map(|i| {
                let k = rng.random_range(0..2) as u8;
                let mut ops = vec![(k, false, -1)];
                if rng.random_range(0..3) != 0 {
                    ops.push((k, true, next));
                    next += 1;
                }
                Txn { session: i as u32, committed: true, ops }
            })
            .collect();
        // Mostly chain-shaped reads (a value of the key), so valid chains occur often.
        let mut pool: Vec<Vec<i64>> = vec![vec![0]; 2];
        for t in &txns {
            if let Some(&(k, true, v)) = t.ops.get(1) {
                pool[k as usize].push(v);
            }
        }
        for t in &mut txns {
            let k = t.ops[0].0 as usize;
            t.ops[0].2 = pool[k][rng.random_range(0..pool[k].len() as u64) as usize];
        }
        (txns, 2)
    }

    #[test]
    fn the_linear_lightweight_check_agrees_with_the_graph_and_brute_force() {
        let (mut linearizable, mut not) = (0, 0);
        for seed in 0..4000u64 {
            let mut rng = isocert_random::seeded(seed ^ 0x1ea5);
            let (txns, keys) = random_lwt(&mut rng);
            let spans = spans(&mut rng, &txns);
            let text = with_times(&oracle::to_v1(&txns, keys), &spans);
            let h = v1::read_history(text.as_bytes()).unwrap();
            let kv = isocert_history::KvHistory::from_history(&h).unwrap();
            let inf = infer(&kv, &crate::items::WriteSites::build(&kv));
            let times = realtime::real_times(&kv, &inf.in_graph).unwrap();
            let Some(fast) = realtime::lwt_linearizable(&kv, &inf, &times) else { continue };
            let graph = realtime::sser_cycles(&kv, &inf, &times).is_empty();
            let brute = oracle::brute_force_where(&txns, keys, false, keeps_real_time(&spans));
            assert_eq!((fast, graph), (brute, brute), "seed {seed}:\n{text}");
            if brute {
                linearizable += 1;
            } else {
                not += 1;
            }
        }
        assert!(linearizable > 400 && not > 400, "{linearizable} {not}");
    }
}
