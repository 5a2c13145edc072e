//! Reading a v1 kv/list file on several threads.
//!
//! The file is split at line boundaries into one part per thread; each part is read by
//! its own [`KvV1Reader`] into its own [`KvHistory`], and the parts are then appended in
//! file order ([`KvHistory::append`]), re-interning objects, values and sessions so that
//! every id is the one a single reader gives. Any failure (malformed input, a transaction
//! id repeated across parts, a split inside a record) re-reads the file on one thread, so
//! errors name the same line and field as [`read_kv_v1`](super::read_kv_v1).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use super::v1_fast::{read_kv_v1, KvV1Reader};
use super::{block_capacity, KvHistory, KvOp, KvValue, OpBlock};
use crate::{FormatError, ObjId, Scalar, TxnId, ValueId, KV_TABLE};

/// Files smaller than this are read on one thread: the split and the merge would cost more
/// than they save.
const PARALLEL_BYTES: u64 = 8 << 20;

/// Reads a whole v1 kv/list history from the file at `path` on up to `threads` threads
/// (one part of the file each, split at line boundaries).
///
/// The result is the one [`read_kv_v1`](super::read_kv_v1) gives for the whole file:
/// the same transactions, the same ids, the same error for malformed input.
///
/// # Errors
/// As [`read_kv_v1`](super::read_kv_v1), plus [`FormatError::Io`] when the file cannot be
/// opened or read.
pub fn read_kv_v1_file(path: &Path, threads: usize) -> Result<KvHistory, FormatError> {
    let len = std::fs::metadata(path)?.len();
    if threads < 2 || len < PARALLEL_BYTES {
        return read_kv_v1(File::open(path)?);
    }
    let bounds = split_points(path, len, threads)?;
    let parts = bounds
        .windows(2)
        .map(|w| {
            let mut file = File::open(path)?;
            file.seek(SeekFrom::Start(w[0]))?;
            Ok(file.take(w[1] - w[0]))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    match read_parts(parts) {
        Some(h) => Ok(h),
        None => read_kv_v1(File::open(path)?),
    }
}

/// A part of a v1 file that its reader thread could not read (malformed input, a
/// construct only the general reader handles, an I/O error): read the file on one thread
/// ([`read_kv_v1`](super::read_kv_v1)) for the error with its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkFailed;

/// A v1 kv/list file read in chunks on several threads, handed over in file order
/// ([`read_kv_v1_chunks`]).
///
/// Each item is the history of one chunk: the first carries the header's initial versions
/// and indexes its transaction names; the later ones start their ids at zero and do not
/// index names. Appended in order with [`KvHistory::append`] they give what one reader
/// gives. After an `Err` the iterator ends. Dropping it stops the threads.
#[derive(Debug)]
pub struct KvV1Chunks {
    /// One channel per thread; chunk `k` comes from thread `k % threads`.
    parts: Vec<Receiver<Result<KvHistory, ChunkFailed>>>,
    next: usize,
    done: bool,
    threads: Vec<JoinHandle<()>>,
    /// The file's length and the chunk size: chunk `k` exists when `k * chunk < len`.
    len: u64,
    chunk: u64,
    /// Appended chunks handed back ([`KvV1Chunks::recycle`]) for the threads to read into.
    spare: Spare,
}

/// Emptied chunk histories shared by the consumer (who gives them back) and the reader
/// threads (who fill them again), so that reading a chunk reuses memory instead of faulting
/// in fresh pages.
type Spare = std::sync::Arc<std::sync::Mutex<Vec<KvHistory>>>;

/// Reads the v1 kv/list file at `path` on `threads` threads (at least one), in chunks of
/// about `chunk_bytes` split at line boundaries (a chunk holds the lines that start inside
/// it): thread `j` reads chunks `j`, `j + threads`, ... and holds at most two read ahead.
///
/// # Errors
/// [`FormatError::Io`] when the file cannot be opened; errors in its content come as a
/// [`ChunkFailed`] item.
pub fn read_kv_v1_chunks(path: &Path, threads: usize, chunk_bytes: u64) -> Result<KvV1Chunks, FormatError> {
    let len = File::open(path)?.metadata()?.len();
    let threads = threads.max(1);
    let chunk = chunk_bytes.max(1);
    let mut parts = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    let spare = Spare::default();
    for j in 0..threads {
        let (send, receive) = sync_channel(2);
        let path = path.to_path_buf();
        let spare = spare.clone();
        parts.push(receive);
        handles.push(std::thread::spawn(move || {
            let mut window = Vec::new();
            let mut k = j as u64;
            while k * chunk < len {
                let into = spare.lock().ok().and_then(|mut s| s.pop());
                let read = read_chunk(&path, (k * chunk, (k + 1) * chunk, len), window, k == 0, into);
                let (part, back) = match read {
                    Ok(read) => read,
                    Err(_) => {
                        let _ = send.send(Err(ChunkFailed));
                        return;
                    }
                };
                window = back;
                if send.send(Ok(part)).is_err() {
                    return;
                }
                k += threads as u64;
            }
        }));
    }
    Ok(KvV1Chunks { parts, next: 0, done: false, threads: handles, len, chunk, spare })
}

impl KvV1Chunks {
    /// Hands back a chunk after [`KvHistory::append_from`] emptied it: a reader thread
    /// reads a later chunk into its memory.
    pub fn recycle(&self, mut spent: KvHistory) {
        spent.clear_for_reuse();
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(spent);
        }
    }
}

/// Reads the lines of the file at `path` that start in `[from, to)` (`(from, to, len)`,
/// `len` the file's), through `window`, into `into`'s memory if given.
fn read_chunk(
    path: &Path,
    (from, to, len): (u64, u64, u64),
    window: Vec<u8>,
    first: bool,
    into: Option<KvHistory>,
) -> Result<(KvHistory, Vec<u8>), FormatError> {
    let mut file = File::open(path)?;
    let start = line_start(&mut file, len, from)?;
    let end = line_start(&mut file, len, to)?;
    file.seek(SeekFrom::Start(start))?;
    let mut reader = KvV1Reader::part(file.take(end.saturating_sub(start)), window, first, into);
    while reader.next_txn()?.is_some() {}
    Ok(reader.into_part())
}

/// The first offset at or after `at` that starts a line (`len` when none does).
fn line_start(file: &mut File, len: u64, at: u64) -> std::io::Result<u64> {
    if at == 0 || at >= len {
        return Ok(at.min(len));
    }
    file.seek(SeekFrom::Start(at - 1))?;
    let mut scan = BufReader::with_capacity(1 << 16, file);
    let mut skipped = Vec::new();
    Ok(at - 1 + scan.read_until(b'\n', &mut skipped)? as u64)
}

impl Iterator for KvV1Chunks {
    type Item = Result<KvHistory, ChunkFailed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        // A thread hangs up when it has no chunk at this index (so none later either), or
        // when it panicked: then the chunk it owed fails.
        let item = match self.parts[self.next % self.parts.len()].recv() {
            Ok(item) => Some(item),
            Err(_) if (self.next as u64).saturating_mul(self.chunk) < self.len => Some(Err(ChunkFailed)),
            Err(_) => None,
        };
        self.next += 1;
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

impl Drop for KvV1Chunks {
    fn drop(&mut self) {
        self.parts.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Offsets `0 = b0 < b1 < ... = len` where each `bi` (inside) starts a line: the first
/// newline at or after `len * i / threads`, plus one.
fn split_points(path: &Path, len: u64, threads: usize) -> std::io::Result<Vec<u64>> {
    let mut bounds = vec![0];
    let mut file = BufReader::new(File::open(path)?);
    let mut skipped = Vec::new();
    for i in 1..threads as u64 {
        let guess = (len * i / threads as u64).max(*bounds.last().unwrap_or(&0));
        file.seek(SeekFrom::Start(guess))?;
        skipped.clear();
        let at = guess + file.read_until(b'\n', &mut skipped)? as u64;
        if at < len && at > *bounds.last().unwrap_or(&0) {
            bounds.push(at);
        }
    }
    bounds.push(len);
    Ok(bounds)
}

/// Reads each part on its own thread and appends them in order; `None` when any part fails
/// or a transaction id repeats across parts (the caller re-reads on one thread).
fn read_parts<R: Read + Send>(parts: Vec<R>) -> Option<KvHistory> {
    let read: Vec<Option<KvHistory>> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                scope.spawn(move || {
                    let mut reader =
                        if i == 0 { KvV1Reader::new(part) } else { KvV1Reader::continuing(part) };
                    while reader.next_txn().ok()?.is_some() {}
                    Some(reader.into_history())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    let mut read = read.into_iter();
    let mut whole = read.next()??;
    for part in read {
        whole.append(part?).ok()?;
    }
    Some(whole)
}

impl KvHistory {
    /// Appends the transactions of `next`, read (without a header) from the input that
    /// follows this history's, re-interning its objects, values and sessions in their
    /// first-seen order: the result is what one reader over both inputs gives.
    ///
    /// Operations move block by block: each of `next`'s blocks is renumbered in place and
    /// copied in at most two slices (one per block of this history it falls in), not
    /// transaction by transaction; its memory is freed as soon as it is copied. `next` must
    /// be freshly read (nothing retired or freed).
    ///
    /// # Errors
    /// The name of the first transaction of `next` whose id this history already has
    /// (this history then holds the transactions before it; with names not indexed,
    /// [`KvHistory::drop_name_index`], repeats are not found).
    pub fn append(&mut self, mut next: KvHistory) -> Result<(), Scalar> {
        self.append_from(&mut next)
    }

    /// [`KvHistory::append`], leaving `next` empty with its memory kept, to hand back to
    /// the reader ([`KvV1Chunks::recycle`]).
    ///
    /// # Errors
    /// As [`KvHistory::append`].
    pub fn append_from(&mut self, next: &mut KvHistory) -> Result<(), Scalar> {
        debug_assert!(next.base == 0 && next.kept.is_empty(), "append takes a freshly read history");
        let dict = &next.dict;
        let objects: Vec<ObjId> = (0..dict.object_count())
            .map(|o| {
                let key = dict.object(ObjId::from_index(o));
                let table = &dict.table(key.table).name;
                match &key.key {
                    Scalar::Int(i) if &**table == KV_TABLE => self.kv_object(*i),
                    other => {
                        let t = self.dict.intern_table(table);
                        self.dict.intern_object(t, other.clone())
                    }
                }
            })
            .collect();
        let values: Vec<ValueId> = (0..dict.value_count())
            .map(|v| self.dict.intern_value(dict.value(ValueId::from_index(v)).clone()))
            .collect();
        let sessions: Vec<_> = (0..dict.session_count())
            .map(|s| self.dict.intern_session(dict.session_name(crate::SessionId::from_index(s)).clone()))
            .collect();
        self.skipped_meta |= next.skipped_meta;
        let at = self.len();
        let (taken, repeated) = self.take_names(&mut next.names, at);
        self.sessions.extend(next.sessions[..taken].iter().map(|s| sessions[s.index()]));
        self.status.extend_from_slice(&next.status[..taken]);
        let from = at - self.base;
        self.start.extend_from(from, &next.start, taken);
        self.commit.extend_from(from, &next.commit, taken);
        self.real_time.extend_from(from, &next.real_time, taken);
        for b in 0..next.blocks.len() {
            let first = b * Self::BLOCK;
            if first >= taken {
                break;
            }
            let block = next.blocks[b].as_mut().expect("a freshly read history has every block");
            for op in &mut block.ops {
                let value = match op.value() {
                    KvValue::Interned(id) => KvValue::Interned(values[id.index()]),
                    plain => plain,
                };
                *op = KvOp::new(op.kind(), objects[op.obj().index()], value);
            }
            let block = next.blocks[b].as_ref().expect("a freshly read history has every block");
            self.push_ops_of(block, (taken - first).min(block.ends.len()), at + first);
        }
        next.clear_for_reuse();
        match repeated {
            Some(name) => Err(name),
            None => Ok(()),
        }
    }

    /// Moves `names` into this history's column for transactions numbered from `at`,
    /// indexing them unless names are not indexed, up to the first one already held: returns
    /// how many were taken and the repeated name, if any.
    fn take_names(&mut self, names: &mut Vec<Scalar>, at: usize) -> (usize, Option<Scalar>) {
        let count = names.len();
        if self.unindexed {
            self.names.append(names);
            return (count, None);
        }
        self.names.reserve(count);
        for (i, name) in names.drain(..).enumerate() {
            match self.index_name(name, TxnId::from_index(at + i)) {
                Ok(name) => self.names.push(name),
                Err(repeated) => return (i, Some(repeated)),
            }
        }
        (count, None)
    }

    /// Copies the operations of the first `count` transactions of `block` (already
    /// renumbered to this history) as transactions `at ..`, a slice per block of this
    /// history they fall in.
    fn push_ops_of(&mut self, block: &OpBlock, count: usize, at: usize) {
        let mut j = 0;
        while j < count {
            let t = at + j;
            let b = t / Self::BLOCK;
            let k = (Self::BLOCK - t % Self::BLOCK).min(count - j);
            let from = if j == 0 { 0 } else { block.ends[j - 1] as usize };
            let to = block.ends[j + k - 1] as usize;
            if b == self.blocks.len() {
                // Sized for this block's share of operations per transaction.
                self.blocks.push(Some(OpBlock {
                    ops: Vec::with_capacity(block_capacity(block.ops.len(), block.ends.len())),
                    ends: Vec::with_capacity(Self::BLOCK),
                }));
            }
            let dst = self.blocks[b].as_mut().expect("blocks are only freed by checkers, after loading");
            let shift = dst.ops.len() as i64 - from as i64;
            dst.ops.extend_from_slice(&block.ops[from..to]);
            dst.ends.extend(block.ends[j..j + k].iter().map(|&e| {
                u32::try_from(i64::from(e) + shift).expect("fewer than 4 billion operations per block")
            }));
            j += k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A history of `n` transactions whose keys, values and sessions first appear in
    /// different halves, with text values, lists and appends.
    fn text(n: usize) -> String {
        let mut out = String::from(
            "{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"key\":3,\"value\":0}]}\n",
        );
        for i in 0..n {
            let key = (i * 7919) % (n / 2 + 1);
            let neg = key + 1;
            out.push_str(&format!(
                "{{\"id\":{i},\"session\":\"s{}\",\"start_ts\":{},\"commit_ts\":{},\"ops\":[{{\"f\":\"r\",\"key\":{key},\"value\":null}},{{\"f\":\"w\",\"key\":\"k{}\",\"value\":\"v{}\"}},{{\"f\":\"append\",\"key\":-{neg},\"value\":{i}}},{{\"f\":\"r\",\"key\":-{neg},\"value\":[{i}, 1.5]}}]}}\n",
                i % (i / 100 + 1),
                2 * i,
                2 * i + 1,
                i % 97,
                i % 89
            ));
        }
        out
    }

    fn v1_text(h: KvHistory) -> String {
        let mut out = Vec::new();
        crate::v1::write_history(&h.into_history(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parts_read_on_threads_give_the_single_readers_history() {
        let text = text(40_000);
        assert!(text.len() as u64 > PARALLEL_BYTES, "{} bytes: too small to split", text.len());
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let one = read_kv_v1(text.as_bytes()).unwrap();
        for threads in [2, 3, 7] {
            let bounds = split_points(file.path(), text.len() as u64, threads).unwrap();
            assert_eq!(bounds.len(), threads + 1, "{bounds:?}");
            assert!(bounds[1..threads].iter().all(|&b| text.as_bytes()[b as usize - 1] == b'\n'));
            let many = read_kv_v1_file(file.path(), threads).unwrap();
            assert_eq!(many.dict().object_count(), one.dict().object_count());
            assert_eq!(many.dict().value_count(), one.dict().value_count());
            assert_eq!(many.dict().session_count(), one.dict().session_count());
            for t in one.txn_ids() {
                assert_eq!(many.ops(t), one.ops(t), "{t:?}");
                assert_eq!(many.session(t), one.session(t));
            }
            assert_eq!(v1_text(many), v1_text(one.clone()));
        }
    }

    #[test]
    fn chunks_appended_in_order_give_the_single_readers_history() {
        let text = text(3_000);
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let one = read_kv_v1(text.as_bytes()).unwrap();
        let want = v1_text(one.clone());
        for (threads, chunk) in [(1, 1 << 20), (2, 1), (2, 97), (3, 4096), (2, 100_000), (2, 1 << 30)] {
            let mut chunks = read_kv_v1_chunks(file.path(), threads, chunk).unwrap();
            let mut whole = chunks.next().unwrap().unwrap();
            let mut count = 1;
            // Every other chunk is appended by value; the rest are emptied and handed back,
            // so later chunks are read into recycled memory.
            while let Some(part) = chunks.next() {
                let mut part = part.unwrap();
                if count % 2 == 0 {
                    whole.append(part).unwrap();
                } else {
                    whole.append_from(&mut part).unwrap();
                    assert!(part.is_empty());
                    chunks.recycle(part);
                }
                count += 1;
            }
            let expected = (text.len() as u64).div_ceil(chunk) as usize;
            assert_eq!(count, expected, "{threads} threads, chunks of {chunk} bytes");
            assert_eq!(whole.len(), one.len());
            assert_eq!(v1_text(whole), want, "{threads} threads, chunks of {chunk} bytes");
        }
    }

    #[test]
    fn chunks_across_blocks_with_real_times_give_the_single_readers_history() {
        // 40,000 transactions span three operation blocks; only those after 25,000 carry
        // real times, so the column starts in the middle of a chunk.
        let text: String = text(40_000)
            .lines()
            .enumerate()
            .map(|(i, line)| match i {
                i if i > 25_000 => {
                    format!("{{\"invoked_at\":{i},\"completed_at\":{},{}\n", i + 3, &line[1..])
                }
                _ => format!("{line}\n"),
            })
            .collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let one = read_kv_v1(text.as_bytes()).unwrap();
        assert_eq!(one.real_time(TxnId::from_index(30_000)).map(|r| r.invoked_at), Some(30_001));
        let want = v1_text(one.clone());
        for (threads, chunk) in [(2, 250_000), (3, 1 << 20), (2, 7_777_777)] {
            let mut chunks = read_kv_v1_chunks(file.path(), threads, chunk).unwrap();
            let mut whole = chunks.next().unwrap().unwrap();
            while let Some(part) = chunks.next() {
                let mut part = part.unwrap();
                whole.append_from(&mut part).unwrap();
                chunks.recycle(part);
            }
            assert!(whole.held_blocks() >= 3);
            for t in one.txn_ids() {
                assert_eq!(whole.ops(t), one.ops(t), "{t:?}");
                assert_eq!(whole.real_time(t), one.real_time(t), "{t:?}");
            }
            assert_eq!(v1_text(whole), want, "{threads} threads, chunks of {chunk} bytes");
        }
    }

    #[test]
    fn an_appended_repeat_keeps_the_transactions_before_it() {
        let mut first =
            read_kv_v1("{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1}]}\n".as_bytes())
                .unwrap();
        let next = KvV1Reader::continuing(
            "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":2,\"value\":2}]}\n\
             {\"id\":1,\"session\":2,\"ops\":[]}\n{\"id\":3,\"session\":1,\"ops\":[]}\n"
                .as_bytes(),
        );
        let mut next = next;
        while next.next_txn().unwrap().is_some() {}
        assert_eq!(first.append(next.into_history()), Err(Scalar::Int(1)));
        assert_eq!(first.len(), 2);
        assert_eq!(first.name(TxnId::from_index(1)), &Scalar::Int(2));
        assert_eq!(first.ops(TxnId::from_index(1)).len(), 1);
        assert_eq!(first.txn_by_name(&Scalar::Int(2)), Some(TxnId::from_index(1)));
    }

    #[test]
    fn a_malformed_chunk_fails_and_ends_the_chunks() {
        let mut text = text(3_000);
        text.push_str("{\"id\":\"x\",\"session\":1,\"ops\":[}\n");
        text.push_str(&"{\"id\":\"y\",\"session\":1,\"ops\":[]}\n".repeat(2_000));
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let items: Vec<_> = read_kv_v1_chunks(file.path(), 2, 50_000).unwrap().collect();
        assert_eq!(items.last().map(Result::is_err), Some(true));
        assert!(items[..items.len() - 1].iter().all(Result::is_ok));
        assert!(items.len() < (text.len() as u64).div_ceil(50_000) as usize);
    }

    #[test]
    fn errors_are_the_single_readers() {
        let mut text = text(40_000);
        // A repeated id in the second half, then a malformed line after it.
        text.push_str("{\"id\":5,\"session\":1,\"ops\":[]}\n{\"id\":\"x\",\"session\":1,\"ops\":[}\n");
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let want = read_kv_v1(text.as_bytes()).unwrap_err().to_string();
        assert!(want.starts_with("line 40002: id: transaction id 5 appears twice"), "{want}");
        assert_eq!(read_kv_v1_file(file.path(), 2).unwrap_err().to_string(), want);
    }
}
