//! The black-box arm of `isocert check` (a Plume or v1 file read straight into the compact
//! model) against the general path (the same history as v1, read into the general model
//! and converted, `--general-model`): for every black-box checker and level, on the anomaly
//! corpus and on generated histories, valid and invalid, both must print the same report,
//! exit with the same code, refuse with the same words, and write the same DOT graph, HTML
//! report and inferred certificate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

/// What a run shows: the exit code, the report, and for an error its message (standard
/// error otherwise carries logs).
fn shown(out: &Output) -> (Option<i32>, String, String) {
    let err = if out.status.code() == Some(2) {
        String::from_utf8_lossy(&out.stderr).to_string()
    } else {
        String::new()
    };
    (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string(), err)
}

const CHECKERS: [&str; 5] = ["auto", "mtc", "cobra", "polysi", "weak"];
const LEVELS: [&str; 6] = ["rc", "ra", "causal", "si", "ser", "sser"];

/// Checks `file` (in `format`) by the black-box arm and `same` (v1) by the general path at
/// every black-box checker and level; returns how many runs found anomalies.
fn agree(file: &Path, format: &str, same: &Path, dir: &Path) -> usize {
    let mut invalid = 0;
    for checker in CHECKERS {
        for level in LEVELS {
            let outputs = |tag: &str| -> [PathBuf; 3] {
                ["dot", "html", "cert.json"].map(|ext| dir.join(format!("{tag}.{checker}.{level}.{ext}")))
            };
            let (compact, general) = (outputs("compact"), outputs("general"));
            let args = |input: &str, out: &[PathBuf; 3], fmt: &str| -> Vec<String> {
                let mut a: Vec<String> =
                    ["check", input, "--format", fmt, "-i", level, "--checker", checker, "--json"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                for (flag, path) in ["--dot", "--html", "--certificate-out"].iter().zip(out) {
                    a.push(flag.to_string());
                    a.push(path.to_str().unwrap().to_string());
                }
                a
            };
            let compact_args = args(file.to_str().unwrap(), &compact, format);
            let mut general_args = args(same.to_str().unwrap(), &general, "v1");
            general_args.push("--general-model".into());
            let a = isocert(&compact_args.iter().map(String::as_str).collect::<Vec<_>>());
            let b = isocert(&general_args.iter().map(String::as_str).collect::<Vec<_>>());
            let what = format!("{} --checker {checker} -i {level}", file.display());
            let (sa, sb) = (shown(&a), shown(&b));
            let (ea, eb) =
                (sa.2.replace(file.to_str().unwrap(), "H"), sb.2.replace(same.to_str().unwrap(), "H"));
            assert_eq!((sa.0, &sa.1, ea), (sb.0, &sb.1, eb), "{what}");
            invalid += usize::from(sa.0 == Some(1));
            for (x, y) in compact.iter().zip(&general) {
                assert_eq!(std::fs::read(x).ok(), std::fs::read(y).ok(), "{what}: {}", x.display());
                let _ = std::fs::remove_file(x);
                let _ = std::fs::remove_file(y);
            }
        }
    }
    invalid
}

fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
    let mut out = Vec::new();
    for kind in std::fs::read_dir(&root).unwrap() {
        for case in std::fs::read_dir(kind.unwrap().path()).unwrap() {
            let history = case.unwrap().path().join("history.jsonl");
            if history.exists() {
                out.push(history);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_compact_arm_reports_as_the_general_path_on_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let mut invalid = 0;
    for history in corpus() {
        invalid += agree(&history, "v1", &history, dir.path());
    }
    assert!(invalid > 50, "the corpus has anomalies the black-box checkers find: {invalid}");
}

#[test]
fn the_compact_arm_reports_as_the_general_path_on_generated_plume_and_v1_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut invalid = 0;
    let cases: [(&str, &[&str]); 5] = [
        ("valid", &[]),
        ("g1c", &["--inject", "g1c"]),
        ("lost-update", &["--inject", "lost-update"]),
        ("write-skew", &["--inject", "write-skew", "--isolation", "si"]),
        ("blind", &["--read-only-txns", "0.5"]),
    ];
    for (name, extra) in cases {
        let v1 = dir.path().join(format!("{name}.jsonl"));
        let mut gen =
            vec!["gen", "--txns", "120", "--sessions", "6", "--keys", "12", "--out", v1.to_str().unwrap()];
        gen.extend_from_slice(extra);
        assert_eq!(isocert(&gen).status.code(), Some(0), "gen {name}");
        invalid += agree(&v1, "v1", &v1, dir.path());
        // Plume keeps the writes of aborted transactions only; its v1 reading is the reference.
        let plume = dir.path().join(format!("{name}.txt"));
        let back = dir.path().join(format!("{name}.back.jsonl"));
        for (from, to, input, output) in [("v1", "plume", &v1, &plume), ("plume", "v1", &plume, &back)] {
            // Generated histories carry timestamps, which Plume has no place for (issue 47).
            let args = [
                "convert",
                "--from",
                from,
                "--to",
                to,
                "--lossy",
                input.to_str().unwrap(),
                output.to_str().unwrap(),
            ];
            assert_eq!(isocert(&args).status.code(), Some(0), "convert {name} to {to}");
        }
        invalid += agree(&plume, "plume", &back, dir.path());
    }
    assert!(invalid > 10, "the injected anomalies are found: {invalid}");
}
