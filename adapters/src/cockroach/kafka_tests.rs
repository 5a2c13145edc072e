//! The Kafka sink's consumer against a real broker (tansu, or `ISOCERT_TEST_KAFKA`:
//! `isocert_testsupport::KafkaBroker`; SKIPPED when there is none, a failure under CI=true).
//! librdkafka's mock broker is no longer used: it answers no CreateTopics request (the
//! capture's first step) and lists any topic it is asked about, which hid issue 33. CockroachDB itself is a minimal pgwire server, and
//! its v2 Kafka sink is emulated as `pkg/ccl/changefeedccl/sink_kafka_v2.go` (cockroachdb/cockroach master, 2024)
//! behaves: once the job exists it lists the topic (it never creates one), sends each row
//! change keyed `[id]` and each resolved message to every partition it listed.

use std::sync::{Arc, Mutex};

use isocert_testsupport::KafkaBroker;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use super::*;

const T1: &str = "1700000001000000000.0000000000";
const T2: &str = "1700000002000000000.0000000001";
const RESOLVED: &str = "1700000003000000000.0000000000";
const CURSOR: &str = "1700000000000000000.0000000000";
const END: &str = "1700000002500000000.0000000000";

#[test]
fn kafka_urls_name_brokers_a_topic_prefix_and_a_partition_count() {
    let t = KafkaTarget::parse("kafka://b1:9092,b2:9092/run7_").unwrap();
    assert_eq!((t.brokers.as_str(), t.topic("items")), ("b1:9092,b2:9092", "run7_items".to_string()));
    assert_eq!((t.sink_uri(), t.partitions), ("kafka://b1:9092?topic_prefix=run7_".into(), 1));
    assert_eq!(KafkaTarget::parse("kafka://b:9092").unwrap().sink_uri(), "kafka://b:9092");
    let t = KafkaTarget::parse("kafka://127.0.0.1:9092/p_?sink=kafka:19092&partitions=6").unwrap();
    assert_eq!(
        (t.brokers.as_str(), t.sink_uri(), t.partitions),
        ("127.0.0.1:9092", "kafka://kafka:19092?topic_prefix=p_".into(), 6)
    );
    assert!(KafkaTarget::parse("kafka://b:1/p?x=1").unwrap_err().to_string().contains("x=1"));
    for bad in ["0", "-1", "two", "5000"] {
        let e = KafkaTarget::parse(&format!("kafka://b:1/p?partitions={bad}")).unwrap_err().to_string();
        assert!(e.contains(&format!("partitions={bad}")) && e.contains("1 to 1024"), "{e}");
    }
    assert!(KafkaTarget::parse("http://b/x").is_err() && KafkaTarget::parse("kafka:///x").is_err());
}

fn change(key: i64, v: i64, at: &str) -> String {
    format!(
        r#"{{"after": {{"id": {key}, "v": {v}}}, "before": null, "mvcc_timestamp": "{at}", "updated": "{at}"}}"#
    )
}

fn producer(brokers: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        // As CockroachDB's v2 sink asks for; a broker configured against it refuses anyway.
        .set("allow.auto.create.topics", "false")
        .set("message.timeout.ms", "5000")
        .create()
        .unwrap()
}

async fn send(producer: &FutureProducer, topic: &str, partition: i32, key: Option<&str>, value: &str) {
    let mut record = FutureRecord::to(topic).payload(value).partition(partition);
    if let Some(k) = key {
        record = record.key(k);
    }
    producer.send(record, Duration::from_secs(5)).await.map_err(|(e, _)| e).unwrap();
}

/// What CockroachDB's v2 Kafka sink does once the changefeed job runs: list the topic (no
/// creation) and, when it is there, send two row changes and a resolved message to every
/// partition listed. Returns what it did, for the test's messages.
async fn emulate_sink(brokers: String, topic: String) -> Result<u32, String> {
    let producer = producer(&brokers);
    let metadata = producer
        .client()
        .fetch_metadata(Some(&topic), Duration::from_secs(5))
        .map_err(|e| format!("listing topics: {e}"))?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len() as i32)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("cannot flush resolved timestamp for unknown topic {topic}"))?;
    send(&producer, &topic, 0, Some("[1]"), &change(1, 11, T1)).await;
    send(&producer, &topic, partitions - 1, Some("[2]"), &change(2, 22, T2)).await;
    for p in 0..partitions {
        send(&producer, &topic, p, None, &format!(r#"{{"resolved": "{RESOLVED}"}}"#)).await;
    }
    Ok(partitions as u32)
}

type Recorded = Arc<Mutex<Vec<String>>>;

/// A topic prefix no earlier run used, so tests on a broker of yours (`ISOCERT_TEST_KAFKA`)
/// never meet an earlier run's topics.
fn unique(prefix: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{prefix}{}_{nanos}_", std::process::id())
}

/// A minimal pgwire server answering what the Kafka capture sends: the timestamps, the
/// `CREATE CHANGEFEED ... INTO` (a job id, as CockroachDB answers a sink changefeed, and the
/// emulated sink started on `brokers`) and `CANCEL JOB`; it records the statements and what
/// the sink did.
async fn fake_cockroach(statements: Recorded, sink: Recorded, brokers: String, topic: String) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend(((body.len() + 4) as u32).to_be_bytes());
        out.extend(body);
        out
    }
    fn one_value(name: &str, value: &str) -> Vec<u8> {
        let mut d = 1u16.to_be_bytes().to_vec();
        d.extend(name.as_bytes());
        d.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 255, 255, 255, 255, 255, 255, 0, 0]);
        let mut out = msg(b'T', &d);
        let mut row = 1u16.to_be_bytes().to_vec();
        row.extend((value.len() as u32).to_be_bytes());
        row.extend(value.as_bytes());
        out.extend(msg(b'D', &row));
        out
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let clock = Arc::new(Mutex::new(vec![CURSOR, END]));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (statements, clock, sink) = (statements.clone(), clock.clone(), sink.clone());
            let (brokers, topic) = (brokers.clone(), topic.clone());
            tokio::spawn(async move {
                let mut len = [0u8; 4];
                socket.read_exact(&mut len).await.unwrap();
                let mut startup = vec![0u8; u32::from_be_bytes(len) as usize - 4];
                socket.read_exact(&mut startup).await.unwrap();
                let mut hello = msg(b'R', &0u32.to_be_bytes());
                hello.extend(msg(b'Z', b"I"));
                socket.write_all(&hello).await.unwrap();
                loop {
                    let mut head = [0u8; 5];
                    if socket.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let n = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize - 4;
                    let mut body = vec![0u8; n];
                    socket.read_exact(&mut body).await.unwrap();
                    if head[0] != b'Q' {
                        return;
                    }
                    let sql = String::from_utf8_lossy(&body).trim_end_matches('\0').to_string();
                    statements.lock().unwrap().push(sql.clone());
                    let mut out = if sql.starts_with("SELECT cluster_logical_timestamp()") {
                        one_value("cluster_logical_timestamp", clock.lock().unwrap().remove(0))
                    } else if sql.starts_with("CREATE CHANGEFEED") {
                        let (sink, brokers, topic) = (sink.clone(), brokers.clone(), topic.clone());
                        tokio::spawn(async move {
                            let outcome = emulate_sink(brokers, topic).await;
                            sink.lock().unwrap().push(format!("{outcome:?}"));
                        });
                        one_value("job_id", "1017")
                    } else {
                        Vec::new()
                    };
                    out.extend(msg(b'C', b"OK\0"));
                    out.extend(msg(b'Z', b"I"));
                    socket.write_all(&out).await.unwrap();
                }
            });
        }
    });
    port
}

/// The topic's partition count on `brokers`, or `None` when the broker does not list it.
fn listed_partitions(brokers: &str, topic: &str) -> Option<usize> {
    let probe = producer(brokers);
    let metadata = probe.client().fetch_metadata(Some(topic), Duration::from_secs(5)).ok()?;
    metadata.topics().iter().find(|t| t.name() == topic && t.error().is_none()).map(|t| t.partitions().len())
}

/// The whole Kafka capture on `brokers` with `?partitions=2`: the topic created before the
/// changefeed job, the emulated sink's messages read until the watermark passes the end of
/// the run, the job cancelled and the topic deleted. Returns the statements sent.
async fn whole_capture(brokers: &str, prefix: &str) -> Vec<String> {
    use crate::{CaptureOptions, ChangeCapture, CockroachDb, Database, TableSpec};

    let topic = format!("{prefix}items");
    let (statements, sink) = (Recorded::default(), Recorded::default());
    let port = fake_cockroach(statements.clone(), sink.clone(), brokers.to_string(), topic.clone()).await;
    let db = CockroachDb::from_url(&format!("cockroachdb://root@127.0.0.1:{port}/defaultdb")).unwrap();
    let options = CaptureOptions {
        run_name: "t".into(),
        mode: Some(format!("kafka://{brokers}/{prefix}?sink=kafka:19092&partitions=2")),
        poll_interval: Duration::ZERO,
    };
    let table = TableSpec::integers("items", &["id", "v"]);
    let mut capture = db.start_capture(&table, &options).await.unwrap();
    capture.wait_started(Duration::from_secs(20)).await.unwrap();
    let log = tokio::time::timeout(Duration::from_secs(30), capture.finish(None))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}; the sink: {:?}", sink.lock().unwrap()));
    assert_eq!((log.len(), log.change_count()), (2, 2));
    assert_eq!(sink.lock().unwrap().clone(), ["Ok(2)"], "the sink found the topic with 2 partitions");
    assert_eq!(listed_partitions(brokers, &topic), None, "the topic the capture created is deleted");
    let sent = statements.lock().unwrap().clone();
    let create = sent.iter().find(|s| s.starts_with("CREATE CHANGEFEED")).unwrap();
    assert!(
        create.contains(&format!("INTO 'kafka://kafka:19092?topic_prefix={prefix}'"))
            && create.contains(&format!("cursor = '{CURSOR}'")),
        "{create}"
    );
    assert!(sent.contains(&"CANCEL JOB 1017".to_string()), "{sent:?}");
    sent
}

/// Issue 33: on a broker that creates no topic, the capture used to wait for a topic that
/// nothing would create (the sink lists topics, no row changes before the capture starts).
#[tokio::test]
async fn the_kafka_capture_creates_its_topic_before_the_job_on_a_real_broker() {
    let Some(broker) = KafkaBroker::start() else { return };
    whole_capture(broker.bootstrap(), &unique("issue33_")).await;
}

/// What the test broker does with a topic nobody created: it does not list it to a client
/// that does not ask for creation (librdkafka's consumer, as the capture's; the emulated
/// sink's listing), so the capture cannot count on anything else creating its topic. Like
/// Apache Kafka with its default `auto.create.topics.enable=true`, tansu creates a topic for
/// a Metadata request that asks (`allow_auto_topic_creation`, librdkafka's producer default).
#[tokio::test]
async fn the_real_test_broker_lists_no_topic_nobody_created() {
    let Some(broker) = KafkaBroker::start() else { return };
    if !broker.is_private() {
        return; // An external broker's configuration is its owner's.
    }
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "isocert-probe")
        .create()
        .unwrap();
    for _ in 0..3 {
        let m = consumer.fetch_metadata(Some("nobody_made_me"), Duration::from_secs(5)).unwrap();
        assert!(m.topics().iter().all(|t| t.name() != "nobody_made_me" || t.error().is_some()));
    }
    assert_eq!(listed_partitions(broker.bootstrap(), "nobody_made_me"), None);
    let asking = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("allow.auto.create.topics", "true")
        .create::<FutureProducer>()
        .unwrap();
    asking.client().fetch_metadata(Some("asked_for"), Duration::from_secs(5)).unwrap();
    assert!(listed_partitions(broker.bootstrap(), "asked_for").is_some());
}

/// A topic that exists is read from its end (an earlier run's messages are not this run's)
/// and left in place; two partitions, a redelivery, partitions out of order, and the
/// watermark held back until both partitions resolved.
async fn existing_topic_read_from_its_end(brokers: &str, topic: &str) {
    let target =
        KafkaTarget::parse(&format!("kafka://{brokers}/{}", topic.trim_end_matches("items"))).unwrap();
    let first = KafkaFeed::prepare(
        &KafkaTarget { partitions: 2, ..target.clone() },
        "items",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!((first.origin(), first.partitions()), (TopicOrigin::Created, 2));
    let producer = producer(brokers);
    // An earlier run's change of row 1, at a later timestamp than this run's.
    send(&producer, topic, 0, Some("[1]"), &change(1, 99, RESOLVED)).await;
    let feed = KafkaFeed::prepare(&target, "items", Duration::from_secs(20)).await.unwrap();
    assert_eq!((feed.origin(), feed.partitions(), feed.created_topic()), (TopicOrigin::Existing, 2, None));
    let resolved = format!(r#"{{"resolved": "{RESOLVED}"}}"#);
    for (partition, key, value) in [
        (1, Some("[2]"), change(2, 22, T2)),
        (0, Some("[1]"), change(1, 11, T1)),
        (0, None, resolved.clone()),
        (0, Some("[1]"), change(1, 11, T1)),
        (1, None, resolved.clone()),
    ] {
        send(&producer, topic, partition, key, &value).await;
    }
    let shared = std::sync::Mutex::new(FeedLog::new());
    let log = || shared.lock().unwrap();
    let mut seen = 0;
    let target = isocert_recovery::parse_hlc(RESOLVED).unwrap();
    feed.read_until(log, Some(target), Duration::from_secs(20), |_| seen += 1).await.unwrap();
    assert!(seen >= 4 && log().is_complete(), "{seen}");
    feed.read_until(log, None, Duration::from_millis(500), |_| seen += 1).await.unwrap();
    assert_eq!(seen, 5, "the earlier run's message is not read");
    let log = shared.into_inner().unwrap();
    assert_eq!((log.txn_count(), log.change_count(), log.duplicates()), (2, 2, 1));
    let raw = log.to_raw_log();
    let keys: Vec<String> = raw.txns().iter().map(|t| t.changes[0].key.to_string()).collect();
    assert_eq!(keys, ["1", "2"], "ordered by HLC, not by arrival");
    // Every client of the topic goes before the topic does (see `ChangefeedCapture::finish`).
    let (b, t) = first.created_topic().unwrap();
    drop((first, feed, producer));
    delete_topic(&b, &t, Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn an_existing_topic_is_read_from_its_end_on_a_real_broker() {
    let Some(broker) = KafkaBroker::start() else { return };
    existing_topic_read_from_its_end(broker.bootstrap(), &format!("{}items", unique("issue33_old_"))).await;
}
