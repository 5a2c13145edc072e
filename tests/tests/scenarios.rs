//! The scenario library (tests/scenarios/*.spec, one per anomaly class and the predicate
//! cases) run by `isocert scenario` at read committed, repeatable read and serializable,
//! every permutation checked as serializable: the table of anomaly kinds shown must be
//! tests/scenarios/expected/DATABASE.md, which docs/SCENARIOS.md reproduces and explains
//! against Hermitage's published tables. `ISOCERT_UPDATE_SNAPSHOTS=1` rewrites it after a
//! reviewed change.

use std::path::{Path, PathBuf};
use std::process::Command;

use isocert_adapters::{EmbeddedMariaDb, EmbeddedPostgres};
use isocert_testsupport::Source;

fn specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "spec"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 14, "the library has a scenario per anomaly class: {specs:?}");
    specs
}

/// Runs the library on `target` (`--db URL` or `--database NAME`) and compares the table.
fn table_matches(target: &[&str], expected: &str) {
    let output = Command::new(isocert_tests::isocert_bin())
        .arg("scenario")
        .args(specs())
        .args(target)
        .args([
            "--isolation",
            "read-committed",
            "--isolation",
            "repeatable-read",
            "--isolation",
            "serializable",
        ])
        .args(["--check", "serializable", "--table"])
        .output()
        .expect("isocert scenario");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Anomalies are expected at the weaker levels: exit 1, never 2.
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let table = String::from_utf8(output.stdout).expect("UTF-8");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/expected").join(expected);
    if std::env::var("ISOCERT_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &table).expect("writing the expected table");
        return;
    }
    let want = std::fs::read_to_string(&path).expect("the expected table");
    assert_eq!(table, want, "the outcome table changed ({}); stderr:\n{stderr}", path.display());
}

#[test]
fn the_anomaly_library_on_postgresql_matches_its_table() {
    match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => table_matches(&["--db", &url], "postgres.md"),
        Some(Source::Embedded) => table_matches(&["--database", "postgres"], "postgres.md"),
        None => {}
    }
}

#[test]
fn the_anomaly_library_on_mariadb_matches_its_table() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => table_matches(&["--db", &url], "mariadb.md"),
        Some(Source::Embedded) => table_matches(&["--database", "mariadb"], "mariadb.md"),
        None => {}
    }
}

#[test]
fn a_spec_error_names_the_file_and_line_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.spec");
    std::fs::write(&bad, "session s1\nstep a { SELECT 1; }\npermutation a b\n").unwrap();
    let output = Command::new(isocert_tests::isocert_bin()).arg("scenario").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.spec") && stderr.contains("line 3") && stderr.contains("step b"),
        "{stderr}"
    );
}
