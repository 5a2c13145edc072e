//! `isocert scenario`: run an isolationtester `.spec` scenario on a database, record every
//! permutation, recover its certificate through the adapter and check it
//! (isocert-scenario does the running; docs/SCENARIOS.md).
//!
//! One line per permutation: its steps, the steps that waited for a lock, the statements
//! that failed, and the verdict ([`Verdict`]), then a summary line counting them. Only
//! `valid` and `anomalies` decide a permutation; `partial`, `uncertified` and `unrecorded`
//! leave it undecided, and the exit code is 2 unless every permutation that ran was decided
//! (or `--allow-uncertified` accepts that), so a CI job never passes on a scenario that
//! proved nothing. `invalid` permutations (a step waited for a lock only a later step
//! releases, isolationtester's "invalid permutation") are schedules the database did not
//! allow: counted, not failing.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio::sync::watch;

use anyhow::Context;
use isocert_adapters::guard::run_name;
use isocert_adapters::{
    dispatch, parse_run_level, CaptureOptions, Database, DatabaseKind, DatabaseVisitor, ThrowawayServer,
};
use isocert_certify::{check, Interpreter};
use isocert_checker::{render_json, CheckerKind, IsolationLevel};
use isocert_history::History;
use isocert_scenario::{
    run_permutation, survey_tables, PermutationRun, RunOptions, ScenarioError, ScenarioTable, SkippedTable,
    Spec,
};
use serde_json::json;

use crate::exit;
use crate::verdict::{Summary, Verdict};

/// Run an isolationtester `.spec` scenario: every permutation recorded, recovered and checked.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert scenario tests/scenarios/g2-item-write-skew.spec --isolation repeatable-read --check serializable\n  isocert scenario tests/scenarios/*.spec --isolation read-committed --isolation serializable --table"
)]
pub(crate) struct ScenarioArgs {
    /// The scenarios, in PostgreSQL's isolationtester format (setup, teardown, sessions
    /// with steps, permutations; all interleavings when it lists none).
    #[arg(value_name = "FILE.spec", required = true)]
    specs: Vec<PathBuf>,
    /// The database (the scheme picks the adapter); without it a throwaway server of
    /// --database is started and removed afterwards.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// Without --db: which throwaway server to start (postgres or mariadb).
    #[arg(long, value_name = "DATABASE", default_value = "postgres", conflicts_with = "db")]
    database: DatabaseKind,
    /// The level of every transaction whose BEGIN names none (a level in the spec wins);
    /// repeat it to run every scenario at each level.
    #[arg(long, value_name = "LEVEL", default_value = "serializable", value_parser = parse_run_level)]
    isolation: Vec<IsolationLevel>,
    /// The level to check (default: the level a `# isocert-check: LEVEL` comment in the spec
    /// names, as `isocert hunt`'s reproducers carry, else per permutation the weakest level
    /// its transactions ran at, as the adapter maps it: --isolation unless the spec names
    /// levels).
    #[arg(long, value_name = "LEVEL")]
    check: Option<IsolationLevel>,
    /// Only parse the specs: print each one's file and permutation count, run nothing
    /// (exit 2 at the first that does not parse).
    #[arg(long, conflicts_with_all = ["table", "json", "out"])]
    parse_only: bool,
    /// Print a Markdown table instead: a row per scenario, a column per --isolation, each
    /// cell the anomaly kinds any permutation showed (`none`); docs/SCENARIOS.md is made so.
    #[arg(long, conflicts_with = "json")]
    table: bool,
    /// Only the permutations with these numbers (from 1, in the file's order; repeatable).
    #[arg(long, value_name = "N")]
    permutation: Vec<usize>,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    json: bool,
    /// Write each permutation's history.jsonl, certificate.json, raw-log.jsonl and
    /// report.txt to DIR/SCENARIO/LEVEL/permutation-N/.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seconds a step may neither finish nor wait for a lock (then its session is ended,
    /// the teardown runs, exit 2); also how long a step may still wait for a lock once every
    /// step has started (then the permutation is invalid and the run goes on).
    #[arg(long, value_name = "S", default_value_t = 30)]
    step_timeout: u64,
    /// Seconds one statement of the global setup or teardown may take (exit 2 after it).
    #[arg(long, value_name = "S", default_value_t = 60)]
    setup_timeout: u64,
    /// Exit 0 (no anomalies) or 1 (anomalies) even when some permutation could not be
    /// certified (`partial`, `uncertified`, `unrecorded`); without it such a run exits 2.
    #[arg(long)]
    allow_uncertified: bool,
    /// The most permutations a spec may have (a spec without `permutation` lines runs every
    /// interleaving, which grows as a multinomial); a spec with more is refused unless this
    /// is raised or --permutation picks some.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PERMUTATIONS)]
    max_permutations: u64,
}

/// The default of `--max-permutations`: ten thousand permutations run for hours.
const DEFAULT_MAX_PERMUTATIONS: u64 = 10_000;

/// Runs the command; see the module doc.
pub(crate) fn run(args: ScenarioArgs) -> anyhow::Result<ExitCode> {
    let mut specs = Vec::new();
    for path in &args.specs {
        let text = crate::output::read_text(path)?;
        let spec = isocert_scenario::parse(&text).with_context(|| format!("{}", path.display()))?;
        specs.push((path.clone(), spec));
    }
    if args.parse_only {
        for (path, spec) in &specs {
            let count =
                spec.permutation_count().map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
            println!("{}: parses, {count} permutation(s)", path.display());
        }
        return Ok(exit::valid());
    }
    if args.permutation.is_empty() {
        for (path, spec) in &specs {
            match spec.permutation_count() {
                Some(n) if n <= args.max_permutations => {}
                count => anyhow::bail!(
                    "{}: {} permutations (every interleaving of its sessions' steps), more than \
                     --max-permutations {}: raise it, pick some with --permutation N, or list \
                     permutations in the spec",
                    path.display(),
                    count.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    args.max_permutations
                ),
            }
        }
    }
    let kind = match &args.db {
        Some(url) => DatabaseKind::from_url(url)?,
        None => args.database,
    };
    dispatch(kind, ScenarioOn(args, specs))?
}

struct ScenarioOn(ScenarioArgs, Vec<(PathBuf, Spec)>);

impl DatabaseVisitor for ScenarioOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        scenario_with::<D>(self.0, self.1)
    }
}

/// A permutation's outcome, for the line and the JSON.
#[derive(Debug)]
struct Outcome {
    number: usize,
    level: IsolationLevel,
    /// Why a permutation is uncertified or unrecorded, when the verdict alone does not say.
    why: Option<String>,
    run: PermutationRun,
    verdict: Verdict,
    anomalies: Vec<String>,
    report: Option<serde_json::Value>,
}

/// One scenario run at one level.
#[derive(Debug)]
struct SpecRun {
    path: PathBuf,
    isolation: IsolationLevel,
    tables: Vec<ScenarioTable>,
    skipped: Vec<SkippedTable>,
    outcomes: Vec<Outcome>,
}

fn scenario_with<D: Database>(args: ScenarioArgs, specs: Vec<(PathBuf, Spec)>) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let stop = rt.block_on(async { watch_signals() })?;
    let (db, server) = match &args.db {
        Some(url) => (D::from_url(url)?, None),
        None => {
            eprintln!("isocert: starting a throwaway {} (use --db to test your own)", D::KIND.display_name());
            let (db, server) = rt.block_on(D::start_server(&[])).context("starting the throwaway server")?;
            (db, Some(server))
        }
    };
    let several = specs.len() * args.isolation.len() > 1;
    let mut runs = Vec::new();
    let mut failure = None;
    'all: for (path, spec) in &specs {
        for &isolation in &args.isolation {
            if several && !args.json && !args.table {
                println!("== {} at {isolation}", path.display());
            }
            let (run, error) = run_spec::<D>(&rt, &db, path, spec, isolation, &args, &stop);
            runs.push(run);
            if let Some(e) = error {
                failure = Some(e);
                break 'all;
            }
        }
    }
    if let Some(server) = server {
        if let Err(e) = rt.block_on(server.shutdown()) {
            tracing::warn!("stopping the throwaway server: {e}");
        }
    }
    // What completed is printed even when a permutation failed or a signal stopped the run.
    let interrupted = failure.as_ref().is_some_and(|e| {
        e.downcast_ref::<ScenarioError>().is_some_and(|e| matches!(e, ScenarioError::Interrupted))
    });
    let summary = Summary::of(runs.iter().flat_map(|r| &r.outcomes).map(|o| o.verdict));
    if args.json {
        let list: Vec<serde_json::Value> = runs.iter().map(spec_json).collect();
        let mut doc = json!({ "database": D::KIND.as_str(), "runs": list, "summary": summary.to_json() });
        if let Some(e) = &failure {
            doc["error"] = json!(format!("{e:#}"));
        }
        if interrupted {
            doc["interrupted"] = json!(true);
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if args.table {
        print!("{}", table(&runs, &args.isolation));
        eprintln!("isocert: {}", summary.line());
    } else {
        println!("{}", summary.line());
    }
    if interrupted {
        eprintln!("isocert: interrupted: the sessions were ended and the teardown ran; the permutations above completed");
        return Ok(exit::interrupted());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if !args.allow_uncertified && summary.undecided() > 0 {
        eprintln!(
            "isocert: {} permutation(s) could not be certified, so this run proves nothing about them: exit 2 \
             (--allow-uncertified accepts that)",
            summary.undecided()
        );
    }
    Ok(summary.exit(args.allow_uncertified))
}

/// Installs the SIGINT, SIGTERM and SIGHUP handlers of a scenario run and returns the
/// channel they set: the running permutation ends its sessions, runs its teardown and drops
/// its replication objects, the permutations that completed are printed, exit 130. A
/// second signal exits at once.
fn watch_signals() -> anyhow::Result<watch::Receiver<bool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(false);
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            if tx.send_replace(true) {
                eprintln!("isocert: interrupted again: exiting now");
                #[allow(clippy::exit)]
                std::process::exit(130);
            }
            eprintln!(
                "isocert: interrupted: ending the sessions, running the teardown, dropping the replication \
                 objects (interrupt again to quit at once)"
            );
        }
    });
    Ok(rx)
}

/// Every permutation of one scenario at one level: what completed, and the error that
/// stopped it (the permutations before it are kept).
fn run_spec<D: Database>(
    rt: &tokio::runtime::Runtime,
    db: &D,
    path: &std::path::Path,
    spec: &Spec,
    isolation: IsolationLevel,
    args: &ScenarioArgs,
    stop: &watch::Receiver<bool>,
) -> (SpecRun, Option<anyhow::Error>) {
    let setup: Vec<String> = spec.setup.iter().map(|b| b.sql.clone()).collect();
    let (tables, skipped) = survey_tables(&setup, D::DIALECT);
    let mut run = SpecRun { path: path.to_path_buf(), isolation, tables, skipped, outcomes: Vec::new() };
    let error = run_permutations::<D>(rt, db, spec, args, stop, &mut run).err();
    (run, error)
}

fn run_permutations<D: Database>(
    rt: &tokio::runtime::Runtime,
    db: &D,
    spec: &Spec,
    args: &ScenarioArgs,
    stop: &watch::Receiver<bool>,
    run: &mut SpecRun,
) -> anyhow::Result<()> {
    let path = run.path.clone();
    let isolation = run.isolation;
    if run.tables.is_empty() {
        eprintln!(
            "isocert: {}: the setup creates no table with integer columns and an integer primary key: \
             the permutations run, nothing is recorded",
            path.display()
        );
    }
    let count = spec.permutation_count().unwrap_or(u64::MAX);
    let numbers: Box<dyn Iterator<Item = (u64, isocert_scenario::Permutation)>> =
        if args.permutation.is_empty() {
            Box::new((1..).zip(spec.permutations()))
        } else {
            let mut chosen = Vec::new();
            for &n in &args.permutation {
                match spec.permutation((n as u64).wrapping_sub(1)) {
                    Some(p) if n > 0 => chosen.push((n as u64, p)),
                    _ => anyhow::bail!("--permutation {n}: {} has permutations 1 to {count}", path.display()),
                }
            }
            Box::new(chosen.into_iter())
        };
    let options = RunOptions {
        isolation,
        capture: CaptureOptions {
            run_name: run_name(),
            mode: None,
            poll_interval: Duration::from_millis(100),
        },
        step_timeout: Duration::from_secs(args.step_timeout),
        // Longer than InnoDB's 100 ms refresh of INNODB_TRX (MySqlAdmin::lock_waiting).
        block_check: Duration::from_millis(150),
        setup_timeout: Duration::from_secs(args.setup_timeout),
        stop: Some(stop.clone()),
    };
    let stem = path.file_stem().map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
    for (number, perm) in numbers {
        let permutation = rt.block_on(run_permutation(db, spec, &run.tables, &perm, &options));
        let permutation = match permutation {
            Ok(p) => p,
            Err(e @ ScenarioError::Interrupted) => return Err(e.into()),
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("{}: permutation {number}", path.display())))
            }
        };
        let out = args
            .out
            .as_ref()
            .map(|d| d.join(&stem).join(isolation.as_str()).join(format!("permutation-{number}")));
        let weakest = permutation.levels.first().copied().unwrap_or(isolation);
        let level = args.check.or(spec.check).unwrap_or_else(|| db.checked_as(weakest));
        let outcome = judge::<D>(number as usize, permutation, level, out.as_deref(), args.json)?;
        if !args.json && !args.table {
            println!("{}", line(&outcome));
        }
        run.outcomes.push(outcome);
    }
    Ok(())
}

fn spec_json(r: &SpecRun) -> serde_json::Value {
    let list: Vec<serde_json::Value> = r
        .outcomes
        .iter()
        .map(|o| {
            json!({
                "permutation": o.number,
                "steps": o.run.steps,
                "verdict": o.verdict.as_str(),
                "checked_as": o.level.to_string(),
                "levels": o.run.levels.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
                "why": o.why,
                "tables": o.run.tables,
                "unreadable_tables": o.run.unreadable,
                "anomalies": o.anomalies,
                "waited": o.run.blocked,
                "invalid": o.run.invalid,
                "errors": o.run.errors,
                "unrecorded": o.run.unrecorded,
                "report": o.report,
            })
        })
        .collect();
    json!({
        "spec": r.path.display().to_string(),
        "isolation": r.isolation.as_str(),
        "tables": r.tables.iter().map(|t| t.spec.name).collect::<Vec<_>>(),
        "skipped_tables": r.skipped,
        "permutations": list,
    })
}

/// The Markdown table of `runs`: a row per scenario, a column per level.
fn table(runs: &[SpecRun], levels: &[IsolationLevel]) -> String {
    let mut out = String::from("| scenario |");
    for l in levels {
        out.push_str(&format!(" {l} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(levels.len()));
    out.push('\n');
    let mut seen: Vec<&PathBuf> = Vec::new();
    for r in runs {
        if !seen.contains(&&r.path) {
            seen.push(&r.path);
        }
    }
    for path in seen {
        let stem = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        out.push_str(&format!("| {stem} |"));
        for l in levels {
            let cell =
                runs.iter().find(|r| &r.path == path && r.isolation == *l).map_or("".to_string(), cell);
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

/// A table cell: the anomaly kinds the permutations showed, or how they ended otherwise.
fn cell(r: &SpecRun) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for o in &r.outcomes {
        for k in &o.anomalies {
            if !kinds.contains(&k.as_str()) {
                kinds.push(k);
            }
        }
    }
    let mut notes: Vec<&str> = Vec::new();
    for o in &r.outcomes {
        let word = o.verdict.as_str();
        if !matches!(o.verdict, Verdict::Valid | Verdict::Anomalies) && !notes.contains(&word) {
            notes.push(word);
        }
    }
    let mut text = if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") };
    if !notes.is_empty() {
        text.push_str(&format!(" ({})", notes.join(", ")));
    }
    text
}

/// Recovers and checks one permutation's history.
fn judge<D: Database>(
    number: usize,
    mut run: PermutationRun,
    level: IsolationLevel,
    out: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<Outcome> {
    let unrecorded = |run: PermutationRun, verdict, why: Option<String>| Outcome {
        number,
        level,
        why,
        run,
        verdict,
        anomalies: Vec::new(),
        report: None,
    };
    if run.invalid.is_some() {
        return Ok(unrecorded(run, Verdict::Invalid, None));
    }
    if let Some(why) = run.capture_incomplete.clone() {
        let why = format!("the change capture could not record the permutation: {why}");
        return Ok(unrecorded(run, Verdict::Uncertified, Some(why)));
    }
    let (false, Some(log)) = (run.tables.is_empty(), run.log.take()) else {
        return Ok(unrecorded(run, Verdict::Unrecorded, None));
    };
    if let Some(u) = run.unrecorded.iter().find(|u| u.writes_table) {
        let why = format!("{} writes a recorded table unrecorded ({})", u.step, u.why);
        return Ok(unrecorded(run, Verdict::Uncertified, Some(why)));
    }
    let mut history: History = std::mem::take(&mut run.history);
    let mut interpreter = Interpreter::new(&history).context("compiling the recorded predicates")?;
    let recovered = match isocert_certify::recover::<D>(&mut history, &log, &mut interpreter) {
        Ok(recovered) => recovered,
        // The database changed recorded rows the history does not hold (a trigger, a
        // foreign key's action, a partition): no certificate, but the run goes on.
        Err(e) => {
            run.history = history;
            run.log = Some(log);
            return Ok(unrecorded(
                run,
                Verdict::Uncertified,
                Some(format!("recovering the certificate: {e}")),
            ));
        }
    };
    let report = check(&history, &recovered.certificate, level, CheckerKind::Auto, &interpreter)
        .with_context(|| format!("permutation {number}: checking"))?;
    let anomalies: Vec<String> = report.anomalies.iter().map(|a| a.kind.to_string()).collect();
    // A scenario chooses its values: a write that repeats a value its row already had makes
    // two versions the history cannot tell apart. Not a violation by the database, and not
    // checkable either.
    if anomalies.iter().any(|k| k == "duplicate-write") {
        run.history = history;
        run.log = Some(log);
        let why = "a write installs a value its row already had, so the history cannot tell \
                   those versions apart (duplicate-write; docs/SCENARIOS.md)";
        return Ok(unrecorded(run, Verdict::Uncertified, Some(why.to_string())));
    }
    let verdict = match (report.is_valid(), run.unrecorded.is_empty()) {
        (false, _) => Verdict::Anomalies,
        (true, true) => Verdict::Valid,
        (true, false) => Verdict::Partial,
    };
    if let Some(dir) = out {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        history.isolation = Some(level);
        crate::run::write_history(&dir.join("history.jsonl"), &history)?;
        crate::run::write_certificate(&dir.join("certificate.json"), &history, &recovered)?;
        crate::run::write_raw_log(&dir.join(crate::run::RAW_LOG), &log)?;
        crate::output::write_text(&dir.join("report.txt"), &crate::check::text_report(&report, &history))?;
    }
    let report = json.then(|| render_json(&report, &history));
    run.history = history;
    run.log = Some(log);
    Ok(Outcome { number, level, why: None, run, verdict, anomalies, report })
}

/// `permutation 2: r1 r2 w1 w2 c1 c2: anomalies (g2-item) [blocked: w2] [errors: c2: ...]`.
fn line(o: &Outcome) -> String {
    let mut s = format!("permutation {}: {}: {}", o.number, o.run.steps.join(" "), o.verdict.as_str());
    if !o.anomalies.is_empty() {
        s.push_str(&format!(" ({})", o.anomalies.join(", ")));
    }
    if let Some(why) = o.run.invalid.as_ref().or(o.why.as_ref()) {
        s.push_str(&format!(" ({why})"));
    }
    if !o.run.blocked.is_empty() {
        s.push_str(&format!(" [waited: {}]", o.run.blocked.join(" ")));
    }
    if !o.run.errors.is_empty() {
        let errors: Vec<String> = o.run.errors.iter().map(|e| isocert_history::quote_capped(e)).collect();
        s.push_str(&format!(" [errors: {}]", errors.join("; ")));
    }
    if !o.run.unrecorded.is_empty() {
        s.push_str(&format!(" [{} statement(s) unrecorded]", o.run.unrecorded.len()));
    }
    s
}
