//! Compact version sets (docs/FORMAT.md) against the explicit ones: the same configuration
//! and seed generate both; expanding the compact certificate by the format's rule
//! (isocert_history's `SnapshotResolver`) must give exactly the version sets the simulation
//! listed row by row, over seeds, isolation levels, sizes and every injection that keeps a
//! predicate operation. The streamed certificate reads back to the same sets.

use isocert_gen::{generate, write_stream, GenConfig, Injection};
use isocert_history::{v1, Certificate, History, IsolationLevel, OpRef, SeenVersion};
use rustc_hash::FxHashMap;

fn sorted(sets: &FxHashMap<OpRef, Vec<SeenVersion>>) -> Vec<(OpRef, Vec<SeenVersion>)> {
    let mut out: Vec<_> = sets
        .iter()
        .map(|(at, seen)| {
            let mut seen = seen.clone();
            seen.sort_by_key(|s| s.obj);
            (*at, seen)
        })
        .collect();
    out.sort_by_key(|(at, _)| *at);
    out
}

fn expanded(h: &History, cert: &Certificate) -> Vec<(OpRef, Vec<SeenVersion>)> {
    let mut cert = cert.clone();
    cert.expand_snapshot_sets(h).expect("compact sets resolve");
    sorted(cert.version_sets.as_ref().expect("sets"))
}

fn config(seed: u64, isolation: IsolationLevel, inject: Option<Injection>) -> GenConfig {
    GenConfig {
        txns: 150,
        sessions: 5,
        ops_per_txn: 5,
        keys: 12,
        predicate_ratio: 0.4,
        seed,
        isolation,
        inject,
        ..GenConfig::default()
    }
}

#[test]
fn compact_sets_expand_to_the_explicit_ones() {
    let mut compared = 0;
    for seed in 0..12 {
        for isolation in [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation] {
            let injections = std::iter::once(None).chain(Injection::ALL.iter().copied().map(Some));
            for inject in injections {
                // certificate-contradiction edits the version order on purpose: the sets
                // then depend on the form, and the check rejects both (tests/main.rs).
                if inject == Some(Injection::CertificateContradiction) {
                    continue;
                }
                let cfg = config(seed, isolation, inject);
                let (Ok(compact), Ok(explicit)) =
                    (generate(&cfg), generate(&GenConfig { explicit_version_sets: true, ..cfg.clone() }))
                else {
                    continue; // no injection site in this history
                };
                assert!(compact.certificate.snapshot_sets.is_some());
                assert!(explicit.certificate.snapshot_sets.is_none());
                let want = sorted(explicit.certificate.version_sets.as_ref().unwrap());
                let got = expanded(&compact.history, &compact.certificate);
                if let Some((g, w)) = got.iter().zip(&want).find(|(g, w)| g != w) {
                    panic!(
                        "seed {seed}, {isolation:?}, {inject:?}: first difference\n got {g:?}\nwant {w:?}"
                    );
                }
                assert_eq!(got.len(), want.len(), "seed {seed}, {isolation:?}, {inject:?}");
                compared += want.len();
            }
        }
    }
    assert!(compared > 10_000, "only {compared} version sets compared");
}

#[test]
fn the_streamed_compact_certificate_reads_back_to_the_same_sets() {
    let cfg = config(3, IsolationLevel::SnapshotIsolation, None);
    let (mut hist, mut cert) = (Vec::new(), Vec::new());
    write_stream(&cfg, &mut hist, Some(&mut cert)).unwrap();
    let text = String::from_utf8(cert.clone()).unwrap();
    assert!(
        text.contains("\"snapshot\":{\"visible_through\":") && !text.contains("\"versions\""),
        "{text:.300}"
    );
    let mut h = v1::read_history(hist.as_slice()).unwrap();
    let read = v1::read_certificate(cert.as_slice(), &mut h).unwrap();
    let explicit = generate(&GenConfig { explicit_version_sets: true, ..cfg }).unwrap();
    assert_eq!(expanded(&h, &read), sorted(explicit.certificate.version_sets.as_ref().unwrap()));
}

#[test]
fn compacting_listed_sets_gives_back_exactly_the_lists_even_where_they_deviate() {
    let mut rewritten = 0;
    for seed in 0..8 {
        let cfg = GenConfig {
            explicit_version_sets: true,
            ..config(seed, IsolationLevel::SnapshotIsolation, None)
        };
        let g = generate(&cfg).unwrap();
        let want = sorted(g.certificate.version_sets.as_ref().unwrap());
        let mut cert = g.certificate.clone();
        let n = cert.compact_version_sets(&g.history);
        assert_eq!(n, want.len(), "every generated set is a snapshot: all become compact");
        assert!(cert.version_sets.as_ref().unwrap().is_empty());
        assert_eq!(expanded(&g.history, &cert), want, "seed {seed}");
        rewritten += n;

        // Deviations (as PostgreSQL's re-checked rows are): one row per set names an older
        // version or is dropped; they come back as exceptions.
        let mut bent = g.certificate.clone();
        for (i, seen) in bent.version_sets.as_mut().unwrap().values_mut().enumerate() {
            match i % 3 {
                0 => seen.truncate(seen.len().saturating_sub(1)),
                1 => seen.iter_mut().take(1).for_each(|s| s.writer = isocert_history::Writer::Initial),
                _ => {}
            }
        }
        let want = sorted(bent.version_sets.as_ref().unwrap());
        bent.compact_version_sets(&g.history);
        let snaps = bent.snapshot_sets.as_ref().unwrap();
        assert!(snaps.values().any(|s| !s.except.is_empty() || !s.unseen.is_empty()));
        assert_eq!(expanded(&g.history, &bent), want, "seed {seed}, bent");
    }
    assert!(rewritten > 1_000, "{rewritten}");
}
