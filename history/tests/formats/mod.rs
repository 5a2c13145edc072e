//! Other tools' formats: fixtures from their documented examples, round trips
//! (ours → theirs → ours), and malformed input.

mod awdit_test;
mod cobra;
mod dbcop;
mod elle;
mod garbage;
mod king_cobra;
mod plume;
mod viper;

use std::path::PathBuf;

use isocert_history::formats::{Format, Imported};
use isocert_history::{v1, FormatError, History};

/// A fixture under `tests/fixtures/formats/`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/formats").join(name)
}

/// Reads a fixture in `format`, panicking with the error.
pub(crate) fn read_fixture(format: Format, name: &str) -> Imported {
    format.read_path(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A history from v1 text.
pub(crate) fn v1_history(text: &str) -> History {
    v1::read_history(text.as_bytes()).unwrap_or_else(|e| panic!("bad test history: {e}"))
}

/// The history as v1 text: two histories are the same when this is.
pub(crate) fn v1_text(h: &History) -> String {
    let mut out = Vec::new();
    v1::write_history(h, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Writes `h` in `format` into a temporary place and reads it back.
pub(crate) fn round_trip(h: &History, format: Format) -> Imported {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(if format.is_directory() { "logs" } else { "history" });
    format.write_path(h, &path).unwrap_or_else(|e| panic!("writing {format}: {e}"));
    format.read_path(&path).unwrap_or_else(|e| panic!("reading back {format}: {e}"))
}

/// Asserts ours → theirs → ours is the identity.
pub(crate) fn assert_round_trip(text: &str, format: Format) {
    let h = v1_history(text);
    let back = round_trip(&h, format);
    assert_eq!(v1_text(&back.history), v1_text(&h), "{format} round trip changed the history");
}

/// Reads `bytes` written to a temporary file (or, for directory formats, to `name` inside a
/// temporary directory) and returns the error message.
pub(crate) fn error_of(format: Format, name: &str, bytes: &[u8]) -> (FormatError, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = if format.is_directory() {
        std::fs::write(dir.path().join(name), bytes).unwrap();
        dir.path().to_path_buf()
    } else {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    match format.read_path(&path) {
        Ok(_) => panic!("{format}: malformed input {:?} was accepted", String::from_utf8_lossy(bytes)),
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains(name), "{format}: the error does not name the file: {message}");
            (e, message)
        }
    }
}

#[test]
fn format_names_parse_and_print() {
    for f in isocert_history::formats::ALL_FORMATS {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
        assert_eq!(f.to_string(), f.name());
    }
    assert_eq!("PolySI".parse::<Format>().unwrap(), Format::Plume);
    assert_eq!("edn".parse::<Format>().unwrap(), Format::Elle);
    let err = "cobol".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("cobol") && err.to_string().contains("viper"), "{err}");
}

#[test]
fn formats_are_guessed_from_paths() {
    assert_eq!(Format::guess(&fixture("elle-list-append.edn")), Some(Format::Elle));
    assert_eq!(Format::guess(&fixture("dbcop-write-skew.hist")), Some(Format::DbcopText));
    assert_eq!(Format::guess(&fixture("plume-long-fork.txt")), Some(Format::Plume));
    assert_eq!(Format::guess(&fixture("cobra")), Some(Format::Cobra));
    assert_eq!(Format::guess(&fixture("viper")), Some(Format::Viper));
}

#[test]
fn chronos_goes_through_the_format_enum() {
    assert_round_trip(
        r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":1,"value":5},{"f":"r","key":2,"value":null}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":"4.0000000002","ops":[{"f":"r","key":1,"value":5},{"f":"append","key":3,"value":1}]}
"#,
        Format::Chronos,
    );
    let h = v1_history(r#"{"id":1,"session":1,"status":"aborted","ops":[]}"#);
    let notes = Format::Chronos.write(&h, &mut Vec::new()).unwrap();
    assert!(notes[0].contains("1 aborted or unknown"), "{notes:?}");
}

/// Issue 47: every writer's output, of a history with an empty transaction, reads back
/// with its reader (dbcop's `.hist` used to get `[]`, which its reader refuses); every
/// format but v1 leaves the empty transaction out and says so, and `dropped_facts` counts
/// the timestamps and real times a format has no place for.
#[test]
fn issue_47_every_writer_output_reads_back_and_empty_transactions_are_noted() {
    let kv = v1_history(
        r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"invoked_at":1,"completed_at":2,"ops":[{"f":"w","key":1,"value":1}]}
{"id":2,"session":1,"start_ts":3,"commit_ts":3,"invoked_at":3,"completed_at":4,"ops":[]}
{"id":3,"session":2,"start_ts":5,"commit_ts":6,"invoked_at":5,"completed_at":6,"ops":[{"f":"r","key":1,"value":1},{"f":"w","key":1,"value":2}]}
"#,
    );
    // Viper's rows live in its own table.
    let viper = v1_history(
        r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"invoked_at":1,"completed_at":2,"ops":[{"f":"w","table":"viper","key":1,"value":{"id":1,"val":1,"dead":false}}]}
{"id":2,"session":1,"start_ts":3,"commit_ts":3,"invoked_at":3,"completed_at":4,"ops":[]}
{"id":3,"session":2,"start_ts":5,"commit_ts":6,"invoked_at":5,"completed_at":6,"ops":[{"f":"r","table":"viper","key":1,"value":{"id":1,"val":1,"dead":false}}]}
"#,
    );
    for format in isocert_history::formats::ALL_FORMATS {
        let h = if format == Format::Viper { &viper } else { &kv };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(if format.is_directory() { "logs" } else { "history" });
        let notes = format.write_path(h, &path).unwrap_or_else(|e| panic!("writing {format}: {e}"));
        let back = format.read_path(&path).unwrap_or_else(|e| panic!("reading back {format}: {e}"));
        let committed = back.history.txns.iter().filter(|t| t.is_committed()).count();
        let dropped = format.dropped_facts(h);
        if format == Format::V1 {
            assert_eq!(committed, 3, "{format}");
            assert_eq!(dropped, Default::default(), "{format}");
            continue;
        }
        assert_eq!(committed, 2, "{format}: the empty transaction is left out");
        assert!(notes.iter().any(|n| n.contains("1 transactions without operations")), "{format}: {notes:?}");
        assert_eq!(dropped.empty, 1, "{format}");
        assert_eq!(dropped.timestamps, if format.carries_timestamps() { 0 } else { 2 }, "{format}");
        assert_eq!(dropped.real_times, if format.carries_real_time() { 0 } else { 2 }, "{format}");
    }
}
