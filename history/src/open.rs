//! Choosing the reader for a history file: the one place that maps a path and a
//! [`Format`] to a reader, for the general model ([`open`]) and for the timestamp
//! checkers' key-value model ([`open_kv`]).

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use crate::chronos::read_chronos;
use crate::formats::{read_plume_kv, Format, Imported};
use crate::kv::read_history_through;
use crate::text::{self, TextOnly};
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
    #[error("reading {} history", format.with_article())]
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

/// Reads the history at `path` in `format` into the one model. A v1 file is read through
/// `watch` (the CLI draws a progress bar while it reads) and parsed by the fast reader
/// where it can, with `facts` ([`v1::read_history_bytes`] says what it reads); other
/// formats by their importer ([`Format::read_path`]), with the certificate facts and notes
/// it returns.
///
/// A regular file streams through the fast reader's window and is never held whole (issue
/// 34: holding a 42 MB history cost a fifth of a check's page faults); when the fast reader
/// refuses it, the general reader reads it again from its start, so errors are the general
/// reader's. A pipe or FIFO cannot be read twice: it is read whole into memory first.
///
/// # Errors
/// An [`OpenError`] naming the file, or the format and the reader's error.
pub fn open<W: Read>(
    path: &Path,
    format: Format,
    facts: v1::AdapterFacts,
    mut watch: impl FnMut(File) -> W,
) -> Result<Imported, OpenError> {
    if format != Format::V1 {
        return format.read_path(path).map_err(|source| OpenError::Format { format, source });
    }
    let file = File::open(path).map_err(|source| OpenError::Open { path: path.into(), source })?;
    let hint = match Format::guess(path) {
        Some(other) if other != Format::V1 => format!(" (try --format {other})"),
        _ => String::new(),
    };
    let read = |source| OpenError::Read { path: path.into(), source };
    let malformed = |source| OpenError::Malformed { path: path.into(), hint: hint.clone(), source };
    if !file.metadata().map_err(read)?.is_file() {
        let mut bytes = Vec::new();
        TextOnly::new(watch(file)).read_to_end(&mut bytes).map_err(|e| match text::not_text(&e) {
            Some(found) => malformed(found),
            None => read(e),
        })?;
        return v1::read_history_vec(bytes, facts).map(Imported::plain).map_err(malformed);
    }
    text::check_text_file(path).map_err(malformed)?;
    let mut again = file.try_clone().map_err(read)?;
    match read_history_through(watch(file), STREAM_WINDOW) {
        Ok((history, skipped_meta)) if facts == v1::AdapterFacts::Skip || !skipped_meta => {
            return Ok(Imported::plain(history))
        }
        _ => {}
    }
    again.rewind().map_err(read)?;
    let history = v1::read_history(BufReader::new(watch(again))).map_err(malformed)?;
    Ok(Imported::plain(history))
}

/// The window a v1 file streams through on its way to the fast reader: small enough that
/// the bytes are still in the cache when they are parsed, large enough that reading costs
/// few system calls.
const STREAM_WINDOW: usize = 1 << 18;

/// Reads the history at `path` (`-`: standard input, for v1 and Chronos) in `format` into
/// the key-value model the timestamp checkers take: Chronos and v1 by the fast readers (a
/// v1 file on `threads` threads, split at line boundaries), a v1 history with constructs
/// only the general reader handles by the general reader, Plume text straight into the
/// key-value model ([`read_plume_kv`]), other formats by their importer.
/// Returns the history and the notes an importer made.
///
/// # Errors
/// An [`OpenError`]; [`OpenError::NotKeyValue`] names the first operation the key-value
/// model cannot hold.
pub fn open_kv(path: &Path, format: Format, threads: usize) -> Result<(KvHistory, Vec<String>), OpenError> {
    let malformed = |source| OpenError::Malformed { path: path.into(), hint: String::new(), source };
    let input = |source| OpenError::Input { path: path.into(), source };
    let kv = match format {
        Format::Chronos => read_chronos(TextOnly::new(open_input(path)?), None).map_err(malformed)?,
        // Standard input and pipes cannot be read twice: keep the bytes for the fallback.
        Format::V1 if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) => {
            let mut bytes = Vec::new();
            TextOnly::new(open_input(path)?).read_to_end(&mut bytes).map_err(|e| {
                match text::not_text(&e) {
                    Some(found) => malformed(found),
                    None => input(e),
                }
            })?;
            match read_kv_v1(bytes.as_slice()) {
                Err(FormatError::Unsupported { .. }) => {
                    key_value(&v1::read_history(bytes.as_slice()).map_err(malformed)?)?
                }
                other => other.map_err(malformed)?,
            }
        }
        // A file is read on every core (split at line boundaries).
        Format::V1 => match text::check_text_file(path).and_then(|()| read_kv_v1_file(path, threads)) {
            Err(FormatError::Unsupported { .. }) => {
                let file = std::io::BufReader::new(File::open(path).map_err(input)?);
                key_value(&v1::read_history(file).map_err(malformed)?)?
            }
            other => other.map_err(malformed)?,
        },
        Format::Plume => return read_plume_path(path),
        other => {
            let imported =
                other.read_path(path).map_err(|source| OpenError::Format { format: other, source })?;
            return Ok((key_value(&imported.history)?, imported.notes));
        }
    };
    Ok((kv, Vec::new()))
}

/// Reads the Plume text file at `path` into the key-value model, with the reader's notes;
/// errors name the file as [`Format::read_path`]'s do.
fn read_plume_path(path: &Path) -> Result<(KvHistory, Vec<String>), OpenError> {
    let format = Format::Plume;
    let file = File::open(path)
        .map_err(|e| OpenError::Format { format, source: FormatError::Io(e).in_file(path) })?;
    read_plume_kv(BufReader::new(TextOnly::new(file)))
        .map_err(|e| OpenError::Format { format, source: e.in_file(path) })
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

    use super::{open, open_kv, OpenError};
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
        let e = open(&path, Format::V1, AdapterFacts::Keep, |f| f).expect_err("not v1");
        assert!(e.to_string().ends_with(" (try --format elle)"), "{e}");
        let path = file(dir.path(), "h.jsonl", KV);
        assert_eq!(open(&path, Format::V1, AdapterFacts::Keep, |f| f).expect("v1").history.txns.len(), 2);
    }

    /// A reader that counts its callers' reads and the largest buffer one of them offered.
    struct Watched<'a> {
        file: std::fs::File,
        largest: &'a std::cell::Cell<usize>,
    }

    impl std::io::Read for Watched<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.largest.set(self.largest.get().max(buf.len()));
            self.file.read(buf)
        }
    }

    /// The history `text` as the general reader reads it, written back as v1 text.
    fn general(h: &crate::History) -> String {
        let mut out = Vec::new();
        crate::v1::write_history(h, &mut out).expect("writing to memory");
        String::from_utf8(out).expect("v1 text")
    }

    #[test]
    fn a_v1_file_streams_through_a_window_and_is_never_held_whole() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // Many short lines, then one longer than the window (but not twice as long).
        let mut text = String::new();
        for i in 0..40_000 {
            text.push_str(&format!(
                "{{\"id\":{i},\"session\":{},\"ops\":[{{\"f\":\"w\",\"key\":{},\"value\":{i}}}]}}\n",
                i % 7,
                i % 100
            ));
        }
        let ops: Vec<String> =
            (0..8_000).map(|k| format!("{{\"f\":\"r\",\"key\":{k},\"value\":null}}")).collect();
        text.push_str(&format!("{{\"id\":\"long\",\"session\":1,\"ops\":[{}]}}\n", ops.join(",")));
        assert!(text.len() > 8 * super::STREAM_WINDOW);
        let longest = text.lines().map(str::len).max().unwrap_or(0);
        assert!((super::STREAM_WINDOW..2 * super::STREAM_WINDOW).contains(&longest), "{longest}");
        let path = file(dir.path(), "long.jsonl", &text);
        let (largest, calls) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let watch = |file| {
            calls.set(calls.get() + 1);
            Watched { file, largest: &largest }
        };
        let h = open(&path, Format::V1, AdapterFacts::Skip, watch).expect("a kv history").history;
        assert_eq!(general(&h), general(&crate::v1::read_history(text.as_bytes()).expect("valid")));
        assert_eq!(calls.get(), 1, "read once");
        // The window doubled for the long line, and never held the file.
        assert!(largest.get() <= 2 * super::STREAM_WINDOW, "a read of {} bytes", largest.get());
    }

    #[test]
    fn a_v1_file_the_fast_reader_refuses_is_read_again_by_the_general_reader() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let calls = std::cell::Cell::new(0);
        let watch = |f| {
            calls.set(calls.get() + 1);
            f
        };
        let h = open(&file(dir.path(), "p.jsonl", PREDICATE), Format::V1, AdapterFacts::Skip, watch)
            .expect("a predicate history")
            .history;
        assert!(h.txns[0].ops[0].predicate().is_some());
        assert_eq!(calls.get(), 2, "the fast reader refused, the general reader read it again");
        // A malformed line gets the general reader's error, naming its line.
        let bad = format!("{KV}{{\"id\":3,\"session\":0,\"ops\":[{{\"f\":\"r\",\"key\":1}}]}}\n");
        let e = open(&file(dir.path(), "bad.jsonl", &bad), Format::V1, AdapterFacts::Skip, |f| f)
            .expect_err("a read without a value");
        let general = crate::v1::read_history(bad.as_bytes()).expect_err("malformed");
        assert_eq!(std::error::Error::source(&e).map(|s| s.to_string()), Some(general.to_string()));
        assert!(general.to_string().contains("line 3"), "{general}");
    }

    #[cfg(unix)]
    #[test]
    fn a_v1_history_from_a_fifo_is_read_once_whole() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("h.fifo");
        let made = std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo runs");
        assert!(made.success());
        for text in [KV, PREDICATE] {
            let writer = {
                let path = path.clone();
                std::thread::spawn(move || std::fs::write(path, text).expect("writing the FIFO"))
            };
            let calls = std::cell::Cell::new(0);
            let watch = |f| {
                calls.set(calls.get() + 1);
                f
            };
            let h = open(&path, Format::V1, AdapterFacts::Skip, watch).expect("a history").history;
            writer.join().expect("the writer finished");
            assert_eq!(general(&h), general(&crate::v1::read_history(text.as_bytes()).expect("valid")));
            assert_eq!(calls.get(), 1);
        }
    }

    #[test]
    fn plume_text_is_read_straight_into_the_key_value_model() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = "w(0,0,0,0)\nw(1,0,0,0)\nw(0,5,1,1)\nr(0,5,2,2)\nw(1,7,3,-1)\n";
        let path = file(dir.path(), "h.txt", text);
        let (kv, notes) = open_kv(&path, Format::Plume, 2).expect("a Plume history");
        let imported = Format::Plume.read_path(&path).expect("a Plume history");
        assert_eq!((kv.len(), &notes), (3, &imported.notes));
        assert_eq!(general(&kv.into_history()), general(&imported.history));
        let bad = file(dir.path(), "bad.txt", "w(1,2,3,4)\nr(1,2,5,4)\n");
        let e = open_kv(&bad, Format::Plume, 2).expect_err("a transaction in two sessions");
        let general = Format::Plume.read_path(&bad).expect_err("a transaction in two sessions");
        assert!(matches!(e, OpenError::Format { format: Format::Plume, .. }), "{e:?}");
        assert_eq!(std::error::Error::source(&e).map(|s| s.to_string()), Some(general.to_string()));
        let e = open_kv(&dir.path().join("missing.txt"), Format::Plume, 2).expect_err("no file");
        let general = Format::Plume.read_path(&dir.path().join("missing.txt")).expect_err("no file");
        assert_eq!(std::error::Error::source(&e).map(|s| s.to_string()), Some(general.to_string()));
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
