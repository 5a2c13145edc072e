//! The scenario library (tests/scenarios/*.spec, one per anomaly class and the predicate
//! cases) run by `isocert scenario` at read committed, repeatable read and serializable,
//! every permutation checked as serializable: the table of anomaly kinds shown must be
//! tests/scenarios/expected/DATABASE.md, which docs/SCENARIOS.md reproduces and explains
//! against Hermitage's published tables. `ISOCERT_UPDATE_SNAPSHOTS=1` rewrites it after a
//! reviewed change. tests/scenarios/multi-table/ holds scenarios whose anomaly is seen only
//! when every table they use is recorded; tests/scenarios/scalars/ holds scenarios over text
//! and numeric columns, tests/scenarios/keys/ over a table without a primary key (keyed by
//! a unique column) and a partitioned table.

use std::path::{Path, PathBuf};
use std::process::Command;

use isocert_adapters::{EmbeddedMariaDb, EmbeddedPostgres};
use isocert_tests::fresh_pg_database;
use isocert_testsupport::Source;

/// The specs in tests/scenarios/`dir` (`""`: the library itself).
fn specs(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(dir);
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "spec"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 14, "the library has a scenario per anomaly class: {specs:?}");
    specs
}

/// Runs the specs of `dir` on `target` (`--db URL` or `--database NAME`) and compares the
/// table.
fn table_matches(target: &[&str], dir: &str, expected: &str) {
    let output = Command::new(isocert_tests::isocert_bin())
        .arg("scenario")
        .args(specs(dir))
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
    // Anomalies are expected at the weaker levels: exit 1, never 2 (every permutation that
    // ran is decided: none uncertified, partial or unrecorded).
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(" 0 uncertified "), "{stderr}");
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
        Some(Source::Url(url)) => {
            table_matches(&["--db", &fresh_pg_database(&url, "anomaly_library")], "", "postgres.md")
        }
        Some(Source::Embedded) => table_matches(&["--database", "postgres"], "", "postgres.md"),
        None => {}
    }
}

#[test]
fn the_anomaly_library_on_mariadb_matches_its_table() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => table_matches(&["--db", &url], "", "mariadb.md"),
        Some(Source::Embedded) => table_matches(&["--database", "mariadb"], "", "mariadb.md"),
        None => {}
    }
}

/// Issue 29: Hermitage's tests with Hermitage's own statements (`value = value + 5`, two
/// writers of one value, a predicate delete after an update of every row): every one of
/// the 42 level verdicts decided, the anomalies Hermitage says each database allows flagged.
#[test]
fn issue_29_hermitage_on_postgresql_is_decided_and_matches_its_table() {
    match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => table_matches(
            &["--db", &fresh_pg_database(&url, "hermitage")],
            "hermitage",
            "hermitage-postgres.md",
        ),
        Some(Source::Embedded) => {
            table_matches(&["--database", "postgres"], "hermitage", "hermitage-postgres.md")
        }
        None => {}
    }
}

#[test]
fn issue_29_hermitage_on_mariadb_is_decided_and_matches_its_table() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => table_matches(&["--db", &url], "hermitage", "hermitage-mariadb.md"),
        Some(Source::Embedded) => {
            table_matches(&["--database", "mariadb"], "hermitage", "hermitage-mariadb.md")
        }
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
        Some(Source::Url(url)) => {
            write_skew_across_two_tables(&["--db", &fresh_pg_database(&url, "write_skew_two_tables")])
        }
        Some(Source::Embedded) => write_skew_across_two_tables(&["--database", "postgres"]),
        None => {}
    }
}

/// `isocert scenario --json` on a spec written to a temporary file: the exit code and the
/// whole document.
fn scenario_json(target: &[&str], text: &str, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("case.spec");
    std::fs::write(&spec, text).unwrap();
    let output = Command::new(isocert_tests::isocert_bin())
        .arg("scenario")
        .arg(&spec)
        .args(target)
        .arg("--json")
        .args(args)
        .output()
        .expect("isocert scenario");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let doc = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("JSON: {e}; {stderr}"));
    (output.status.code(), doc)
}

/// `isocert scenario --json` on a spec written to a temporary file: the first run's
/// permutations.
fn permutations(target: &[&str], text: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("case.spec");
    std::fs::write(&spec, text).unwrap();
    let output = Command::new(isocert_tests::isocert_bin())
        .arg("scenario")
        .arg(&spec)
        .args(target)
        .arg("--json")
        .args(args)
        .output()
        .expect("isocert scenario");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    doc["runs"][0]["permutations"].as_array().expect("permutations").clone()
}

const TWO_TABLES: &str =
    "setup { CREATE TABLE l (id int PRIMARY KEY, v int); CREATE TABLE r (id int PRIMARY KEY, v int);
  INSERT INTO l VALUES (1, 10); INSERT INTO r VALUES (1, 20); }
";

const TEARDOWN: &str = "teardown { DROP TABLE l; DROP TABLE r; DROP FUNCTION IF EXISTS copy_to_r(); }
";

fn what_the_check_and_the_verdicts_follow(target: &[&str]) {
    // The spec names repeatable read: checked as snapshot isolation, whatever --isolation
    // says, so its write skew is valid; checked as serializable on request, it is not.
    let skew = format!(
        "{TWO_TABLES}{TEARDOWN}
session s1
step r1 {{ BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM l WHERE id = 1; SELECT * FROM r WHERE id = 1; }}
step w1 {{ UPDATE l SET v = 11 WHERE id = 1; COMMIT; }}
session s2
step r2 {{ BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM l WHERE id = 1; SELECT * FROM r WHERE id = 1; }}
step w2 {{ UPDATE r SET v = 21 WHERE id = 1; COMMIT; }}
permutation r1 r2 w1 w2
"
    );
    let perms = permutations(target, &skew, &["--isolation", "serializable"]);
    assert_eq!(perms[0]["checked_as"], "snapshot-isolation", "{perms:?}");
    assert_eq!(perms[0]["levels"], serde_json::json!(["repeatable-read"]));
    assert_eq!(perms[0]["verdict"], "valid", "{perms:?}");
    let perms = permutations(target, &skew, &["--check", "serializable"]);
    assert_eq!(perms[0]["verdict"], "anomalies", "{perms:?}");

    // A trigger writes a recorded table the history does not: uncertified, with the reason.
    let trigger = format!(
        "{TWO_TABLES}
setup {{ CREATE FUNCTION copy_to_r() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN UPDATE r SET v = NEW.v WHERE id = 1; RETURN NEW; END $$;
  CREATE TRIGGER copy AFTER UPDATE ON l FOR EACH ROW EXECUTE FUNCTION copy_to_r(); }}
{TEARDOWN}
session s1
step w1 {{ UPDATE l SET v = 12 WHERE id = 1; }}
"
    );
    let perms = permutations(target, &trigger, &["--allow-uncertified"]);
    assert_eq!(perms[0]["verdict"], "uncertified", "{perms:?}");
    assert!(perms[0]["why"].as_str().unwrap().contains("recovering the certificate"), "{perms:?}");
    // Uncertified is not valid: exit 2 without --allow-uncertified, the summary counts it
    // (issue 29).
    let (code, doc) = scenario_json(target, &trigger, &[]);
    assert_eq!(code, Some(2), "{doc}");
    assert_eq!(doc["summary"]["uncertified"], 1, "{doc}");
    assert_eq!(doc["summary"]["valid"], 0, "{doc}");

    // A NULL is recorded (l); a numeric of more digits than a double holds is not rounded:
    // that table is not recorded, the other one is.
    let null =
        "setup { CREATE TABLE l (id int PRIMARY KEY, v int); CREATE TABLE n (id int PRIMARY KEY, v numeric);
  INSERT INTO l VALUES (1, NULL); INSERT INTO n VALUES (1, 1234567890.1234567); }
teardown { DROP TABLE l; DROP TABLE n; }
session s1
step rw { SELECT * FROM n WHERE id = 1; UPDATE l SET v = 11 WHERE id = 1; }
";
    // Writes that repeat a row's value are versions of their writers (issue 29): the
    // certificate names the version each read of a repeated value saw, so the permutation is
    // checked, valid when serial and flagged when the read skews.
    let repeat =
        "setup { CREATE TABLE l (id int PRIMARY KEY, v text); INSERT INTO l VALUES (1, 'a'), (2, 'a'); }
teardown { DROP TABLE l; }
session s1
step r1 { BEGIN ISOLATION LEVEL READ COMMITTED; SELECT * FROM l WHERE id = 1; }
step s1 { SELECT * FROM l WHERE id = 2; COMMIT; }
session s2
step w2 { BEGIN; UPDATE l SET v = 'b' WHERE id = 1; UPDATE l SET v = 'b' WHERE id = 2; COMMIT; }
step w3 { BEGIN; UPDATE l SET v = 'a' WHERE id = 1; UPDATE l SET v = 'a' WHERE id = 2; COMMIT; }
permutation r1 s1 w2 w3
permutation r1 w2 w3 s1
";
    let perms = permutations(target, repeat, &["--check", "serializable"]);
    assert_eq!(perms[0]["verdict"], "valid", "{perms:?}");
    // s1 reads row 2's second 'a' (its writer's version, not the initial one): read skew.
    assert_eq!(perms[1]["verdict"], "anomalies", "{perms:?}");

    // An escape string and a nested comment holding `;` are read as PostgreSQL reads them
    // (issue 30, item 13): one statement each, recorded, valid.
    let lexing = "setup { CREATE TABLE l (id int PRIMARY KEY, v text); INSERT INTO l VALUES (1, 'a'); }
teardown { DROP TABLE l; }
session s1
step w { UPDATE l SET v = E'it\\'s; fine' WHERE id = 1; /* /* */ ; */ SELECT * FROM l WHERE id = 1; }
";
    let (code, doc) = scenario_json(target, lexing, &[]);
    let perm = &doc["runs"][0]["permutations"][0];
    assert_eq!(perm["verdict"], "valid", "{doc}");
    assert_eq!(perm["errors"], serde_json::json!([]), "{doc}");
    assert_eq!(code, Some(0), "{doc}");

    let perms = permutations(target, null, &["--allow-uncertified"]);
    assert!(
        perms[0]["unreadable_tables"][0]["why"].as_str().unwrap().contains("15 significant digits"),
        "{perms:?}"
    );
    assert_eq!(perms[0]["tables"], serde_json::json!(["l"]), "{perms:?}");
    assert_eq!(perms[0]["unreadable_tables"][0]["table"], "n", "{perms:?}");
    assert_eq!(perms[0]["verdict"], "partial", "{perms:?}");
}

#[test]
fn the_check_level_follows_the_spec_and_unrecordable_writes_are_named_on_postgresql() {
    match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => {
            what_the_check_and_the_verdicts_follow(&["--db", &fresh_pg_database(&url, "check_level")])
        }
        Some(Source::Embedded) => what_the_check_and_the_verdicts_follow(&["--database", "postgres"]),
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

/// tests/scenarios/scalars/doctors-on-call.spec: write skew through a predicate over text
/// columns, with text and numeric values written.
fn write_skew_on_text_columns(target: &[&str]) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/scalars/doctors-on-call.spec");
    let (tables, perms) = verdicts(target, &spec, "repeatable-read");
    assert_eq!(tables, ["doctors"]);
    // Interleaved: each check misses the other's write (anti-dependencies through the
    // predicate over `shift` and `name`).
    assert_eq!(perms[0].0, "anomalies", "{perms:?}");
    assert!(perms[0].1.contains(&"g2".to_string()), "{perms:?}");
    // Its serial twin: valid.
    assert_eq!(perms[1], ("valid".to_string(), Vec::new()));
    // Serializable prevents it (PostgreSQL aborts one transaction, MariaDB's locking reads
    // deadlock or wait).
    let (_, perms) = verdicts(target, &spec, "serializable");
    assert!(perms.iter().all(|(v, _)| v == "valid" || v == "invalid"), "{perms:?}");
    assert_eq!(perms[1].0, "valid");
}

#[test]
fn write_skew_on_text_columns_is_flagged_on_postgresql_and_its_serial_twin_is_not() {
    match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => {
            write_skew_on_text_columns(&["--db", &fresh_pg_database(&url, "text_columns")])
        }
        Some(Source::Embedded) => write_skew_on_text_columns(&["--database", "postgres"]),
        None => {}
    }
}

#[test]
fn write_skew_on_text_columns_is_flagged_on_mariadb_and_its_serial_twin_is_not() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => write_skew_on_text_columns(&["--db", &url]),
        Some(Source::Embedded) => write_skew_on_text_columns(&["--database", "mariadb"]),
        None => {}
    }
}

/// A spec of tests/scenarios/keys/ at repeatable read: its one table recorded, the
/// interleaved permutation flagged `g2`, its serial twin valid.
fn write_skew_in(target: &[&str], spec: &str, table: &str) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/keys").join(spec);
    let (tables, perms) = verdicts(target, &spec, "repeatable-read");
    assert_eq!(tables, [table]);
    assert_eq!(perms[0].0, "anomalies", "{perms:?}");
    assert!(perms[0].1.contains(&"g2".to_string()), "{perms:?}");
    assert_eq!(perms[1], ("valid".to_string(), Vec::new()));
}

#[test]
fn tables_keyed_by_a_unique_column_and_partitioned_tables_are_recorded_on_postgresql() {
    let target = match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) {
        Some(Source::Url(url)) => vec!["--db".to_string(), fresh_pg_database(&url, "unique_keys")],
        Some(Source::Embedded) => vec!["--database".to_string(), "postgres".to_string()],
        None => return,
    };
    let target: Vec<&str> = target.iter().map(String::as_str).collect();
    write_skew_in(&target, "unique-key-write-skew.spec", "on_call");
    write_skew_in(&target, "partitioned-write-skew.spec", "shifts");
}

#[test]
fn a_table_keyed_by_a_unique_column_is_recorded_on_mariadb() {
    match isocert_testsupport::MARIADB.source(EmbeddedMariaDb::is_installed()) {
        Some(Source::Url(url)) => write_skew_in(&["--db", &url], "unique-key-write-skew.spec", "on_call"),
        Some(Source::Embedded) => {
            write_skew_in(&["--database", "mariadb"], "unique-key-write-skew.spec", "on_call")
        }
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
