//! The histories other SI checkers published (issue 14): PolySI's bug-reproducing
//! histories (MariaDB-Galera, YugabyteDB, Dgraph) must be rejected at snapshot isolation by
//! the black-box checker, PolySI's valid samples (its fig. 7 and figs. 8-10 histories) and
//! TimeKiller's Chronos samples accepted.
//!
//! The files are not in this repository: `scripts/peer-histories MIRRORS DIR` copies them
//! (each named there by repository, commit and path) into DIR, and these tests run when
//! `ISOCERT_PEER_HISTORIES=DIR`; otherwise each prints a visible `SKIPPED: <test>: set
//! ISOCERT_PEER_HISTORIES=...` line on stderr and passes. The
//! results are recorded in docs/CHECKING.md ("Published histories of other checkers").

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const POLYSI: &str = "hengxin+PolySI-PVLDB2023-Artifacts/artifact/PolySIHistories";
const TIMEKILLER: &str = "FertileFragrance+TimeKiller/examples";

/// One published history and the verdict it must get.
struct Case {
    /// Path under ISOCERT_PEER_HISTORIES (as scripts/peer-histories lays it out).
    path: String,
    /// `--format` of `isocert check`.
    format: &'static str,
    /// `--checker`.
    checker: &'static str,
    /// `--isolation`: `si`, or `ser` for Cobra.
    level: &'static str,
    /// Further flags (`--initial-value 0` for TimeKiller's key-value sample).
    extra: &'static [&'static str],
    /// Whether the history satisfies snapshot isolation.
    valid: bool,
    /// How many transactions the importer must find.
    txns: u64,
}

fn polysi(path: &str, format: &'static str, valid: bool, txns: u64) -> Case {
    Case { path: format!("{POLYSI}/{path}"), format, checker: "polysi", level: "si", extra: &[], valid, txns }
}

/// The directory of the copied histories, or `None` (with a visible line) when unset.
fn peer_dir(test: &str) -> Option<PathBuf> {
    match std::env::var_os("ISOCERT_PEER_HISTORIES") {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            // Written to the stderr handle, not by eprintln!, so the test harness does not
            // capture it: the line shows although the test passes (testsupport's convention).
            let line = format!(
                "SKIPPED: {test}: set ISOCERT_PEER_HISTORIES=DIR (scripts/peer-histories MIRRORS DIR copies the histories)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

/// Checks every case at its level and asserts its verdict and transaction count.
fn run(test: &str, cases: &[Case]) {
    let Some(dir) = peer_dir(test) else { return };
    for case in cases {
        let path = dir.join(&case.path);
        assert!(
            path.exists(),
            "{} is missing: run scripts/peer-histories MIRRORS {}",
            path.display(),
            dir.display()
        );
        let path_arg = path.to_str().expect("a UTF-8 path");
        let mut args = vec![
            "check",
            "--isolation",
            case.level,
            "--json",
            "--format",
            case.format,
            "--checker",
            case.checker,
        ];
        args.extend_from_slice(case.extra);
        args.push(path_arg);
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_isocert")).args(&args).output().expect("isocert runs");
        let elapsed = start.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let want = if case.valid { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(want), "{}: {stderr}", case.path);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: the report is not JSON ({e}): {stderr}", case.path));
        assert_eq!(report["valid"], case.valid, "{}", case.path);
        assert_eq!(report["checker"], case.checker, "{}", case.path);
        assert_eq!(report["stats"]["txns"], case.txns, "{}: every transaction imported", case.path);
        let anomalies = report["anomalies"].as_array().expect("anomalies");
        if case.valid {
            assert!(anomalies.is_empty(), "{}: {report}", case.path);
        } else if case.level == "si" {
            assert!(!anomalies.is_empty(), "{}", case.path);
            assert!(
                anomalies.iter().all(|a| a["kind"] == "g-si"),
                "{}: only snapshot isolation violations: {report}",
                case.path
            );
        } else {
            assert!(!anomalies.is_empty(), "{}", case.path);
        }
        println!(
            "{test}: {} ({} txns): {} at {} by {} in {:.2}s",
            case.path,
            case.txns,
            if case.valid { "accepted" } else { "rejected" },
            case.level,
            case.checker,
            elapsed.as_secs_f64()
        );
    }
}

/// PolySI's violations: Galera's lost update, YugabyteDB's and Dgraph's SI violations.
#[test]
fn polysi_violations_are_rejected_at_si() {
    run(
        "polysi_violations_are_rejected_at_si",
        &[
            polysi("violations/galera/galera.txt", "plume", false, 7),
            polysi("violations/yugabyte/yugabyte.txt", "plume", false, 20),
            polysi("violations/dgraph/history.bincode", "dbcop-bincode", false, 800),
        ],
    );
}

/// The same violations are not serializable either: Cobra rejects them too.
#[test]
fn polysi_violations_are_rejected_at_ser_by_cobra() {
    let cobra = |case: Case| Case { checker: "cobra", level: "ser", ..case };
    run(
        "polysi_violations_are_rejected_at_ser_by_cobra",
        &[
            cobra(polysi("violations/galera/galera.txt", "plume", false, 7)),
            cobra(polysi("violations/yugabyte/yugabyte.txt", "plume", false, 20)),
            cobra(polysi("violations/dgraph/history.bincode", "dbcop-bincode", false, 800)),
        ],
    );
}

/// PolySI's fig. 7 and fig. 8-10 DBCop histories (generated on PostgreSQL), accepted.
#[test]
fn polysi_dbcop_samples_are_accepted_at_si() {
    run(
        "polysi_dbcop_samples_are_accepted_at_si",
        &[
            polysi("fig7/5_100_15_10000_0.5_uniform/hist-00000/history.bincode", "dbcop-bincode", true, 500),
            polysi(
                "fig7/20_100_15_10000_0.5_uniform/hist-00000/history.bincode",
                "dbcop-bincode",
                true,
                2000,
            ),
            polysi("fig7/20_100_15_10000_0.5_zipf/hist-00000/history.bincode", "dbcop-bincode", true, 2000),
            polysi(
                "fig8_9_10/25_400_8_10000_0.3_uniform/hist-00000/history.bincode",
                "dbcop-bincode",
                true,
                10_000,
            ),
        ],
    );
}

/// PolySI's fig. 8-10 Cobra histories (RUBiS, Twitter, TPC-C log directories), accepted.
#[test]
fn polysi_cobra_samples_are_accepted_at_si() {
    run(
        "polysi_cobra_samples_are_accepted_at_si",
        &[
            polysi("fig8_9_10/rubis-10000/hist-00000", "cobra", true, 9358),
            polysi("fig8_9_10/twitter-10000/hist-00000", "cobra", true, 9571),
            polysi("fig8_9_10/tpcc-10000/hist-00000", "cobra", true, 13_870),
        ],
    );
}

/// TimeKiller's key-value (initial value 0) and list samples, by Chronos and Aion.
#[test]
fn timekiller_samples_are_accepted_by_chronos_and_aion() {
    let mut cases = Vec::new();
    for checker in ["chronos", "aion"] {
        cases.push(Case {
            path: format!("{TIMEKILLER}/format-kv.json"),
            format: "chronos",
            checker,
            level: "si",
            extra: &["--initial-value", "0"],
            valid: true,
            txns: 1000,
        });
        cases.push(Case {
            path: format!("{TIMEKILLER}/format-list.json"),
            format: "chronos",
            checker,
            level: "si",
            extra: &[],
            valid: true,
            txns: 1000,
        });
    }
    run("timekiller_samples_are_accepted_by_chronos_and_aion", &cases);
}

/// One line of tests/published/manifest.tsv.
#[derive(Debug)]
struct Entry {
    repo: String,
    commit: String,
    path: String,
    licence: String,
    format: String,
    level: String,
    checker: String,
    flags: Vec<String>,
    documented: String,
    expect: String,
    why: String,
}

/// The published-histories manifest (issue 28), one entry a line after the comments and header.
fn manifest() -> Vec<Entry> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/published/manifest.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(lines.next().map(|h| h.split('\t').count()), Some(11), "the header names the eleven columns");
    lines
        .enumerate()
        .map(|(i, line)| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 11, "manifest entry {}: {line:?}", i + 1);
            Entry {
                repo: f[0].into(),
                commit: f[1].into(),
                path: f[2].into(),
                licence: f[3].into(),
                format: f[4].into(),
                level: f[5].into(),
                checker: f[6].into(),
                flags: if f[7] == "-" { Vec::new() } else { f[7].split(' ').map(String::from).collect() },
                documented: f[8].into(),
                expect: f[9].into(),
                why: f[10].into(),
            }
        })
        .collect()
}

/// The manifest is well formed (always runs): a pinned commit, a licence, a documented and an
/// expected verdict each, and a reason wherever isocert's verdict is not the documented one.
#[test]
fn the_published_histories_manifest_is_well_formed() {
    let entries = manifest();
    assert!(entries.len() >= 20, "{} entries", entries.len());
    for e in &entries {
        assert!(e.repo.contains('/') && !e.path.is_empty(), "{e:?}");
        assert!(e.commit.len() == 40 && e.commit.bytes().all(|b| b.is_ascii_hexdigit()), "{e:?}");
        assert!(!e.licence.is_empty() && !e.documented.is_empty(), "{e:?}");
        assert!(["valid", "invalid", "refused"].contains(&e.expect.as_str()), "{e:?}");
        // A documented violation: "not serializable", "violates SI", "G2-item: ...".
        let negative = e.documented.starts_with("not ")
            || e.documented.contains("violates")
            || e.documented.starts_with("G");
        let agrees = match e.expect.as_str() {
            "valid" => !negative,
            "invalid" => negative,
            _ => false,
        };
        assert!(agrees || e.why != "-", "a verdict other than the documented one needs a reason: {e:?}");
    }
}

/// Every manifest entry gets the verdict the manifest says (issue 28): the documented one, or
/// the one its `why` explains.
#[test]
fn every_published_history_gets_its_manifest_verdict() {
    let Some(dir) = peer_dir("every_published_history_gets_its_manifest_verdict") else { return };
    let (mut checked, mut differing) = (0, 0);
    for e in manifest() {
        let path = dir.join(e.repo.replace('/', "+")).join(&e.path);
        assert!(
            path.exists(),
            "{} is missing: run scripts/peer-histories MIRRORS {}",
            path.display(),
            dir.display()
        );
        let mut args: Vec<String> =
            ["check", "--format", &e.format, "--isolation", &e.level, "--checker", &e.checker]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(e.flags.iter().cloned());
        args.push(path.to_string_lossy().into_owned());
        let out = Command::new(env!("CARGO_BIN_EXE_isocert")).args(&args).output().expect("isocert runs");
        let want = match e.expect.as_str() {
            "valid" => 0,
            "invalid" => 1,
            _ => 2,
        };
        assert_eq!(
            out.status.code(),
            Some(want),
            "{}@{}: {} at {}: {}{}",
            e.repo,
            &e.commit[..7],
            e.path,
            e.level,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
        differing += usize::from(e.why != "-");
        println!("{}: {} at {}: {} ({})", e.repo, e.path, e.level, e.expect, e.documented);
    }
    println!(
        "{checked} published histories checked, {differing} of them with a verdict the manifest explains"
    );
}
