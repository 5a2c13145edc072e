//! Choosing the reader for a history file: the one place that maps a path and a
//! [`Format`] to a reader, for the general model ([`open`]) and for the timestamp
//! checkers' key-value model ([`open_kv`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::chronos::read_chronos;
use crate::formats::{Format, Imported};
use crate::{read_kv_v1, read_kv_v1_file, v1, FormatError, History, KvHistory};

/// Why a history file could not be read; each names the file (or the format) as the
/// command line gave it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The file could not be opened.
    #[error("cannot open history {}", path.display())]
    Open {
        /// The history's path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be read to its end.
    #[error("cannot read history {}", path.display())]
    Read {
        /// The history's path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Reading the file (or standard input) for the key-value model failed.
    #[error("history {}", path.display())]
    Input {
        /// The history's path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid history in its format; `hint` suggests another format when
    /// the file's name says it is one.
    #[error("history {}{hint}", path.display())]
    Malformed {
        /// The history's path.
        path: PathBuf,
        /// ` (try --format NAME)`, or empty.
        hint: String,
        /// The reader's error, naming the line and field.
        #[source]
        source: FormatError,
    },
    /// Another tool's format could not be read.
    #[error("reading a {format} history")]
    Format {
        /// The format it was read in.
        format: Format,
        /// The reader's error, naming the file, line and field.
        #[source]
        source: FormatError,
    },
    /// The history holds what the key-value model cannot (a predicate, an aggregate).
    #[error(transparent)]
    NotKeyValue(FormatError),
}

/// Reads the history at `path` in `format` into the one model. A v1 file's bytes are read
/// by `read_bytes` (the CLI draws a progress bar while it reads), then parsed by the fast
/// reader where it can ([`v1::read_history_vec`], with `facts`); other formats by their
/// importer ([`Format::read_path`]), with the certificate facts and notes it returns.
///
/// # Errors
/// An [`OpenError`] naming the file, or the format and the reader's error.
pub fn open(
    path: &Path,
    format: Format,
    facts: v1::AdapterFacts,
    read_bytes: impl FnOnce(File) -> std::io::Result<Vec<u8>>,
) -> Result<Imported, OpenError> {
    if format != Format::V1 {
        return format.read_path(path).map_err(|source| OpenError::Format { format, source });
    }
    let file = File::open(path).map_err(|source| OpenError::Open { path: path.into(), source })?;
    let hint = match Format::guess(path) {
        Some(other) if other != Format::V1 => format!(" (try --format {other})"),
        _ => String::new(),
    };
    let bytes = read_bytes(file).map_err(|source| OpenError::Read { path: path.into(), source })?;
    let history = v1::read_history_vec(bytes, facts).map_err(|source| OpenError::Malformed {
        path: path.into(),
        hint,
        source,
    })?;
    Ok(Imported::plain(history))
}

/// Reads every byte of `file`: [`open`]'s `read_bytes` when nothing watches the reading.
///
/// # Errors
/// The I/O error that stopped the read.
pub fn read_all(mut file: File) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(file.metadata().map_or(0, |m| m.len() as usize));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the history at `path` (`-`: standard input, for v1 and Chronos) in `format` into
/// the key-value model the timestamp checkers take: Chronos and v1 by the fast readers (a
/// v1 file on `threads` threads, split at line boundaries), a v1 history with constructs
/// only the general reader handles by the general reader, other formats by their importer.
/// Returns the history and the notes an importer made.
///
/// # Errors
/// An [`OpenError`]; [`OpenError::NotKeyValue`] names the first operation the key-value
/// model cannot hold.
pub fn open_kv(path: &Path, format: Format, threads: usize) -> Result<(KvHistory, Vec<String>), OpenError> {
    let malformed = |source| OpenError::Malformed { path: path.into(), hint: String::new(), source };
    let input = |source| OpenError::Input { path: path.into(), source };
    let kv = match format {
        Format::Chronos => read_chronos(open_input(path)?, None).map_err(malformed)?,
        // Standard input and pipes cannot be read twice: keep the bytes for the fallback.
        Format::V1 if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) => {
            let mut bytes = Vec::new();
            open_input(path)?.read_to_end(&mut bytes).map_err(input)?;
            match read_kv_v1(bytes.as_slice()) {
                Err(FormatError::Unsupported { .. }) => {
                    key_value(&v1::read_history(bytes.as_slice()).map_err(malformed)?)?
                }
                other => other.map_err(malformed)?,
            }
        }
        // A file is read on every core (split at line boundaries).
        Format::V1 => match read_kv_v1_file(path, threads) {
            Err(FormatError::Unsupported { .. }) => {
                let file = std::io::BufReader::new(File::open(path).map_err(input)?);
                key_value(&v1::read_history(file).map_err(malformed)?)?
            }
            other => other.map_err(malformed)?,
        },
        other => {
            let imported =
                other.read_path(path).map_err(|source| OpenError::Format { format: other, source })?;
            return Ok((key_value(&imported.history)?, imported.notes));
        }
    };
    Ok((kv, Vec::new()))
}

/// Opens the history (`-`: standard input), for reading on any thread: what a streaming
/// reader starts from.
///
/// # Errors
/// [`OpenError::Open`].
pub fn open_input(path: &Path) -> Result<Box<dyn Read + Send>, OpenError> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    let file = File::open(path).map_err(|source| OpenError::Open { path: path.into(), source })?;
    Ok(Box::new(file))
}

/// `h` in the key-value model.
fn key_value(h: &History) -> Result<KvHistory, OpenError> {
    KvHistory::from_history(h).map_err(OpenError::NotKeyValue)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{open, open_kv, read_all, OpenError};
    use crate::formats::Format;
    use crate::v1::AdapterFacts;

    const KV: &str = concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":3}]}"#,
        "\n",
        r#"{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":3}]}"#,
        "\n"
    );
    const PREDICATE: &str =
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"kv","where":"value > 2","rows":[]}]}"#;

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("writing a fixture");
        path
    }

    #[test]
    fn a_malformed_v1_file_named_as_another_format_gets_a_hint() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = file(dir.path(), "h.edn", "{:type :ok}\n");
        let e = open(&path, Format::V1, AdapterFacts::Keep, read_all).expect_err("not v1");
        assert!(e.to_string().ends_with(" (try --format elle)"), "{e}");
        let path = file(dir.path(), "h.jsonl", KV);
        assert_eq!(open(&path, Format::V1, AdapterFacts::Keep, read_all).expect("v1").history.txns.len(), 2);
    }

    #[test]
    fn the_key_value_model_takes_the_general_reader_only_for_what_it_holds() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (kv, notes) = open_kv(&file(dir.path(), "kv.jsonl", KV), Format::V1, 2).expect("a kv history");
        assert_eq!((kv.len(), notes.len()), (2, 0));
        let e = open_kv(&file(dir.path(), "p.jsonl", PREDICATE), Format::V1, 2).expect_err("a predicate");
        assert!(matches!(e, OpenError::NotKeyValue(_)), "{e:?}");
        let e = open_kv(&dir.path().join("missing.jsonl"), Format::Chronos, 2).expect_err("no file");
        assert!(e.to_string().starts_with("cannot open history "), "{e}");
    }
}
