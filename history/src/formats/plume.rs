//! PolySI / Plume / IsoVista / AWDIT text: one operation per line, `r(key,value,session,txn)`
//! or `w(key,value,session,txn)`.
//!
//! Keys and values are non-negative integers; every key starts at 0 (the tools' implicit
//! initial transaction writes 0 everywhere). IsoVista writes that transaction out: its text
//! histories start with transaction 0 of session 0 writing 0 to every key, which is read as
//! the initial state, not as a transaction (as AWDIT maps Cobra's initial marker), since a
//! transaction rewriting the initial value would make every read of 0 ambiguous. AWDIT marks
//! writes of aborted transactions with transaction id `-1`; they become one aborted
//! transaction named `-1`.
//!
//! The reader keeps the file's operations in three flat arrays (12 bytes an operation while
//! keys and values fit in 32 bits) until the last line, then stores them transaction by
//! transaction in a [`KvHistory`] sized exactly ([`read_plume_kv`]: 16 bytes an operation,
//! integers inline, no slack): a vector per transaction growing line by line took 24 bytes
//! an operation plus the doubling's slack, and the doubled transaction vector 6 MB of slack
//! on 100,000 transactions (docs/PERFORMANCE.md, "Where the bytes go"). The general model
//! ([`read_plume`]) is that history converted, so there is one parser.

use std::io::{BufRead, Write};

use rustc_hash::FxHashMap;

use super::kvutil::{self, IntOp};
use super::Imported;
use crate::{FormatError, History, KvHistory, KvOp, KvOpKind, KvTxnFields, KvValue, Scalar, Status, TxnId};

const FORMAT: &str = "plume";

/// A line's flag in [`Lines::slot`]: the operation is a write.
const WRITE: u32 = 1 << 31;

/// The file's operations in file order, before they are grouped into transactions.
#[derive(Default)]
struct Lines {
    /// Per operation, its transaction's index in `txns`, with [`WRITE`] set for a write.
    slot: Vec<u32>,
    /// Per operation, the key.
    key: Column,
    /// Per operation, the value.
    value: Column,
}

/// One field's non-negative integers: 4 bytes each while every one fits in a `u32` (keys
/// and values of generated and recorded histories do), 8 bytes from the first that does not.
#[derive(Debug)]
enum Column {
    Narrow(Vec<u32>),
    Wide(Vec<i64>),
}

impl Default for Column {
    fn default() -> Self {
        Column::Narrow(Vec::new())
    }
}

impl Column {
    fn push(&mut self, v: i64) {
        match self {
            Column::Narrow(vs) => match u32::try_from(v) {
                Ok(n) => vs.push(n),
                Err(_) => {
                    let mut wide: Vec<i64> = Vec::with_capacity(vs.len() + 1);
                    wide.extend(vs.iter().map(|&n| i64::from(n)));
                    wide.push(v);
                    *self = Column::Wide(wide);
                }
            },
            Column::Wide(vs) => vs.push(v),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            Column::Narrow(vs) => i64::from(vs[i]),
            Column::Wide(vs) => vs[i],
        }
    }
}

impl Lines {
    /// The operation of line `entry` of [`Lines::grouped`]'s order (its index, with
    /// [`WRITE`] set for a write).
    fn op(&self, entry: u32) -> IntOp {
        let i = (entry & !WRITE) as usize;
        let (key, value) = (self.key.get(i), self.value.get(i));
        if entry & WRITE != 0 {
            IntOp::Write { key, value }
        } else {
            IntOp::Read { key, value }
        }
    }

    /// The operation indexes grouped by transaction, each group in file order, each with
    /// [`WRITE`] set for a write: `order` and, per transaction, where its group starts
    /// (`starts[slot]..starts[slot + 1]`). The per-line slots are freed: the order carries
    /// all they held that is still needed, and they are not held while the history is built.
    fn grouped(&mut self, txns: usize) -> (Vec<u32>, Vec<u32>) {
        let mut starts = vec![0u32; txns + 1];
        for &s in &self.slot {
            starts[(s & !WRITE) as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; self.slot.len()];
        for (i, &s) in self.slot.iter().enumerate() {
            let slot = (s & !WRITE) as usize;
            order[next[slot] as usize] = i as u32 | (s & WRITE);
            next[slot] += 1;
        }
        self.slot = Vec::new();
        (order, starts)
    }
}

/// Reads a Plume/PolySI text history into the general model: [`read_plume_kv`], then
/// [`KvHistory::into_history`] (which interns every value in file order, so the ids are
/// those a reader interning as it goes would give).
///
/// # Errors
/// A [`FormatError`] naming the line and the field (`key`, `value`, `session`, `txn`).
pub fn read_plume<R: BufRead>(input: R) -> Result<Imported, FormatError> {
    let (kv, notes) = read_plume_kv(input)?;
    let mut imported = Imported::plain(kv.into_history());
    imported.notes = notes;
    Ok(imported)
}

/// Reads a Plume/PolySI text history into the compact key-value model the checkers take
/// (16 bytes an operation, values inline), with the notes the reader made (IsoVista's
/// explicit initial transaction read as the initial state). Every key starts at 0
/// ([`KvHistory::set_default_initial`]); the columns and operation blocks are sized
/// exactly, since the whole file is grouped by transaction before the first is stored.
///
/// # Errors
/// A [`FormatError`] naming the line and the field (`key`, `value`, `session`, `txn`).
pub fn read_plume_kv<R: BufRead>(input: R) -> Result<(KvHistory, Vec<String>), FormatError> {
    let (mut lines, txns) = read_lines(input)?;
    let (order, starts) = lines.grouped(txns.len());
    let group = |slot: usize| &order[starts[slot] as usize..starts[slot + 1] as usize];
    let mut notes = Vec::new();
    let mut first = 0;
    if let Some(&(txn, session)) = txns.first() {
        let events: Vec<IntOp> = group(0).iter().map(|&i| lines.op(i)).collect();
        if explicit_initial(txn, session, &events) {
            first = 1;
            notes.push(format!(
                "transaction 0 of session 0 writes 0 to {} key(s) and nothing else: read as the initial state \
                 (IsoVista's explicit initial transaction), not as a transaction",
                events.len()
            ));
        }
    }
    let mut kv = KvHistory::new();
    kv.reserve_exact((first..txns.len()).map(|slot| group(slot).len()));
    let mut ops = Vec::new();
    for (slot, &(txn, session)) in txns.iter().enumerate().skip(first) {
        ops.clear();
        ops.extend(group(slot).iter().map(|&i| kv_op(&mut kv, lines.op(i))));
        let fields = KvTxnFields {
            name: Scalar::Int(txn),
            session: kv.dict_mut().intern_session(Scalar::Int(session)),
            status: if txn == -1 { Status::Aborted } else { Status::Committed },
            start: None,
            commit: None,
            real_time: None,
        };
        kv.push_txn(fields, &ops)
            .map_err(|name| FormatError::invalid(0, "txn", format!("duplicate transaction {name}")))?;
    }
    kv.set_default_initial(Some(&Scalar::Int(0)));
    Ok((kv, notes))
}

/// An integer item operation in the key-value model, its key interned as a kv object.
fn kv_op(kv: &mut KvHistory, op: IntOp) -> KvOp {
    let (kind, key, value) = match op {
        IntOp::Read { key, value } => (KvOpKind::Read, key, value),
        IntOp::Write { key, value } => (KvOpKind::Write, key, value),
    };
    KvOp::new(kind, kv.kv_object(key), KvValue::Int(value))
}

/// Parses the file's lines into flat columns, with, per transaction in order of first
/// appearance, its id and session.
fn read_lines<R: BufRead>(mut input: R) -> Result<(Lines, Vec<(i64, i64)>), FormatError> {
    // Per transaction in order of first appearance: its id and session.
    let mut txns: Vec<(i64, i64)> = Vec::new();
    let mut index: FxHashMap<i64, u32> = FxHashMap::default();
    let mut lines = Lines::default();
    let mut line = String::new();
    let mut line_no = 0;
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(|e| FormatError::reading_line(e, line_no + 1))? == 0 {
            break;
        }
        line_no += 1;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let (op, fields) = parse_line(text).map_err(|(field, m)| FormatError::invalid(line_no, field, m))?;
        let [key, value, session, txn] = fields;
        check_fields(op, fields).map_err(|(field, m)| FormatError::invalid(line_no, field, m))?;
        let slot = *index.entry(txn).or_insert_with(|| {
            txns.push((txn, session));
            (txns.len() - 1) as u32
        });
        if txns[slot as usize].1 != session && txn != -1 {
            return Err(FormatError::invalid(
                line_no,
                "session",
                format!("transaction {txn} was in session {} before, now {session}", txns[slot as usize].1),
            ));
        }
        if slot & WRITE != 0 {
            return Err(FormatError::invalid(line_no, "txn", "more than 2^31 transactions"));
        }
        if lines.slot.len() >= WRITE as usize {
            return Err(FormatError::invalid(line_no, "txn", "more than 2^31 operations"));
        }
        lines.slot.push(if op == 'r' { slot } else { slot | WRITE });
        lines.key.push(key);
        lines.value.push(value);
    }
    Ok((lines, txns))
}

/// Checks a parsed line's fields: key, value and session non-negative, the transaction
/// non-negative or -1 (aborted writes, never a read).
fn check_fields(op: char, [key, value, session, txn]: [i64; 4]) -> Result<(), LineError> {
    if key < 0 || value < 0 || session < 0 {
        let field = if key < 0 {
            "key"
        } else if value < 0 {
            "value"
        } else {
            "session"
        };
        return Err((field, "must be a non-negative integer".into()));
    }
    if txn < -1 {
        return Err(("txn", "must be a non-negative integer (or -1: aborted)".into()));
    }
    if txn == -1 && op == 'r' {
        return Err(("txn", "-1 marks aborted writes; a read cannot have it".into()));
    }
    Ok(())
}

/// Whether the file's first transaction is IsoVista's explicit initial one: transaction 0 of
/// session 0, writing 0 to distinct keys and reading nothing. Every key starts at 0 anyway,
/// so it is the initial state.
fn explicit_initial(txn: i64, session: i64, events: &[IntOp]) -> bool {
    let mut keys = rustc_hash::FxHashSet::default();
    txn == 0
        && session == 0
        && !events.is_empty()
        && events.iter().all(|e| matches!(e, IntOp::Write { key, value: 0 } if keys.insert(*key)))
}

type LineError = (&'static str, String);

fn parse_line(text: &str) -> Result<(char, [i64; 4]), LineError> {
    let op = match text.as_bytes()[0] {
        b'r' => 'r',
        b'w' => 'w',
        _ => return Err(("op", format!("expected r(...) or w(...), found {:?}", crate::quote_capped(text)))),
    };
    let inner = text[1..].strip_prefix('(').and_then(|t| t.strip_suffix(')')).ok_or_else(|| {
        ("op", format!("expected {op}(key,value,session,txn), found {:?}", crate::quote_capped(text)))
    })?;
    const NAMES: [&str; 4] = ["key", "value", "session", "txn"];
    let mut out = [0i64; 4];
    let mut parts = inner.split(',');
    for (slot, name) in out.iter_mut().zip(NAMES) {
        let part = parts.next().ok_or_else(|| (name, "missing".to_string()))?.trim();
        *slot = part.parse().map_err(|_| (name, format!("{part:?} is not an integer")))?;
    }
    if parts.next().is_some() {
        return Err(("op", "more than four fields".into()));
    }
    Ok((op, out))
}

/// Writes a history as Plume/PolySI text; returns a note when reads of aborted transactions
/// were left out (the format keeps only the writes of aborted transactions, under id -1).
///
/// # Errors
/// [`FormatError::Unsupported`] for anything but integer item reads and writes of the kv
/// table, unknown-status transactions, negative or non-integer ids, and initial values other
/// than 0.
pub fn write_plume<W: Write>(h: &History, out: &mut W) -> Result<Vec<String>, FormatError> {
    kvutil::check_initial_zero(h, FORMAT)?;
    let mut dropped = 0usize;
    for id in h.txn_ids() {
        let t = h.txn(id);
        let name = match (t.status, &t.name) {
            (Status::Aborted, _) => -1,
            (Status::Unknown, _) => {
                return Err(kvutil::unsupported(FORMAT, format!("{}: status unknown", h.txn_label(id))))
            }
            (Status::Committed, Scalar::Int(n)) if *n >= 0 => *n,
            _ => {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{}: id is not a non-negative integer", h.txn_label(id)),
                ))
            }
        };
        let session = session_number(h, id)?;
        for op in kvutil::int_ops(h, id, FORMAT)? {
            let (c, key, value) = match op {
                IntOp::Read { key, value } => ('r', key, value),
                IntOp::Write { key, value } => ('w', key, value),
            };
            if t.status == Status::Aborted && c == 'r' {
                dropped += 1;
                continue;
            }
            if key < 0 || value < 0 {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!("{}: negative key or value", h.txn_label(id)),
                ));
            }
            writeln!(out, "{c}({key},{value},{session},{name})")?;
        }
    }
    Ok(if dropped > 0 {
        vec![format!("{dropped} reads of aborted transactions were left out")]
    } else {
        Vec::new()
    })
}

fn session_number(h: &History, id: TxnId) -> Result<i64, FormatError> {
    match h.session_name(h.txn(id).session) {
        Scalar::Int(s) if *s >= 0 => Ok(*s),
        other => Err(kvutil::unsupported(
            FORMAT,
            format!("{}: session {other} is not a non-negative integer", h.txn_label(id)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjId, Transaction, Value, ValueId};

    /// The reader as it was before it read into a [`KvHistory`]: lines grouped by
    /// transaction, every operation built as an [`crate::Op`] and every value interned as
    /// it comes, then the initial value 0 for every key. The reference [`read_plume`] must
    /// match exactly.
    fn reference_read_plume(input: &[u8]) -> Result<Imported, FormatError> {
        let (mut lines, txns) = read_lines(input)?;
        let mut h = History::new();
        let (order, starts) = lines.grouped(txns.len());
        let ops_of = |slot: usize| order[starts[slot] as usize..starts[slot + 1] as usize].iter();
        let mut notes = Vec::new();
        let mut first = 0;
        if let Some(&(txn, session)) = txns.first() {
            let events: Vec<IntOp> = ops_of(0).map(|&i| lines.op(i)).collect();
            if explicit_initial(txn, session, &events) {
                first = 1;
                notes.push(format!(
                    "transaction 0 of session 0 writes 0 to {} key(s) and nothing else: read as the initial \
                     state (IsoVista's explicit initial transaction), not as a transaction",
                    events.len()
                ));
            }
        }
        for (slot, &(txn, session)) in txns.iter().enumerate().skip(first) {
            let session = h.intern_session(Scalar::Int(session));
            let mut ops = Vec::new();
            for &i in ops_of(slot) {
                kvutil::push_int_op(&mut h, &mut ops, lines.op(i));
            }
            let mut t = Transaction::new(Scalar::Int(txn), session, ops);
            if txn == -1 {
                t.status = Status::Aborted;
            }
            h.push_txn(t)
                .map_err(|t| FormatError::invalid(0, "txn", format!("duplicate transaction {}", t.name)))?;
        }
        let zero = h.intern_value(Value::Scalar(Scalar::Int(0)));
        let has: rustc_hash::FxHashSet<ObjId> = h.initial.iter().map(|(o, _)| *o).collect();
        for i in 0..h.object_count() {
            let obj = ObjId::from_index(i);
            if !has.contains(&obj) {
                h.initial.push((obj, zero));
            }
        }
        let mut imported = Imported::plain(h);
        imported.notes = notes;
        Ok(imported)
    }

    /// Everything a reader of the history can see, ids included.
    fn shown(h: &History) -> String {
        let values: Vec<&Value> = (0..h.value_count()).map(|v| h.value(ValueId::from_index(v))).collect();
        let objects: Vec<_> = (0..h.object_count()).map(|o| h.object(ObjId::from_index(o))).collect();
        let sessions: Vec<_> =
            (0..h.session_count()).map(|s| h.session_name(crate::SessionId::from_index(s))).collect();
        let names: Vec<_> = h.txns.iter().map(|t| h.txn_by_name(&t.name)).collect();
        let mut v1 = Vec::new();
        crate::v1::write_history(h, &mut v1).expect("writing to memory");
        format!(
            "txns {:?}\ninitial {:?}\nvalues {values:?}\nobjects {objects:?}\ntables {:?}\nsessions {sessions:?}\n\
             by name {names:?}\nmeta {:?} {:?} {:?}\n{}",
            h.txns,
            h.initial,
            h.tables(),
            h.dialect,
            h.meta,
            h.serial_order,
            String::from_utf8(v1).expect("v1 text")
        )
    }

    fn assert_same_as_reference(text: &str) {
        let got = read_plume(text.as_bytes());
        let want = reference_read_plume(text.as_bytes());
        match (got, want) {
            (Ok(got), Ok(want)) => {
                assert_eq!(shown(&got.history), shown(&want.history), "{text:?}");
                assert_eq!(got.notes, want.notes, "{text:?}");
                assert!(got.certificate.is_none());
            }
            (Err(got), Err(want)) => assert_eq!(format!("{got:?}"), format!("{want:?}"), "{text:?}"),
            (got, want) => panic!("{text:?}: {:?} but the reference gives {:?}", got.err(), want.err()),
        }
    }

    /// A random history text: interleaved transactions of several sessions, now and then a
    /// wide key or value, aborted writes, and for every fourth seed now and then a
    /// transaction id repeated in another session (an error).
    fn random_text(seed: u64, lines: usize) -> String {
        let clash = if seed.is_multiple_of(4) { 200 } else { u64::MAX };
        let mut state = seed;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut out = String::new();
        for _ in 0..lines {
            let txn = next(40) as i64 - 1;
            let session = if next(clash) == 0 { next(9) } else { txn.max(0) as u64 % 7 };
            let key = if next(30) == 0 { 1 << 33 | next(3) } else { next(25) };
            let value = if next(20) == 0 { u64::from(u32::MAX) + next(3) } else { next(1000) };
            let op = if txn == -1 || next(2) == 0 { 'w' } else { 'r' };
            out.push_str(&format!("{op}({key},{value},{session},{txn})\n"));
        }
        out
    }

    #[test]
    fn reads_what_the_reader_before_the_key_value_model_read() {
        let fixed = [
            "",
            "\n  \n",
            "w(1,10,1,1)\nw(2,20,2,2)\nw(3,99,3,-1)\nr(2,20,1,1)\nr(1,10,2,2)\nw(1,11,1,1)\nw(4,98,2,-1)\n",
            "w(0,0,0,0)\nw(1,0,0,0)\nw(2,0,0,0)\nw(0,1,1,1)\nr(1,0,2,2)\nr(0,1,3,3)\nr(2,0,3,3)\n",
            "w(0,0,0,0)\nr(1,0,0,0)\nr(0,0,1,1)\n",
            "w(0,0,0,0)\nw(0,0,0,0)\nr(0,0,1,1)\n",
            "w(1,10,1,1)\nw(5000000000,6000000000,1,2)\nr(5000000000,6000000000,2,3)\nr(1,10,2,3)\n",
            "r(7,0,1,1)\nr(7,0,1,2)\nw(3,0,1,2)\n",
            "w(1,2,3,4)\nr(1,2,5,4)\n",
            "w(1,2,3,4)\nr(1,x,3,4)\n",
            "r(1,2,3,-1)\n",
            "w(-1,2,3,4)\n",
            "w(1,2,3)\n",
            "q(1,2,3,4)\n",
            "w(1,2,3,4,5)\n",
            "w(1,2,3,-2)\n",
        ];
        for text in fixed {
            assert_same_as_reference(text);
        }
        let mut read = 0;
        for seed in 0..40 {
            let text = random_text(seed, 1 + seed as usize * 25);
            read += usize::from(read_plume(text.as_bytes()).is_ok());
            assert_same_as_reference(&text);
        }
        assert!((20..40).contains(&read), "{read} of 40 read: both readings and errors are compared");
    }

    /// The heap of the key-value history of a Plume file (`PLUME_FILE`, default
    /// `/tmp/kvh.txt`: `isocert gen --txns 10000 --ops-per-txn 10 --sessions 25 --keys 1000`
    /// converted to Plume), which must read as the reference reads it.
    #[test]
    #[ignore = "reads a generated file; prints the history's heap"]
    fn a_plume_files_key_value_history_heap() {
        let path = std::env::var("PLUME_FILE").unwrap_or_else(|_| "/tmp/kvh.txt".into());
        let text = std::fs::read_to_string(&path).expect("the Plume file");
        let (kv, notes) = read_plume_kv(text.as_bytes()).expect("reads");
        println!(
            "{path}: {} transactions, {} operations, {} notes: KvHistory heap {} bytes ({} in operations)",
            kv.len(),
            kv.op_count(),
            notes.len(),
            kv.heap_bytes(),
            kv.op_count() * std::mem::size_of::<KvOp>()
        );
        assert_same_as_reference(&text);
    }

    #[test]
    fn the_key_value_history_is_sized_exactly() {
        let text = random_text(1, 3_000);
        let (mut kv, _) = read_plume_kv(text.as_bytes()).expect("reads");
        let h = reference_read_plume(text.as_bytes()).expect("reads").history;
        assert_eq!((kv.len(), kv.op_count()), (h.txns.len(), h.txns.iter().map(|t| t.ops.len()).sum()));
        let key = kv.kv_object(3);
        assert_eq!(kv.initial_value(key), KvValue::Int(0));
        // Operations, then names, sessions, statuses and op ends; the direct tables of keys
        // and names start at 1,024 slots.
        let exact = kv.op_count() * std::mem::size_of::<KvOp>() + kv.len() * (24 + 4 + 1 + 4);
        assert!(kv.heap_bytes() <= exact + 16_384, "{} bytes, {exact} exact", kv.heap_bytes());
    }
}
