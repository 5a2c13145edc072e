//! `isocert run`: run a workload against a database while recovering its version
//! certificate from the database's change stream, then check the history.
//!
//! The database is reached only through the adapters' seam: `--db URL` picks the adapter
//! by the URL's scheme; without it `--database` names the throwaway server to start (and
//! remove afterwards). The change capture runs during the whole workload; when the
//! workload ends, recovery only waits for the last commits to be recorded. Everything
//! lands in `--out`: `history.jsonl` and `certificate.json` (which `isocert check`
//! re-checks to the same verdict), `raw-log.jsonl` (the captured stream, from which
//! `isocert recover` rebuilds the certificate), `report.json`/`report.txt`/`report.html`
//! (the check) and `run.json` (throughput, lag, recovery counts).

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
    dispatch, parse_run_level, CaptureOptions, ChangeCapture, Database, DatabaseKind, DatabaseVisitor,
    ThrowawayServer,
};
use isocert_certify::{check, Interpreter};
use isocert_checker::{render_json, render_text, CheckerKind, HtmlOptions, IsolationLevel, Report};
use isocert_history::{v1, History, ObjId, ValueId};
use isocert_recovery::{RawLog, Recovered};
use isocert_workload::{Distribution, WorkloadConfig, WorkloadKind};
use serde_json::json;

use crate::exit;
use crate::output::{note, say};
use crate::output::{write_file, write_text};

/// Run a workload on a database, recover its version certificate concurrently, and check it.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert run --workload predicate --isolation serializable --txns 2000 --sessions 8 --out out/run\n  isocert run --db postgres://user@host/db --workload kv --isolation read-committed --check serializable --out out/rc\n  isocert run --database mariadb --workload kv --isolation repeatable-read --out out/maria"
)]
pub(crate) struct RunArgs {
    /// The database to test, e.g. `postgres://user@host:port/db` (needs `wal_level=logical`);
    /// the URL's scheme picks the adapter (README lists the schemes and what each database
    /// needs). Without it a throwaway server of --database is started in a temporary
    /// directory and removed afterwards.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// Without --db: which throwaway server to start (postgres or mariadb).
    #[arg(long, value_name = "DATABASE", default_value = "postgres", conflicts_with = "db")]
    database: DatabaseKind,
    /// Without --db: a setting of the throwaway server, `NAME=VALUE` (repeatable; recorded
    /// in run.json), e.g. `--server-setting innodb_snapshot_isolation=ON` for MariaDB.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_setting, conflicts_with = "db")]
    server_setting: Vec<(String, String)>,
    /// Without --db: the PostgreSQL version of the throwaway server, a major (13 to 18) or an
    /// exact release (17.6; installed by `scripts/install-deps --postgres-versions "13 18
    /// 17.6"`, docs/POSTGRES.md);
    /// default: the one installed. run.json and the reports name the server's version.
    #[arg(long, value_name = "V", conflicts_with = "db")]
    server_version: Option<String>,
    /// The workload: `kv` (item operations), `predicate` (range reads, predicate updates and
    /// deletes, aggregates), `skew` (write skew, allowed by repeatable read), `mini`
    /// (mini-transactions as MTC runs them: one or two reads, read-modify-writes),
    /// `append` (Elle's list append: upserts that concatenate onto a text list, reads as lists)
    /// or `counter` (PostgreSQL: `UPDATE ... SET n = n + k` by key and by predicate, upserts
    /// and, from PostgreSQL 15, `MERGE` that add to `n`, checked
    /// against what the database documents for such statements; e.g. `--workload counter
    /// --isolation read-committed --keys 3 --sessions 4`).
    #[arg(long, value_name = "KIND")]
    workload: WorkloadKind,
    /// The level the transactions run at: serializable, repeatable-read or read-committed.
    #[arg(long, value_name = "LEVEL", value_parser = parse_run_level)]
    isolation: IsolationLevel,
    /// The level to check (default: the one the workload ran at as the adapter maps it;
    /// PostgreSQL's repeatable read is checked as snapshot-isolation).
    #[arg(long, value_name = "LEVEL")]
    check: Option<IsolationLevel>,
    /// Record and check Adya's bare level only: the history's header declares none of the
    /// statement-level promises the database documents (by default it declares them and
    /// the check reads, e.g., `read-committed (as PostgreSQL documents it)`; docs/CHECKING.md).
    #[arg(long)]
    no_statement_promises: bool,
    /// Which checker to use: auto, emme or enne.
    #[arg(long, value_name = "CHECKER", default_value = "auto")]
    checker: CheckerKind,
    /// Transactions to run to completion (aborted attempts are retried and recorded too);
    /// at least 1: an empty history decides nothing.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
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
    /// The most operations a kv or append transaction plans (default 5 for kv, 4 for append).
    #[arg(long, value_name = "N")]
    max_txn_len: Option<u32>,
    /// The probability that a transaction ends with a rollback the client chose after its
    /// writes (recorded as aborted; default 0.05 for append, 0 otherwise).
    #[arg(long, value_name = "P")]
    client_abort_rate: Option<f64>,
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
    /// Exit 0 even when part of the history was left undecided (item reads the certificate
    /// could not tie to a version, so a cycle through them would go unseen); without it
    /// such a run exits 2.
    #[arg(long)]
    allow_uncertified: bool,
    /// Write every predicate read's version set row by row, as the shared spec does,
    /// instead of as its snapshot where that is shorter (docs/FORMAT.md "Compact version
    /// sets"): for readers that know only the spec.
    #[arg(long)]
    explicit_version_sets: bool,
    /// How recovery receives the committed changes (the adapter refuses modes it lacks).
    /// PostgreSQL: `stream` (the default: the streaming replication protocol; the server
    /// decodes each change once and pushes it; needs a connection with
    /// `replication=database` allowed by pg_hba.conf) or `poll` (SQL reads of the slot every
    /// --poll-interval-ms; costs the server more). MariaDB has one way (the binary log).
    #[arg(long, value_name = "MODE")]
    replication: Option<String>,
    /// CockroachDB: where the changefeed goes, `kafka://BROKER:9092/TOPIC_PREFIX` (isocert
    /// creates the changefeed into that Kafka sink and consumes its topic; needs the `kafka`
    /// build feature); default: a sinkless changefeed on its own connection.
    #[arg(long, value_name = "URL", conflicts_with = "replication")]
    changefeed: Option<String>,
    /// With a polling mode (`--replication poll`): shortest time between two reads of the
    /// change stream while the workload runs (longer: less work for the server, same
    /// completeness; the final read is immediate).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    poll_interval_ms: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write into a non-empty --out, replacing the files of an earlier run (without it, a
    /// non-empty --out is refused so that a finished run is never overwritten).
    #[arg(long)]
    force: bool,
    /// With --db: allow the run to drop and recreate the workload's table (`kv` or `items`)
    /// when it already exists. Without it an existing table is never touched: the run
    /// refuses, naming the table. (A table the run creates itself is dropped at the end.)
    #[arg(long)]
    reset_tables: bool,
    /// With --db: how long the database may take to answer each step outside the workload
    /// (connecting, cleaning up earlier runs' objects, looking for the table, creating it,
    /// starting the change capture, dropping the table at the end) before the run stops
    /// with exit 2.
    #[arg(long, value_name = "SECS", default_value_t = crate::answer::DEFAULT_SECS)]
    answer_timeout_secs: u64,
    /// With --db: keep the workload's table at the end instead of dropping it.
    #[arg(long)]
    keep_tables: bool,
    /// Where to write the HTML report (summary, each anomaly's graph and timeline,
    /// docs/REPORTS.md) [default: report.html in --out].
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Fetch the certificate from an `isocert serve` API (docs/API.md) instead of
    /// consuming the change stream: the run needs no replication privilege and creates no
    /// slot. Needs --token-file.
    #[arg(long, value_name = "URL", requires = "token_file", conflicts_with_all = ["no_recovery", "replication"])]
    certificate_api: Option<String>,
    /// With --certificate-api: a file whose first line is the API token.
    #[arg(long, value_name = "FILE", requires = "certificate_api")]
    token_file: Option<PathBuf>,
    /// With --certificate-api: the schema the workload's table is in, when the token may
    /// read that table name in several schemas.
    #[arg(long, value_name = "SCHEMA", requires = "certificate_api")]
    schema: Option<String>,
    #[command(flatten)]
    emit: crate::online::RunEmitArgs,
    #[command(flatten)]
    physical: crate::physical::PhysicalArgs,
}

/// Timings and counts of one run, written to run.json.
#[derive(Debug, Default)]
struct RunStats {
    /// The server's version as it reports it.
    server_version: Option<String>,
    workload_secs: f64,
    committed: usize,
    attempts: usize,
    recovery_lag_secs: Option<f64>,
    catch_up_secs: Option<f64>,
    recover_secs: Option<f64>,
    check_secs: Option<f64>,
    /// A signal stopped the workload early.
    interrupted: bool,
    /// Why the change capture could not record the whole run (a TRUNCATE of the run's
    /// table): the history is saved, no certificate is recovered, the run is uncertified.
    incomplete: Option<String>,
}

/// Parses `NAME=VALUE`.
pub(crate) fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// Runs the command; see the module doc.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let kind = match &args.db {
        Some(url) => DatabaseKind::from_url(url)?,
        None => args.database,
    };
    dispatch(kind, RunOn(args))?
}

/// [`run_with`] on the adapter [`dispatch`] picks.
struct RunOn(RunArgs);

impl DatabaseVisitor for RunOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        run_with::<D>(self.0)
    }
}

fn run_with<D: Database>(args: RunArgs) -> anyhow::Result<ExitCode> {
    check_html_path(&args)?;
    check_out_dir(&args.out, args.force)?;
    let emit = crate::online::prepare_run_emit(
        &args.emit,
        args.workload != WorkloadKind::Predicate,
        !args.no_recovery,
    )?;
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let cfg = workload_config::<D>(&args)?;

    let name = D::KIND.display_name();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let interrupt = rt.block_on(async { watch_signals() })?;
    let (db, server) =
        open_database::<D>(&rt, args.db.as_deref(), args.server_version.clone(), &args.server_setting)?;
    let level = level_to_check(&db, args.isolation, args.check);
    let api = match (&args.certificate_api, &args.token_file) {
        (Some(url), Some(file)) => Some(isocert_server::client::CertificateClient::new(url, file)?),
        _ => None,
    };
    let capture = (!args.no_recovery && api.is_none()).then(|| CaptureOptions {
        run_name: run_name(),
        mode: args.replication.clone().or_else(|| args.changefeed.clone()),
        poll_interval: Duration::from_millis(args.poll_interval_ms),
    });
    let answer = Duration::from_secs(args.answer_timeout_secs);
    // Within the answer limit: a silent server leaves the version unknown, and the first
    // step below reports it.
    let server_version =
        rt.block_on(async { tokio::time::timeout(answer, db.server_version()).await.ok().flatten() });
    let outcome = rt.block_on(record(&db, &args, &cfg, capture, api.as_ref(), &interrupt, emit.as_ref()));
    if let Some(server) = server {
        if let Err(e) = rt.block_on(server.shutdown()) {
            tracing::warn!("stopping the embedded {name}: {e}");
        }
    }
    let ((mut history, log, mut stats, last_commit), fetched) = outcome?;
    // `isocert check DIR/history.jsonl` checks at this level without `--isolation`.
    history.isolation = Some(level);
    if !args.no_statement_promises {
        history.promises = db.statement_promises(args.isolation);
    }
    stats.server_version = server_version;
    stats.interrupted = interrupt.load(Ordering::SeqCst);
    if stats.interrupted {
        note!(
            "isocert: interrupted: {} transactions committed before the stop; saving and checking them",
            stats.committed
        );
    }
    if let Some(why) = &stats.incomplete {
        return save_incomplete_run::<D>(&args, &history, &stats, why);
    }
    if history.txns.is_empty() {
        return save_empty_run::<D>(&args, &history, log.as_ref(), &stats);
    }

    if let Some(recovered) = fetched {
        stats.recovery_lag_secs = Some(last_commit.elapsed().as_secs_f64());
        let fetched = recovered?;
        let sent = Some(Sent {
            document: &fetched.document[..],
            submitted: fetched.submitted,
            claimed_initial: &fetched.claimed_initial,
        });
        let interpreter = Interpreter::new(&history).context("compiling the history's predicates")?;
        let checking = ToCheck { history, recovered: fetched.recovered, interpreter };
        return finish::<D>(&args, checking, stats, level, sent, emit.as_ref());
    }
    let Some(log) = log else {
        return save_unrecovered_run::<D>(&args, &history, &stats);
    };
    let checking = recover_certificate::<D>(&args, history, &log, &mut stats, last_commit, level)?;
    finish::<D>(&args, checking, stats, level, None, emit.as_ref())
}

/// The workload `args` ask for, shaped to what `D` records.
fn workload_config<D: Database>(args: &RunArgs) -> anyhow::Result<WorkloadConfig> {
    let mut cfg = WorkloadConfig::new(args.workload, args.isolation);
    cfg.txns = args.txns;
    cfg.sessions = args.sessions;
    cfg.keys = args.keys;
    cfg.distribution = args.distribution;
    cfg.seed = args.seed;
    cfg.deletes = !args.no_deletes;
    cfg.predicate_writes_alone = D::ONE_CHANGE_PER_ROW;
    if let Some(n) = args.max_txn_len {
        cfg.max_txn_len = n;
    }
    if let Some(p) = args.client_abort_rate {
        cfg.client_abort_rate = p;
    }
    args.physical.apply(&mut cfg);
    cfg.validate()?;
    Ok(cfg)
}

/// What [`record`] brings back: the run's outcome, and with `--certificate-api` the
/// certificate the API sent for it.
type Recorded = (Outcome, Option<anyhow::Result<Fetched>>);

/// Runs the workload on `db` (with the change capture, or then fetching the certificate
/// from `api`), on a user's database (`--db`) first clearing what earlier runs left and
/// refusing a table isocert did not create, and afterwards dropping the workload's table.
async fn record<D: Database>(
    db: &D,
    args: &RunArgs,
    cfg: &WorkloadConfig,
    capture: Option<CaptureOptions>,
    api: Option<&isocert_server::client::CertificateClient>,
    interrupt: &Arc<AtomicBool>,
    emit: Option<&crate::online::RunEmit>,
) -> anyhow::Result<Recorded> {
    let table = cfg.table_spec();
    let answer = Duration::from_secs(args.answer_timeout_secs);
    if let Some(url) = args.db.as_deref() {
        prepare_user_database(db, url, &table, answer, args.reset_tables).await?;
    }
    let limit = args.db.as_deref().map(|url| (answer, url));
    let mut outcome = run_workload(db, cfg, capture, interrupt, limit, emit).await;
    // From the API before the table is dropped: its change feed must still find the
    // table's primary key when it reaches the table's first change.
    let fetched = match (&mut outcome, api) {
        (Ok((history, None, _, _)), Some(api)) => {
            Some(fetch_certificate(api, history, args.schema.as_deref(), &args.out).await)
        }
        _ => None,
    };
    if let (Some(url), false) = (&args.db, args.keep_tables) {
        let dropped =
            crate::answer::within(answer, "dropping the workload's table", url, db.drop_table(&table));
        if let Err(e) = dropped.await {
            note!("isocert: warning: could not drop the workload's table {}: {e:#}", table.name);
        }
    }
    outcome.map(|o| (o, fetched))
}

/// On a user's database: drops what isocert runs that are gone left behind, and refuses
/// to go on when the workload's table exists (unless `reset_tables`): isocert never drops
/// a table it did not create.
async fn prepare_user_database<D: Database>(
    db: &D,
    url: &str,
    table: &isocert_adapters::TableSpec,
    answer: Duration,
    reset_tables: bool,
) -> anyhow::Result<()> {
    let stale =
        crate::answer::within(answer, "looking for objects of earlier runs", url, db.drop_stale(false))
            .await?;
    for object in &stale.dropped {
        note!("isocert: dropped {object}, left by an isocert run that is gone");
    }
    let exists =
        crate::answer::within(answer, "looking for the workload's table", url, db.table_exists(table))
            .await?;
    if exists && !reset_tables {
        bail!(
            "table {} already exists in this database; isocert never drops a table it did not \
             create: use another database, drop it yourself, or pass --reset-tables to let this \
             run drop and recreate it",
            table.name
        );
    }
    Ok(())
}

/// A run that recorded no transaction: `isocert check` refuses an empty history (exit 2),
/// and a run that recorded nothing decides nothing either, so it saves its facts and gives
/// no verdict.
fn save_empty_run<D: Database>(
    args: &RunArgs,
    history: &History,
    log: Option<&RawLog>,
    stats: &RunStats,
) -> anyhow::Result<ExitCode> {
    write_history(&args.out.join("history.jsonl"), history)?;
    if let Some(log) = log {
        write_raw_log(&args.out.join(RAW_LOG), log)?;
    }
    write_run_json::<D>(&args.out, args, stats, None)?;
    note!(
        "isocert: no transaction was recorded: an empty history decides nothing, so there is no verdict \
         (run.json in {} holds the run's facts)",
        args.out.display()
    );
    Ok(if stats.interrupted { exit::interrupted() } else { exit::error() })
}

/// A run whose change capture could not record every change (`why`: a TRUNCATE of the
/// run's table): the history and run.json (marked incomplete) are saved, and the run is
/// uncertified (exit 2), since no certificate can be recovered for it.
fn save_incomplete_run<D: Database>(
    args: &RunArgs,
    history: &History,
    stats: &RunStats,
    why: &str,
) -> anyhow::Result<ExitCode> {
    write_history(&args.out.join("history.jsonl"), history)?;
    write_run_json::<D>(&args.out, args, stats, None)?;
    note!(
        "isocert: error: the change capture stopped: {why}; {} committed transactions are saved in {} \
         (history.jsonl, run.json marked incomplete), uncertified",
        stats.committed,
        args.out.display()
    );
    Ok(exit::error())
}

/// A run with `--no-recovery`: the history and the run's facts, no certificate, no check.
fn save_unrecovered_run<D: Database>(
    args: &RunArgs,
    history: &History,
    stats: &RunStats,
) -> anyhow::Result<ExitCode> {
    write_history(&args.out.join("history.jsonl"), history)?;
    write_run_json::<D>(&args.out, args, stats, None)?;
    if stats.interrupted {
        return Ok(exit::interrupted());
    }
    note!(
        "isocert: {} committed transactions in {:.2}s ({:.0} txns/s), recovery off",
        stats.committed,
        stats.workload_secs,
        stats.committed as f64 / stats.workload_secs.max(1e-9)
    );
    Ok(exit::valid())
}

/// Saves the history and the captured log, then recovers the certificate with `D`'s rule
/// (timing it into `stats`), with the interpreter the check then uses.
fn recover_certificate<D: Database>(
    args: &RunArgs,
    mut history: History,
    log: &RawLog,
    stats: &mut RunStats,
    last_commit: Instant,
    level: IsolationLevel,
) -> anyhow::Result<ToCheck> {
    // Written now so that a failed recovery leaves the evidence (and `isocert recover` can
    // rebuild the certificate from them); the history is rewritten below with the recovered
    // timestamps and outcomes.
    write_history(&args.out.join("history.jsonl"), &history)?;
    write_raw_log(&args.out.join(RAW_LOG), log)?;
    let mut interpreter = Interpreter::new(&history).context("compiling the history's predicates")?;
    let recovering = Instant::now();
    let recovered =
        isocert_certify::recover::<D>(&mut history, log, &mut interpreter).with_context(|| {
            format!(
                "recovering the certificate (the captured log is in {})",
                args.out.join(RAW_LOG).display()
            )
        })?;
    stats.recovery_lag_secs = Some(last_commit.elapsed().as_secs_f64());
    stats.recover_secs = Some(recovering.elapsed().as_secs_f64());
    for w in &recovered.warnings {
        note!("isocert: warning: {w}");
    }
    if recovered.stats.serialization_cycle && level == IsolationLevel::Serializable {
        note!(
            "isocert: note: the recovered dependencies have a cycle; the certificate's serialization order \
             follows commit visibility"
        );
    }
    Ok(ToCheck { history, recovered, interpreter })
}

/// Fetches the certificate of `history` from the API (the history is saved first, so a
/// refusal leaves it for `isocert certificate`), applying the outcomes and timestamps it
/// carries to the history.
async fn fetch_certificate(
    api: &isocert_server::client::CertificateClient,
    history: &mut History,
    schema: Option<&str>,
    out: &Path,
) -> anyhow::Result<Fetched> {
    let path = out.join("history.jsonl");
    write_history(&path, history)?;
    let mut text = Vec::new();
    v1::write_history(history, &mut text)?;
    note!("isocert: fetching the certificate from the certificate API");
    let body = api
        .fetch(&text, isocert_server::client::Request::Certificate, schema)
        .await
        .with_context(|| format!("fetching the certificate (the history is in {})", path.display()))?;
    let submitted = history.txns.len();
    let claimed_initial = history.initial.clone();
    let certificate =
        v1::read_certificate(&body[..], history).context("reading the certificate the API sent")?;
    Ok(Fetched {
        recovered: Recovered { certificate, ..Recovered::default() },
        document: body,
        submitted,
        claimed_initial,
    })
}

/// A certificate from the API: as read (the history now holds its foreign writers after
/// the `submitted` transactions), and as sent (saved as certificate.json, which
/// re-creates the foreign writers when `isocert check` reads it).
struct Fetched {
    recovered: Recovered,
    document: Vec<u8>,
    submitted: usize,
    /// The initial versions the client read, which the certificate's (what the server's
    /// feed saw, some perhaps hidden) replaced in the history it checks.
    claimed_initial: Vec<(ObjId, ValueId)>,
}

/// A certificate from the API as [`finish`] saves it: the document as sent, how many
/// transactions the client submitted, and the initial versions it recorded.
struct Sent<'a> {
    document: &'a [u8],
    submitted: usize,
    claimed_initial: &'a [(ObjId, ValueId)],
}

/// A history with its certificate (recovered, or from the API) and the predicate
/// interpreter compiled for it, ready to check.
struct ToCheck {
    history: History,
    recovered: Recovered,
    interpreter: Interpreter,
}

/// Writes the history and certificate (from the API: as it sent it, and the history
/// without the foreign writers its certificate adds, with the initial versions its client
/// read), checks, writes the reports, prints
/// the verdict, and with `--emit` publishes the history with its certificate's timestamps.
fn finish<D: Database>(
    args: &RunArgs,
    checking: ToCheck,
    mut stats: RunStats,
    level: IsolationLevel,
    sent: Option<Sent<'_>>,
    emit: Option<&crate::online::RunEmit>,
) -> anyhow::Result<ExitCode> {
    let ToCheck { history, mut recovered, interpreter } = checking;
    if sent.is_none() && !args.explicit_version_sets {
        recovered.certificate.compact_version_sets(&history);
    }
    match sent {
        None => {
            write_history(&args.out.join("history.jsonl"), &history)?;
            write_certificate(&args.out.join("certificate.json"), &history, &recovered)?;
        }
        Some(Sent { document, submitted, claimed_initial }) => {
            let mut own = history.clone();
            own.txns.truncate(submitted);
            own.initial = claimed_initial.to_vec();
            write_history(&args.out.join("history.jsonl"), &own)?;
            write_text(&args.out.join("certificate.json"), &String::from_utf8_lossy(document))?;
        }
    }

    let started = Instant::now();
    let report = check(&history, &recovered.certificate, level, args.checker, &interpreter)
        .context("checking the recovered certificate")?;
    stats.check_secs = Some(started.elapsed().as_secs_f64());
    write_reports(&args.out, &report, &history)?;
    let html = args.html.clone().unwrap_or_else(|| args.out.join("report.html"));
    let opts = HtmlOptions { context: html_context::<D>(args, &stats, level), ..HtmlOptions::default() };
    crate::check::write_html(&html, &report, &history, &recovered.certificate, &opts)?;
    write_run_json::<D>(&args.out, args, &stats, Some(&recovered))?;

    if args.json {
        let mut out = render_json(&report, &history);
        out["run"] = run_json::<D>(args, &stats, Some(&recovered));
        say!("{}\n", serde_json::to_string_pretty(&out)?);
    } else {
        let text = crate::check::text_report(&report, &history);
        say!("{}", if stats.interrupted { interrupted_verdict(&text) } else { text });
        match &args.certificate_api {
            Some(_) => say!("{}\n", api_summary(&stats, &recovered, &args.out)),
            None => say!("{}\n", summary(&stats, &recovered, &args.out)),
        }
    }
    if let Some(allowed) = crate::allowed::allowed_note(level) {
        note!("isocert: note: {allowed}");
    }
    // A valid verdict that rests on reads tied to no version decides nothing about them.
    let undecided = report.is_valid() && report.stats.ambiguous_reads > 0;
    if undecided && !args.allow_uncertified {
        eprintln!(
            "isocert: uncertified: {} item read(s) could not be tied to the version they saw, so a cycle \
             through them would go unseen: exit 2 (--allow-uncertified accepts that)",
            report.stats.ambiguous_reads
        );
    }
    if let Some(emit) = emit {
        emit.publish(&history, D::KIND.display_name(), &args.out)?;
    }
    Ok(if stats.interrupted {
        exit::interrupted()
    } else if !report.is_valid() {
        exit::anomalies()
    } else if undecided && !args.allow_uncertified {
        exit::error()
    } else {
        exit::valid()
    })
}

/// A text report whose verdict (its first word) is marked as resting on the partial
/// history an interrupted run saved: `VALID (interrupted: partial history): ...`.
fn interrupted_verdict(report: &str) -> String {
    match report.split_once(':') {
        Some((verdict, rest)) if !verdict.contains('\n') => {
            format!("{verdict} (interrupted: partial history):{rest}")
        }
        _ => format!("(interrupted: partial history)\n{report}"),
    }
}

/// The database a run or hunt works on: `--db URL` as given, or a throwaway server of
/// `version` (with `settings`) that the caller shuts down.
pub(crate) fn open_database<D: Database>(
    rt: &tokio::runtime::Runtime,
    url: Option<&str>,
    version: Option<String>,
    settings: &[(String, String)],
) -> anyhow::Result<(D, Option<D::Server>)> {
    let name = D::KIND.display_name();
    match url {
        Some(url) => Ok((D::from_url(url)?, None)),
        None => {
            note!("isocert: starting a throwaway {name} (use --db to test your own)");
            let (db, server) = rt
                .block_on(D::start_server_version(version, settings))
                .with_context(|| format!("starting the embedded {name}"))?;
            Ok((db, Some(server)))
        }
    }
}

/// The level a history run at `isolation` is checked against: `--check`, else the one the
/// database, as reached, says (`Database::checked_as`).
pub(crate) fn level_to_check<D: Database>(
    db: &D,
    isolation: IsolationLevel,
    check: Option<IsolationLevel>,
) -> IsolationLevel {
    check.unwrap_or_else(|| db.checked_as(isolation))
}

/// Installs the SIGINT/SIGTERM/SIGHUP handlers of a run and returns the flag they set. The
/// first signal asks the workload to stop after the transactions in flight; the run then
/// drains the change stream, saves and checks what completed, drops what it created, and
/// exits 130. SIGHUP (the terminal closed) is one of them: its default action ended the
/// process at once, leaving the workload's table, slot and publication and saving nothing.
/// A second signal exits at once (130): the throwaway server's watchdog still removes it,
/// and replication objects left on a `--db` server are dropped by the next run or
/// `isocert cleanup`. The messages ignore a failed write: after a hangup the terminal
/// answers every write with an error.
pub(crate) fn watch_signals() -> anyhow::Result<Arc<AtomicBool>> {
    use std::io::Write;
    use tokio::signal::unix::{signal, SignalKind};
    let interrupt = Arc::new(AtomicBool::new(false));
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let flag = Arc::clone(&interrupt);
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            if flag.swap(true, Ordering::SeqCst) {
                let _ = writeln!(std::io::stderr(), "isocert: {name} again: exiting now");
                #[allow(clippy::exit)]
                std::process::exit(130);
            }
            let _ = writeln!(
                std::io::stderr(),
                "isocert: interrupted ({name}): finishing the transactions in flight, then saving what \
                 completed and dropping what the run created (interrupt again to quit at once)"
            );
        }
    });
    Ok(interrupt)
}

/// The captured change stream's file in `--out`.
pub(crate) const RAW_LOG: &str = "raw-log.jsonl";

type Outcome = (History, Option<RawLog>, RunStats, Instant);

/// Sets the table up, starts the change capture, runs the workload with a progress bar,
/// and waits for the capture to have recorded every commit.
async fn run_workload<D: Database>(
    db: &D,
    cfg: &WorkloadConfig,
    capture: Option<CaptureOptions>,
    interrupt: &Arc<AtomicBool>,
    limit: Option<(Duration, &str)>,
    emit: Option<&crate::online::RunEmit>,
) -> anyhow::Result<Outcome> {
    // A user's server (`--db`) must answer the setup within the answer time limit; a
    // throwaway server is isocert's own and has just answered its start-up.
    async fn step<T, E: std::error::Error + Send + Sync + 'static>(
        limit: Option<(Duration, &str)>,
        what: &str,
        future: impl std::future::Future<Output = Result<T, E>>,
    ) -> anyhow::Result<T> {
        match limit {
            Some((limit, url)) => crate::answer::within(limit, what, url, future).await,
            None => Ok(future.await.map_err(|e| anyhow::Error::new(e).context(what.to_string()))?),
        }
    }
    for note in step(limit, "setting up the workload table", isocert_workload::setup_on(db, cfg)).await? {
        eprintln!("isocert: note: {note}");
    }
    let mut consumer = match &capture {
        Some(options) => {
            let mut consumer =
                step(limit, "starting the change capture", db.start_capture(&cfg.table_spec(), options))
                    .await?;
            consumer.wait_started(Duration::from_secs(60)).await?;
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
    // With --emit on a database with an incremental tick rule, the transactions are
    // published while the workload runs (docs/ONLINE.md).
    let live = match (emit, &consumer) {
        (Some(emit), Some(_)) => emit.live_driver::<D>(cfg.isolation),
        _ => None,
    };
    let result = match (live, consumer.as_mut()) {
        (Some((observe, mut driver)), Some(c)) => {
            let stopped = AtomicBool::new(false);
            let workload = async {
                let r = isocert_workload::run_observed(
                    db,
                    cfg,
                    Arc::clone(interrupt),
                    |done| bar.set_position(done),
                    Some(observe),
                )
                .await;
                stopped.store(true, Ordering::SeqCst);
                r
            };
            let (result, ()) = tokio::join!(workload, driver.run::<D>(&mut *c, &stopped));
            if result.is_ok() {
                driver.finish::<D>(c).await;
            }
            result
        }
        _ => {
            isocert_workload::run_until(db, cfg, Arc::clone(interrupt), |done| {
                bar.set_position(done);
                if let Some(c) = &consumer {
                    if done % 64 == 0 {
                        bar.set_message(format!("({} commits recovered)", c.recorded()));
                    }
                }
            })
            .await
        }
    };
    let last_commit = Instant::now();
    let workload_secs = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let history = match result {
        Ok(h) => h,
        Err(e) => {
            if let Some(c) = consumer {
                let _ = c.finish(None).await;
            }
            return Err(e).context("running the workload");
        }
    };
    let catching_up = Instant::now();
    let mut incomplete = None;
    let log = match consumer {
        Some(c) => {
            let finished = tokio::time::timeout(Duration::from_secs(600), c.finish(Some(&history)))
                .await
                .context("the change capture did not catch up within 10 minutes")?;
            match finished {
                Ok(log) => Some(log),
                // The capture has dropped what it made; the history is still worth saving.
                Err(e) if e.is_unrecordable() => {
                    incomplete = Some(format!("{:#}", anyhow::Error::new(e)));
                    None
                }
                Err(e) => return Err(e.into()),
            }
        }
        None => None,
    };
    let committed = history.txns.iter().filter(|t| t.is_committed()).count();
    let catch_up_secs = log.as_ref().map(|_| catching_up.elapsed().as_secs_f64());
    let stats = RunStats {
        workload_secs,
        committed,
        attempts: history.txns.len(),
        catch_up_secs,
        incomplete,
        ..RunStats::default()
    };
    Ok((history, log, stats, last_commit))
}

pub(crate) fn write_history(path: &Path, h: &History) -> anyhow::Result<()> {
    write_file(path, |out| Ok(v1::write_history(h, out)?))
}

/// The captured log as JSON lines (one committed transaction each), for `isocert recover`.
pub(crate) fn write_raw_log(path: &Path, log: &RawLog) -> anyhow::Result<()> {
    write_file(path, |mut out| Ok(log.write_jsonl(&mut out)?))
}

pub(crate) fn write_certificate(path: &Path, h: &History, r: &Recovered) -> anyhow::Result<()> {
    write_file(path, |out| Ok(v1::write_certificate(h, &r.certificate, out)?))
}

pub(crate) fn write_reports(dir: &Path, report: &Report, h: &History) -> anyhow::Result<()> {
    write_text(&dir.join("report.json"), &(serde_json::to_string_pretty(&render_json(report, h))? + "\n"))?;
    write_text(&dir.join("report.txt"), &render_text(report, h))
}

fn run_json<D: Database>(args: &RunArgs, stats: &RunStats, r: Option<&Recovered>) -> serde_json::Value {
    let mut cfg = WorkloadConfig::new(args.workload, args.isolation);
    args.physical.apply(&mut cfg);
    let physical = crate::physical::physical_json(&cfg);
    let mut out = json!({
        "database": D::KIND.as_str(),
        "server_version": stats.server_version,
        "embedded": args.db.is_none(),
        "server_settings": args.server_setting.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "workload": args.workload.as_str(),
        "isolation": args.isolation.as_str(),
        "txns": args.txns,
        "sessions": args.sessions,
        "keys": args.keys,
        "seed": args.seed,
        "deletes": !args.no_deletes,
        "max_txn_len": args.max_txn_len,
        "client_abort_rate": args.client_abort_rate,
        "physical": physical,
        "recovery": r.is_some(),
        "certificate_api": args.certificate_api.is_some(),
        "replication": if r.is_some() { args.replication.as_deref() } else { None },
        "committed": stats.committed,
        "attempts": stats.attempts,
        "workload_secs": stats.workload_secs,
        "committed_per_sec": stats.committed as f64 / stats.workload_secs.max(1e-9),
        "recovery_lag_secs": stats.recovery_lag_secs,
        "replication_catch_up_secs": stats.catch_up_secs,
        "recover_secs": stats.recover_secs,
        "check_secs": stats.check_secs,
        "interrupted": stats.interrupted,
    });
    if let Some(why) = &stats.incomplete {
        out["incomplete"] = json!(why);
    }
    if let Some(r) = r {
        out["recovered"] = json!({
            "logged_txns": r.stats.logged_txns,
            "logged_changes": r.stats.logged_changes,
            "resolved_committed": r.stats.resolved_committed,
            "resolved_aborted": r.stats.resolved_aborted,
            "version_sets": r.stats.version_sets,
            "item_read_versions": r.stats.item_read_versions,
            "rechecked_rows": r.stats.rechecked_rows,
            "ambiguous_reads": r.stats.ambiguous_reads,
            "outside_window": r.stats.outside_window,
            "serialization_cycle": r.stats.serialization_cycle,
            "unknown_read_times": r.stats.unknown_read_times,
            "sources": {
                "commits_from_log": r.stats.sources.commits_from_log,
                "commits_returned": r.stats.sources.commits_returned,
                "reads_at_returned_time": r.stats.sources.reads_at_returned_time,
                "reads_within_bounds": r.stats.sources.reads_within_bounds,
            },
            "warnings": r.warnings,
        });
    }
    out
}

fn write_run_json<D: Database>(
    dir: &Path,
    args: &RunArgs,
    stats: &RunStats,
    r: Option<&Recovered>,
) -> anyhow::Result<()> {
    write_text(&dir.join("run.json"), &(serde_json::to_string_pretty(&run_json::<D>(args, stats, r))? + "\n"))
}

/// The summary of a run whose certificate came from a certificate API: what it holds, and
/// how long after the last commit it arrived.
fn api_summary(stats: &RunStats, r: &Recovered, out: &Path) -> String {
    let cert = &r.certificate;
    format!(
        "run: {} committed of {} attempts in {:.2}s ({:.0} committed/s); certificate from the certificate API \
         ({} objects' version orders, {} version sets) {:.3}s after the last commit; files in {}",
        stats.committed,
        stats.attempts,
        stats.workload_secs,
        stats.committed as f64 / stats.workload_secs.max(1e-9),
        cert.version_order.as_ref().map_or(0, |v| v.len()),
        cert.version_sets.as_ref().map_or(0, |v| v.len()),
        stats.recovery_lag_secs.unwrap_or_default(),
        out.display()
    )
}

fn summary(stats: &RunStats, r: &Recovered, out: &Path) -> String {
    let on = stats.server_version.as_deref().map(|v| format!(" on {v}")).unwrap_or_default();
    format!(
        "run{on}: {} committed of {} attempts in {:.2}s ({:.0} committed/s); recovered {} commits, {} row versions, \
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
fn html_context<D: Database>(
    args: &RunArgs,
    stats: &RunStats,
    level_checked: IsolationLevel,
) -> Vec<(String, String)> {
    let name = D::KIND.display_name();
    let database =
        if args.db.is_some() { format!("{name} (--db)") } else { format!("{name} (throwaway, embedded)") };
    let mut out = vec![
        ("database".to_string(), database),
        ("server version".to_string(), stats.server_version.clone().unwrap_or_else(|| "not reported".into())),
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
    if let Some(allowed) = crate::allowed::allowed_note(level_checked) {
        out.push(("allowed at this level".to_string(), allowed));
    }
    if let Some(lag) = stats.recovery_lag_secs {
        out.push((
            "recovery lag".to_string(),
            format!("certificate complete {lag:.3}s after the last commit"),
        ));
    }
    out
}

/// Every file a run writes into `--out`: `--force` removes them all before a new run, so
/// that no earlier run's certificate, raw log or report is left beside the new history.
const RESULT_FILES: [&str; 7] =
    ["history.jsonl", "certificate.json", RAW_LOG, "report.json", "report.txt", "report.html", "run.json"];

/// Rejects an output path that exists and is not a directory, or is a non-empty directory
/// without `--force`; with `--force`, removes an earlier run's result files (only those: a
/// user's other files in the directory are kept).
pub(crate) fn check_out_dir(path: &Path, force: bool) -> anyhow::Result<()> {
    if path.exists() && !path.is_dir() {
        bail!("--out {} exists and is not a directory", path.display());
    }
    let non_empty = fs::read_dir(path).map(|mut entries| entries.next().is_some()).unwrap_or(false);
    if non_empty && !force {
        bail!(
            "--out {} is not empty (an earlier run's results?); choose another directory, or pass --force \
             to replace its files",
            path.display()
        );
    }
    if non_empty {
        for name in RESULT_FILES {
            let file = path.join(name);
            match fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("--force: removing {}", file.display()))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// `--html` must not name one of the run's own results, nor the token file.
fn check_html_path(args: &RunArgs) -> anyhow::Result<()> {
    let Some(html) = &args.html else { return Ok(()) };
    let results: Vec<PathBuf> =
        RESULT_FILES.iter().filter(|n| **n != "report.html").map(|n| args.out.join(n)).collect();
    let mut inputs: Vec<&Path> = results.iter().map(PathBuf::as_path).collect();
    inputs.extend(args.token_file.as_deref());
    crate::output::ensure_outputs_spare_inputs(&[("--html", html)], &inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interrupted run's verdict says it rests on a partial history, beside the verdict.
    #[test]
    fn an_interrupted_verdict_says_its_history_is_partial() {
        let report = "VALID: 12 transactions checked for serializable by emme; 0 anomalies found\n";
        assert_eq!(
            interrupted_verdict(report),
            "VALID (interrupted: partial history): 12 transactions checked for serializable by emme; 0 anomalies found\n"
        );
        assert!(interrupted_verdict("INVALID: 1 anomaly\n  g1c: ...\n")
            .starts_with("INVALID (interrupted: partial history): 1"));
    }
}
