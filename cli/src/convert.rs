//! `isocert convert`: translate a history between formats (our v1 and the Chronos format,
//! and the other importers' formats).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use isocert_history::chronos::read_chronos;
use isocert_history::formats::Format;

use crate::exit;

/// Convert a history from one format to another.
///
/// Reading the Chronos format with `--initial-value V` gives every key the initial value V
/// (a header `initial` entry per key in v1). Writing the Chronos format leaves out aborted
/// and unknown-outcome transactions (the format holds committed ones) and says so.
#[derive(Debug, clap::Args)]
pub(crate) struct ConvertArgs {
    /// The format of IN: v1, chronos, elle, elle-json, dbcop, dbcop-hist, dbcop-bincode,
    /// plume, cobra or viper.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) from: Format,
    /// The format of OUT (same names).
    #[arg(long, value_name = "FORMAT")]
    pub(crate) to: Format,
    /// With `--from chronos`: the value every key holds before the first transaction.
    #[arg(long, value_name = "V")]
    pub(crate) initial_value: Option<String>,
    /// Also write the certificate facts the input format carries (the version order an Elle
    /// list-append history's reads show) as a v1 certificate to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) certificate_out: Option<PathBuf>,
    /// The input history.
    pub(crate) input: PathBuf,
    /// Where to write the converted history.
    pub(crate) output: PathBuf,
}

/// Runs `isocert convert`.
pub(crate) fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let input = &args.input;
    let mut carried = None;
    let h = match (args.from, &args.initial_value) {
        (Format::Chronos, Some(text)) => {
            let initial =
                crate::timestamp::parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?;
            let file =
                std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
            read_chronos(file, Some(&initial))
                .with_context(|| format!("history {}", input.display()))?
                .into_history()
        }
        (_, Some(_)) => anyhow::bail!("--initial-value applies to --from chronos only"),
        (from, None) => {
            let imported = from.read_path(input).with_context(|| format!("reading a {from} history"))?;
            for note in &imported.notes {
                tracing::warn!("{}: {note}", input.display());
            }
            carried = imported.certificate;
            imported.history
        }
    };
    if let Some(path) = &args.certificate_out {
        let cert = carried.ok_or_else(|| {
            anyhow::anyhow!("--certificate-out: a {} history carries no certificate facts", args.from)
        })?;
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        );
        isocert_history::v1::write_certificate(&h, &cert, &mut out)
            .and_then(|()| std::io::Write::flush(&mut out).map_err(Into::into))
            .with_context(|| format!("writing the certificate {}", path.display()))?;
    }
    let notes = args
        .to
        .write_path(&h, &args.output)
        .with_context(|| format!("writing a {} history to {}", args.to, args.output.display()))?;
    for note in notes {
        tracing::warn!("{}: {note}", args.output.display());
    }
    Ok(exit::valid())
}
