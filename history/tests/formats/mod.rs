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
