//! Publishing transactions: [`Emitter`] sends each partition its share of each
//! transaction, batched, with the producer's watermark; [`emit_file`] publishes a recorded
//! v1 history; [`LiveEmitter`] is the call a test client makes as each transaction
//! completes. Both go through [`Emitter::transaction`], one code path.

use std::time::{Duration, Instant};

use isocert_checker::{Partitioning, Watermark};
use isocert_history::{read_kv_v1_bytes, v1, History, KvHistory, Op, Scalar, Timestamp, TxnId};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rustc_hash::FxHashMap;

use crate::protocol::{hello_value, key, mark_value, push_part, MessageKind};
use crate::{admin, OnlineError, OnlineTarget};

/// How long [`Emitter::finish`] waits for the broker to take what is queued.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// A partition's `parts` message is sent once it holds this many shares...
const BATCH_SHARES: usize = 1024;
/// ...or this many bytes (under the broker's default message size limit of 1 MB)...
const BATCH_BYTES: usize = 256 * 1024;
/// ...or its oldest share has waited this long (the producer's `linger.ms`), and always
/// before a mark, a header or the end, so that each partition sees the messages in the
/// order they were published.
const BATCH_LINGER: Duration = Duration::from_millis(5);

/// The shares gathered for one partition's next `parts` message.
#[derive(Debug, Default)]
struct Batch {
    value: Vec<u8>,
    shares: usize,
    /// When the oldest share was added, and its wall-clock time in milliseconds since the
    /// epoch (the message's create time: latency counts from the oldest share).
    since: Option<(Instant, i64)>,
}

/// A producer of one topic of transactions.
#[allow(missing_debug_implementations)] // rdkafka's producer is not Debug
pub struct Emitter {
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
    partitioning: Partitioning,
    id: String,
    sent: u64,
    batches: Vec<Batch>,
}

impl Emitter {
    /// Connects to the target's brokers as producer `id` (unique among the topic's
    /// producers: [`default_producer_id`]), creating the topic with `partitions`
    /// partitions if it does not exist (its own count is used otherwise), and says hello.
    ///
    /// # Errors
    /// The broker cannot be reached or refuses to create the topic.
    pub fn connect(target: &OnlineTarget, id: &str, partitions: u32) -> Result<Emitter, OnlineError> {
        let count = admin::ensure_topic(&target.brokers, &target.topic, partitions, &[])?;
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &target.brokers)
            .set("linger.ms", "5")
            .set("batch.num.messages", "10000")
            .set("queue.buffering.max.messages", "1000000")
            .set("message.max.bytes", "10000000")
            .create()
            .map_err(|e| OnlineError::kafka("creating the producer", e))?;
        let mut emitter = Emitter {
            producer,
            topic: target.topic.clone(),
            partitioning: Partitioning::new(count),
            id: id.to_string(),
            sent: 0,
            batches: (0..count).map(|_| Batch::default()).collect(),
        };
        emitter.send_to_all(MessageKind::Hello, hello_value().as_bytes())?;
        Ok(emitter)
    }

    /// How the topic's partitions deal out objects and sessions.
    pub fn partitioning(&self) -> Partitioning {
        self.partitioning
    }

    /// Transactions published so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Publishes the v1 header line (initial values), before any transaction.
    ///
    /// # Errors
    /// The producer fails.
    pub fn header(&mut self, line: &[u8]) -> Result<(), OnlineError> {
        self.send_to_all(MessageKind::Header, line)
    }

    /// Publishes one v1 transaction line: each partition owning its session (`session`) or
    /// the object of one of its operations (`op_partitions`, the partition of each
    /// operation's object in order: [`Partitioning::of_ops`]) gets its share
    /// ([`Partitioning::split_line`]), gathered with other transactions' shares into one
    /// `parts` message per partition.
    ///
    /// # Errors
    /// A line that does not match `op_partitions`, or the producer fails.
    pub fn transaction(
        &mut self,
        line: &[u8],
        session: u32,
        op_partitions: &[u32],
    ) -> Result<(), OnlineError> {
        self.transaction_completed_at(line, session, op_partitions, None)
    }

    /// [`Emitter::transaction`] for a transaction that completed at `completed_ms`
    /// (milliseconds since the Unix epoch; `None`: now): a message's create time is the
    /// earliest of its shares', so a member's latency counts from the commit, not from
    /// the publication (`isocert run --emit` publishes a transaction a cut after it
    /// completes).
    ///
    /// # Errors
    /// As [`Emitter::transaction`].
    pub fn transaction_completed_at(
        &mut self,
        line: &[u8],
        session: u32,
        op_partitions: &[u32],
        completed_ms: Option<i64>,
    ) -> Result<(), OnlineError> {
        let parts = Partitioning::split_line(line, session, op_partitions).map_err(|what| {
            OnlineError::Unsupported { what: format!("transaction {}: {what}", self.sent + 1) }
        })?;
        let now = Instant::now();
        for part in parts {
            let batch = &mut self.batches[part.partition as usize];
            let created = completed_ms.unwrap_or_else(crate::checking::now_ms);
            match &mut batch.since {
                None => batch.since = Some((now, created)),
                Some((_, ms)) => *ms = (*ms).min(created),
            }
            push_part(&mut batch.value, &part.ops, op_partitions.len(), &part.line);
            batch.shares += 1;
        }
        self.sent += 1;
        for p in 0..self.batches.len() {
            let batch = &self.batches[p];
            let due = batch.shares >= BATCH_SHARES
                || batch.value.len() >= BATCH_BYTES
                || batch.since.is_some_and(|(at, _)| now.duration_since(at) >= BATCH_LINGER);
            if due {
                self.send_batch(p as u32)?;
            }
        }
        Ok(())
    }

    /// Sends every partition's gathered shares now (marks, headers and the end do this
    /// first; a live client that pauses may call it so its transactions do not wait for
    /// the next one).
    ///
    /// # Errors
    /// The producer fails.
    pub fn flush(&mut self) -> Result<(), OnlineError> {
        for p in 0..self.batches.len() {
            self.send_batch(p as u32)?;
        }
        Ok(())
    }

    fn send_batch(&mut self, partition: u32) -> Result<(), OnlineError> {
        let batch = std::mem::take(&mut self.batches[partition as usize]);
        let Some((_, created_ms)) = batch.since else { return Ok(()) };
        let k = key(MessageKind::Parts, &self.id);
        self.send(&k, partition, &batch.value, Some(created_ms))
    }

    /// Publishes the producer's watermark: every transaction it publishes from now on starts
    /// at or after `w.start` and commits at or after `w.commit`.
    ///
    /// # Errors
    /// The producer fails.
    pub fn mark(&mut self, w: Watermark) -> Result<(), OnlineError> {
        self.send_to_all(MessageKind::Mark, mark_value(w).as_bytes())
    }

    /// Says the producer is done and waits until the broker has every message.
    ///
    /// # Errors
    /// The producer fails or the broker does not take the messages in time.
    pub fn finish(mut self) -> Result<u64, OnlineError> {
        self.send_to_all(MessageKind::End, b"")?;
        self.producer.flush(FLUSH_TIMEOUT).map_err(|e| OnlineError::kafka("flushing the producer", e))?;
        Ok(self.sent)
    }

    /// Sends a message to every partition, after the shares gathered for it.
    fn send_to_all(&mut self, kind: MessageKind, value: &[u8]) -> Result<(), OnlineError> {
        let k = key(kind, &self.id);
        for p in 0..self.partitioning.partitions() {
            self.send_batch(p)?;
            self.send(&k, p, value, None)?;
        }
        Ok(())
    }

    /// Queues one message (created at `created_ms`, or now), waiting while the local
    /// queue is full.
    fn send(
        &mut self,
        key: &str,
        partition: u32,
        value: &[u8],
        created_ms: Option<i64>,
    ) -> Result<(), OnlineError> {
        let mut record = BaseRecord::to(&self.topic).key(key).payload(value).partition(partition as i32);
        if let Some(ms) = created_ms {
            record = record.timestamp(ms);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(OnlineError::kafka(format!("publishing to {}", self.topic), e)),
            }
        }
    }
}

/// A producer id unique among concurrent producers: host name and process id.
pub fn default_producer_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!("{host}-{}", std::process::id())
}

/// Publishes a recorded v1 history (the whole file, `bytes`) through `emitter`: the
/// header, then each transaction line in file order ([`Emitter::transaction`]: each
/// partition its share), with a watermark every
/// `mark_every` transactions (the lowest start and commit timestamps of the transactions
/// after it), then the end; at most `rate` transactions per second when given (a live
/// stream's pace, for latency measurements). Returns how many transactions were published.
///
/// # Errors
/// The history does not read (the error names its line), or the producer fails.
pub fn emit_file(
    mut emitter: Emitter,
    bytes: &[u8],
    mark_every: usize,
    rate: Option<f64>,
) -> Result<u64, OnlineError> {
    let kv = read_kv_v1_bytes(bytes)?;
    let mut lines = bytes.split(|&b| b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    let mut pending = lines.next();
    if let Some(first) = pending {
        if first.trim_ascii_start().starts_with(b"{\"format\"") {
            emitter.header(first)?;
            pending = lines.next();
        }
    }
    let started = std::time::Instant::now();
    let pace = |t: usize| {
        if let Some(rate) = rate.filter(|r| *r > 0.0) {
            let due = started + Duration::from_secs_f64(t as f64 / rate);
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    };
    let t = publish_lines(&mut emitter, &kv, pending.into_iter().chain(lines), mark_every, pace)?;
    debug_assert_eq!(t, kv.len());
    emitter.finish()
}

/// Publishes v1 transaction lines (`bytes`, no header) through `emitter`, which has
/// published others before (`isocert run --emit` after recovery, for the transactions it
/// could not publish during the run): each line's shares, with a watermark every
/// `mark_every` transactions (the lowest start and commit timestamps of the lines after
/// it). The caller ends the producer. Returns how many transactions were published.
///
/// # Errors
/// The lines do not read (the error names the line), or the producer fails.
pub fn emit_lines(emitter: &mut Emitter, bytes: &[u8], mark_every: usize) -> Result<u64, OnlineError> {
    let kv = read_kv_v1_bytes(bytes)?;
    let lines = bytes.split(|&b| b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    Ok(publish_lines(emitter, &kv, lines, mark_every, |_| {})? as u64)
}

/// Publishes `lines` (the transaction lines of `kv`, in order) through `emitter`, calling
/// `pace` with each line's index before it; a watermark follows every `mark_every`
/// transactions but the last. Returns how many were published.
fn publish_lines<'a>(
    emitter: &mut Emitter,
    kv: &KvHistory,
    lines: impl Iterator<Item = &'a [u8]>,
    mark_every: usize,
    mut pace: impl FnMut(usize),
) -> Result<usize, OnlineError> {
    let bounds = suffix_watermarks(kv);
    let partitioning = emitter.partitioning();
    let mut t = 0;
    for line in lines {
        pace(t);
        let txn = TxnId::from_index(t);
        let session = partitioning.of_session(kv.dict().session_name(kv.session(txn)));
        emitter.transaction(line, session, &partitioning.of_ops(kv, txn))?;
        t += 1;
        if t % mark_every.max(1) == 0 && t < kv.len() {
            emitter.mark(bounds[t])?;
        }
    }
    Ok(t)
}

/// For each position `i`, the lowest start and commit timestamps of transactions `i..`
/// (those with both timestamps; the others are not checked).
fn suffix_watermarks(kv: &KvHistory) -> Vec<Watermark> {
    let mut bounds = vec![Watermark::END; kv.len() + 1];
    for i in (0..kv.len()).rev() {
        let t = TxnId::from_index(i);
        bounds[i] = match (kv.start_ts(t), kv.commit_ts(t)) {
            (Some(start), Some(commit)) => bounds[i + 1].min(Watermark { start, commit }),
            _ => bounds[i + 1],
        };
    }
    bounds
}

/// The call a test client makes as each transaction completes: publishes it and, once
/// every session has completed one, a watermark after each (each session's next
/// transaction starts and commits after its last commit, as snapshot isolation's session
/// order requires; a database that breaks that shows a Session anomaly and a transaction
/// reported beyond the watermark).
#[allow(missing_debug_implementations)] // holds an Emitter
pub struct LiveEmitter {
    emitter: Emitter,
    sessions: usize,
    last_commit: FxHashMap<Scalar, Timestamp>,
    mark_every: usize,
    since_mark: usize,
    header_sent: bool,
}

impl LiveEmitter {
    /// Publishes through `emitter` for a client of `sessions` sessions, a watermark at
    /// most every `mark_every` transactions.
    pub fn new(emitter: Emitter, sessions: usize, mark_every: usize) -> LiveEmitter {
        LiveEmitter {
            emitter,
            sessions,
            last_commit: FxHashMap::default(),
            mark_every,
            since_mark: 0,
            header_sent: false,
        }
    }

    /// Publishes transaction `t` of `h` (its v1 line; `h` is the client's history so far),
    /// after `h`'s header (initial values) on the first call.
    ///
    /// # Errors
    /// The transaction does not write as v1, or the producer fails.
    pub fn publish(&mut self, h: &History, t: TxnId) -> Result<(), OnlineError> {
        if !self.header_sent {
            // Initial values (or a dialect) come first, on every partition.
            self.header_sent = true;
            let mut header = Vec::new();
            v1::write_header(h, &mut header)?;
            if !header.is_empty() {
                self.emitter.header(header.trim_ascii_end())?;
            }
        }
        let mut line = Vec::with_capacity(256);
        v1::write_txn(h, t, &mut line)?;
        let txn = h.txn(t);
        let session = h.session_name(txn.session);
        let partitioning = self.emitter.partitioning();
        let mut op_partitions = Vec::with_capacity(txn.ops.len());
        for op in &txn.ops {
            let obj = match op {
                Op::Read { obj, .. } | Op::Write { obj, .. } | Op::Append { obj, .. } => *obj,
                _ => {
                    return Err(OnlineError::Unsupported {
                        what: format!(
                            "transaction {}: online checking takes item reads, writes and appends only",
                            txn.name
                        ),
                    })
                }
            };
            let object = h.object(obj);
            op_partitions.push(partitioning.of_object(&h.table(object.table).name, &object.key));
        }
        let end = line.iter().rposition(|&b| b != b'\n').map_or(0, |i| i + 1);
        self.emitter.transaction(&line[..end], partitioning.of_session(session), &op_partitions)?;
        if let Some(commit) = txn.commit_ts() {
            self.last_commit.insert(session.clone(), commit);
        }
        self.since_mark += 1;
        if self.last_commit.len() >= self.sessions && self.since_mark >= self.mark_every {
            self.since_mark = 0;
            let low = self.last_commit.values().min().copied().unwrap_or_default();
            self.emitter.mark(Watermark { start: low, commit: low })?;
        }
        Ok(())
    }

    /// Sends the shares gathered so far ([`Emitter::flush`]): a client that pauses calls
    /// this so that its last transactions do not wait for its next one (each `publish`
    /// sends shares that waited 5 ms, and every watermark sends all).
    ///
    /// # Errors
    /// The producer fails.
    pub fn flush(&mut self) -> Result<(), OnlineError> {
        self.emitter.flush()
    }

    /// Says the client is done and waits for the broker.
    ///
    /// # Errors
    /// As [`Emitter::finish`].
    pub fn finish(self) -> Result<u64, OnlineError> {
        self.emitter.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_watermarks_are_the_lowest_timestamps_still_to_come() {
        let text = "{\"id\":1,\"session\":1,\"start_ts\":5,\"commit_ts\":9,\"ops\":[]}\n\
                    {\"id\":2,\"session\":2,\"start_ts\":2,\"commit_ts\":12,\"ops\":[]}\n\
                    {\"id\":3,\"session\":2,\"status\":\"aborted\",\"ops\":[]}\n\
                    {\"id\":4,\"session\":1,\"start_ts\":10,\"commit_ts\":11,\"ops\":[]}\n";
        let kv = read_kv_v1_bytes(text.as_bytes()).unwrap();
        let w = suffix_watermarks(&kv);
        let at = |s, c| Watermark { start: Timestamp::new(s), commit: Timestamp::new(c) };
        assert_eq!(w, [at(2, 9), at(2, 11), at(10, 11), at(10, 11), Watermark::END]);
    }
}
