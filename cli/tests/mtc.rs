//! `isocert check` without a certificate on mini-transaction histories (MTC).

use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

const HEADER: &str =
    r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}"#;

/// T2 read T1's x and overwrote it; T3 read both latest versions.
const SERIAL: &str = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"x","value":2},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":3}]}
{"id":3,"session":1,"ops":[{"f":"r","key":"x","value":2},{"f":"r","key":"y","value":3}]}"#;

fn write(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{HEADER}\n{body}\n")).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn auto_checks_mini_transactions_without_a_certificate_and_the_inferred_one_rechecks() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.jsonl", SERIAL);
    let cert = dir.path().join("cert.json");
    let cert = cert.to_str().unwrap();
    for level in ["ser", "si"] {
        let out = isocert(&["check", &good, "-i", level, "--certificate-out", cert]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("mtc"), "{text}");
        let emme = isocert(&["check", &good, "-i", level, "--certificate", cert, "--checker", "emme"]);
        // Emme's snapshot isolation needs timestamps; at serializable it must agree.
        if level == "ser" {
            assert_eq!(emme.status.code(), Some(0), "{}", String::from_utf8_lossy(&emme.stderr));
        }
    }
    // Lost update: both read the initial x and overwrote it.
    let lost = SERIAL.replacen(
        r#""value":1},{"f":"w","key":"x","value":2}"#,
        r#""value":0},{"f":"w","key":"x","value":2}"#,
        1,
    );
    let bad = write(dir.path(), "bad.jsonl", &lost);
    let out = isocert(&["check", &bad, "-i", "si", "--checker", "mtc", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json.to_string().contains("lost update"), "{json}");
}

#[test]
fn a_history_that_is_not_mini_transactions_is_exit_two_naming_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let blind =
        write(dir.path(), "blind.jsonl", r#"{"id":"b7","session":1,"ops":[{"f":"w","key":"x","value":1}]}"#);
    let out = isocert(&["check", &blind, "-i", "ser", "--checker", "mtc"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("b7") && err.contains("without reading it first"), "{err}");
    // Auto, no certificate, not MT-shaped but unique values: the SAT checker.
    let out = isocert(&["check", &blind, "-i", "ser"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cobra"));
    // A value written twice: nothing black-box applies, the certificate is asked for.
    let twice = write(
        dir.path(),
        "twice.jsonl",
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":1,"ops":[{"f":"w","key":"x","value":1}]}"#,
    );
    let out = isocert(&["check", &twice, "-i", "ser"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("carries no certificate"));
}

#[test]
fn cobra_writes_the_order_it_found_and_emme_rechecks_it() {
    let dir = tempfile::tempdir().unwrap();
    // Blind writes of x by T1 and T2; T3 reads T1's x after T2's: the order T2, T1 is the
    // only one, which no read states.
    let blind = write(
        dir.path(),
        "blind.jsonl",
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2},{"f":"w","key":"y","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"y","value":2},{"f":"r","key":"x","value":1}]}"#,
    );
    let cert = dir.path().join("cert.json");
    let cert = cert.to_str().unwrap();
    let out = isocert(&["check", &blind, "-i", "ser", "--checker", "cobra", "--certificate-out", cert]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(cert).unwrap();
    let emme = isocert(&["check", &blind, "-i", "ser", "--certificate", cert, "--checker", "emme"]);
    assert_eq!(emme.status.code(), Some(0), "{written}\n{}", String::from_utf8_lossy(&emme.stdout));
    // Its twin: T3 reads T2's x; T1 before T2 now explains every read (the solver prefers
    // transaction order where nothing decides), and that order is written.
    let twin = write(
        dir.path(),
        "twin.jsonl",
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2},{"f":"w","key":"y","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"y","value":2},{"f":"r","key":"x","value":2}]}"#,
    );
    let out = isocert(&["check", &twin, "-i", "ser", "--checker", "cobra", "--certificate-out", cert]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(std::fs::read_to_string(cert).unwrap(), written);
    // An invalid history writes nothing and says so, exit 1.
    let skew = write(
        dir.path(),
        "skew.jsonl",
        r#"{"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}"#,
    );
    let none = dir.path().join("none.json");
    let out = isocert(&[
        "check",
        &skew,
        "-i",
        "ser",
        "--checker",
        "cobra",
        "--certificate-out",
        none.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!none.exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not written"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn strict_serializability_uses_the_clients_times_and_exits_by_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let stale = r#"{"id":1,"session":1,"invoked_at":0,"completed_at":10,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"invoked_at":20,"completed_at":30,"ops":[{"f":"r","key":"x","value":0}]}"#;
    let bad = write(dir.path(), "stale.jsonl", stale);
    let dot = dir.path().join("g.dot");
    let out = isocert(&["check", &bad, "-i", "sser", "--json", "--dot", dot.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["anomalies"][0]["kind"], "real-time", "{json}");
    let graph = std::fs::read_to_string(&dot).unwrap();
    assert!(graph.contains("label=\"real-time\""), "{graph}");
    // Serializable ignores real time; overlapping intervals are strictly serializable.
    assert_eq!(isocert(&["check", &bad, "-i", "ser"]).status.code(), Some(0));
    let overlapping =
        write(dir.path(), "overlap.jsonl", &stale.replace(r#""invoked_at":20"#, r#""invoked_at":5"#));
    assert_eq!(isocert(&["check", &overlapping, "-i", "strict-serializable"]).status.code(), Some(0));
    // Without the times it is an error naming the transaction; Emme refuses the level.
    let untimed = write(dir.path(), "untimed.jsonl", SERIAL);
    let out = isocert(&["check", &untimed, "-i", "sser"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("T1 has no invoked_at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = isocert(&["check", &bad, "-i", "sser", "--checker", "emme"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--checker mtc"));
}
