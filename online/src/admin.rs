//! Topics: finding a topic's partition count, creating the topics isocert owns.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use crate::OnlineError;

/// How long to wait for metadata and topic creation.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The partition count of `topic` at `brokers`, or `None` when it does not exist.
///
/// # Errors
/// The broker cannot be reached.
pub fn partition_count(brokers: &str, topic: &str) -> Result<Option<u32>, OnlineError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| OnlineError::kafka("creating a metadata client", e))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), ADMIN_TIMEOUT)
        .map_err(|e| OnlineError::kafka(format!("reading the metadata of topic {topic} at {brokers}"), e))?;
    Ok(metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len() as u32)
        .filter(|&n| n > 0))
}

/// Creates `topic` with `partitions` partitions and `config` (a topic that exists already
/// is left as it is: another producer or member made it), then returns its partition count.
///
/// # Errors
/// The broker refuses the creation, or the topic does not appear.
pub fn ensure_topic(
    brokers: &str,
    topic: &str,
    partitions: u32,
    config: &[(&str, &str)],
) -> Result<u32, OnlineError> {
    if let Some(n) = partition_count(brokers, topic)? {
        return Ok(n);
    }
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| OnlineError::kafka("creating an admin client", e))?;
    let mut new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(1));
    for (k, v) in config {
        new = new.set(k, v);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OnlineError::kafka("starting the admin runtime", e))?;
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let results = runtime
        .block_on(admin.create_topics([&new], &options))
        .map_err(|e| OnlineError::kafka(format!("creating topic {topic}"), e))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(OnlineError::kafka(format!("creating topic {topic}"), code)),
        }
    }
    tracing::info!(topic, partitions, "created topic");
    let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
    loop {
        if let Some(n) = partition_count(brokers, topic)? {
            return Ok(n);
        }
        if std::time::Instant::now() >= deadline {
            return Err(OnlineError::kafka(format!("creating topic {topic}"), "it did not appear"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
