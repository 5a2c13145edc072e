//! Do no harm (issue 10): `isocert run` against a user's database and with its throwaway
//! server, interrupted by SIGINT or killed by SIGKILL, leaves nothing of its own behind
//! (no postmaster, no temporary directory, no replication slot or publication), never
//! touches a table it did not create, and saves a re-checkable partial result on SIGINT.
//!
//! `--db` cases need `$ISOCERT_TEST_PG` (scripts/test sets it); they say SKIPPED without
//! it outside CI and fail in CI. The embedded cases need the PostgreSQL server programs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use isocert_adapters::guard::OwnerFile;
use isocert_adapters::EmbeddedPostgres;

fn isocert() -> Command {
    Command::new(isocert_tests::isocert_bin())
}

/// The test server's URL, or `None` after `isocert_testsupport` printed `SKIPPED: ...`
/// (a failure under `CI=true`).
fn test_pg() -> Option<String> {
    isocert_testsupport::POSTGRES.url()
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-Atqc", sql]).output().expect("psql");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the run's table holds a value its workload wrote (every initial value is 0);
/// false while the table does not exist yet.
fn some_write_committed(url: &str) -> bool {
    let out = Command::new("psql")
        .args([url, "-Atqc", "SELECT count(*) > 0 FROM kv WHERE value <> 0"])
        .output()
        .expect("psql");
    out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "t"
}

/// A fresh database named after the test on the test server; returns its URL.
fn fresh_database(server: &str, name: &str) -> String {
    let db = format!("isocert_safety_{name}_{}", std::process::id());
    psql(server, &format!("DROP DATABASE IF EXISTS {db}"));
    psql(server, &format!("CREATE DATABASE {db}"));
    let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
    format!("{base}/{db}")
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts a long run (far more transactions than it will get through) writing to `out`.
fn start_run(db: Option<&str>, out: &Path) -> Child {
    let mut cmd = isocert();
    cmd.args([
        "run",
        "--workload",
        "kv",
        "--isolation",
        "serializable",
        "--txns",
        "1000000",
        "--sessions",
        "4",
    ]);
    if let Some(url) = db {
        cmd.args(["--db", url]);
    }
    cmd.arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("isocert run starts")
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args(["-s", name, &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
}

/// The slots (of this database: slots are cluster-wide, and other tests run beside) and
/// publications on `url` named by isocert runs.
fn isocert_objects(url: &str) -> String {
    psql(
        url,
        "SELECT string_agg(n, ',') FROM (SELECT slot_name::text AS n FROM pg_replication_slots \
         WHERE database = current_database() UNION ALL SELECT pubname::text FROM pg_publication) o \
         WHERE n LIKE 'isocert\\_run\\_%'",
    )
}

fn run_objects_exist(url: &str, pid: u32) -> bool {
    psql(
        url,
        &format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'isocert\\_run\\_{pid}\\_%'"
        ),
    ) != "0"
}

fn finish(child: Child) -> Output {
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = tx.send(());
        out
    });
    rx.recv_timeout(Duration::from_secs(120)).expect("isocert run ended within 2 minutes after the signal");
    waiter.join().expect("waiter").expect("output")
}

/// The interrupted run's saved files re-check to a verdict, and run.json says interrupted.
fn assert_partial_result(out: &Path) {
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(run["interrupted"], true, "run.json marks the run as interrupted");
    assert!(run["committed"].as_u64().unwrap() > 0, "transactions committed before the signal are kept");
    let check = isocert()
        .arg("check")
        .arg(out.join("history.jsonl"))
        .arg("--certificate")
        .arg(out.join("certificate.json"))
        .args(["--isolation", "serializable"])
        .output()
        .expect("isocert check");
    assert_eq!(
        check.status.code(),
        Some(0),
        "the partial result re-checks as serializable: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn an_existing_table_is_refused_and_kept_with_its_rows() {
    let Some(server) = test_pg() else { return };
    let url = fresh_database(&server, "existing");
    psql(&url, "CREATE TABLE kv (key int PRIMARY KEY, value bigint NOT NULL, note text)");
    psql(&url, "INSERT INTO kv VALUES (1, 10, 'precious'), (2, 20, 'also precious')");
    let out = tempfile::tempdir().unwrap();
    let run = isocert()
        .args([
            "run",
            "--db",
            &url,
            "--workload",
            "kv",
            "--isolation",
            "serializable",
            "--txns",
            "10",
            "--out",
        ])
        .arg(out.path().join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("table kv already exists") && stderr.contains("--reset-tables"), "{stderr}");
    assert_eq!(psql(&url, "SELECT string_agg(note, ';' ORDER BY key) FROM kv"), "precious;also precious");
    assert_eq!(isocert_objects(&url), "", "a refused run leaves no slot or publication");
}

#[test]
fn a_non_empty_out_is_refused_without_force() {
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("history.jsonl"), "an earlier run\n").unwrap();
    let run = isocert()
        .args(["run", "--db", "postgres://nobody:secret@127.0.0.1:1/none", "--workload", "kv"])
        .args(["--isolation", "serializable", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not empty") && stderr.contains("--force"), "{stderr}");
    assert!(!stderr.contains("secret"), "the password is never printed: {stderr}");
    assert_eq!(std::fs::read_to_string(out.path().join("history.jsonl")).unwrap(), "an earlier run\n");
}

/// SIGINT, SIGTERM and SIGHUP alike (issue 30, item 4: SIGHUP, as when the terminal
/// closes, used to end the run at once with exit 129, leaving `kv`, the slot and the
/// publication and saving nothing).
#[test]
fn signals_with_db_save_a_partial_result_and_leave_nothing() {
    let Some(server) = test_pg() else { return };
    for name in ["INT", "TERM", "HUP"] {
        let url = fresh_database(&server, &format!("sig{}", name.to_lowercase()));
        psql(&url, "CREATE TABLE users_table (id int PRIMARY KEY)");
        psql(&url, "INSERT INTO users_table VALUES (7)");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let child = start_run(Some(&url), &out);
        let pid = child.id();
        wait_until("the run's replication slot exists", Duration::from_secs(60), || {
            run_objects_exist(&url, pid)
        });
        // Until a write has committed (a fixed pause was sometimes too short on a loaded
        // machine: the signal came before the first commit, and nothing was there to keep).
        wait_until("a write of the run committed", Duration::from_secs(60), || some_write_committed(&url));
        signal(&child, name);
        let output = finish(child);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "SIG{name}: {stderr}");
        assert!(stderr.contains("interrupted"), "SIG{name}: {stderr}");
        assert_partial_result(&out);
        assert_eq!(isocert_objects(&url), "", "SIG{name}: no slot or publication is left");
        assert_eq!(
            psql(&url, "SELECT to_regclass('kv') IS NULL"),
            "t",
            "SIG{name}: the run's own table is dropped"
        );
        assert_eq!(
            psql(&url, "SELECT string_agg(id::text, ',') FROM users_table"),
            "7",
            "SIG{name}: other tables untouched"
        );
    }
}

#[test]
fn sigkill_with_db_leaves_a_slot_that_cleanup_drops() {
    let Some(server) = test_pg() else { return };
    let url = fresh_database(&server, "sigkill");
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_run(Some(&url), &dir.path().join("run"));
    let pid = child.id();
    wait_until("the run's replication slot exists", Duration::from_secs(60), || run_objects_exist(&url, pid));
    child.kill().unwrap();
    child.wait().unwrap();
    // A killed process cleans nothing; the slot is inactive once its walsender notices.
    wait_until("the killed run's slot is inactive", Duration::from_secs(30), || {
        psql(&url, &format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'isocert\\_run\\_{pid}\\_%' AND active"))
            == "0"
    });
    assert!(run_objects_exist(&url, pid), "the killed run's slot is still there before clean-up");
    let cleanup = isocert().args(["cleanup", "--db", &url]).output().unwrap();
    let stdout = String::from_utf8_lossy(&cleanup.stdout);
    assert_eq!(cleanup.status.code(), Some(0), "{}", String::from_utf8_lossy(&cleanup.stderr));
    assert!(stdout.contains(&format!("dropped replication slot isocert_run_{pid}_")), "{stdout}");
    assert!(stdout.contains("dropped publication"), "{stdout}");
    assert_eq!(isocert_objects(&url), "", "cleanup dropped the slot and the publication");
    let again = isocert().args(["cleanup", "--db", &url]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to drop"));
}

/// The temporary directory of the embedded server the isocert process `pid` started.
fn embedded_dir_of(pid: u32) -> Option<PathBuf> {
    for base in [std::env::temp_dir(), PathBuf::from("/tmp")] {
        for entry in std::fs::read_dir(&base).ok()?.flatten() {
            let path = entry.path();
            let named = entry.file_name().to_string_lossy().starts_with("isocert-pg-");
            if named && OwnerFile::read_from(&path).is_some_and(|o| o.pid == pid) {
                return Some(path);
            }
        }
    }
    None
}

fn process_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|s| !s.lines().any(|l| l.starts_with("State:") && l.contains('Z')))
}

/// Starts an embedded run, waits until its workload runs, sends `signal`; returns the
/// child, the server directory and the postmaster's pid.
fn embedded_run_then(signal_name: &str, out: &Path) -> Option<(Child, PathBuf, u32)> {
    if !isocert_testsupport::POSTGRES.embedded(EmbeddedPostgres::is_installed()) {
        return None;
    }
    let child = start_run(None, out);
    let pid = child.id();
    let mut dir = None;
    wait_until("the embedded server's directory exists", Duration::from_secs(60), || {
        dir = embedded_dir_of(pid);
        dir.is_some()
    });
    let dir = dir.unwrap();
    let pid_file = dir.join("data/postmaster.pid");
    let mut postmaster = 0;
    wait_until("the postmaster runs", Duration::from_secs(60), || {
        postmaster = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse().ok())
            .unwrap_or(0);
        postmaster != 0
    });
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", postmaster_port(&pid_file));
    wait_until("the run's replication slot exists", Duration::from_secs(60), || {
        Command::new("psql")
            .args([&url, "-Atqc", "SELECT count(*) FROM pg_replication_slots"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "1")
    });
    wait_until("a write of the run committed", Duration::from_secs(60), || some_write_committed(&url));
    signal(&child, signal_name);
    Some((child, dir, postmaster))
}

/// The port on line 4 of postmaster.pid.
fn postmaster_port(pid_file: &Path) -> u16 {
    let text = std::fs::read_to_string(pid_file).unwrap_or_default();
    text.lines().nth(3).and_then(|l| l.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn sigkill_without_db_takes_the_embedded_server_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some((mut child, server_dir, postmaster)) = embedded_run_then("KILL", &dir.path().join("run")) else {
        return;
    };
    child.wait().unwrap();
    wait_until("the postmaster is gone", Duration::from_secs(30), || !process_running(postmaster));
    wait_until("the server directory is removed", Duration::from_secs(30), || !server_dir.exists());
}

#[test]
fn sigint_without_db_saves_a_partial_result_and_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let Some((child, server_dir, postmaster)) = embedded_run_then("INT", &out) else { return };
    let output = finish(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert_partial_result(&out);
    assert!(!process_running(postmaster), "the postmaster is stopped");
    wait_until("the server directory is removed", Duration::from_secs(30), || !server_dir.exists());
}

/// Issue 30, item 11: a run interrupted before its first commit printed "VALID: 0
/// transactions" (`"valid": true`) while `isocert check` refuses the same empty history.
/// It saves its facts and gives no verdict. The signal arrives while the throwaway server
/// starts, so the workload never begins.
#[test]
fn an_interrupt_before_the_first_commit_gives_no_verdict() {
    if !isocert_testsupport::POSTGRES.embedded(EmbeddedPostgres::is_installed()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = start_run(None, &out);
    let pid = child.id();
    wait_until("the embedded server's directory exists", Duration::from_secs(60), || {
        embedded_dir_of(pid).is_some()
    });
    signal(&child, "INT");
    let output = finish(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("an empty history decides nothing"), "{stderr}");
    assert!(!stdout.contains("VALID"), "no verdict is printed: {stdout}");
    assert!(!out.join("report.json").exists(), "no report of a verdict");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!((run["interrupted"].as_bool(), run["committed"].as_u64()), (Some(true), Some(0)), "{run}");
}

/// SIGHUP (the terminal closed) stops a run on its throwaway server as SIGINT does
/// (issue 30, item 4).
#[test]
fn sighup_without_db_saves_a_partial_result_and_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let Some((child, server_dir, postmaster)) = embedded_run_then("HUP", &out) else { return };
    let output = finish(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert_partial_result(&out);
    assert!(!process_running(postmaster), "the postmaster is stopped");
    wait_until("the server directory is removed", Duration::from_secs(30), || !server_dir.exists());
}

/// Another client TRUNCATEs the run's table while `isocert run --db` records (issue 47):
/// a clear error naming the TRUNCATE and the table, exit 2 (it used to panic with
/// `JoinHandle polled after completion` and leave `--out` empty and the table behind);
/// history.jsonl and run.json are saved, run.json marked incomplete; the slot, the
/// publication and the run's table are dropped.
#[test]
fn issue_47_a_truncate_of_the_runs_table_saves_the_history_and_leaves_nothing() {
    let Some(server) = test_pg() else { return };
    let url = fresh_database(&server, "truncate");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = isocert()
        .args(["run", "--workload", "kv", "--isolation", "serializable", "--txns", "4000", "--sessions", "4"])
        .args(["--db", &url])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("isocert run starts");
    wait_until("a write of the run committed", Duration::from_secs(60), || some_write_committed(&url));
    psql(&url, "TRUNCATE kv");
    let output = finish(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("TRUNCATE of the recorded table \"kv\""), "{stderr}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
            .expect("json");
    assert!(run["incomplete"].as_str().is_some_and(|why| why.contains("TRUNCATE")), "{run}");
    assert!(run["committed"].as_u64().unwrap() > 0, "{run}");
    let history = std::fs::read_to_string(out.join("history.jsonl")).expect("history.jsonl");
    assert!(history.lines().count() > 1, "the history is saved");
    assert!(!out.join("certificate.json").exists(), "no certificate for an incomplete record");
    assert_eq!(isocert_objects(&url), "", "no slot or publication is left");
    assert_eq!(psql(&url, "SELECT to_regclass('kv') IS NULL"), "t", "the run's own table is dropped");
}
