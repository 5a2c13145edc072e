//! `isocert run --emit` while the workload runs (docs/ONLINE.md, "Publishing from
//! `isocert run`"): every ~25 ms the driver makes a *cut* (it holds every session back
//! until no transaction is in flight), takes the transactions recorded since the last
//! cut and the change stream's commits up to then, has the database's incremental rule
//! ([`isocert_adapters::LiveTicks`]) give them their final start and commit ticks, and
//! publishes them with a watermark. Database-neutral: the seam gives the rule and the
//! stream's commits up to the cut.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use isocert_adapters::{ChangeCapture, CommittedTxn, Database, LiveTicks};
use isocert_checker::Watermark;
use isocert_history::{
    read_kv_v1_bytes, v1, History, IsolationLevel, ObjId, SerialOrder, Timestamp, Transaction, TxnId, ValueId,
};
use isocert_online::Emitter;
use isocert_workload::Observe;

use super::online::LiveTarget;

/// How often the driver makes a cut while the workload runs.
const CUT_EVERY: Duration = Duration::from_millis(25);

/// One transaction as the recorder handed it over.
struct Seen {
    id: TxnId,
    txn: Transaction,
    /// Its v1 line, without timestamps.
    line: Vec<u8>,
    /// When the client learnt its outcome, in milliseconds since the Unix epoch.
    completed_ms: i64,
}

/// What the recorder hands over: the header once, then each transaction.
#[derive(Default)]
struct Inbox {
    header: Option<Vec<u8>>,
    /// The history's initial versions, until the rule has them.
    initial: Option<Vec<(ObjId, ValueId)>>,
    txns: Vec<Seen>,
    /// A transaction that did not write as v1 (stops live publishing).
    error: Option<String>,
}

/// What live publishing did, for the publication after recovery.
pub(crate) struct LiveState {
    /// The connected producer (after the first group).
    pub(crate) emitter: Option<Emitter>,
    /// The header line the members got (initial values), once known.
    pub(crate) header: Option<Vec<u8>>,
    /// The serial order that header promised: recovery must not record a weaker one.
    pub(crate) serial_order: Option<SerialOrder>,
    /// Per transaction id (index), the ticks it was published with.
    pub(crate) published: Vec<Option<(Timestamp, Timestamp)>>,
    /// Transactions published.
    pub(crate) sent: u64,
    /// Committed transactions without operations (and no snapshot), not published.
    pub(crate) empty: u64,
    /// Set once the producer's `end` is sent: every transaction is published.
    pub(crate) ended: bool,
    /// Why live publishing stopped early (the rest is published after recovery).
    pub(crate) stopped: Option<String>,
    /// Milliseconds from each published transaction's completion to its publication.
    pub(crate) delays_ms: Vec<u64>,
}

/// The driver of live publishing for one run.
pub(crate) struct LiveDriver {
    target: LiveTarget,
    rule: Box<dyn LiveTicks>,
    inbox: Arc<Mutex<Inbox>>,
    gate: Arc<tokio::sync::RwLock<()>>,
    stream: std::collections::VecDeque<CommittedTxn>,
    state: Arc<Mutex<LiveState>>,
    serial_order: SerialOrder,
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl LiveDriver {
    /// The hooks for the workload and the driver, when `D` has an incremental rule
    /// (`None`: the run publishes after recovery).
    ///
    /// The run's transactions run at `level`, which decides the serial order the
    /// published header promises ([`LiveTicks::serial_order`]).
    pub(crate) fn new<D: Database>(
        target: LiveTarget,
        state: Arc<Mutex<LiveState>>,
        level: IsolationLevel,
    ) -> Option<(Observe, LiveDriver)> {
        let rule = D::live_ticks()?;
        let serial_order = rule.serial_order(level);
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let gate = Arc::new(tokio::sync::RwLock::new(()));
        let sink = Arc::clone(&inbox);
        let observer = Box::new(move |h: &History, t: Option<TxnId>| {
            let mut inbox = sink.lock().expect("inbox lock");
            match t {
                None => {
                    let mut header = Vec::new();
                    inbox.initial = Some(h.initial.clone());
                    let mut dict = h.without_txns();
                    dict.serial_order = serial_order;
                    match v1::write_header(&dict, &mut header) {
                        Ok(()) => inbox.header = Some(header.trim_ascii_end().to_vec()),
                        Err(e) => inbox.error = Some(format!("the history's header: {e}")),
                    }
                }
                Some(t) => {
                    let mut line = Vec::with_capacity(256);
                    if let Err(e) = v1::write_txn(h, t, &mut line) {
                        inbox.error.get_or_insert(format!("{}: {e}", h.txn_label(t)));
                        return;
                    }
                    let end = line.iter().rposition(|&b| b != b'\n').map_or(0, |i| i + 1);
                    line.truncate(end);
                    inbox.txns.push(Seen { id: t, txn: h.txn(t).clone(), line, completed_ms: now_ms() });
                }
            }
        });
        let observe = Observe { gate: Arc::clone(&gate), observer };
        Some((
            observe,
            LiveDriver {
                target,
                rule,
                inbox,
                gate,
                stream: std::collections::VecDeque::new(),
                state,
                serial_order,
            },
        ))
    }

    /// Cuts and publishes every [`CUT_EVERY`] until `stopped` (the workload ended), or
    /// until a group cannot be published live (recorded in the state: the rest goes
    /// after recovery).
    pub(crate) async fn run<D: Database>(&mut self, capture: &mut D::Capture, stopped: &AtomicBool) {
        while !stopped.load(Ordering::SeqCst) {
            tokio::time::sleep(CUT_EVERY).await;
            if !self.step::<D>(capture).await {
                return;
            }
        }
    }

    /// The last group (the workload has ended), then the producer's end.
    pub(crate) async fn finish<D: Database>(mut self, capture: &mut D::Capture) {
        if !self.step::<D>(capture).await {
            return;
        }
        let mut state = self.state.lock().expect("live state lock");
        if let Some(emitter) = state.emitter.take() {
            match emitter.finish() {
                Ok(_) => state.ended = true,
                Err(e) => state.stopped = Some(format!("ending: {e}")),
            }
        } else {
            // Nothing was published live (no committed transaction): after recovery.
            state.stopped.get_or_insert_with(|| "no transaction to publish during the run".into());
        }
    }

    /// One cut and its group; `false` once live publishing has stopped.
    async fn step<D: Database>(&mut self, capture: &mut D::Capture) -> bool {
        if self.state.lock().expect("live state lock").stopped.is_some() {
            return false;
        }
        match self.publish_group::<D>(capture).await {
            Ok(()) => true,
            Err(e) => {
                let mut state = self.state.lock().expect("live state lock");
                crate::output::note!(
                    "isocert: --emit: publishing during the run stopped after {} transactions ({e:#}); the rest \
                     are published after recovery",
                    state.sent
                );
                state.stopped = Some(format!("{e:#}"));
                false
            }
        }
    }

    async fn publish_group<D: Database>(&mut self, capture: &mut D::Capture) -> anyhow::Result<()> {
        let began = std::time::Instant::now();
        let (group, header) = {
            // The cut: no attempt is in flight, every one begun is recorded.
            let _cut = self.gate.write().await;
            let mut inbox = self.inbox.lock().expect("inbox lock");
            if let Some(e) = inbox.error.take() {
                anyhow::bail!("{e}");
            }
            if let Some(initial) = inbox.initial.take() {
                self.rule.initial(&initial);
            }
            (std::mem::take(&mut inbox.txns), inbox.header.clone())
        };
        if group.is_empty() {
            return Ok(());
        }
        let cut = began.elapsed();
        if self.rule.needs_stream() {
            self.stream.extend(capture.take_committed().await.context("reading the change stream")?);
        }
        let streamed = began.elapsed();
        let refs: Vec<(TxnId, &Transaction)> = group.iter().map(|s| (s.id, &s.txn)).collect();
        let ticks = self.rule.group(&refs, &mut self.stream)?;
        let low = self.rule.low();
        let mut state = self.state.lock().expect("live state lock");
        if state.emitter.is_none() {
            // Hello only now: a run failing before leaves no producer to wait for.
            let mut emitter =
                Emitter::connect(&self.target.target, &self.target.producer_id, self.target.partitions)?;
            if let Some(h) = &header {
                let line = self.target.renamed(h)?;
                if !line.is_empty() {
                    emitter.header(&line)?;
                }
            }
            state.header = header;
            state.serial_order = Some(self.serial_order);
            state.emitter = Some(emitter);
        }
        let published_at = now_ms();
        for (seen, ticks) in group.iter().zip(ticks) {
            if !seen.txn.is_committed() {
                continue;
            }
            let Some((start, commit)) = ticks else {
                if seen.txn.ops.is_empty() {
                    state.empty += 1;
                    continue;
                }
                anyhow::bail!("T{} committed operations but has no start or commit tick", seen.txn.name);
            };
            let line = self.target.with_ticks(&seen.line, start, commit)?;
            let (session, ops) =
                self.target.partitions_of(state.emitter.as_ref().expect("connected"), &line)?;
            state.emitter.as_mut().expect("connected").transaction_completed_at(
                &line,
                session,
                &ops,
                Some(seen.completed_ms),
            )?;
            let i = seen.id.index();
            if state.published.len() <= i {
                state.published.resize(i + 1, None);
            }
            state.published[i] = Some((start, commit));
            state.sent += 1;
            state.delays_ms.push(u64::try_from(published_at - seen.completed_ms).unwrap_or(0));
        }
        state.emitter.as_mut().expect("connected").mark(Watermark { start: low, commit: low })?;
        tracing::debug!(
            txns = group.len(),
            cut_ms = cut.as_secs_f64() * 1e3,
            stream_ms = streamed.as_secs_f64() * 1e3,
            total_ms = began.elapsed().as_secs_f64() * 1e3,
            "--emit: a group published"
        );
        Ok(())
    }
}

impl LiveTarget {
    /// `line` with the prefix applied (ids, sessions, keys), if the run has one.
    pub(crate) fn renamed(&self, line: &[u8]) -> anyhow::Result<Vec<u8>> {
        match &self.prefix {
            Some(prefix) => {
                let mut out = super::online::prefixed(line, prefix)?;
                out.truncate(out.trim_ascii_end().len());
                Ok(out)
            }
            None => Ok(line.to_vec()),
        }
    }

    /// The published line of a transaction: its v1 line with its ticks, without the
    /// adapter's facts (members ignore them), renamed by the prefix.
    fn with_ticks(&self, line: &[u8], start: Timestamp, commit: Timestamp) -> anyhow::Result<Vec<u8>> {
        let mut value: serde_json::Value = serde_json::from_slice(line).context("a recorded transaction")?;
        let map = value.as_object_mut().context("a transaction line that is not an object")?;
        map.remove("meta");
        map.insert("start_ts".into(), start.to_json());
        map.insert("commit_ts".into(), commit.to_json());
        for op in map.get_mut("ops").and_then(|o| o.as_array_mut()).into_iter().flatten() {
            if let Some(op) = op.as_object_mut() {
                op.remove("meta");
            }
        }
        self.renamed(&serde_json::to_vec(&value)?)
    }

    /// The partition of the transaction's session and of each operation's object, as
    /// `isocert emit` computes them from the published line.
    fn partitions_of(&self, emitter: &Emitter, line: &[u8]) -> anyhow::Result<(u32, Vec<u32>)> {
        let kv = read_kv_v1_bytes(line).context("a published transaction")?;
        let t = TxnId::from_index(0);
        let partitioning = emitter.partitioning();
        Ok((partitioning.of_session(kv.dict().session_name(kv.session(t))), partitioning.of_ops(&kv, t)))
    }
}
