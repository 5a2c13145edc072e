//! Aion split across partitions ([`AionScope`]) with watermark finality, against Chronos:
//! each partition's checker sees only the transactions that reach it (those touching its
//! objects or its sessions), in the order they arrive, and the producers' watermark; the
//! union of the partitions' anomalies must be Chronos's, anomaly for anomaly, and each
//! anomaly made final before the end must be one of them. Each partition receives either
//! the whole line of every transaction touching it or only its share
//! ([`Partitioning::split_line`]); both must give Chronos's explanations.

use isocert_gen::{generate, GenConfig, Injection};
use isocert_history::{read_kv_v1_bytes, v1, History, KvHistory, Scalar, Timestamp, TxnId};

use super::tests::{generate as generate_kv, shuffled};
use super::{Aion, AionDelay, AionOptions, AionScope, Watermark};
use crate::{check_chronos_kv, AnomalyKind, IsolationLevel, Partitioning, TxnPart};

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

/// What each partition receives of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sending {
    /// The whole line, to every partition it touches.
    Whole,
    /// Each partition its share ([`Partitioning::split_line`]), with the original operation numbers.
    Split,
}

/// The anomalies `partitions` scoped checkers find when the transactions of `kv` (text
/// `header` + `lines`) arrive in `order`, each after the watermark of a producer that
/// knows the whole order (the lowest commit timestamp still to come), each partition
/// receiving what `sending` says; sorted, with how many were final before the end.
/// Asserts that every early one is among the final ones.
fn online(
    kv: &KvHistory,
    (header, lines): (&str, &[String]),
    order: &[TxnId],
    level: IsolationLevel,
    (partitions, sending): (u32, Sending),
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
    // Each transaction's shares, split once.
    let shares: Vec<Vec<TxnPart>> = match sending {
        Sending::Whole => Vec::new(),
        Sending::Split => kv
            .txn_ids()
            .map(|t| {
                let session = partitioning.of_session(kv.dict().session_name(kv.session(t)));
                let line = lines[t.index()].trim_end().as_bytes();
                Partitioning::split_line(line, session, &partitioning.of_ops(kv, t)).unwrap()
            })
            .collect(),
    };
    let (mut all, mut early) = (Vec::new(), 0);
    for p in 0..partitions {
        let mine: Vec<usize> =
            (0..order.len()).filter(|&i| partitioning.of_txn(kv, order[i]).contains(&p)).collect();
        let mut text = header.to_string();
        let mut numbers: Vec<Vec<u32>> = Vec::new();
        for &i in &mine {
            let t = order[i];
            let line = &lines[t.index()];
            if sending == Sending::Whole {
                text.push_str(line);
                numbers.push((0..kv.ops(t).len() as u32).collect());
                continue;
            }
            let share = shares[t.index()]
                .iter()
                .find(|s| s.partition == p)
                .expect("a share for each partition touched");
            text.push_str(std::str::from_utf8(&share.line).unwrap());
            text.push('\n');
            numbers.push(share.ops.clone());
        }
        let mut part = read_kv_v1_bytes(text.as_bytes()).unwrap();
        part.set_default_initial(initial);
        let scope = Some(AionScope { partitioning, owned: p });
        let options =
            AionOptions { delay: AionDelay::Watermark, gc_every: 64, scope, ..AionOptions::new(level) };
        let mut aion = Aion::new(options).unwrap();
        let mut found: Vec<Seen> = Vec::new();
        for (j, &i) in mine.iter().enumerate() {
            aion.receive_part(&part, TxnId::from_index(j), &numbers[j]).unwrap();
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
/// within the watermark); with more than one, each partition gets its split shares.
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
                            // One partition gets every line whole; more get the split shares.
                            let sending = if partitions == 1 { Sending::Whole } else { Sending::Split };
                            let (found, e) =
                                online(&kv, (&header, &lines), &order, level, (partitions, sending), None);
                            assert_eq!(
                                found, expected,
                                "seed {seed} {inject:?} {isolation:?} {level:?} P={partitions} {sending:?}"
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
                for sending in [Sending::Whole, Sending::Split] {
                    let order: Vec<TxnId> = kv.txn_ids().collect();
                    let (found, early) = online(
                        &kv,
                        (&header, &lines),
                        &order,
                        level,
                        (partitions, sending),
                        Some(&Scalar::Int(0)),
                    );
                    assert_eq!(found, expected, "seed {seed} {level:?} P={partitions} {sending:?}");
                    assert!(early > 0);
                }
            }
        }
    }
}

/// Brute force over many small histories (every axiom broken, ties, overlapping writers)
/// and partition counts: the union over partitions of scoped Aion on the split shares is
/// Chronos on the whole history, explanation for explanation (operation numbers
/// included), and so is each whole-line run.
#[test]
fn split_shares_find_what_chronos_finds_on_many_small_histories() {
    let mut compared = 0;
    for seed in 0..40u64 {
        let kv = generate_kv(
            100 + seed,
            120,
            1 + (seed as usize % 7),
            6 + seed % 20,
            (seed % 5) as usize,
            seed % 2 == 0,
        );
        let h = kv.clone().into_history();
        let (header, lines) = lines_of(&h);
        let order: Vec<TxnId> = kv.txn_ids().collect();
        for level in [SI, SER] {
            let expected = offline(&kv, level);
            compared += expected.len();
            let partitions = 1 + (seed % 5) as u32;
            let (found, _) = online(
                &kv,
                (&header, &lines),
                &order,
                level,
                (partitions, Sending::Split),
                Some(&Scalar::Int(0)),
            );
            assert_eq!(found, expected, "seed {seed} {level:?} P={partitions}");
        }
    }
    assert!(compared > 100, "anomalies were compared: {compared}");
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
