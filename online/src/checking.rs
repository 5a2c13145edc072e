//! One partition's checker: the transactions that reach the partition, parsed in batches
//! into a compact history and handed to Aion scoped to the partition, with the
//! producers' watermark.

use std::collections::BTreeMap;

use isocert_checker::{
    commit_order_decides, Aion, AionDelay, AionOptions, AionScope, IsolationLevel, Partitioning, Watermark,
};
use isocert_history::{read_kv_v1_bytes, FormatError, KvHistory, Scalar, SessionId, TxnId};
use rustc_hash::FxHashMap;

use crate::protocol::{parse_hello, parse_mark, parse_parts, MessageKind};
use crate::results::scalar_json;
use crate::OnlineError;

/// Transaction lines parsed together (a batch is also parsed at each mark and when the
/// topic has nothing more for now).
pub(crate) const BATCH: usize = 2048;

/// What a producer has said on this partition.
#[derive(Clone, Copy, Debug, Default)]
struct ProducerState {
    mark: Option<Watermark>,
    ended: bool,
    /// It sent something after its hello: its header, if it has one, has arrived (a
    /// producer sends its header before anything else on every partition).
    spoke: bool,
}

/// Something a partition's checker found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Finding {
    /// A final anomaly: kind, the ids of the transactions it names, explanation.
    Anomaly { kind: String, txns: Vec<serde_json::Value>, explanation: String },
    /// A transaction that committed before the watermark's commit bound it arrived after.
    Late { txn: serde_json::Value, commit_ts: String, watermark: String },
}

/// The counts of a finished partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Finished {
    pub(crate) txns: u64,
    pub(crate) anomalies: u64,
    pub(crate) beyond_watermark: u64,
    /// Milliseconds from a transaction's publication (the message's create time) to its
    /// verdicts being final on this partition: median and 99th percentile.
    pub(crate) latency_ms: (u64, u64),
}

/// Milliseconds since the Unix epoch (the clock Kafka's create times use).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The checker of one partition of the topic of transactions.
#[derive(Debug)]
pub(crate) struct PartitionCheck {
    topic: String,
    partition: u32,
    level: IsolationLevel,
    aion: Option<Aion>,
    kv: Option<KvHistory>,
    initial: Option<Scalar>,
    /// Each producer's header line, until the first batch is parsed with their union.
    headers: BTreeMap<String, Vec<u8>>,
    /// The header the transactions were parsed with (the producers' headers merged).
    header: Option<Vec<u8>>,
    batch: Vec<u8>,
    batch_offsets: Vec<i64>,
    producers: BTreeMap<String, ProducerState>,
    expected_producers: usize,
    applied: Option<Watermark>,
    /// The producers of the buffered lines (indexes into `producer_names`).
    batch_producers: Vec<usize>,
    /// Every producer that published a transaction here, in order of its first one.
    producer_names: Vec<String>,
    /// Each transaction id and the producer that published it: one id from two producers
    /// is a clash, not a retry.
    names: FxHashMap<Scalar, usize>,
    /// Each session and the producer that published its transactions.
    sessions: FxHashMap<SessionId, usize>,
    received: u64,
    beyond: u64,
    finished: Option<Finished>,
    /// Publication times of the buffered lines.
    batch_times: Vec<i64>,
    /// For each buffered line that is a share of a transaction, its operations' numbers in
    /// the whole transaction (a range of `numbers`); `None` for a whole transaction.
    batch_numbers: Vec<Option<std::ops::Range<usize>>>,
    numbers: Vec<u32>,
    /// Transactions whose verdicts are not yet final: start timestamp, publication time
    /// (arrival order, the order Aion finalizes in).
    waiting: std::collections::VecDeque<(isocert_history::Timestamp, i64)>,
    /// Publication-to-final latencies, in milliseconds.
    latencies: Vec<u32>,
}

impl PartitionCheck {
    /// The checker of partition `partition` of `topic` (of `partitioning`'s count) at
    /// `level`; watermarks wait until `expected_producers` producers said hello.
    ///
    /// # Errors
    /// A level the timestamp checkers do not decide.
    pub(crate) fn new(
        topic: &str,
        partition: u32,
        partitioning: Partitioning,
        level: IsolationLevel,
        initial: Option<Scalar>,
        expected_producers: usize,
    ) -> Result<PartitionCheck, OnlineError> {
        let options = AionOptions {
            delay: AionDelay::Watermark,
            scope: Some(AionScope { partitioning, owned: partition }),
            ..AionOptions::new(level)
        };
        Ok(PartitionCheck {
            topic: topic.to_string(),
            partition,
            level,
            aion: Some(Aion::new(options)?),
            kv: None,
            initial,
            headers: BTreeMap::new(),
            header: None,
            batch: Vec::new(),
            batch_offsets: Vec::new(),
            producers: BTreeMap::new(),
            expected_producers,
            applied: None,
            batch_producers: Vec::new(),
            producer_names: Vec::new(),
            names: FxHashMap::default(),
            sessions: FxHashMap::default(),
            received: 0,
            beyond: 0,
            finished: None,
            batch_times: Vec::new(),
            batch_numbers: Vec::new(),
            numbers: Vec::new(),
            waiting: std::collections::VecDeque::new(),
            latencies: Vec::new(),
        })
    }

    /// Whether every producer ended and every verdict is final.
    pub(crate) fn finished(&self) -> Option<Finished> {
        self.finished
    }

    /// Takes one message published at `published_ms` (its create time, or `None`);
    /// returns what became final.
    ///
    /// # Errors
    /// A message isocert's producers do not write, malformed transactions (naming the
    /// offset and the field), a transaction the checker refuses.
    pub(crate) fn accept(
        &mut self,
        kind: MessageKind,
        producer: &str,
        value: &[u8],
        (offset, published_ms): (i64, Option<i64>),
        found: &mut Vec<Finding>,
    ) -> Result<(), OnlineError> {
        if self.finished.is_some() {
            if matches!(kind, MessageKind::Txn | MessageKind::Parts) {
                tracing::warn!(
                    partition = self.partition,
                    offset,
                    "a transaction after every producer ended: not checked"
                );
            }
            return Ok(());
        }
        if !matches!(kind, MessageKind::Hello | MessageKind::Header) {
            self.producers.entry(producer.to_string()).or_default().spoke = true;
        }
        match kind {
            MessageKind::Txn => {
                if value.contains(&b'\n') {
                    return Err(self.bad(offset, "a transaction message holds more than one line"));
                }
                self.push_line(producer, value, None, (offset, published_ms));
                if self.batch_offsets.len() >= BATCH {
                    self.flush(found)?;
                }
            }
            MessageKind::Parts => {
                let parts = parse_parts(value).map_err(|m| self.bad(offset, &m))?;
                for (numbers, line) in parts {
                    self.push_line(producer, line, numbers.as_deref(), (offset, published_ms));
                }
                if self.batch_offsets.len() >= BATCH {
                    self.flush(found)?;
                }
            }
            MessageKind::Hello => {
                parse_hello(value).map_err(|m| self.bad(offset, &format!("producer {producer}: {m}")))?;
                self.producers.entry(producer.to_string()).or_default();
            }
            MessageKind::Header => {
                if self.kv.is_some() {
                    // Parsed already: only a header whose initial values are known changes nothing.
                    if !self.headers.values().any(|h| h.as_slice() == value) {
                        return Err(self.bad(
                            offset,
                            &format!(
                                "producer {producer}'s header (initial values) arrived after transactions were \
                                 checked: start the members with --producers N, N counting every producer, so \
                                 that they wait for every producer's header"
                            ),
                        ));
                    }
                } else if self.headers.get(producer).is_some_and(|h| h.as_slice() != value) {
                    return Err(self.bad(offset, &format!("producer {producer} sent two different headers")));
                } else {
                    self.headers.insert(producer.to_string(), value.to_vec());
                }
                self.producers.entry(producer.to_string()).or_default().spoke = true;
            }
            MessageKind::Mark => {
                let mark = parse_mark(value).map_err(|m| self.bad(offset, &m))?;
                self.flush(found)?;
                self.producers.entry(producer.to_string()).or_default().mark = Some(mark);
                self.advance(found);
            }
            MessageKind::End => {
                self.flush(found)?;
                self.producers.entry(producer.to_string()).or_default().ended = true;
                self.advance(found);
            }
        }
        Ok(())
    }

    /// Buffers one transaction line (a share of one when `numbers` gives its operations'
    /// numbers in the whole transaction) from `producer`.
    fn push_line(
        &mut self,
        producer: &str,
        line: &[u8],
        numbers: Option<&[u32]>,
        (offset, published_ms): (i64, Option<i64>),
    ) {
        self.producers.entry(producer.to_string()).or_default();
        let index = match self.producer_names.iter().position(|p| p == producer) {
            Some(i) => i,
            None => {
                self.producer_names.push(producer.to_string());
                self.producer_names.len() - 1
            }
        };
        self.batch_producers.push(index);
        self.batch.extend_from_slice(line);
        self.batch.push(b'\n');
        self.batch_offsets.push(offset);
        self.batch_times.push(published_ms.unwrap_or_else(now_ms));
        self.batch_numbers.push(numbers.map(|n| {
            let from = self.numbers.len();
            self.numbers.extend_from_slice(n);
            from..self.numbers.len()
        }));
    }

    fn bad(&self, offset: i64, message: &str) -> OnlineError {
        Self::bad_at(&self.topic, self.partition, offset, message)
    }

    fn bad_at(topic: &str, partition: u32, offset: i64, message: &str) -> OnlineError {
        OnlineError::BadMessage { topic: topic.to_string(), partition, offset, message: message.to_string() }
    }

    /// Parses and checks the buffered transactions.
    ///
    /// # Errors
    /// As [`PartitionCheck::accept`].
    pub(crate) fn flush(&mut self, found: &mut Vec<Finding>) -> Result<(), OnlineError> {
        if self.batch_offsets.is_empty() {
            return Ok(());
        }
        let first = self.kv.is_none();
        if first {
            // The initial values are the union of every producer's header: wait for all.
            let waiting =
                self.producers.len() < self.expected_producers || self.producers.values().any(|p| !p.spoke);
            if waiting {
                return Ok(());
            }
            self.header = merge_headers(&self.headers).map_err(|m| self.bad(-1, &m))?;
        }
        let mut text = Vec::new();
        let header_lines = match (&self.header, first) {
            (Some(h), true) => {
                text.extend_from_slice(h);
                text.push(b'\n');
                1
            }
            _ => 0,
        };
        text.extend_from_slice(&self.batch);
        let part = read_kv_v1_bytes(&text).map_err(|e| self.message_error(e, header_lines))?;
        if first && !commit_order_decides(self.level, part.dict().serial_order) {
            // Findings are final as they are found: none could be held back as uncertified.
            return Err(self.bad(
                -1,
                "the producers' timestamps do not promise to be the order their transactions serialized in \
                 (header serial_order \"unknown\", as PostgreSQL's SSI): a violation of commit order would be no \
                 anomaly, so this stream cannot be checked at serializability online; check it at -i si, and \
                 serializability offline with --checker emme and the recovered certificate",
            ));
        }
        self.batch.clear();
        let offsets = std::mem::take(&mut self.batch_offsets);
        let times = std::mem::take(&mut self.batch_times);
        let producers = std::mem::take(&mut self.batch_producers);
        let shares = std::mem::take(&mut self.batch_numbers);
        let numbers = std::mem::take(&mut self.numbers);
        let from = match &mut self.kv {
            None => {
                let mut part = part;
                part.drop_name_index();
                part.set_default_initial(self.initial.as_ref());
                self.kv = Some(part);
                0
            }
            Some(kv) => {
                let from = kv.len();
                kv.append(part).expect("names are not indexed");
                from
            }
        };
        let kv = self.kv.as_mut().expect("set above");
        let aion = self.aion.as_mut().expect("not finished");
        for (j, i) in (from..kv.len()).enumerate() {
            let t = TxnId::from_index(i);
            let producer = producers[j];
            match self.names.entry(kv.name(t).clone()) {
                std::collections::hash_map::Entry::Occupied(first) if *first.get() == producer => {
                    tracing::warn!(
                        partition = self.partition,
                        offset = offsets[j],
                        "transaction {} arrived again (a producer's retry): checked once",
                        kv.txn_label(t)
                    );
                    continue;
                }
                std::collections::hash_map::Entry::Occupied(first) => {
                    let message = format!(
                        "transaction {} is published by producers {} and {}: transaction ids must be unique \
                         over all producers (isocert run --emit-prefix keeps runs apart)",
                        kv.txn_label(t),
                        self.producer_names[*first.get()],
                        self.producer_names[producer]
                    );
                    return Err(Self::bad_at(&self.topic, self.partition, offsets[j], &message));
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(producer);
                }
            }
            let first = *self.sessions.entry(kv.session(t)).or_insert(producer);
            if first != producer {
                let message = format!(
                    "transaction {} of session {} is published by producer {}, the session's earlier ones by \
                     {}: a session belongs to one producer (isocert run --emit-prefix keeps runs apart)",
                    kv.txn_label(t),
                    kv.dict().session_name(kv.session(t)),
                    self.producer_names[producer],
                    self.producer_names[first]
                );
                return Err(Self::bad_at(&self.topic, self.partition, offsets[j], &message));
            }
            self.received += 1;
            match &shares[j] {
                None => aion.receive(kv, t)?,
                Some(range) => {
                    let numbers = &numbers[range.clone()];
                    if numbers.len() != kv.ops(t).len() {
                        let message = format!(
                            "transaction {}'s share has {} operations but {} operation numbers",
                            kv.txn_label(t),
                            kv.ops(t).len(),
                            numbers.len()
                        );
                        return Err(Self::bad_at(&self.topic, self.partition, offsets[j], &message));
                    }
                    aion.receive_part(kv, t, numbers)?;
                }
            }
            if let (Some(start), Some(_)) = (kv.start_ts(t), kv.commit_ts(t)) {
                self.waiting.push_back((start, times[j]));
            }
            if let (Some(w), Some(commit)) = (self.applied, kv.commit_ts(t)) {
                if commit < w.commit {
                    self.beyond += 1;
                    found.push(Finding::Late {
                        txn: scalar_json(kv.name(t)),
                        commit_ts: commit.to_string(),
                        watermark: w.commit.to_string(),
                    });
                }
            }
            if (i + 1).is_multiple_of(KvHistory::BLOCK) {
                kv.free_block(i / KvHistory::BLOCK);
            }
        }
        take_final(aion, kv, found);
        self.note_final();
        Ok(())
    }

    /// Records the latency of the transactions whose verdicts the watermark made final.
    fn note_final(&mut self) {
        let Some(w) = self.applied else { return };
        let now = now_ms();
        while let Some(&(start, published)) = self.waiting.front() {
            if start >= w.commit {
                break;
            }
            self.waiting.pop_front();
            self.latencies.push(u32::try_from((now - published).max(0)).unwrap_or(u32::MAX));
        }
    }

    /// A parse error named by the message it came from (the batch's line numbers mean
    /// nothing to a reader).
    fn message_error(&self, e: FormatError, header_lines: usize) -> OnlineError {
        let first = self.batch_offsets.first().copied().unwrap_or(-1);
        match &e {
            FormatError::Invalid { line, field, message } => {
                let what = if field.is_empty() { message.clone() } else { format!("{field}: {message}") };
                match line.checked_sub(1 + header_lines) {
                    Some(i) if i < self.batch_offsets.len() => self.bad(self.batch_offsets[i], &what),
                    _ if header_lines == 1 && *line == 1 => self.bad(-1, &format!("the header: {what}")),
                    _ => self.bad(first, &e.to_string()),
                }
            }
            _ => self.bad(first, &e.to_string()),
        }
    }

    /// Applies the lowest watermark of the producers, once every expected producer has
    /// said hello and each has given one (an ended producer promises everything);
    /// finishes the partition when all ended.
    fn advance(&mut self, found: &mut Vec<Finding>) {
        if self.producers.len() < self.expected_producers {
            return;
        }
        if self.producers.values().all(|p| p.ended) {
            self.finish(found);
            return;
        }
        let mut low = Watermark::END;
        for p in self.producers.values() {
            match (p.ended, p.mark) {
                (true, _) => {}
                (false, Some(m)) => low = low.min(m),
                (false, None) => return,
            }
        }
        if self.applied.is_some_and(|a| a >= low) {
            return;
        }
        self.applied =
            Some(self.applied.map_or(low, |a| Watermark {
                start: a.start.max(low.start),
                commit: a.commit.max(low.commit),
            }));
        if let (Some(aion), Some(kv)) = (self.aion.as_mut(), self.kv.as_ref()) {
            aion.complete_below(kv, low);
            take_final(aion, kv, found);
        }
        self.note_final();
    }

    /// Every verdict final: the rest of the anomalies.
    fn finish(&mut self, found: &mut Vec<Finding>) {
        let aion = self.aion.take().expect("finished once");
        let kv = self.kv.take().unwrap_or_default();
        let report = aion.finish(&kv);
        for a in &report.anomalies {
            found.push(finding(&kv, a));
        }
        self.applied = Some(Watermark::END);
        self.note_final();
        self.latencies.sort_unstable();
        let at = |q: f64| {
            let n = self.latencies.len();
            if n == 0 {
                0
            } else {
                u64::from(self.latencies[((n - 1) as f64 * q).round() as usize])
            }
        };
        self.finished = Some(Finished {
            txns: self.received,
            anomalies: report.anomalies.len() as u64,
            beyond_watermark: self.beyond,
            latency_ms: (at(0.5), at(0.99)),
        });
    }
}

/// One header line holding every producer's initial values: the single header as it is,
/// or the first (by producer id) with the others' initial values added (an entry given
/// twice alike is kept once; the same object given two values is refused when the line is
/// read). Producers must agree on the dialect; the serial order is commit order only where
/// every producer's is.
fn merge_headers(headers: &BTreeMap<String, Vec<u8>>) -> Result<Option<Vec<u8>>, String> {
    let mut distinct: Vec<(&String, &Vec<u8>)> = Vec::new();
    for (producer, h) in headers {
        if !distinct.iter().any(|(_, d)| *d == h) {
            distinct.push((producer, h));
        }
    }
    match distinct.as_slice() {
        [] => return Ok(None),
        [(_, only)] => return Ok(Some((*only).clone())),
        _ => {}
    }
    let parse = |(producer, h): &(&String, &Vec<u8>)| {
        serde_json::from_slice::<serde_json::Value>(h)
            .map_err(|e| format!("producer {producer}'s header: {e}"))
    };
    let mut merged = parse(&distinct[0])?;
    let mut initial: Vec<serde_json::Value> =
        merged.get("initial").and_then(|v| v.as_array()).cloned().unwrap_or_default();
    let mut seen: rustc_hash::FxHashSet<String> = initial.iter().map(|e| e.to_string()).collect();
    for other in &distinct[1..] {
        let header = parse(other)?;
        if header.get("dialect") != merged.get("dialect") {
            return Err(format!(
                "producers {} and {} publish histories of different SQL dialects",
                distinct[0].0, other.0
            ));
        }
        if let Some(order) = header.get("serial_order").filter(|o| o.as_str() != Some("commit_ts")) {
            merged["serial_order"] = order.clone();
        }
        for entry in header.get("initial").and_then(|v| v.as_array()).into_iter().flatten() {
            if seen.insert(entry.to_string()) {
                initial.push(entry.clone());
            }
        }
    }
    merged["initial"] = serde_json::Value::Array(initial);
    serde_json::to_vec(&merged).map(Some).map_err(|e| e.to_string())
}

fn take_final(aion: &mut Aion, kv: &KvHistory, found: &mut Vec<Finding>) {
    for a in aion.take_final() {
        found.push(finding(kv, a));
    }
}

fn finding(kv: &KvHistory, a: &isocert_checker::Anomaly) -> Finding {
    Finding::Anomaly {
        kind: a.kind.to_string(),
        txns: a.txns.iter().map(|&t| scalar_json(kv.name(t))).collect(),
        explanation: a.explanation.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> PartitionCheck {
        let p = Partitioning::new(1);
        PartitionCheck::new("t", 0, p, IsolationLevel::SnapshotIsolation, None, 1).unwrap()
    }

    /// A malformed transaction message is an error naming its offset and field, not a panic.
    #[test]
    fn a_malformed_message_names_its_offset_and_field() {
        let mut c = check();
        let mut found = Vec::new();
        let good = b"{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[]}";
        let bad =
            b"{\"id\":2,\"session\":1,\"start_ts\":3,\"commit_ts\":4,\"ops\":[{\"f\":\"q\",\"key\":1}]}";
        c.accept(MessageKind::Txn, "p", good, (10, None), &mut found).unwrap();
        c.accept(MessageKind::Txn, "p", bad, (11, None), &mut found).unwrap();
        let e = c.flush(&mut found).unwrap_err().to_string();
        assert!(e.starts_with("topic t partition 0 offset 11: ops[0]"), "{e}");
        let e =
            check().accept(MessageKind::Txn, "p", b"{}\n{}", (5, None), &mut found).unwrap_err().to_string();
        assert!(e.contains("offset 5") && e.contains("more than one line"), "{e}");
        let e = check().accept(MessageKind::Mark, "p", b"x", (7, None), &mut found).unwrap_err().to_string();
        assert!(e.contains("offset 7") && e.contains("START COMMIT"), "{e}");
    }

    /// One transaction id from two producers, or one session from two producers, is an
    /// error naming both (two runs publishing their own `1, 2, 3...` to one topic would
    /// otherwise be merged as retries); the same transaction again from its producer is a
    /// retry, checked once.
    #[test]
    fn ids_and_sessions_clashing_across_producers_are_refused() {
        let txn = |id: &str, session: u32| {
            format!("{{\"id\":{id},\"session\":{session},\"start_ts\":1,\"commit_ts\":2,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":{session}}}]}}")
        };
        let mut found = Vec::new();
        let mut c = check();
        // Batches are parsed at marks, every BATCH lines and when the topic pauses: a
        // retry or a clash usually lands in a later batch than the first copy.
        for (producer, offset) in [("a", 0), ("a", 1)] {
            c.accept(MessageKind::Txn, producer, txn("1", 1).as_bytes(), (offset, None), &mut found).unwrap();
            c.flush(&mut found).unwrap();
        }
        assert_eq!(c.received, 1, "a retry is checked once");
        c.accept(MessageKind::Txn, "b", txn("1", 2).as_bytes(), (2, None), &mut found).unwrap();
        let e = c.flush(&mut found).unwrap_err().to_string();
        assert!(e.contains("offset 2") && e.contains("producers a and b") && e.contains("T1"), "{e}");
        let mut c = check();
        c.accept(MessageKind::Txn, "a", txn("1", 1).as_bytes(), (0, None), &mut found).unwrap();
        c.flush(&mut found).unwrap();
        c.accept(MessageKind::Txn, "b", txn("2", 1).as_bytes(), (1, None), &mut found).unwrap();
        let e = c.flush(&mut found).unwrap_err().to_string();
        assert!(e.contains("offset 1") && e.contains("session 1") && e.contains("producer b"), "{e}");
        let mut c = check();
        c.accept(MessageKind::Txn, "a", txn("\"a/1\"", 1).as_bytes(), (0, None), &mut found).unwrap();
        c.accept(MessageKind::Txn, "b", txn("\"b/1\"", 2).as_bytes(), (1, None), &mut found).unwrap();
        c.flush(&mut found).unwrap();
    }

    /// Two producers with their own initial values (two runs with `--emit-prefix`): the
    /// partition waits for both headers and checks with their union, so each run's reads
    /// of its initial values are explained; a third producer's header after the first
    /// parse is refused, naming `--producers`.
    #[test]
    fn every_producers_initial_values_are_merged() {
        let mut c =
            PartitionCheck::new("t", 0, Partitioning::new(1), IsolationLevel::SnapshotIsolation, None, 2)
                .unwrap();
        let mut found = Vec::new();
        let header = |p: &str| {
            format!("{{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{{\"key\":\"{p}/1\",\"value\":0}}]}}")
        };
        let read = |p: &str| {
            format!("{{\"id\":\"{p}/1\",\"session\":\"{p}/1\",\"start_ts\":5,\"commit_ts\":6,\"ops\":[{{\"f\":\"r\",\"key\":\"{p}/1\",\"value\":0}}]}}")
        };
        for (offset, p) in [(0, "a"), (2, "b")] {
            c.accept(MessageKind::Hello, p, b"", (offset, None), &mut found).unwrap();
            c.accept(MessageKind::Header, p, header(p).as_bytes(), (offset, None), &mut found).unwrap();
        }
        // a's transaction may be flushed before b's header would have arrived: it waits.
        c.accept(MessageKind::Txn, "a", read("a").as_bytes(), (4, None), &mut found).unwrap();
        c.accept(MessageKind::Txn, "b", read("b").as_bytes(), (5, None), &mut found).unwrap();
        c.flush(&mut found).unwrap();
        let e = c
            .accept(MessageKind::Header, "c", header("c").as_bytes(), (6, None), &mut found)
            .unwrap_err()
            .to_string();
        assert!(e.contains("producer c") && e.contains("--producers"), "{e}");
        c.accept(MessageKind::End, "a", b"", (7, None), &mut found).unwrap();
        c.accept(MessageKind::End, "b", b"", (8, None), &mut found).unwrap();
        assert_eq!(found, [], "both initial values are known");
        assert_eq!(c.finished().map(|f| (f.txns, f.anomalies)), Some((2, 0)));
    }

    /// A producer whose header disowns commit order as the serial order (PostgreSQL's:
    /// `serial_order` "unknown") cannot be checked at serializability online, where each
    /// finding is final at once: the member stops naming the header, before any verdict.
    /// At snapshot isolation, and with a header that claims commit order (the near twin),
    /// the same stream is checked; two producers' headers merge to unknown if either is.
    #[test]
    fn a_stream_without_a_serial_order_is_refused_at_serializability() {
        let header = |order: &str| {
            format!("{{\"format\":\"isocert-history\",\"version\":1,\"serial_order\":\"{order}\"}}")
        };
        let txn = b"{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1}]}";
        let run = |level: IsolationLevel, headers: &[(&str, &str)]| {
            let mut c =
                PartitionCheck::new("t", 0, Partitioning::new(1), level, None, headers.len()).unwrap();
            let mut found = Vec::new();
            for (offset, (producer, order)) in headers.iter().enumerate() {
                let offset = offset as i64;
                c.accept(MessageKind::Hello, producer, b"", (offset, None), &mut found).unwrap();
                c.accept(MessageKind::Header, producer, header(order).as_bytes(), (offset, None), &mut found)
                    .unwrap();
            }
            c.accept(MessageKind::Txn, headers[0].0, txn, (9, None), &mut found).unwrap();
            c.flush(&mut found).map(|()| c.received)
        };
        let ser = IsolationLevel::Serializable;
        let e = run(ser, &[("p", "unknown")]).unwrap_err().to_string();
        assert!(e.contains("serial_order") && e.contains("-i si") && e.contains("emme"), "{e}");
        assert_eq!(run(IsolationLevel::SnapshotIsolation, &[("p", "unknown")]).unwrap(), 1);
        assert_eq!(run(ser, &[("p", "commit_ts")]).unwrap(), 1);
        assert!(run(ser, &[("a", "commit_ts"), ("b", "unknown")]).is_err(), "b's order is unknown");
        assert!(run(ser, &[("a", "unknown"), ("b", "commit_ts")]).is_err(), "a's order is unknown");
    }

    /// Shares of transactions in `parts` messages (protocol 2) are checked with their
    /// operations' original numbers; a batch delivered twice (a producer's retry) is
    /// checked once; a share whose numbers do not match its operations, a hello of a newer
    /// protocol and a malformed batch are errors naming the offset.
    #[test]
    fn parts_messages_are_checked_once_with_their_operation_numbers() {
        let mut found = Vec::new();
        let mut c = check();
        // T1's share holds its operation 1 (0-based), a read of kv[2] = 7 that nothing
        // wrote: cited as operation 2, as offline.
        let batch = b"- {\"id\":9,\"session\":1,\"start_ts\":1,\"commit_ts\":1,\"ops\":[]}\n\
                      1 {\"id\":1,\"session\":1,\"start_ts\":2,\"commit_ts\":3,\"ops\":[{\"f\":\"r\",\"key\":2,\"value\":7}]}\n";
        c.accept(MessageKind::Hello, "p", b"isocert-online 2", (0, None), &mut found).unwrap();
        for offset in [1, 2] {
            c.accept(MessageKind::Parts, "p", batch, (offset, None), &mut found).unwrap();
            c.flush(&mut found).unwrap();
        }
        assert_eq!(c.received, 2, "the retried batch is checked once");
        c.accept(MessageKind::End, "p", b"", (3, None), &mut found).unwrap();
        match &found[..] {
            [Finding::Anomaly { kind, explanation, .. }] => {
                assert_eq!(kind, "ext");
                assert!(explanation.starts_with("Ext: T1 (operation 2) read kv[2] = 7"), "{explanation}");
            }
            other => panic!("{other:?}"),
        }
        let e = check()
            .accept(MessageKind::Hello, "q", b"isocert-online 9", (4, None), &mut found)
            .unwrap_err()
            .to_string();
        assert!(e.contains("offset 4") && e.contains("producer q") && e.contains("protocol 9"), "{e}");
        let mut c = check();
        let wrong = b"0,1 {\"id\":1,\"session\":1,\"start_ts\":2,\"commit_ts\":3,\"ops\":[{\"f\":\"r\",\"key\":2,\"value\":7}]}";
        c.accept(MessageKind::Parts, "p", wrong, (5, None), &mut found).unwrap();
        let e = c.flush(&mut found).unwrap_err().to_string();
        assert!(e.contains("offset 5") && e.contains("2 operation numbers"), "{e}");
        let e = check()
            .accept(MessageKind::Parts, "p", b"x,y {}", (6, None), &mut found)
            .unwrap_err()
            .to_string();
        assert!(e.contains("offset 6") && e.contains("share 1"), "{e}");
    }

    /// Verdicts wait for every expected producer's watermark; an ended producer promises
    /// everything; the partition finishes when all ended.
    #[test]
    fn watermarks_wait_for_every_producer() {
        let mut c =
            PartitionCheck::new("t", 0, Partitioning::new(1), IsolationLevel::SnapshotIsolation, None, 2)
                .unwrap();
        let mut found = Vec::new();
        let read = b"{\"id\":1,\"session\":1,\"start_ts\":5,\"commit_ts\":6,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":7}]}";
        c.accept(MessageKind::Txn, "a", read, (0, None), &mut found).unwrap();
        c.accept(MessageKind::Mark, "a", b"100 100", (1, None), &mut found).unwrap();
        assert!(found.is_empty(), "producer b has not said hello: nothing is final");
        c.accept(MessageKind::Hello, "b", b"", (2, None), &mut found).unwrap();
        c.accept(MessageKind::Mark, "b", b"3 4", (3, None), &mut found).unwrap();
        assert!(found.is_empty(), "b may still publish a writer committing at 4");
        c.accept(MessageKind::Mark, "b", b"50 50", (4, None), &mut found).unwrap();
        assert!(matches!(&found[..], [Finding::Anomaly { kind, .. }] if kind == "ext"), "{found:?}");
        c.accept(MessageKind::End, "a", b"", (5, None), &mut found).unwrap();
        assert!(c.finished().is_none());
        c.accept(MessageKind::End, "b", b"", (6, None), &mut found).unwrap();
        let done = c.finished().unwrap();
        assert_eq!((done.txns, done.anomalies, done.beyond_watermark), (1, 1, 0));
    }
}
