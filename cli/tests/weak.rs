//! `isocert check` at read committed, read atomic and causal without a certificate (the
//! weak checker), and the certificate checkers' refusal of the black-box levels.

use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

const HEADER: &str =
    r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}"#;

/// T1 writes x and y; T2 reads the initial y, then T1's x: fractured, yet read committed.
const FRACTURED: &str = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"y","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"y","value":0},{"f":"r","key":"x","value":1}]}"#;

fn write(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{HEADER}\n{body}\n")).unwrap();
    path.to_str().unwrap().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn weak_levels_are_checked_without_a_certificate_with_exit_codes_zero_and_one() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "fractured.jsonl", FRACTURED);
    let rc = isocert(&["check", &h, "--isolation", "rc"]);
    assert_eq!(rc.status.code(), Some(0), "{}", stderr(&rc));
    assert!(String::from_utf8_lossy(&rc.stdout).contains("weak"), "auto chose the weak checker");
    for (level, kind) in [("ra", "fractured-read"), ("causal", "causality-violation")] {
        let out = isocert(&["check", &h, "--isolation", level, "--json"]);
        assert_eq!(out.status.code(), Some(1), "{level}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["checker"], "weak");
        assert_eq!(json["anomalies"][0]["kind"], kind, "{json}");
        assert_eq!(json["anomalies"][0]["cycle"].as_array().map(Vec::len), Some(2), "{json}");
    }
    // The near-twin that reads both of T1's writes passes every weak level.
    let twin = write(
        dir.path(),
        "twin.jsonl",
        &FRACTURED.replace(r#"{"f":"r","key":"y","value":0}"#, r#"{"f":"r","key":"y","value":1}"#),
    );
    for level in ["rc", "read-atomic", "cc"] {
        let out = isocert(&["check", &twin, "-i", level, "--checker", "weak"]);
        assert_eq!(out.status.code(), Some(0), "{level}: {}", stderr(&out));
    }
}

#[test]
fn certificate_checkers_refuse_the_black_box_levels_and_weak_refuses_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "fractured.jsonl", FRACTURED);
    let cert = dir.path().join("cert.json");
    std::fs::write(&cert, r#"{"version_order":[{"key":"x","writers":[1]},{"key":"y","writers":[1]}]}"#)
        .unwrap();
    let cert = cert.to_str().unwrap();
    for level in ["ra", "causal"] {
        let out = isocert(&["check", &h, "-i", level, "--certificate", cert, "--checker", "emme"]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(
            err.contains("--checker weak") && (err.contains("read-atomic") || err.contains("causal")),
            "{err}"
        );
    }
    // auto with a certificate still checks the black-box levels black-box.
    let out = isocert(&["check", &h, "-i", "ra", "--certificate", cert]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = isocert(&["check", &h, "-i", "ser", "--checker", "weak"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("weak does not check serializable"), "{}", stderr(&out));
}

#[test]
fn a_history_with_a_repeated_value_is_exit_two_naming_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let twice = write(
        dir.path(),
        "twice.jsonl",
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":1}]}"#,
    );
    let out = isocert(&["check", &twice, "-i", "causal"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("T2 op 0 writes"), "{}", stderr(&out));
    // At read committed `auto` would use a certificate: without one, and with a history the
    // weak checker cannot read, the missing certificate is what is reported.
    let out = isocert(&["check", &twice, "-i", "rc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("carries no certificate"), "{}", stderr(&out));
}

#[test]
fn a_valid_weak_verdict_writes_the_order_it_found_which_emme_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "fractured.jsonl", FRACTURED);
    let cert = dir.path().join("order.json");
    let cert = cert.to_str().unwrap();
    let out = isocert(&["check", &h, "--isolation", "rc", "--checker", "weak", "--certificate-out", cert]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(cert).unwrap();
    assert!(text.contains("\"version_order\""), "{text}");
    let emme = isocert(&["check", &h, "--isolation", "rc", "--checker", "emme", "--certificate", cert]);
    assert_eq!(emme.status.code(), Some(0), "{}", stderr(&emme));
    // An invalid verdict writes nothing: no order avoids the anomaly.
    let bad = dir.path().join("none.json");
    let out = isocert(&[
        "check",
        &h,
        "--isolation",
        "ra",
        "--checker",
        "weak",
        "--certificate-out",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!bad.exists());
}
