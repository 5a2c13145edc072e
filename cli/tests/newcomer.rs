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

/// `isocert gen` of `inject` at snapshot isolation (or, with none, a serializable
/// history: a simulated snapshot-isolation store makes write skew of its own), then `isocert levels` on it
/// (`--json` when asked): the exit code and standard output.
fn levels_of(inject: Option<&str>, json: bool) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (h, c) = (dir.path().join("h.jsonl"), dir.path().join("c.json"));
    let mut gen: Vec<&str> =
        vec!["gen", "--txns", "60", "--sessions", "4", "--ops-per-txn", "3", "--keys", "4"];
    let level = if inject.is_some() { "si" } else { "ser" };
    gen.extend(["--isolation", level, "--out", h.to_str().unwrap(), "--certificate", c.to_str().unwrap()]);
    if let Some(kind) = inject {
        gen.extend(["--inject", kind]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_isocert")).args(&gen).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let mut args = vec!["levels", h.to_str().unwrap(), "--certificate", c.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_isocert")).args(&args).output().unwrap();
    (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// `isocert levels` checks every level once and prints the ladder: write skew holds at
/// snapshot isolation and fails repeatable read and serializable on g2-item; its valid
/// twin holds at serializable; levels no checker can decide (strict serializability
/// without real times) are listed with the reason.
#[test]
fn levels_prints_the_ladder_of_what_holds_and_what_separates_it_from_what_fails() {
    let (code, text) = levels_of(Some("write-skew"), false);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.starts_with(
            "LEVELS: strongest that holds: snapshot-isolation; weakest that fails: repeatable-read; separated by: g2-item\n"
        ),
        "{text}"
    );
    assert!(text.contains("  strict-serializable  not checked: "), "{text}");
    assert_eq!(text.matches("FAILS").count(), 2, "{text}");

    let (code, json) = levels_of(Some("write-skew"), true);
    assert_eq!(code, Some(1), "{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["strongest_holding"], serde_json::json!(["snapshot-isolation"]), "{doc}");
    assert_eq!(doc["separating_classes"], serde_json::json!(["g2-item"]), "{doc}");
    assert_eq!(doc["levels"].as_array().unwrap().len(), 8, "every level once: {doc}");

    let (code, text) = levels_of(None, false);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with("LEVELS: strongest that holds: serializable; weakest that fails: none\n"),
        "{text}"
    );
}
