//! Shrinking checked against the unshrunk history: on the anomaly corpus (tests/corpus) and
//! on generated histories with one injected anomaly among hundreds of valid transactions,
//! the shrunk history shows the same class, keeps only transactions of the original, and is
//! 1-minimal (checked by brute force: leaving out any one more transaction or read loses
//! the class, or would drop a certificate fact).

use std::collections::BTreeSet;
use std::path::Path;

use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel, Report};
use isocert_gen::{generate, GenConfig, Injection};
use isocert_history::{v1, Certificate, History, Op};
use isocert_hunt::{shrink, sub_history, Selection, Shrunk};
use isocert_oracle::Interpreter;

fn checked(h: &History, cert: &Certificate, level: IsolationLevel, checker: CheckerKind) -> Report {
    check(h, cert, level, checker, &Interpreter::new(h).unwrap()).unwrap()
}

/// Whether `keep` still shows `kind` with no class the original did not show.
fn shows(
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    keep: &Selection,
    kind: AnomalyKind,
    allowed: &BTreeSet<AnomalyKind>,
) -> bool {
    let Some((sub, c)) = sub_history(h, cert, keep) else { return false };
    let r = checked(&sub, &c, level, CheckerKind::Auto);
    let kinds: BTreeSet<AnomalyKind> = r.anomalies.iter().map(|a| a.kind).collect();
    kinds.contains(&kind) && kinds.is_subset(allowed)
}

/// Shrinks the first anomaly of `kind` and checks the result against the original.
fn shrink_and_verify(
    name: &str,
    h: &History,
    cert: &Certificate,
    level: IsolationLevel,
    kind: AnomalyKind,
) -> Shrunk {
    let report = checked(h, cert, level, CheckerKind::Auto);
    let anomaly = report
        .anomalies
        .iter()
        .find(|a| a.kind == kind)
        .unwrap_or_else(|| panic!("{name}: no {kind:?} in {:?}", report.anomalies));
    let s = shrink(h, cert, level, &report, anomaly).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(s.report.anomalies.iter().any(|a| a.kind == kind), "{name}: the shrunk history lost the class");
    assert!(s.kept.iter().all(|t| t.index() < h.txns.len()));
    assert!(s.kept.len() <= h.txns.len() && !s.kept.is_empty());
    // Brute force: no single transaction or read of the result can go.
    let allowed: BTreeSet<AnomalyKind> = report.anomalies.iter().map(|a| a.kind).collect();
    let kept: BTreeSet<_> = s.kept.iter().copied().collect();
    // The selection that gives the shrunk history: its transactions' ops are a subset of the
    // originals', matched in order.
    let mut selection = Selection::of(kept.clone());
    for (&t, sub) in s.kept.iter().zip(&s.history.txns) {
        let original = &h.txn(t).ops;
        let mut j = 0;
        for (i, op) in original.iter().enumerate() {
            if j < sub.ops.len() && sub.ops[j] == *op {
                j += 1;
            } else {
                selection.dropped_reads.entry(t).or_default().insert(i as u32);
            }
        }
        assert_eq!(j, sub.ops.len(), "{name}: the shrunk ops are the original's in order");
    }
    assert!(
        shows(h, cert, level, &selection, kind, &allowed),
        "{name}: the selection reproduces the shrunk history"
    );
    for &t in &kept {
        let mut fewer = selection.clone();
        fewer.txns.remove(&t);
        fewer.dropped_reads.remove(&t);
        assert!(!shows(h, cert, level, &fewer, kind, &allowed), "{name}: T{} was not needed", t.index());
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let dropped = selection.dropped_reads.get(&t).is_some_and(|d| d.contains(&(i as u32)));
            if dropped || !matches!(op, Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. }) {
                continue;
            }
            let mut fewer = selection.clone();
            fewer.dropped_reads.entry(t).or_default().insert(i as u32);
            assert!(
                !shows(h, cert, level, &fewer, kind, &allowed),
                "{name}: read {i} of T{} was not needed",
                t.index()
            );
        }
    }
    s
}

#[test]
fn injected_anomalies_shrink_to_their_few_transactions() {
    let cases = [
        (Injection::G0, "serializable", AnomalyKind::G0),
        (Injection::G1a, "serializable", AnomalyKind::G1a),
        (Injection::G1b, "serializable", AnomalyKind::G1b),
        (Injection::G1c, "serializable", AnomalyKind::G1c),
        (Injection::G2Item, "serializable", AnomalyKind::G2Item),
        (Injection::WriteSkew, "serializable", AnomalyKind::G2Item),
        (Injection::LostUpdate, "snapshot-isolation", AnomalyKind::GSi),
        (Injection::GSi, "snapshot-isolation", AnomalyKind::GSi),
    ];
    for (injection, level, kind) in cases {
        let cfg = GenConfig {
            txns: 300,
            keys: 12,
            isolation: IsolationLevel::Serializable,
            inject: Some(injection),
            seed: 5,
            ..GenConfig::default()
        };
        let g = generate(&cfg).unwrap();
        let name = injection.as_str();
        let s = shrink_and_verify(name, &g.history, &g.certificate, level.parse().unwrap(), kind);
        assert!(s.kept.len() <= 6, "{name}: {} of {} transactions kept", s.kept.len(), g.history.txns.len());
    }
}

#[test]
fn corpus_anomalies_shrink_to_the_same_class() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
    let mut shrunk = 0;
    for kind_dir in std::fs::read_dir(&corpus).unwrap().flatten() {
        for case in std::fs::read_dir(kind_dir.path()).unwrap().flatten() {
            let dir = case.path();
            let (Ok(expect), Ok(text), Ok(cert_text)) = (
                std::fs::read_to_string(dir.join("expect.json")),
                std::fs::read_to_string(dir.join("history.jsonl")),
                std::fs::read_to_string(dir.join("certificate.json")),
            ) else {
                continue;
            };
            let expect: serde_json::Value = serde_json::from_str(&expect).unwrap();
            let Ok(h) = v1::read_history(text.as_bytes()) else { continue };
            let Ok(cert) = v1::read_certificate(cert_text.as_bytes(), &mut h.clone()) else { continue };
            for level in expect["reject"].as_array().into_iter().flatten().filter_map(|l| l.as_str()) {
                let kind_name = match &expect["kind"] {
                    serde_json::Value::String(k) => Some(k.as_str()),
                    serde_json::Value::Object(m) => m.get(level).and_then(|k| k.as_str()),
                    _ => None,
                };
                let (Some(kind), Ok(level)) =
                    (kind_name.and_then(AnomalyKind::from_name), level.parse::<IsolationLevel>())
                else {
                    continue;
                };
                let Ok(report) = check(&h, &cert, level, CheckerKind::Auto, &Interpreter::new(&h).unwrap())
                else {
                    continue;
                };
                if !report.anomalies.iter().any(|a| a.kind == kind) {
                    continue;
                }
                shrink_and_verify(&dir.display().to_string(), &h, &cert, level, kind);
                shrunk += 1;
            }
        }
    }
    assert!(shrunk >= 10, "only {shrunk} corpus cases shrunk");
}
