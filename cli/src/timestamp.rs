//! The Chronos and Aion arms of `isocert check`: timestamp-based checking of key-value and
//! list histories in the v1 or Chronos format, read by the fast streaming readers.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;

use isocert_checker::{
    check_chronos_kv, render_dot, render_json, Aion, AionDelay, AionOptions, CheckerKind, ChronosStream,
    HtmlOptions, Report,
};
use isocert_history::chronos::ChronosReader;
use isocert_history::formats::Format;
use isocert_history::{
    read_kv_v1_chunks, Certificate, FormatError, History, KvHistory, KvV1Reader, Scalar, TxnId,
};

use rustc_hash::FxHashSet;

use crate::check::{CheckArgs, ChronosStreaming};
use crate::exit;

/// Whether `isocert check` should take the timestamp path for these arguments.
pub(crate) fn applies(args: &CheckArgs) -> bool {
    matches!(args.checker, CheckerKind::Chronos | CheckerKind::Aion) && !args.no_session_order
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
    if args.certificate.is_some() {
        tracing::warn!(
            "the timestamp checkers read start_ts/commit_ts from the history; the certificate is not used"
        );
    }
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

/// Streaming Chronos on a v1 file (docs/CHRONOS.md, "Streaming"): one thread per core reads
/// chunks of the file (`--chronos-chunk` bytes, default 8 MB, about 13,000 transactions of
/// fifteen operations; split at line boundaries, [`read_kv_v1_chunks`]), the calling thread
/// appends each chunk and simulates what its timestamps allow, freeing what it is done with. Returns the report and the labels of the transactions it
/// names (the report renumbered to them), or `None` when the file is not streamed or the
/// stream stopped (malformed input, a repeated id, a transaction the check refuses,
/// timestamps going back in a session): the caller then checks the whole history, which
/// gives the same error or verdict as without streaming.
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
    let mut chunks = read_kv_v1_chunks(path, threads, args.chronos_chunk)
        .with_context(|| format!("cannot open history {}", path.display()))?;
    let mut check = ChronosStream::new(args.isolation)?;
    let mut kv: Option<KvHistory> = None;
    let mut names = SeenIds::default();
    let mut stopped = None;
    'parts: while let Some(part) = chunks.next() {
        let Ok(mut part) = part else {
            stopped = Some("the input needs the whole-file reader".to_string());
            break;
        };
        let from = kv.as_ref().map_or(0, KvHistory::len);
        let kv = match &mut kv {
            Some(kv) => {
                kv.append_from(&mut part).expect("names are not indexed");
                chunks.recycle(part);
                kv
            }
            None => {
                let mut first = part;
                first.drop_name_index();
                first.set_default_initial(initial.as_ref());
                kv.insert(first)
            }
        };
        for i in from..kv.len() {
            let t = TxnId::from_index(i);
            if !names.insert(kv.name(t)) {
                stopped = Some(format!("{} may repeat an id", kv.txn_label(t)));
                break 'parts;
            }
            if let Err(stop) = check.push(kv, t) {
                stopped = Some(stop.to_string());
                break 'parts;
            }
        }
    }
    if let Some(why) = stopped {
        tracing::info!("streaming Chronos stopped ({why}); checking the whole history");
        return Ok(None);
    }
    let Some(mut kv) = kv else { return Ok(None) };
    let report = check.finish(&mut kv);
    tracing::info!(
        txns = kv.len(),
        ops = report.stats.ops,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "chronos finished (streaming)"
    );
    Ok(Some(renumbered(report, &kv)))
}

/// The labels of the transactions `report` names, and the report renumbered to them.
fn renumbered(mut report: Report, kv: &KvHistory) -> (Report, History) {
    let mut named: Vec<TxnId> = Vec::new();
    for a in &report.anomalies {
        named.extend(&a.txns);
        named.extend(a.ops.iter().map(|o| o.txn));
        for e in &a.cycle {
            named.extend([e.from, e.to]);
            named.extend(e.op.map(|o| o.txn));
        }
    }
    named.sort_unstable();
    named.dedup();
    let labels = kv.label_history_of(named.iter().copied());
    let new = |t: TxnId| TxnId::from_index(named.binary_search(&t).expect("a named transaction"));
    for a in &mut report.anomalies {
        a.txns.iter_mut().for_each(|t| *t = new(*t));
        a.ops.iter_mut().for_each(|o| o.txn = new(o.txn));
        for e in &mut a.cycle {
            e.from = new(e.from);
            e.to = new(e.to);
            if let Some(o) = &mut e.op {
                o.txn = new(o.txn);
            }
        }
    }
    (report, labels)
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
        crate::check::write_html(path, report, labels, &Certificate::default(), &opts)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&render_json(report, labels))?)?;
    } else {
        write!(out, "{}", crate::check::text_report(report, labels))?;
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
            aion_one_thread(args, aion, reader)?
        }
        _ => aion_pipelined(args, aion, input, initial.as_ref())?,
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
fn aion_read_error(args: &CheckArgs, e: FormatError) -> anyhow::Error {
    let what = format!("history {}", args.history.display());
    match e {
        FormatError::Unsupported { message, .. } => anyhow::anyhow!(
            "{what}: {message}: Aion checks item reads, writes and list appends only \
             (predicate operations and SQL rows need --checker emme or enne)"
        ),
        e => anyhow::Error::new(e).context(what),
    }
}

/// Hands `t` to Aion, logs the anomalies that became final, and frees the operations of a
/// block once its last transaction has arrived (Aion never reads them again).
fn aion_receive(aion: &mut Aion, kv: &mut KvHistory, t: TxnId) -> anyhow::Result<()> {
    aion.receive(kv, t)?;
    for a in aion.take_final() {
        tracing::warn!(kind = %a.kind, "{}", a.explanation);
    }
    if (t.index() + 1).is_multiple_of(KvHistory::BLOCK) {
        kv.free_block(t.index() / KvHistory::BLOCK);
    }
    Ok(())
}

/// Aion over a Chronos-format stream, reading and checking on one thread.
fn aion_one_thread<R: Read>(
    args: &CheckArgs,
    mut aion: Aion,
    mut reader: ChronosReader<R>,
) -> anyhow::Result<(Report, KvHistory)> {
    while let Some(t) = reader.next_txn().map_err(|e| aion_read_error(args, e))? {
        aion_receive(&mut aion, reader.history_mut(), t)?;
    }
    let kv = reader.into_history();
    Ok((aion.finish(&kv), kv))
}

/// Transactions a reader thread parses ahead before handing them over.
const AION_BATCH: usize = 2048;

/// Batches in flight between the reader thread and Aion (bounds the memory read ahead).
const AION_QUEUE: usize = 4;

/// What the reader thread hands to the checking thread.
enum Parsed {
    /// Transactions read since the last batch (the first batch also holds the header),
    /// and how many of them to check (one fewer than all when the last one repeats an id:
    /// a [`Parsed::Failed`] follows).
    Batch { history: Box<KvHistory>, checked: usize },
    /// The input is malformed (or unreadable) here; the batches before it are complete.
    Failed(FormatError),
}

/// Aion over a v1 stream: one thread reads and parses, handing over batches of
/// transactions through a bounded queue, while this thread appends them to the history and
/// checks them. A batch is handed over as soon as the input has no further whole line
/// waiting, so a live stream's transactions are checked as they arrive.
fn aion_pipelined<R: Read + Send>(
    args: &CheckArgs,
    mut aion: Aion,
    input: R,
    initial: Option<&Scalar>,
) -> anyhow::Result<(Report, KvHistory)> {
    let (send, receive) = std::sync::mpsc::sync_channel::<Parsed>(AION_QUEUE);
    std::thread::scope(|scope| {
        scope.spawn(move || read_batches(KvV1Reader::new(input), &send));
        let mut kv: Option<KvHistory> = None;
        for parsed in receive {
            let (history, checked) = match parsed {
                Parsed::Batch { history, checked } => (history, checked),
                Parsed::Failed(e) => return Err(aion_read_error(args, e)),
            };
            let from = match &mut kv {
                None => {
                    let mut first = *history;
                    first.set_default_initial(initial);
                    // The reader thread finds repeated ids ([`SeenIds`]).
                    first.drop_name_index();
                    kv = Some(first);
                    0
                }
                Some(kv) => {
                    let from = kv.len();
                    kv.append(*history).expect("names are not indexed");
                    from
                }
            };
            let kv = kv.as_mut().expect("set above");
            for i in from..from + checked {
                aion_receive(&mut aion, kv, TxnId::from_index(i))?;
            }
        }
        let kv = kv.unwrap_or_default();
        Ok((aion.finish(&kv), kv))
    })
}

/// The reader thread of [`aion_pipelined`]: parses `reader`'s input into batches and sends
/// them until the end of input, an error, or the checking thread stops listening.
fn read_batches<R: Read>(mut reader: KvV1Reader<R>, send: &std::sync::mpsc::SyncSender<Parsed>) {
    let mut count = 0;
    let mut ids = SeenIds::default();
    let mut sent = false;
    loop {
        let mut next = reader.next_txn();
        if let Ok(Some(t)) = next {
            let name = reader.history().name(t);
            if !ids.insert(name) {
                let line = reader.last_line();
                next = Err(FormatError::invalid(line, "id", format!("transaction id {name} appears twice")));
            } else {
                count += 1;
                if count < AION_BATCH && reader.line_buffered() {
                    continue;
                }
            }
        }
        // Hand over what was read, also before an error or at the end of input (the
        // first batch even when empty: it carries the header). A repeated id stays in
        // the batch unchecked.
        if count > 0 || (!sent && !matches!(next, Ok(Some(_)))) {
            let batch = Parsed::Batch { history: Box::new(reader.take_history()), checked: count };
            count = 0;
            if send.send(batch).is_err() {
                return;
            }
            sent = true;
        }
        match next {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                let _ = send.send(Parsed::Failed(e));
                return;
            }
        }
    }
}

/// Integer ids below this are recorded in a bit set, larger or other ids in a hash set.
const SEEN_ID_BITS: i64 = 1 << 26;

/// The transaction ids a streaming check has read, to find a repeated one exactly without
/// indexing names in the checked history (Aion's reader thread, streaming Chronos's checking
/// thread). Integer ids from 0 up to [`SEEN_ID_BITS`] (gen's and the workloads', in any
/// order) take one bit each, 1.25 MB for ten million; any other id is kept whole in a hash
/// set. (A hash set of every id was 5.9% of streaming Chronos's checking thread at ten
/// million transactions, docs/PERFORMANCE.md, "Chronos and Aion".)
#[derive(Default)]
struct SeenIds {
    bits: Vec<u64>,
    other: FxHashSet<Scalar>,
}

impl SeenIds {
    /// Records `id`; false when it was read before.
    fn insert(&mut self, id: &Scalar) -> bool {
        match id {
            Scalar::Int(i) if (0..SEEN_ID_BITS).contains(i) => {
                let (word, bit) = ((*i as usize) / 64, 1u64 << (*i % 64));
                if word >= self.bits.len() {
                    self.bits.resize((word + 1).next_power_of_two(), 0);
                }
                let fresh = self.bits[word] & bit == 0;
                self.bits[word] |= bit;
                fresh
            }
            other => self.other.insert(other.clone()),
        }
    }
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

    /// `SeenIds` against a set of every id, on random sequences of small and large,
    /// negative, repeated and text ids in any order.
    #[test]
    fn seen_ids_find_exactly_the_repeats_a_set_finds() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..200 {
            let (mut ids, mut all) = (SeenIds::default(), std::collections::HashSet::new());
            for _ in 0..400 {
                let id = match next(5) {
                    0 | 1 => Scalar::Int(next(300) as i64),
                    2 => Scalar::Int(SEEN_ID_BITS - 3 + next(6) as i64),
                    3 => Scalar::Int(-(next(20) as i64)),
                    _ => Scalar::Text(format!("t{}", next(40)).into()),
                };
                assert_eq!(ids.insert(&id), all.insert(id.clone()), "{id:?}");
            }
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
