//! Interpreter speed: evaluations per second of a compiled five-clause predicate over
//! interned rows, and the cost of compiling one predicate.
//!
//! Run with `cargo bench -p isocert-oracle --bench interpreter`.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use isocert_history::{History, ObjId, PredId, Scalar, ValueId};
use isocert_oracle::{Interpreter, MatchesOracle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The five-clause predicate: a range, an inequality, an IN list, a LIKE and a NULL test.
const PREDICATE: &str =
    "a BETWEEN 100 AND 800 AND b <> 7 AND c IN (1, 3, 5, 7, 9) AND s LIKE 'k1%' AND d IS NOT NULL";

const ROWS: usize = 4096;

fn history() -> (History, PredId, Vec<(ObjId, ValueId)>) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut h = History::new();
    let t = h.intern_table("t");
    let cols: Vec<_> = ["id", "a", "b", "c", "d", "s"].iter().map(|c| h.intern_column(t, c)).collect();
    let mut rows = Vec::with_capacity(ROWS);
    for id in 0..ROWS as i64 {
        let d = if rng.random_bool(0.1) { Scalar::Null } else { Scalar::Float(rng.random_range(0.0..1.0)) };
        let values = [
            Scalar::Int(id),
            Scalar::Int(rng.random_range(0..1000)),
            Scalar::Int(rng.random_range(0..10)),
            Scalar::Int(rng.random_range(0..10)),
            d,
            Scalar::Text(format!("k{}", rng.random_range(0..30)).into()),
        ];
        let pairs: Vec<_> = cols.iter().copied().zip(values).collect();
        let value = h.intern_row(&pairs);
        rows.push((h.intern_object(t, Scalar::Int(id)), value));
    }
    let pred = h.intern_predicate(t, PREDICATE);
    (h, pred, rows)
}

fn evaluate(c: &mut Criterion) {
    let (h, pred, rows) = history();
    let oracle = Interpreter::new(&h).expect("the benchmark predicate compiles");
    let matching = rows.iter().filter(|(o, v)| oracle.matches(&h, pred, *o, *v).unwrap_or(false)).count();
    assert!(matching > 0 && matching < ROWS, "the predicate must split the rows, matched {matching}");
    let mut group = c.benchmark_group("interpreter");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("evaluate 5-clause predicate", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for &(obj, value) in &rows {
                n += usize::from(oracle.matches(&h, pred, obj, value).unwrap_or(false));
            }
            black_box(n)
        })
    });
    group.finish();
}

fn compile(c: &mut Criterion) {
    let mut h = History::new();
    let t = h.intern_table("t");
    for col in ["id", "a", "b", "c", "d", "s"] {
        h.intern_column(t, col);
    }
    h.intern_predicate(t, PREDICATE);
    let mut group = c.benchmark_group("interpreter");
    group.throughput(Throughput::Elements(1));
    group.bench_function("compile 5-clause predicate", |b| {
        b.iter(|| black_box(Interpreter::new(black_box(&h)).expect("compiles")))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = evaluate, compile
}
criterion_main!(benches);
