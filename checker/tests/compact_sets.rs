//! Emme on compact version sets (docs/FORMAT.md) against Emme on the same sets listed row
//! by row: the generator writes both forms of one history (same configuration and seed);
//! the reports must agree anomaly for anomaly at every level, over seeds, both simulated
//! levels and every injection kind that predicate histories take.

use isocert_checker::{check, CheckerKind, IsolationLevel, Report};
use isocert_gen::{generate, GenConfig, Injection};
use isocert_oracle::Interpreter;

fn summary(r: &Report) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<_> = r
        .anomalies
        .iter()
        .map(|a| (format!("{:?}", a.kind), a.txns.iter().map(|t| format!("{t:?}")).collect()))
        .collect();
    out.sort();
    out
}

#[test]
fn emme_reports_the_same_anomalies_on_compact_and_explicit_version_sets() {
    let levels =
        [IsolationLevel::ReadCommitted, IsolationLevel::SnapshotIsolation, IsolationLevel::Serializable];
    let (mut invalid, mut compared) = (0, 0);
    for seed in 0..6 {
        for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
            for inject in std::iter::once(None).chain(Injection::ALL.iter().copied().map(Some)) {
                let cfg = GenConfig {
                    txns: 120,
                    sessions: 4,
                    keys: 10,
                    predicate_ratio: 0.4,
                    seed,
                    isolation,
                    inject,
                    ..GenConfig::default()
                };
                let (Ok(compact), Ok(explicit)) =
                    (generate(&cfg), generate(&GenConfig { explicit_version_sets: true, ..cfg.clone() }))
                else {
                    continue;
                };
                assert!(compact.certificate.snapshot_sets.is_some());
                let oracle = Interpreter::new(&compact.history).unwrap();
                for level in levels {
                    let a = check(&compact.history, &compact.certificate, level, CheckerKind::Emme, &oracle);
                    let b =
                        check(&explicit.history, &explicit.certificate, level, CheckerKind::Emme, &oracle);
                    let (a, b) = (a.expect("compact checks"), b.expect("explicit checks"));
                    if inject == Some(Injection::CertificateContradiction) {
                        // The edited version order changes what the snapshot rule resolves:
                        // both forms must still reject it.
                        assert_eq!(a.is_valid(), b.is_valid(), "seed {seed} {isolation:?} {level:?}");
                    } else {
                        assert_eq!(
                            summary(&a),
                            summary(&b),
                            "seed {seed} {isolation:?} {inject:?} {level:?}"
                        );
                    }
                    invalid += usize::from(!a.is_valid());
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 200 && invalid > 50, "{compared} checks, {invalid} invalid");
}
