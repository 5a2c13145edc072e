//! Any byte string is either a King Cobra version order for a fixed Cobra log or a clear
//! error; never a panic. The log is the `cyclic` fixture's shape, built here so the target
//! needs no files.
#![no_main]

use isocert_history::formats::{read_cobra_log_with_version_order, write_king_cobra_version_order};
use isocert_history::Scalar;
use libfuzzer_sys::fuzz_target;

fn log() -> Vec<u8> {
    let mut out = Vec::new();
    let mut record = |tag: u8, words: &[i64]| {
        out.push(tag);
        words.iter().for_each(|w| out.extend_from_slice(&w.to_be_bytes()));
    };
    record(b'S', &[1]);
    record(b'W', &[1, 0, 0]);
    record(b'W', &[2, 1, 0]);
    record(b'C', &[1]);
    record(b'S', &[2]);
    record(b'W', &[3, 0, 1]);
    record(b'R', &[3, 4, 1, 1]);
    record(b'C', &[2]);
    record(b'S', &[3]);
    record(b'R', &[2, 3, 0, 1]);
    record(b'W', &[4, 1, 1]);
    record(b'C', &[3]);
    out
}

fuzz_target!(|data: &[u8]| {
    if let Ok(imported) = read_cobra_log_with_version_order(Scalar::Int(0), &log(), data) {
        let cert = imported.certificate.expect("a version order was read");
        // Whatever was read must write back, never panic.
        let _ = write_king_cobra_version_order(&imported.history, &cert, &mut Vec::new());
    }
});
