//! `isocert scenario`: run an isolationtester `.spec` scenario on a database, record every
//! permutation, recover its certificate through the adapter and check it
//! (isocert-scenario does the running; docs/SCENARIOS.md).
//!
//! One line per permutation: its steps, the steps that waited for a lock, the statements
//! that failed, and the verdict: `valid`, `anomalies` (with their kinds), `partial` (valid,
//! but some statements ran unrecorded), `uncertified` (a statement wrote a recorded table
//! unrecorded, or the captured log holds a write the history lacks, so no certificate can be
//! complete, or a write repeats a value its row had, so its versions cannot be told apart),
//! `invalid` (a step could not run as written) or `unrecorded` (no recordable
//! table).

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use isocert_adapters::guard::run_name;
use isocert_adapters::{dispatch, CaptureOptions, Database, DatabaseKind, DatabaseVisitor, ThrowawayServer};
use isocert_checker::{check, render_json, CheckerKind, IsolationLevel};
use isocert_history::History;
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_scenario::{
    run_permutation, survey_tables, PermutationRun, RunOptions, ScenarioTable, SkippedTable, Spec,
};
use isocert_workload::Isolation;
use serde_json::json;

use crate::exit;

/// Run an isolationtester `.spec` scenario: every permutation recorded, recovered and checked.
#[derive(Debug, clap::Args)]
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
    #[arg(long, value_name = "LEVEL", default_value = "serializable")]
    isolation: Vec<Isolation>,
    /// The level to check (default: per permutation, the weakest level its transactions
    /// ran at, as the adapter maps it: --isolation unless the spec names levels).
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
    /// Seconds a step may neither finish nor wait for a lock.
    #[arg(long, value_name = "S", default_value_t = 30)]
    step_timeout: u64,
}

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
            println!("{}: parses, {} permutation(s)", path.display(), spec.permutations_to_run().len());
        }
        return Ok(exit::valid());
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
    verdict: &'static str,
    anomalies: Vec<String>,
    report: Option<serde_json::Value>,
}

/// One scenario run at one level.
#[derive(Debug)]
struct SpecRun {
    path: PathBuf,
    isolation: Isolation,
    tables: Vec<ScenarioTable>,
    skipped: Vec<SkippedTable>,
    outcomes: Vec<Outcome>,
}

fn scenario_with<D: Database>(args: ScenarioArgs, specs: Vec<(PathBuf, Spec)>) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
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
            match run_spec::<D>(&rt, &db, path, spec, isolation, &args) {
                Ok(run) => runs.push(run),
                Err(e) => {
                    failure = Some(e);
                    break 'all;
                }
            }
        }
    }
    if let Some(server) = server {
        if let Err(e) = rt.block_on(server.shutdown()) {
            tracing::warn!("stopping the throwaway server: {e}");
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if args.json {
        let list: Vec<serde_json::Value> = runs.iter().map(spec_json).collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "database": D::KIND.as_str(), "runs": list }))?);
    } else if args.table {
        print!("{}", table(&runs, &args.isolation));
    }
    let anomalies = runs.iter().flat_map(|r| &r.outcomes).any(|o| o.verdict == "anomalies");
    Ok(if anomalies { exit::anomalies() } else { exit::valid() })
}

/// Every permutation of one scenario at one level.
fn run_spec<D: Database>(
    rt: &tokio::runtime::Runtime,
    db: &D,
    path: &std::path::Path,
    spec: &Spec,
    isolation: Isolation,
    args: &ScenarioArgs,
) -> anyhow::Result<SpecRun> {
    let setup: Vec<String> = spec.setup.iter().map(|b| b.sql.clone()).collect();
    let (tables, skipped) = survey_tables(&setup, D::DIALECT);
    if tables.is_empty() {
        eprintln!(
            "isocert: {}: the setup creates no table with integer columns and an integer primary key: \
             the permutations run, nothing is recorded",
            path.display()
        );
    }
    let all = spec.permutations_to_run();
    let numbers: Vec<usize> =
        if args.permutation.is_empty() { (1..=all.len()).collect() } else { args.permutation.clone() };
    if let Some(&n) = numbers.iter().find(|&&n| n == 0 || n > all.len()) {
        anyhow::bail!("--permutation {n}: {} has permutations 1 to {}", path.display(), all.len());
    }
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
    };
    let stem = path.file_stem().map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
    let mut outcomes = Vec::new();
    for number in numbers {
        let run = rt
            .block_on(run_permutation(db, spec, &tables, &all[number - 1], &options))
            .with_context(|| format!("{}: permutation {number}", path.display()))?;
        let out = args
            .out
            .as_ref()
            .map(|d| d.join(&stem).join(isolation.as_str()).join(format!("permutation-{number}")));
        let weakest = run.levels.first().copied().unwrap_or(isolation);
        let level = match args.check {
            Some(level) => level,
            None => D::checked_as(weakest)
                .as_str()
                .parse::<IsolationLevel>()
                .map_err(|e| anyhow::anyhow!("the adapter's check level: {e}"))?,
        };
        let outcome = judge::<D>(number, run, level, out.as_deref(), args.json)?;
        if !args.json && !args.table {
            println!("{}", line(&outcome));
        }
        outcomes.push(outcome);
    }
    Ok(SpecRun { path: path.to_path_buf(), isolation, tables, skipped, outcomes })
}

fn spec_json(r: &SpecRun) -> serde_json::Value {
    let list: Vec<serde_json::Value> = r
        .outcomes
        .iter()
        .map(|o| {
            json!({
                "permutation": o.number,
                "steps": o.run.steps,
                "verdict": o.verdict,
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
fn table(runs: &[SpecRun], levels: &[Isolation]) -> String {
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
        if o.verdict != "valid" && o.verdict != "anomalies" && !notes.contains(&o.verdict) {
            notes.push(o.verdict);
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
        return Ok(unrecorded(run, "invalid", None));
    }
    let (false, Some(log)) = (run.tables.is_empty(), run.log.take()) else {
        return Ok(unrecorded(run, "unrecorded", None));
    };
    if let Some(u) = run.unrecorded.iter().find(|u| u.writes_table) {
        let why = format!("{} writes a recorded table unrecorded ({})", u.step, u.why);
        return Ok(unrecorded(run, "uncertified", Some(why)));
    }
    let mut history: History = std::mem::take(&mut run.history);
    let interpreter = Interpreter::new(&history).context("compiling the recorded predicates")?;
    let matcher = |h: &History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
    let recovered = match D::recover(&mut history, &log, &matcher) {
        Ok(recovered) => recovered,
        // The database changed recorded rows the history does not hold (a trigger, a
        // foreign key's action, a partition): no certificate, but the run goes on.
        Err(e) => {
            run.history = history;
            run.log = Some(log);
            return Ok(unrecorded(run, "uncertified", Some(format!("recovering the certificate: {e}"))));
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
        return Ok(unrecorded(run, "uncertified", Some(why.to_string())));
    }
    let verdict = match (report.is_valid(), run.unrecorded.is_empty()) {
        (false, _) => "anomalies",
        (true, true) => "valid",
        (true, false) => "partial",
    };
    if let Some(dir) = out {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
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
    let mut s = format!("permutation {}: {}: {}", o.number, o.run.steps.join(" "), o.verdict);
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
