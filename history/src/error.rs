//! The one error type of reading and writing histories and certificates.

/// Why a history or certificate could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not valid JSON, or does not have the v1 shape (unknown field, wrong type).
    #[error("{}{message}", line_prefix(*line))]
    Syntax {
        /// 1-based line number (for a one-document file, the line serde_json reports).
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The JSON has the right shape but the content is inconsistent (duplicate id, unknown txn).
    #[error("{}{field}: {message}", line_prefix(*line))]
    Invalid {
        /// 1-based line number (0: the error concerns the whole document, see the field).
        line: usize,
        /// The field (path) at fault, e.g. `ops[2].key`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A binary record is malformed (Cobra logs, dbcop bincode): the byte offset of the record.
    #[error("byte offset {offset}: {field}: {message}")]
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
