//! `isocert emit` and `isocert check --online` on a real broker (feature `kafka`): a member
//! killed with SIGKILL mid-stream, restarted or not, changes no verdict and duplicates no
//! report; a binary without a history or a group says what is missing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use isocert_checker::{check_chronos_kv, IsolationLevel};
use isocert_history::read_kv_v1_file;
use isocert_testsupport::KafkaBroker;

fn isocert() -> Command {
    Command::new(env!("CARGO_BIN_EXE_isocert"))
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("isocert-cli-{name}-{}-{nanos}", std::process::id())
}

/// A member writing its JSON lines to `out` (and its log to `log`).
fn member(url: &str, group: &str, name: &str, out: &Path, log: Option<&Path>) -> Child {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::null(),
    };
    isocert()
        .args(["check", "-v", "-i", "si", "--json", "--online", url, "--group", group, "--member", name])
        .args(["--session-timeout", "2"])
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(stderr)
        .spawn()
        .expect("isocert runs")
}

/// Waits for `child` (at most 120 s) and returns its exit code.
fn wait(child: &mut Child, what: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The explanations of the anomaly records in a member's output, and its summary.
fn anomalies(out: &Path) -> (Vec<String>, Option<serde_json::Value>) {
    let text = std::fs::read_to_string(out).unwrap();
    let mut found = Vec::new();
    let mut summary = None;
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        match value["record"].as_str() {
            Some("anomaly") => found.push(value["explanation"].as_str().unwrap().to_string()),
            Some("summary") => summary = Some(value),
            _ => {}
        }
    }
    (found, summary)
}

#[test]
fn a_member_killed_mid_stream_loses_and_doubles_nothing() {
    let Some(broker) = KafkaBroker::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.jsonl");
    let status = isocert()
        .args(["gen", "--txns", "6000", "--sessions", "8", "--ops-per-txn", "6", "--keys", "300"])
        .args(["--isolation", "si", "--inject", "lost-update", "--seed", "3", "--out"])
        .arg(&history)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let kv = read_kv_v1_file(&history, 1).unwrap();
    let mut expected: Vec<String> = check_chronos_kv(kv, IsolationLevel::SnapshotIsolation)
        .unwrap()
        .0
        .anomalies
        .iter()
        .map(|a| a.explanation.clone())
        .collect();
    expected.sort();
    assert!(!expected.is_empty());
    let dir = std::sync::Arc::new(dir);
    let expected = std::sync::Arc::new(expected);
    let runs: Vec<_> = [false, true]
        .into_iter()
        .map(|restart| {
            let (dir, expected, history) = (dir.clone(), expected.clone(), history.clone());
            let bootstrap = broker.bootstrap().to_string();
            std::thread::spawn(move || killed(&bootstrap, dir.path(), &history, &expected, restart))
        })
        .collect();
    for run in runs {
        run.join().unwrap();
    }
}

/// One member of two killed while the history is published, after Kafka gave it
/// partitions, then restarted or not.
fn killed(bootstrap: &str, dir: &Path, history: &Path, expected: &[String], restart: bool) {
    let url = format!("kafka://{bootstrap}/{}", unique(&format!("kill{restart}")));
    let outs: Vec<_> = (0..3).map(|i| dir.join(format!("m{i}-{restart}.jsonl"))).collect();
    let group = format!("g-{restart}");
    let log = dir.join(format!("a-{restart}.log"));
    let mut a = member(&url, &group, "a", &outs[0], Some(&log));
    let mut b = member(&url, &group, "b", &outs[1], Some(&dir.join(format!("b-{restart}.log"))));
    // Wait until Kafka has given the member to be killed some partitions.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("partitions assigned") && !l.contains("parts=[]"))
    {
        assert!(Instant::now() < deadline, "the member was never given partitions");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut emit = isocert()
        .args(["emit", &url])
        .arg(history)
        .args(["--partitions", "4", "--mark-every", "32"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Mid-stream: the producer is still publishing.
    std::thread::sleep(Duration::from_millis(400));
    a.kill().unwrap();
    a.wait().unwrap();
    let mut again = restart.then(|| member(&url, &group, "a-again", &outs[2], Some(&dir.join("again.log"))));
    assert_eq!(wait(&mut emit, "emit"), 0);
    assert_eq!(wait(&mut b, "member b"), 1, "anomalies found");
    if let Some(again) = &mut again {
        assert_eq!(wait(again, "the restarted member"), 1);
    }
    let mut reported = Vec::new();
    for out in &outs {
        if out.exists() {
            let (found, summary) = anomalies(out);
            reported.extend(found);
            if let Some(summary) = summary {
                assert_eq!(summary["anomalies"], serde_json::json!(expected.len()), "{summary}");
                assert_eq!(summary["partitions"], serde_json::json!(4));
            }
        }
    }
    reported.sort();
    assert_eq!(reported, expected, "every anomaly printed once over the members (restart: {restart})");
}

#[test]
fn online_flags_say_what_is_missing() {
    let out = isocert().args(["check", "-i", "si", "--online", "kafka://127.0.0.1:1/t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--group"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = isocert().args(["check", "-i", "si", "--online", "kafka:/x", "--group", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kafka://BROKER:PORT/TOPIC"));
    let out = isocert().args(["emit", "kafka://127.0.0.1:1/t", "/nonexistent.jsonl"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.jsonl"));
}
