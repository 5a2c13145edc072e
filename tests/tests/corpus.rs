//! The anomaly corpus, table-driven, through the libraries and through the binary.

use std::process::Command;

use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel};
use isocert_history::{v1, Certificate};
use isocert_oracle::Interpreter;
use isocert_tests::{corpus, isocert_bin, Case};

/// What one run ended with.
#[derive(Debug, PartialEq)]
enum Outcome {
    Valid,
    Anomalies(Vec<String>),
    Error(String),
}

fn run_library(case: &Case, level: &str) -> Outcome {
    let level: IsolationLevel = level.parse().expect("corpus level");
    let checker: CheckerKind = case.checker.parse().expect("corpus checker");
    let file = std::fs::File::open(&case.history).expect("history file");
    let mut h = match v1::read_history(std::io::BufReader::new(file)) {
        Ok(h) => h,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    let cert = match &case.certificate {
        Some(path) => {
            match v1::read_certificate(std::fs::File::open(path).expect("certificate file"), &mut h) {
                Ok(c) => c,
                Err(e) => return Outcome::Error(format!("certificate: {e}")),
            }
        }
        None => Certificate::default(),
    };
    let oracle = match Interpreter::new(&h) {
        Ok(o) => o,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    match check(&h, &cert, level, checker, &oracle) {
        Ok(r) if r.is_valid() => Outcome::Valid,
        Ok(r) => Outcome::Anomalies(r.anomalies.iter().map(|a| a.kind.to_string()).collect()),
        Err(e) => Outcome::Error(e.to_string()),
    }
}

fn run_binary(case: &Case, level: &str) -> Outcome {
    let mut cmd = Command::new(isocert_bin());
    cmd.arg("check").arg(&case.history).args(["--isolation", level, "--checker", &case.checker, "--json"]);
    if let Some(c) = &case.certificate {
        cmd.arg("--certificate").arg(c);
    }
    let out = cmd.output().expect("running isocert");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    match out.status.code() {
        Some(0) => Outcome::Valid,
        Some(1) => {
            let report: serde_json::Value = serde_json::from_str(&stdout).expect("--json prints JSON");
            assert_eq!(report["valid"], false);
            Outcome::Anomalies(
                report["anomalies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["kind"].as_str().unwrap().to_string())
                    .collect(),
            )
        }
        Some(2) => {
            assert!(stdout.is_empty(), "{}: an error prints nothing on stdout", case.name);
            Outcome::Error(stderr)
        }
        other => panic!("{}: isocert exited with {other:?}: {stderr}", case.name),
    }
}

fn verify(case: &Case, how: &str, run: impl Fn(&Case, &str) -> Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    for level in &case.accept {
        let got = run(case, level);
        if got != Outcome::Valid {
            failures.push(format!("{} [{how}] at {level}: expected valid, got {got:?}", case.name));
        }
    }
    for (level, kind) in &case.reject {
        match run(case, level) {
            Outcome::Anomalies(kinds) if kind.as_ref().is_none_or(|k| kinds.contains(k)) => {}
            got => failures.push(format!("{} [{how}] at {level}: expected {kind:?}, got {got:?}", case.name)),
        }
    }
    for level in &case.error {
        match run(case, level) {
            Outcome::Error(message) if case.stderr.as_ref().is_none_or(|s| message.contains(s)) => {}
            got => failures.push(format!(
                "{} [{how}] at {level}: expected an error mentioning {:?}, got {got:?}",
                case.name, case.stderr
            )),
        }
    }
    failures
}

#[test]
fn every_corpus_case_through_the_libraries() {
    let failures: Vec<String> = corpus().iter().flat_map(|c| verify(c, "library", run_library)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corpus_case_through_the_binary() {
    let failures: Vec<String> = corpus().iter().flat_map(|c| verify(c, "binary", run_binary)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_corpus_covers_every_emme_anomaly_with_a_rejected_case_and_an_accepted_twin() {
    let cases = corpus();
    let emme_kinds = AnomalyKind::ALL.iter().filter(|k| {
        !matches!(k, AnomalyKind::Session | AnomalyKind::Int | AnomalyKind::Ext | AnomalyKind::NoConflict)
    });
    for kind in emme_kinds {
        let dir: Vec<&Case> = cases.iter().filter(|c| c.name.starts_with(&format!("{kind}/"))).collect();
        assert!(dir.iter().any(|c| !c.reject.is_empty()), "no rejected case for {kind}");
        assert!(
            dir.iter().any(|c| c.reject.is_empty() && !c.accept.is_empty()),
            "no accepted twin for {kind}"
        );
    }
    assert!(cases.iter().filter(|c| c.name.starts_with("malformed/")).count() >= 8);
}

#[test]
fn dot_output_names_the_cycle() {
    let case = corpus().into_iter().find(|c| c.name == "g2-item/write-skew").expect("write-skew case");
    let dot = std::env::temp_dir().join(format!("isocert-write-skew-{}.dot", std::process::id()));
    let out = Command::new(isocert_bin())
        .arg("check")
        .arg(&case.history)
        .arg("--certificate")
        .arg(case.certificate.as_ref().unwrap())
        .args(["--isolation", "serializable", "--dot"])
        .arg(&dot)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("g2-item") && text.contains("the next version, which"), "{text}");
    let graph = std::fs::read_to_string(&dot).unwrap();
    std::fs::remove_file(&dot).ok();
    assert!(graph.starts_with("digraph") && graph.matches("style=dashed").count() == 2, "{graph}");
}
