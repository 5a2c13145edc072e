//! MariaDB end to end (issue 18): `isocert run --database mariadb` against a throwaway
//! MariaDB 10.11 (Debian's mariadb-server), its binary log recovered into a certificate,
//! the verdicts InnoDB earns at each level (docs/MARIADB.md), the saved files re-checked,
//! and `isocert recover` reproducing the certificate from the saved log.
//!
//! Needs the MariaDB server programs (scripts/install-deps installs them); without them the
//! tests print `SKIPPED: ...` and pass, except under `CI=true`.

use std::path::Path;
use std::process::{Command, Output};

use isocert_adapters::EmbeddedMariaDb;

fn available() -> bool {
    isocert_testsupport::MARIADB.embedded(EmbeddedMariaDb::is_installed())
}

/// `isocert run --database mariadb` with `args`, into `out`.
fn run(out: &Path, args: &[&str]) -> Output {
    Command::new(isocert_tests::isocert_bin())
        .args(["run", "--database", "mariadb", "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("isocert run")
}

fn run_json(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("run.json")).expect("run.json")).expect("run.json is JSON")
}

fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Re-checks the saved history and certificate at `level`; returns the exit code.
fn recheck(out: &Path, level: &str) -> Option<i32> {
    Command::new(isocert_tests::isocert_bin())
        .arg("check")
        .arg(out.join("history.jsonl"))
        .arg("--certificate")
        .arg(out.join("certificate.json"))
        .args(["--isolation", level])
        .output()
        .expect("isocert check")
        .status
        .code()
}

/// The saved history checked by Chronos at `level`, from the recovered start and commit
/// timestamps alone.
fn recheck_by_timestamps(out: &Path, level: &str) -> Output {
    Command::new(isocert_tests::isocert_bin())
        .arg("check")
        .arg(out.join("history.jsonl"))
        .args(["--isolation", level, "--checker", "chronos"])
        .output()
        .expect("isocert check")
}

#[test]
fn serializable_certifies_for_item_and_predicate_workloads_and_recover_reproduces_it() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for workload in ["kv", "predicate"] {
        let out = dir.path().join(workload);
        let r = run(
            &out,
            &["--workload", workload, "--isolation", "serializable", "--txns", "400", "--sessions", "6"],
        );
        assert_eq!(r.status.code(), Some(0), "{workload}: {}", text(&r));
        let j = run_json(&out);
        assert_eq!(j["database"], "mariadb");
        assert!(j["recovered"]["logged_txns"].as_u64().unwrap() > 100, "{j}");
        assert_eq!(j["recovered"]["ambiguous_reads"], 0, "locking reads are pinned down: {j}");
        assert_eq!(recheck(&out, "serializable"), Some(0), "{workload}: the saved files re-check");
        if workload == "kv" {
            // Every read at SERIALIZABLE locks, so the ticks place each transaction at its
            // commit point; at the snapshot it also took, Chronos found reads "from the
            // future" in this valid run.
            for level in ["serializable", "snapshot-isolation"] {
                let chronos = recheck_by_timestamps(&out, level);
                assert_eq!(chronos.status.code(), Some(0), "{level}: {}", text(&chronos));
            }
        }

        let cert = dir.path().join(format!("{workload}.cert.json"));
        let history = dir.path().join(format!("{workload}.history.jsonl"));
        let recover = Command::new(isocert_tests::isocert_bin())
            .args(["recover", "--database", "mariadb", "--history"])
            .arg(out.join("history.jsonl"))
            .arg("--source")
            .arg(&out)
            .arg("--out")
            .arg(&cert)
            .arg("--history-out")
            .arg(&history)
            .output()
            .expect("isocert recover");
        assert_eq!(recover.status.code(), Some(0), "{}", text(&recover));
        let read = |p: &Path| std::fs::read(p).unwrap();
        assert!(read(&cert) == read(&out.join("certificate.json")), "{workload}: another certificate");
        assert!(read(&history) == read(&out.join("history.jsonl")), "{workload}: another history");

        // Issue 30, item 10: another database's recovery rule on this run's files used to
        // say "recovered 0 commits" (Dgraph) and write a certificate that turned the VALID
        // run into 142 anomalies. It is refused, and no certificate is written.
        for database in ["dgraph", "postgres", "cockroachdb"] {
            let wrong = dir.path().join(format!("{workload}.{database}.cert.json"));
            let recover = Command::new(isocert_tests::isocert_bin())
                .args(["recover", "--database", database, "--history"])
                .arg(out.join("history.jsonl"))
                .arg("--out")
                .arg(&wrong)
                .output()
                .expect("isocert recover");
            assert_eq!(recover.status.code(), Some(2), "{database}: {}", text(&recover));
            assert!(!wrong.exists(), "{database}: a certificate was written");
        }
    }
}

#[test]
fn repeatable_read_loses_updates_unless_innodb_snapshot_isolation_is_on() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hot = [
        "--workload",
        "kv",
        "--isolation",
        "repeatable-read",
        "--txns",
        "600",
        "--sessions",
        "8",
        "--keys",
        "8",
    ];
    let off = dir.path().join("off");
    let r = run(&off, &hot);
    assert_eq!(r.status.code(), Some(1), "InnoDB's repeatable read is not snapshot isolation: {}", text(&r));
    let report = std::fs::read_to_string(off.join("report.txt")).unwrap();
    assert!(report.contains("g-si"), "{report}");
    assert_eq!(recheck(&off, "snapshot-isolation"), Some(1));

    let mut args = hot.to_vec();
    args.extend(["--server-setting", "innodb_snapshot_isolation=ON"]);
    // MariaDB's `binlog_snapshot_position` is not exactly the read view (docs/MARIADB.md):
    // taken at its word, one run in six or seven reported a g-si between transactions one
    // commit apart. Recovery now places each snapshot where the transaction's reads and
    // the commits acknowledged before it began put it, so this run must be valid.
    let on = dir.path().join("on");
    let r = run(&on, &args);
    assert_eq!(r.status.code(), Some(0), "with innodb_snapshot_isolation=ON it is: {}", text(&r));
    let j = run_json(&on);
    assert!(j["attempts"].as_u64() > j["committed"].as_u64(), "conflicting writers were refused: {j}");
}

#[test]
fn read_committed_predicate_runs_are_read_committed() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rc");
    let r = run(
        &out,
        &["--workload", "predicate", "--isolation", "read-committed", "--txns", "400", "--sessions", "6"],
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert_eq!(recheck(&out, "read-committed"), Some(0));
    // Not serializable: the same history fails the stronger level.
    assert_eq!(recheck(&out, "serializable"), Some(1));
}

/// Issue 30, item 4: `run --db` on MariaDB ended at once on SIGHUP (a closed terminal),
/// leaving its `items` table and saving nothing. Every signal now stops the workload, saves
/// what completed and drops what the run created.
#[test]
fn sighup_with_db_saves_a_partial_result_and_drops_the_table() {
    if !available() {
        return;
    }
    let server = EmbeddedMariaDb::start(&[]).expect("a MariaDB server starts");
    let port = server.port().to_string();
    let sql = |query: &str| {
        let out = Command::new("mariadb")
            .args(["-h", "127.0.0.1", "-P", &port, "-u", "root", "-N", "-e", query])
            .output()
            .expect("mariadb client");
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let table_exists =
        || sql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'items'") != "0";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = Command::new(isocert_tests::isocert_bin())
        .args(["run", "--db", &server.url(), "--workload", "predicate", "--isolation", "serializable"])
        .args(["--txns", "1000000", "--sessions", "4", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("isocert run starts");
    let started = std::time::Instant::now();
    while !table_exists() {
        assert!(started.elapsed().as_secs() < 60, "the run never created its table");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let kill = Command::new("kill").args(["-s", "HUP", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed().as_secs() < 120, "the run did not end after SIGHUP");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let output = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(130), "{}", text(&output));
    assert!(!table_exists(), "the run's own table is dropped: {}", text(&output));
    let j = run_json(&out);
    assert_eq!(j["interrupted"], true, "{j}");
    assert!(j["committed"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(recheck(&out, "serializable"), Some(0), "the partial result re-checks");
    server.shutdown().unwrap();
}
