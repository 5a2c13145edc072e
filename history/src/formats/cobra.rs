//! Cobra's binary client logs: one file per client (`T<n>.log`), big-endian records
//! (Java `DataOutputStream`):
//!
//! | record | bytes |
//! |---|---|
//! | `S` txn start | `'S'`, txn id `i64` |
//! | `W` write | `'W'`, write id `i64`, key `i64`, value hash `i64` |
//! | `R` read | `'R'`, writer txn id `i64`, write id `i64`, key `i64`, value hash `i64` |
//! | `C` commit | `'C'`, txn id `i64` |
//!
//! Write ids are unique, so a version's value in the model is its write id. A read whose
//! writer and write id are [`COBRA_INIT_ID`] saw the initial version (the key's initial value
//! becomes `COBRA_INIT_ID`); [`COBRA_NULL_ID`] means the key did not exist (an absent read).
//! Garbage-collection reads (Cobra's GC markers) are left out and counted in the notes.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::kvutil;
use super::Imported;
use crate::model::KV_TABLE;
use crate::{FormatError, History, ObjId, Op, Scalar, Status, Transaction, Value, ValueId};

const FORMAT: &str = "cobra";

/// Cobra's id of the initial transaction and of its writes (`0xbebeebee`).
pub const COBRA_INIT_ID: i64 = 0xbebe_ebee;
/// Cobra's id for "no writer": the key did not exist (`0xdeadbeef`).
pub const COBRA_NULL_ID: i64 = 0xdead_beef;
const GC_WID_TRUE: i64 = 0x2333_2333;
const GC_WID_FALSE: i64 = 0x6666_6666;

/// Reads every `*.log` file of a Cobra log directory, one session per file (files in name
/// order; a file `T7.log`, or King Cobra's `7.log`, is session 7).
///
/// # Errors
/// A [`FormatError::InFile`] naming the file, the byte offset and the record field.
pub fn read_cobra_dir(dir: &Path) -> Result<Imported, FormatError> {
    Ok(read_logs(dir)?.finish())
}

/// Reads every `*.log` file of `dir` into a reader (see [`read_cobra_dir`]).
pub(crate) fn read_logs(dir: &Path) -> Result<CobraReader, FormatError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| FormatError::Io(e).in_file(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort_by_key(|p| session_name(p));
    if files.is_empty() {
        let king_cobra = dir.join("history").is_dir() && dir.join("version_order.vo").is_file();
        let hint = if king_cobra {
            format!(
                " (King Cobra's layout: give {} with --certificate {})",
                dir.join("history").display(),
                dir.join("version_order.vo").display()
            )
        } else {
            String::new()
        };
        return Err(FormatError::invalid(0, "directory", format!("no *.log files{hint}")).in_file(dir));
    }
    let mut reader = CobraReader::new();
    for file in &files {
        let bytes = std::fs::read(file).map_err(|e| FormatError::Io(e).in_file(file))?;
        reader.read_log(session_name(file), &bytes).map_err(|e| e.in_file(file))?;
    }
    Ok(reader)
}

/// Reads one Cobra client log from memory as session `session` (the fuzz target's entry).
///
/// # Errors
/// [`FormatError::Binary`] naming the byte offset and the record field.
pub fn read_cobra_log(session: Scalar, bytes: &[u8]) -> Result<Imported, FormatError> {
    let mut reader = CobraReader::new();
    reader.read_log(session, bytes)?;
    Ok(reader.finish())
}

fn session_name(path: &Path) -> Scalar {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match stem.strip_prefix('T').unwrap_or(&stem).parse::<i64>().ok() {
        Some(n) => Scalar::Int(n),
        None => Scalar::Text(stem.into()),
    }
}

/// Which write put a raw Cobra value on a key: King Cobra's version order names versions by
/// these values, so [`super::king_cobra`] resolves them through this index.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ValueWriter {
    /// One transaction (by its log id) wrote the value.
    One(i64),
    /// Two different transactions wrote it (the first two seen).
    Several(i64, i64),
}

/// Per (object, raw value field of a `W` record), who wrote it.
pub(crate) type WrittenValues = FxHashMap<(ObjId, i64), ValueWriter>;

/// Incremental reader: one call of [`CobraReader::read_log`] per client log.
#[derive(Debug)]
pub(crate) struct CobraReader {
    h: History,
    /// The objects `h.initial` lists, so each read of an initial version is one look-up
    /// (Cobra's fauna-page log spent 16 of 23 s scanning the list, issue 28).
    has_initial: rustc_hash::FxHashSet<ObjId>,
    written: WrittenValues,
    gc_reads: usize,
    unfinished: usize,
}

impl CobraReader {
    pub(crate) fn new() -> Self {
        CobraReader {
            h: History::new(),
            has_initial: rustc_hash::FxHashSet::default(),
            written: WrittenValues::default(),
            gc_reads: 0,
            unfinished: 0,
        }
    }

    /// Reads one client's log as session `session`.
    pub(crate) fn read_log(&mut self, session: Scalar, bytes: &[u8]) -> Result<(), FormatError> {
        let h = &mut self.h;
        let kv = h.intern_table(KV_TABLE);
        let session = h.intern_session(session);
        let mut pos = 0usize;
        let mut current: Option<(i64, Vec<Op>, u64)> = None;
        let bad = |offset: usize, field: &str, message: String| FormatError::Binary {
            offset: offset as u64,
            field: field.to_string(),
            message,
        };
        while pos < bytes.len() {
            let start = pos;
            let tag = bytes[pos];
            let words = match tag {
                b'S' | b'C' => 1,
                b'W' => 3,
                b'R' => 4,
                other => {
                    return Err(bad(
                        start,
                        "record",
                        format!("unknown record type {:?} (S, W, R, C)", char::from(other)),
                    ))
                }
            };
            let record = char::from(tag);
            if bytes.len() - pos - 1 < 8 * words {
                return Err(bad(
                    start,
                    &format!("{record} record"),
                    format!("file ends inside the record ({} of {} bytes)", bytes.len() - pos, 1 + 8 * words),
                ));
            }
            let word = |i: usize| {
                i64::from_be_bytes(bytes[pos + 1 + 8 * i..pos + 9 + 8 * i].try_into().expect("8 bytes"))
            };
            let w: Vec<i64> = (0..words).map(word).collect();
            pos += 1 + 8 * words;
            match tag {
                b'S' => {
                    if let Some((id, _, at)) = &current {
                        return Err(bad(
                            start,
                            "S.txn_id",
                            format!("transaction {id} started at byte {at} has no commit"),
                        ));
                    }
                    current = Some((w[0], Vec::new(), start as u64));
                }
                b'C' => {
                    let Some((id, ops, _)) = current.take() else {
                        return Err(bad(start, "C.txn_id", "commit outside a transaction".into()));
                    };
                    if id != w[0] {
                        return Err(bad(
                            start,
                            "C.txn_id",
                            format!("commits {} but transaction {id} is open", w[0]),
                        ));
                    }
                    h.push_txn(Transaction::new(Scalar::Int(id), session, ops)).map_err(|t| {
                        bad(start, "C.txn_id", format!("transaction {} appears twice", t.name))
                    })?;
                }
                b'W' => {
                    let Some((txn, ops, _)) = current.as_mut() else {
                        return Err(bad(start, "W", "write outside a transaction".into()));
                    };
                    let obj = h.intern_object(kv, Scalar::Int(w[1]));
                    let txn = *txn;
                    self.written
                        .entry((obj, w[2]))
                        .and_modify(|by| {
                            if let ValueWriter::One(first) = *by {
                                if first != txn {
                                    *by = ValueWriter::Several(first, txn);
                                }
                            }
                        })
                        .or_insert(ValueWriter::One(txn));
                    let value = h.intern_value(Value::Scalar(Scalar::Int(w[0])));
                    ops.push(Op::Write { obj, value });
                }
                _ => {
                    let Some((_, ops, _)) = current.as_mut() else {
                        return Err(bad(start, "R", "read outside a transaction".into()));
                    };
                    let (writer, wid, key) = (w[0], w[1], w[2]);
                    let obj = h.intern_object(kv, Scalar::Int(key));
                    let value = if writer == COBRA_INIT_ID || writer == COBRA_NULL_ID {
                        if wid == COBRA_NULL_ID && writer == COBRA_NULL_ID {
                            ValueId::ABSENT
                        } else if wid == COBRA_INIT_ID || wid == COBRA_NULL_ID {
                            let init = h.intern_value(Value::Scalar(Scalar::Int(COBRA_INIT_ID)));
                            if self.has_initial.insert(obj) {
                                h.initial.push((obj, init));
                            }
                            init
                        } else if (wid == GC_WID_TRUE || wid == GC_WID_FALSE) && writer == COBRA_INIT_ID {
                            self.gc_reads += 1;
                            continue;
                        } else {
                            return Err(bad(
                                start,
                                "R.write_id",
                                format!("write id {wid:#x} with the initial/null writer"),
                            ));
                        }
                    } else {
                        h.intern_value(Value::Scalar(Scalar::Int(wid)))
                    };
                    ops.push(Op::Read { obj, value });
                }
            }
        }
        if let Some((id, ops, _)) = current {
            let mut t = Transaction::new(Scalar::Int(id), session, ops);
            t.status = Status::Unknown;
            self.unfinished += 1;
            h.push_txn(t)
                .map_err(|t| bad(pos, "S.txn_id", format!("transaction {} appears twice", t.name)))?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Imported {
        self.finish_with_values().0
    }

    /// The history, and who wrote each raw value (for King Cobra's version order).
    pub(crate) fn finish_with_values(self) -> (Imported, WrittenValues) {
        let mut imported = Imported::plain(self.h);
        if self.gc_reads > 0 {
            imported.notes.push(format!("{} garbage-collection reads were left out", self.gc_reads));
        }
        if self.unfinished > 0 {
            imported
                .notes
                .push(format!("{} transactions have no commit record: status unknown", self.unfinished));
        }
        (imported, self.written)
    }
}

/// Writes a history as Cobra client logs, one `T<session>.log` per session, in `dir`
/// (created if needed; existing `*.log` files there are replaced).
///
/// # Errors
/// [`FormatError::Unsupported`] for anything but integer reads and writes of the kv table,
/// aborted transactions (Cobra logs hold committed ones), non-integer transaction or session
/// ids, and reads of values no transaction wrote.
pub fn write_cobra_dir(h: &History, dir: &Path) -> Result<(), FormatError> {
    let mut writers: FxHashMap<(ObjId, ValueId), i64> = FxHashMap::default();
    for id in h.txn_ids() {
        let t = h.txn(id);
        let Scalar::Int(name) = t.name else {
            return Err(kvutil::unsupported(FORMAT, format!("{}: id is not an integer", h.txn_label(id))));
        };
        for op in &t.ops {
            if let Op::Write { obj, value } = op {
                writers.insert((*obj, *value), name);
            }
        }
    }
    let init = Value::Scalar(Scalar::Int(COBRA_INIT_ID));
    let initial: rustc_hash::FxHashSet<(ObjId, ValueId)> = h.initial.iter().copied().collect();
    std::fs::create_dir_all(dir).map_err(|e| FormatError::Io(e).in_file(dir))?;
    for (s, session) in kvutil::sessions(h).into_iter().enumerate() {
        let name = match h.session_name(crate::SessionId::from_index(s)) {
            Scalar::Int(n) => format!("T{n}.log"),
            other => return Err(kvutil::unsupported(FORMAT, format!("session {other} is not an integer"))),
        };
        let mut buf = Vec::new();
        let last = session.last().copied();
        for id in session {
            let t = h.txn(id);
            if t.status == Status::Unknown && Some(id) != last {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{}: status unknown but not the last of its session (only a log's end can lack a commit)", h.txn_label(id)),
                ));
            }
            if t.status == Status::Aborted {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{}: aborted (Cobra logs hold committed transactions)", h.txn_label(id)),
                ));
            }
            let Scalar::Int(txn) = t.name else { unreachable!("checked above") };
            buf.push(b'S');
            buf.extend_from_slice(&txn.to_be_bytes());
            for (i, op) in t.ops.iter().enumerate() {
                let at = kvutil::at_op(h, id, i);
                match op {
                    Op::Write { obj, value } => {
                        let key = kvutil::int_key(h, *obj, FORMAT, &at)?;
                        let wid = kvutil::int_value(h, *value, FORMAT, &at)?;
                        buf.push(b'W');
                        for w in [wid, key, wid] {
                            buf.extend_from_slice(&w.to_be_bytes());
                        }
                    }
                    Op::Read { obj, value } => {
                        let key = kvutil::int_key(h, *obj, FORMAT, &at)?;
                        let is_initial = initial.contains(&(*obj, *value));
                        let (writer, wid) = if *value == ValueId::ABSENT && !is_initial {
                            (COBRA_NULL_ID, COBRA_NULL_ID)
                        } else if is_initial {
                            if h.value(*value) != &init {
                                return Err(kvutil::unsupported(
                                    FORMAT,
                                    format!("{at}: initial value other than Cobra's initial id"),
                                ));
                            }
                            (COBRA_INIT_ID, COBRA_INIT_ID)
                        } else {
                            let wid = kvutil::int_value(h, *value, FORMAT, &at)?;
                            let writer = writers.get(&(*obj, *value)).copied().ok_or_else(|| {
                                kvutil::unsupported(
                                    FORMAT,
                                    format!("{at}: reads a value no transaction wrote"),
                                )
                            })?;
                            (writer, wid)
                        };
                        buf.push(b'R');
                        for w in [writer, wid, key, wid] {
                            buf.extend_from_slice(&w.to_be_bytes());
                        }
                    }
                    _ => {
                        return Err(kvutil::unsupported(FORMAT, format!("{at}: only item reads and writes")))
                    }
                }
            }
            if t.status == Status::Committed {
                buf.push(b'C');
                buf.extend_from_slice(&txn.to_be_bytes());
            }
        }
        let path = dir.join(name);
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(&buf))
            .map_err(|e| FormatError::Io(e).in_file(&path))?;
    }
    Ok(())
}
