//! Mutated and random inputs never panic a reader (a fixed-seed stand-in for the fuzz
//! targets in `history/fuzz/`, so every `cargo test` covers the same ground briefly).

use isocert_history::formats::{
    read_awdit_test, read_cobra_log, read_cobra_log_with_version_order, read_dbcop_bincode, read_dbcop_json,
    read_dbcop_text, read_elle_edn, read_elle_json, read_plume, Format,
};
use isocert_history::Scalar;
use isocert_random::rand::Rng as _;
use isocert_random::SeededRng;

use super::{fixture, v1_history};

/// `seed` with a few bytes flipped, inserted, deleted or the tail cut.
fn mutate(rng: &mut SeededRng, seed: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if out.is_empty() { 0 } else { rng.random_range(0..out.len()) };
        match rng.random_range(0..4) {
            0 if !out.is_empty() => out[at] = rng.random(),
            1 => out.insert(at, rng.random()),
            2 if !out.is_empty() => {
                out.remove(at);
            }
            _ => out.truncate(at),
        }
    }
    out
}

fn seeds(format: Format, files: &[&str]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(fixture(f)).unwrap()).collect();
    let h = v1_history(
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":3,"value":9},{"f":"r","key":4,"value":0}]}
{"id":2,"session":2,"status":"aborted","ops":[{"f":"w","key":4,"value":5}]}"#,
    );
    let mut bytes = Vec::new();
    if format.write(&h, &mut bytes).is_ok() {
        out.push(bytes);
    }
    out
}

fn hammer(seeds: &[Vec<u8>], read: impl Fn(&[u8])) {
    let mut rng = isocert_random::seeded(0x9e37_79b9_7f4a_7c15);
    for seed in seeds {
        read(seed);
        for _ in 0..1500 {
            read(&mutate(&mut rng, seed));
        }
    }
    for _ in 0..500 {
        let len = rng.random_range(0..200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        read(&bytes);
    }
}

#[test]
fn cobra_logs() {
    hammer(&seeds(Format::V1, &["cobra/T1.log", "cobra/T2.log"]), |b| {
        let _ = read_cobra_log(Scalar::Int(1), b);
    });
}

#[test]
fn king_cobra_version_orders() {
    let log = std::fs::read(fixture("king-cobra/cyclic/history/0.log")).unwrap();
    let orders: Vec<Vec<u8>> = ["king-cobra/cyclic/version_order.vo", "king-cobra/serial/partial.vo"]
        .iter()
        .map(|f| std::fs::read(fixture(f)).unwrap())
        .collect();
    hammer(&orders, |b| {
        let _ = read_cobra_log_with_version_order(Scalar::Int(0), &log, b);
    });
}

#[test]
fn dbcop_bincode() {
    hammer(&seeds(Format::DbcopBincode, &[]), |b| {
        let _ = read_dbcop_bincode(b);
    });
}

#[test]
fn elle_edn_and_json() {
    hammer(&seeds(Format::Elle, &["elle-list-append.edn", "elle-closed-predicate.edn"]), |b| {
        let _ = read_elle_edn(b);
    });
    hammer(&seeds(Format::ElleJson, &["elle-cli-aborted-read.json"]), |b| {
        let _ = read_elle_json(b);
    });
}

#[test]
fn plume_text() {
    hammer(&seeds(Format::Plume, &["plume-long-fork.txt"]), |b| {
        let _ = read_plume(b);
    });
    hammer(&seeds(Format::AwditTest, &["awdit-test-fractured.txt"]), |b| {
        let _ = read_awdit_test(b);
    });
}

#[test]
fn dbcop_json_and_hist() {
    hammer(&seeds(Format::DbcopJson, &["dbcop-write-skew.json", "dbcop-standalone.json"]), |b| {
        let _ = read_dbcop_json(b);
    });
    hammer(&seeds(Format::DbcopText, &["dbcop-write-skew.hist"]), |b| {
        let _ = read_dbcop_text(b);
    });
}
