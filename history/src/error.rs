//! The one error type of reading and writing histories and certificates.

/// Why a history or certificate could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not valid JSON, or does not have the v1 shape (unknown field, wrong type).
    #[error("{}{}", line_prefix(*line), capped(message))]
    Syntax {
        /// 1-based line number (for a one-document file, the line serde_json reports).
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The JSON has the right shape but the content is inconsistent (duplicate id, unknown txn).
    #[error("{}{}: {}", line_prefix(*line), capped(field), capped(message))]
    Invalid {
        /// 1-based line number (0: the error concerns the whole document, see the field).
        line: usize,
        /// The field (path) at fault, e.g. `ops[2].key`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A binary record is malformed (Cobra logs, dbcop bincode): the byte offset of the record.
    #[error("byte offset {offset}: {}: {}", capped(field), capped(message))]
    Binary {
        /// Byte offset of the record (or field) at fault, from the start of the file.
        offset: u64,
        /// The record field at fault, e.g. `R.write_id`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An error inside a named file (importers of multi-file or foreign formats add the path).
    #[error("{}: {error}", path.display())]
    InFile {
        /// The file being read or written.
        path: std::path::PathBuf,
        /// The error, with its line or byte offset.
        error: Box<FormatError>,
    },
    /// The history uses something the target format cannot carry.
    #[error("cannot write as {format}: {message}")]
    Unsupported {
        /// The target format's name.
        format: &'static str,
        /// What cannot be carried, naming the transaction and operation.
        message: String,
    },
}

/// `line N: ` for a known line; nothing for line 0 (a whole-document error).
fn line_prefix(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!("line {line}: ")
    }
}

impl FormatError {
    /// An I/O error while reading line `line`: input that is not UTF-8 becomes a syntax
    /// error naming the line (std's readers report it without one); others stay I/O errors.
    pub fn reading_line(e: std::io::Error, line: usize) -> Self {
        if let Some(found) = crate::text::not_text(&e) {
            return found;
        }
        match e.kind() {
            std::io::ErrorKind::InvalidData => {
                FormatError::Syntax { line, message: "the line is not UTF-8".into() }
            }
            _ => FormatError::Io(e),
        }
    }

    /// Input bytes that must be UTF-8 text: the text, or a syntax error naming the line of
    /// the first byte that is not UTF-8.
    pub fn utf8_text(bytes: Vec<u8>) -> Result<String, Self> {
        String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let line = 1 + e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
            FormatError::Syntax { line, message: "the line is not UTF-8".into() }
        })
    }

    /// Wraps the error with the file it happened in (once; an error already naming a file is kept).
    pub fn in_file(self, path: impl Into<std::path::PathBuf>) -> Self {
        match self {
            FormatError::InFile { .. } => self,
            error => FormatError::InFile { path: path.into(), error: Box::new(error) },
        }
    }

    /// An [`FormatError::Invalid`] error.
    pub fn invalid(line: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError::Invalid { line, field: field.into(), message: message.into() }
    }
}

/// Bytes of a reader's message printed at most: every reader quotes input in its messages
/// (a token, a field, a line), and none may echo a pathological input (a 50 MB line) whole.
const MESSAGE_BYTES: usize = 600;

/// `message` cut to [`MESSAGE_BYTES`] at a character boundary, saying how long it was.
fn capped(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MESSAGE_BYTES {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut end = MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}... ({} bytes in all)", &message[..end], message.len()))
}

/// Bytes of input (a line, a predicate, a statement) an error message quotes at most.
pub const QUOTE_BYTES: usize = 200;

/// `text` as an error message quotes it: at most [`QUOTE_BYTES`], cut at a character
/// boundary and saying how long the whole was, so that a pathological input (a 50 MB line)
/// never floods the terminal.
pub fn quote_capped(text: &str) -> String {
    if text.len() <= QUOTE_BYTES {
        return text.to_string();
    }
    let mut end = QUOTE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..end], text.len())
}

/// The words a reader's serde types are named by in serde's messages ("expected struct
/// RawOp"): what the format's own documentation calls them.
const SHAPES: &[(&str, &str)] = &[
    ("struct RawOp", "an operation object"),
    ("struct RawTxn", "a transaction object"),
    ("struct RawHeader", "a header object"),
    ("struct RawInitial", "an initial version object {table, key, value}"),
    ("struct RawRow", "a row object {key, value}"),
    ("struct RawCertificate", "a certificate object"),
    ("struct RawVersionOrder", "a version order entry {table, key, writers}"),
    ("struct RawVersionSet", "a version set entry {txn, op, versions}"),
    ("struct RawSeen", "a seen version {table, key, writer}"),
    ("struct Standalone", "a dbcop document {params, info, start, end, data}"),
    (
        "data did not match any variant of untagged enum RawEvent",
        "an event must be {\"Read\": {variable, version}}, {\"Write\": {variable, version}} or [\"r\"|\"w\", variable, version]",
    ),
];

/// serde_json's message for `e` in the format's words: the position becomes `(column N)`
/// (the caller names the line), and the reader's internal type names become what the
/// format calls those things.
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let mut message = e.to_string();
    if let Some(i) = message.rfind(" at line ") {
        message = format!("{} (column {})", &message[..i], e.column());
    }
    for (internal, words) in SHAPES {
        message = message.replace(internal, words);
    }
    message
}
