//! The messages themselves (protocol 2, docs/ONLINE.md "Messages"): a transaction's shares
//! are batched, so a topic holds far fewer messages than transactions; a message of a kind
//! a member does not know stops it with an error, never a skip.

use std::time::Duration;

use isocert_checker::IsolationLevel;
use isocert_online::{emit_file, ensure_topic, run_member, Emitter, OnlineTarget};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::support::{history, options, unique, KafkaBroker};

/// Emitting 2,000 transactions to 4 partitions takes a few `parts` messages per partition
/// and mark interval, not one message per transaction and partition touched.
#[test]
fn shares_travel_in_batches() {
    let Some(broker) = KafkaBroker::start() else { return };
    let target = OnlineTarget { brokers: broker.bootstrap().to_string(), topic: unique("batches") };
    let text = history(2000, 3, IsolationLevel::SnapshotIsolation, None);
    let emitter = Emitter::connect(&target, "emitter", 4).unwrap();
    assert_eq!(emit_file(emitter, &text, 256, None).unwrap(), 2000);
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", &target.brokers).create().unwrap();
    let mut messages = 0;
    for p in 0..4 {
        let (low, high) = consumer.fetch_watermarks(&target.topic, p, Duration::from_secs(10)).unwrap();
        messages += high - low;
    }
    // Per partition: hello, 7 marks and the end, then the parts messages: a few per mark
    // interval (more when the 5 ms linger expires on a slow machine), where one message per
    // transaction and partition touched would be about 6,800.
    assert!((4 * 9 + 4 * 8..=1000).contains(&messages), "{messages} messages for 2,000 transactions");
}

/// A member meeting a message kind it does not know (a newer producer's) stops with an
/// error naming the kind and the producer; it does not skip the message.
#[test]
fn an_unknown_message_kind_stops_the_member() {
    let Some(broker) = KafkaBroker::start() else { return };
    let target = OnlineTarget { brokers: broker.bootstrap().to_string(), topic: unique("future") };
    ensure_topic(&target.brokers, &target.topic, 1, &[]).unwrap();
    let producer: BaseProducer =
        ClientConfig::new().set("bootstrap.servers", &target.brokers).create().unwrap();
    producer
        .send(BaseRecord::to(&target.topic).key("hello:newer").payload("isocert-online 2").partition(0))
        .unwrap();
    producer.send(BaseRecord::to(&target.topic).key("deltas:newer").payload("{}").partition(0)).unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    let mut o = options(&target, &format!("{}-g", target.topic), IsolationLevel::SnapshotIsolation, "m");
    o.partitions = 1;
    let e = run_member(&o, |_| {}).unwrap_err().to_string();
    assert!(e.contains("offset 1") && e.contains("\"deltas\"") && e.contains("producer newer"), "{e}");
}
