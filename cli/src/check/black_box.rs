//! The black-box arm of `isocert check`: MTC, Cobra/PolySI and the weak checker on a Plume
//! or v1 file read straight into the compact model ([`KvHistory`]: 16-byte operations,
//! integer values inline), without the general model's 40-byte operations and interned
//! values (docs/PERFORMANCE.md, "Black-box checkers on the compact model").

use std::process::ExitCode;

use isocert_checker::{check_black_box, runs_black_box};
use isocert_history::formats::Format;
use isocert_history::{Certificate, History, KvHistory};

use super::CheckArgs;

/// Whether `isocert check` takes this arm: a black-box checker (asked for, or picked by
/// `auto` without a certificate) on a Plume or v1 file, with session order. With a
/// certificate, without session order, on standard input or another format, the general
/// path checks (which converts to the compact model itself).
pub(crate) fn applies(args: &CheckArgs) -> bool {
    args.certificate.is_none()
        && !args.general_model
        && !args.no_session_order
        && args.history.as_os_str() != "-"
        && matches!(args.format, Format::Plume | Format::V1)
        && runs_black_box(args.isolation, args.checker)
}

/// Runs the black-box arm; `None` when the file cannot be read into the compact model (it
/// holds a predicate operation, or it is malformed): the general path then reads it and
/// gives its verdict, refusal or error, worded as for every other check (the line and
/// field, a hint at the format the file's name suggests).
pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<Option<ExitCode>> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let Ok((kv, notes)) = isocert_history::open_kv(&args.history, args.format, threads) else {
        return Ok(None);
    };
    for note in &notes {
        tracing::warn!("{}: {note}", args.history.display());
    }
    anyhow::ensure!(!kv.is_empty(), "{}", super::timestamp::empty_history(&args.history));
    let report =
        super::run_check(args, kv.len(), true, || check_black_box(&kv, args.isolation, args.checker))?;
    let labels = labels(kv, report.is_valid(), args);
    super::write_report(args, &report, &labels, &Certificate::default()).map(Some)
}

/// What the report is rendered against: for anomalies the whole history (the HTML report
/// shows their transactions' operations); for a valid verdict only the names a
/// `--certificate-out` writes, else nothing (a valid report names no transaction).
fn labels(kv: KvHistory, valid: bool, args: &CheckArgs) -> History {
    match (valid, &args.certificate_out) {
        (false, _) => kv.into_history(),
        (true, Some(_)) => kv.label_history(),
        (true, None) => History::new(),
    }
}
