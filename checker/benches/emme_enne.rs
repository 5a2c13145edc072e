//! Emme and Enne benchmarks on generated histories (figures and commands in
//! docs/PERFORMANCE.md, section "Emme/Enne").
//!
//! ```text
//! cargo bench -p isocert-checker --bench emme_enne                # criterion, small scenarios
//! cargo bench -p isocert-checker --bench emme_enne -- run [NAME]  # every (or one) scenario, best of 3
//! cargo bench -p isocert-checker --bench emme_enne -- gen DIR     # write NAME.jsonl + NAME.cert.json
//! ```
//!
//! Inputs come from the seeded generator (isocert-gen) under serializability and are
//! checked to be valid before anything is timed; the timings cover checking only (the
//! history is already in memory). `gen` writes the same inputs as v1 files so that
//! `/usr/bin/time -v isocert check ...` measures the whole command and its peak memory.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use isocert_checker::{check, CheckerKind, IsolationLevel};
use isocert_gen::{generate, GenConfig, Generated};
use isocert_history::v1;
use isocert_oracle::Interpreter;

/// One benchmark input and the checker to time on it.
struct Scenario {
    name: &'static str,
    txns: usize,
    predicate_ratio: f64,
    checker: CheckerKind,
}

const SCENARIOS: &[Scenario] = &[
    Scenario { name: "emme-item-100k", txns: 100_000, predicate_ratio: 0.0, checker: CheckerKind::Emme },
    Scenario { name: "emme-pred-2500", txns: 2_500, predicate_ratio: 0.5, checker: CheckerKind::Emme },
    Scenario { name: "emme-pred-100k", txns: 100_000, predicate_ratio: 0.5, checker: CheckerKind::Emme },
    Scenario { name: "enne-item-100k", txns: 100_000, predicate_ratio: 0.0, checker: CheckerKind::Enne },
    Scenario { name: "enne-pred-100k", txns: 100_000, predicate_ratio: 0.5, checker: CheckerKind::Enne },
];

fn config(s: &Scenario) -> GenConfig {
    GenConfig {
        txns: s.txns,
        sessions: 20,
        ops_per_txn: 5,
        keys: 1_000,
        read_ratio: 0.5,
        predicate_ratio: s.predicate_ratio,
        seed: 42,
        isolation: IsolationLevel::Serializable,
        ..GenConfig::default()
    }
}

fn input(s: &Scenario) -> (Generated, Interpreter) {
    let g = generate(&config(s)).expect("generate");
    let oracle = Interpreter::new(&g.history).expect("predicates compile");
    let report =
        check(&g.history, &g.certificate, IsolationLevel::Serializable, s.checker, &oracle).expect("check");
    assert!(report.is_valid(), "{}: generated input is not valid: {:?}", s.name, report.anomalies.first());
    (g, oracle)
}

fn time_once(s: &Scenario, g: &Generated, oracle: &Interpreter) -> Duration {
    let start = Instant::now();
    let report =
        check(&g.history, &g.certificate, IsolationLevel::Serializable, s.checker, oracle).expect("check");
    let elapsed = start.elapsed();
    assert!(black_box(report).is_valid());
    elapsed
}

fn run(only: Option<&str>) {
    for s in SCENARIOS.iter().filter(|s| only.is_none_or(|n| n == s.name)) {
        let (g, oracle) = input(s);
        let ops: usize = g.history.txns.iter().map(|t| t.ops.len()).sum();
        let best = (0..3).map(|_| time_once(s, &g, &oracle)).min().expect("three runs");
        println!(
            "{:<16} {:>7} txns {:>8} ops  {:>9.3} s  ({})",
            s.name,
            g.history.txns.len(),
            ops,
            best.as_secs_f64(),
            s.checker
        );
    }
}

fn write_inputs(dir: &Path) {
    std::fs::create_dir_all(dir).expect("output directory");
    for s in SCENARIOS.iter().filter(|s| s.checker == CheckerKind::Emme) {
        let (g, _) = input(s);
        let mut out =
            std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{}.jsonl", s.name))).unwrap());
        v1::write_history(&g.history, &mut out).expect("write history");
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(dir.join(format!("{}.cert.json", s.name))).unwrap(),
        );
        v1::write_certificate(&g.history, &g.certificate, &mut out).expect("write certificate");
        println!("wrote {}", dir.join(s.name).display());
    }
}

fn criterion_benches() {
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let name = "emme-pred-2500";
    let s = SCENARIOS.iter().find(|s| s.name == name).expect("scenario");
    let (g, oracle) = input(s);
    c.bench_function(name, |b| {
        b.iter(|| {
            check(&g.history, &g.certificate, IsolationLevel::Serializable, s.checker, &oracle).unwrap()
        })
    });
    c.final_summary();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    match args.first().map(String::as_str) {
        Some("run") => run(args.get(1).map(String::as_str)),
        Some("gen") => {
            write_inputs(Path::new(args.get(1).map(String::as_str).unwrap_or("target/emme-inputs")))
        }
        _ => criterion_benches(),
    }
}
