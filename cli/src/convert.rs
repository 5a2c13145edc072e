//! `isocert convert`: translate a history between formats (our v1 and the Chronos format,
//! and the other importers' formats).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use isocert_history::chronos::read_chronos;
use isocert_history::formats::{write_king_cobra_version_order, Format};
use isocert_history::{v1, Certificate, ExistingDirectory, FormatError, History};

use crate::exit;

/// Convert a history from one format to another.
///
/// Reading the Chronos format with `--initial-value V` gives every key the initial value V
/// (a header `initial` entry per key in v1). Writing the Chronos format leaves out aborted
/// and unknown-outcome transactions (the format holds committed ones) and says so. Every
/// format but v1 leaves out transactions without operations (noted); a format without a
/// place for start/commit timestamps or real times is refused when the history has them,
/// unless `--lossy` (then noted with counts).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  isocert convert --from elle --to v1 history.edn history.jsonl")]
pub(crate) struct ConvertArgs {
    /// The format of IN: v1, chronos, elle, elle-json, dbcop, dbcop-hist, dbcop-bincode,
    /// plume, awdit-test, cobra or viper.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) from: Format,
    /// The format of OUT (same names).
    #[arg(long, value_name = "FORMAT")]
    pub(crate) to: Format,
    /// With `--from chronos`: the value every key holds before the first transaction.
    #[arg(long, value_name = "V")]
    pub(crate) initial_value: Option<String>,
    /// The certificate of IN, carried over to `--certificate-out`: a v1 certificate, or with
    /// `--from cobra` King Cobra's version order file (`*.vo`).
    #[arg(long, value_name = "FILE")]
    pub(crate) certificate: Option<PathBuf>,
    /// Also write the certificate: the one `--certificate` gave, else the facts the input
    /// format carries (the version order an Elle list-append history's reads show). A FILE
    /// ending in `.vo` gets King Cobra's version order layout, anything else a v1 certificate.
    #[arg(long, value_name = "FILE")]
    pub(crate) certificate_out: Option<PathBuf>,
    /// Replace OUT when it is a directory that already holds files (Cobra's and Viper's
    /// logs are written into a fresh directory renamed into place; without --force a
    /// non-empty OUT is refused, so old logs never mix with new ones).
    #[arg(long)]
    pub(crate) force: bool,
    /// Convert even when OUT's format has no place for facts a verdict rests on: the
    /// transactions' start_ts/commit_ts (snapshot isolation, Chronos, Aion; unless
    /// `--certificate` carries a version order) or their invoked_at/completed_at (strict
    /// serializability). Without it such a convert exits 2 before writing anything; with
    /// it, a note counts what was dropped.
    #[arg(long)]
    pub(crate) lossy: bool,
    /// The input history.
    pub(crate) input: PathBuf,
    /// Where to write the converted history.
    pub(crate) output: PathBuf,
}

/// Runs `isocert convert`.
pub(crate) fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let input = &args.input;
    let outputs: Vec<(&str, &Path)> = std::iter::once(("OUTPUT", args.output.as_path()))
        .chain(args.certificate_out.as_deref().map(|p| ("--certificate-out", p)))
        .collect();
    let inputs: Vec<&Path> = std::iter::once(input.as_path()).chain(args.certificate.as_deref()).collect();
    crate::output::ensure_outputs_spare_inputs(&outputs, &inputs)?;
    let (h, carried) = match (args.from, &args.initial_value) {
        (Format::Chronos, Some(text)) => {
            let initial = crate::check::timestamp::parse_initial(text)
                .map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?;
            let file =
                std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
            let bar = crate::check::reading_bar(&file, input);
            let read = read_chronos(bar.wrap_read(file), Some(&initial));
            bar.finish_and_clear();
            let mut h = read.with_context(|| format!("history {}", input.display()))?.into_history();
            let cert = match &args.certificate {
                Some(path) => crate::check::read_v1_certificate(path, &mut h)?,
                None => Certificate::default(),
            };
            (h, cert)
        }
        (_, Some(_)) => anyhow::bail!("--initial-value applies to --from chronos only"),
        (from, None) => crate::check::load(input, args.certificate.as_ref(), from, v1::AdapterFacts::Keep)?,
    };
    if args.certificate_out.is_some() {
        anyhow::ensure!(
            !carried.is_empty(),
            "--certificate-out: {} history carries no certificate facts (give one with --certificate)",
            args.from.with_article()
        );
    }
    let dropped = args.to.dropped_facts(&h);
    // With `--certificate`, the version order certifies the history and timestamps are
    // no longer its only certificate; real-time order has no stand-in.
    let verdict_rests_on_dropped =
        dropped.real_times > 0 || (dropped.timestamps > 0 && args.certificate.is_none());
    if verdict_rests_on_dropped && !args.lossy {
        anyhow::bail!(
            "{}: {}; a verdict rests on them (pass --lossy to convert anyway)",
            args.output.display(),
            dropped.notes(args.to).join("; ").replace(" were dropped", " would be dropped")
        );
    }
    for note in dropped.notes(args.to) {
        tracing::warn!("{}: {note}", args.output.display());
    }
    let existing = if args.force { ExistingDirectory::Replace } else { ExistingDirectory::Refuse };
    let notes = args.to.write_path_with(&h, &args.output, existing).map_err(|e| {
        let refused = matches!(&e, FormatError::InFile { error, .. }
            if matches!(&**error, FormatError::Io(io) if io.kind() == std::io::ErrorKind::AlreadyExists));
        let hint = if refused { " (pass --force to replace it)" } else { "" };
        anyhow::Error::new(e).context(format!(
            "writing {} history to {}{hint}",
            args.to.with_article(),
            args.output.display()
        ))
    })?;
    for note in notes {
        tracing::warn!("{}: {note}", args.output.display());
    }
    if let Some(path) = &args.certificate_out {
        if let Err(e) = carry_certificate(&args, &h, &carried, path) {
            // The output was written just now, whole: without its certificate it goes too,
            // so a failed convert leaves nothing another tool could take for its result.
            let _ = if args.output.is_dir() {
                std::fs::remove_dir_all(&args.output)
            } else {
                std::fs::remove_file(&args.output)
            };
            return Err(e);
        }
    }
    Ok(exit::valid())
}

/// Reads OUT back and writes `carried` to `path` naming OUT's transactions: formats without
/// transaction ids (dbcop's) number them anew, Cobra reads sessions back in file-name order.
fn carry_certificate(
    args: &ConvertArgs,
    h: &History,
    carried: &Certificate,
    path: &Path,
) -> anyhow::Result<()> {
    let written = args
        .to
        .read_path(&args.output)
        .with_context(|| format!("reading back the {} history {}", args.to, args.output.display()))?
        .history;
    let cert = isocert_history::formats::remap_certificate(h, &written, carried)
        .with_context(|| format!("--certificate-out: {} does not keep the transactions of IN", args.to))?;
    write_certificate(&written, &cert, path)
}

/// Writes `cert` to `path`: King Cobra's layout for a `.vo` file, else a v1 certificate.
fn write_certificate(h: &History, cert: &Certificate, path: &Path) -> anyhow::Result<()> {
    crate::output::write_file(path, |mut out| {
        if crate::check::is_king_cobra_order(path) {
            write_king_cobra_version_order(h, cert, &mut out)?;
        } else {
            isocert_history::v1::write_certificate(h, cert, &mut out)?;
        }
        Ok(())
    })
}
