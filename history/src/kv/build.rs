//! A refillable input window that parses one record at a time with [`Scan`].
//!
//! A record that runs past the end of the window is retried after a refill (the window
//! grows when one record is larger than it), so parsing is one pass over the bytes with
//! no per-line copies. Reads return as soon as some bytes are available, so standard
//! input is processed as it arrives.

use std::io::Read;

use super::scan::{Fail, Scan, Scanned};
use crate::FormatError;

/// Initial window size.
pub(crate) const WINDOW: usize = 1 << 22;

/// Reads records from `input` through a refillable window.
#[derive(Debug)]
pub(crate) struct RecordReader<R> {
    input: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// 1-based line of `buf[start]`.
    line: usize,
}

/// A failed record: the line it failed on and why.
pub(crate) struct RecordError {
    pub(crate) line: usize,
    pub(crate) fail: Fail,
}

impl RecordError {
    /// The [`FormatError`] for this failure; `format` names the input format for
    /// unsupported constructs.
    pub(crate) fn into_format_error(self, format: &'static str) -> FormatError {
        let line = self.line;
        match self.fail {
            Fail::Bad { path, message } if path.is_empty() => FormatError::Syntax { line, message },
            Fail::Bad { path, message } => FormatError::invalid(line, Fail::field_path(&path), message),
            Fail::Unsupported(message) => {
                FormatError::Unsupported { format, message: format!("line {line}: {message}") }
            }
            Fail::Incomplete => FormatError::Syntax { line, message: "unexpected end of input".into() },
        }
    }
}

impl From<std::io::Error> for RecordError {
    fn from(e: std::io::Error) -> Self {
        RecordError { line: 0, fail: Fail::bad(format!("I/O error: {e}")) }
    }
}

impl<R: Read> RecordReader<R> {
    /// A reader over `input`.
    pub(crate) fn new(input: R) -> Self {
        RecordReader::with_buffer(input, Vec::new())
    }

    /// A reader over `input` whose window reuses `buf` (grown to the initial window size
    /// if smaller), so a thread reading many parts of a file does not fault in a fresh
    /// window for each.
    pub(crate) fn with_buffer(input: R, mut buf: Vec<u8>) -> Self {
        if buf.len() < WINDOW {
            buf.resize(WINDOW, 0);
        }
        RecordReader { input, buf, start: 0, end: 0, eof: false, line: 1 }
    }

    /// A reader over `input` with a window of `size` bytes (at least one): for inputs
    /// known to be small, which would otherwise pay for zeroing a whole [`WINDOW`].
    pub(crate) fn with_window(input: R, size: usize) -> Self {
        RecordReader { input, buf: vec![0; size.max(1)], start: 0, end: 0, eof: false, line: 1 }
    }

    /// The window, for [`RecordReader::with_buffer`] on the next input.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// The 1-based line of the next unread byte.
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// Whether the next record's whole line (or the rest of the input) is already in the
    /// window: a newline after the next byte that is not white space.
    pub(crate) fn line_buffered(&self) -> bool {
        let rest = &self.buf[self.start..self.end];
        match rest.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => self.eof || rest[i..].contains(&b'\n'),
            None => self.eof,
        }
    }

    /// Reads more input behind the unread bytes; false at the end of input.
    fn refill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Skips whitespace and returns the next byte without consuming it; `None` at the end.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn peek_byte(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            let mut s = Scan::new(&self.buf[self.start..self.end], self.eof);
            let b = s.peek_or_end();
            self.start += s.pos;
            self.line += s.newlines;
            if b.is_some() {
                return Ok(b);
            }
            if !self.refill()? {
                return Ok(None);
            }
        }
    }

    /// Consumes one byte (after [`RecordReader::peek_byte`] returned it).
    pub(crate) fn consume_byte(&mut self) {
        self.start += 1;
    }

    /// Parses one record at the current position with `parse`, refilling and retrying when
    /// the window ends inside it. `parse` must have no effect that a retry would repeat
    /// wrongly (interning is idempotent; push records only after it returns).
    ///
    /// # Errors
    /// The line and failure of a malformed record, or an I/O error.
    pub(crate) fn record<T>(
        &mut self,
        mut parse: impl FnMut(&mut Scan<'_>) -> Scanned<T>,
    ) -> Result<T, RecordError> {
        loop {
            let mut s = Scan::new(&self.buf[self.start..self.end], self.eof);
            match parse(&mut s) {
                Ok(v) => {
                    self.start += s.pos;
                    self.line += s.newlines;
                    return Ok(v);
                }
                Err(Fail::Incomplete) => {
                    if !self.refill()? {
                        // The window was the end after all: parse once more so the scanner
                        // reports the truncation as bad input.
                        continue;
                    }
                }
                Err(fail) => return Err(RecordError { line: self.line + s.newlines, fail }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per call, to force a refill inside every token.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !out.is_empty() => {
                    out[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn records_survive_refills_inside_tokens() {
        let mut r = RecordReader::new(Trickle(b"  \"abc\" 12345\n[1, 2]"));
        assert_eq!(r.peek_byte().unwrap(), Some(b'"'));
        assert_eq!(r.record(|s| s.string().map(|c| c.into_owned())).ok().unwrap(), "abc");
        assert!(matches!(r.record(|s| s.number()), Ok(super::super::scan::Number::Int(12345))));
        assert_eq!(r.line(), 1);
        assert_eq!(r.peek_byte().unwrap(), Some(b'['));
        assert_eq!(r.line(), 2);
        r.record(|s| s.skip_value()).ok().unwrap();
        assert_eq!(r.peek_byte().unwrap(), None);
    }

    #[test]
    fn a_line_is_buffered_only_when_it_is_whole() {
        let mut r = RecordReader::new(&b"[1]\n\n[2"[..]);
        assert!(!r.line_buffered(), "nothing read yet");
        assert_eq!(r.peek_byte().unwrap(), Some(b'['));
        assert!(r.line_buffered());
        r.record(|s| s.skip_value()).ok().unwrap();
        assert!(!r.line_buffered(), "newlines before a partial line");
        let mut r = RecordReader::new(&b"\n"[..]);
        assert_eq!(r.peek_byte().unwrap(), None);
        assert!(r.line_buffered(), "the end of input");
    }

    #[test]
    fn truncated_record_is_bad_input_with_its_line() {
        let mut r = RecordReader::new(Trickle(b"\n\n{\"a\":"));
        let err = r.record(|s| s.skip_value()).err().unwrap();
        assert_eq!(err.line, 3);
        assert!(err.into_format_error("x").to_string().contains("end of input"));
    }
}
