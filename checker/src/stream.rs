//! The streaming drivers of the timestamp checkers: reading a history on other threads
//! while Chronos or Aion checks what has arrived (docs/CHRONOS.md, "Streaming").
//!
//! - [`stream_chronos_v1`]: one thread per core reads chunks of a v1 file, the calling
//!   thread appends each and simulates what its timestamps allow ([`ChronosStream`]).
//! - [`aion_v1`]: one thread parses a v1 stream into batches handed over through a bounded
//!   channel, the calling thread checks them with [`Aion`]; [`aion_chronos`] reads and
//!   checks a Chronos-format stream on one thread.
//!
//! Both find a repeated transaction id without indexing names ([`SeenIds`]). They log
//! nothing and print nothing: what a command shows (anomalies as they become final, why a
//! stream stopped, timings) it does with what they return and the callback they take.

use std::io::Read;
use std::path::Path;

use isocert_history::chronos::ChronosReader;
use isocert_history::{read_kv_v1_chunks, FormatError, History, KvHistory, KvV1Reader, Scalar, TxnId};
use rustc_hash::FxHashSet;

use crate::{Aion, Anomaly, CheckError, ChronosStream, IsolationLevel, Report};

/// Why a streaming check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The input could not be opened or read, or is malformed (or holds an operation the
    /// fast readers cannot give the checker) at this point.
    #[error(transparent)]
    Read(FormatError),
    /// The checker refused the history.
    #[error(transparent)]
    Check(#[from] CheckError),
}

/// A whole v1 file checked by streaming Chronos.
#[derive(Debug)]
pub struct ChronosChecked {
    /// The report, its transactions renumbered to `labels`.
    pub report: Report,
    /// The labels of the transactions the report names.
    pub labels: History,
    /// Transactions checked.
    pub txns: usize,
}

/// What streaming Chronos ended with.
#[derive(Debug)]
pub enum ChronosStreamed {
    /// The whole file was checked.
    Checked(Box<ChronosChecked>),
    /// The stream stopped (malformed input, a repeated id, a transaction the check refuses,
    /// timestamps going back in a session: `why`), or the file held no transaction (`why`
    /// is `None`): the caller checks the whole history, which gives the same error or
    /// verdict as without streaming.
    Stopped {
        /// Why, when the stream stopped.
        why: Option<String>,
    },
}

/// Streaming Chronos on the v1 file at `path` at `level`: `threads` threads read chunks of
/// `chunk_bytes` bytes (split at line boundaries, [`read_kv_v1_chunks`]), the calling
/// thread appends each chunk and simulates what its timestamps allow, freeing what it is
/// done with. `initial` is the value of keys no transaction wrote before.
///
/// # Errors
/// [`StreamError::Read`] when the file cannot be opened; [`StreamError::Check`] when
/// Chronos does not check `level`.
pub fn stream_chronos_v1(
    path: &Path,
    level: IsolationLevel,
    threads: usize,
    chunk_bytes: u64,
    initial: Option<&Scalar>,
) -> Result<ChronosStreamed, StreamError> {
    let mut chunks = read_kv_v1_chunks(path, threads, chunk_bytes).map_err(StreamError::Read)?;
    let mut check = ChronosStream::new(level)?;
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
                first.set_default_initial(initial);
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
    if stopped.is_some() {
        return Ok(ChronosStreamed::Stopped { why: stopped });
    }
    let Some(mut kv) = kv else { return Ok(ChronosStreamed::Stopped { why: None }) };
    let report = crate::settle_serial_order(check.finish(&mut kv), kv.dict().serial_order)?;
    let (report, labels) = renumbered(report, &kv);
    Ok(ChronosStreamed::Checked(Box::new(ChronosChecked { report, labels, txns: kv.len() })))
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

/// Hands `t` to Aion, passes the anomalies that became final to `on_final`, and frees the
/// operations of a block once its last transaction has arrived (Aion never reads them again).
fn aion_receive(
    aion: &mut Aion,
    kv: &mut KvHistory,
    t: TxnId,
    on_final: &mut impl FnMut(&Anomaly),
) -> Result<(), CheckError> {
    aion.receive(kv, t)?;
    for a in aion.take_final() {
        on_final(a);
    }
    if (t.index() + 1).is_multiple_of(KvHistory::BLOCK) {
        kv.free_block(t.index() / KvHistory::BLOCK);
    }
    Ok(())
}

/// Aion over a Chronos-format stream, reading and checking on one thread; `on_final` gets
/// each anomaly as it becomes final.
///
/// # Errors
/// [`StreamError::Read`] for malformed input, [`StreamError::Check`] for a transaction Aion
/// refuses.
pub fn aion_chronos<R: Read>(
    mut aion: Aion,
    mut reader: ChronosReader<R>,
    mut on_final: impl FnMut(&Anomaly),
) -> Result<(Report, KvHistory), StreamError> {
    while let Some(t) = reader.next_txn().map_err(StreamError::Read)? {
        aion_receive(&mut aion, reader.history_mut(), t, &mut on_final)?;
    }
    let kv = reader.into_history();
    Ok((crate::settle_serial_order(aion.finish(&kv), kv.dict().serial_order)?, kv))
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
/// waiting, so a live stream's transactions are checked as they arrive. `initial` is the
/// value of keys no transaction wrote before; `on_final` gets each anomaly as it becomes
/// final.
///
/// # Errors
/// [`StreamError::Read`] for malformed input or a repeated id, [`StreamError::Check`] for a
/// transaction Aion refuses.
pub fn aion_v1<R: Read + Send>(
    mut aion: Aion,
    input: R,
    initial: Option<&Scalar>,
    mut on_final: impl FnMut(&Anomaly),
) -> Result<(Report, KvHistory), StreamError> {
    let (send, receive) = std::sync::mpsc::sync_channel::<Parsed>(AION_QUEUE);
    std::thread::scope(|scope| {
        scope.spawn(move || read_batches(KvV1Reader::new(input), &send));
        let mut kv: Option<KvHistory> = None;
        for parsed in receive {
            let (history, checked) = match parsed {
                Parsed::Batch { history, checked } => (history, checked),
                Parsed::Failed(e) => return Err(StreamError::Read(e)),
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
                aion_receive(&mut aion, kv, TxnId::from_index(i), &mut on_final)?;
            }
        }
        let kv = kv.unwrap_or_default();
        Ok((crate::settle_serial_order(aion.finish(&kv), kv.dict().serial_order)?, kv))
    })
}

/// The reader thread of [`aion_v1`]: parses `reader`'s input into batches and sends them
/// until the end of input, an error, or the checking thread stops listening.
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
            let batch = Parsed::Batch { history: Box::new(reader.take_part()), checked: count };
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
    use isocert_history::Scalar;

    use super::{SeenIds, SEEN_ID_BITS};

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
}
