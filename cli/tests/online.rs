//! `isocert emit`, `isocert run --emit` and `isocert check --online` on a real broker
//! (feature `kafka`): a member killed with SIGKILL mid-stream, restarted or not, changes no
//! verdict and duplicates no report; a run on a real PostgreSQL checked online gets the
//! offline verdict; a binary without a history or a group says what is missing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use isocert_adapters::{EmbeddedMariaDb, EmbeddedPostgres};
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

/// A recorded PostgreSQL-like history (header `serial_order` `unknown`: its timestamps are
/// not its serial order) published by `isocert emit`: a member at `-i ser` stops with exit 2
/// naming the header before any verdict, one at `-i si` checks it (VALID). The near twin,
/// the same file without the field, is checked at `-i ser` (VALID).
#[test]
fn a_stream_whose_timestamps_are_no_serial_order_is_refused_at_serializability() {
    let Some(broker) = KafkaBroker::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.jsonl");
    let status = isocert()
        .args([
            "gen",
            "--txns",
            "300",
            "--sessions",
            "4",
            "--keys",
            "20",
            "--isolation",
            "ser",
            "--seed",
            "9",
        ])
        .arg("--out")
        .arg(&plain)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&plain).unwrap();
    assert!(!text.starts_with("{\"format\""), "a generated kv history has no header");
    let unknown = dir.path().join("unknown.jsonl");
    std::fs::write(
        &unknown,
        format!("{{\"format\":\"isocert-history\",\"version\":1,\"serial_order\":\"unknown\"}}\n{text}"),
    )
    .unwrap();
    for (history, level, code) in [(&unknown, "ser", 2), (&unknown, "si", 0), (&plain, "ser", 0)] {
        let url = format!("kafka://{}/{}", broker.bootstrap(), unique(&format!("order-{level}")));
        let log = dir.path().join(format!("{level}-{code}.log"));
        let mut m = isocert()
            .args(["check", "-i", level, "--online", &url, "--group", "g", "--session-timeout", "2"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let emit = isocert().args(["emit", &url]).arg(history).args(["--partitions", "2"]).output().unwrap();
        assert_eq!(emit.status.code(), Some(0), "{}", String::from_utf8_lossy(&emit.stderr));
        let got = wait(&mut m, "the member");
        let stderr = std::fs::read_to_string(&log).unwrap();
        assert_eq!(got, code, "{} at {level}: {stderr}", history.display());
        if code == 2 {
            assert!(stderr.contains("serial_order") && stderr.contains("-i si"), "{stderr}");
        }
    }
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

/// `run --emit` refuses, before any database is reached, what online checking cannot
/// take: the predicate workload, a run without recovery (no timestamps), a bad target, a
/// prefix with `/`.
#[test]
fn run_emit_refuses_what_cannot_be_checked_online_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = |extra: &[&str]| {
        let o = isocert()
            .args(["run", "--db", "postgres://u@127.0.0.1:1/db", "--isolation", "serializable", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    for (extra, why) in [
        (&["--workload", "predicate", "--emit", "kafka://127.0.0.1:1/t"][..], "predicate workload"),
        (&["--workload", "kv", "--no-recovery", "--emit", "kafka://127.0.0.1:1/t"][..], "--no-recovery"),
        (&["--workload", "kv", "--emit", "kafka:/t"][..], "kafka://BROKER:PORT/TOPIC"),
        (&["--workload", "kv", "--emit", "kafka://127.0.0.1:1/t", "--emit-prefix", "a/b"][..], "without '/'"),
    ] {
        let (code, stderr) = run(extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(why), "{extra:?}: {stderr}");
        assert!(!stderr.contains("connect"), "{extra:?}: refused before the database: {stderr}");
    }
    assert!(!out.exists(), "nothing was written");
}

/// `isocert run --emit` against a real PostgreSQL (the one of `$ISOCERT_TEST_PG` in a
/// database of its own, or a throwaway one), checked online by one member while it runs:
/// the member's anomalies are exactly those `isocert check --checker chronos` finds in the
/// saved history, with the same explanations. Repeatable read with deletes, so that
/// PostgreSQL's upsert after a concurrent delete gives snapshot-isolation anomalies to
/// compare (when the scheduling produces one).
#[test]
fn a_run_emitting_to_kafka_is_checked_online_as_offline() {
    let Some(broker) = KafkaBroker::start() else { return };
    let Some(source) = isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = match source {
        isocert_testsupport::Source::Url(url) => Some(fresh_database(&url, "run_emit")),
        isocert_testsupport::Source::Embedded => None,
    };
    let url = format!("kafka://{}/{}", broker.bootstrap(), unique("run-emit"));
    let out = dir.path().join("member.jsonl");
    let mut m = member(&url, "run-emit", "m", &out, Some(&dir.path().join("m.log")));
    let run_dir = dir.path().join("run");
    let mut run = isocert();
    run.args([
        "run",
        "--workload",
        "kv",
        "--isolation",
        "repeatable-read",
        "--txns",
        "400",
        "--sessions",
        "4",
    ])
    .args(["--keys", "6", "--seed", "5", "--emit", &url, "--emit-partitions", "4", "--emit-mark-every", "16"])
    .arg("--out")
    .arg(&run_dir);
    if let Some(db) = &db {
        run.args(["--db", db]);
    }
    let ran = run.output().unwrap();
    let code = ran.status.code();
    assert!(matches!(code, Some(0 | 1)), "run: {}", String::from_utf8_lossy(&ran.stderr));
    assert!(
        String::from_utf8_lossy(&ran.stderr).contains("during the run"),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let online = wait(&mut m, "the member");
    // Committed transactions without operations have no timestamps (PostgreSQL took no
    // snapshot for them) and are not published; Chronos refuses them, so they go here too.
    let saved = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let lines: Vec<&str> = saved
        .lines()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            !(v["ops"] == serde_json::json!([]) && v.get("start_ts").is_none() && v.get("status").is_none())
        })
        .collect();
    let checked = dir.path().join("checked.jsonl");
    std::fs::write(&checked, lines.join("\n") + "\n").unwrap();
    let mut expected = chronos_explanations(&checked);
    expected.sort();
    let (mut found, summary) = anomalies(&out);
    found.sort();
    assert_eq!(found, expected, "the member's anomalies are offline Chronos's");
    let summary = summary.expect("the member prints a summary");
    assert_eq!(summary["anomalies"], serde_json::json!(expected.len()), "{summary}");
    assert_eq!(summary["beyond_watermark"], serde_json::json!(0), "{summary}");
    assert_eq!(summary["partitions"], serde_json::json!(4), "{summary}");
    assert_eq!(online, if expected.is_empty() { 0 } else { 1 }, "online and offline verdicts");
}

/// `isocert run --emit` publishes while the workload runs: a read committed run on a real
/// PostgreSQL that loses updates (checked as snapshot isolation), checked by two members,
/// whose first anomaly is printed before the run has written its history (which it does
/// after the last commit), and a serializable run without deletes that is valid, checked
/// by one member. Both get offline Chronos's verdict on the saved history, explanation for
/// explanation (the explanations cite the published ticks, so these are recovery's).
#[test]
fn a_run_is_published_and_checked_while_it_runs() {
    let Some(broker) = KafkaBroker::start() else { return };
    let Some(source) = isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) else { return };
    let cases: [(&str, &[&str], usize, bool); 2] = [
        ("read-committed", &["--txns", "1500", "--keys", "6"], 2, true),
        ("serializable", &["--txns", "300", "--keys", "20", "--no-deletes"], 1, false),
    ];
    for (isolation, extra, members, anomalies_expected) in cases {
        let db = match &source {
            isocert_testsupport::Source::Url(server) => {
                vec![
                    "--db".to_string(),
                    fresh_database(server, &format!("live_{}", isolation.replace('-', "_"))),
                ]
            }
            isocert_testsupport::Source::Embedded => Vec::new(),
        };
        published_while_running(&broker, &db, isolation, extra, members, anomalies_expected);
    }
}

/// The same on a real MariaDB (issue 36): a REPEATABLE READ run with
/// `innodb_snapshot_isolation=OFF`, which loses updates, checked by two members, whose first
/// anomaly is printed before the run's last commit, and one with it `ON`, valid, checked by
/// one member. Each equals offline Chronos on the saved history (REPEATABLE READ starts are
/// placed by the transactions' reads: docs/MARIADB.md), and the run found every published
/// tick equal to the recovered one (else it exits 2).
#[test]
fn a_mariadb_run_is_published_and_checked_while_it_runs() {
    let Some(broker) = KafkaBroker::start() else { return };
    // The cases set the server's `innodb_snapshot_isolation`: a private server each.
    if !isocert_testsupport::MARIADB.embedded(EmbeddedMariaDb::is_installed()) {
        return;
    }
    // As many transactions as the PostgreSQL case: with 300 the run could end before the
    // members (whose group join takes seconds) printed anything (seen in CI under load).
    let cases: [(&[&str], usize, bool); 2] = [
        (&["--txns", "1500", "--keys", "6", "--server-setting", "innodb_snapshot_isolation=OFF"], 2, true),
        (&["--txns", "200", "--keys", "20", "--server-setting", "innodb_snapshot_isolation=ON"], 1, false),
    ];
    let db = ["--database".to_string(), "mariadb".to_string()];
    for (extra, members, anomalies_expected) in cases {
        published_while_running(&broker, &db, "repeatable-read", extra, members, anomalies_expected);
    }
}

/// One `isocert run --emit` on the database `db` names, checked online by `members`
/// members while it runs: they report offline Chronos's anomalies on the saved history,
/// each once, and (when anomalies are expected) the first before the run's last commit.
fn published_while_running(
    broker: &KafkaBroker,
    db: &[String],
    isolation: &str,
    extra: &[&str],
    members: usize,
    anomalies_expected: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("kafka://{}/{}", broker.bootstrap(), unique(isolation));
    let group = unique(&format!("live-{isolation}"));
    let outs: Vec<_> = (0..members).map(|i| dir.path().join(format!("m{i}.jsonl"))).collect();
    let mut ms: Vec<Child> = outs
        .iter()
        .enumerate()
        .map(|(i, out)| {
            member(&url, &group, &format!("m{i}"), out, Some(&dir.path().join(format!("m{i}.log"))))
        })
        .collect();
    let run_dir = dir.path().join("run");
    let mut run = isocert();
    run.args(["run", "--workload", "kv", "--isolation", isolation, "--sessions", "4", "--seed", "7"])
        .args(extra)
        .args(db)
        .args(["--emit", &url, "--emit-partitions", "4", "--out"])
        .arg(&run_dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("run.log")).unwrap());
    let mut run = run.spawn().unwrap();
    // Whether the members printed an anomaly while the run had not written its history.
    let mut early = None;
    let code = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if early.is_none()
            && outs.iter().any(|o| std::fs::read_to_string(o).is_ok_and(|t| t.contains("\"anomaly\"")))
        {
            early = Some(!run_dir.join("history.jsonl").exists());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap();
    assert!(matches!(code, 0 | 1), "run exited {code}: {log}");
    assert!(log.contains("during the run"), "{log}");
    let codes: Vec<i32> = ms.iter_mut().map(|m| wait(m, "a member")).collect();
    let saved = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let checked = dir.path().join("checked.jsonl");
    std::fs::write(&checked, with_prefix(&saved, "")).unwrap();
    let mut expected = chronos_explanations(&checked);
    expected.sort();
    let mut found = Vec::new();
    for out in &outs {
        let (mut some, summary) = anomalies(out);
        found.append(&mut some);
        let summary = summary.expect("every member prints a summary");
        assert_eq!(summary["anomalies"], serde_json::json!(expected.len()), "{summary}");
        assert_eq!(summary["beyond_watermark"], serde_json::json!(0), "{summary}");
    }
    found.sort();
    assert_eq!(found, expected, "{isolation}: the members' anomalies are offline Chronos's, each once");
    assert_eq!(!expected.is_empty(), anomalies_expected, "{isolation}: {} anomalies", expected.len());
    let verdict = if expected.is_empty() { 0 } else { 1 };
    assert_eq!(codes, vec![verdict; members], "{isolation}: online and offline verdicts");
    if anomalies_expected {
        assert_eq!(early, Some(true), "an anomaly was printed before the run's last commit");
    }
}

/// Two `isocert run --emit --emit-prefix` processes, each on its own PostgreSQL database
/// (so with its own clock: PostgreSQL's timestamps are each run's ticks), feed one member
/// started with `--producers 2`: it reports the union of what offline Chronos finds in each
/// run's saved history with the same prefix, and nothing from the runs' ids, sessions or
/// rows meeting.
#[test]
fn two_runs_with_prefixes_feed_one_online_check() {
    let Some(broker) = KafkaBroker::start() else { return };
    let Some(source) = isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("kafka://{}/{}", broker.bootstrap(), unique("two-runs"));
    let out = dir.path().join("member.jsonl");
    let mut m = isocert()
        .args(["check", "-v", "-i", "si", "--json", "--online", &url, "--group", "two", "--producers", "2"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(dir.path().join("m.log")).unwrap())
        .spawn()
        .unwrap();
    let runs: Vec<_> = ["a", "b"]
        .into_iter()
        .enumerate()
        .map(|(i, prefix)| {
            let run_dir = dir.path().join(prefix);
            let mut run = isocert();
            run.args(["run", "--workload", "kv", "--isolation", "repeatable-read", "--txns", "200"])
                .args(["--sessions", "3", "--keys", "4", "--seed", &i.to_string(), "--emit", &url])
                .args(["--emit-prefix", prefix, "--emit-mark-every", "8", "--out"])
                .arg(&run_dir);
            if let isocert_testsupport::Source::Url(server) = &source {
                run.args(["--db", &fresh_database(server, &format!("two_runs_{prefix}"))]);
            }
            (prefix, run_dir, run.spawn().unwrap())
        })
        .collect();
    let mut expected = Vec::new();
    for (prefix, run_dir, mut child) in runs {
        let code = wait(&mut child, "a run");
        assert!(matches!(code, 0 | 1), "run {prefix} exited {code}");
        let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
        let checked = dir.path().join(format!("{prefix}.jsonl"));
        std::fs::write(&checked, with_prefix(&history, prefix)).unwrap();
        expected.extend(chronos_explanations(&checked));
    }
    expected.sort();
    let online = wait(&mut m, "the member");
    let (mut found, summary) = anomalies(&out);
    found.sort();
    assert_eq!(found, expected, "the member reports both runs' anomalies, each once");
    let summary = summary.expect("the member prints a summary");
    assert_eq!(summary["beyond_watermark"], serde_json::json!(0), "{summary}");
    assert_eq!(online, if expected.is_empty() { 0 } else { 1 });
}

/// A saved run history as `--emit-prefix PREFIX` publishes it: ids, sessions and keys
/// prefixed (none for an empty prefix), committed transactions without operations left out.
fn with_prefix(history: &str, prefix: &str) -> String {
    let rename = |v: &mut serde_json::Value| {
        if prefix.is_empty() {
            return;
        }
        let name = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        *v = serde_json::json!(format!("{prefix}/{name}"));
    };
    let mut out = String::new();
    for line in history.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let list = if v.get("format").is_some() {
            "initial"
        } else {
            if v["ops"] == serde_json::json!([]) && v.get("start_ts").is_none() && v.get("status").is_none() {
                continue;
            }
            rename(&mut v["id"]);
            rename(&mut v["session"]);
            "ops"
        };
        for object in v[list].as_array_mut().into_iter().flatten() {
            rename(&mut object["key"]);
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// The explanations of `isocert check --checker chronos -i si` on `path`.
fn chronos_explanations(path: &Path) -> Vec<String> {
    let offline =
        isocert().args(["check", "--checker", "chronos", "-i", "si", "--json"]).arg(path).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&offline.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&offline.stderr)));
    report["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["explanation"].as_str().unwrap().to_string())
        .collect()
}

/// A database of its own on the server at `url` (dropped first if a killed test left it).
fn fresh_database(url: &str, name: &str) -> String {
    let db = format!("isocert_online_{name}_{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let client = isocert_adapters::postgres::connect(url).await.expect("connect");
        for s in [format!("DROP DATABASE IF EXISTS {db}"), format!("CREATE DATABASE {db}")] {
            client.batch_execute(&s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    });
    let base = url.rsplit_once('/').map_or(url, |(base, _)| base);
    format!("{base}/{db}")
}
