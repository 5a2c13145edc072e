//! The legacy dbcop `history.bincode` (bincode 1, little-endian), as PolySI publishes its
//! histories.
//!
//! Layout: five `u64` parameters (id, nodes, variables, transactions, events), three strings
//! (`u64` length + UTF-8: info, start, end), then `u64` session count; each session a `u64`
//! transaction count; each transaction a `u64` event count, events of
//! `(write: u8, variable: u64, value: u64, success: u8)`, and a final `success: u8`.
//! Value 0 is the initial value of every variable. An event with `success = 0` did not take
//! effect: it is left out and counted in [`Imported::notes`].

use std::io::{Read, Write};

use super::dbcop::{build, int_event, to_sessions, DbcopEvent};
use super::kvutil::IntOp;
use super::Imported;
use crate::{FormatError, History, Scalar};

const FORMAT: &str = "dbcop-bincode";

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, field: &str) -> Result<&[u8], FormatError> {
        if self.bytes.len() - self.pos < n {
            return Err(FormatError::Binary {
                offset: self.pos as u64,
                field: field.to_string(),
                message: format!("file ends after {} of {n} bytes", self.bytes.len() - self.pos),
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u64(&mut self, field: &str) -> Result<u64, FormatError> {
        let b = self.take(8, field)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn bool(&mut self, field: &str) -> Result<bool, FormatError> {
        let at = self.pos as u64;
        match self.take(1, field)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(FormatError::Binary {
                offset: at,
                field: field.into(),
                message: format!("boolean byte is {b}, not 0 or 1"),
            }),
        }
    }

    /// A count of items each at least `min_size` bytes long, checked against what is left.
    fn count(&mut self, field: &str, min_size: usize) -> Result<usize, FormatError> {
        let at = self.pos as u64;
        let n = self.u64(field)?;
        let left = (self.bytes.len() - self.pos) / min_size.max(1);
        if n > left as u64 {
            return Err(FormatError::Binary {
                offset: at,
                field: field.into(),
                message: format!("{n} items cannot fit in the {} bytes left", self.bytes.len() - self.pos),
            });
        }
        Ok(n as usize)
    }

    fn string(&mut self, field: &str) -> Result<(), FormatError> {
        let n = self.count(field, 1)?;
        let at = self.pos as u64;
        std::str::from_utf8(self.take(n, field)?).map_err(|e| FormatError::Binary {
            offset: at,
            field: field.into(),
            message: format!("not UTF-8: {e}"),
        })?;
        Ok(())
    }

    fn int(&mut self, field: &str) -> Result<i64, FormatError> {
        let at = self.pos as u64;
        let v = self.u64(field)?;
        i64::try_from(v).map_err(|_| FormatError::Binary {
            offset: at,
            field: field.into(),
            message: format!("{v} does not fit a signed 64-bit integer"),
        })
    }
}

/// Prefixes the field of a [`FormatError::Binary`] with where it is (built only on error).
fn within(e: FormatError, place: impl FnOnce() -> String) -> FormatError {
    match e {
        FormatError::Binary { offset, field, message } => {
            FormatError::Binary { offset, field: format!("{}.{field}", place()), message }
        }
        other => other,
    }
}

/// Reads a legacy dbcop `history.bincode`.
///
/// # Errors
/// [`FormatError::Binary`] naming the byte offset and field of a truncated or malformed record.
pub fn read_dbcop_bincode<R: Read>(mut input: R) -> Result<Imported, FormatError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    let mut c = Cursor { bytes: &bytes, pos: 0 };
    for field in ["params.id", "params.n_node", "params.n_variable", "params.n_transaction", "params.n_event"]
    {
        c.u64(field)?;
    }
    for field in ["info", "start", "end"] {
        c.string(field)?;
    }
    let mut failed = 0usize;
    let n_sessions = c.count("data.len", 8)?;
    let mut sessions = Vec::with_capacity(n_sessions);
    for s in 0..n_sessions {
        let n_txns = c.count("len", 9).map_err(|e| within(e, || format!("data[{s}]")))?;
        let mut txns = Vec::with_capacity(n_txns);
        for t in 0..n_txns {
            let txn = || format!("data[{s}][{t}]");
            let n_events = c.count("events.len", 18).map_err(|e| within(e, txn))?;
            let mut events = Vec::with_capacity(n_events);
            for e in 0..n_events {
                let event = || format!("data[{s}][{t}].events[{e}]");
                let write = c.bool("write").map_err(|e| within(e, event))?;
                let variable = c.int("variable").map_err(|e| within(e, event))?;
                let value = c.int("value").map_err(|e| within(e, event))?;
                if c.bool("success").map_err(|e| within(e, event))? {
                    events.push(DbcopEvent { write, variable: Scalar::Int(variable), version: Some(value) });
                } else {
                    failed += 1;
                }
            }
            let committed = c.bool("success").map_err(|e| within(e, txn))?;
            txns.push((events, committed));
        }
        sessions.push(txns);
    }
    if c.pos != bytes.len() {
        return Err(FormatError::Binary {
            offset: c.pos as u64,
            field: "end of file".into(),
            message: format!("{} bytes after the last session", bytes.len() - c.pos),
        });
    }
    let mut imported = Imported::plain(build(sessions));
    if failed > 0 {
        imported
            .notes
            .push(format!("{failed} events marked unsuccessful were left out (they did not take effect)"));
    }
    Ok(imported)
}

/// Writes a history as a legacy dbcop `history.bincode`.
///
/// # Errors
/// [`FormatError::Unsupported`] as for dbcop JSON, and for text or negative keys and values.
pub fn write_dbcop_bincode<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    let sessions = to_sessions(h, FORMAT)?;
    let n_event: usize = sessions.iter().flatten().map(|(e, _)| e.len()).sum();
    let mut buf = Vec::new();
    for n in [0, sessions.len(), h.object_count(), h.txns.len(), n_event] {
        buf.extend_from_slice(&(n as u64).to_le_bytes());
    }
    for s in ["written by isocert", "1970-01-01T00:00:00+00:00", "1970-01-01T00:00:00+00:00"] {
        buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
        buf.extend_from_slice(s.as_bytes());
    }
    buf.extend_from_slice(&(sessions.len() as u64).to_le_bytes());
    for (s, session) in sessions.iter().enumerate() {
        buf.extend_from_slice(&(session.len() as u64).to_le_bytes());
        for (t, (events, committed)) in session.iter().enumerate() {
            buf.extend_from_slice(&(events.len() as u64).to_le_bytes());
            for (e, event) in events.iter().enumerate() {
                let at = format!("session {}, transaction {t}, event {e}", s + 1);
                let (write, key, value) = match int_event(event, FORMAT, &at)? {
                    IntOp::Read { key, value } => (0u8, key, value),
                    IntOp::Write { key, value } => (1u8, key, value),
                };
                if key < 0 || value < 0 {
                    return Err(super::kvutil::unsupported(FORMAT, format!("{at}: negative key or value")));
                }
                buf.push(write);
                buf.extend_from_slice(&(key as u64).to_le_bytes());
                buf.extend_from_slice(&(value as u64).to_le_bytes());
                buf.push(1);
            }
            buf.push(u8::from(*committed));
        }
    }
    out.write_all(&buf)?;
    Ok(())
}
