//! The streaming writer: deterministic, and equal to the in-memory history once re-read.

use isocert_gen::{generate, write_stream, DataModel, GenConfig, Injection};
use isocert_history::{v1, IsolationLevel};

fn stream(cfg: &GenConfig) -> (Vec<u8>, Vec<u8>) {
    let (mut history, mut cert) = (Vec::new(), Vec::new());
    write_stream(cfg, &mut history, Some(&mut cert)).unwrap();
    (history, cert)
}

fn cases() -> Vec<GenConfig> {
    let base = GenConfig { txns: 150, sessions: 5, keys: 8, seed: 5, ..GenConfig::default() };
    vec![
        base.clone(),
        GenConfig { isolation: IsolationLevel::SnapshotIsolation, ..base.clone() },
        GenConfig { model: DataModel::ListAppend, ..base.clone() },
        GenConfig { predicate_ratio: 0.4, ..base.clone() },
        GenConfig { predicate_ratio: 0.4, inject: Some(Injection::G2), ..base.clone() },
        GenConfig { inject: Some(Injection::GarbageRead), ..base.clone() },
        GenConfig { inject: Some(Injection::CertificateContradiction), ..base },
    ]
}

#[test]
fn same_seed_gives_the_same_bytes() {
    for cfg in cases() {
        assert_eq!(stream(&cfg), stream(&cfg));
        let other = GenConfig { seed: cfg.seed + 1, ..cfg.clone() };
        assert_ne!(stream(&cfg).0, stream(&other).0);
    }
}

#[test]
fn streamed_output_reads_back_as_the_in_memory_history() {
    for cfg in cases() {
        let (history, cert) = stream(&cfg);
        let mut read = v1::read_history(&history[..]).unwrap();
        let read_cert = v1::read_certificate(&cert[..], &mut read).unwrap();
        let g = generate(&cfg).unwrap();
        let rewrite = |h: &isocert_history::History, c: &isocert_history::Certificate| {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            v1::write_history(h, &mut a).unwrap();
            v1::write_certificate(h, c, &mut b).unwrap();
            (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap())
        };
        let (h1, c1) = rewrite(&read, &read_cert);
        let (h2, c2) = rewrite(&g.history, &g.certificate);
        assert_eq!(h1, h2, "{cfg:?}");
        assert_eq!(c1, c2, "{cfg:?}");
        assert_eq!(read.txns.len(), g.history.txns.len());
    }
}

#[test]
fn streaming_without_a_certificate_writes_the_same_history() {
    let cfg = GenConfig { txns: 100, predicate_ratio: 0.3, ..GenConfig::default() };
    let mut alone = Vec::new();
    let stats = write_stream(&cfg, &mut alone, None).unwrap();
    assert_eq!(alone, stream(&cfg).0);
    assert_eq!(stats.committed + stats.aborted, 100);
    let refused = write_stream(
        &GenConfig { inject: Some(Injection::CertificateContradiction), ..cfg },
        &mut Vec::new(),
        None,
    );
    assert!(refused.unwrap_err().to_string().contains("--certificate"));
}
