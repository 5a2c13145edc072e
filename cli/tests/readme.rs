//! The README's command lines, run as written, so that they stay true.
//!
//! Every command line of the README's indented code blocks is listed here with how it is
//! run; a new command line the test does not know fails it. A synopsis (a line with `[`
//! or `|`: options, not a command) is checked only for its subcommand's `--help`. A
//! runnable line runs through `sh -c` with the built `isocert` first on `PATH`, in a
//! scratch directory (or the repository, for lines that name its files);
//! `cargo run --release -p isocert --` stands for that binary (a test cannot build the
//! release profile). Lines that install packages, run the whole suite, run until Ctrl-C
//! or for minutes are listed as skipped, visibly; `ISOCERT_README_ALL=1` runs the long
//! ones too. A line that needs a server runs when the test can start one (the PostgreSQL
//! or MariaDB server programs are installed), else against `ISOCERT_TEST_PG`, else is
//! skipped visibly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use isocert_adapters::{EmbeddedMariaDb, EmbeddedPostgres};
use isocert_testsupport::{skip_visibly, POSTGRES};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ is in the repository").to_path_buf()
}

/// The command lines of the README's indented code blocks (continuations joined), in order.
fn readme_command_lines() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut lines = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines() {
        let Some(code) = line.strip_prefix("    ") else {
            pending = None;
            continue;
        };
        let code = code.trim();
        let joined = match pending.take() {
            Some(start) => format!("{start} {code}"),
            None => code.to_string(),
        };
        match joined.strip_suffix('\\') {
            Some(start) => pending = Some(start.trim_end().to_string()),
            None if !joined.is_empty() => lines.push(joined),
            None => {}
        }
    }
    lines
}

/// The inline command the README gives for re-checking a run's files.
const CHECK_LINE: &str = "isocert check DIR/history.jsonl --certificate DIR/certificate.json";

/// How the test treats one README line.
#[derive(Debug)]
enum Plan {
    /// A synopsis: its subcommand's `--help` must work.
    Synopsis(String),
    /// Run as written; `needs` says which server it starts; `long` lines run only with
    /// `ISOCERT_README_ALL=1`; `in_repo` lines run in the repository.
    Run { needs: Needs, long: bool, in_repo: bool },
    /// Not run, for this reason.
    Skipped(&'static str),
}

/// The server a README line starts for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    Postgres,
    MariaDb,
}

/// The plan for `line`; panics on a line the test does not know.
fn plan(line: &str) -> Plan {
    let command = line.split('#').next().unwrap_or(line).trim();
    if command.contains('[') || command.contains('|') {
        let sub = command.split_whitespace().nth(1).unwrap_or("").to_string();
        return Plan::Synopsis(sub);
    }
    let postgres = Plan::Run { needs: Needs::Postgres, long: false, in_repo: false };
    let long = |in_repo| Plan::Run { needs: Needs::Postgres, long: true, in_repo };
    match command {
        "scripts/test" => Plan::Skipped("runs the whole test suite, this test included"),
        "cargo run --release -p isocert -- serve" => {
            Plan::Skipped("serves until Ctrl-C; cli/tests/serve.rs runs the demo")
        }
        c if c.starts_with("scripts/install-deps && cargo run --release -p isocert -- run ") => postgres,
        c if c.starts_with("isocert run --database mariadb ") => {
            Plan::Run { needs: Needs::MariaDb, long: false, in_repo: false }
        }
        c if c.starts_with("isocert hunt ") => long(false),
        c if c.starts_with("isocert scenario tests/scenarios/") => long(true),
        other => panic!("README.md has a command line cli/tests/readme.rs does not know: {other}"),
    }
}

/// `line` as run here: the built binary for `cargo run --release -p isocert --`, and no
/// package installation (`scripts/install-deps` needs root and the network).
fn as_run(line: &str) -> String {
    let line = line.strip_prefix("scripts/install-deps && ").unwrap_or(line);
    line.replace("cargo run --release -p isocert --", "isocert")
}

/// Runs `line` with `sh -c` in `dir`, with the built binary first on `PATH`; with `db`,
/// the line's own server is replaced by that one (`--db URL --reset-tables`).
fn sh(line: &str, dir: &Path, db: Option<&str>) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_isocert")).parent().expect("the binary's folder").to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let line = match db {
        Some(url) => line.replacen(" run ", &format!(" run --db {url} --reset-tables "), 1),
        None => line.to_string(),
    };
    Command::new("sh").arg("-c").arg(&line).current_dir(dir).env("PATH", path).output().expect("sh runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Where a line that needs `needs` runs: `Some(None)` on its own server, `Some(Some(url))`
/// on the test server, `None` when neither is there (skipped visibly).
fn server_for(needs: Needs, line: &str) -> Option<Option<String>> {
    match needs {
        Needs::Postgres if EmbeddedPostgres::is_installed() => Some(None),
        Needs::Postgres => match POSTGRES.env_url() {
            Some(url) => Some(Some(url)),
            None => {
                skip_visibly(&format!(
                    "README line needs PostgreSQL (none installed, ISOCERT_TEST_PG unset): {line}"
                ));
                None
            }
        },
        Needs::MariaDb if EmbeddedMariaDb::is_installed() => Some(None),
        Needs::MariaDb => {
            skip_visibly(&format!("README line needs the MariaDB server programs: {line}"));
            None
        }
    }
}

#[test]
fn every_readme_command_line_runs_as_written() {
    let lines = readme_command_lines();
    assert!(lines.len() >= 10, "the README's code blocks: {lines:?}");
    let all = std::env::var("ISOCERT_README_ALL").is_ok_and(|v| v == "1");
    for line in &lines {
        match plan(line) {
            Plan::Synopsis(sub) => {
                let o = Command::new(env!("CARGO_BIN_EXE_isocert"))
                    .args([sub.as_str(), "--help"])
                    .output()
                    .unwrap();
                assert_eq!(o.status.code(), Some(0), "README synopsis {line}: {}", text(&o));
            }
            Plan::Skipped(why) => skip_visibly(&format!("README line not run ({why}): {line}")),
            Plan::Run { long: true, .. } if !all => {
                skip_visibly(&format!("README line runs for minutes (ISOCERT_README_ALL=1 runs it): {line}"))
            }
            Plan::Run { needs, in_repo, .. } => {
                let Some(db) = server_for(needs, line) else { continue };
                let scratch = tempfile::tempdir().unwrap();
                let dir = if in_repo { root() } else { scratch.path().to_path_buf() };
                let o = sh(&as_run(line), &dir, db.as_deref());
                let expected = if line.contains("# exit 1") { 1 } else { 0 };
                assert_eq!(o.status.code(), Some(expected), "README line {line}:\n{}", text(&o));
                if let Some(out) =
                    line.split(" --out ").nth(1).and_then(|rest| rest.split_whitespace().next())
                {
                    recheck(&dir.join(out), expected);
                }
            }
        }
    }
}

/// The README's `isocert check DIR/history.jsonl --certificate DIR/certificate.json` on a
/// run's folder reaches the run's verdict (`expected`), at the level the run recorded.
fn recheck(out: &Path, expected: i32) {
    if !out.join("certificate.json").exists() {
        return;
    }
    let o = sh(&CHECK_LINE.replace("DIR", &out.display().to_string()), out, None);
    assert_eq!(o.status.code(), Some(expected), "{CHECK_LINE} on {}:\n{}", out.display(), text(&o));
    assert!(text(&o).contains("the level the header of"), "says which level it checked: {}", text(&o));
}

#[test]
fn the_readme_still_says_how_to_recheck_a_run() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(text.contains(&format!("`{CHECK_LINE}`")), "README.md no longer gives `{CHECK_LINE}`");
}

/// `isocert check HISTORY --certificate CERT` without `--isolation` checks at the level the
/// history's header records, and says so; a history that records none is refused (exit
/// 2) naming `--isolation`; `--isolation` still chooses another level.
#[test]
fn check_defaults_to_the_level_the_history_header_records() {
    let dir = tempfile::tempdir().unwrap();
    let (history, cert) = (dir.path().join("h.jsonl"), dir.path().join("c.json"));
    let isocert = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().unwrap();
    let gen = isocert(&[
        "gen",
        "--txns",
        "40",
        "--sessions",
        "4",
        "--ops-per-txn",
        "3",
        "--keys",
        "4",
        "--isolation",
        "si",
        "--inject",
        "g-si",
        "--out",
        history.to_str().unwrap(),
        "--certificate",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(gen.status.code(), Some(0), "{}", text(&gen));
    let plain = std::fs::read_to_string(&history).unwrap();
    let args = [history.to_str().unwrap(), "--certificate", cert.to_str().unwrap()];
    let check = |extra: &[&str]| isocert(&[&["check"], &args[..], extra].concat());

    let o = check(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--isolation LEVEL") && text(&o).contains("records none"), "{}", text(&o));

    let with_level = |level: &str| {
        let body = plain.lines().filter(|l| !l.contains("\"format\"")).collect::<Vec<_>>().join("\n");
        let header = format!(r#"{{"format":"isocert-history","version":1,"isolation":"{level}"}}"#);
        std::fs::write(&history, format!("{header}\n{body}\n")).unwrap();
    };
    with_level("snapshot-isolation");
    let o = check(&[]);
    assert_eq!(o.status.code(), Some(1), "G-SI injected, checked at the recorded level: {}", text(&o));
    assert!(text(&o).contains("checking at snapshot-isolation, the level the header of"), "{}", text(&o));
    with_level("read-committed");
    let o = check(&[]);
    assert_eq!(o.status.code(), Some(0), "G-SI is allowed at read committed: {}", text(&o));
    let o = check(&["--isolation", "si"]);
    assert_eq!(o.status.code(), Some(1), "--isolation wins: {}", text(&o));
    assert!(!text(&o).contains("the level the header of"), "{}", text(&o));
}

/// What `cargo install --path cli` (the release profile) ships carries no debug info; line
/// tables live in the `profiling` profile; the manifest names no placeholder repository.
#[test]
fn the_installed_binary_ships_without_debug_info() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let section = |name: &str| -> Option<String> {
        let start = manifest.find(&format!("\n[{name}]\n"))?;
        let body = &manifest[start + name.len() + 4..];
        Some(body[..body.find("\n[").unwrap_or(body.len())].to_string())
    };
    let release = section("profile.release").unwrap_or_default();
    assert!(!release.contains("debug"), "[profile.release] keeps debug info: {release}");
    let profiling = section("profile.profiling").expect("a profiling profile");
    assert!(profiling.contains("inherits = \"release\"") && profiling.contains("debug = 1"), "{profiling}");
    assert!(!manifest.contains("example.invalid"), "a placeholder repository URL");
}

/// docker-compose.yml's `isocert-serve` mounts ./tenants.toml: the repository ships an
/// example that `isocert serve` reads, whose all-zero digest admits no token until the
/// user puts their own in, and the compose file says how to make one.
#[test]
fn the_compose_services_tenants_file_has_a_working_example() {
    let path = root().join("tenants.example.toml");
    let text = std::fs::read_to_string(&path).expect("tenants.example.toml");
    let tenants = isocert_server::tenants::Tenants::parse(&text, &path).expect("the example parses");
    assert_eq!(tenants.len(), 1);
    for token in ["", "change-me", "example"] {
        assert!(tenants.authenticate(token).is_none(), "the example admits {token:?}");
    }
    let compose = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    assert!(compose.contains("cp tenants.example.toml tenants.toml"), "docker-compose.yml says how to start");
    assert!(compose.contains("--hash-token"), "docker-compose.yml says how to make a token's digest");
}

/// Every command's `--help` ends with examples; `hunt --help` states its exit codes; the
/// Kafka options of `check` come after the options of a file check, under their own heading.
#[test]
fn help_has_examples_exit_codes_and_groups() {
    let help = |sub: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_isocert")).args([sub, "--help"]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{sub} --help");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for sub in [
        "check",
        "levels",
        "run",
        "hunt",
        "scenario",
        "recover",
        "cleanup",
        "gen",
        "convert",
        "serve",
        "certificate",
    ] {
        assert!(help(sub).contains("\nExamples:\n  isocert "), "{sub} --help has no examples");
    }
    let hunt = help("hunt");
    assert!(hunt.contains("Exit code 0") && hunt.contains("130: interrupted"), "{hunt}");
    let check = help("check");
    let (isolation, online) =
        (check.find("--isolation <LEVEL>").unwrap(), check.find("--online <KAFKA_URL>").unwrap());
    assert!(isolation < online && check.contains("Online checking (Kafka):"), "{check}");
}
