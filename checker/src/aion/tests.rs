//! Aion: agreement with Chronos on shuffled arrivals, tentative Ext verdicts, GC.

use isocert_history::{v1, KvHistory, Scalar, TxnId};
use isocert_random::rand::Rng as _;

use super::{check_aion_kv, Aion, AionDelay, AionOptions};
use crate::chronos::tests::kinds;
use crate::{check_chronos_kv, AnomalyKind, IsolationLevel, Report};

/// A history of `n` transactions in `sessions` sessions over `keys` keys whose reads are
/// what snapshot isolation returns (values unique, initial value 0); `corrupt` of them
/// read a wrong value, and overlapping writers are allowed when `conflicts` is set.
pub(super) fn generate(
    seed: u64,
    n: usize,
    sessions: usize,
    keys: u64,
    corrupt: usize,
    conflicts: bool,
) -> KvHistory {
    let mut rng = isocert_random::seeded(seed);
    let mut clock = vec![0u64; sessions];
    // Spans first.
    let mut txns: Vec<(usize, u64, u64)> = Vec::new();
    for _ in 0..n {
        let s = rng.random_range(0..sessions as u64) as usize;
        let start = clock[s] + rng.random_range(0..4);
        let commit = start + rng.random_range(0..6);
        clock[s] = commit;
        txns.push((s, start, commit));
    }
    // File order follows start timestamps (as a database log would), session order kept.
    txns.sort_by_key(|&(_, start, _)| start);
    // Write sets: greedily avoid keys written by concurrent transactions.
    let mut writes: Vec<Vec<u64>> = Vec::new();
    for (i, &(_, s, c)) in txns.iter().enumerate() {
        let mut w = Vec::new();
        if s != c || rng.random_range(0..2) == 0 {
            for _ in 0..rng.random_range(0..3) {
                let k = rng.random_range(0..keys);
                let clash = txns[..i].iter().zip(&writes).any(|(&(_, s2, c2), w2)| {
                    w2.contains(&k) && (c2 > s && c > s2 || (s == c && s2 == c2 && s == s2))
                });
                if (!clash || conflicts) && !w.contains(&k) {
                    w.push(k);
                }
            }
        }
        writes.push(w);
    }
    // Reads: simulate with a frontier in event order (commits, atomic runs, starts).
    let mut events: Vec<(u64, u8, usize)> = Vec::new();
    for (i, &(_, s, c)) in txns.iter().enumerate() {
        if s == c {
            events.push((s, 1, i));
        } else {
            events.push((s, 2, i));
            events.push((c, 0, i));
        }
    }
    events.sort();
    let mut frontier = vec![0i64; keys as usize];
    let mut ops: Vec<String> = vec![String::new(); n];
    let mut corrupted = 0;
    for &(_, phase, i) in &events {
        if phase >= 1 {
            let mut parts = Vec::new();
            for _ in 0..rng.random_range(0..4) {
                let k = rng.random_range(0..keys);
                let mut v = frontier[k as usize];
                if corrupted < corrupt && rng.random_range(0..5) == 0 {
                    v += 1_000_000;
                    corrupted += 1;
                }
                if !parts.iter().any(|p: &String| p.contains(&format!("\"key\":{k},"))) {
                    parts.push(format!("{{\"f\":\"r\",\"key\":{k},\"value\":{v}}}"));
                }
            }
            for &k in &writes[i] {
                parts.push(format!("{{\"f\":\"w\",\"key\":{k},\"value\":{}}}", i + 1));
            }
            ops[i] = parts.join(",");
        }
        if phase <= 1 {
            for &k in &writes[i] {
                frontier[k as usize] = i as i64 + 1;
            }
        }
    }
    let mut text = String::new();
    for (i, &(s, start, commit)) in txns.iter().enumerate() {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":{s},\"start_ts\":{start},\"commit_ts\":{commit},\"ops\":[{}]}}\n",
            ops[i]
        ));
    }
    let h = v1::read_history(text.as_bytes()).unwrap();
    let mut kv = KvHistory::from_history(&h).unwrap();
    kv.set_default_initial(Some(&Scalar::Int(0)));
    kv
}

/// File order displaced by up to `window` positions, each session's order kept.
pub(super) fn shuffled(kv: &KvHistory, seed: u64, window: usize) -> Vec<TxnId> {
    let mut rng = isocert_random::seeded(seed);
    let mut keyed: Vec<(usize, TxnId)> =
        kv.txn_ids().map(|t| (t.index() + rng.random_range(0..window as u64 + 1) as usize, t)).collect();
    keyed.sort();
    // Restore session order among the displaced positions.
    let mut by_session: std::collections::BTreeMap<u32, Vec<TxnId>> = Default::default();
    for t in kv.txn_ids() {
        by_session.entry(kv.session(t).0).or_default().push(t);
    }
    let mut next: std::collections::BTreeMap<u32, usize> = Default::default();
    keyed
        .into_iter()
        .map(|(_, t)| {
            let s = kv.session(t).0;
            let i = next.entry(s).or_default();
            *i += 1;
            by_session[&s][*i - 1]
        })
        .collect()
}

fn same(a: &Report, b: &Report) {
    let texts = |r: &Report| {
        r.anomalies.iter().map(|x| (x.kind, x.txns.clone(), x.explanation.clone())).collect::<Vec<_>>()
    };
    assert_eq!(texts(a), texts(b));
}

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;

#[test]
fn agrees_with_chronos_on_shuffled_valid_histories() {
    for seed in 1..6 {
        let kv = generate(seed, 3000, 8, 40, 0, false);
        let chronos = check_chronos_kv(kv.clone(), SI).unwrap().0;
        assert!(chronos.is_valid(), "generator makes SI-valid histories: {:?}", chronos.anomalies.first());
        let order = shuffled(&kv, seed * 7, 200);
        let aion = check_aion_kv(&kv, order, AionOptions { gc_every: 64, ..AionOptions::new(SI) }).unwrap();
        same(&chronos, &aion);
    }
}

#[test]
fn agrees_with_chronos_on_shuffled_invalid_histories() {
    for seed in 1..6 {
        let kv = generate(seed, 2000, 6, 25, 40, true);
        for level in [SI, IsolationLevel::Serializable] {
            let chronos = check_chronos_kv(kv.clone(), level).unwrap().0;
            assert!(!chronos.is_valid());
            let order = shuffled(&kv, seed * 13, 300);
            let aion =
                check_aion_kv(&kv, order, AionOptions { gc_every: 100, ..AionOptions::new(level) }).unwrap();
            same(&chronos, &aion);
        }
    }
}

#[test]
fn a_late_writer_clears_a_tentative_ext_violation() {
    let text = r#"{"id":1,"session":1,"start_ts":10,"commit_ts":11,"ops":[{"f":"r","key":"y","value":1}]}
{"id":2,"session":2,"start_ts":2,"commit_ts":3,"ops":[{"f":"w","key":"y","value":1}]}"#;
    let h = v1::read_history(text.as_bytes()).unwrap();
    let kv = KvHistory::from_history(&h).unwrap();
    // With enough delay the writer arrives in time: valid.
    let r = check_aion_kv(&kv, kv.txn_ids(), AionOptions::new(SI)).unwrap();
    assert!(r.is_valid(), "{r:?}");
    // With no delay the reader's verdict is final before the writer arrives.
    let eager = AionOptions { delay: AionDelay::Arrivals(0), ..AionOptions::new(SI) };
    let r = check_aion_kv(&kv, kv.txn_ids(), eager).unwrap();
    assert_eq!(kinds(&r), [AnomalyKind::Ext]);
}

#[test]
fn a_late_overlapping_writer_is_a_no_conflict_violation() {
    let text = r#"{"id":1,"session":1,"start_ts":5,"commit_ts":9,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":1,"commit_ts":6,"ops":[{"f":"w","key":"x","value":2}]}"#;
    let h = v1::read_history(text.as_bytes()).unwrap();
    let kv = KvHistory::from_history(&h).unwrap();
    let mut aion = Aion::new(AionOptions::new(SI)).unwrap();
    aion.receive(&kv, TxnId(0)).unwrap();
    assert!(aion.take_final().is_empty());
    aion.receive(&kv, TxnId(1)).unwrap();
    let fresh = aion.take_final();
    assert_eq!(fresh.len(), 1);
    assert_eq!(fresh[0].kind, AnomalyKind::NoConflict);
    assert_eq!(fresh[0].txns, [TxnId(1), TxnId(0)], "the first to commit comes first");
    assert!(aion.take_final().is_empty());
}

#[test]
fn garbage_collection_keeps_verdicts() {
    let kv = generate(42, 5000, 10, 30, 0, false);
    let tight = AionOptions { delay: AionDelay::Arrivals(300), gc_every: 16, ..AionOptions::new(SI) };
    let order = shuffled(&kv, 3, 100);
    let r = check_aion_kv(&kv, order, tight).unwrap();
    assert!(r.is_valid(), "{:?}", r.anomalies.first());
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn agrees_with_chronos_on_the_timekiller_sample_shuffled() {
    for initial in [Some(0), None] {
        let kv = crate::chronos::tests::timekiller(initial);
        let chronos = check_chronos_kv(kv.clone(), SI).unwrap().0;
        let aion = check_aion_kv(&kv, shuffled(&kv, 5, 100), AionOptions::new(SI)).unwrap();
        same(&chronos, &aion);
    }
}
