//! `isocert emit`, `isocert check --online` and `isocert run --emit`: the flags, and the
//! wiring to isocert-online (cargo feature `kafka`; docs/ONLINE.md). A binary built without
//! the feature knows the flags and refuses them with a clear error.

use std::path::PathBuf;
#[cfg(not(feature = "kafka"))]
use std::process::ExitCode;

#[cfg(not(feature = "kafka"))]
use crate::check::CheckArgs;

/// Publish a recorded v1 history to a Kafka topic of transactions, for `isocert check
/// --online` (tests and replays; a live test client publishes with `isocert_online::LiveEmitter`).
///
/// Each partition owning the transaction's session or one of its objects gets its share of
/// it (the transaction's fields and the operations on its objects, with their original
/// numbers), many transactions' shares to a message, with the producer's watermark every
/// --mark-every transactions. The topic is created with --partitions partitions if it does
/// not exist.
#[derive(Debug, clap::Args)]
pub(crate) struct EmitArgs {
    /// Where: `kafka://BROKER:PORT[,BROKER:PORT...]/TOPIC`.
    #[arg(value_name = "KAFKA_URL")]
    pub(crate) target: String,
    /// The history (JSON Lines, v1 format, item operations only).
    pub(crate) history: PathBuf,
    /// Partitions of the topic when isocert creates it (at least the number of members).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub(crate) partitions: u32,
    /// A watermark every this many transactions.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub(crate) mark_every: usize,
    /// This producer's id, unique among the topic's producers (default: host name and
    /// process id).
    #[arg(long, value_name = "ID")]
    pub(crate) producer_id: Option<String>,
    /// Publish at most this many transactions per second (a live stream's pace; default:
    /// as fast as the broker takes them).
    #[arg(long, value_name = "TXNS_PER_SEC")]
    pub(crate) rate: Option<f64>,
}

/// The flags of `isocert check --online`.
#[derive(Debug, clap::Args)]
pub(crate) struct OnlineCheckArgs {
    /// Check online: join consumer group --group on `kafka://BROKER:PORT/TOPIC` and check the
    /// partitions Kafka assigns this member, until every partition is finished (needs a
    /// binary built with `--features kafka`; docs/ONLINE.md).
    #[arg(long, value_name = "KAFKA_URL")]
    pub(crate) online: Option<String>,
    /// --online: the consumer group (one per check; its members share the partitions).
    #[arg(long, value_name = "GROUP", requires = "online")]
    pub(crate) group: Option<String>,
    /// --online: the topic verdicts go to (default TOPIC.results; created compacted).
    #[arg(long, value_name = "TOPIC", requires = "online")]
    pub(crate) results_topic: Option<String>,
    /// --online: watermarks wait until this many producers have said hello.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) producers: usize,
    /// --online: this member's name in the results (default: host name and process id).
    #[arg(long, value_name = "NAME", requires = "online")]
    pub(crate) member: Option<String>,
    /// --online: seconds the group waits for a silent member (one killed) before giving its
    /// partitions to the others.
    #[arg(long, default_value_t = 6, value_name = "SECS")]
    pub(crate) session_timeout: u64,
    /// --online: a librdkafka setting for the group consumer, KEY=VALUE (repeatable; e.g.
    /// security.protocol, sasl.*, max.partition.fetch.bytes), applied after isocert's own.
    #[arg(long = "kafka-config", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub(crate) kafka_config: Vec<(String, String)>,
    /// --online: partitions of the topic of transactions if this member creates it (the
    /// first producer or member creates it; at least the number of members).
    #[arg(long = "online-partitions", default_value_t = 4, value_name = "N")]
    pub(crate) partitions: u32,
}

/// The flags of `isocert run --emit`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunEmitArgs {
    /// Publish the run's transactions to `kafka://BROKER:PORT/TOPIC` for `isocert check
    /// --online` (needs a binary built with `--features kafka`; docs/ONLINE.md). Each goes
    /// with the start and commit timestamps its certificate gives it: on PostgreSQL while
    /// the workload runs (a group every 25 ms, ticks final when sent), on other databases
    /// after recovery; the broker is checked before the workload starts. Item workloads
    /// only (not `predicate`), and not with --no-recovery.
    #[arg(long, value_name = "KAFKA_URL")]
    pub(crate) emit: Option<String>,
    /// --emit: this run's producer id, unique among the topic's producers (default: host
    /// name and process id).
    #[arg(long, value_name = "ID", requires = "emit")]
    pub(crate) emit_producer_id: Option<String>,
    /// --emit: prefix every transaction id, session name and key with `PREFIX/` (`7`
    /// becomes `"PREFIX/7"`), so that several runs publishing to one topic (each on its own
    /// table, with its own clock) keep their transactions, sessions and rows apart.
    #[arg(long, value_name = "PREFIX", requires = "emit")]
    pub(crate) emit_prefix: Option<String>,
    /// --emit: partitions of the topic when this run creates it (at least the number of
    /// members).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub(crate) emit_partitions: u32,
    /// --emit: a watermark every this many transactions published after recovery (those
    /// published during the run get one per group).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub(crate) emit_mark_every: usize,
}

/// Parses `KEY=VALUE`.
fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{text:?}: expected KEY=VALUE")),
    }
}

#[cfg(not(feature = "kafka"))]
fn no_kafka(what: &str) -> anyhow::Result<ExitCode> {
    anyhow::bail!("{what} needs Kafka: this isocert was built without the `kafka` feature (cargo build --features kafka)")
}

/// `isocert emit`.
#[cfg(not(feature = "kafka"))]
pub(crate) fn emit(_args: EmitArgs) -> anyhow::Result<ExitCode> {
    no_kafka("isocert emit")
}

/// `isocert check --online`.
#[cfg(not(feature = "kafka"))]
pub(crate) fn check(_args: &CheckArgs) -> anyhow::Result<ExitCode> {
    no_kafka("isocert check --online")
}

/// `isocert run --emit`: refused before the workload runs.
#[cfg(not(feature = "kafka"))]
pub(crate) fn prepare_run_emit(
    args: &RunEmitArgs,
    _item_workload: bool,
    _recovery: bool,
) -> anyhow::Result<Option<RunEmit>> {
    match args.emit {
        Some(_) => no_kafka("isocert run --emit").map(|_| None),
        None => Ok(None),
    }
}

/// Where `isocert run --emit` publishes: a binary without the `kafka` feature has none
/// (no value of this type exists).
#[cfg(not(feature = "kafka"))]
#[derive(Debug)]
pub(crate) enum RunEmit {}

#[cfg(not(feature = "kafka"))]
impl RunEmit {
    /// As the `kafka` build's; there is no value to call it on.
    pub(crate) fn publish(
        &self,
        _h: &isocert_history::History,
        _database: &str,
        _out: &std::path::Path,
    ) -> anyhow::Result<u64> {
        match *self {}
    }
}

#[cfg(not(feature = "kafka"))]
impl RunEmit {
    /// As the `kafka` build's; there is no value to call it on. `D` is unused here but
    /// kept so that `run` calls both builds alike.
    #[allow(clippy::extra_unused_type_parameters)]
    pub(crate) fn live_driver<D: isocert_adapters::Database>(
        &self,
        level: isocert_history::IsolationLevel,
    ) -> Option<(isocert_workload::Observe, LiveDriver)> {
        let _ = level;
        match *self {}
    }
}

/// The driver of live publishing: a binary without the `kafka` feature has none.
#[cfg(not(feature = "kafka"))]
pub(crate) enum LiveDriver {}

#[cfg(not(feature = "kafka"))]
impl LiveDriver {
    /// As the `kafka` build's; there is no value to call it on.
    pub(crate) async fn run<D: isocert_adapters::Database>(
        &mut self,
        _capture: &mut D::Capture,
        _stopped: &std::sync::atomic::AtomicBool,
    ) {
        match *self {}
    }

    /// As the `kafka` build's; there is no value to call it on.
    pub(crate) async fn finish<D: isocert_adapters::Database>(self, _capture: &mut D::Capture) {
        match self {}
    }
}

#[cfg(feature = "kafka")]
pub(crate) use with_kafka::{check, emit, prefixed, prepare_run_emit, LiveTarget, RunEmit};

#[cfg(feature = "kafka")]
mod with_kafka {
    use std::io::Write as _;
    use std::process::ExitCode;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use crate::live_emit::LiveState;

    use anyhow::Context as _;
    use isocert_checker::CheckerKind;
    use isocert_history::SerialOrder;
    use isocert_online::{
        default_producer_id, emit_file, run_member, Emitter, MemberEvent, MemberOptions, OnlineTarget,
        ResultRecord, Summary,
    };

    use super::{EmitArgs, RunEmitArgs};
    use crate::check::CheckArgs;
    use crate::exit;

    /// Where and as whom `isocert run --emit` publishes.
    #[derive(Clone, Debug)]
    pub(crate) struct LiveTarget {
        pub(crate) target: OnlineTarget,
        pub(crate) producer_id: String,
        pub(crate) prefix: Option<String>,
        pub(crate) partitions: u32,
    }

    /// Where `isocert run --emit` publishes, checked before the workload runs, and what
    /// it published while the workload ran.
    pub(crate) struct RunEmit {
        target: LiveTarget,
        mark_every: usize,
        live: Arc<Mutex<LiveState>>,
    }

    impl std::fmt::Debug for RunEmit {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("RunEmit").field("target", &self.target).finish_non_exhaustive()
        }
    }

    /// `isocert run --emit`: refuses what cannot be published (a predicate workload, a run
    /// without recovery: neither gives what online checking reads) and checks that the
    /// broker answers and the topic exists or can be created, all before the workload runs.
    /// No producer says hello yet: a run that fails later must not leave members waiting
    /// for a producer that never publishes, nor tell them it ended.
    pub(crate) fn prepare_run_emit(
        args: &RunEmitArgs,
        item_workload: bool,
        recovery: bool,
    ) -> anyhow::Result<Option<RunEmit>> {
        let Some(url) = &args.emit else { return Ok(None) };
        let target = OnlineTarget::parse(url)?;
        if !item_workload {
            anyhow::bail!(
                "--emit: online checking takes item reads, writes and appends only; the predicate workload \
                 has range reads and predicate writes (use kv, skew, mini or append)"
            );
        }
        if !recovery {
            anyhow::bail!(
                "--emit publishes each transaction with the start and commit timestamps of its certificate; \
                 --no-recovery recovers none"
            );
        }
        if let Some(prefix) = &args.emit_prefix {
            if prefix.is_empty() || prefix.contains('/') {
                anyhow::bail!("--emit-prefix {prefix:?}: give a non-empty prefix without '/'");
            }
        }
        let partitions =
            isocert_online::ensure_topic(&target.brokers, &target.topic, args.emit_partitions.max(1), &[])
                .with_context(|| {
                    format!("--emit: the topic {} (checked before the workload runs)", target.topic)
                })?;
        tracing::info!(topic = target.topic, partitions, "--emit: the topic is ready");
        Ok(Some(RunEmit {
            target: LiveTarget {
                target,
                producer_id: args.emit_producer_id.clone().unwrap_or_else(default_producer_id),
                prefix: args.emit_prefix.clone(),
                partitions: args.emit_partitions.max(1),
            },
            mark_every: args.emit_mark_every.max(1),
            live: Arc::new(Mutex::new(LiveState {
                emitter: None,
                header: None,
                serial_order: None,
                published: Vec::new(),
                sent: 0,
                empty: 0,
                ended: false,
                stopped: None,
                delays_ms: Vec::new(),
            })),
        }))
    }

    impl RunEmit {
        /// The workload's hooks and the driver that publishes each group of transactions
        /// while the workload runs, when the database has an incremental tick rule
        /// (`None`: everything is published after recovery).
        pub(crate) fn live_driver<D: isocert_adapters::Database>(
            &self,
            level: isocert_history::IsolationLevel,
        ) -> Option<(isocert_workload::Observe, crate::live_emit::LiveDriver)> {
            crate::live_emit::LiveDriver::new::<D>(self.target.clone(), Arc::clone(&self.live), level)
        }

        /// Publishes what was not published while the workload ran (normally nothing),
        /// after checking that every transaction published live got the ticks recovery
        /// gave it, then ends the producer; without live publishing, as
        /// [`RunEmit::publish_recovered`].
        pub(crate) fn publish(
            &self,
            h: &isocert_history::History,
            database: &str,
            out: &std::path::Path,
        ) -> anyhow::Result<u64> {
            let mut live = self.live.lock().expect("live state lock");
            if live.sent == 0 && live.emitter.is_none() && !live.ended {
                drop(live);
                return self.publish_recovered(h, database, out);
            }
            // Promising less than recovery found is harmless (members at -i ser refused).
            if let Some(published) =
                live.serial_order.filter(|&o| o == SerialOrder::CommitTs && h.serial_order != o)
            {
                anyhow::bail!(
                    "--emit: the header published during the run says serial_order {:?}, but recovery records {:?}: \
                     the topic's verdict at serializability may differ from the run's (a bug; the run's results are \
                     in {})",
                    published.as_str(),
                    h.serial_order.as_str(),
                    out.display()
                );
            }
            for (i, ticks) in live.published.iter().enumerate() {
                let Some((start, commit)) = ticks else { continue };
                let txn = &h.txns[i];
                if txn.start_ts() != Some(*start) || txn.commit_ts() != Some(*commit) {
                    anyhow::bail!(
                        "--emit: T{} was published during the run with start {start} and commit {commit}, but \
                         recovery gives it {:?} and {:?}: the topic's verdict may differ from the run's (a bug; \
                         the run's results are in {})",
                        txn.name,
                        txn.start_ts().map(|t| t.to_string()),
                        txn.commit_ts().map(|t| t.to_string()),
                        out.display()
                    );
                }
            }
            let mut delays = live.delays_ms.clone();
            delays.sort_unstable();
            let pct =
                |q: f64| delays.get(((delays.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
            tracing::info!(
                published_live = live.sent,
                delay_ms_p50 = pct(0.5),
                delay_ms_p99 = pct(0.99),
                "--emit: from a transaction's completion to its publication"
            );
            if live.ended {
                crate::output::note!(
                    "isocert: published {} transactions to {} as producer {} during the run (from completion to \
                     publication: p50 {} ms, p99 {} ms)",
                    live.sent,
                    self.target.target.topic,
                    self.target.producer_id,
                    pct(0.5),
                    pct(0.99)
                );
                return Ok(live.sent);
            }
            self.publish_rest(&mut live, h, database, out)
        }

        /// The transactions live publishing did not reach, from the recovered history,
        /// with the exact watermark of those still to come, then the end.
        fn publish_rest(
            &self,
            live: &mut LiveState,
            h: &isocert_history::History,
            database: &str,
            out: &std::path::Path,
        ) -> anyhow::Result<u64> {
            let rest: Vec<isocert_history::TxnId> = h
                .txn_ids()
                .filter(|t| live.published.get(t.index()).is_none_or(Option::is_none))
                .filter(|t| h.txn(*t).is_committed() && !h.txn(*t).ops.is_empty())
                .collect();
            if let Some(t) =
                rest.iter().find(|t| h.txn(**t).start_ts().is_none() || h.txn(**t).commit_ts().is_none())
            {
                anyhow::bail!(
                    "--emit: {} has operations but no start or commit timestamp after {database}'s recovery: \
                     the {} transactions published during the run stand, the rest is not published and the \
                     producer does not end (the run's results are in {})",
                    h.txn_label(*t),
                    live.sent,
                    out.display()
                );
            }
            let mut emitter = match live.emitter.take() {
                Some(e) => e,
                None => {
                    let mut e = Emitter::connect(
                        &self.target.target,
                        &self.target.producer_id,
                        self.target.partitions,
                    )?;
                    let mut header = Vec::new();
                    isocert_history::v1::write_header(h, &mut header)?;
                    let header = self.target.renamed(header.trim_ascii_end())?;
                    if !header.is_empty() {
                        e.header(&header)?;
                    }
                    e
                }
            };
            let mut text = Vec::new();
            for &t in &rest {
                isocert_history::v1::write_txn(h, t, &mut text)?;
            }
            if let Some(prefix) = &self.target.prefix {
                text = prefixed(&text, prefix)?;
            }
            let sent = isocert_online::emit_lines(&mut emitter, &text, self.mark_every)
                .with_context(|| format!("--emit: publishing to {}", self.target.target.topic))?;
            emitter.finish().with_context(|| format!("--emit: ending on {}", self.target.target.topic))?;
            live.ended = true;
            crate::output::note!(
                "isocert: published {} transactions to {} as producer {} during the run and {sent} after recovery ({})",
                live.sent,
                self.target.target.topic,
                self.target.producer_id,
                live.stopped.as_deref().unwrap_or("")
            );
            Ok(live.sent + sent)
        }

        /// Publishes every transaction of the run's history `h` (its certificate's
        /// timestamps applied) but committed ones without operations, in the history's order, with the exact watermark of the
        /// transactions still to come, as `isocert emit` publishes a file. Refuses, naming
        /// the database, when a committed transaction with operations has no start or
        /// commit timestamp (nothing is published then).
        fn publish_recovered(
            &self,
            h: &isocert_history::History,
            database: &str,
            out: &std::path::Path,
        ) -> anyhow::Result<u64> {
            // An empty transaction (every statement of its plan failed to run, or none
            // read anything) has no snapshot to give it timestamps, and nothing to check.
            let checked = |t: &&isocert_history::Transaction| t.is_committed() && !t.ops.is_empty();
            let committed = h.txns.iter().filter(checked).count();
            let missing = h
                .txns
                .iter()
                .filter(checked)
                .filter(|t| t.start_ts().is_none() || t.commit_ts().is_none())
                .count();
            if missing > 0 {
                anyhow::bail!(
                    "--emit: {missing} of the {committed} committed transactions with operations have no start \
                     or commit timestamp after {database}'s recovery, and online checking orders transactions \
                     by them: nothing was published (the run's results are in {})",
                    out.display()
                );
            }
            let mut text = Vec::new();
            isocert_history::v1::write_header(h, &mut text)?;
            let mut empty = 0;
            for t in h.txn_ids() {
                let txn = h.txn(t);
                if txn.is_committed() && txn.ops.is_empty() && txn.start_ts().is_none() {
                    empty += 1;
                    continue;
                }
                isocert_history::v1::write_txn(h, t, &mut text)?;
            }
            if empty > 0 {
                crate::output::note!(
                    "isocert: --emit: {empty} committed transactions without operations (nothing to check, \
                     and no snapshot to give them timestamps) are not published"
                );
            }
            if let Some(prefix) = &self.target.prefix {
                text = prefixed(&text, prefix)?;
            }
            let started = Instant::now();
            let emitter =
                Emitter::connect(&self.target.target, &self.target.producer_id, self.target.partitions)?;
            let sent = emit_file(emitter, &text, self.mark_every, None).with_context(|| {
                format!(
                    "--emit: publishing to {} (the run's results are in {})",
                    self.target.target.topic,
                    out.display()
                )
            })?;
            crate::output::note!(
                "isocert: published {sent} transactions to {} as producer {} in {:.2} s",
                self.target.target.topic,
                self.target.producer_id,
                started.elapsed().as_secs_f64()
            );
            Ok(sent)
        }
    }

    /// The v1 text `text` with every transaction id, session name and object key prefixed
    /// by `PREFIX/` (`7` becomes `"PREFIX/7"`, `"a"` becomes `"PREFIX/a"`), in the header's
    /// initial values too. Runs publishing to one topic test different tables (a run
    /// refuses a table that exists), so their objects must not meet either; a key, unlike
    /// a table name, can change without changing what a value is (v1: a `kv` value is a
    /// scalar, another table's a row).
    pub(crate) fn prefixed(text: &[u8], prefix: &str) -> anyhow::Result<Vec<u8>> {
        fn rename(v: &mut serde_json::Value, prefix: &str) {
            let name = match &*v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            *v = serde_json::Value::String(format!("{prefix}/{name}"));
        }
        let mut out = Vec::with_capacity(text.len() + text.len() / 4);
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let mut value: serde_json::Value = serde_json::from_slice(line).context("the written history")?;
            let map = value.as_object_mut().context("a history line that is not an object")?;
            let objects = if map.contains_key("format") {
                map.get_mut("initial")
            } else {
                for field in ["id", "session"] {
                    if let Some(v) = map.get_mut(field) {
                        rename(v, prefix);
                    }
                }
                map.get_mut("ops")
            };
            for object in objects.and_then(|o| o.as_array_mut()).into_iter().flatten() {
                if let Some(key) = object.get_mut("key") {
                    rename(key, prefix);
                }
            }
            serde_json::to_writer(&mut out, &value)?;
            out.push(b'\n');
        }
        Ok(out)
    }

    /// `isocert emit`.
    pub(crate) fn emit(args: EmitArgs) -> anyhow::Result<ExitCode> {
        let target = OnlineTarget::parse(&args.target)?;
        let bytes = std::fs::read(&args.history)
            .with_context(|| format!("cannot read history {}", args.history.display()))?;
        let started = Instant::now();
        let id = args.producer_id.clone().unwrap_or_else(default_producer_id);
        let emitter = Emitter::connect(&target, &id, args.partitions)?;
        let sent = emit_file(emitter, &bytes, args.mark_every, args.rate)
            .with_context(|| format!("history {}", args.history.display()))?;
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(txns = sent, secs, txns_per_sec = (sent as f64 / secs.max(1e-9)) as u64, "emitted");
        eprintln!("published {sent} transactions to {} in {secs:.2} s", target.topic);
        Ok(exit::valid())
    }

    /// `isocert check --online`.
    pub(crate) fn check(args: &CheckArgs) -> anyhow::Result<ExitCode> {
        let online = &args.online;
        let target = OnlineTarget::parse(online.online.as_deref().expect("dispatched on --online"))?;
        if !matches!(args.checker, CheckerKind::Auto | CheckerKind::Aion | CheckerKind::Chronos) {
            anyhow::bail!(
                "--online checks with Aion (timestamps); --checker {} cannot run online",
                args.checker
            );
        }
        let group = online.group.clone().context("--online needs --group GROUP (one group per check)")?;
        let initial = match &args.initial_value {
            Some(text) => Some(
                crate::check::timestamp::parse_initial(text)
                    .map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?,
            ),
            None => None,
        };
        let options = MemberOptions {
            results_topic: online.results_topic.clone().unwrap_or_else(|| target.default_results_topic()),
            target,
            group,
            level: args.isolation,
            initial,
            producers: online.producers.max(1),
            member: online.member.clone().unwrap_or_else(default_producer_id),
            session_timeout: Duration::from_secs(online.session_timeout.max(1)),
            partitions: online.partitions.max(1),
            client_config: online.kafka_config.clone(),
        };
        let json = args.json;
        let started = Instant::now();
        let summary = run_member(&options, |event| print_event(event, json, started))?;
        print_summary(&summary, json)?;
        Ok(if !summary.late.is_empty() {
            exit::error()
        } else if summary.anomalies.is_empty() {
            exit::valid()
        } else {
            exit::anomalies()
        })
    }

    /// One line per record this member published, as it happens (JSON lines with --json).
    fn print_event(event: &MemberEvent, json: bool, started: Instant) {
        let mut out = std::io::stdout().lock();
        match event {
            MemberEvent::Reported(record) if json => {
                let _ = writeln!(out, "{}", serde_json::to_string(record).expect("records serialise"));
            }
            MemberEvent::Reported(ResultRecord::Anomaly(a)) => {
                let _ = writeln!(
                    out,
                    "[{}] {} (partition {}): {}",
                    a.kind,
                    txns(&a.txns),
                    a.partition,
                    a.explanation
                );
            }
            MemberEvent::Reported(ResultRecord::Late(l)) => {
                let _ = writeln!(
                    out,
                    "[late] T{} (partition {}) committed at {}, before the watermark {} it arrived after",
                    l.txn, l.partition, l.commit_ts, l.watermark
                );
            }
            MemberEvent::Reported(ResultRecord::Done(d)) => {
                tracing::info!(
                    partition = d.partition,
                    txns = d.txns,
                    anomalies = d.anomalies,
                    latency_ms_p50 = d.latency_ms_p50,
                    latency_ms_p99 = d.latency_ms_p99,
                    secs = started.elapsed().as_secs_f64(),
                    "partition finished"
                );
            }
            MemberEvent::Assigned(parts) => tracing::info!(?parts, "partitions assigned"),
        }
        let _ = out.flush();
    }

    fn txns(ids: &[serde_json::Value]) -> String {
        ids.iter().map(|t| format!("T{t}")).collect::<Vec<_>>().join(", ")
    }

    /// The whole check's verdict, from the results topic.
    fn print_summary(summary: &Summary, json: bool) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        if json {
            let value = serde_json::json!({
                "record": "summary",
                "valid": summary.anomalies.is_empty() && summary.late.is_empty(),
                "anomalies": summary.anomalies.len(),
                "beyond_watermark": summary.late.len(),
                "partitions": summary.partitions.len(),
                "partition_txns": summary.partition_txns,
                "latency_ms_p50_max": summary.partitions.iter().map(|p| p.latency_ms_p50).max(),
                "latency_ms_p99_max": summary.partitions.iter().map(|p| p.latency_ms_p99).max(),
            });
            writeln!(out, "{value}")?;
            return Ok(());
        }
        let verdict = if !summary.late.is_empty() {
            format!(
                "UNCERTIFIED: {} transactions arrived beyond the watermark (verdicts made final before them may be wrong)",
                summary.late.len()
            )
        } else if summary.anomalies.is_empty() {
            "VALID".to_string()
        } else {
            format!("INVALID: {} anomalies", summary.anomalies.len())
        };
        writeln!(
            out,
            "{verdict} ({} partitions finished, {} transactions over all partitions; every member's findings are in the results topic)",
            summary.partitions.len(),
            summary.partition_txns
        )?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        /// Ids, sessions and keys (in operations and initial values) get the prefix;
        /// values, timestamps and statuses do not.
        #[test]
        fn a_prefix_renames_ids_sessions_and_keys_only() {
            let text = b"{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"key\":1,\"value\":0}]}\n\
                         {\"id\":7,\"session\":\"s\",\"start_ts\":3,\"commit_ts\":4,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":0},{\"f\":\"append\",\"table\":\"append\",\"key\":\"k\",\"value\":5}]}\n";
            let out = String::from_utf8(super::prefixed(text, "p").unwrap()).unwrap();
            let lines: Vec<serde_json::Value> =
                out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines[0]["initial"], serde_json::json!([{"key": "p/1", "value": 0}]));
            assert_eq!(
                (&lines[1]["id"], &lines[1]["session"]),
                (&serde_json::json!("p/7"), &serde_json::json!("p/s"))
            );
            assert_eq!(lines[1]["ops"][0], serde_json::json!({"f": "r", "key": "p/1", "value": 0}));
            assert_eq!(lines[1]["ops"][1]["key"], serde_json::json!("p/k"));
            assert_eq!(lines[1]["ops"][1]["value"], serde_json::json!(5));
            assert_eq!(
                (&lines[1]["start_ts"], &lines[1]["commit_ts"]),
                (&serde_json::json!(3), &serde_json::json!(4))
            );
        }
    }
}
