//! Producers on different machines: their transactions interleave arbitrarily on each
//! partition, within each one's watermark; a transaction beyond the watermark is reported.

use isocert_checker::{IsolationLevel, Watermark};
use isocert_gen::Injection;
use isocert_history::{read_kv_v1_bytes, Timestamp, TxnId};
use isocert_online::{emit_file, run_member, Emitter, LiveEmitter, OnlineTarget};

use crate::support::{history, offline, options, run_group, seen, unique, KafkaBroker};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;

/// A history split by session into two producers' files (each in file order), published
/// at once: the online verdict is Chronos's on the whole file.
#[test]
fn two_producers_merge_into_the_offline_verdict() {
    let Some(broker) = KafkaBroker::start() else { return };
    let runs: Vec<_> = [None, Some(Injection::NoConflict), Some(Injection::Ext)]
        .into_iter()
        .map(|inject| {
            let bootstrap = broker.bootstrap().to_string();
            std::thread::spawn(move || {
                let text = history(800, 7, IsolationLevel::SnapshotIsolation, inject);
                let expected = offline(&text, SI);
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for line in text.split_inclusive(|&c| c == b'\n') {
                    let line_text = std::str::from_utf8(line).unwrap();
                    let session = line_text.split("\"session\":").nth(1).map_or(0, |rest| {
                        rest.chars()
                            .take_while(char::is_ascii_digit)
                            .collect::<String>()
                            .parse::<u64>()
                            .unwrap()
                    });
                    if session.is_multiple_of(2) {
                        a.extend_from_slice(line);
                    } else {
                        b.extend_from_slice(line);
                    }
                }
                let target = OnlineTarget { brokers: bootstrap, topic: unique("producers") };
                let ea = Emitter::connect(&target, "machine-a", 3).unwrap();
                let eb = Emitter::connect(&target, "machine-b", 3).unwrap();
                let pa = std::thread::spawn(move || emit_file(ea, &a, 16, None).unwrap());
                let pb = std::thread::spawn(move || emit_file(eb, &b, 16, None).unwrap());
                let mut opts = options(&target, &format!("{}-g", target.topic), SI, "m0");
                opts.producers = 2;
                let summary = run_member(&opts, |_| {}).unwrap();
                assert_eq!(
                    pa.join().unwrap() + pb.join().unwrap(),
                    read_kv_v1_bytes(&text).unwrap().len() as u64
                );
                assert_eq!(seen(&summary.anomalies), expected, "{inject:?}");
                assert!(summary.late.is_empty());
            })
        })
        .collect();
    for run in runs {
        run.join().unwrap();
    }
}

/// A producer whose watermark says nothing will commit before 1000 and then publishes a
/// transaction committing at 3: reported beyond the watermark (not a silent verdict).
#[test]
fn a_transaction_beyond_the_watermark_is_reported() {
    let Some(broker) = KafkaBroker::start() else { return };
    let target = OnlineTarget { brokers: broker.bootstrap().to_string(), topic: unique("late") };
    let lines = [
        "{\"id\":1,\"session\":1,\"start_ts\":1000,\"commit_ts\":1001,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":null}]}",
        "{\"id\":2,\"session\":2,\"start_ts\":2,\"commit_ts\":3,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":5}]}",
    ];
    let kv = read_kv_v1_bytes(lines.join("\n").as_bytes()).unwrap();
    let mut emitter = Emitter::connect(&target, "liar", 2).unwrap();
    let p = emitter.partitioning();
    let session = p.of_session(kv.dict().session_name(kv.session(TxnId(0))));
    emitter.transaction(lines[0].as_bytes(), session, &p.of_ops(&kv, TxnId(0))).unwrap();
    emitter.mark(Watermark { start: Timestamp::new(1000), commit: Timestamp::new(1001) }).unwrap();
    let session = p.of_session(kv.dict().session_name(kv.session(TxnId(1))));
    emitter.transaction(lines[1].as_bytes(), session, &p.of_ops(&kv, TxnId(1))).unwrap();
    emitter.finish().unwrap();
    let results = run_group(&target, "late", SI, 1);
    let (summary, _) = &results[0];
    assert_eq!(summary.late.len(), 1, "{summary:?}");
    assert_eq!(summary.late[0].txn, serde_json::json!(2));
    assert_eq!(summary.late[0].commit_ts, "3");
}

/// A test client publishing each transaction as it completes ([`LiveEmitter`]: watermarks
/// from the sessions' last commits) gets the offline verdict.
#[test]
fn a_live_client_publishing_as_it_goes_gets_the_offline_verdict() {
    let Some(broker) = KafkaBroker::start() else { return };
    let runs: Vec<_> = [None, Some(Injection::LostUpdate)]
        .into_iter()
        .map(|inject| {
            let bootstrap = broker.bootstrap().to_string();
            std::thread::spawn(move || {
                let text = history(500, 11, IsolationLevel::SnapshotIsolation, inject);
                let expected = offline(&text, SI);
                let h = isocert_history::v1::read_history(text.as_slice()).unwrap();
                let target = OnlineTarget { brokers: bootstrap, topic: unique("live") };
                let emitter = Emitter::connect(&target, "client", 2).unwrap();
                let mut live = LiveEmitter::new(emitter, h.session_count(), 8);
                for t in 0..h.txns.len() {
                    live.publish(&h, TxnId::from_index(t)).unwrap();
                }
                assert_eq!(live.finish().unwrap(), h.txns.len() as u64);
                let results = run_group(&target, &format!("{}-live", target.topic), SI, 2);
                for (summary, _) in &results {
                    assert_eq!(seen(&summary.anomalies), expected, "{inject:?}");
                    assert!(summary.late.is_empty(), "{:?}", summary.late);
                }
            })
        })
        .collect();
    for run in runs {
        run.join().unwrap();
    }
}
