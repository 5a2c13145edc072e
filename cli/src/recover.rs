//! `isocert recover`: rebuild a version certificate after the fact, from a recorded history
//! and the change stream captured during its run (`raw-log.jsonl`, which `isocert run`
//! saves), with the recovery rule of the database's adapter.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use isocert_adapters::{dispatch, Database, DatabaseKind, DatabaseVisitor};
use isocert_certify::Interpreter;
use isocert_history::{v1, History};

use crate::exit;
use crate::run::{write_certificate, write_history, RAW_LOG};

/// Recover a version certificate from a history and the change stream captured with it.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert recover --database postgres --history out/history.jsonl --out certificate.json"
)]
pub(crate) struct RecoverArgs {
    /// The database the history ran on (postgres, mariadb, ...): picks the recovery rule
    /// and how the captured facts are read.
    #[arg(long, value_name = "DATABASE")]
    database: DatabaseKind,
    /// The history the test client recorded (v1 JSON lines, with the adapter's facts in `meta`).
    #[arg(long, value_name = "FILE")]
    history: PathBuf,
    /// The captured change stream: a raw-log.jsonl file, or a directory holding one
    /// [default: raw-log.jsonl beside --history; Dgraph needs none]; for CockroachDB also a
    /// captured changefeed, one row per line (docs/COCKROACHDB.md).
    #[arg(long, value_name = "FILE_OR_DIR")]
    source: Option<PathBuf>,
    /// Where to write the certificate (v1 JSON).
    #[arg(long, value_name = "CERT")]
    out: PathBuf,
    /// Also write the history with the recovered start/commit timestamps and settled
    /// unknown outcomes (what `isocert run` saves as history.jsonl).
    #[arg(long, value_name = "FILE")]
    history_out: Option<PathBuf>,
    /// List every predicate read's version set row by row, as the shared spec does, instead
    /// of as its snapshot where that is shorter (docs/FORMAT.md "Compact version sets").
    #[arg(long)]
    explicit_version_sets: bool,
    /// Exit 0 even when the log leaves some transaction's outcome unknown (its part of the
    /// history is then undecided); without it the certificate is written and the command
    /// exits 2.
    #[arg(long)]
    allow_uncertified: bool,
}

/// Runs `isocert recover`: exit 0 when the certificate is written, 2 on any error or when
/// transactions of unknown outcome remain (unless `--allow-uncertified`).
pub(crate) fn run(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    dispatch(args.database, RecoverOn(args))?
}

struct RecoverOn(RecoverArgs);

impl DatabaseVisitor for RecoverOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        recover_with::<D>(&self.0)
    }
}

/// The raw log file `--source` names (or the default beside the history).
fn source_file(args: &RecoverArgs) -> PathBuf {
    match &args.source {
        Some(p) if p.is_dir() => p.join(RAW_LOG),
        Some(p) => p.clone(),
        None => args.history.parent().unwrap_or(Path::new(".")).join(RAW_LOG),
    }
}

fn recover_with<D: Database>(args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    let file = File::open(&args.history)
        .with_context(|| format!("cannot open history {}", args.history.display()))?;
    let mut history: History = v1::read_history(BufReader::new(file))
        .with_context(|| format!("history {}", args.history.display()))?;
    anyhow::ensure!(
        history.dialect == D::DIALECT,
        "history {} was recorded in the {} dialect, not {}'s ({}): recover it with the database it ran on",
        args.history.display(),
        history.dialect.as_str(),
        D::KIND.display_name(),
        D::DIALECT.as_str()
    );
    let source = source_file(args);
    // A database recovered from the history alone (Dgraph) needs no log; one given is read.
    let log = if !D::NEEDS_LOG && args.source.is_none() {
        if std::fs::metadata(&source).is_ok_and(|m| m.len() > 0) {
            anyhow::bail!(
                "{} holds a captured change stream, which {} recovery never reads: this history was recorded \
                 by another database's run; recover it with that database (or pass --source to read it anyway)",
                source.display(),
                D::KIND.display_name()
            );
        }
        isocert_recovery::RawLog::new()
    } else {
        let file =
            File::open(&source).with_context(|| format!("cannot open captured log {}", source.display()))?;
        D::read_source(&mut BufReader::new(file)).with_context(|| format!("{}", source.display()))?
    };
    let mut interpreter = Interpreter::new(&history).context("compiling the history's predicates")?;
    let mut recovered =
        isocert_certify::recover::<D>(&mut history, &log, &mut interpreter).with_context(|| {
            format!("recovering the {} certificate from {}", D::KIND.display_name(), source.display())
        })?;
    if let Some(writers) = isocert_certify::unlogged_writers::<D>(&history, &recovered) {
        anyhow::bail!(
            "{} holds no commit of this history's {writers} committed writing transactions: it is not the \
             change stream of this run (or of this database); no certificate was written",
            source.display()
        );
    }
    for w in &recovered.warnings {
        eprintln!("isocert: warning: {w}");
    }
    if !args.explicit_version_sets {
        recovered.certificate.compact_version_sets(&history);
    }
    write_certificate(&args.out, &history, &recovered)?;
    if let Some(path) = &args.history_out {
        write_history(path, &history)?;
    }
    eprintln!(
        "isocert: recovered {} commits, {} row versions, {} version sets into {}",
        recovered.stats.logged_txns,
        recovered.stats.logged_changes,
        recovered.stats.version_sets,
        args.out.display()
    );
    let sources = &recovered.stats.sources;
    if sources != &isocert_recovery::FactSources::default() || recovered.stats.unknown_read_times > 0 {
        eprintln!(
            "isocert: facts: {} commit timestamp(s) from the database's log, {} returned to the client; {} read(s) at \
             a read time the database returned, {} within bounds (versions it returned, brackets the client \
             measured), {} left uncertified (read-time-unknown)",
            sources.commits_from_log,
            sources.commits_returned,
            sources.reads_at_returned_time,
            sources.reads_within_bounds,
            recovered.stats.unknown_read_times
        );
    }
    // Transactions whose outcome neither the client nor the log knows: checkers leave
    // them out, so what they read and wrote is undecided.
    let unknown = history.txns.iter().filter(|t| t.status == isocert_history::Status::Unknown).count();
    if unknown > 0 && !args.allow_uncertified {
        eprintln!(
            "isocert: uncertified: the captured log settles the outcome of all but {unknown} transaction(s) of \
             unknown status, whose reads and writes no check can decide: exit 2 (--allow-uncertified accepts that)"
        );
        return Ok(exit::error());
    }
    Ok(exit::valid())
}
