//! The results topic: every verdict of every member, once (docs/ONLINE.md, "Results").
//!
//! Each record's Kafka key is its identity (the data topic, the group, and the anomaly's
//! kind and explanation, the late transaction, or the finished partition), so the topic
//! may be compacted. A member reads the whole topic before it reports anything for a
//! partition it was given, and publishes (and waits for the broker to take) a record
//! before it prints it: an anomaly found again after a rebalance or a restart, by this
//! member or another, is recognised by its key and not reported twice.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use isocert_history::Scalar;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

use crate::{admin, OnlineError};

/// How long to wait for the results topic to be read up to its end or written.
const RESULTS_TIMEOUT: Duration = Duration::from_secs(30);

/// An anomaly found by one partition's checker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnomalyRecord {
    /// The topic of transactions.
    pub topic: String,
    /// The consumer group that checked it.
    pub group: String,
    /// The partition whose checker found it.
    pub partition: u32,
    /// The anomaly kind (`ext`, `int`, `no-conflict`, `session`).
    pub kind: String,
    /// The ids of the transactions it names.
    pub txns: Vec<serde_json::Value>,
    /// The explanation, as `isocert check --checker chronos` prints it.
    pub explanation: String,
    /// The member that found it.
    pub member: String,
}

/// A transaction that arrived committing before the watermark had passed its commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateRecord {
    /// The topic of transactions.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The partition it arrived on.
    pub partition: u32,
    /// Its id.
    pub txn: serde_json::Value,
    /// Its commit timestamp.
    pub commit_ts: String,
    /// The watermark's commit bound it fell below.
    pub watermark: String,
    /// The member that saw it.
    pub member: String,
}

/// A partition whose producers all ended, every verdict final.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoneRecord {
    /// The topic of transactions.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The partition.
    pub partition: u32,
    /// How many partitions the topic has.
    pub partitions: u32,
    /// Transactions that reached the partition.
    pub txns: u64,
    /// Anomalies its checker found.
    pub anomalies: u64,
    /// Transactions that arrived beyond the watermark.
    pub beyond_watermark: u64,
    /// Milliseconds from a transaction's publication to its verdicts being final on this
    /// partition, median (with the member's clock; comparable with the producer's on one
    /// machine or with synchronised clocks).
    #[serde(default)]
    pub latency_ms_p50: u64,
    /// The same, 99th percentile.
    #[serde(default)]
    pub latency_ms_p99: u64,
    /// The member that finished it.
    pub member: String,
}

/// One record of the results topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub enum ResultRecord {
    /// An anomaly.
    Anomaly(AnomalyRecord),
    /// A transaction beyond the watermark.
    Late(LateRecord),
    /// A finished partition.
    Done(DoneRecord),
}

impl ResultRecord {
    /// The record's identity (its Kafka key).
    pub fn key(&self) -> String {
        match self {
            ResultRecord::Anomaly(a) => {
                format!("{}/{}/anomaly/{}/{}", a.topic, a.group, a.kind, a.explanation)
            }
            ResultRecord::Late(l) => format!("{}/{}/late/{}/{}", l.topic, l.group, l.partition, l.txn),
            ResultRecord::Done(d) => format!("{}/{}/done/{}", d.topic, d.group, d.partition),
        }
    }

    /// The partition of the topic of transactions the record is about.
    pub fn partition(&self) -> u32 {
        match self {
            ResultRecord::Anomaly(a) => a.partition,
            ResultRecord::Late(l) => l.partition,
            ResultRecord::Done(d) => d.partition,
        }
    }

    fn belongs_to(&self, topic: &str, group: &str) -> bool {
        let (t, g) = match self {
            ResultRecord::Anomaly(a) => (&a.topic, &a.group),
            ResultRecord::Late(l) => (&l.topic, &l.group),
            ResultRecord::Done(d) => (&d.topic, &d.group),
        };
        t == topic && g == group
    }
}

/// A transaction id as JSON (integer or string, as in the history).
pub fn scalar_json(s: &Scalar) -> serde_json::Value {
    match s {
        Scalar::Int(i) => serde_json::Value::from(*i),
        Scalar::Text(t) => serde_json::Value::from(t.as_ref()),
        Scalar::Null => serde_json::Value::Null,
        Scalar::Bool(b) => serde_json::Value::from(*b),
        Scalar::Float(f) => serde_json::Value::from(*f),
    }
}

/// The results topic as one check (data topic and group) sees it: what was reported so
/// far by any member, and the writer of new records.
#[allow(missing_debug_implementations)] // rdkafka's clients are not Debug
pub struct Results {
    consumer: BaseConsumer,
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
    data_topic: String,
    group: String,
    next_offset: i64,
    seen: FxHashSet<String>,
    anomalies: Vec<AnomalyRecord>,
    late: Vec<LateRecord>,
    done: BTreeMap<u32, DoneRecord>,
}

impl Results {
    /// Opens results topic `topic` (created compacted with one partition if missing) for
    /// the check of `data_topic` by `group`, read from its beginning.
    ///
    /// # Errors
    /// The broker cannot be reached or refuses the topic.
    pub fn open(brokers: &str, topic: &str, data_topic: &str, group: &str) -> Result<Results, OnlineError> {
        admin::ensure_topic(brokers, topic, 1, &[("cleanup.policy", "compact")])?;
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("isocert-results-reader-{group}"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| OnlineError::kafka("creating the results reader", e))?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(|e| OnlineError::kafka("assigning the results topic", e))?;
        consumer.assign(&assignment).map_err(|e| OnlineError::kafka("assigning the results topic", e))?;
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("linger.ms", "0")
            .create()
            .map_err(|e| OnlineError::kafka("creating the results writer", e))?;
        Ok(Results {
            consumer,
            producer,
            topic: topic.to_string(),
            data_topic: data_topic.to_string(),
            group: group.to_string(),
            next_offset: 0,
            seen: FxHashSet::default(),
            anomalies: Vec::new(),
            late: Vec::new(),
            done: BTreeMap::new(),
        })
    }

    /// Reads the topic up to its end as it is now, so every record any member published
    /// before this call is known.
    ///
    /// # Errors
    /// The broker cannot be reached in time.
    pub fn catch_up(&mut self) -> Result<(), OnlineError> {
        let (_, high) = self
            .consumer
            .fetch_watermarks(&self.topic, 0, RESULTS_TIMEOUT)
            .map_err(|e| OnlineError::kafka(format!("reading the end of {}", self.topic), e))?;
        let deadline = Instant::now() + RESULTS_TIMEOUT;
        while self.next_offset < high {
            if Instant::now() >= deadline {
                return Err(OnlineError::kafka(format!("reading {}", self.topic), "timed out"));
            }
            self.poll(Duration::from_millis(100))?;
        }
        Ok(())
    }

    /// Takes what arrived on the topic, waiting at most `timeout` for the first record.
    ///
    /// # Errors
    /// A consumer error.
    pub fn poll(&mut self, timeout: Duration) -> Result<(), OnlineError> {
        let mut wait = timeout;
        while let Some(message) = self.consumer.poll(wait) {
            wait = Duration::ZERO;
            let message = message.map_err(|e| OnlineError::kafka(format!("reading {}", self.topic), e))?;
            self.next_offset = message.offset() + 1;
            let Some(payload) = message.payload() else { continue };
            match serde_json::from_slice::<ResultRecord>(payload) {
                Ok(record) => self.learn(record),
                Err(e) => tracing::warn!(
                    offset = message.offset(),
                    "{}: a record that is not isocert's: {e}",
                    self.topic
                ),
            }
        }
        Ok(())
    }

    fn learn(&mut self, record: ResultRecord) {
        if !record.belongs_to(&self.data_topic, &self.group) || !self.seen.insert(record.key()) {
            return;
        }
        match record {
            ResultRecord::Anomaly(a) => self.anomalies.push(a),
            ResultRecord::Late(l) => self.late.push(l),
            ResultRecord::Done(d) => {
                self.done.insert(d.partition, d);
            }
        }
    }

    /// Publishes the records not reported before (by anyone), waits until the broker has
    /// them, and returns them (to print).
    ///
    /// # Errors
    /// The producer fails or the broker does not take the records in time.
    pub fn publish(&mut self, records: Vec<ResultRecord>) -> Result<Vec<ResultRecord>, OnlineError> {
        let mut keys = FxHashSet::default();
        let fresh: Vec<ResultRecord> = records
            .into_iter()
            .filter(|r| {
                let key = r.key();
                !self.seen.contains(&key) && keys.insert(key)
            })
            .collect();
        if fresh.is_empty() {
            return Ok(fresh);
        }
        for record in &fresh {
            let key = record.key();
            let value = serde_json::to_vec(record).expect("records serialise");
            let mut message = BaseRecord::to(&self.topic).key(&key).payload(&value).partition(0);
            loop {
                match self.producer.send(message) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull,
                        ),
                        back,
                    )) => {
                        message = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, _)) => {
                        return Err(OnlineError::kafka(format!("publishing to {}", self.topic), e))
                    }
                }
            }
        }
        self.producer
            .flush(RESULTS_TIMEOUT)
            .map_err(|e| OnlineError::kafka(format!("publishing to {}", self.topic), e))?;
        for record in &fresh {
            self.learn(record.clone());
        }
        Ok(fresh)
    }

    /// The anomalies reported so far for this check, by every member.
    pub fn anomalies(&self) -> &[AnomalyRecord] {
        &self.anomalies
    }

    /// The transactions reported beyond the watermark so far.
    pub fn late(&self) -> &[LateRecord] {
        &self.late
    }

    /// The finished partitions.
    pub fn done(&self) -> &BTreeMap<u32, DoneRecord> {
        &self.done
    }
}
