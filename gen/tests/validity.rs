//! Generated histories are valid by construction: the reference replay finds nothing.

use isocert_gen::{generate, DataModel, Distribution, GenConfig};
use isocert_history::{IsolationLevel, Op, Status, Value};
use rustc_hash::FxHashSet;

use crate::reference::{violations, Rule};

fn rule(isolation: IsolationLevel) -> Rule {
    match isolation {
        IsolationLevel::Serializable => Rule::CommitTime,
        IsolationLevel::SnapshotIsolation => Rule::Snapshot,
        other => panic!("the generator does not simulate {other}"),
    }
}

fn configs() -> Vec<GenConfig> {
    let mut out = Vec::new();
    for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
        for distribution in [Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot] {
            for (model, predicate_ratio) in [
                (DataModel::KeyValue, 0.0),
                (DataModel::ListAppend, 0.0),
                (DataModel::SqlTable, 0.0),
                (DataModel::Auto, 0.4),
            ] {
                out.push(GenConfig {
                    txns: 300,
                    sessions: 6,
                    ops_per_txn: 4,
                    keys: 12,
                    read_ratio: 0.5,
                    read_only_txns: None,
                    predicate_ratio,
                    distribution,
                    seed: 11,
                    isolation,
                    model,
                    concurrency: 0,
                    avoid_conflicts: false,
                    inject: None,
                    explicit_version_sets: false,
                });
            }
        }
    }
    out
}

#[test]
fn generated_histories_pass_the_reference_replay_at_their_level() {
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        assert_eq!(g.history.txns.len(), cfg.txns);
        assert_eq!(g.stats.committed + g.stats.aborted, cfg.txns);
        let found = violations(&g.history, &g.certificate, rule(cfg.isolation));
        assert!(found.is_empty(), "{cfg:?}: {found:?}");
        // Serializable runs satisfy snapshot isolation too.
        if cfg.isolation == IsolationLevel::Serializable {
            let at_start = violations(&g.history, &g.certificate, Rule::Snapshot);
            assert!(at_start.is_empty(), "{cfg:?}: {at_start:?}");
        }
    }
}

#[test]
fn contention_produces_aborts_recorded_without_commit_timestamps() {
    for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
        let cfg = GenConfig { txns: 400, sessions: 8, keys: 4, isolation, ..GenConfig::default() };
        let g = generate(&cfg).unwrap();
        assert!(g.stats.aborted > 0, "{isolation}: no aborts under contention");
        for t in &g.history.txns {
            assert!(t.start_ts().is_some());
            assert_eq!(t.commit_ts().is_some(), t.status == Status::Committed);
        }
    }
}

#[test]
fn snapshot_isolation_allows_write_skew_that_serializability_forbids() {
    let cfg = GenConfig {
        txns: 600,
        sessions: 8,
        keys: 4,
        isolation: IsolationLevel::SnapshotIsolation,
        ..GenConfig::default()
    };
    let g = generate(&cfg).unwrap();
    assert!(violations(&g.history, &g.certificate, Rule::Snapshot).is_empty());
    assert!(!violations(&g.history, &g.certificate, Rule::CommitTime).is_empty());
}

#[test]
fn read_only_transactions_commit_at_their_start_timestamp() {
    let g = generate(&GenConfig { txns: 200, read_ratio: 0.8, ..GenConfig::default() }).unwrap();
    let mut read_only = 0;
    for t in g.history.txns.iter().filter(|t| t.is_committed()) {
        let writes = t.ops.iter().any(|op| op.is_write());
        if !writes {
            read_only += 1;
            assert_eq!(t.start_ts(), t.commit_ts());
        } else {
            assert!(t.start_ts() < t.commit_ts());
        }
    }
    assert!(read_only > 0);
}

#[test]
fn every_written_value_is_unique() {
    for model in [DataModel::KeyValue, DataModel::SqlTable, DataModel::ListAppend] {
        let predicate_ratio = if model == DataModel::SqlTable { 0.3 } else { 0.0 };
        let g = generate(&GenConfig { txns: 300, model, predicate_ratio, ..GenConfig::default() }).unwrap();
        let h = &g.history;
        let mut seen = FxHashSet::default();
        for t in &h.txns {
            for op in &t.ops {
                let fresh = match op {
                    Op::Write { obj, value } => seen.insert((*obj, format!("{:?}", h.value(*value)))),
                    Op::Append { obj, element } => seen.insert((*obj, format!("{element:?}"))),
                    Op::Update { rows, .. } => {
                        rows.iter().all(|r| seen.insert((r.obj, format!("{:?}", h.value(r.value)))))
                    }
                    _ => true,
                };
                assert!(fresh, "{model:?}: a value was written twice");
            }
        }
        assert!(!seen.is_empty());
    }
}

#[test]
fn every_committed_predicate_operation_has_a_version_set() {
    let g =
        generate(&GenConfig { txns: 200, predicate_ratio: 0.5, keys: 30, ..GenConfig::default() }).unwrap();
    // Compact by default; expanded by the format's rule to count rows.
    assert!(g.certificate.snapshot_sets.is_some());
    let mut cert = g.certificate.clone();
    cert.expand_snapshot_sets(&g.history).unwrap();
    let sets = cert.version_sets.as_ref().unwrap();
    let mut n = 0;
    for id in g.history.txn_ids() {
        let t = g.history.txn(id);
        for (i, op) in t.ops.iter().enumerate() {
            if op.predicate().is_some() && t.is_committed() {
                n += 1;
                let set = &sets[&isocert_history::OpRef { txn: id, op: i as u32 }];
                assert_eq!(set.len(), 30, "every row exists, so every row is listed");
            }
        }
    }
    assert!(n > 50);
    assert_eq!(sets.len(), n);
}

#[test]
fn chronos_shape_is_snapshot_isolation_valid() {
    let cfg = GenConfig::chronos(1_500, 3);
    let g = generate(&cfg).unwrap();
    assert!(g.history.txns.iter().all(|t| t.ops.len() == 15));
    assert_eq!(g.history.session_count(), 50);
    assert!(violations(&g.history, &g.certificate, Rule::Snapshot).is_empty());
    assert!(
        g.stats.aborted * 50 < g.stats.committed,
        "conflict avoidance keeps SI aborts rare: {:?}",
        g.stats
    );
    let without = generate(&GenConfig { avoid_conflicts: false, ..cfg.clone() }).unwrap();
    assert!(without.stats.aborted > g.stats.aborted * 10, "{:?}", without.stats);
    let lists =
        g.history.txns.iter().flat_map(|t| &t.ops).any(
            |op| matches!(op, Op::Read { value, .. } if matches!(g.history.value(*value), Value::List(_))),
        );
    assert!(!lists);
}

#[test]
fn bad_knobs_are_errors_naming_the_knob() {
    let cases = [
        (GenConfig { sessions: 0, ..GenConfig::default() }, "--sessions"),
        (GenConfig { keys: 0, ..GenConfig::default() }, "--keys"),
        (GenConfig { read_ratio: 1.5, ..GenConfig::default() }, "--read-ratio"),
        (
            GenConfig { predicate_ratio: 0.5, model: DataModel::KeyValue, ..GenConfig::default() },
            "--predicate-ratio",
        ),
        (GenConfig { inject: Some(isocert_gen::Injection::G2), ..GenConfig::default() }, "--inject"),
    ];
    for (cfg, knob) in cases {
        let e = generate(&cfg).unwrap_err().to_string();
        assert!(e.starts_with(knob), "{e}");
    }
}

#[test]
fn one_transaction_in_flight_runs_serially_without_aborts() {
    let cfg = GenConfig { txns: 300, sessions: 6, keys: 3, concurrency: 1, ..GenConfig::default() };
    let g = generate(&cfg).unwrap();
    assert_eq!(g.stats.aborted, 0);
    let mut spans: Vec<_> =
        g.history.txns.iter().map(|t| (t.start_ts().unwrap(), t.commit_ts().unwrap())).collect();
    spans.sort();
    assert!(spans.windows(2).all(|w| w[0].1 < w[1].0));
}

#[test]
fn blind_transactions_only_read_or_only_write_in_the_asked_proportion_and_stay_valid() {
    for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
        let cfg = GenConfig {
            txns: 2000,
            sessions: 8,
            ops_per_txn: 8,
            keys: 200,
            read_only_txns: Some(0.5),
            isolation,
            ..GenConfig::default()
        };
        let g = generate(&cfg).unwrap();
        let (mut reading, mut writing) = (0, 0);
        for t in &g.history.txns {
            let reads = t.ops.iter().filter(|op| matches!(op, Op::Read { .. })).count();
            match reads {
                8 => reading += 1,
                0 => writing += 1,
                _ => panic!("a transaction mixes reads and writes: {t:?}"),
            }
        }
        // Half and half, within a wide margin (2,000 draws).
        assert!((800..1200).contains(&reading) && reading + writing == 2000, "{reading} read-only");
        let found = violations(&g.history, &g.certificate, rule(isolation));
        assert!(found.is_empty(), "{found:?}");
    }
}
