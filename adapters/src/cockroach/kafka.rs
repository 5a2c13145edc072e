//! The changefeed's Kafka sink, consumed with rdkafka (cargo feature `kafka`).
//!
//! `--changefeed kafka://BROKER:9092[,BROKER2:9092]/PREFIX` makes the capture create
//! `CREATE CHANGEFEED FOR TABLE t INTO 'kafka://BROKER:9092?topic_prefix=PREFIX' WITH updated,
//! mvcc_timestamp, diff, resolved, ...` and read topic `PREFIX` + table name from its
//! beginning, every partition assigned explicitly (no group rebalancing; offsets are never
//! committed: each run reads its own topic from the start). Each message carries the key
//! (`[1]`) and the envelope exactly as the sinkless feed (docs "Changefeed Messages", Kafka
//! sink); resolved messages go to every partition, so the watermark is the lowest over all
//! partitions, and delivery is at least once: [`FeedLog`] drops redeliveries by (key,
//! `updated`).

use std::time::Duration;

use futures_util::StreamExt;
use isocert_history::Timestamp;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::changefeed::{parse_message, FeedLog};
use crate::AdapterError;

/// A parsed `kafka://BROKERS/PREFIX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaTarget {
    /// `host:port[,host:port...]`.
    pub brokers: String,
    /// The topic prefix (CockroachDB's `topic_prefix`; may be empty).
    pub topic_prefix: String,
    /// `?sink=HOST:PORT`: the broker as CockroachDB reaches it, when that differs from how
    /// isocert does (a broker in docker compose advertising `kafka:19092` inside and
    /// `127.0.0.1:9092` outside).
    pub sink_broker: Option<String>,
}

impl KafkaTarget {
    /// Parses `kafka://host:port[,host:port]/prefix[?sink=HOST:PORT]`.
    ///
    /// # Errors
    /// Another scheme or no broker.
    pub fn parse(text: &str) -> Result<Self, AdapterError> {
        let bad = |m: &str| AdapterError::NotSupportedHere { message: format!("--changefeed {text}: {m}") };
        let rest =
            text.strip_prefix("kafka://").ok_or_else(|| bad("use kafka://BROKER:PORT/TOPIC_PREFIX"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (brokers, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if brokers.is_empty() {
            return Err(bad("no broker"));
        }
        let mut sink_broker = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sink", b)) if !b.is_empty() => sink_broker = Some(b.to_string()),
                _ => return Err(bad(&format!("unknown parameter {pair:?} (only sink=HOST:PORT)"))),
            }
        }
        Ok(KafkaTarget { brokers: brokers.to_string(), topic_prefix: prefix.to_string(), sink_broker })
    }

    /// The topic CockroachDB writes `table`'s changes to.
    pub fn topic(&self, table: &str) -> String {
        format!("{}{table}", self.topic_prefix)
    }

    /// The sink URI for `CREATE CHANGEFEED ... INTO` (CockroachDB takes one bootstrap broker).
    pub fn sink_uri(&self) -> String {
        let first = match &self.sink_broker {
            Some(b) => b.as_str(),
            None => self.brokers.split(',').next().unwrap_or_default(),
        };
        if self.topic_prefix.is_empty() {
            format!("kafka://{first}")
        } else {
            format!("kafka://{first}?topic_prefix={}", self.topic_prefix)
        }
    }
}

fn kafka_error(context: &str, e: impl std::fmt::Display) -> AdapterError {
    AdapterError::Protocol { message: format!("Kafka: {context}: {e}") }
}

/// One changefeed topic, every partition read from its beginning.
#[allow(missing_debug_implementations)] // rdkafka's consumer is not Debug
pub struct KafkaFeed {
    consumer: StreamConsumer,
    table: String,
    partitions: u32,
}

impl KafkaFeed {
    /// Connects to `brokers`, waits (up to `timeout`) until `topic` exists, and assigns all
    /// its partitions from the beginning.
    ///
    /// # Errors
    /// The client cannot be made, or the topic does not appear in time.
    pub async fn open(
        brokers: &str,
        topic: &str,
        table: &str,
        timeout: Duration,
    ) -> Result<Self, AdapterError> {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("isocert-{topic}"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| kafka_error("creating the consumer", e))?;
        let deadline = tokio::time::Instant::now() + timeout;
        let partitions = loop {
            let found = consumer
                .fetch_metadata(Some(topic), Duration::from_secs(2))
                .ok()
                .and_then(|m| {
                    m.topics().iter().find(|t| t.name() == topic).map(|t| t.partitions().len() as u32)
                })
                .filter(|&n| n > 0);
            if let Some(n) = found {
                break n;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(kafka_error(&format!("topic {topic} at {brokers}"), "it did not appear in time"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
                .map_err(|e| kafka_error("assigning partitions", e))?;
        }
        consumer.assign(&assignment).map_err(|e| kafka_error("assigning partitions", e))?;
        Ok(KafkaFeed { consumer, table: table.to_string(), partitions })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Reads messages into `log` until its watermark (over all partitions) reaches
    /// `target`, or `timeout` passes; calls `progress` after each message.
    ///
    /// # Errors
    /// A consumer error, a message that is not a changefeed message (naming its partition
    /// and offset), or the timeout.
    pub async fn read_until(
        &self,
        log: &mut FeedLog,
        target: Option<Timestamp>,
        timeout: Duration,
        mut progress: impl FnMut(&FeedLog),
    ) -> Result<(), AdapterError> {
        log.expect_partitions(self.partitions);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut stream = self.consumer.stream();
        while target.is_none_or(|t| !log.covers(t)) {
            let next = tokio::time::timeout_at(deadline, stream.next()).await;
            let message = match next {
                Err(_) if target.is_none() => return Ok(()),
                Err(_) => {
                    return Err(kafka_error(
                        "waiting for the resolved timestamp",
                        format!(
                            "the watermark ({}) did not reach {} within {timeout:?}",
                            log.watermark().map_or("none yet".into(), |w| w.to_string()),
                            target.map_or(String::new(), |t| t.to_string())
                        ),
                    ))
                }
                Ok(None) => return Err(kafka_error("consuming", "the stream ended")),
                Ok(Some(Err(e))) => return Err(kafka_error("consuming", e)),
                Ok(Some(Ok(m))) => m,
            };
            let at = format!("partition {} offset {}", message.partition(), message.offset());
            let json = |bytes: Option<&[u8]>| -> Result<Option<serde_json::Value>, AdapterError> {
                bytes
                    .map(|b| {
                        serde_json::from_slice(b).map_err(|e| kafka_error(&at, format!("not JSON ({e})")))
                    })
                    .transpose()
            };
            let key = json(message.key())?;
            let value =
                json(message.payload())?.ok_or_else(|| kafka_error(&at, "a message without a value"))?;
            let parsed =
                parse_message(Some(&self.table), key.as_ref(), &value).map_err(|e| kafka_error(&at, e))?;
            log.push(message.partition() as u32, parsed).map_err(|e| kafka_error(&at, e))?;
            progress(log);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{FutureProducer, FutureRecord};

    use super::*;

    const T1: &str = "1700000001000000000.0000000000";
    const T2: &str = "1700000002000000000.0000000001";
    const RESOLVED: &str = "1700000003000000000.0000000000";

    #[test]
    fn kafka_urls_name_brokers_and_a_topic_prefix() {
        let t = KafkaTarget::parse("kafka://b1:9092,b2:9092/run7_").unwrap();
        assert_eq!((t.brokers.as_str(), t.topic("items")), ("b1:9092,b2:9092", "run7_items".to_string()));
        assert_eq!(t.sink_uri(), "kafka://b1:9092?topic_prefix=run7_");
        assert_eq!(KafkaTarget::parse("kafka://b:9092").unwrap().sink_uri(), "kafka://b:9092");
        let t = KafkaTarget::parse("kafka://127.0.0.1:9092/p_?sink=kafka:19092").unwrap();
        assert_eq!(
            (t.brokers.as_str(), t.sink_uri()),
            ("127.0.0.1:9092", "kafka://kafka:19092?topic_prefix=p_".into())
        );
        assert!(KafkaTarget::parse("kafka://b:1/p?x=1").unwrap_err().to_string().contains("x=1"));
        assert!(KafkaTarget::parse("http://b/x").is_err() && KafkaTarget::parse("kafka:///x").is_err());
    }

    /// Changefeed messages as CockroachDB's Kafka sink produces them (docs "Changefeed
    /// Messages": key `[id]`, the wrapped envelope, resolved messages to every partition),
    /// through librdkafka's mock broker: two partitions, a redelivery, and the watermark
    /// held back until both partitions resolved.
    #[tokio::test]
    async fn a_changefeed_topic_on_a_broker_becomes_the_feed_log() {
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("run_items", 2, 1).unwrap();
        let brokers = cluster.bootstrap_servers();
        let producer: FutureProducer =
            ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
        let change = |key: i64, v: i64, at: &str| {
            (
                format!("[{key}]"),
                format!(
                    r#"{{"after": {{"id": {key}, "v": {v}}}, "before": null, "mvcc_timestamp": "{at}", "updated": "{at}"}}"#
                ),
            )
        };
        let resolved = |at: &str| (None::<String>, format!(r#"{{"resolved": "{at}"}}"#));
        let sends: Vec<(i32, Option<String>, String)> = vec![
            // Row 2 (partition 1) before row 1 (partition 0): no order across partitions.
            {
                let (k, v) = change(2, 22, T2);
                (1, Some(k), v)
            },
            {
                let (k, v) = change(1, 11, T1);
                (0, Some(k), v)
            },
            {
                let (k, v) = resolved(RESOLVED);
                (0, k, v)
            },
            // A redelivery of row 1's change.
            {
                let (k, v) = change(1, 11, T1);
                (0, Some(k), v)
            },
            {
                let (k, v) = resolved(RESOLVED);
                (1, k, v)
            },
        ];
        for (partition, key, value) in &sends {
            let mut record = FutureRecord::to("run_items").payload(value).partition(*partition);
            if let Some(k) = key {
                record = record.key(k);
            }
            producer.send(record, Duration::from_secs(5)).await.unwrap();
        }
        let feed = KafkaFeed::open(&brokers, "run_items", "items", Duration::from_secs(10)).await.unwrap();
        assert_eq!(feed.partitions(), 2);
        let mut log = FeedLog::new();
        let mut seen = 0;
        let target = isocert_recovery::parse_hlc(RESOLVED).unwrap();
        feed.read_until(&mut log, Some(target), Duration::from_secs(20), |_| seen += 1).await.unwrap();
        // Partitions are read in any order: the watermark may pass before the redelivery.
        assert!(seen >= 4, "{seen}");
        assert!(log.is_complete());
        // Without a target, reading goes on until the timeout: the rest arrives.
        feed.read_until(&mut log, None, Duration::from_millis(500), |_| seen += 1).await.unwrap();
        assert_eq!(seen, 5);
        assert_eq!((log.txn_count(), log.change_count(), log.duplicates()), (2, 2, 1));
        let raw = log.to_raw_log();
        let keys: Vec<String> = raw.txns().iter().map(|t| t.changes[0].key.to_string()).collect();
        assert_eq!(keys, ["1", "2"], "ordered by HLC, not by arrival");
        // A topic that never appears is named.
        let e = KafkaFeed::open(&brokers, "absent", "items", Duration::from_millis(500)).await.err().unwrap();
        assert!(e.to_string().contains("topic absent"), "{e}");
    }

    /// A minimal pgwire server answering what the Kafka capture sends: the timestamps, the
    /// `CREATE CHANGEFEED ... INTO` (a job id, as CockroachDB answers a sink changefeed) and
    /// `CANCEL JOB`; it records the statements.
    async fn fake_cockroach(statements: std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> u16 {
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
        let clock = std::sync::Arc::new(std::sync::Mutex::new(vec![CURSOR, END]));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (statements, clock) = (statements.clone(), clock.clone());
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

    const CURSOR: &str = "1700000000000000000.0000000000";
    const END: &str = "1700000002500000000.0000000000";

    /// The whole Kafka capture: the changefeed job created INTO the sink named by
    /// `?sink=`, its topic read from the broker until the watermark passes the end of the
    /// run, and the job cancelled.
    #[tokio::test]
    async fn the_kafka_capture_creates_the_job_reads_its_topic_and_cancels_it() {
        use crate::{CaptureOptions, ChangeCapture, CockroachDb, Database, TableSpec};

        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("run_items", 2, 1).unwrap();
        let brokers = cluster.bootstrap_servers();
        let producer: FutureProducer =
            ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
        let value = |key: i64, v: i64, at: &str| {
            format!(
                r#"{{"after": {{"id": {key}, "v": {v}}}, "before": null, "mvcc_timestamp": "{at}", "updated": "{at}"}}"#
            )
        };
        let resolved = format!(r#"{{"resolved": "{RESOLVED}"}}"#);
        for (partition, key, payload) in [
            (0, Some("[1]"), value(1, 11, T1)),
            (1, Some("[2]"), value(2, 22, T2)),
            (0, None, resolved.clone()),
            (1, None, resolved.clone()),
        ] {
            let mut record = FutureRecord::to("run_items").payload(&payload).partition(partition);
            if let Some(k) = key {
                record = record.key(k);
            }
            producer.send(record, Duration::from_secs(5)).await.unwrap();
        }
        let statements = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let port = fake_cockroach(statements.clone()).await;
        let db = CockroachDb::from_url(&format!("cockroachdb://root@127.0.0.1:{port}/defaultdb")).unwrap();
        let options = CaptureOptions {
            run_name: "t".into(),
            mode: Some(format!("kafka://{brokers}/run_?sink=kafka:19092")),
            poll_interval: Duration::ZERO,
        };
        let table = TableSpec::integers("items", &["id", "v"]);
        let mut capture = db.start_capture(&table, &options).await.unwrap();
        capture.wait_started(Duration::from_secs(20)).await.unwrap();
        let log = tokio::time::timeout(Duration::from_secs(30), capture.finish(None)).await.unwrap().unwrap();
        assert_eq!((log.len(), log.change_count()), (2, 2));
        let sent = statements.lock().unwrap().clone();
        let create = sent.iter().find(|s| s.starts_with("CREATE CHANGEFEED")).unwrap();
        assert!(
            create.contains("INTO 'kafka://kafka:19092?topic_prefix=run_'")
                && create.contains(&format!("cursor = '{CURSOR}'")),
            "{create}"
        );
        assert!(sent.contains(&"CANCEL JOB 1017".to_string()), "{sent:?}");
    }
}
