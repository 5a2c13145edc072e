//! `isocert check`: certify a history against an isolation level with a version certificate.
//!
//! [`timestamp`] is the Chronos and Aion arm, which [`run`] hands a history to when the
//! timestamp checkers apply; the options, the reader choice and the output are this module's.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use isocert_checker::{
    check_with, partial_version_order, render_dot, render_html, render_json, render_text,
    render_text_verbose, CheckError, CheckerKind, GraphLayout, HtmlOptions, IsolationLevel, Report,
    SessionOrder,
};
use isocert_history::formats::{read_cobra_dir_with_version_order, Format};
use isocert_history::{v1, Certificate, History};
use isocert_oracle::Interpreter;

use crate::exit;

mod black_box;
pub(crate) mod timestamp;

/// Check a recorded history against an isolation level.
///
/// Exit code 0: the history satisfies the level under the certificate; 1: anomalies were
/// found (each is printed with its explained counterexample); 2: the input could not be
/// used (bad file, bad flag, or the certificate lacks what the level needs).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert check out/history.jsonl --certificate out/certificate.json\n  isocert check history.jsonl --certificate certificate.json --isolation si --html report.html\n  isocert check elle-history.edn --format elle --isolation serializable"
)]
pub(crate) struct CheckArgs {
    /// The history (JSON Lines, v1 format); not with --online.
    #[arg(required_unless_present = "online", default_value = "-", hide_default_value = true)]
    pub(crate) history: PathBuf,
    /// The version certificate (version order, version sets, serialization order): a v1
    /// certificate, or with `--format cobra` King Cobra's version order file (`*.vo`). Its
    /// `transactions` (outcomes, start/commit timestamps) and `serial_order`, what
    /// `isocert serve` answers, are set on the history first; Chronos and Aion then read
    /// the history whole. A checker that decides without the certificate's orders
    /// (chronos, aion, mtc, weak; cobra and polysi with a full version order) has it
    /// checked against the history as emme checks it: each contradiction is an anomaly.
    #[arg(short, long, value_name = "CERT")]
    pub(crate) certificate: Option<PathBuf>,
    /// The isolation level: strict-serializable (sser: serializable in an order that keeps
    /// the clients' real times, decided by mtc or cobra), serializable (ser), snapshot-isolation
    /// (si), repeatable-read (rr), causal (cc), read-atomic (ra), read-committed (rc) or
    /// read-uncommitted (ru). Default: the level the history's header records (`isocert
    /// run`, `hunt` and `scenario` record the level they checked at); a history that records
    /// none needs it.
    #[arg(short = 'i', long = "isolation", value_name = "LEVEL")]
    pub(crate) level: Option<IsolationLevel>,
    /// The level checked: `--isolation`, else the history header's.
    #[arg(skip = IsolationLevel::Serializable)]
    pub(crate) isolation: IsolationLevel,
    /// Check Adya's definition of the level, without session order (each transaction as its
    /// own session). By default every level includes session order: a session's transactions
    /// serialize in its order and, at snapshot isolation, each sees its predecessors
    /// (docs/CHECKING.md, "One definition per level"). Every checker accepts it.
    #[arg(long)]
    pub(crate) no_session_order: bool,
    /// Check Adya's bare level, without the statement-level promises the history's header
    /// declares (`promises`, written by `isocert run` from what the database documents:
    /// PostgreSQL's updates re-check their WHERE on the newest version and compute their SET
    /// from it). By default Emme checks them too and the report names the definition, e.g.
    /// `read-committed (as PostgreSQL documents it)`; docs/CHECKING.md, "Statement-level
    /// promises". Example: `isocert check history.jsonl -c certificate.json -i rc
    /// --no-statement-promises`.
    #[arg(long)]
    pub(crate) no_statement_promises: bool,
    /// Which checker: emme (dependency graph, every level), enne (replay of the
    /// serialization order, serializable), chronos (offline, from the history's
    /// start_ts/commit_ts; snapshot-isolation or serializable; see docs/CHRONOS.md), aion
    /// (online: HISTORY may be `-` for standard input, one transaction per line), mtc (no
    /// certificate: mini-transaction histories, whose reads imply the version order;
    /// strict-serializable, serializable or snapshot-isolation), cobra / polysi (no certificate: item reads and
    /// writes of unique values or list appends, serializable or strict-serializable / snapshot-isolation, the
    /// version order searched by a SAT solver), weak (no certificate: item reads and writes of unique values,
    /// read-committed, read-atomic or causal, in near-linear time), or auto (weak at
    /// read-atomic and causal, at strict-serializable mtc for mini-transactions, else cobra; emme when the certificate has a
    /// version order, else enne;
    /// without a certificate mtc for mini-transactions, else cobra, polysi or, at
    /// read-committed, weak).
    #[arg(long, default_value = "auto", value_name = "CHECKER")]
    pub(crate) checker: CheckerKind,
    /// Black-box checkers: write the version order found for the history to FILE as a v1
    /// certificate, so Emme can re-check it (`--checker emme --certificate FILE`): mtc's is
    /// implied by the reads, cobra's and polysi's is the solver's, weak's a commit order its
    /// level's axiom accepts (valid histories only).
    #[arg(long, value_name = "FILE")]
    pub(crate) certificate_out: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the counterexamples as a Graphviz DOT graph to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) dot: Option<PathBuf>,
    /// Also write a self-contained HTML report to FILE: a summary, each anomaly's cycle
    /// drawn as a graph, a timeline of its transactions, the certificate facts behind every
    /// edge (docs/REPORTS.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// How the HTML report lays out graphs: auto (Graphviz `dot` when installed, else
    /// built-in), graphviz or builtin.
    #[arg(long, default_value = "auto", value_name = "LAYOUT")]
    pub(crate) html_layout: GraphLayout,
    /// How many anomalies the HTML report draws in full; the list of all follows them.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub(crate) html_drawn: usize,
    /// The format of HISTORY: v1, chronos, elle, elle-json, dbcop, dbcop-hist,
    /// dbcop-bincode, plume (PolySI/IsoVista/AWDIT text), awdit-test (AWDIT's test suite),
    /// cobra (a log directory) or viper
    /// (a log directory); see docs/FORMATS.md. CERT is a v1 certificate (or a King Cobra
    /// `.vo` beside cobra logs); without one, an Elle list-append history is checked under
    /// the version order its reads show.
    #[arg(long, default_value = "v1", value_name = "FORMAT")]
    pub(crate) format: Format,
    /// Chronos/Aion: the value every key holds before the first transaction (the Chronos
    /// tools' --initial-value, a JSON scalar such as 0 or "x"); without it keys start
    /// absent, except those the v1 header's `initial` lists.
    #[arg(long, value_name = "V")]
    pub(crate) initial_value: Option<String>,
    /// Aion: an Ext verdict becomes final once this many further transactions have arrived.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub(crate) aion_delay: usize,
    /// Aion: make Ext verdicts final this many milliseconds after arrival instead (live streams).
    #[arg(long, value_name = "MS")]
    pub(crate) aion_delay_ms: Option<u64>,
    /// Chronos on a v1 file: check while reading (`always`), read the whole history first
    /// (`never`), or stream files of 64 MB or more (`auto`); docs/CHRONOS.md.
    #[arg(long, value_enum, default_value_t = ChronosStreaming::Auto, value_name = "WHEN")]
    pub(crate) chronos_stream: ChronosStreaming,
    /// Stop with exit 2 when the command's resident memory passes this many MiB (0: no
    /// limit) [default: 90% of the memory available when it starts]: the black-box solvers
    /// (cobra, polysi) grow with the square of the writes per key, and a shared machine
    /// should meet a clear error, not its OOM killer.
    #[arg(long, value_name = "MIB")]
    pub(crate) memory_limit_mib: Option<u64>,
    /// Streaming Chronos: bytes per chunk each reader thread parses (tests use small ones).
    #[arg(long, default_value_t = 8 << 20, value_name = "BYTES", hide = true)]
    pub(crate) chronos_chunk: u64,
    /// Black-box checkers: read the history into the general model, not the compact one
    /// (tests compare the two paths).
    #[arg(long, hide = true)]
    pub(crate) general_model: bool,
    /// Online checking: join a consumer group on this topic of transactions and check the
    /// partitions Kafka assigns (docs/ONLINE.md); needs a binary built with `--features
    /// kafka`. Last, under its own heading: most checks are of a file.
    #[command(flatten, next_help_heading = "Online checking (Kafka)")]
    pub(crate) online: crate::online::OnlineCheckArgs,
}

/// The checker to run: as asked, except that `auto` with a partial King Cobra version order
/// (`.vo`) at serializable or snapshot isolation searches the orders it leaves out (cobra,
/// polysi) with the listed ones fixed, instead of Emme reporting the missing versions.
fn king_cobra_search(args: &CheckArgs, h: &History, cert: &Certificate) -> CheckerKind {
    let from_vo = args.certificate.as_deref().is_some_and(is_king_cobra_order);
    if args.checker != CheckerKind::Auto || !from_vo || !partial_version_order(h, cert) {
        return args.checker;
    }
    match args.isolation {
        IsolationLevel::Serializable => CheckerKind::Cobra,
        IsolationLevel::SnapshotIsolation => CheckerKind::Polysi,
        _ => args.checker,
    }
}

/// Whether `path` names a King Cobra version order file (`*.vo`) rather than a v1 certificate.
pub(crate) fn is_king_cobra_order(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "vo")
}

/// Reads a history in `format` and an optional certificate (v1, or King Cobra's `.vo` beside
/// Cobra logs), naming the file in errors. Without a certificate file, the certificate facts
/// the format carries are used. A v1 history of item operations is read by the fast reader;
/// `facts` says whether its adapter facts (`meta`) may then be left out.
pub(crate) fn load(
    history: &Path,
    certificate: Option<&PathBuf>,
    format: Format,
    facts: v1::AdapterFacts,
) -> anyhow::Result<(History, Certificate)> {
    if let Some(vo) = certificate.filter(|p| is_king_cobra_order(p)) {
        anyhow::ensure!(
            format == Format::Cobra,
            "{} is a King Cobra version order (.vo); it goes with --format cobra and a log directory",
            vo.display()
        );
        let imported = read_cobra_dir_with_version_order(history, vo)
            .context("reading a cobra history with its King Cobra version order")?;
        for note in &imported.notes {
            tracing::warn!("{}: {note}", history.display());
        }
        return Ok((imported.history, imported.certificate.unwrap_or_default()));
    }
    // The bar is cleared when the reader is dropped, once the file has been read.
    let watch =
        |file: File| reading_bar(&file, history).with_finish(ProgressFinish::AndClear).wrap_read(file);
    let imported = isocert_history::open(history, format, facts, watch)?;
    for note in &imported.notes {
        tracing::warn!("{}: {note}", history.display());
    }
    let (mut h, carried) = (imported.history, imported.certificate);
    let cert = match certificate {
        Some(path) => read_v1_certificate(path, &mut h)?,
        None => carried.unwrap_or_default(),
    };
    Ok((h, cert))
}

/// A byte progress bar for reading `file` (the history at `path`) on standard error: drawn
/// only on a terminal (indicatif hides it when standard error is piped) and for files of a
/// megabyte or more.
pub(crate) fn reading_bar(file: &File, path: &Path) -> ProgressBar {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < 1 << 20 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(format!("reading {}", path.display()));
    bar
}

/// Reads a v1 certificate for `h`, naming the file in errors.
pub(crate) fn read_v1_certificate(path: &Path, h: &mut History) -> anyhow::Result<Certificate> {
    let mut file = File::open(path).with_context(|| format!("cannot open certificate {}", path.display()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        // A pipe or a device (`/dev/zero`) has no size: read through the guard that stops at
        // the first NUL byte instead of reading it whole.
        return v1::read_certificate(file, h).with_context(|| format!("certificate {}", path.display()));
    }
    // Read at the file's size into memory, where it is parsed (a growing buffer copied it).
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).with_context(|| format!("certificate {}", path.display()))?;
    v1::read_certificate_bytes(&bytes, h).with_context(|| format!("certificate {}", path.display()))
}

/// Runs `isocert check`.
pub(crate) fn run(mut args: CheckArgs) -> anyhow::Result<ExitCode> {
    args.isolation = level_to_check(&args)?;
    if args.online.online.is_some() {
        return crate::online::check(&args);
    }
    let outputs: Vec<(&str, &Path)> =
        [("--certificate-out", &args.certificate_out), ("--dot", &args.dot), ("--html", &args.html)]
            .into_iter()
            .filter_map(|(flag, path)| path.as_deref().map(|p| (flag, p)))
            .collect();
    let inputs: Vec<&Path> =
        std::iter::once(args.history.as_path()).chain(args.certificate.as_deref()).collect();
    crate::output::ensure_outputs_spare_inputs(&outputs, &inputs)?;
    let _memory =
        crate::memory::guard(format!("isocert check (checker {})", args.checker), args.memory_limit_mib);
    if timestamp::applies(&args) {
        return timestamp::run(&args);
    }
    if black_box::applies(&args) {
        if let Some(code) = black_box::run(&args)? {
            return Ok(code);
        }
    }
    // Without session order (each transaction in its own session) or with a certificate
    // (its facts set on the history), Chronos and Aion check the history read whole: not
    // while streaming, and not with their own options.
    if matches!(args.checker, CheckerKind::Chronos | CheckerKind::Aion) {
        let whole = if args.no_session_order {
            Some("--no-session-order")
        } else {
            args.certificate.as_ref().map(|_| "--certificate")
        };
        if let Some(flag) = whole {
            anyhow::ensure!(
                args.initial_value.is_none()
                    && args.history.as_os_str() != "-"
                    && args.chronos_stream != ChronosStreaming::Always,
                "{} {flag} reads the history file whole (no standard input, no --initial-value, \
                 no --chronos-stream always)",
                args.checker
            );
        }
    }
    // The checkers ignore adapter facts: item-only histories always take the fast reader.
    let (mut h, cert) = load(&args.history, args.certificate.as_ref(), args.format, v1::AdapterFacts::Skip)?;
    if args.no_statement_promises {
        h.promises = None;
    }
    anyhow::ensure!(!h.txns.is_empty(), "{}", timestamp::empty_history(&args.history));
    // Predicates only aborted transactions use are compiled if a checker evaluates one
    // (docs/CHECKING.md, "Predicates of aborted transactions").
    let oracle =
        Interpreter::for_checking(&h).with_context(|| format!("history {}", args.history.display()))?;
    let checker = king_cobra_search(&args, &h, &cert);
    let session_order = if args.no_session_order { SessionOrder::Excluded } else { SessionOrder::Included };
    let uncertified = args.certificate.is_none() && cert.is_empty();
    let report = run_check(&args, h.txns.len(), uncertified, || {
        check_with(&h, &cert, args.isolation, session_order, checker, &oracle)
    })?;
    let code = write_report(&args, &report, &h, &cert)?;
    // The process exits right after this returns: freeing the history (millions of small
    // allocations, 7% of a 100,000-transaction predicate check) gains nothing. Nothing
    // here has a destructor with an effect beyond freeing memory.
    std::mem::forget((h, cert, oracle, report));
    Ok(code)
}

/// The level to check: `--isolation`, else the one the header of a v1 history file
/// records, which is then said on standard error (standard output is the report's).
fn level_to_check(args: &CheckArgs) -> anyhow::Result<IsolationLevel> {
    if let Some(level) = args.level {
        return Ok(level);
    }
    let recorded =
        if args.online.online.is_none() && args.format == Format::V1 && args.history.as_os_str() != "-" {
            header_level(&args.history)?
        } else {
            None
        };
    let Some(level) = recorded else {
        anyhow::bail!(
            "give the level to check with --isolation LEVEL: {} records none in its header (histories \
             `isocert run`, `hunt` and `scenario` write record the level they checked at)",
            if args.online.online.is_some() {
                "an online check".to_string()
            } else {
                args.history.display().to_string()
            }
        );
    };
    crate::output::note!(
        "isocert: checking at {level}, the level the header of {} records (--isolation LEVEL checks another)",
        args.history.display()
    );
    Ok(level)
}

/// The level the header (first line) of the v1 history at `path` records, if it has a
/// header with one; a file that cannot be read or parsed is left to the reader's errors,
/// which name the line and field.
fn header_level(path: &Path) -> anyhow::Result<Option<IsolationLevel>> {
    use std::io::BufRead;
    let Ok(file) = File::open(path) else { return Ok(None) };
    let mut first = String::new();
    if std::io::BufReader::new(file).read_line(&mut first).is_err() {
        return Ok(None);
    }
    let Ok(serde_json::Value::Object(header)) = serde_json::from_str(&first) else { return Ok(None) };
    if !header.contains_key("format") {
        return Ok(None);
    }
    match header.get("isolation") {
        Some(serde_json::Value::String(name)) => Ok(Some(
            name.parse()
                .map_err(|e| anyhow::anyhow!("{}: line 1: field `isolation`: {e}", path.display()))?,
        )),
        _ => Ok(None),
    }
}

/// Runs `check` on `txns` transactions under a spinner and logs how long it took; when
/// `uncertified` (no certificate was given or carried), a missing certificate says which
/// to give.
fn run_check(
    args: &CheckArgs,
    txns: usize,
    uncertified: bool,
    check: impl FnOnce() -> Result<Report, CheckError>,
) -> anyhow::Result<Report> {
    let spinner = checking_spinner(txns, args.isolation);
    let started = std::time::Instant::now();
    let result = check();
    spinner.finish_and_clear();
    let report = match result {
        Err(e) if uncertified => return Err(missing_certificate_hint(e, args)),
        other => other?,
    };
    tracing::info!(
        checker = %report.checker,
        txns = report.stats.txns,
        edges = report.stats.edges,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "check finished"
    );
    Ok(report)
}

/// The spinner shown on standard error while `txns` transactions are checked for `level`.
fn checking_spinner(txns: usize, level: IsolationLevel) -> ProgressBar {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.set_message(format!("checking {txns} transactions for {level}"));
    // The spinner's ticking thread only where it is drawn: standard error piped or in a
    // file hides it anyway, and a thread costs its stack and an allocator arena.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        spinner.enable_steady_tick(Duration::from_millis(120));
    }
    spinner
}

/// A check's error for a history checked without a certificate: a missing certificate
/// says which one to give and where to read about it; other errors pass unchanged.
fn missing_certificate_hint(e: CheckError, args: &CheckArgs) -> anyhow::Error {
    if !matches!(e, CheckError::MissingCertificateData { .. }) {
        return e.into();
    }
    let carried = match args.format {
        Format::V1 => "a v1 history".to_string(),
        other => format!("this {other} history"),
    };
    anyhow::Error::new(e).context(format!(
        "{carried} carries no certificate: give the one the database recovered with --certificate \
         (docs/FORMATS.md, \"Checking a foreign history\")"
    ))
}

/// Writes the report's outputs (`--certificate-out`, `--dot`, `--html`, then the report
/// on standard output as text or `--json`) rendered against `h`; returns the exit code.
fn write_report(
    args: &CheckArgs,
    report: &Report,
    h: &History,
    cert: &Certificate,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.certificate_out {
        anyhow::ensure!(
            matches!(report.checker, CheckerKind::Mtc | CheckerKind::Cobra | CheckerKind::Polysi | CheckerKind::Weak),
            "--certificate-out writes the version order a black-box checker found; {} used the certificate given",
            report.checker
        );
        match report.inferred_version_order.clone() {
            Some(order) => {
                let inferred = Certificate { version_order: Some(order), ..Certificate::default() };
                crate::output::write_file(path, |out| Ok(v1::write_certificate(h, &inferred, out)?))?;
            }
            None => {
                tracing::warn!("{}: not written: no version order avoids the anomalies below", path.display())
            }
        }
    }
    if let Some(path) = &args.dot {
        crate::output::write_text(path, &render_dot(report, h))?;
    }
    if let Some(path) = &args.html {
        let opts = HtmlOptions { layout: args.html_layout, drawn: args.html_drawn, context: Vec::new() };
        write_html(path, report, h, cert, &opts)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&render_json(report, h))?)?;
    } else {
        write!(out, "{}", text_report(report, h))?;
    }
    Ok(if report.is_valid() { exit::valid() } else { exit::anomalies() })
}

/// Writes the HTML report to `path`, naming the file in errors.
pub(crate) fn write_html(
    path: &Path,
    report: &Report,
    h: &History,
    cert: &Certificate,
    opts: &HtmlOptions,
) -> anyhow::Result<()> {
    crate::output::write_text(path, &render_html(report, h, cert, opts))
}

/// The text report, with the internal detail when `-v` was given.
pub(crate) fn text_report(report: &Report, h: &History) -> String {
    if crate::verbose() {
        render_text_verbose(report, h)
    } else {
        render_text(report, h)
    }
}

/// When Chronos checks a v1 file while reading it (`--chronos-stream`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ChronosStreaming {
    /// Files of 64 MB or more.
    Auto,
    /// Every v1 file.
    Always,
    /// Never: read the whole history, then check.
    Never,
}
