//! Helpers shared by isocert's end-to-end tests: where the anomaly corpus lives, what a
//! case expects, and the `isocert` binary to run.
//!
//! The corpus is `tests/corpus/<kind>/<case>/` with `history.jsonl`, an optional
//! `certificate.json` and `expect.json`:
//!
//! ```json
//! {"checker": "emme", "kind": "g1a", "reject": ["rc", "rr", "si", "ser"], "accept": ["ru"],
//!  "error": [], "stderr": "...", "about": "why"}
//! ```
//!
//! `kind` (a string, or an object from level to kind) must be among the anomalies reported
//! at each rejecting level; `error` levels must exit 2 with `stderr` in the message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The corpus root, `tests/corpus`.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// One corpus case.
#[derive(Debug, Clone)]
pub struct Case {
    /// `<kind>/<case>`, for messages.
    pub name: String,
    /// The history file.
    pub history: PathBuf,
    /// The certificate file, if the case has one.
    pub certificate: Option<PathBuf>,
    /// The checker to run (`emme`, `enne`, `auto`, ...).
    pub checker: String,
    /// Levels that must report anomalies, with the kind that must be among them.
    pub reject: Vec<(String, Option<String>)>,
    /// Levels that must accept.
    pub accept: Vec<String>,
    /// Levels that must fail with exit code 2.
    pub error: Vec<String>,
    /// Text the error message must contain.
    pub stderr: Option<String>,
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v[field]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Every case of the corpus, sorted by name.
///
/// # Panics
/// When the corpus is unreadable or an `expect.json` is malformed (a broken fixture).
pub fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut kinds: Vec<_> =
        std::fs::read_dir(corpus_dir()).expect("tests/corpus").map(|e| e.unwrap().path()).collect();
    kinds.sort();
    for kind in kinds {
        let mut dirs: Vec<_> = std::fs::read_dir(&kind).unwrap().map(|e| e.unwrap().path()).collect();
        dirs.sort();
        for dir in dirs {
            let name = format!(
                "{}/{}",
                kind.file_name().unwrap().to_string_lossy(),
                dir.file_name().unwrap().to_string_lossy()
            );
            let text =
                std::fs::read_to_string(dir.join("expect.json")).unwrap_or_else(|e| panic!("{name}: {e}"));
            let e: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}/expect.json: {e}"));
            let reject = strings(&e, "reject")
                .into_iter()
                .map(|level| {
                    let kind = match &e["kind"] {
                        Value::String(k) => Some(k.clone()),
                        Value::Object(m) => m.get(&level).and_then(|k| k.as_str()).map(String::from),
                        _ => None,
                    };
                    (level, kind)
                })
                .collect();
            let certificate = dir.join("certificate.json");
            cases.push(Case {
                name,
                history: dir.join("history.jsonl"),
                certificate: certificate.exists().then_some(certificate),
                checker: e["checker"].as_str().unwrap_or("emme").to_string(),
                reject,
                accept: strings(&e, "accept"),
                error: strings(&e, "error"),
                stderr: e["stderr"].as_str().map(String::from),
            });
        }
    }
    cases
}

/// The `isocert` binary of this build, built on first use (`cargo build -p isocert`) so
/// that `cargo test -p isocert-tests` works on its own.
///
/// # Panics
/// When the binary cannot be built.
pub fn isocert_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/..");
        let bin = dir.join(format!("isocert{}", std::env::consts::EXE_SUFFIX));
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", "isocert", "--bin", "isocert"]);
        if cfg!(feature = "mongodb") {
            cmd.args(["--features", "mongodb"]);
        }
        if cfg!(feature = "kafka") {
            cmd.args(["--features", "kafka"]);
        }
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo build -p isocert");
        assert!(
            status.success() && bin.exists(),
            "cargo build -p isocert failed or {} is missing",
            bin.display()
        );
        bin
    })
}

/// A database of its own for one test on the PostgreSQL test server `server` (a URL),
/// named `isocert_<name>_<pid>` and made afresh; returns its URL. Tests that run specs with
/// `--db` use one each: the specs create their tables (`test`, `t`), and two tests running at
/// once in one database would find each other's (`relation "test" already exists`).
///
/// # Panics
/// When `psql` cannot drop or create the database.
pub fn fresh_pg_database(server: &str, name: &str) -> String {
    let db = format!("isocert_{name}_{}", std::process::id());
    for sql in [format!("DROP DATABASE IF EXISTS {db}"), format!("CREATE DATABASE {db}")] {
        let out = Command::new("psql")
            .args([server, "-v", "ON_ERROR_STOP=1", "-Atqc", &sql])
            .output()
            .expect("psql");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
    format!("{base}/{db}")
}

/// A kv run (`isocert run --db DB_URL --workload kv --isolation ISOLATION --txns TXNS`,
/// four sessions, no deletes, tables reset) with `--emit` to a fresh topic on the broker at
/// `bootstrap`, checked by one member at `level` while it runs (issue 36's live publishing,
/// for the live database suites); the run's files go to `dir/run`.
///
/// # Panics
/// When a process cannot be started, when the run did not publish while it ran, or when
/// the member's exit code differs from offline Chronos's on the saved history (at `level`).
#[cfg(feature = "kafka")]
pub fn assert_live_kv_run_checked_online(
    bootstrap: &str,
    dir: &Path,
    db_url: &str,
    isolation: &str,
    txns: &str,
    level: &str,
) {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let topic = format!("live-{}-{nanos}", std::process::id());
    let url = format!("kafka://{bootstrap}/{topic}");
    let mut member = Command::new(isocert_bin())
        .args(["check", "-i", level, "--online", &url, "--group", &topic, "--session-timeout", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("isocert check --online");
    let out = dir.join("run");
    let run = Command::new(isocert_bin())
        .args(["run", "--db", db_url, "--workload", "kv", "--isolation", isolation, "--no-deletes"])
        .args(["--txns", txns, "--sessions", "4", "--reset-tables", "--emit", &url, "--out"])
        .arg(&out)
        .output()
        .expect("isocert run");
    let text = format!("{}\n{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    let online = member.wait().expect("the member ends").code();
    let offline = Command::new(isocert_bin())
        .args(["check", "--checker", "chronos", "-i", level])
        .arg(out.join("history.jsonl"))
        .output()
        .expect("isocert check")
        .status
        .code();
    assert!(text.contains("during the run"), "{text}");
    assert_eq!(online, offline, "{text}");
}
