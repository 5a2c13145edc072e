//! The changefeed's Kafka sink, consumed with rdkafka (cargo feature `kafka`).
//!
//! `--changefeed kafka://BROKER:9092[,BROKER2:9092]/PREFIX[?partitions=N]` makes the capture
//! create topic `PREFIX` + table name with N partitions (default 1) through Kafka's admin API,
//! assign a consumer to every partition from its current end, and only then create
//! `CREATE CHANGEFEED FOR TABLE t INTO 'kafka://BROKER:9092?topic_prefix=PREFIX' WITH updated,
//! mvcc_timestamp, diff, resolved, ...`. The topic must exist first: CockroachDB's v2 Kafka
//! sink (`pkg/ccl/changefeedccl/sink_kafka_v2.go`, added in 2024, the default where
//! `changefeed.new_kafka_sink.enabled` is on) sends resolved messages only to the partitions
//! of topics its ListTopics found (refreshed at most once a minute), its produce requests
//! create a topic only where the broker allows `auto.create.topics.enable`, no row changes
//! before the capture has started, and librdkafka's consumer creates nothing. A topic that
//! already exists (a prefix reused, or made by the user with their own partition count) is
//! read from its end, so messages of earlier runs are never taken for this one's, and it is
//! left in place; a topic the capture created is deleted when the capture finishes.
//!
//! No group rebalancing (partitions are assigned explicitly) and offsets are never committed.
//! Each message carries the key (`[1]`) and the envelope exactly as the sinkless feed (docs
//! "Changefeed Messages", Kafka sink); resolved messages go to every partition, so the
//! watermark is the lowest over all partitions, and delivery is at least once: [`FeedLog`]
//! drops redeliveries by (key, `updated`).

use std::time::Duration;

use futures_util::StreamExt;
use isocert_history::Timestamp;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::changefeed::{parse_message, FeedLog};
use crate::AdapterError;

/// The most partitions `?partitions=` accepts (a guard against a typo creating thousands).
const MAX_PARTITIONS: u32 = 1024;

/// A parsed `kafka://BROKERS/PREFIX[?partitions=N&sink=HOST:PORT]`.
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
    /// `?partitions=N`: the partition count of the topic the capture creates (default 1;
    /// an existing topic keeps its own).
    pub partitions: u32,
}

impl KafkaTarget {
    /// Parses `kafka://host:port[,host:port]/prefix[?partitions=N][&sink=HOST:PORT]`.
    ///
    /// # Errors
    /// Another scheme, no broker, an unknown parameter or a partition count out of 1..=1024.
    pub fn parse(text: &str) -> Result<Self, AdapterError> {
        let bad = |m: &str| AdapterError::NotSupportedHere { message: format!("--changefeed {text}: {m}") };
        let rest =
            text.strip_prefix("kafka://").ok_or_else(|| bad("use kafka://BROKER:PORT/TOPIC_PREFIX"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (brokers, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if brokers.is_empty() {
            return Err(bad("no broker"));
        }
        let mut target = KafkaTarget {
            brokers: brokers.to_string(),
            topic_prefix: prefix.to_string(),
            sink_broker: None,
            partitions: 1,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sink", b)) if !b.is_empty() => target.sink_broker = Some(b.to_string()),
                Some(("partitions", n)) => {
                    target.partitions =
                        n.parse().ok().filter(|n| (1..=MAX_PARTITIONS).contains(n)).ok_or_else(|| {
                            bad(&format!("partitions={n}: a count from 1 to {MAX_PARTITIONS}"))
                        })?;
                }
                _ => {
                    return Err(bad(&format!(
                        "unknown parameter {pair:?} (partitions=N and sink=HOST:PORT are known)"
                    )))
                }
            }
        }
        Ok(target)
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

/// Whether [`KafkaFeed::prepare`] made the topic or found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicOrigin {
    /// The capture created it (and deletes it when it finishes).
    Created,
    /// It was there already (it is read from its end and left in place).
    Existing,
}

/// One changefeed topic, every partition read from where it ended when the feed opened.
#[allow(missing_debug_implementations)] // rdkafka's consumer is not Debug
pub struct KafkaFeed {
    consumer: StreamConsumer,
    brokers: String,
    topic: String,
    table: String,
    partitions: u32,
    origin: TopicOrigin,
}

impl KafkaFeed {
    /// Creates `target`'s topic for `table` unless it exists, then assigns a consumer to
    /// every partition from its current end: call it before the changefeed is created.
    ///
    /// # Errors
    /// The clients cannot be made, the broker refuses the topic, or its metadata or offsets
    /// do not come within `timeout`.
    pub async fn prepare(target: &KafkaTarget, table: &str, timeout: Duration) -> Result<Self, AdapterError> {
        let topic = target.topic(table);
        let brokers = target.brokers.as_str();
        let origin = create_topic(brokers, &topic, target.partitions, timeout).await?;
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("isocert-{topic}"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| kafka_error("creating the consumer", e))?;
        let partitions = partition_count(&consumer, &topic, timeout).await?;
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            let (_, end) = consumer
                .fetch_watermarks(&topic, p, timeout)
                .map_err(|e| kafka_error(&format!("the end offset of {topic} partition {p}"), e))?;
            assignment
                .add_partition_offset(&topic, p, Offset::Offset(end))
                .map_err(|e| kafka_error("assigning partitions", e))?;
        }
        consumer.assign(&assignment).map_err(|e| kafka_error("assigning partitions", e))?;
        if origin == TopicOrigin::Existing {
            tracing::info!("Kafka topic {topic} exists ({partitions} partitions): reading it from its end");
        }
        Ok(KafkaFeed {
            consumer,
            brokers: brokers.to_string(),
            topic,
            table: table.to_string(),
            partitions,
            origin,
        })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Whether the feed created its topic.
    pub fn origin(&self) -> TopicOrigin {
        self.origin
    }

    /// The topic read.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The brokers and topic to delete when the capture finishes, if this feed created the
    /// topic (a topic that existed is left alone).
    pub fn created_topic(&self) -> Option<(String, String)> {
        (self.origin == TopicOrigin::Created).then(|| (self.brokers.clone(), self.topic.clone()))
    }

    /// Reads messages into the log `log()` gives until its watermark (over all partitions)
    /// reaches `target`, or `timeout` passes; calls `progress` after each message. `log`
    /// hands out the log for one step at a time (a lock's guard: the capture shares it
    /// with `finish` and adds each message in place rather than copying the whole log).
    ///
    /// # Errors
    /// A consumer error, a message that is not a changefeed message (naming its partition
    /// and offset), or the timeout.
    pub async fn read_until<L: std::ops::DerefMut<Target = FeedLog>>(
        &self,
        mut log: impl FnMut() -> L,
        target: Option<Timestamp>,
        timeout: Duration,
        mut progress: impl FnMut(&FeedLog),
    ) -> Result<(), AdapterError> {
        log().expect_partitions(self.partitions);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut stream = self.consumer.stream();
        while target.is_none_or(|t| !log().covers(t)) {
            let next = tokio::time::timeout_at(deadline, stream.next()).await;
            let message = match next {
                Err(_) if target.is_none() => return Ok(()),
                Err(_) => {
                    return Err(kafka_error(
                        "waiting for the resolved timestamp",
                        format!(
                            "the watermark ({}) did not reach {} within {timeout:?}",
                            log().watermark().map_or("none yet".into(), |w| w.to_string()),
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
            let mut log = log();
            log.push(message.partition() as u32, parsed).map_err(|e| kafka_error(&at, e))?;
            progress(&log);
        }
        Ok(())
    }
}

fn admin_client(brokers: &str) -> Result<AdminClient<DefaultClientContext>, AdapterError> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| kafka_error("creating the admin client", e))
}

/// Deletes `topic` (one the capture created), within `timeout`.
///
/// # Errors
/// The broker refuses or does not answer in time.
pub async fn delete_topic(brokers: &str, topic: &str, timeout: Duration) -> Result<(), AdapterError> {
    let admin = admin_client(brokers)?;
    let options = AdminOptions::new().operation_timeout(Some(timeout)).request_timeout(Some(timeout));
    let results = admin
        .delete_topics(&[topic], &options)
        .await
        .map_err(|e| kafka_error(&format!("deleting topic {topic}"), e))?;
    match results.into_iter().next() {
        Some(Err((_, code))) => Err(kafka_error(&format!("deleting topic {topic}"), code)),
        _ => Ok(()),
    }
}

/// Creates `topic` with `partitions` partitions (the broker's default replication factor),
/// or finds that it exists.
async fn create_topic(
    brokers: &str,
    topic: &str,
    partitions: u32,
    timeout: Duration,
) -> Result<TopicOrigin, AdapterError> {
    let admin = admin_client(brokers)?;
    let options = AdminOptions::new().operation_timeout(Some(timeout)).request_timeout(Some(timeout));
    // -1: the broker's default.replication.factor (Kafka 2.4 and later, KIP-464).
    let new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(-1));
    let results = admin
        .create_topics(&[new], &options)
        .await
        .map_err(|e| kafka_error(&format!("creating topic {topic} at {brokers}"), e))?;
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(TopicOrigin::Created),
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(TopicOrigin::Existing),
        Some(Err((_, code))) => Err(kafka_error(&format!("creating topic {topic} at {brokers}"), code)),
        None => Err(kafka_error(&format!("creating topic {topic} at {brokers}"), "no answer for the topic")),
    }
}

/// The partition count of `topic` once the broker's metadata lists it with every partition
/// led (a topic just created may take a moment), within `timeout`.
async fn partition_count(
    consumer: &StreamConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<u32, AdapterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let found = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(2))
            .ok()
            .and_then(|m| {
                m.topics()
                    .iter()
                    .find(|t| t.name() == topic && t.error().is_none())
                    .filter(|t| t.partitions().iter().all(|p| p.leader() >= 0))
                    .map(|t| t.partitions().len() as u32)
            })
            .filter(|&n| n > 0);
        if let Some(n) = found {
            return Ok(n);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(kafka_error(&format!("topic {topic}"), "its metadata did not list it in time"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
#[path = "kafka_tests.rs"]
mod tests;
