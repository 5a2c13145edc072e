//! Aion split across partitions ([`AionScope`]) with watermark finality, against Chronos:
//! each partition's checker sees only the transactions that reach it (those touching its
//! objects or its sessions), in the order they arrive, and the producers' watermark; the
//! union of the partitions' anomalies must be Chronos's, anomaly for anomaly, and each
//! anomaly made final before the end must be one of them.

use isocert_gen::{generate, GenConfig, Injection};
use isocert_history::{read_kv_v1_bytes, v1, History, KvHistory, Scalar, Timestamp, TxnId};

use super::tests::{generate as generate_kv, shuffled};
use super::{Aion, AionDelay, AionOptions, AionScope, Watermark};
use crate::{check_chronos_kv, AnomalyKind, IsolationLevel, Partitioning};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;

/// An anomaly as a reader of the output sees it.
type Seen = (AnomalyKind, String);

/// The v1 text of `h`: its header line (if any) and one line per transaction.
fn lines_of(h: &History) -> (String, Vec<String>) {
    let mut text = Vec::new();
    v1::write_history(h, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let mut header = String::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.starts_with("{\"format\"") {
            header = format!("{line}\n");
        } else {
            lines.push(format!("{line}\n"));
        }
    }
    (header, lines)
}

/// Chronos's anomalies, sorted.
fn offline(kv: &KvHistory, level: IsolationLevel) -> Vec<Seen> {
    let report = check_chronos_kv(kv.clone(), level).unwrap().0;
    let mut seen: Vec<Seen> = report.anomalies.into_iter().map(|a| (a.kind, a.explanation)).collect();
    seen.sort();
    seen
}

/// The anomalies `partitions` scoped checkers find when the transactions of `kv` (text
/// `header` + `lines`) arrive in `order`, each after the watermark of a producer that
/// knows the whole order (the lowest commit timestamp still to come); sorted, with how many
/// were final before the end. Asserts that every early one is among the final ones.
fn online(
    kv: &KvHistory,
    (header, lines): (&str, &[String]),
    order: &[TxnId],
    level: IsolationLevel,
    partitions: u32,
    initial: Option<&Scalar>,
) -> (Vec<Seen>, usize) {
    let partitioning = Partitioning::new(partitions);
    // The watermark after each arrival: the lowest start and commit timestamps of what follows.
    let mut bound_after = vec![Watermark::END; order.len()];
    for i in (0..order.len().saturating_sub(1)).rev() {
        let t = order[i + 1];
        let mut next = bound_after[i + 1];
        if let (Some(start), Some(commit)) = (kv.start_ts(t), kv.commit_ts(t)) {
            next = next.min(Watermark { start, commit });
        }
        bound_after[i] = next;
    }
    let (mut all, mut early) = (Vec::new(), 0);
    for p in 0..partitions {
        let mine: Vec<usize> =
            (0..order.len()).filter(|&i| partitioning.of_txn(kv, order[i]).contains(&p)).collect();
        let mut text = header.to_string();
        for &i in &mine {
            text.push_str(&lines[order[i].index()]);
        }
        let mut part = read_kv_v1_bytes(text.as_bytes()).unwrap();
        part.set_default_initial(initial);
        let scope = Some(AionScope { partitioning, owned: p });
        let options =
            AionOptions { delay: AionDelay::Watermark, gc_every: 64, scope, ..AionOptions::new(level) };
        let mut aion = Aion::new(options).unwrap();
        let mut found: Vec<Seen> = Vec::new();
        for (j, &i) in mine.iter().enumerate() {
            aion.receive(&part, TxnId::from_index(j)).unwrap();
            aion.complete_below(&part, bound_after[i]);
            found.extend(aion.take_final().iter().map(|a| (a.kind, a.explanation.clone())));
        }
        assert_eq!(aion.beyond_watermark(), 0);
        let report = aion.finish(&part);
        assert!(report.notes.is_empty(), "{:?}", report.notes);
        let mut finals: Vec<Seen> = report.anomalies.into_iter().map(|a| (a.kind, a.explanation)).collect();
        for seen in &found {
            assert!(finals.contains(seen), "an early verdict that did not stand: {seen:?}");
        }
        early += found.len();
        all.append(&mut finals);
    }
    all.sort();
    (all, early)
}

/// Generated histories (valid, and with each injection Chronos sees) at SI and SER:
/// 1 and 4 partitions give Chronos's anomalies in file order, 2 shuffled (out of order
/// within the watermark).
#[test]
fn partitions_together_find_what_chronos_finds_on_generated_histories() {
    let mut invalid = 0;
    let mut early = 0;
    for seed in 0..2 {
        let injections = std::iter::once(None)
            .chain(Injection::ALL.iter().copied().filter(|i| !i.needs_predicates()).map(Some));
        for inject in injections {
            for isolation in [IsolationLevel::SnapshotIsolation, IsolationLevel::Serializable] {
                let cfg = GenConfig {
                    txns: 200,
                    sessions: 6,
                    keys: 30,
                    seed,
                    isolation,
                    inject,
                    ..GenConfig::default()
                };
                let Ok(g) = generate(&cfg) else { continue };
                let (header, lines) = lines_of(&g.history);
                let kv = read_kv_v1_bytes(format!("{header}{}", lines.concat()).as_bytes()).unwrap();
                for level in [SI, SER] {
                    let expected = offline(&kv, level);
                    invalid += usize::from(!expected.is_empty());
                    let file_order: Vec<TxnId> = kv.txn_ids().collect();
                    for (order, counts) in
                        [(file_order, &[1, 4][..]), (shuffled(&kv, seed + 11, 40), &[2][..])]
                    {
                        for &partitions in counts {
                            let (found, e) = online(&kv, (&header, &lines), &order, level, partitions, None);
                            assert_eq!(
                                found, expected,
                                "seed {seed} {inject:?} {isolation:?} {level:?} P={partitions}"
                            );
                            early += e;
                        }
                    }
                }
            }
        }
    }
    assert!(invalid >= 20, "the injections were seen: {invalid}");
    assert!(early > 0, "watermarks made verdicts final before the end");
}

/// Many sessions, equal timestamps and every axiom broken (the Aion tests' generator),
/// arriving in file order: ties at one timestamp run in arrival order in each partition,
/// which is then file order, as offline.
#[test]
fn partitions_together_find_what_chronos_finds_with_ties_and_conflicts() {
    for seed in 1..4 {
        let kv = generate_kv(seed, 1500, 8, 25, 30, true);
        let h = kv.clone().into_history();
        let (header, lines) = lines_of(&h);
        for level in [SI, SER] {
            let mut expected = offline(&kv, level);
            expected.sort();
            assert!(!expected.is_empty());
            for partitions in [2, 4] {
                let order: Vec<TxnId> = kv.txn_ids().collect();
                let (found, early) =
                    online(&kv, (&header, &lines), &order, level, partitions, Some(&Scalar::Int(0)));
                assert_eq!(found, expected, "seed {seed} {level:?} P={partitions}");
                assert!(early > 0);
            }
        }
    }
}

/// A writer arriving after the watermark passed its commit: counted and noted, while one
/// within the watermark clears the tentative Ext verdict.
#[test]
fn a_writer_beyond_the_watermark_is_reported() {
    let text = "{\"id\":1,\"session\":1,\"start_ts\":10,\"commit_ts\":11,\"ops\":[{\"f\":\"r\",\"key\":\"y\",\"value\":1}]}\n\
                {\"id\":2,\"session\":2,\"start_ts\":2,\"commit_ts\":3,\"ops\":[{\"f\":\"w\",\"key\":\"y\",\"value\":1}]}\n";
    let kv = read_kv_v1_bytes(text.as_bytes()).unwrap();
    let options = AionOptions { delay: AionDelay::Watermark, ..AionOptions::new(SI) };
    // Within the watermark (nothing below 3 promised): the writer justifies the read.
    let mut aion = Aion::new(options).unwrap();
    aion.receive(&kv, TxnId(0)).unwrap();
    aion.complete_below(&kv, Watermark { start: Timestamp::new(2), commit: Timestamp::new(3) });
    assert!(aion.take_final().is_empty() && aion.pending() == 1, "the read started at 10, after the bound");
    aion.receive(&kv, TxnId(1)).unwrap();
    aion.complete_below(&kv, Watermark::END);
    assert!(aion.take_final().is_empty() && aion.pending() == 0);
    assert!(aion.finish(&kv).is_valid());
    // Beyond it: the read was final (an Ext violation) before the writer came.
    let mut aion = Aion::new(options).unwrap();
    aion.receive(&kv, TxnId(0)).unwrap();
    aion.complete_below(&kv, Watermark { start: Timestamp::new(10), commit: Timestamp::new(11) });
    assert_eq!(aion.take_final().len(), 1);
    aion.receive(&kv, TxnId(1)).unwrap();
    assert_eq!(aion.beyond_watermark(), 1);
    let report = aion.finish(&kv);
    assert!(report.notes.iter().any(|n| n.contains("watermark")), "{:?}", report.notes);
}
