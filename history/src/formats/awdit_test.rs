//! AWDIT's `test` text format: the histories of AWDIT's own test suite (`histories/tests/`
//! in its repository), read there by `History::parse_test_history` in `src/formats.rs`.
//!
//! ```text
//! w 0 1
//! -----
//! w 0 2
//! =====
//! r 0 2
//! w 1 1
//! ```
//!
//! One event per line, `r KEY VALUE` or `w KEY VALUE` (non-negative integers); a line of
//! dashes ends a transaction, a line of `=` ends a session. There is no initial state and no
//! abort: a read of a value no transaction wrote is a read out of thin air (AWDIT's
//! `ThinAirRead`; isocert's `garbage-read`), so histories that read "initial" values write
//! them in a transaction of their own. Transactions are named 0, 1, ... in file order and
//! sessions 0, 1, ..., as AWDIT numbers them. Empty transactions and sessions are skipped,
//! as AWDIT skips them.

use std::io::{BufRead, Write};

use super::kvutil::{self, IntOp};
use super::Imported;
use crate::{FormatError, History, Op, Scalar, Status, Transaction, ValueId};

const FORMAT: &str = "awdit-test";

/// What a line of the file is.
enum Line {
    /// Blank.
    Blank,
    /// A line of dashes: the end of a transaction.
    EndTransaction,
    /// A line of `=`: the end of a session.
    EndSession,
    /// A read or a write.
    Event(IntOp),
}

/// Reads a history in AWDIT's `test` format.
///
/// # Errors
/// A [`FormatError`] naming the line and the field (`op`, `key`, `value`) of the first line
/// that is neither an event nor a separator.
pub fn read_awdit_test<R: BufRead>(input: R) -> Result<Imported, FormatError> {
    let mut h = History::new();
    let mut session = 0i64;
    let mut events: Vec<IntOp> = Vec::new();
    let mut next_txn = 0i64;
    let mut finish = |h: &mut History, session: i64, events: &mut Vec<IntOp>| -> Result<(), FormatError> {
        if events.is_empty() {
            return Ok(());
        }
        let session = h.intern_session(Scalar::Int(session));
        let mut ops = Vec::with_capacity(events.len());
        for e in events.drain(..) {
            kvutil::push_int_op(h, &mut ops, e);
        }
        h.push_txn(Transaction::new(Scalar::Int(next_txn), session, ops))
            .map_err(|t| FormatError::invalid(0, "txn", format!("duplicate transaction {}", t.name)))?;
        next_txn += 1;
        Ok(())
    };
    for (i, line) in input.lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(|e| FormatError::reading_line(e, line_no))?;
        match parse_line(&line).map_err(|(field, m)| FormatError::invalid(line_no, field, m))? {
            Line::Blank => {}
            Line::Event(e) => events.push(e),
            Line::EndTransaction => finish(&mut h, session, &mut events)?,
            Line::EndSession => {
                finish(&mut h, session, &mut events)?;
                if h.txns.last().is_some_and(|t| h.session_name(t.session) == &Scalar::Int(session)) {
                    session += 1;
                }
            }
        }
    }
    finish(&mut h, session, &mut events)?;
    Ok(Imported::plain(h))
}

/// Reads one line: an event, a separator or nothing.
fn parse_line(line: &str) -> Result<Line, (&'static str, String)> {
    let text = line.trim();
    if text.is_empty() {
        return Ok(Line::Blank);
    }
    if text.bytes().all(|b| b == b'-') {
        return Ok(Line::EndTransaction);
    }
    if text.bytes().all(|b| b == b'=') {
        return Ok(Line::EndSession);
    }
    let mut fields = text.split_whitespace();
    let op = fields.next().unwrap_or_default();
    let number =
        |name: &'static str, field: Option<&str>| {
            let field = field.ok_or_else(|| (name, "missing".to_string()))?;
            field.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                (name, format!("{:?} is not a non-negative integer", crate::quote_capped(field)))
            })
        };
    let event = match op {
        "r" | "w" => {
            let key = number("key", fields.next())?;
            let value = number("value", fields.next())?;
            if op == "r" {
                IntOp::Read { key, value }
            } else {
                IntOp::Write { key, value }
            }
        }
        _ => {
            return Err((
                "op",
                format!(
                    "expected `r KEY VALUE`, `w KEY VALUE`, a line of `-` or a line of `=`, found {:?}",
                    crate::quote_capped(text)
                ),
            ))
        }
    };
    if let Some(extra) = fields.next() {
        return Err(("op", format!("unexpected {:?} after the value", crate::quote_capped(extra))));
    }
    Ok(Line::Event(event))
}

/// Writes a history in AWDIT's `test` format, sessions in order, each transaction's events
/// then a line of dashes, a line of `=` between sessions.
///
/// # Errors
/// [`FormatError::Unsupported`] for what the format cannot carry: aborted or unknown-status
/// transactions, an initial state (declared initial values, reads of absent objects),
/// deletes, predicate operations, and keys or values that are not non-negative integers.
pub fn write_awdit_test<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    if let Some(&(obj, _)) = h.initial.iter().find(|(_, v)| *v != ValueId::ABSENT) {
        return Err(kvutil::unsupported(
            FORMAT,
            format!("{} has an initial value: the format has no initial state", h.object_label(obj)),
        ));
    }
    for (s, session) in kvutil::sessions(h).iter().enumerate() {
        if s > 0 {
            writeln!(out, "=====")?;
        }
        for &id in session {
            let t = h.txn(id);
            if t.status != Status::Committed {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!(
                        "{}: not committed (the format has only committed transactions)",
                        h.txn_label(id)
                    ),
                ));
            }
            if let Some(i) =
                t.ops.iter().position(|op| matches!(op, Op::Read { value, .. } if *value == ValueId::ABSENT))
            {
                return Err(kvutil::unsupported(
                    FORMAT,
                    format!(
                        "{}: a read of an absent object (the format has no initial state)",
                        kvutil::at_op(h, id, i)
                    ),
                ));
            }
            for op in kvutil::int_ops(h, id, FORMAT)? {
                let (c, key, value) = match op {
                    IntOp::Read { key, value } => ('r', key, value),
                    IntOp::Write { key, value } => ('w', key, value),
                };
                if key < 0 || value < 0 {
                    return Err(kvutil::unsupported(
                        FORMAT,
                        format!("{}: negative key or value", h.txn_label(id)),
                    ));
                }
                writeln!(out, "{c} {key} {value}")?;
            }
            writeln!(out, "-----")?;
        }
    }
    Ok(())
}
