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
//! keys and values fit in 32 bits) until the last line, then builds each transaction's operations, and the transaction
//! vector, at their exact length: a vector per transaction growing line by line took 24
//! bytes an operation plus the doubling's slack, and the doubled transaction vector 6 MB of
//! slack on 100,000 transactions (docs/PERFORMANCE.md, "Where the bytes go").

use std::io::{BufRead, Write};

use rustc_hash::FxHashMap;

use super::kvutil::{self, IntOp};
use super::Imported;
use crate::{FormatError, History, Scalar, Status, Transaction, TxnId};

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

/// Reads a Plume/PolySI text history.
///
/// # Errors
/// A [`FormatError`] naming the line and the field (`key`, `value`, `session`, `txn`).
pub fn read_plume<R: BufRead>(input: R) -> Result<Imported, FormatError> {
    let mut h = History::new();
    // Per transaction in order of first appearance: its id and session.
    let mut txns: Vec<(i64, i64)> = Vec::new();
    let mut index: FxHashMap<i64, u32> = FxHashMap::default();
    let mut lines = Lines::default();
    let mut input = input;
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
        if key < 0 || value < 0 || session < 0 {
            let field = if key < 0 {
                "key"
            } else if value < 0 {
                "value"
            } else {
                "session"
            };
            return Err(FormatError::invalid(line_no, field, "must be a non-negative integer"));
        }
        if txn < -1 {
            return Err(FormatError::invalid(
                line_no,
                "txn",
                "must be a non-negative integer (or -1: aborted)",
            ));
        }
        if txn == -1 && op == 'r' {
            return Err(FormatError::invalid(
                line_no,
                "txn",
                "-1 marks aborted writes; a read cannot have it",
            ));
        }
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
    drop(index);
    let (order, starts) = lines.grouped(txns.len());
    let ops_of = |slot: usize| order[starts[slot] as usize..starts[slot + 1] as usize].iter();
    let mut notes = Vec::new();
    let mut first = 0;
    if let Some(&(txn, session)) = txns.first() {
        let events: Vec<IntOp> = ops_of(0).map(|&i| lines.op(i)).collect();
        if explicit_initial(txn, session, &events) {
            first = 1;
            notes.push(format!(
                "transaction 0 of session 0 writes 0 to {} key(s) and nothing else: read as the initial state \
                 (IsoVista's explicit initial transaction), not as a transaction",
                events.len()
            ));
        }
    }
    h.txns.reserve_exact(txns.len() - first);
    for (slot, &(txn, session)) in txns.iter().enumerate().skip(first) {
        let session = h.intern_session(Scalar::Int(session));
        let group = ops_of(slot);
        let mut ops = Vec::with_capacity(group.len());
        for &i in group {
            kvutil::push_int_op(&mut h, &mut ops, lines.op(i));
        }
        let mut t = Transaction::new(Scalar::Int(txn), session, ops);
        if txn == -1 {
            t.status = Status::Aborted;
        }
        h.push_txn(t)
            .map_err(|t| FormatError::invalid(0, "txn", format!("duplicate transaction {}", t.name)))?;
    }
    kvutil::initial_zero_everywhere(&mut h);
    let mut imported = Imported::plain(h);
    imported.notes = notes;
    Ok(imported)
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
