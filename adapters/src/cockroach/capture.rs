//! The sinkless changefeed, consumed on its own pgwire connection while the workload runs.
//!
//! `CREATE CHANGEFEED FOR TABLE t WITH updated, mvcc_timestamp, diff, resolved = '1s',
//! min_checkpoint_frequency = '1s', cursor = '<ts>'` streams rows `(table, key, value)`
//! until its connection closes; `cursor` is a `cluster_logical_timestamp()` taken after the
//! table was loaded, so the feed starts with the run (no initial scan). After a lost
//! connection the feed is opened again from the watermark (every change at or below it has
//! arrived); the redelivered changes are dropped by [`FeedLog`]. [`ChangeCapture::finish`]
//! waits until the watermark passes a timestamp taken then (every commit so far), closes the
//! connection (which ends the changefeed: nothing remains on the server) and returns the log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use isocert_history::{History, Timestamp};
use isocert_recovery::{parse_hlc, RawLog};
use tokio::sync::watch;
use tokio_postgres::SimpleQueryMessage;

use super::changefeed::{bytes_text, parse_message, FeedLog};
use super::session::{classify, ident};
use super::tls;
use super::url::CockroachUrl;
use crate::postgres::query_with;
use crate::seam::{ChangeCapture, TableSpec};
use crate::AdapterError;

/// How often the changefeed emits resolved timestamps (and checkpoints).
const RESOLVED_EVERY: &str = "1s";
/// Reconnections in a row before the capture gives up.
const MAX_RECONNECTS: u32 = 5;
/// How long `finish` waits for the watermark.
const FINISH_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a Kafka admin request (create or delete a topic) or metadata query may take.
#[cfg(feature = "kafka")]
const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// The statement that opens the sinkless changefeed on `table` from `cursor`.
pub(crate) fn changefeed_sql(table: &str, cursor: Timestamp) -> String {
    format!(
        "CREATE CHANGEFEED FOR TABLE {} WITH updated, mvcc_timestamp, diff, resolved = '{RESOLVED_EVERY}', \
         min_checkpoint_frequency = '{RESOLVED_EVERY}', cursor = '{}.{:010}'",
        ident(table),
        cursor.wall,
        cursor.logical
    )
}

/// A `cluster_logical_timestamp()` now, on a connection of its own.
pub(crate) async fn now(url: &CockroachUrl) -> Result<Timestamp, AdapterError> {
    let client = tls::connect(url, classify).await?;
    let sql = "SELECT cluster_logical_timestamp()::STRING";
    let rows = query_with(&client, sql, classify).await?;
    let text = rows.first().and_then(|r| r.get(0)).unwrap_or_default();
    parse_hlc(text).map_err(|e| AdapterError::Protocol { message: format!("{sql}: {e}") })
}

#[derive(Debug, Default)]
struct State {
    log: FeedLog,
    started: bool,
    error: Option<String>,
    /// The changefeed job a sink-based feed created (cancelled by `finish`).
    job: Option<String>,
    /// The (brokers, topic) a Kafka feed created (deleted by `finish`, after the job).
    #[cfg(feature = "kafka")]
    created_topic: Option<(String, String)>,
}

/// The capture's log inside its locked state, for [`super::kafka::KafkaFeed::read_until`].
#[cfg(feature = "kafka")]
struct SharedLog<'a>(std::sync::MutexGuard<'a, State>);

#[cfg(feature = "kafka")]
impl std::ops::Deref for SharedLog<'_> {
    type Target = FeedLog;
    fn deref(&self) -> &FeedLog {
        &self.0.log
    }
}

#[cfg(feature = "kafka")]
impl std::ops::DerefMut for SharedLog<'_> {
    fn deref_mut(&mut self) -> &mut FeedLog {
        &mut self.0.log
    }
}

/// The sinkless changefeed of one table.
#[derive(Debug)]
pub struct ChangefeedCapture {
    state: Arc<Mutex<State>>,
    changed: watch::Receiver<u64>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    url: CockroachUrl,
}

impl ChangefeedCapture {
    /// Opens the changefeed on `table` from `cursor` (changes committed after it).
    pub(crate) fn start(url: &CockroachUrl, table: &TableSpec, cursor: Timestamp) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let (tick, changed) = watch::channel(0u64);
        let (stop, stopped) = watch::channel(false);
        let task =
            tokio::spawn(consume(url.clone(), table.name.to_string(), cursor, state.clone(), tick, stopped));
        ChangefeedCapture { state, changed, stop, task, url: url.clone() }
    }

    /// Creates a changefeed on `table` from `cursor` into the Kafka sink `target` and
    /// consumes its topic (cargo feature `kafka`).
    #[cfg(feature = "kafka")]
    pub(crate) fn start_kafka(
        url: &CockroachUrl,
        table: &TableSpec,
        cursor: Timestamp,
        target: super::kafka::KafkaTarget,
    ) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let (tick, changed) = watch::channel(0u64);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(consume_kafka(
            url.clone(),
            table.name.to_string(),
            cursor,
            target,
            state.clone(),
            tick,
            stopped,
        ));
        ChangefeedCapture { state, changed, stop, task, url: url.clone() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn consume(
    url: CockroachUrl,
    table: String,
    cursor: Timestamp,
    state: Arc<Mutex<State>>,
    tick: watch::Sender<u64>,
    mut stopped: watch::Receiver<bool>,
) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let notify = || tick.send_modify(|n| *n += 1);
    let mut failures = 0u32;
    loop {
        let from = lock().log.watermark().unwrap_or(cursor).max(cursor);
        let outcome: Result<(), String> = async {
            let client = tls::connect(&url, classify).await.map_err(|e| e.to_string())?;
            let sql = changefeed_sql(&table, from);
            let mut stream =
                Box::pin(client.simple_query_raw(&sql).await.map_err(|e| format!("{sql}: {e}"))?);
            loop {
                let message = tokio::select! {
                    m = stream.next() => m,
                    _ = stopped.changed() => return Ok(()),
                };
                match message {
                    None => return Err("the changefeed ended".into()),
                    Some(Err(e)) => return Err(format!("{sql}: {e}")),
                    Some(Ok(SimpleQueryMessage::RowDescription(_))) => {
                        lock().started = true;
                        notify();
                    }
                    Some(Ok(SimpleQueryMessage::Row(row))) => {
                        let column =
                            |i: usize| row.try_get(i).map_err(|e| format!("changefeed column {i}: {e}"));
                        let (t, k, v) = (column(0)?, column(1)?, column(2)?);
                        let key =
                            k.map(bytes_text).transpose().map_err(|e| format!("changefeed key: {e}"))?;
                        let value = bytes_text(v.ok_or("changefeed row without a value")?)
                            .map_err(|e| format!("changefeed value: {e}"))?;
                        let message = parse_message(t, key.as_ref(), &value)?;
                        let mut s = lock();
                        s.started = true;
                        s.log.push(0, message)?;
                        drop(s);
                        failures = 0;
                        notify();
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
        .await;
        if *stopped.borrow() {
            return;
        }
        let Err(e) = outcome else { return };
        failures += 1;
        if failures > MAX_RECONNECTS || !lock().started {
            lock().error = Some(e);
            notify();
            return;
        }
        tracing::warn!("CockroachDB changefeed: {e}; reopening it from the watermark");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Kafka path: the changefeed job, then its topic read into the shared log.
#[cfg(feature = "kafka")]
async fn consume_kafka(
    url: CockroachUrl,
    table: String,
    cursor: Timestamp,
    target: super::kafka::KafkaTarget,
    state: Arc<Mutex<State>>,
    tick: watch::Sender<u64>,
    stopped: watch::Receiver<bool>,
) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let outcome: Result<(), String> = async {
        // The topic first: CockroachDB's sink creates none, and no row changes before the
        // capture has started (kafka.rs).
        let feed = super::kafka::KafkaFeed::prepare(&target, &table, KAFKA_TIMEOUT).await.map_err(|e| e.to_string())?;
        lock().created_topic = feed.created_topic();
        let client = tls::connect(&url, classify).await.map_err(|e| e.to_string())?;
        let sql = format!(
            "CREATE CHANGEFEED FOR TABLE {} INTO '{}' WITH updated, mvcc_timestamp, diff, \
             resolved = '{RESOLVED_EVERY}', min_checkpoint_frequency = '{RESOLVED_EVERY}', cursor = '{}.{:010}'",
            ident(&table),
            target.sink_uri().replace('\'', "''"),
            cursor.wall,
            cursor.logical
        );
        let rows = query_with(&client, &sql, classify).await.map_err(|e| e.to_string())?;
        lock().job = rows.first().and_then(|r| r.get(0)).map(str::to_string);
        lock().started = true;
        tick.send_modify(|n| *n += 1);
        // Each message goes into the shared log in place (issue 46: the log used to be
        // copied whole every 300 ms, which grew with the run).
        while !*stopped.borrow() {
            feed.read_until(|| SharedLog(lock()), None, Duration::from_millis(300), |_| {})
                .await
                .map_err(|e| e.to_string())?;
            tick.send_modify(|n| *n += 1);
        }
        Ok(())
    }
    .await;
    if let Err(e) = outcome {
        // Before the job exists nothing else would remove the topic the capture created.
        let (started, topic) = {
            let s = lock();
            (s.started, s.created_topic.clone())
        };
        if let (false, Some((brokers, topic))) = (started, topic) {
            lock().created_topic = None;
            if let Err(e) = super::kafka::delete_topic(&brokers, &topic, KAFKA_TIMEOUT).await {
                tracing::warn!("{e}; delete topic {topic} yourself");
            }
        }
        lock().error = Some(e);
        tick.send_modify(|n| *n += 1);
    }
}

impl ChangeCapture for ChangefeedCapture {
    async fn wait_started(&mut self, timeout: Duration) -> Result<(), AdapterError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let s = self.lock();
                if let Some(e) = &s.error {
                    return Err(AdapterError::Protocol {
                        message: format!(
                            "the CockroachDB changefeed did not start: {e} (rangefeeds must be enabled: \
                             SET CLUSTER SETTING kv.rangefeed.enabled = true)"
                        ),
                    });
                }
                if s.started {
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, self.changed.changed()).await.is_err() {
                return Err(AdapterError::Protocol {
                    message: format!("the CockroachDB changefeed did not start within {timeout:?}"),
                });
            }
        }
    }

    fn recorded(&self) -> usize {
        self.lock().log.txn_count()
    }

    async fn finish(mut self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        let target = now(&self.url).await?;
        let deadline = tokio::time::Instant::now() + FINISH_TIMEOUT;
        let result = loop {
            {
                let s = self.lock();
                if let Some(e) = &s.error {
                    break Err(AdapterError::Protocol {
                        message: format!("the CockroachDB changefeed failed: {e}"),
                    });
                }
                if s.log.covers(target) {
                    if s.log.late() > 0 {
                        tracing::warn!("{} changes arrived below their resolved timestamp", s.log.late());
                    }
                    break Ok(s.log.to_raw_log());
                }
            }
            if tokio::time::timeout_at(deadline, self.changed.changed()).await.is_err() {
                let watermark = self.lock().log.watermark();
                break Err(AdapterError::Protocol {
                    message: format!(
                        "the CockroachDB changefeed's resolved timestamp ({}) did not reach {target} within {:?}: \
                         the certificate would be incomplete (is the cluster overloaded? \
                         kv.closed_timestamp.target_duration bounds how far resolved timestamps lag)",
                        watermark.map_or("none yet".to_string(), |w| w.to_string()),
                        FINISH_TIMEOUT
                    ),
                });
            }
        };
        let _ = self.stop.send(true);
        self.task.abort();
        // The consumer must be gone before its topic is deleted: librdkafka 2.x crashes
        // (a NULL topic name in its metadata cache) when a live client's metadata refresh
        // meets a topic deleted under it.
        let _ = (&mut self.task).await;
        let job = self.lock().job.take();
        if let Some(job) = job {
            // A sink-based changefeed is a job that outlives the connection: cancel it.
            let cancel = async {
                let client = tls::connect(&self.url, classify).await?;
                query_with(&client, &format!("CANCEL JOB {job}"), classify).await
            };
            if let Err(e) = cancel.await {
                tracing::warn!("cancelling changefeed job {job}: {e}; cancel it yourself (CANCEL JOB {job})");
            }
        }
        #[cfg(feature = "kafka")]
        let created_topic = self.lock().created_topic.take();
        #[cfg(feature = "kafka")]
        if let Some((brokers, topic)) = created_topic {
            if let Err(e) = super::kafka::delete_topic(&brokers, &topic, KAFKA_TIMEOUT).await {
                tracing::warn!("{e}; delete topic {topic} yourself");
            }
        }
        result
    }
}

impl Drop for ChangefeedCapture {
    fn drop(&mut self) {
        // Closing the connection ends the changefeed: nothing is left on the server.
        self.task.abort();
    }
}
