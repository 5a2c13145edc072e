//! Text histories that are not text: a NUL byte (`/dev/zero`, a NUL-filled or binary file)
//! or a UTF-8 byte order mark, reported by name on the line where it is, before a line
//! reader reads a line without end to the memory limit.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::FormatError;

/// Bytes of a file looked at before it is read ([`check_text_file`]).
const PREFIX_BYTES: u64 = 64 * 1024;

/// Bytes within which [`TextOnly`] counts lines; a NUL beyond them is named by offset.
const COUNTED_BYTES: u64 = 1 << 20;

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why `bytes` (the start of a text history when `at_start`, else a later chunk beginning
/// at byte `offset` on line `line`) cannot be one, or `None`.
fn problem(bytes: &[u8], at_start: bool, offset: u64, line: Option<usize>) -> Option<FormatError> {
    if at_start && bytes.starts_with(BOM) {
        return Some(FormatError::Syntax {
            line: 1,
            message: "the file starts with a UTF-8 byte order mark (BOM, bytes EF BB BF), which a history \
                      may not have: save it as UTF-8 without a BOM"
                .into(),
        });
    }
    let at = bytes.iter().position(|&b| b == 0)?;
    let message = "byte 0x00 (NUL): a text history holds no NUL byte (is this a binary file, or /dev/zero?)";
    Some(match line {
        Some(line) => {
            let line = line + bytes[..at].iter().filter(|&&b| b == b'\n').count();
            FormatError::Syntax { line, message: message.into() }
        }
        None => {
            FormatError::Syntax { line: 0, message: format!("byte offset {}: {message}", offset + at as u64) }
        }
    })
}

/// Checks the start of the regular file at `path` for a NUL byte or a byte order mark
/// (anything else is the reader's business; a file that cannot be opened is too).
///
/// # Errors
/// A [`FormatError::Syntax`] naming the line and the byte.
pub(crate) fn check_text_file(path: &Path) -> Result<(), FormatError> {
    let Ok(file) = File::open(path) else { return Ok(()) };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let mut prefix = Vec::new();
    if file.take(PREFIX_BYTES).read_to_end(&mut prefix).is_err() {
        return Ok(());
    }
    problem(&prefix, true, 0, Some(1)).map_or(Ok(()), Err)
}

/// Checks the start of a text document held in memory (a certificate read whole) for a NUL
/// byte or a byte order mark, as [`check_text_file`] does for a file.
///
/// # Errors
/// A [`FormatError::Syntax`] naming the line and the byte.
pub(crate) fn check_text_prefix(bytes: &[u8]) -> Result<(), FormatError> {
    let prefix = &bytes[..bytes.len().min(PREFIX_BYTES as usize)];
    problem(prefix, true, 0, Some(1)).map_or(Ok(()), Err)
}

/// A reader of a text history that fails at the first NUL byte, and at a byte order mark
/// at its start, with an [`io::ErrorKind::InvalidData`] error whose message names the line
/// (within the first MiB; beyond, the byte offset): a stream such as `/dev/zero` is then
/// refused at its first read instead of read whole.
pub(crate) struct TextOnly<R> {
    inner: R,
    offset: u64,
    line: usize,
}

impl<R> TextOnly<R> {
    /// Guards `inner` from its first byte.
    pub(crate) fn new(inner: R) -> Self {
        TextOnly { inner, offset: 0, line: 1 }
    }
}

impl<R: Read> Read for TextOnly<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let chunk = &buf[..n];
        let counted = self.offset < COUNTED_BYTES;
        if let Some(e) = problem(chunk, self.offset == 0, self.offset, counted.then_some(self.line)) {
            let (line, message) = match e {
                FormatError::Syntax { line, message } => (line, message),
                other => (0, other.to_string()),
            };
            return Err(io::Error::new(io::ErrorKind::InvalidData, NotText { line, message }));
        }
        if counted {
            self.line += chunk.iter().filter(|&&b| b == b'\n').count();
        }
        self.offset += n as u64;
        Ok(n)
    }
}

/// What [`TextOnly`] found, inside its I/O error, so that a line reader reports it as the
/// syntax error it is ([`not_text`]).
#[derive(Debug)]
struct NotText {
    line: usize,
    message: String,
}

impl std::fmt::Display for NotText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => f.write_str(&self.message),
            line => write!(f, "line {line}: {}", self.message),
        }
    }
}

impl std::error::Error for NotText {}

/// The syntax error a [`TextOnly`] reader's I/O error `e` stands for, if it is one.
pub(crate) fn not_text(e: &io::Error) -> Option<FormatError> {
    let found = e.get_ref()?.downcast_ref::<NotText>()?;
    Some(FormatError::Syntax { line: found.line, message: found.message.clone() })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::TextOnly;

    #[test]
    fn a_nul_or_a_bom_is_named_and_an_endless_stream_is_not_read_whole() {
        let mut zeros = TextOnly::new(std::io::repeat(0));
        let err = zeros.read_to_end(&mut Vec::new()).unwrap_err().to_string();
        assert_eq!(err, "line 1: byte 0x00 (NUL): a text history holds no NUL byte (is this a binary file, or /dev/zero?)");
        let err = TextOnly::new(&b"{}\n{}\n\0"[..]).read_to_end(&mut Vec::new()).unwrap_err().to_string();
        assert!(err.starts_with("line 3: byte 0x00"), "{err}");
        let err = TextOnly::new(&b"\xEF\xBB\xBF{}"[..]).read_to_end(&mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("byte order mark (BOM"), "{err}");
        let mut text = Vec::new();
        TextOnly::new(&b"{\"a\":\"\xEF\xBB\xBF\"}\n"[..]).read_to_end(&mut text).unwrap();
        assert_eq!(text.len(), 12);
    }
}
