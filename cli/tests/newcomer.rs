//! A newcomer's path: a run at a level that allows the anomalies one may be looking for
//! says which it allows and how to ask for them, in the summary and the HTML report; at
//! serializable there is nothing to say.

use std::process::Command;

use isocert_adapters::EmbeddedPostgres;
use isocert_testsupport::POSTGRES;

/// `isocert run` of a small kv workload at `level` into a fresh folder; returns its
/// standard error and its HTML report.
fn run_at(level: &str) -> Option<(String, String)> {
    let mut args: Vec<String> =
        ["run", "--workload", "kv", "--txns", "40", "--sessions", "2", "--isolation", level]
            .iter()
            .map(|s| s.to_string())
            .collect();
    match POSTGRES.source(EmbeddedPostgres::is_installed())? {
        isocert_testsupport::Source::Url(url) => args.extend(["--db".into(), url, "--reset-tables".into()]),
        isocert_testsupport::Source::Embedded => {}
    }
    let dir = tempfile::tempdir().unwrap();
    args.extend(["--out".into(), dir.path().join("out").display().to_string()]);
    let o = Command::new(env!("CARGO_BIN_EXE_isocert")).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}{stderr}", String::from_utf8_lossy(&o.stdout));
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    Some((stderr, html))
}

#[test]
fn a_run_below_serializable_says_what_its_level_allows_and_how_to_ask_for_more() {
    let Some((stderr, html)) = run_at("read-committed") else { return };
    assert!(stderr.contains("read-committed allows lost updates (P4)"), "{stderr}");
    assert!(stderr.contains("--check serializable"), "{stderr}");
    assert!(html.contains("allowed at this level"), "the HTML report says it too");
    let Some((stderr, html)) = run_at("serializable") else { return };
    assert!(!stderr.contains(" allows "), "{stderr}");
    assert!(!html.contains("allowed at this level"));
}
