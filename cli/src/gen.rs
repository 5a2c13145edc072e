//! `isocert gen`: synthetic histories with certificates, valid by construction, optionally
//! with one injected anomaly.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use isocert_gen::{
    parse_simulated_level, write_stream, DataModel, Distribution, GenConfig, GenStats, Injection,
};
use isocert_history::IsolationLevel;

use crate::exit;

/// Generate a history (JSON lines) and its version certificate by simulating sessions
/// against a multi-version store, valid by construction at the chosen isolation level.
///
/// Transactions are written as they finish, so a million transactions take seconds.
/// Knobs left out take the defaults below, or the Chronos benchmark's shape with --chronos.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert gen --txns 1000 --sessions 8 --ops-per-txn 4 --keys 50 --out h.jsonl --certificate c.json\n  isocert gen --txns 100 --sessions 4 --ops-per-txn 3 --keys 5 --inject g-si --out h.jsonl --certificate c.json"
)]
pub(crate) struct GenArgs {
    /// Where to write the history (`-` for standard output).
    #[arg(long, value_name = "HISTORY.jsonl", required_unless_present = "list_injections")]
    out: Option<PathBuf>,
    /// Where to write the certificate (version order, version sets, serialization order).
    #[arg(long, value_name = "CERT.json")]
    certificate: Option<PathBuf>,
    /// Number of transactions, committed and aborted [default: 1000].
    #[arg(long)]
    txns: Option<usize>,
    /// Concurrent client sessions [default: 4; Chronos: 50].
    #[arg(long)]
    sessions: Option<usize>,
    /// Operations per transaction [default: 5; Chronos: 15].
    #[arg(long)]
    ops_per_txn: Option<usize>,
    /// Number of keys (rows of the SQL table) [default: 100; Chronos: 1000].
    #[arg(long)]
    keys: Option<usize>,
    /// Fraction of item operations that read [default: 0.5].
    #[arg(long)]
    read_ratio: Option<f64>,
    /// Blind transactions, as Viper's BlindW benchmark: each transaction is read-only with
    /// this probability and write-only otherwise (0.5: BlindW-RW, 0.9: BlindW-RM), instead
    /// of mixing reads and writes by --read-ratio.
    #[arg(long, value_name = "FRACTION")]
    read_only_txns: Option<f64>,
    /// Fraction of operations that are predicate operations over the SQL table `t`
    /// (select, predicate update, predicate delete) [default: 0].
    #[arg(long)]
    predicate_ratio: Option<f64>,
    /// Key distribution: uniform, zipfian, hotspot [default: uniform; Chronos: zipfian].
    #[arg(long)]
    distribution: Option<Distribution>,
    /// Random seed: the same knobs and seed give the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Concurrency control of the simulated store: ser (serializable) or si (snapshot
    /// isolation) [default: ser; Chronos: si].
    #[arg(long, value_parser = parse_simulated_level)]
    isolation: Option<IsolationLevel>,
    /// Objects: auto (table when --predicate-ratio > 0, else kv), kv, list-append, table.
    #[arg(long)]
    model: Option<DataModel>,
    /// At most this many transactions in flight at once (0: one per session)
    /// [default: 0; Chronos: 8].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Writes re-draw keys that a running transaction wrote or that changed since the
    /// writer's snapshot: far fewer aborts on hot keys [default: off; Chronos: on].
    #[arg(long)]
    avoid_conflicts: Option<bool>,
    /// Plant one anomaly (see --list-injections for the kinds and the levels that reject them).
    #[arg(long, value_name = "KIND")]
    inject: Option<Injection>,
    /// Write each predicate operation's version set row by row, as the shared spec does,
    /// instead of as its snapshot (the default, docs/FORMAT.md "Compact version sets"):
    /// for readers that know only the spec.
    #[arg(long)]
    explicit_version_sets: bool,
    /// Start from the Chronos benchmark's shape: 50 sessions, 1,000 keys, zipfian,
    /// 50% reads, 15 operations per transaction, key-value, snapshot isolation.
    #[arg(long)]
    chronos: bool,
    /// List the injection kinds and the isolation levels that must reject each, then exit.
    #[arg(long)]
    list_injections: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

impl GenArgs {
    fn config(&self) -> GenConfig {
        let txns = self.txns.unwrap_or(1000);
        let base = if self.chronos {
            GenConfig::chronos(txns, self.seed)
        } else {
            GenConfig { txns, keys: 100, seed: self.seed, ..GenConfig::default() }
        };
        GenConfig {
            txns,
            sessions: self.sessions.unwrap_or(base.sessions),
            ops_per_txn: self.ops_per_txn.unwrap_or(base.ops_per_txn),
            keys: self.keys.unwrap_or(base.keys),
            read_ratio: self.read_ratio.unwrap_or(base.read_ratio),
            read_only_txns: self.read_only_txns.or(base.read_only_txns),
            predicate_ratio: self.predicate_ratio.unwrap_or(base.predicate_ratio),
            distribution: self.distribution.unwrap_or(base.distribution),
            seed: self.seed,
            isolation: self.isolation.unwrap_or(base.isolation),
            model: self.model.unwrap_or(base.model),
            concurrency: self.concurrency.unwrap_or(base.concurrency),
            avoid_conflicts: self.avoid_conflicts.unwrap_or(base.avoid_conflicts),
            inject: self.inject,
            explicit_version_sets: self.explicit_version_sets,
        }
    }
}

/// Counts finished lines (transactions) as they pass to the output, for the progress bar.
struct Counting<W> {
    inner: W,
    bar: ProgressBar,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if !self.bar.is_hidden() {
            self.bar.inc(buf[..n].iter().filter(|&&b| b == b'\n').count() as u64);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn run(args: GenArgs) -> anyhow::Result<ExitCode> {
    if args.list_injections {
        let mut out = io::stdout().lock();
        for kind in Injection::ALL {
            let note = if kind.needs_session_order() {
                " (with session order; valid with --no-session-order)"
            } else {
                ""
            };
            writeln!(out, "{:<26} rejected at: {}{note}", kind.as_str(), kind.rejected_at().join(", "))?;
        }
        return Ok(exit::valid());
    }
    let cfg = args.config();
    cfg.validate()?;
    let out_path = args.out.clone().context("--out is required")?;
    let bar = ProgressBar::new(cfg.txns as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} generating {pos}/{len} transactions [{elapsed}] {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let to_stdout = out_path.as_os_str() == "-";
    // The history and the certificate are written whole or not at all (crate::output).
    let generate = |cert_out: Option<&mut dyn Write>| -> anyhow::Result<GenStats> {
        let mut stats = None;
        if to_stdout {
            stats = Some(write_stream(
                &cfg,
                Counting { inner: io::stdout().lock(), bar: bar.clone() },
                cert_out,
            )?);
        } else {
            crate::output::write_file(&out_path, |out| {
                stats = Some(write_stream(&cfg, Counting { inner: out, bar: bar.clone() }, cert_out)?);
                Ok(())
            })?;
        }
        stats.context("the generator wrote nothing")
    };
    let generated = match &args.certificate {
        Some(p) => {
            let mut stats = None;
            crate::output::write_file(p, |cert| {
                stats = Some(generate(Some(cert as &mut dyn Write))?);
                Ok(())
            })
            .and_then(|()| stats.context("the generator wrote nothing"))
        }
        None => generate(None),
    };
    let stats = generated.with_context(|| format!("generating {}", out_path.display()))?;
    bar.finish_and_clear();
    tracing::info!(committed = stats.committed, aborted = stats.aborted, ops = stats.ops, "generated");
    let summary = summary(&args, &cfg, &stats, args.json);
    if to_stdout {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(exit::valid())
}

fn summary(args: &GenArgs, cfg: &GenConfig, stats: &GenStats, json: bool) -> String {
    let rejected: Vec<&str> = cfg.inject.map(|k| k.rejected_at().to_vec()).unwrap_or_default();
    if json {
        return serde_json::json!({
            "history": args.out.as_ref().map(|p| p.display().to_string()),
            "certificate": args.certificate.as_ref().map(|p| p.display().to_string()),
            "isolation": cfg.isolation.as_str(),
            "model": cfg.data_model().as_str(),
            "seed": cfg.seed,
            "committed": stats.committed,
            "aborted": stats.aborted,
            "ops": stats.ops,
            "injected": cfg.inject.map(|k| k.as_str()),
            "injection": (!stats.injected.is_empty()).then_some(&stats.injected),
            "rejected_at": rejected,
        })
        .to_string();
    }
    let mut text = format!(
        "generated {} transactions ({} committed, {} aborted, {} operations), {} model, simulated under {}",
        stats.committed + stats.aborted,
        stats.committed,
        stats.aborted,
        stats.ops,
        cfg.data_model().as_str(),
        cfg.isolation,
    );
    if let Some(kind) = cfg.inject {
        text.push_str(&format!(
            "\ninjected {}\nmust be rejected at: {}",
            stats.injected,
            rejected.join(", ")
        ));
        if kind.needs_session_order() {
            text.push_str(
                " (with session order, the default; every checker accepts it with --no-session-order)",
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: GenArgs,
    }

    fn config(flags: &[&str]) -> GenConfig {
        let argv = std::iter::once("gen").chain(flags.iter().copied());
        Wrapper::try_parse_from(argv).unwrap().args.config()
    }

    #[test]
    fn defaults_and_the_chronos_preset_with_overrides() {
        let plain = config(&["--out", "h.jsonl"]);
        assert_eq!((plain.txns, plain.keys, plain.sessions), (1000, 100, 4));
        assert_eq!(plain.isolation, IsolationLevel::Serializable);
        let chronos =
            config(&["--out", "h.jsonl", "--chronos", "--txns", "7", "--keys", "50", "--seed", "3"]);
        assert_eq!(chronos, GenConfig { keys: 50, ..GenConfig::chronos(7, 3) });
        let named =
            config(&["--out", "-", "--isolation", "si", "--distribution", "hotspot", "--inject", "g1c"]);
        assert_eq!(named.isolation, IsolationLevel::SnapshotIsolation);
        assert_eq!(named.distribution, Distribution::Hotspot);
        assert_eq!(named.inject, Some(Injection::G1c));
    }

    #[test]
    fn bad_names_and_missing_output_are_refused_by_the_parser() {
        let argv =
            |flags: &[&'static str]| std::iter::once("gen").chain(flags.iter().copied()).collect::<Vec<_>>();
        assert!(Wrapper::try_parse_from(argv(&["--txns", "5"])).is_err());
        assert!(Wrapper::try_parse_from(argv(&["--out", "h", "--inject", "g9"])).is_err());
        assert!(Wrapper::try_parse_from(argv(&["--out", "h", "--distribution", "gauss"])).is_err());
        assert!(Wrapper::try_parse_from(argv(&["--list-injections"])).is_ok());
    }

    #[test]
    fn writes_a_history_the_v1_reader_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let (h, c) = (dir.path().join("h.jsonl"), dir.path().join("c.json"));
        let (hs, cs) = (h.to_str().unwrap(), c.to_str().unwrap());
        let args = Wrapper::try_parse_from([
            "gen",
            "--txns",
            "40",
            "--inject",
            "write-skew",
            "--out",
            hs,
            "--certificate",
            cs,
        ])
        .unwrap()
        .args;
        assert_eq!(run(args).unwrap(), exit::valid());
        let mut history =
            isocert_history::v1::read_history(io::BufReader::new(std::fs::File::open(&h).unwrap())).unwrap();
        assert_eq!(history.txns.len(), 42);
        let cert =
            isocert_history::v1::read_certificate(std::fs::File::open(&c).unwrap(), &mut history).unwrap();
        assert_eq!(
            cert.serialization_order.unwrap().len(),
            history.txns.iter().filter(|t| t.is_committed()).count()
        );
    }
}
