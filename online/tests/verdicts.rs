//! With 1, 2 and 4 members the online verdict is offline Chronos's, anomaly for anomaly,
//! and no anomaly is reported twice.

use isocert_checker::IsolationLevel;
use isocert_gen::Injection;
use isocert_online::{emit_file, Emitter, OnlineTarget};

use crate::support::{history, offline, run_group, seen, unique, KafkaBroker};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;

/// A valid history and one breaking each axiom (lost update for NoConflict; write skew,
/// which only serializability rejects), each on its own topic of 4 partitions, checked by
/// groups of 1, 2 and 4 members at once (the checker's own tests cover every injection).
#[test]
fn one_two_and_four_members_report_what_chronos_reports() {
    let Some(broker) = KafkaBroker::start() else { return };
    let cases = [
        (None, IsolationLevel::SnapshotIsolation, SI),
        (Some(Injection::Session), IsolationLevel::SnapshotIsolation, SI),
        (Some(Injection::Int), IsolationLevel::SnapshotIsolation, SI),
        (Some(Injection::Ext), IsolationLevel::SnapshotIsolation, SI),
        (Some(Injection::LostUpdate), IsolationLevel::SnapshotIsolation, SI),
        (Some(Injection::WriteSkew), IsolationLevel::SnapshotIsolation, SER),
    ];
    let mut checks = Vec::new();
    for (i, &(inject, isolation, level)) in cases.iter().enumerate() {
        let text = history(400, i as u64, isolation, inject);
        let expected = offline(&text, level);
        assert_eq!(expected.is_empty(), inject.is_none(), "{inject:?} shows in Chronos");
        let target =
            OnlineTarget { brokers: broker.bootstrap().to_string(), topic: unique(&format!("verdicts{i}")) };
        let emitter = Emitter::connect(&target, "emitter", 4).unwrap();
        let txns = isocert_history::read_kv_v1_bytes(&text).unwrap().len() as u64;
        assert_eq!(emit_file(emitter, &text, 64, None).unwrap(), txns);
        for members in [1, 2, 4] {
            let target = target.clone();
            let expected = expected.clone();
            checks.push(std::thread::spawn(move || {
                let group = format!("{}-g{members}", target.topic);
                let results = run_group(&target, &group, level, members);
                let mut reported = Vec::new();
                for (summary, mine) in &results {
                    assert_eq!(seen(&summary.anomalies), expected, "{inject:?} with {members} members");
                    assert!(summary.late.is_empty());
                    assert_eq!(summary.partitions.len(), 4);
                    reported.extend(mine.iter().cloned());
                }
                assert_eq!(
                    seen(&reported),
                    expected,
                    "each anomaly printed once, by one member ({inject:?}, {members})"
                );
            }));
        }
    }
    for check in checks {
        check.join().unwrap();
    }
}
