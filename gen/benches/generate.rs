//! Generator throughput: streaming the Chronos shape, and in-memory histories with predicates.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;
use std::io;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use isocert_gen::{generate, write_stream, GenConfig};

fn stream_chronos(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_chronos_shape");
    group.sample_size(10);
    for txns in [10_000usize, 100_000] {
        let cfg = GenConfig::chronos(txns, 1);
        let stats = write_stream(&cfg, io::sink(), None).unwrap();
        assert_eq!(stats.committed + stats.aborted, txns);
        assert!(stats.aborted * 50 < stats.committed, "the shape stays nearly abort-free");
        group.throughput(Throughput::Elements(txns as u64));
        group.bench_with_input(BenchmarkId::from_parameter(txns), &cfg, |b, cfg| {
            b.iter(|| write_stream(black_box(cfg), io::sink(), None).unwrap())
        });
    }
    group.finish();
}

fn in_memory_predicates(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate_predicates");
    group.sample_size(10);
    for txns in [2_500usize, 10_000] {
        let cfg = GenConfig { txns, ops_per_txn: 5, keys: 100, predicate_ratio: 0.5, ..GenConfig::default() };
        let g = generate(&cfg).unwrap();
        assert!(g.certificate.version_sets.as_ref().is_some_and(|v| !v.is_empty()));
        group.throughput(Throughput::Elements(txns as u64));
        group.bench_with_input(BenchmarkId::from_parameter(txns), &cfg, |b, cfg| {
            b.iter(|| generate(black_box(cfg)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, stream_chronos, in_memory_predicates);
criterion_main!(benches);
