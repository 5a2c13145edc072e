//! King Cobra's version order file (`.vo`): for each key, the values it took, oldest first.
//!
//! King Cobra (the Emme paper's Cobra extension) reads it beside a Cobra log directory. The
//! layout is big-endian, every integer an `i64`:
//!
//! | field | bytes |
//! |---|---|
//! | number of keys | `i64` |
//! | per key | key `i64`, number of versions `i64`, then that many version values `i64` |
//!
//! A version is named by the *value* its `W` record wrote (King Cobra requires values unique
//! per key), so reading one resolves each value to the transaction that wrote it and yields a
//! certificate version order. King Cobra accepts a partial order, and so does isocert: a
//! committed write the file leaves out is reported in a note, and the checkers that search
//! version orders (cobra, polysi) fix the listed orders and search the rest, while Emme
//! reports the missing versions; versions no log write produced are skipped and counted (as
//! King Cobra skips them).

use std::io::Write;
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};

use super::cobra::{read_logs, CobraReader, ValueWriter, WrittenValues, COBRA_INIT_ID};
use super::kvutil;
use super::Imported;
use crate::model::KV_TABLE;
use crate::{Certificate, FormatError, History, ObjId, Op, Scalar, Status, TxnId, Value};

const FORMAT: &str = "king-cobra";

/// One key's entry of a version order file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyVersions {
    /// The key, as the Cobra logs spell it.
    pub key: i64,
    /// The values the key took, oldest first.
    pub versions: Vec<i64>,
    /// Where the entry starts in the file (for error messages).
    pub offset: u64,
}

/// Parses the bytes of a King Cobra `.vo` file.
///
/// # Errors
/// [`FormatError::Binary`] naming the byte offset and the field: a file that ends inside a
/// number, a negative count, a count larger than the rest of the file, a key listed twice, a
/// value listed twice for one key, or bytes after the last key.
pub fn parse_king_cobra_version_order(bytes: &[u8]) -> Result<Vec<KeyVersions>, FormatError> {
    let mut pos = 0usize;
    let mut next = |field: &str| -> Result<(usize, i64), FormatError> {
        let at = pos;
        let word = bytes.get(at..at + 8).ok_or_else(|| FormatError::Binary {
            offset: at as u64,
            field: field.to_string(),
            message: format!("file ends inside the number ({} of 8 bytes)", bytes.len() - at),
        })?;
        pos += 8;
        Ok((at, i64::from_be_bytes(word.try_into().expect("8 bytes"))))
    };
    let bad = |offset: usize, field: &str, message: String| FormatError::Binary {
        offset: offset as u64,
        field: field.to_string(),
        message,
    };
    let (at, count) = next("key_count")?;
    let remaining_words = |at: usize| (bytes.len().saturating_sub(at + 8) / 8) as i64;
    if count < 0 || count > remaining_words(at) / 2 {
        return Err(bad(
            at,
            "key_count",
            format!("{count} keys cannot fit in the {} bytes that follow", bytes.len() - 8),
        ));
    }
    let mut keys = Vec::with_capacity(count as usize);
    let mut seen: FxHashMap<i64, usize> = FxHashMap::default();
    for _ in 0..count {
        let (offset, key) = next("key")?;
        if let Some(first) = seen.insert(key, offset) {
            return Err(bad(offset, "key", format!("key {key} is listed twice (first at byte {first})")));
        }
        let (at, n) = next("version_count")?;
        if n < 0 || n > remaining_words(at) {
            return Err(bad(
                at,
                "version_count",
                format!("key {key} declares {n} versions but {} bytes follow", bytes.len() - at - 8),
            ));
        }
        let mut versions = Vec::with_capacity(n as usize);
        let mut distinct = FxHashSet::default();
        for _ in 0..n {
            let (at, value) = next("version")?;
            if !distinct.insert(value) {
                return Err(bad(at, "version", format!("key {key} lists value {value} twice")));
            }
            versions.push(value);
        }
        keys.push(KeyVersions { key, versions, offset: offset as u64 });
    }
    if pos < bytes.len() {
        return Err(bad(
            pos,
            "end",
            format!("{} bytes follow the last of the {count} keys", bytes.len() - pos),
        ));
    }
    Ok(keys)
}

/// Reads a Cobra log directory together with King Cobra's version order file `vo`; the
/// version order becomes [`Imported::certificate`].
///
/// # Errors
/// The log errors of [`super::read_cobra_dir`]; the `.vo` errors of
/// [`parse_king_cobra_version_order`] and a value two transactions wrote, each naming the
/// `.vo` file. A committed write the order leaves out is a note, not an error.
pub fn read_cobra_dir_with_version_order(dir: &Path, vo: &Path) -> Result<Imported, FormatError> {
    let reader = read_logs(dir)?;
    let bytes = std::fs::read(vo).map_err(|e| FormatError::Io(e).in_file(vo))?;
    with_version_order(reader, &bytes).map_err(|e| e.in_file(vo))
}

/// Reads one Cobra client log and a version order from memory (the fuzz target's entry).
///
/// # Errors
/// As [`read_cobra_dir_with_version_order`], without file names.
pub fn read_cobra_log_with_version_order(
    session: Scalar,
    log: &[u8],
    vo: &[u8],
) -> Result<Imported, FormatError> {
    let mut reader = CobraReader::new();
    reader.read_log(session, log)?;
    with_version_order(reader, vo)
}

fn with_version_order(reader: CobraReader, vo: &[u8]) -> Result<Imported, FormatError> {
    let keys = parse_king_cobra_version_order(vo)?;
    let (mut imported, written) = reader.finish_with_values();
    let (certificate, notes) = resolve(&imported.history, &written, &keys)?;
    imported.certificate = Some(certificate);
    imported.notes.extend(notes);
    Ok(imported)
}

/// Turns the file's values into the transactions that wrote them, and checks that every
/// committed write is ordered.
fn resolve(
    h: &History,
    written: &WrittenValues,
    keys: &[KeyVersions],
) -> Result<(Certificate, Vec<String>), FormatError> {
    let kv = h.table_by_name(KV_TABLE);
    let txn = |name: i64| h.txn_by_name(&Scalar::Int(name)).expect("a writer of the logs is a transaction");
    let initial: FxHashMap<ObjId, crate::ValueId> = h.initial.iter().copied().collect();
    let init_value = h.value_id(&Value::Scalar(Scalar::Int(COBRA_INIT_ID)));
    let (mut unknown_keys, mut skipped) = (0usize, 0usize);
    let mut order: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for entry in keys {
        let Some(obj) = kv.and_then(|kv| h.object_by_key(kv, &Scalar::Int(entry.key))) else {
            unknown_keys += 1;
            continue;
        };
        let mut writers: Vec<TxnId> = Vec::with_capacity(entry.versions.len());
        let mut placed: FxHashSet<TxnId> = FxHashSet::default();
        for (i, &value) in entry.versions.iter().enumerate() {
            let at = entry.offset + 16 + 8 * i as u64;
            let bad = |message: String| FormatError::Binary { offset: at, field: "version".into(), message };
            match written.get(&(obj, value)) {
                Some(ValueWriter::One(name)) => {
                    let t = txn(*name);
                    if writers.last() == Some(&t) {
                        continue;
                    }
                    if !placed.insert(t) {
                        return Err(bad(format!(
                            "key {}: value {value} puts {} in the order twice, with other versions between",
                            entry.key,
                            h.txn_label(t)
                        )));
                    }
                    writers.push(t);
                }
                Some(ValueWriter::Several(a, b)) => {
                    return Err(bad(format!(
                        "key {}: value {value} was written by both {} and {}; King Cobra names versions \
                         by value, so values must be unique per key",
                        entry.key,
                        h.txn_label(txn(*a)),
                        h.txn_label(txn(*b))
                    )))
                }
                None if value == COBRA_INIT_ID
                    && init_value.is_some()
                    && initial.get(&obj) == init_value.as_ref() =>
                {
                    if i != 0 {
                        return Err(bad(format!(
                            "key {}: the initial value {COBRA_INIT_ID:#x} must come first, it is at position {i}",
                            entry.key
                        )));
                    }
                }
                None => skipped += 1,
            }
        }
        if !writers.is_empty() {
            order.insert(obj, writers);
        }
    }
    let mut notes: Vec<String> = partial_note(h, &order).into_iter().collect();
    if unknown_keys > 0 {
        notes.push(format!("{unknown_keys} keys of the version order do not occur in the logs (skipped)"));
    }
    if skipped > 0 {
        notes.push(format!(
            "{skipped} versions of the version order match no write in the logs (skipped, as King Cobra skips them)"
        ));
    }
    Ok((Certificate { version_order: Some(order), ..Certificate::default() }, notes))
}

/// A note naming the first committed write (in file order) that the order has no place
/// for, and how many there are; `None` when the order is complete.
fn partial_note(h: &History, order: &FxHashMap<ObjId, Vec<TxnId>>) -> Option<String> {
    let placed: FxHashSet<(ObjId, TxnId)> =
        order.iter().flat_map(|(&obj, writers)| writers.iter().map(move |&t| (obj, t))).collect();
    let mut missing: FxHashSet<(ObjId, TxnId)> = FxHashSet::default();
    let mut first = None;
    for t in h.txn_ids().filter(|&t| h.txn(t).status == Status::Committed) {
        for op in &h.txn(t).ops {
            if let Op::Write { obj, .. } = op {
                if !placed.contains(&(*obj, t)) && missing.insert((*obj, t)) {
                    first.get_or_insert((*obj, t));
                }
            }
        }
    }
    let (obj, t) = first?;
    let more = match missing.len() {
        1 => String::new(),
        n => format!(" and {} more committed writes", n - 1),
    };
    Some(format!(
        "the version order is partial: it has no place for {}'s write of key {}{more}; the listed orders are \
         fixed and the rest is searched (--checker cobra or polysi, which auto picks)",
        h.txn_label(t),
        h.object(obj).key
    ))
}

/// Writes the certificate's version order as a King Cobra `.vo` file: each version is named by
/// the value its transaction last wrote to the key (the write id in logs isocert writes).
///
/// # Errors
/// [`FormatError::Unsupported`] when the certificate has no version order, a key or value is
/// not an integer, or an ordered transaction has no write of the key (appends, deletes and
/// predicate writes have no Cobra form).
pub fn write_king_cobra_version_order<W: Write>(
    h: &History,
    cert: &Certificate,
    out: &mut W,
) -> Result<(), FormatError> {
    let order = cert
        .version_order
        .as_ref()
        .ok_or_else(|| kvutil::unsupported(FORMAT, "the certificate has no version order"))?;
    let mut objects: Vec<&ObjId> = order.keys().collect();
    objects.sort_unstable();
    let mut buf = Vec::with_capacity(8 + objects.len() * 24);
    buf.extend_from_slice(&(objects.len() as i64).to_be_bytes());
    for &obj in objects {
        let label = h.object_label(obj);
        let key = kvutil::int_key(h, obj, FORMAT, &label)?;
        buf.extend_from_slice(&key.to_be_bytes());
        buf.extend_from_slice(&(order[&obj].len() as i64).to_be_bytes());
        for &t in &order[&obj] {
            let last = h.txn(t).ops.iter().rev().find_map(|op| match op {
                Op::Write { obj: o, value } if *o == obj => Some(*value),
                _ => None,
            });
            let value = last.ok_or_else(|| {
                kvutil::unsupported(FORMAT, format!("{} has no item write of {label}", h.txn_label(t)))
            })?;
            let at = format!("{}'s version of {label}", h.txn_label(t));
            buf.extend_from_slice(&kvutil::int_value(h, value, FORMAT, &at)?.to_be_bytes());
        }
    }
    out.write_all(&buf)?;
    Ok(())
}
