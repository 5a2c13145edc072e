//! The scenario library (tests/scenarios/*.spec, one per anomaly class and the predicate
//! cases) run by `isocert scenario` at read committed, repeatable read and serializable,
//! every permutation checked as serializable: the table of anomaly kinds shown must be
//! tests/scenarios/expected/DATABASE.md, which docs/SCENARIOS.md reproduces and explains
//! against Hermitage's published tables. `ISOCERT_UPDATE_SNAPSHOTS=1` rewrites it after a
//! reviewed change. tests/scenarios/multi-table/ holds scenarios whose anomaly is seen only
//! when every table they use is recorded.

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

/// The verdicts and anomaly kinds of each permutation of `spec` at `isolation`, checked as
/// serializable, with the recorded tables.
fn verdicts(target: &[&str], spec: &Path, isolation: &str) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let output = Command::new(isocert_tests::isocert_bin())
        .arg("scenario")
        .arg(spec)
        .args(target)
        .args(["--isolation", isolation, "--check", "serializable", "--json"])
        .output()
        .expect("isocert scenario");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let run = &doc["runs"][0];
    let tables =
        run["tables"].as_array().expect("tables").iter().map(|t| t.as_str().unwrap().to_string()).collect();
    let perms = run["permutations"]
        .as_array()
        .expect("permutations")
        .iter()
        .map(|p| {
            let kinds =
                p["anomalies"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
            (p["verdict"].as_str().unwrap().to_string(), kinds)
        })
        .collect();
    (tables, perms)
}

fn write_skew_across_two_tables(target: &[&str]) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/multi-table/write-skew-two-tables.spec");
    let (tables, perms) = verdicts(target, &spec, "repeatable-read");
    assert_eq!(tables, ["left_side", "right_side"]);
    // Interleaved: the cycle runs through both tables (one table alone shows no cycle).
    assert_eq!(perms[0].0, "anomalies", "{perms:?}");
    assert!(perms[0].1.contains(&"g2-item".to_string()), "{perms:?}");
    // Its twin, the same transactions one after the other: accepted.
    assert_eq!(perms[1], ("valid".to_string(), Vec::new()));
    // Serializable prevents it: PostgreSQL aborts one transaction, MariaDB's locking reads
    // make the interleaving wait (an invalid permutation).
    let (_, perms) = verdicts(target, &spec, "serializable");
    assert!(perms.iter().all(|(v, _)| v == "valid" || v == "invalid"), "{perms:?}");
    assert_eq!(perms[1].0, "valid");
}

#[test]
fn write_skew_across_two_tables_is_flagged_on_postgresql_and_its_serial_twin_is_not() {
    match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => write_skew_across_two_tables(&["--db", &url]),
        Some(Source::Embedded) => write_skew_across_two_tables(&["--database", "postgres"]),
        None => {}
    }
}

#[test]
fn write_skew_across_two_tables_is_flagged_on_mariadb_and_its_serial_twin_is_not() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => write_skew_across_two_tables(&["--db", &url]),
        Some(Source::Embedded) => write_skew_across_two_tables(&["--database", "mariadb"]),
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
