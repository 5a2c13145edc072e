//! `isocert convert`: translate a history between formats (our v1 and the Chronos format,
//! and the other importers' formats).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use isocert_history::chronos::read_chronos;
use isocert_history::formats::{write_king_cobra_version_order, Format};
use isocert_history::{v1, Certificate, History};

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
    /// The certificate of IN, carried over to `--certificate-out`: a v1 certificate, or with
    /// `--from cobra` King Cobra's version order file (`*.vo`).
    #[arg(long, value_name = "FILE")]
    pub(crate) certificate: Option<PathBuf>,
    /// Also write the certificate: the one `--certificate` gave, else the facts the input
    /// format carries (the version order an Elle list-append history's reads show). A FILE
    /// ending in `.vo` gets King Cobra's version order layout, anything else a v1 certificate.
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
    let (h, carried) = match (args.from, &args.initial_value) {
        (Format::Chronos, Some(text)) => {
            let initial =
                crate::timestamp::parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?;
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
            "--certificate-out: a {} history carries no certificate facts (give one with --certificate)",
            args.from
        );
    }
    let notes = args
        .to
        .write_path(&h, &args.output)
        .with_context(|| format!("writing a {} history to {}", args.to, args.output.display()))?;
    for note in notes {
        tracing::warn!("{}: {note}", args.output.display());
    }
    if let Some(path) = &args.certificate_out {
        // The certificate must name the transactions as a reader of OUT will: formats
        // without transaction ids (dbcop's) number them anew. Read OUT back and name them
        // as it does.
        let written = args
            .to
            .read_path(&args.output)
            .with_context(|| format!("reading back the {} history {}", args.to, args.output.display()))?
            .history;
        let cert = remap_certificate(&h, &written, &carried).with_context(|| {
            format!("--certificate-out: {} does not keep the transactions of IN", args.to)
        })?;
        if let Err(e) = write_certificate(&written, &cert, path) {
            let _ = std::fs::remove_file(&args.output);
            return Err(e);
        }
    }
    Ok(exit::valid())
}

/// `cert`, a certificate of `from`, for the same history as written and read back (`to`):
/// transactions matched by session (in order of first appearance) and position in the
/// session, objects by table name and key.
fn remap_certificate(from: &History, to: &History, cert: &Certificate) -> anyhow::Result<Certificate> {
    use isocert_history::{ObjId, OpRef, SeenVersion, TxnId, Writer};
    use rustc_hash::FxHashMap;

    // Other formats list version sets row by row: compact ones are expanded first.
    let expanded;
    let cert = if cert.snapshot_sets.is_some() {
        let mut c = cert.clone();
        c.expand_snapshot_sets(from)?;
        expanded = c;
        &expanded
    } else {
        cert
    };

    let by_session = |h: &History| {
        let mut sessions: Vec<(isocert_history::SessionId, Vec<TxnId>)> = Vec::new();
        for t in h.txn_ids() {
            let s = h.txn(t).session;
            match sessions.iter_mut().find(|(id, _)| *id == s) {
                Some((_, list)) => list.push(t),
                None => sessions.push((s, vec![t])),
            }
        }
        sessions
    };
    let (a, b) = (by_session(from), by_session(to));
    anyhow::ensure!(a.len() == b.len(), "{} sessions became {}", a.len(), b.len());
    let mut txn: FxHashMap<TxnId, TxnId> = FxHashMap::default();
    for ((_, xs), (_, ys)) in a.iter().zip(&b) {
        anyhow::ensure!(xs.len() == ys.len(), "a session of {} transactions became {}", xs.len(), ys.len());
        txn.extend(xs.iter().copied().zip(ys.iter().copied()));
    }
    let obj = |o: ObjId| -> anyhow::Result<ObjId> {
        let key = from.object(o);
        let table = to
            .table_by_name(&from.table(key.table).name)
            .and_then(|t| to.object_by_key(t, &key.key))
            .ok_or_else(|| {
                anyhow::anyhow!("object {} is not in the written history", from.object_label(o))
            })?;
        Ok(table)
    };
    let t = |x: TxnId| {
        txn.get(&x).copied().ok_or_else(|| anyhow::anyhow!("{} has no counterpart", from.txn_label(x)))
    };
    let writer = |w: Writer| -> anyhow::Result<Writer> {
        Ok(match w {
            Writer::Initial => Writer::Initial,
            Writer::Txn(x) => Writer::Txn(t(x)?),
        })
    };
    let version_order = match &cert.version_order {
        Some(order) => Some(
            order
                .iter()
                .map(|(o, ws)| Ok((obj(*o)?, ws.iter().map(|w| t(*w)).collect::<anyhow::Result<Vec<_>>>()?)))
                .collect::<anyhow::Result<FxHashMap<_, _>>>()?,
        ),
        None => None,
    };
    let version_sets = match &cert.version_sets {
        Some(sets) => Some(
            sets.iter()
                .map(|(at, seen)| {
                    let at = OpRef { txn: t(at.txn)?, op: at.op };
                    let seen = seen
                        .iter()
                        .map(|s| Ok(SeenVersion { obj: obj(s.obj)?, writer: writer(s.writer)? }))
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    Ok((at, seen))
                })
                .collect::<anyhow::Result<FxHashMap<_, _>>>()?,
        ),
        None => None,
    };
    let serialization_order = match &cert.serialization_order {
        Some(order) => Some(order.iter().map(|x| t(*x)).collect::<anyhow::Result<Vec<_>>>()?),
        None => None,
    };
    Ok(Certificate {
        version_order,
        version_sets,
        serialization_order,
        snapshot_sets: None,
        writer_identity: false,
    })
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
