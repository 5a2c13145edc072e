//! The one error type of reading and writing histories and certificates.

/// Why a history or certificate could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not valid JSON, or does not have the v1 shape (unknown field, wrong type).
    #[error("line {line}: {message}")]
    Syntax {
        /// 1-based line number (for a one-document file, the line serde_json reports).
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The JSON has the right shape but the content is inconsistent (duplicate id, unknown txn).
    #[error("line {line}: {field}: {message}")]
    Invalid {
        /// 1-based line number.
        line: usize,
        /// The field (path) at fault, e.g. `ops[2].key`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl FormatError {
    /// An [`FormatError::Invalid`] error.
    pub fn invalid(line: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError::Invalid { line, field: field.into(), message: message.into() }
    }
}
