//! The Chronos and Aion arms of `isocert check`: timestamp-based checking of key-value and
//! list histories in the v1 or Chronos format, read by the fast streaming readers.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use isocert_checker::stream::{self, ChronosChecked, ChronosStreamed, StreamError};
use isocert_checker::{
    check_chronos_kv, render_dot, render_json, Aion, AionDelay, AionOptions, Anomaly, CheckerKind,
    HtmlOptions, Report,
};
use isocert_history::chronos::ChronosReader;
use isocert_history::formats::Format;
use isocert_history::{Certificate, FormatError, History, KvHistory, Scalar};

use super::{CheckArgs, ChronosStreaming};
use crate::exit;

/// Whether `isocert check` should take the timestamp path for these arguments: Chronos or
/// Aion on the history as its file holds it. Without session order, or with a certificate
/// (whose `transactions` may supply the timestamps and `serial_order` what they are, as
/// `isocert serve` answers), they check the history read whole by the general reader.
pub(crate) fn applies(args: &CheckArgs) -> bool {
    matches!(args.checker, CheckerKind::Chronos | CheckerKind::Aion)
        && !args.no_session_order
        && args.certificate.is_none()
}

/// Parses `--initial-value`: a JSON scalar (`0`, `"x"`, `null`), or else the text itself.
/// A number the readers refuse is refused here too (issue 30): an integer beyond 64 bits
/// (it would round to a float) or beyond a float's range (`1e400`, which the JSON parser
/// refuses and the fallback would have taken as the text `"1e400"`).
pub(crate) fn parse_initial(text: &str) -> Result<Scalar, String> {
    let integral_beyond_64_bits = |f: f64| f.fract() == 0.0 && f.abs() >= 2f64.powi(63);
    let t = text.trim();
    let numeric = t.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
        && t.bytes().any(|b| b.is_ascii_digit());
    if numeric && t.parse::<f64>().is_ok_and(|f| !f.is_finite()) {
        return Err(format!("number {text} is out of range for a 64-bit float; write it as a JSON string"));
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Scalar::Int(i)),
            (None, Some(f)) if !n.is_u64() && !integral_beyond_64_bits(f) => Ok(Scalar::Float(f)),
            _ => {
                Err(format!("integer {text} does not fit a signed 64-bit integer; write it as a JSON string"))
            }
        },
        Ok(serde_json::Value::String(s)) => Ok(Scalar::Text(s.into())),
        Ok(serde_json::Value::Bool(b)) => Ok(Scalar::Bool(b)),
        Ok(serde_json::Value::Null) => Ok(Scalar::Null),
        Ok(_) => Err(format!("{text} is not a scalar")),
        Err(_) => Ok(Scalar::Text(text.into())),
    }
}

/// Loads a whole history for Chronos: the fast reader, or for v1 files with constructs only
/// the general reader handles, the general reader (which then names what Chronos cannot check).
fn load(args: &CheckArgs) -> anyhow::Result<KvHistory> {
    let (mut kv, notes) = isocert_history::open_kv(&args.history, args.format, parse_threads())?;
    for note in &notes {
        tracing::warn!("{}: {note}", args.history.display());
    }
    if let Some(text) = &args.initial_value {
        let initial = parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?;
        kv.set_default_initial(Some(&initial));
    }
    Ok(kv)
}

/// Threads for reading a history file: one per core the process may use.
fn parse_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Runs Chronos or Aion for `isocert check`.
pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let (report, labels_from) = match args.checker {
        CheckerKind::Aion => run_aion(args)?,
        _ => {
            if let Some((report, labels)) = stream_chronos(args)? {
                anyhow::ensure!(report.stats.txns > 0, "{}", empty_history(&args.history));
                return output(args, &report, &labels);
            }
            let started = Instant::now();
            let kv = load(args)?;
            let parsed = started.elapsed();
            let ops = kv.op_count();
            let (report, kv) = check_chronos_kv(kv, args.isolation)?;
            let checked = started.elapsed() - parsed;
            tracing::info!(
                txns = kv.len(),
                ops,
                parse_ms = parsed.as_millis() as u64,
                check_ms = checked.as_millis() as u64,
                "chronos finished"
            );
            (report, kv)
        }
    };
    anyhow::ensure!(report.stats.txns > 0, "{}", empty_history(&args.history));
    // A valid report names no transaction: skip building the label history.
    let labels = if report.is_valid() { History::new() } else { labels_from.label_history() };
    output(args, &report, &labels)
}

/// v1 files of this size or more are checked while they are read (`--chronos-stream auto`).
const STREAM_BYTES: u64 = 64 << 20;

/// Streaming Chronos on a v1 file (docs/CHRONOS.md, "Streaming";
/// [`stream::stream_chronos_v1`], `--chronos-chunk` bytes per chunk, default 8 MB, about
/// 13,000 transactions of fifteen operations). Returns the report and the labels of the
/// transactions it names, or `None` when the file is not streamed or the stream stopped:
/// the caller then checks the whole history, which gives the same error or verdict as
/// without streaming.
fn stream_chronos(args: &CheckArgs) -> anyhow::Result<Option<(Report, History)>> {
    let path = &args.history;
    let size = match std::fs::metadata(path) {
        Ok(m) if m.is_file() && args.format == Format::V1 => m.len(),
        _ => return Ok(None),
    };
    let wanted = match args.chronos_stream {
        ChronosStreaming::Always => true,
        ChronosStreaming::Never => false,
        ChronosStreaming::Auto => size >= STREAM_BYTES,
    };
    if !wanted {
        return Ok(None);
    }
    let initial = match &args.initial_value {
        Some(text) => Some(parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?),
        None => None,
    };
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let streamed = match stream::stream_chronos_v1(
        path,
        args.isolation,
        threads,
        args.chronos_chunk,
        initial.as_ref(),
    ) {
        Err(StreamError::Read(e)) => {
            return Err(anyhow::Error::new(e).context(format!("cannot open history {}", path.display())))
        }
        other => other?,
    };
    match streamed {
        ChronosStreamed::Checked(checked) => {
            let ChronosChecked { report, labels, txns } = *checked;
            tracing::info!(
                txns,
                ops = report.stats.ops,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "chronos finished (streaming)"
            );
            Ok(Some((report, labels)))
        }
        ChronosStreamed::Stopped { why } => {
            if let Some(why) = why {
                tracing::info!("streaming Chronos stopped ({why}); checking the whole history");
            }
            Ok(None)
        }
    }
}

/// The error for a history with no transaction in it (an empty or whitespace-only file,
/// or a header alone): nothing was checked, so no verdict is given.
pub(crate) fn empty_history(path: &std::path::Path) -> String {
    format!("history {}: the history is empty (no transactions): nothing to check", path.display())
}

fn output(args: &CheckArgs, report: &Report, labels: &History) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.dot {
        crate::output::write_text(path, &render_dot(report, labels))?;
    }
    if let Some(path) = &args.html {
        let opts = HtmlOptions { layout: args.html_layout, drawn: args.html_drawn, context: Vec::new() };
        super::write_html(path, report, labels, &Certificate::default(), &opts)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&render_json(report, labels))?)?;
    } else {
        write!(out, "{}", super::text_report(report, labels))?;
    }
    Ok(if report.is_valid() { exit::valid() } else { exit::anomalies() })
}

fn run_aion(args: &CheckArgs) -> anyhow::Result<(Report, KvHistory)> {
    let delay = match args.aion_delay_ms {
        Some(ms) => AionDelay::Time(Duration::from_millis(ms)),
        None => AionDelay::Arrivals(args.aion_delay),
    };
    let options = AionOptions { delay, ..AionOptions::new(args.isolation) };
    if !matches!(args.format, Format::V1 | Format::Chronos) {
        // Other formats are read whole; transactions arrive in file order.
        let kv = load(args)?;
        let report = isocert_checker::check_aion_kv(&kv, kv.txn_ids(), options)?;
        return Ok((report, kv));
    }
    let initial = match &args.initial_value {
        Some(text) => Some(parse_initial(text).map_err(|m| anyhow::anyhow!("--initial-value: {m}"))?),
        None => None,
    };
    let input = isocert_history::open_input(&args.history)?;
    let started = Instant::now();
    let aion = Aion::new(options)?;
    let (report, kv) = match args.format {
        Format::Chronos => {
            let mut reader = ChronosReader::new(input);
            reader.history_mut().set_default_initial(initial.as_ref());
            stream::aion_chronos(aion, reader, log_final).map_err(|e| aion_error(args, e))?
        }
        _ => stream::aion_v1(aion, input, initial.as_ref(), log_final).map_err(|e| aion_error(args, e))?,
    };
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        txns = kv.len(),
        elapsed_ms = (secs * 1000.0) as u64,
        txns_per_sec = (kv.len() as f64 / secs.max(1e-9)) as u64,
        "aion finished"
    );
    Ok((report, kv))
}

/// The error for a transaction that the fast readers cannot give Aion, or malformed input.
fn aion_error(args: &CheckArgs, e: StreamError) -> anyhow::Error {
    let what = format!("history {}", args.history.display());
    match e {
        StreamError::Read(FormatError::Unsupported { message, .. }) => anyhow::anyhow!(
            "{what}: {message}: Aion checks item reads, writes and list appends only \
             (predicate operations and SQL rows need --checker emme or enne)"
        ),
        StreamError::Read(e) => anyhow::Error::new(e).context(what),
        e => anyhow::Error::new(e),
    }
}

/// Logs an anomaly Aion found final while the history streams in.
fn log_final(a: &Anomaly) {
    tracing::warn!(kind = %a.kind, "{}", a.explanation);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30, item 1: `--initial-value 1e400` became the text "1e400", and an integer
    /// beyond 64 bits a rounded float; both are refused, as every history reader refuses them.
    #[test]
    fn initial_values_the_readers_refuse_are_refused() {
        assert_eq!(parse_initial("7"), Ok(Scalar::Int(7)));
        assert_eq!(parse_initial("2.5"), Ok(Scalar::Float(2.5)));
        assert_eq!(parse_initial("\"x\""), Ok(Scalar::Text("x".into())));
        assert_eq!(parse_initial("inf"), Ok(Scalar::Text("inf".into())));
        for bad in ["1e400", "-1.5e309", "18446744073709551616", "9223372036854775808", "1e19"] {
            assert!(parse_initial(bad).is_err(), "{bad}: {:?}", parse_initial(bad));
        }
    }

    #[test]
    fn initial_values_parse_as_json_scalars_or_text() {
        assert_eq!(parse_initial("0"), Ok(Scalar::Int(0)));
        assert_eq!(parse_initial("\"x\""), Ok(Scalar::Text("x".into())));
        assert_eq!(parse_initial("abc"), Ok(Scalar::Text("abc".into())));
        assert!(parse_initial("[1]").is_err());
    }
}
