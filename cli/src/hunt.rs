//! `isocert hunt`: sweep workloads and contention settings for an isolation anomaly within
//! a budget, save the first finding like `isocert run` saves a run, shrink it, write its
//! reproducer and run that again (isocert-hunt does the searching, shrinking and
//! reproducing; this module holds the flags, the progress bar and the files).
//!
//! `DIR/hunt.json` lists every trial (parameters, counts, verdict); each finding goes to
//! `DIR/finding-N/` (`history.jsonl`, `certificate.json`, `raw-log.jsonl`, `report.json`,
//! `report.txt`, `report.html`, `run.json`), its shrunk history to `DIR/finding-N/shrunk/`
//! and its reproducer to `DIR/finding-N/repro.spec` (and, when it appends to lists,
//! `repro-recordable.spec`, whose appends are statements the scenario runner records today).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use isocert_adapters::guard::run_name;
use isocert_adapters::{
    dispatch, parse_run_level, CaptureOptions, Database, DatabaseKind, DatabaseVisitor, ThrowawayServer,
};
use isocert_checker::{render_json, AnomalyKind, IsolationLevel};
use isocert_history::{Dialect, Op};
use isocert_hunt::repro::{reproduce, write_spec, AppendStatements, ReproTarget, Reproduction, SpecPhysical};
use isocert_hunt::{run_trial, shrink, Search, Space, Trial, TrialScore};
use isocert_workload::WorkloadKind;
use serde_json::{json, Value as Json};

use crate::exit;
use crate::output::write_text;
use crate::run::{
    check_out_dir, level_to_check, open_database, parse_setting, watch_signals, write_certificate,
    write_history, write_raw_log, write_reports,
};

/// Hunt for an isolation anomaly: sweep workloads, key counts, sessions, distributions,
/// transaction lengths, delete and abort mixes and seeds within a budget, spending more
/// where the server aborts most; shrink a finding and write a reproducer.
///
/// Exit code 0: no finding (VALID, with what the trials tried); 1: findings, each saved in
/// DIR/finding-N/ with its shrunk history and reproducer; 2: an error; 130: interrupted
/// (what was found is kept). At a level below serializable, the anomalies the level allows
/// are not findings: the summary says which, and `--check serializable` asks for them.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert hunt --isolation repeatable-read --check snapshot-isolation --workloads kv --runs 6 --out out/rr-hunt\n  isocert hunt --isolation serializable --budget 15m --out out/ser-hunt\n  isocert scenario out/rr-hunt/finding-1/repro.spec   # run a finding's reproducer again"
)]
pub(crate) struct HuntArgs {
    /// The database to test (the scheme picks the adapter, as for `isocert run`); without it
    /// a throwaway server of --database is started and removed afterwards.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// Without --db: which throwaway server to start (postgres or mariadb).
    #[arg(long, value_name = "DATABASE", default_value = "postgres", conflicts_with = "db")]
    database: DatabaseKind,
    /// Without --db: the PostgreSQL version to start, a major (13 to 18) or an exact release
    /// (17.6; installed by `scripts/install-deps --postgres-versions "13 18 17.6"`); default:
    /// the one installed.
    #[arg(long, value_name = "V", conflicts_with = "db")]
    server_version: Option<String>,
    /// Without --db: a setting of the throwaway server, `NAME=VALUE` (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_setting, conflicts_with = "db")]
    server_setting: Vec<(String, String)>,
    /// The level the transactions run at: serializable, repeatable-read or read-committed.
    #[arg(long, value_name = "LEVEL", value_parser = parse_run_level)]
    isolation: IsolationLevel,
    /// The level to check (default: the one the workload ran at as the adapter maps it).
    #[arg(long, value_name = "LEVEL")]
    check: Option<IsolationLevel>,
    /// How long to hunt: `90s`, `10m`, `1h`. A wall-clock promise: at its end the trial in
    /// flight stops after the attempts it has running and is checked on what completed
    /// (saving a finding, shrinking and reproducing it come after).
    #[arg(long, value_name = "DURATION", value_parser = parse_budget, default_value = "10m", conflicts_with = "runs")]
    budget: Duration,
    /// Hunt for this many trials instead of a time budget.
    #[arg(long, value_name = "N")]
    runs: Option<u32>,
    /// The workloads to sweep, comma-separated (kv, predicate, skew, mini, append, counter);
    /// `counter` (statements that read and write at once) is left out on a database whose
    /// adapter does not record expression updates.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "kv,append,predicate,skew,mini,counter"
    )]
    workloads: Vec<WorkloadKind>,
    /// Seed of the search (each trial's plans get their own seed from it).
    #[arg(long, value_name = "X", default_value_t = 0)]
    seed: u64,
    /// Turn the workloads' deletes into updates (as `isocert run --no-deletes`): sets aside
    /// PostgreSQL's repeatable-read upsert-after-delete behaviour (docs/FINDINGS.md).
    #[arg(long)]
    no_deletes: bool,
    /// Set aside anomalies of this class (repeatable; `g-si`, `g2-item`, ...): a trial that
    /// shows only ignored classes counts as valid, and says how many it set aside.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    ignore: Vec<AnomalyKind>,
    /// Go on after a finding until the budget is spent (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// The largest trial, in transactions.
    #[arg(long, value_name = "N", default_value_t = 15000)]
    max_txns: u64,
    /// How many times to run each finding's reproducer (`repro.spec`) on the same server.
    #[arg(long, value_name = "N", default_value_t = 20)]
    repro_runs: u32,
    /// Directory for hunt.json and one finding-N/ per finding.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write into a non-empty --out (replacing an earlier hunt's files).
    #[arg(long)]
    force: bool,
    /// With --db: allow the hunt to drop and recreate the workloads' tables when they exist.
    #[arg(long)]
    reset_tables: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_budget(s: &str) -> Result<Duration, String> {
    let (number, unit) =
        s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration such as 90s, 10m or 1h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: the unit is s, m or h")),
    };
    Ok(Duration::from_secs(secs))
}

fn parse_kind(s: &str) -> Result<AnomalyKind, String> {
    AnomalyKind::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = AnomalyKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("unknown anomaly class {s:?}: use one of {}", names.join(", "))
    })
}

/// Runs the command; see the module doc.
pub(crate) fn run(args: HuntArgs) -> anyhow::Result<ExitCode> {
    let kind = match &args.db {
        Some(url) => DatabaseKind::from_url(url)?,
        None => args.database,
    };
    dispatch(kind, HuntOn(args))?
}

struct HuntOn(HuntArgs);

impl DatabaseVisitor for HuntOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        hunt_with::<D>(self.0)
    }
}

/// What the hunt did, for hunt.json and the summary.
#[derive(Debug, Default)]
struct Tally {
    trials: Vec<Json>,
    txns: usize,
    attempts: usize,
    aborts: usize,
    ignored: usize,
    findings: Vec<Json>,
}

fn hunt_with<D: Database>(args: HuntArgs) -> anyhow::Result<ExitCode> {
    check_out_dir(&args.out, args.force)?;
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    if args.workloads.is_empty() {
        bail!("--workloads names no workload");
    }
    let name = D::KIND.display_name();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let interrupt = rt.block_on(async { watch_signals() })?;
    let (db, server) =
        open_database::<D>(&rt, args.db.as_deref(), args.server_version.clone(), &args.server_setting)?;
    let level = level_to_check(&db, args.isolation, args.check);
    // Time-limited: a silent server leaves the version unknown (the first trial reports it).
    let server_version = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), db.server_version()).await.ok().flatten()
    });
    if let Some(v) = &server_version {
        eprintln!("isocert: hunting on {v}");
    }
    let outcome = rt.block_on(hunt_loop(&db, &args, level, &interrupt, server_version.as_deref()));
    if let Some(server) = server {
        if let Err(e) = rt.block_on(server.shutdown()) {
            tracing::warn!("stopping the embedded {name}: {e}");
        }
    }
    let (tally, elapsed) = outcome?;
    let interrupted = interrupt.load(Ordering::SeqCst);
    let summary = json!({
        "database": D::KIND.as_str(),
        "server_version": server_version,
        "isolation": args.isolation.as_str(),
        "checked_as": level.to_string(),
        "workloads": args.workloads.iter().map(|w| w.as_str()).collect::<Vec<_>>(),
        "seed": args.seed,
        "deletes": !args.no_deletes,
        "ignored_kinds": args.ignore.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "budget_secs": args.runs.is_none().then_some(args.budget.as_secs()),
        "runs_asked": args.runs,
        "elapsed_secs": elapsed,
        "interrupted": interrupted,
        "trials_run": tally.trials.len(),
        "committed_txns": tally.txns,
        "attempts": tally.attempts,
        "server_aborts": tally.aborts,
        "ignored_anomalies": tally.ignored,
        "allowed_at_level": crate::allowed::allowed_note(level),
        "findings": tally.findings,
        "trials": tally.trials,
    });
    write_text(&args.out.join("hunt.json"), &(serde_json::to_string_pretty(&summary)? + "\n"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let verdict = match (tally.findings.is_empty(), interrupted) {
            (true, false) => "VALID",
            (true, true) => "VALID so far (interrupted)",
            (false, false) => "INVALID",
            (false, true) => "INVALID (interrupted)",
        };
        println!(
            "{verdict}: {} trial(s) in {elapsed:.0}s on {}, {} committed transactions of {} attempts ({} aborted by \
             the server), checked as {level}; {} finding(s){}; files in {}",
            tally.trials.len(),
            server_version.as_deref().unwrap_or(name),
            tally.txns,
            tally.attempts,
            tally.aborts,
            tally.findings.len(),
            if tally.ignored > 0 { format!(", {} anomalies of ignored classes set aside", tally.ignored) } else { String::new() },
            args.out.display()
        );
        println!("  tried: {}", tried(&tally.trials));
        if let Some(allowed) = crate::allowed::allowed_note(level) {
            println!("  note: {allowed}");
        }
        for f in &tally.findings {
            println!("  {}", f["summary"].as_str().unwrap_or_default());
        }
    }
    Ok(if interrupted {
        exit::interrupted()
    } else if tally.findings.is_empty() {
        exit::valid()
    } else {
        exit::anomalies()
    })
}

/// The workloads of `asked` that `db` can run: `counter` needs expression updates
/// ([`Database::EXPRESSION_UPDATES`]); leaving it out is said on standard error.
///
/// # Errors
/// When no workload is left.
fn sweepable<D: Database>(asked: &[WorkloadKind]) -> anyhow::Result<Vec<WorkloadKind>> {
    let (kept, left): (Vec<WorkloadKind>, Vec<WorkloadKind>) =
        asked.iter().partition(|w| **w != WorkloadKind::Counter || D::EXPRESSION_UPDATES);
    if !left.is_empty() {
        eprintln!(
            "isocert: the counter workload is left out: {} does not record expression updates yet",
            D::KIND.display_name()
        );
    }
    if kept.is_empty() {
        bail!("none of the workloads given (--workloads) runs on {}", D::KIND.display_name());
    }
    Ok(kept)
}

/// The trials, until the budget is spent, a finding stops the hunt, or an interrupt.
async fn hunt_loop<D: Database>(
    db: &D,
    args: &HuntArgs,
    level: IsolationLevel,
    interrupt: &Arc<AtomicBool>,
    server_version: Option<&str>,
) -> anyhow::Result<(Tally, f64)> {
    if args.db.is_some() {
        for w in &args.workloads {
            let table = w.table_spec();
            if db.table_exists(&table).await? && !args.reset_tables {
                bail!(
                    "table {} already exists in this database; isocert never drops a table it did not create: \
                     use another database, drop it yourself, or pass --reset-tables",
                    table.name
                );
            }
        }
    }
    let space = Space {
        workloads: sweepable::<D>(&args.workloads)?,
        deletes: !args.no_deletes,
        max_txns: args.max_txns,
    };
    let mut search = Search::new(space, args.seed);
    let capture =
        CaptureOptions { run_name: run_name(), mode: None, poll_interval: Duration::from_millis(200) };
    let started = Instant::now();
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{elapsed_precise} {spinner} {msg}").expect("valid template"));
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut tally = Tally::default();
    let mut result = Ok(());
    let mut used = Vec::new();
    loop {
        let spent = started.elapsed();
        let over = match args.runs {
            Some(n) => tally.trials.len() as u32 >= n,
            None => spent >= args.budget,
        };
        if over || interrupt.load(Ordering::SeqCst) || (!tally.findings.is_empty() && !args.keep_going) {
            break;
        }
        let params = search.next_trial();
        if !used.contains(&params.workload) {
            used.push(params.workload);
        }
        let n = tally.trials.len() + 1;
        let head = format!(
            "trial {n}: {} txns, {:.0} aborts/s, {} finding(s) | {params}",
            tally.txns,
            tally.aborts as f64 / spent.as_secs_f64().max(1e-9),
            tally.findings.len()
        );
        bar.set_message(head.clone());
        // The budget is a wall-clock promise: at its end the trial in flight stops after the
        // attempts it has running and is checked on what completed.
        let deadline = args.runs.is_none().then(|| started + args.budget);
        let trial_stop = stop_at(Arc::clone(interrupt), deadline);
        let trial =
            run_trial(db, &params, args.isolation, level, &capture, Arc::clone(&trial_stop.flag), |done| {
                if done % 50 == 0 {
                    bar.set_message(format!("{head} [{done}/{}]", params.txns));
                }
            })
            .await;
        let cut_by_budget = trial_stop.finish();
        let trial = match trial {
            Ok(t) => t,
            Err(e) => {
                result = Err(anyhow::Error::new(e).context(format!("trial {n} ({params})")));
                break;
            }
        };
        search.record(TrialScore { params: params.clone(), abort_rate: trial.abort_rate() });
        tally.txns += trial.committed;
        tally.attempts += trial.attempts;
        tally.aborts += trial.server_aborts;
        let (kept, ignored): (Vec<_>, Vec<_>) =
            trial.report.anomalies.iter().partition(|a| !args.ignore.contains(&a.kind));
        tally.ignored += ignored.len();
        let mut kinds: Vec<&str> = kept.iter().map(|a| a.kind.as_str()).collect();
        kinds.dedup();
        tally.trials.push(json!({
            "trial": n,
            "params": params,
            "committed": trial.committed,
            "attempts": trial.attempts,
            "server_aborts": trial.server_aborts,
            "abort_rate": trial.abort_rate(),
            "workload_secs": trial.workload_secs,
            "stopped_at_budget": cut_by_budget,
            "notes": trial.notes,
            "anomalies": kept.len(),
            "kinds": kinds,
            "ignored": ignored.len(),
        }));
        if kept.is_empty() {
            continue;
        }
        let k = tally.findings.len() + 1;
        let dir = args.out.join(format!("finding-{k}"));
        bar.set_message(format!("trial {n}: {} anomalies; saving, shrinking and reproducing", kept.len()));
        match save_finding::<D>(db, &trial, args, level, &dir, server_version, &capture, interrupt).await {
            Ok(finding) => tally.findings.push(finding),
            Err(e) => {
                result = Err(e.context(format!("saving finding {k} in {}", dir.display())));
                break;
            }
        }
    }
    bar.finish_and_clear();
    if args.db.is_some() {
        for w in used {
            if let Err(e) = db.drop_table(&w.table_spec()).await {
                eprintln!("isocert: warning: could not drop the workload's table {}: {e}", w.table());
            }
        }
    }
    result.map(|()| (tally, started.elapsed().as_secs_f64()))
}

/// A trial's own stop flag, set when the hunt is interrupted or its budget's deadline
/// passes, by a watcher that ends with [`TrialStop::finish`].
struct TrialStop {
    flag: Arc<AtomicBool>,
    by_deadline: Arc<AtomicBool>,
    watcher: tokio::task::JoinHandle<()>,
}

impl TrialStop {
    /// Stops the watcher; whether the deadline cut the trial short.
    fn finish(self) -> bool {
        self.watcher.abort();
        self.by_deadline.load(Ordering::SeqCst)
    }
}

fn stop_at(interrupt: Arc<AtomicBool>, deadline: Option<Instant>) -> TrialStop {
    let flag = Arc::new(AtomicBool::new(false));
    let by_deadline = Arc::new(AtomicBool::new(false));
    let (f, d) = (Arc::clone(&flag), Arc::clone(&by_deadline));
    let watcher = tokio::spawn(async move {
        loop {
            if interrupt.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                return;
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                d.store(true, Ordering::SeqCst);
                f.store(true, Ordering::SeqCst);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    TrialStop { flag, by_deadline, watcher }
}

/// Saves a failing trial like `isocert run` does, shrinks it, writes and runs its reproducer.
#[allow(clippy::too_many_arguments)]
async fn save_finding<D: Database>(
    db: &D,
    trial: &Trial,
    args: &HuntArgs,
    level: IsolationLevel,
    dir: &Path,
    server_version: Option<&str>,
    capture: &CaptureOptions,
    interrupt: &Arc<AtomicBool>,
) -> anyhow::Result<Json> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let h = &trial.history;
    // Saved with the level checked, which `isocert check finding-N/history.jsonl` then uses.
    let mut saved = h.clone();
    saved.isolation = Some(level);
    write_history(&dir.join("history.jsonl"), &saved)?;
    drop(saved);
    write_raw_log(&dir.join(crate::run::RAW_LOG), &trial.log)?;
    write_certificate(&dir.join("certificate.json"), h, &trial.recovered)?;
    write_reports(dir, &trial.report, h)?;
    let context = crate::allowed::allowed_note(level)
        .map(|allowed| ("allowed at this level".to_string(), allowed))
        .into_iter()
        .collect();
    let html = isocert_checker::HtmlOptions { context, ..isocert_checker::HtmlOptions::default() };
    crate::check::write_html(
        &dir.join("report.html"),
        &trial.report,
        h,
        &trial.recovered.certificate,
        &html,
    )?;
    let p = &trial.params;
    let run = json!({
        "database": D::KIND.as_str(),
        "server_version": server_version,
        "embedded": args.db.is_none(),
        "server_settings": args.server_setting.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "workload": p.workload.as_str(),
        "isolation": args.isolation.as_str(),
        "txns": p.txns,
        "sessions": p.sessions,
        "keys": p.keys,
        "distribution": p.distribution.as_str(),
        "seed": p.seed,
        "deletes": p.deletes,
        "max_txn_len": p.max_txn_len,
        "client_abort_rate": p.client_abort_rate,
        "physical": crate::physical::physical_json(&trial.config),
        "committed": trial.committed,
        "attempts": trial.attempts,
        "server_aborts": trial.server_aborts,
        "workload_secs": trial.workload_secs,
    });
    write_text(&dir.join("run.json"), &(serde_json::to_string_pretty(&run)? + "\n"))?;
    // A cycle is shrunk and reproduced first: its dependencies name every transaction the
    // interleaving needs, where a non-cyclic anomaly (an internal inconsistency) may shrink
    // to a transaction whose cause the sub-history no longer shows.
    let shown = || trial.report.anomalies.iter().filter(|a| !args.ignore.contains(&a.kind));
    let anomaly = shown()
        .find(|a| !a.cycle.is_empty())
        .or_else(|| shown().next())
        .expect("a finding has an anomaly that is not ignored");
    let mut out = json!({
        "dir": dir.display().to_string(),
        "kind": anomaly.kind.as_str(),
        "params": p,
        "anomalies": trial.report.anomalies.len(),
        "command": format!("isocert run --isolation {} {}", args.isolation, p.run_flags()),
    });
    let mut shrunk = match shrink(h, &trial.recovered.certificate, level, &trial.report, anomaly) {
        Ok(s) => s,
        Err(e) => {
            out["shrink_error"] = json!(e.to_string());
            out["summary"] =
                json!(format!("{}: {} in {} (not shrunk: {e})", dir.display(), anomaly.kind.as_str(), p));
            return Ok(out);
        }
    };
    let shrunk_dir = dir.join("shrunk");
    fs::create_dir_all(&shrunk_dir).with_context(|| format!("creating {}", shrunk_dir.display()))?;
    let recovered =
        isocert_recovery::Recovered { certificate: shrunk.certificate.clone(), ..Default::default() };
    shrunk.history.isolation = Some(level);
    write_history(&shrunk_dir.join("history.jsonl"), &shrunk.history)?;
    write_certificate(&shrunk_dir.join("certificate.json"), &shrunk.history, &recovered)?;
    write_reports(&shrunk_dir, &shrunk.report, &shrunk.history)?;
    out["shrunk"] = json!({
        "txns": shrunk.kept.len(),
        "of": h.txns.len(),
        "checks": shrunk.checks,
        "report": render_json(&shrunk.report, &shrunk.history),
    });
    let mut runs: Vec<(&str, Reproduction)> = Vec::new();
    if D::DIALECT == Dialect::Postgres {
        let title = repro_title(
            &format!(
                "isocert hunt reproducer: {} at {} checked as {level}, shrunk from {} to {} transactions.\n\
                 Found on {} with: isocert run --isolation {} {}",
                anomaly.kind.as_str(),
                args.isolation,
                h.txns.len(),
                shrunk.kept.len(),
                server_version.unwrap_or(D::KIND.display_name()),
                args.isolation,
                p.run_flags()
            ),
            level,
        );
        let table = trial.config.table_spec();
        let cfg = &trial.config;
        let physical = SpecPhysical {
            design: Some(cfg.design),
            session_settings: (0..cfg.sessions)
                .map(|s| D::access_path_settings(cfg.access_path(s)).unwrap_or_default())
                .collect(),
            maintenance: if cfg.maintenance {
                SpecPhysical::not_waiting(D::maintenance_statements(&table, &cfg.design))
            } else {
                Vec::new()
            },
        };
        // The trial's table would clash with the reproducer's setup: it is isocert's own.
        db.drop_table(&table).await?;
        let target =
            ReproTarget { level, isolation: args.isolation, kind: shrunk.kind, runs: args.repro_runs };
        let has_appends =
            shrunk.history.txns.iter().flat_map(|t| &t.ops).any(|op| matches!(op, Op::Append { .. }));
        let mut results = Vec::new();
        for (file, appends) in [
            ("repro.spec", AppendStatements::Upsert),
            ("repro-recordable.spec", AppendStatements::Recordable),
        ] {
            if appends == AppendStatements::Recordable && !has_appends {
                continue;
            }
            let spec = write_spec(
                &shrunk.history,
                &shrunk.certificate,
                &table,
                args.isolation,
                appends,
                &title,
                &physical,
            )?;
            write_text(&dir.join(file), &spec)?;
            let result = reproduce(db, &spec, &target, capture, interrupt).await?;
            results.push(json!({ "spec": dir.join(file).display().to_string(), "result": result }));
            runs.push((file, result));
        }
        out["reproducer"] = json!(results);
    }
    let reproducers = if D::DIALECT != Dialect::Postgres {
        "reproducer not written (repro.spec is PostgreSQL's isolationtester format)".to_string()
    } else {
        runs.iter().map(|(file, r)| format!("{file} {}", rate(r))).collect::<Vec<_>>().join("; ")
    };
    out["summary"] = json!(format!(
        "{}: {} in trial {p}; shrunk to {} of {} transactions; {reproducers}",
        dir.display(),
        anomaly.kind.as_str(),
        shrunk.kept.len(),
        h.txns.len(),
    ));
    Ok(out)
}

/// The comment heading a reproducer: `about`, then the level to check at in the comment
/// `isocert scenario` reads, so that `isocert scenario finding-N/repro.spec` checks at the
/// hunt's level by itself.
fn repro_title(about: &str, level: IsolationLevel) -> String {
    format!("{about}\n{} {level}", isocert_scenario::CHECK_DIRECTIVE)
}

/// What the trials covered, in one line: trials per workload and the range of each setting.
fn tried(trials: &[Json]) -> String {
    let per = |field: &str| {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for t in trials {
            let v = match &t["params"][field] {
                Json::String(s) => s.clone(),
                Json::Bool(b) => if *b { "on" } else { "off" }.to_string(),
                other => other.to_string(),
            };
            match counts.iter_mut().find(|(name, _)| *name == v) {
                Some((_, n)) => *n += 1,
                None => counts.push((v, 1)),
            }
        }
        counts.iter().map(|(v, n)| format!("{v} x{n}")).collect::<Vec<_>>().join(", ")
    };
    let range = |field: &str| {
        let values: Vec<u64> = trials.iter().filter_map(|t| t["params"][field].as_u64()).collect();
        match (values.iter().min(), values.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => format!("{lo}"),
            (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
            _ => "none".to_string(),
        }
    };
    if trials.is_empty() {
        return "no trial".to_string();
    }
    format!(
        "{}; keys {}, sessions {}, ops per transaction {}, transactions per trial {}; layouts {}; indexes {}; \
         plans {}; maintenance {}; filler rows {}",
        per("workload"),
        range("keys"),
        range("sessions"),
        range("max_txn_len"),
        range("txns"),
        per("layout"),
        per("index"),
        per("access_paths"),
        per("maintenance"),
        range("filler_rows")
    )
}

/// How often a reproducer reproduced, in words.
fn rate(r: &Reproduction) -> String {
    match (r.runs, r.uncertified) {
        (0, _) => "not run".to_string(),
        (_, 0) => format!("reproduced {}/{} runs", r.reproduced, r.runs),
        (_, n) => format!(
            "reproduced {}/{} runs, {n} uncertified ({})",
            r.reproduced,
            r.runs,
            r.why_uncertified.clone().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reproducer's heading carries the level to check, which `isocert scenario` reads,
    /// so `isocert scenario finding-N/repro.spec` checks at the hunt's level by itself.
    #[test]
    fn a_reproducer_heading_names_the_level_scenario_checks_at() {
        let title = repro_title("isocert hunt reproducer: g-si", IsolationLevel::SnapshotIsolation);
        let comments: String = title.lines().map(|l| format!("# {l}\n")).collect();
        let spec = format!("{comments}session s\nstep a {{ SELECT 1; }}\n");
        assert_eq!(isocert_scenario::parse(&spec).unwrap().check, Some(IsolationLevel::SnapshotIsolation));
    }
}
