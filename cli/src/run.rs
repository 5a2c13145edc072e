//! `isocert run`: run a workload against PostgreSQL while recovering its version
//! certificate from logical replication, then check the history.
//!
//! Without `--db` a throwaway PostgreSQL is started (and removed afterwards). The
//! replication consumer runs during the whole workload; when the workload ends, recovery
//! only waits for the last commits to be decoded. Everything lands in `--out`:
//! `history.jsonl` and `certificate.json` (which `isocert check` re-checks to the same
//! verdict), `report.json`/`report.txt`/`report.html` (the check) and `run.json`
//! (throughput, lag, recovery counts).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use isocert_adapters::postgres::{ReplicationConsumer, ReplicationMode, ReplicationSlot};
use isocert_adapters::EmbeddedPostgres;
use isocert_checker::{check, render_json, render_text, CheckerKind, HtmlOptions, IsolationLevel, Report};
use isocert_history::{v1, History};
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_recovery::{recover_postgres, PostgresRecovery, RawLog};
use isocert_workload::{Distribution, Isolation, WorkloadConfig, WorkloadKind};
use serde_json::json;

use crate::exit;

/// Run a workload on PostgreSQL, recover its version certificate concurrently, and check it.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// PostgreSQL to test (`postgres://user@host:port/db`, needs `wal_level=logical`);
    /// without it a throwaway server is started in a temporary directory and removed afterwards.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// The workload: `kv` (item operations), `predicate` (range reads, predicate updates and
    /// deletes, aggregates), `skew` (write skew, allowed by repeatable read) or `mini`
    /// (mini-transactions as MTC runs them: one or two reads, read-modify-writes).
    #[arg(long, value_name = "KIND")]
    workload: WorkloadKind,
    /// The level the transactions run at: serializable, repeatable-read or read-committed.
    #[arg(long, value_name = "LEVEL")]
    isolation: Isolation,
    /// The level to check (default: the one the workload ran at; PostgreSQL's repeatable
    /// read is checked as snapshot-isolation).
    #[arg(long, value_name = "LEVEL")]
    check: Option<IsolationLevel>,
    /// Which checker to use: auto, emme or enne.
    #[arg(long, value_name = "CHECKER", default_value = "auto")]
    checker: CheckerKind,
    /// Transactions to run to completion (aborted attempts are retried and recorded too).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    txns: u64,
    /// Concurrent sessions (one connection each).
    #[arg(long, value_name = "S", default_value_t = 8)]
    sessions: u32,
    /// Number of keys (rows); fewer keys means more contention.
    #[arg(long, value_name = "K", default_value_t = 16)]
    keys: u32,
    /// Key access distribution: uniform, zipfian or hotspot.
    #[arg(long, value_name = "DIST", default_value = "uniform")]
    distribution: Distribution,
    /// Seed of the transaction plans.
    #[arg(long, value_name = "X", default_value_t = 0)]
    seed: u64,
    /// Turn the workload's deletes into updates of the same rows, so every key keeps
    /// existing and upserts never insert. At repeatable read PostgreSQL lets a transaction
    /// re-insert a key that a concurrent, already committed transaction deleted, which
    /// snapshot isolation forbids (reported as G-SIa, docs/POSTGRES.md); use this flag to
    /// certify repeatable read as snapshot isolation without that behaviour.
    #[arg(long)]
    no_deletes: bool,
    /// Directory for history.jsonl, certificate.json, report.json, report.txt, report.html and run.json.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Run the workload without the replication consumer and without checking (for
    /// measuring what recovery costs); writes only history.jsonl and run.json, exits 0.
    #[arg(long)]
    no_recovery: bool,
    /// How recovery receives the committed changes: `stream` (the streaming replication
    /// protocol: the server decodes each change once and pushes it; needs a connection
    /// with `replication=database` allowed by pg_hba.conf) or `poll` (SQL reads of the
    /// slot every --poll-interval-ms; costs the server more).
    #[arg(long, value_name = "MODE", default_value = "stream")]
    replication: ReplicationMode,
    /// With `--replication poll`: shortest time between two reads of the replication slot
    /// while the workload runs (longer: less work for the server, same completeness; the
    /// final read is immediate).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    poll_interval_ms: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Where to write the HTML report (summary, each anomaly's graph and timeline,
    /// docs/REPORTS.md) [default: report.html in --out].
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Timings and counts of one run, written to run.json.
#[derive(Debug, Default)]
struct RunStats {
    workload_secs: f64,
    committed: usize,
    attempts: usize,
    recovery_lag_secs: Option<f64>,
    catch_up_secs: Option<f64>,
    recover_secs: Option<f64>,
    check_secs: Option<f64>,
}

/// Runs the command; see the module doc.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    check_out_dir(&args.out)?;
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let level = args.check.unwrap_or(match args.isolation {
        Isolation::Serializable => IsolationLevel::Serializable,
        Isolation::RepeatableRead => IsolationLevel::SnapshotIsolation,
        Isolation::ReadCommitted => IsolationLevel::ReadCommitted,
    });
    let mut cfg = WorkloadConfig::new(args.workload, args.isolation);
    cfg.txns = args.txns;
    cfg.sessions = args.sessions;
    cfg.keys = args.keys;
    cfg.distribution = args.distribution;
    cfg.seed = args.seed;
    cfg.deletes = !args.no_deletes;
    cfg.validate()?;

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let embedded = match &args.db {
        Some(_) => None,
        None => {
            eprintln!("isocert: starting a throwaway PostgreSQL (use --db to test your own)");
            Some(rt.block_on(EmbeddedPostgres::start_async()).context("starting the embedded PostgreSQL")?)
        }
    };
    let url = match (&args.db, &embedded) {
        (Some(url), _) => url.clone(),
        (None, Some(pg)) => pg.url(),
        (None, None) => unreachable!("an embedded server is started when no URL is given"),
    };
    let recovery =
        (!args.no_recovery).then(|| (args.replication, Duration::from_millis(args.poll_interval_ms)));
    let outcome = rt.block_on(run_workload(&url, &cfg, recovery));
    if let Some(pg) = embedded {
        if let Err(e) = pg.shutdown() {
            tracing::warn!("stopping the embedded PostgreSQL: {e}");
        }
    }
    let (mut history, log, mut stats, last_commit) = outcome?;

    let Some(log) = log else {
        write_history(&args.out.join("history.jsonl"), &history)?;
        write_run_json(&args.out, &args, &stats, None)?;
        eprintln!(
            "isocert: {} committed transactions in {:.2}s ({:.0} txns/s), recovery off",
            stats.committed,
            stats.workload_secs,
            stats.committed as f64 / stats.workload_secs
        );
        return Ok(exit::valid());
    };

    // Written now so that a failed recovery leaves the evidence; rewritten below with the
    // recovered timestamps and outcomes.
    write_history(&args.out.join("history.jsonl"), &history)?;
    let interpreter = Interpreter::new(&history).context("compiling the history's predicates")?;
    let matcher = |h: &History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovering = Instant::now();
    let recovered = match recover_postgres(&mut history, &log, &matcher) {
        Ok(r) => r,
        Err(e) => {
            let path = args.out.join("replication.jsonl");
            write_raw_log(&path, &log)?;
            return Err(e).with_context(|| {
                format!("recovering the certificate (the replication log is in {})", path.display())
            });
        }
    };
    stats.recovery_lag_secs = Some(last_commit.elapsed().as_secs_f64());
    stats.recover_secs = Some(recovering.elapsed().as_secs_f64());
    for w in &recovered.warnings {
        eprintln!("isocert: warning: {w}");
    }
    if recovered.stats.serialization_cycle && level == IsolationLevel::Serializable {
        eprintln!(
            "isocert: note: the recovered dependencies have a cycle; the certificate's serialization order \
             follows commit visibility"
        );
    }
    write_history(&args.out.join("history.jsonl"), &history)?;
    write_certificate(&args.out.join("certificate.json"), &history, &recovered)?;

    let started = Instant::now();
    let report = check(&history, &recovered.certificate, level, args.checker, &interpreter)
        .context("checking the recovered certificate")?;
    stats.check_secs = Some(started.elapsed().as_secs_f64());
    write_reports(&args.out, &report, &history)?;
    let html = args.html.clone().unwrap_or_else(|| args.out.join("report.html"));
    let opts = HtmlOptions { context: html_context(&args, &stats), ..HtmlOptions::default() };
    crate::check::write_html(&html, &report, &history, &recovered.certificate, &opts)?;
    write_run_json(&args.out, &args, &stats, Some(&recovered))?;

    if args.json {
        let mut out = render_json(&report, &history);
        out["run"] = run_json(&args, &stats, Some(&recovered));
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", crate::check::text_report(&report, &history));
        println!("{}", summary(&stats, &recovered, &args.out));
    }
    Ok(if report.is_valid() { exit::valid() } else { exit::anomalies() })
}

type Outcome = (History, Option<RawLog>, RunStats, Instant);

/// Sets the table up, starts the replication consumer, runs the workload with a progress
/// bar, and waits for the consumer to have recorded every commit.
async fn run_workload(
    url: &str,
    cfg: &WorkloadConfig,
    recovery: Option<(ReplicationMode, Duration)>,
) -> anyhow::Result<Outcome> {
    isocert_workload::setup(url, cfg).await.context("setting up the workload table")?;
    let consumer: Option<ReplicationConsumer> = match recovery {
        Some((mode, interval)) => {
            let name = format!("isocert_run_{}", std::process::id());
            let slot = ReplicationSlot::create(url, &name, &[cfg.kind.table()])
                .await
                .context("creating the logical replication slot")?;
            let mut consumer = slot.mode(mode).poll_interval(interval).start();
            consumer.wait_started(Duration::from_secs(60)).await.with_context(|| match mode {
                ReplicationMode::Stream => {
                    "starting logical replication (streaming; `--replication poll` reads the slot over an \
                     ordinary connection if replication connections are refused)"
                }
                ReplicationMode::Poll => "starting logical replication",
            })?;
            Some(consumer)
        }
        None => None,
    };
    let bar = ProgressBar::with_draw_target(Some(cfg.txns), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} txns {per_sec} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let result = isocert_workload::run(url, cfg, |done| {
        bar.set_position(done);
        if let Some(c) = &consumer {
            if done % 64 == 0 {
                bar.set_message(format!("({} commits recovered)", c.recorded()));
            }
        }
    })
    .await;
    let last_commit = Instant::now();
    let workload_secs = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let history = match result {
        Ok(h) => h,
        Err(e) => {
            if let Some(c) = consumer {
                let _ = c.finish().await;
            }
            return Err(e).context("running the workload");
        }
    };
    let catching_up = Instant::now();
    let log = match consumer {
        Some(c) => Some(
            tokio::time::timeout(Duration::from_secs(600), c.finish())
                .await
                .context("the replication stream did not catch up within 10 minutes")?
                .with_context(|| match recovery {
                    Some((ReplicationMode::Stream, _)) => {
                        "finishing logical replication (streaming; `--replication poll` reads the slot over \
                         an ordinary connection if replication connections are refused)"
                    }
                    _ => "finishing logical replication",
                })?,
        ),
        None => None,
    };
    let committed = history.txns.iter().filter(|t| t.is_committed()).count();
    let catch_up_secs = log.as_ref().map(|_| catching_up.elapsed().as_secs_f64());
    let stats = RunStats {
        workload_secs,
        committed,
        attempts: history.txns.len(),
        catch_up_secs,
        ..RunStats::default()
    };
    Ok((history, log, stats, last_commit))
}

fn create(path: &Path) -> anyhow::Result<BufWriter<File>> {
    Ok(BufWriter::new(File::create(path).with_context(|| format!("creating {}", path.display()))?))
}

fn write_history(path: &Path, h: &History) -> anyhow::Result<()> {
    let mut out = create(path)?;
    v1::write_history(h, &mut out).with_context(|| format!("writing {}", path.display()))?;
    out.flush().with_context(|| format!("writing {}", path.display()))
}

/// The replication log as JSON lines (one committed transaction each), for diagnosis.
fn write_raw_log(path: &Path, log: &RawLog) -> anyhow::Result<()> {
    let mut out = create(path)?;
    for t in log.txns() {
        let changes: Vec<serde_json::Value> = t
            .changes
            .iter()
            .map(|c| {
                let row = c.row.as_ref().map(|r| {
                    r.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect::<serde_json::Map<_, _>>()
                });
                json!({"table": &*c.table, "key": c.key.to_json(), "row": row})
            })
            .collect();
        let line = json!({"xid": t.xid, "commit_lsn": t.commit_lsn, "commit_time": t.commit_time, "changes": changes});
        writeln!(out, "{line}").with_context(|| format!("writing {}", path.display()))?;
    }
    out.flush().with_context(|| format!("writing {}", path.display()))
}

fn write_certificate(path: &Path, h: &History, r: &PostgresRecovery) -> anyhow::Result<()> {
    let mut out = create(path)?;
    v1::write_certificate(h, &r.certificate, &mut out)
        .with_context(|| format!("writing {}", path.display()))?;
    out.flush().with_context(|| format!("writing {}", path.display()))
}

fn write_reports(dir: &Path, report: &Report, h: &History) -> anyhow::Result<()> {
    let json_path = dir.join("report.json");
    fs::write(&json_path, serde_json::to_string_pretty(&render_json(report, h))? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let text_path = dir.join("report.txt");
    fs::write(&text_path, render_text(report, h)).with_context(|| format!("writing {}", text_path.display()))
}

fn run_json(args: &RunArgs, stats: &RunStats, r: Option<&PostgresRecovery>) -> serde_json::Value {
    let mut out = json!({
        "workload": args.workload.as_str(),
        "isolation": args.isolation.as_str(),
        "txns": args.txns,
        "sessions": args.sessions,
        "keys": args.keys,
        "seed": args.seed,
        "deletes": !args.no_deletes,
        "recovery": r.is_some(),
        "replication": r.is_some().then(|| args.replication.as_str()),
        "committed": stats.committed,
        "attempts": stats.attempts,
        "workload_secs": stats.workload_secs,
        "committed_per_sec": stats.committed as f64 / stats.workload_secs.max(1e-9),
        "recovery_lag_secs": stats.recovery_lag_secs,
        "replication_catch_up_secs": stats.catch_up_secs,
        "recover_secs": stats.recover_secs,
        "check_secs": stats.check_secs,
    });
    if let Some(r) = r {
        out["recovered"] = json!({
            "logged_txns": r.stats.logged_txns,
            "logged_changes": r.stats.logged_changes,
            "resolved_committed": r.stats.resolved_committed,
            "resolved_aborted": r.stats.resolved_aborted,
            "version_sets": r.stats.version_sets,
            "item_read_versions": r.stats.item_read_versions,
            "rechecked_rows": r.stats.rechecked_rows,
            "serialization_cycle": r.stats.serialization_cycle,
            "warnings": r.warnings,
        });
    }
    out
}

fn write_run_json(
    dir: &Path,
    args: &RunArgs,
    stats: &RunStats,
    r: Option<&PostgresRecovery>,
) -> anyhow::Result<()> {
    let path = dir.join("run.json");
    fs::write(&path, serde_json::to_string_pretty(&run_json(args, stats, r))? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

fn summary(stats: &RunStats, r: &PostgresRecovery, out: &Path) -> String {
    format!(
        "run: {} committed of {} attempts in {:.2}s ({:.0} committed/s); recovered {} commits, {} row versions, \
         {} version sets, {} item reads' versions ({} rows re-checked at read committed); certificate complete {:.3}s after the last commit; \
         files in {}",
        stats.committed,
        stats.attempts,
        stats.workload_secs,
        stats.committed as f64 / stats.workload_secs.max(1e-9),
        r.stats.logged_txns,
        r.stats.logged_changes,
        r.stats.version_sets,
        r.stats.item_read_versions,
        r.stats.rechecked_rows,
        stats.recovery_lag_secs.unwrap_or_default(),
        out.display()
    )
}

/// The run's facts for the HTML report's summary (never the database URL: it may hold a password).
fn html_context(args: &RunArgs, stats: &RunStats) -> Vec<(String, String)> {
    let database = if args.db.is_some() { "PostgreSQL (--db)" } else { "PostgreSQL (throwaway, embedded)" };
    let mut out = vec![
        ("database".to_string(), database.to_string()),
        (
            "workload".to_string(),
            format!(
                "{} at {}, {} transactions, {} sessions, {} keys, seed {}",
                args.workload.as_str(),
                args.isolation.as_str(),
                args.txns,
                args.sessions,
                args.keys,
                args.seed
            ),
        ),
        (
            "throughput".to_string(),
            format!(
                "{} committed in {:.2}s ({:.0} committed/s)",
                stats.committed,
                stats.workload_secs,
                stats.committed as f64 / stats.workload_secs.max(1e-9)
            ),
        ),
        ("aborted attempts".to_string(), (stats.attempts - stats.committed).to_string()),
    ];
    if let Some(lag) = stats.recovery_lag_secs {
        out.push((
            "recovery lag".to_string(),
            format!("certificate complete {lag:.3}s after the last commit"),
        ));
    }
    out
}

/// Rejects an output path that exists and is not a directory.
fn check_out_dir(path: &Path) -> anyhow::Result<()> {
    if path.exists() && !path.is_dir() {
        bail!("--out {} exists and is not a directory", path.display());
    }
    Ok(())
}
