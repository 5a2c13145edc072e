//! `isocert emit` and `isocert check --online`: the flags, and the wiring to
//! isocert-online (cargo feature `kafka`; docs/ONLINE.md). A binary built without the
//! feature knows the flags and refuses them with a clear error.

use std::path::PathBuf;
#[cfg(not(feature = "kafka"))]
use std::process::ExitCode;

#[cfg(not(feature = "kafka"))]
use crate::check::CheckArgs;

/// Publish a recorded v1 history to a Kafka topic of transactions, for `isocert check
/// --online` (tests and replays; a live test client publishes with `isocert_online::LiveEmitter`).
///
/// Each transaction goes, unchanged, to the partitions owning its session and the objects
/// it touches, with the producer's watermark every --mark-every transactions. The topic is
/// created with --partitions partitions if it does not exist.
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

#[cfg(feature = "kafka")]
pub(crate) use with_kafka::{check, emit};

#[cfg(feature = "kafka")]
mod with_kafka {
    use std::io::Write as _;
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use anyhow::Context as _;
    use isocert_checker::CheckerKind;
    use isocert_online::{
        default_producer_id, emit_file, run_member, Emitter, MemberEvent, MemberOptions, OnlineTarget,
        ResultRecord, Summary,
    };

    use super::EmitArgs;
    use crate::check::CheckArgs;
    use crate::exit;

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
                crate::timestamp::parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?,
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
}
