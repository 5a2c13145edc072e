//! A member of the checking consumer group: Kafka assigns it partitions of the topic of
//! transactions; it checks each with a [`PartitionCheck`], reports through the results
//! topic, and returns once every partition of the topic is finished (by any member).
//!
//! Rebalances: a partition's state is rebuilt by reading the partition again from its
//! first offset (the group commits no offsets, so every assignment starts at the
//! beginning, `auto.offset.reset=earliest`); the results topic, read to its end before the
//! member reports for a newly assigned partition, keeps anomalies found again from being
//! reported twice. A member killed with SIGKILL loses nothing: its partitions go to the
//! others after the session timeout, who read them again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isocert_checker::{IsolationLevel, Partitioning};
use isocert_history::Scalar;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Message};

use crate::checking::{Finding, PartitionCheck};
use crate::protocol::parse_key;
use crate::results::{AnomalyRecord, DoneRecord, LateRecord, ResultRecord, Results};
use crate::{admin, OnlineError, OnlineTarget};

/// How a member checks.
#[derive(Clone, Debug)]
pub struct MemberOptions {
    /// The topic of transactions.
    pub target: OnlineTarget,
    /// The consumer group (one per check: members of one group share the partitions).
    pub group: String,
    /// Snapshot isolation or serializable.
    pub level: IsolationLevel,
    /// Every key's initial value (`--initial-value`), if not absent.
    pub initial: Option<Scalar>,
    /// Watermarks wait until this many producers said hello.
    pub producers: usize,
    /// The results topic.
    pub results_topic: String,
    /// This member's name in results.
    pub member: String,
    /// How long the group waits for a silent member before giving its partitions away.
    pub session_timeout: Duration,
    /// Extra librdkafka settings for the group consumer (security, fetch sizes), applied
    /// after isocert's own.
    pub client_config: Vec<(String, String)>,
    /// Partitions of the topic of transactions if the member creates it (the first
    /// producer or member to come creates it; its own count is used otherwise).
    pub partitions: u32,
}

/// The verdict of the whole check, from the results topic once every partition finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Transactions checked over all partitions (a transaction reaching several partitions
    /// counts in each).
    pub partition_txns: u64,
    /// Every anomaly reported, by any member.
    pub anomalies: Vec<AnomalyRecord>,
    /// Every transaction reported beyond the watermark.
    pub late: Vec<LateRecord>,
    /// The partitions' records.
    pub partitions: Vec<DoneRecord>,
}

/// What the member tells its caller as it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// A record this member published (an anomaly, a late transaction, a finished partition).
    Reported(ResultRecord),
    /// Kafka gave this member these partitions (all it has now).
    Assigned(Vec<u32>),
}

/// Rebalances, as the consumer's callbacks saw them, for the member's loop to act on.
#[derive(Default)]
struct GroupContext {
    changes: Arc<Mutex<Vec<Vec<u32>>>>,
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn post_rebalance(&self, base_consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let now: Vec<u32> = match rebalance {
            Rebalance::Assign(_) | Rebalance::Revoke(_) => base_consumer
                .assignment()
                .map(|tpl| tpl.elements().iter().map(|e| e.partition() as u32).collect())
                .unwrap_or_default(),
            Rebalance::Error(e) => {
                tracing::warn!("rebalance error: {e}");
                return;
            }
        };
        self.changes.lock().expect("not poisoned").push(now);
    }
}

/// Runs one member until every partition of the topic is finished; calls `on_event` for
/// each record it publishes. Returns the whole check's summary.
///
/// # Errors
/// The broker cannot be reached, a malformed message (naming partition and offset), a
/// transaction the checker refuses.
pub fn run_member(
    options: &MemberOptions,
    mut on_event: impl FnMut(&MemberEvent),
) -> Result<Summary, OnlineError> {
    let target = &options.target;
    let partitions = admin::ensure_topic(&target.brokers, &target.topic, options.partitions, &[])?;
    let partitioning = Partitioning::new(partitions);
    let mut results = Results::open(&target.brokers, &options.results_topic, &target.topic, &options.group)?;
    results.catch_up()?;
    let context = GroupContext::default();
    let changes = Arc::clone(&context.changes);
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &target.brokers)
        .set("group.id", &options.group)
        .set("client.id", &options.member)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("partition.assignment.strategy", "range")
        .set("session.timeout.ms", options.session_timeout.as_millis().to_string())
        .set("heartbeat.interval.ms", (options.session_timeout.as_millis() / 4).max(100).to_string())
        // A rebalance waits this long for members that do not rejoin: bounded, so a member
        // the coordinator has not yet noticed is dead stalls the group for seconds, not the
        // default five minutes (the loop polls between messages, never minutes apart).
        .set("max.poll.interval.ms", (options.session_timeout.as_millis() * 2).max(10_000).to_string())
        .set("fetch.wait.max.ms", "50");
    for (key, value) in &options.client_config {
        config.set(key, value);
    }
    let consumer: BaseConsumer<GroupContext> = config
        .create_with_context(context)
        .map_err(|e| OnlineError::kafka("creating the group consumer", e))?;
    consumer
        .subscribe(&[target.topic.as_str()])
        .map_err(|e| OnlineError::kafka(format!("joining group {} on {}", options.group, target.topic), e))?;
    let mut checks: BTreeMap<u32, PartitionCheck> = BTreeMap::new();
    let mut found = Vec::new();
    let mut pending = Pending::default();
    let mut last_results_poll = Instant::now();
    loop {
        let message = consumer.poll(Duration::from_millis(100));
        // Rebalances ran inside poll: drop revoked partitions, start assigned ones afresh.
        let changes_seen: Vec<Vec<u32>> = std::mem::take(&mut *changes.lock().expect("not poisoned"));
        if let Some(now) = changes_seen.last() {
            checks.retain(|p, _| now.contains(p));
            // A revoked partition's new owner reads it again and finds the same records.
            pending.records.retain(|r| now.contains(&r.partition()));
            let fresh: Vec<u32> = now.iter().copied().filter(|p| !checks.contains_key(p)).collect();
            if !fresh.is_empty() {
                results.catch_up()?;
            }
            for p in fresh {
                let check = PartitionCheck::new(
                    &target.topic,
                    p,
                    partitioning,
                    options.level,
                    options.initial.clone(),
                    options.producers,
                )?;
                checks.insert(p, check);
            }
            tracing::info!(member = options.member, partitions = ?now, "assigned");
            on_event(&MemberEvent::Assigned(now.clone()));
        }
        match message {
            Some(Ok(m)) => {
                let p = m.partition() as u32;
                let Some(check) = checks.get_mut(&p) else { continue };
                let (kind, producer) =
                    parse_key(m.key().unwrap_or_default()).map_err(|message| OnlineError::BadMessage {
                        topic: target.topic.clone(),
                        partition: p,
                        offset: m.offset(),
                        message,
                    })?;
                let before = check.finished();
                let published = m.timestamp().to_millis();
                check.accept(
                    kind,
                    producer,
                    m.payload().unwrap_or_default(),
                    (m.offset(), published),
                    &mut found,
                )?;
                let finished = if before.is_none() { check.finished() } else { None };
                pending.collect(options, p, partitions, &mut found, finished);
                if finished.is_some() || pending.is_due() {
                    pending.publish(&mut results, &mut on_event)?;
                }
            }
            Some(Err(e)) => return Err(OnlineError::kafka(format!("consuming {}", target.topic), e)),
            None => {
                // Nothing more for now: check what is buffered.
                for (&p, check) in &mut checks {
                    check.flush(&mut found)?;
                    pending.collect(options, p, partitions, &mut found, None);
                }
                pending.publish(&mut results, &mut on_event)?;
            }
        }
        if message_gap(&mut last_results_poll) {
            results.poll(Duration::ZERO)?;
            if results.done().len() as u32 >= partitions {
                break;
            }
        }
    }
    consumer.unsubscribe();
    Ok(Summary {
        partition_txns: results.done().values().map(|d| d.txns).sum(),
        anomalies: results.anomalies().to_vec(),
        late: results.late().to_vec(),
        partitions: results.done().values().cloned().collect(),
    })
}

/// Whether the results topic is due for a look (every 200 ms).
fn message_gap(last: &mut Instant) -> bool {
    if last.elapsed() >= Duration::from_millis(200) {
        *last = Instant::now();
        true
    } else {
        false
    }
}

/// Records found but not yet published. Publishing waits for the broker's
/// acknowledgement (a round trip, about 25 ms on this machine's tansu), so records are
/// gathered over messages and published together: when a partition finishes, when the
/// topic has nothing more for now, or once the oldest has waited [`Pending::MAX_WAIT`] or
/// [`Pending::MAX_RECORDS`] have gathered. Publishing after every message that found
/// something cost one round trip per anomaly: 699 anomalies in a 20,000-transaction run
/// took 20 s of waiting (docs/PERFORMANCE.md, "Online checking on Kafka").
#[derive(Debug, Default)]
struct Pending {
    records: Vec<ResultRecord>,
    since: Option<Instant>,
}

impl Pending {
    /// The longest a found record waits to be published while messages keep coming.
    const MAX_WAIT: Duration = Duration::from_millis(20);
    /// The most records gathered before they are published.
    const MAX_RECORDS: usize = 4096;

    /// Whether the records gathered are due for publishing.
    fn is_due(&self) -> bool {
        self.records.len() >= Self::MAX_RECORDS || self.since.is_some_and(|t| t.elapsed() >= Self::MAX_WAIT)
    }

    /// Gathers what partition `p` found (and its record when it just finished).
    fn collect(
        &mut self,
        options: &MemberOptions,
        p: u32,
        partitions: u32,
        found: &mut Vec<Finding>,
        finished: Option<crate::checking::Finished>,
    ) {
        if found.is_empty() && finished.is_none() {
            return;
        }
        let topic = &options.target.topic;
        let group = &options.group;
        let member = &options.member;
        self.since.get_or_insert_with(Instant::now);
        self.records.extend(found.drain(..).map(|f| match f {
            Finding::Anomaly { kind, txns, explanation } => ResultRecord::Anomaly(AnomalyRecord {
                topic: topic.clone(),
                group: group.clone(),
                partition: p,
                kind,
                txns,
                explanation,
                member: member.clone(),
            }),
            Finding::Late { txn, commit_ts, watermark } => ResultRecord::Late(LateRecord {
                topic: topic.clone(),
                group: group.clone(),
                partition: p,
                txn,
                commit_ts,
                watermark,
                member: member.clone(),
            }),
        }));
        if let Some(f) = finished {
            self.records.push(ResultRecord::Done(DoneRecord {
                topic: topic.clone(),
                group: group.clone(),
                partition: p,
                partitions,
                txns: f.txns,
                anomalies: f.anomalies,
                beyond_watermark: f.beyond_watermark,
                latency_ms_p50: f.latency_ms.0,
                latency_ms_p99: f.latency_ms.1,
                member: member.clone(),
            }));
        }
    }

    /// Publishes the gathered records, each only if no member reported it before, and
    /// hands each published one to `on_event` once the broker has it.
    fn publish(
        &mut self,
        results: &mut Results,
        on_event: &mut impl FnMut(&MemberEvent),
    ) -> Result<(), OnlineError> {
        self.since = None;
        if self.records.is_empty() {
            return Ok(());
        }
        for record in results.publish(std::mem::take(&mut self.records))? {
            on_event(&MemberEvent::Reported(record));
        }
        Ok(())
    }
}
