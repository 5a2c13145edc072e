//! `--format` on `check` and `isocert convert` across other tools' formats.

use std::path::PathBuf;
use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/formats")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn elle_list_append_is_checked_with_the_order_its_reads_show() {
    let out = isocert(&[
        "check",
        "--format",
        "elle",
        &fixture("elle-list-append.edn"),
        "--isolation",
        "serializable",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("VALID"), "{}", text(&out.stdout));
}

/// Issue 28: appends no read shows have no known order, so nothing may rest on one. The
/// reproducer is valid at serializable (the second transaction, then the first); its twin's
/// cycle follows from the reads alone and is rejected, each edge marked as derived.
#[test]
fn issue_28_unobserved_appends_are_not_ordered_by_a_guess() {
    let check = |name: &str, level: &str| {
        isocert(&["check", "--format", "elle", &fixture(name), "--isolation", level, "--json"])
    };
    let out = check("elle-unobserved-appends.edn", "serializable");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("no known order among themselves"), "{}", text(&out.stdout));
    let out = check("elle-unobserved-appends-skew.edn", "serializable");
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let anomaly = &report["anomalies"][0];
    assert_eq!(anomaly["kind"], "g2-item", "{report}");
    let cycle = anomaly["cycle"].as_array().expect("a cycle");
    assert_eq!(cycle.len(), 2, "{report}");
    for edge in cycle {
        assert_eq!(edge["kind"], "rw", "{report}");
        assert_eq!(edge["basis"], "derived", "{report}");
        assert!(edge["explanation"].as_str().unwrap().contains("which no read shows"), "{report}");
    }
    let out = check("elle-unobserved-appends-skew.edn", "read-committed");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
}

/// Issue 28: Jepsen's `:time` gives real time, so list-append histories check at strict
/// serializability (by cobra): a stale read after a completed append is a `real-time` cycle,
/// its overlapping twin passes, and a history without `:time` is refused by name.
#[test]
fn elle_list_append_histories_check_at_strict_serializability() {
    let check = |name: &str, level: &str| {
        isocert(&["check", "--format", "elle", &fixture(name), "--isolation", level, "--json"])
    };
    let out = check("elle-realtime-stale-read.edn", "strict-serializable");
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["checker"], "cobra", "{report}");
    let anomaly = &report["anomalies"][0];
    assert_eq!(anomaly["kind"], "real-time", "{report}");
    let cycle = anomaly["cycle"].as_array().expect("a cycle");
    let kinds: Vec<&str> = cycle.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["real-time", "rw"], "{report}");
    assert_eq!(cycle[0]["basis"], "observed", "{report}");
    assert_eq!(cycle[0]["explanation"], "T1 completed (at 10) before T3 was invoked (at 20) (certain)");
    let out = check("elle-realtime-stale-read.edn", "serializable");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = check("elle-realtime-stale-read-twin.edn", "strict-serializable");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = check("elle-unobserved-appends.edn", "strict-serializable");
    assert_eq!(out.status.code(), Some(2), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cobra cannot check this history: T1 has no invoked_at"),
        "{}",
        text(&out.stderr)
    );
}

/// A read of [1] after one transaction appended 1 then 2 is an intermediate read, as Elle says.
#[test]
fn an_intermediate_list_read_is_g1b() {
    let out = isocert(&["check", "--format", "elle", &fixture("elle-intermediate-append.edn"), "-i", "rc"]);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("g1b") && stdout.contains("intermediate version"), "{stdout}");
    assert!(!stdout.contains("garbage-read"), "{stdout}");
    let out = isocert(&["check", "--format", "elle", &fixture("elle-intermediate-append.edn"), "-i", "ru"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
}

#[test]
fn incompatible_list_orders_are_reported_and_rejected() {
    let out = isocert(&[
        "check",
        "--format",
        "elle",
        &fixture("elle-incompatible-order.edn"),
        "--isolation",
        "ser",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stderr).contains("incompatible order"), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("incompatible-order ("), "{}", text(&out.stdout));
    // Reported once, not again as a garbage read of the same list.
    assert!(text(&out.stdout).contains("1 anomaly found"), "{}", text(&out.stdout));
    assert!(!text(&out.stdout).contains("garbage-read"), "{}", text(&out.stdout));
    // The warning reads like isocert's other messages, with operations numbered from 1 as
    // the report numbers them.
    let warning = text(&out.stderr);
    assert!(
        warning.starts_with("isocert: warning: ")
            && warning.contains("T7 (its operation 1) and T5 (its operation 1)"),
        "{warning}"
    );
    assert!(text(&out.stdout).contains("T7 read kv[5]=[2] (its operation 1)"), "{}", text(&out.stdout));
}

#[test]
fn convert_goes_through_every_int_format_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let steps = [
        ("plume", fixture("plume-long-fork.txt"), "v1", path("a.jsonl")),
        ("v1", path("a.jsonl"), "dbcop-bincode", path("b")),
        ("dbcop-bincode", path("b"), "dbcop", path("c.json")),
        ("dbcop", path("c.json"), "dbcop-hist", path("d.hist")),
        ("dbcop-hist", path("d.hist"), "elle", path("e.edn")),
        ("elle", path("e.edn"), "plume", path("f.txt")),
    ];
    for (from, input, to, output) in &steps {
        let out = isocert(&["convert", "--from", from, "--to", to, input, output]);
        assert_eq!(out.status.code(), Some(0), "{from} -> {to}: {}", text(&out.stderr));
    }
    let back = std::fs::read_to_string(path("f.txt")).unwrap();
    let original = std::fs::read_to_string(fixture("plume-long-fork.txt")).unwrap();
    assert_eq!(back, original, "plume -> v1 -> bincode -> dbcop -> hist -> elle -> plume");
}

#[test]
fn malformed_foreign_input_exits_2_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "w(1,2,3,4)\nr(1,two,3,4)\n").unwrap();
    let out = isocert(&["check", "--format", "plume", bad.to_str().unwrap(), "--isolation", "ser"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("bad.txt") && err.contains("line 2") && err.contains("value"), "{err}");
}

#[test]
fn unknown_format_names_are_a_usage_error() {
    let out = isocert(&["convert", "--from", "cobol", "--to", "v1", "a", "b"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("viper"), "{}", text(&out.stderr));
}

#[test]
fn convert_keeps_the_elle_version_order_as_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.jsonl").to_string_lossy().into_owned();
    let cert = dir.path().join("c.json").to_string_lossy().into_owned();
    let input = fixture("elle-list-append.edn");
    let out =
        isocert(&["convert", "--from", "elle", "--to", "v1", "--certificate-out", &cert, &input, &history]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&cert).unwrap();
    assert!(written.contains(r#"{"key":"x","writers":[1,3]}"#), "{written}");
    let out = isocert(&["check", &history, "--certificate", &cert, "--isolation", "serializable"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = isocert(&[
        "convert",
        "--from",
        "plume",
        "--to",
        "v1",
        "--certificate-out",
        &cert,
        &fixture("plume-long-fork.txt"),
        &history,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("carries no certificate"), "{}", text(&out.stderr));
}

#[test]
fn a_foreign_file_read_as_v1_gets_a_format_hint() {
    let out = isocert(&["check", &fixture("elle-list-append.edn"), "--isolation", "ser"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("try --format elle"), "{}", text(&out.stderr));
}

#[test]
fn king_cobra_version_orders_certify_cobra_logs() {
    let check = |case: &str, vo: &str| {
        isocert(&[
            "check",
            "--format",
            "cobra",
            &fixture(&format!("king-cobra/{case}/history")),
            "--certificate",
            &fixture(&format!("king-cobra/{case}/{vo}")),
            "--isolation",
            "serializable",
        ])
    };
    let out = check("cyclic", "version_order.vo");
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("g1c (T3, T2)") || stdout.contains("g1c (T2, T3)"), "{stdout}");
    let out = check("serial", "version_order.vo");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    // A partial order: the listed orders are fixed, the rest searched (auto picks cobra);
    // Emme, which needs every version, reports the writes it leaves out.
    let out = check("serial", "partial.vo");
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("cobra"), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("the certificate's version order fixed"), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("the version order is partial"), "{}", text(&out.stderr));
    let emme = isocert(&[
        "check",
        "--format",
        "cobra",
        &fixture("king-cobra/serial/history"),
        "--certificate",
        &fixture("king-cobra/serial/partial.vo"),
        "-i",
        "ser",
        "--checker",
        "emme",
    ]);
    assert_eq!(emme.status.code(), Some(1), "{}", text(&emme.stderr));
    assert!(text(&emme.stdout).contains("certificate-contradiction"), "{}", text(&emme.stdout));
    let out = isocert(&[
        "check",
        &fixture("king-cobra/serial/history"),
        "--certificate",
        &fixture("king-cobra/serial/version_order.vo"),
        "-i",
        "ser",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("goes with --format cobra"), "{}", text(&out.stderr));
}

#[test]
fn convert_carries_a_king_cobra_order_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        let out = isocert(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
    };
    run(&[
        "convert",
        "--from",
        "cobra",
        "--to",
        "v1",
        "--certificate",
        &fixture("king-cobra/cyclic/version_order.vo"),
        "--certificate-out",
        &path("cert.json"),
        &fixture("king-cobra/cyclic/history"),
        &path("h.jsonl"),
    ]);
    run(&[
        "convert",
        "--from",
        "v1",
        "--to",
        "cobra",
        "--certificate",
        &path("cert.json"),
        "--certificate-out",
        &path("order.vo"),
        &path("h.jsonl"),
        &path("logs"),
    ]);
    for (history, cert, format) in
        [(path("h.jsonl"), path("cert.json"), "v1"), (path("logs"), path("order.vo"), "cobra")]
    {
        let out =
            isocert(&["check", "--format", format, &history, "--certificate", &cert, "-i", "ser", "--json"]);
        assert_eq!(out.status.code(), Some(1), "{format}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("\"g1c\""), "{format}: {}", text(&out.stdout));
    }
    let out = isocert(&[
        "convert",
        "--from",
        "cobra",
        "--to",
        "v1",
        "--certificate-out",
        &path("x.vo"),
        &path("logs"),
        &path("y.jsonl"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("carries no certificate facts"), "{}", text(&out.stderr));
}

#[test]
fn closed_predicate_histories_are_certified_by_elimination() {
    let check = |fixture_name: &str, level: &str| {
        isocert(&["check", "--format", "elle", &fixture(fixture_name), "--isolation", level])
    };
    // Two predicate reads each miss the other's insert: a G2 cycle of predicate
    // anti-dependencies, forbidden at serializable, allowed at repeatable read.
    let out = check("elle-closed-predicate-g2.edn", "serializable");
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("g2 (T4, T5)"), "{}", text(&out.stdout));
    let out = check("elle-closed-predicate-g2.edn", "repeatable-read");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = check("elle-closed-predicate-g2-twin.edn", "serializable");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // Every version of y is even, so [:mod 2 0] must return it (Elle's predicate-read-miss).
    let out = check("elle-closed-predicate-miss.edn", "read-committed");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("matched but not returned: [kv[\"y\"]=4]"), "{}", text(&out.stdout));
    let out = check("elle-closed-predicate-miss-twin.edn", "serializable");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// Issue 28: AWDIT's test-suite format; a fractured read passes read committed and fails
/// read atomic (and causal), as AWDIT's tests of its `read-committed/` histories assert.
#[test]
fn awdit_test_histories_check_at_the_weak_levels() {
    let file = fixture("awdit-test-fractured.txt");
    for (level, code) in [("rc", 0), ("ra", 1), ("cc", 1)] {
        let out = isocert(&["check", "--format", "awdit-test", &file, "--isolation", level]);
        assert_eq!(out.status.code(), Some(code), "{level}: {}{}", text(&out.stdout), text(&out.stderr));
    }
    let out = isocert(&["check", "--format", "awdit-test", &file, "--isolation", "ra"]);
    assert!(text(&out.stdout).contains("fractured"), "{}", text(&out.stdout));
}

#[test]
fn a_foreign_history_without_a_certificate_says_what_to_give() {
    // Serializable and snapshot isolation are checked black-box (PolySI's long fork).
    for (level, checker) in [("ser", "cobra"), ("si", "polysi")] {
        let out =
            isocert(&["check", "--format", "plume", &fixture("plume-long-fork.txt"), "--isolation", level]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(checker), "{}", text(&out.stdout));
    }
    // Read committed, read atomic and causal are checked black-box too (weak), and allow a
    // long fork.
    for level in ["rc", "ra", "cc"] {
        let out =
            isocert(&["check", "--format", "plume", &fixture("plume-long-fork.txt"), "--isolation", level]);
        assert_eq!(out.status.code(), Some(0), "{level}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("weak"), "{}", text(&out.stdout));
    }
    // Read uncommitted and repeatable read still need the certificate.
    let out = isocert(&["check", "--format", "plume", &fixture("plume-long-fork.txt"), "--isolation", "ru"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("this plume history carries no certificate") && err.contains("--certificate"),
        "{err}"
    );
}

/// `convert --certificate-out` names the transactions as the written history does (dbcop's
/// formats have no transaction ids and number them anew): converting a certified history
/// and its certificate to every format that can hold it, then checking the pair, gives the
/// original verdict, valid and invalid alike.
#[test]
fn converted_certificates_check_against_the_converted_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    for (inject, expected) in [(None, 0), (Some("g1c"), 1)] {
        let (h, c) = (path("h.jsonl"), path("c.json"));
        let _ = std::fs::remove_file(&h);
        let _ = std::fs::remove_file(&c);
        let mut gen =
            vec!["gen", "--txns", "300", "--keys", "12", "--sessions", "5", "--seed", "3", "--out", &h];
        gen.extend(["--certificate", &c]);
        if let Some(kind) = inject {
            gen.extend(["--inject", kind]);
        }
        let out = isocert(&gen);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let original =
            isocert(&["check", &h, "--certificate", &c, "--isolation", "serializable", "--checker", "emme"]);
        assert_eq!(original.status.code(), Some(expected), "{}", text(&original.stdout));
        for format in ["v1", "dbcop", "dbcop-hist", "dbcop-bincode"] {
            let (oh, oc) =
                (path(&format!("{format}-{expected}.out")), path(&format!("{format}-{expected}.cert.json")));
            let conv = isocert(&[
                "convert",
                "--from",
                "v1",
                "--to",
                format,
                "--certificate",
                &c,
                "--certificate-out",
                &oc,
                &h,
                &oh,
            ]);
            assert_eq!(conv.status.code(), Some(0), "{format}: {}", text(&conv.stderr));
            let check = isocert(&[
                "check",
                "--format",
                format,
                &oh,
                "--certificate",
                &oc,
                "--isolation",
                "serializable",
                "--checker",
                "emme",
            ]);
            assert_eq!(
                check.status.code(),
                Some(expected),
                "{format} ({inject:?}): {}{}",
                text(&check.stdout),
                text(&check.stderr)
            );
        }
    }
}

/// Issue 28: IsoVista's explicit initial transaction is the initial state, so the history
/// checks black-box; a history the black-box checkers refuse says why, not only that no
/// certificate came with it.
#[test]
fn isovista_initial_state_checks_and_refusals_name_the_real_cause() {
    let out = isocert(&["check", "--format", "plume", &fixture("isovista-initial.txt"), "-i", "ser"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).starts_with("VALID"), "{}", text(&out.stdout));
    let dir = tempfile::tempdir().expect("tempdir");
    let rewrites = dir.path().join("rewrites-initial.txt");
    std::fs::write(&rewrites, "r(0,0,1,1)\nw(0,0,1,1)\nr(0,0,2,2)\n").expect("write");
    let out = isocert(&["check", "--format", "plume", rewrites.to_str().unwrap(), "-i", "ser"]);
    assert_eq!(out.status.code(), Some(2), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stderr).contains("writes the initial value 0"), "{}", text(&out.stderr));
}

/// Issue 47: `convert` to a format without a place for timestamps or real times refuses
/// (exit 2, naming what and how many) unless `--lossy`, which notes the counts; an empty
/// transaction is left out with a note, and the output reads back.
#[test]
fn issue_47_convert_refuses_to_drop_facts_a_verdict_rests_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    // A lost update Chronos rejects at SI through its timestamps alone.
    std::fs::write(
        path("lost.json"),
        r#"[{"tid":1,"sid":1,"sts":{"p":1,"l":0},"cts":{"p":3,"l":0},"ops":[{"t":"r","k":"x","v":null},{"t":"w","k":"x","v":1}]},
{"tid":2,"sid":2,"sts":{"p":2,"l":0},"cts":{"p":4,"l":0},"ops":[{"t":"r","k":"x","v":null},{"t":"w","k":"x","v":2}]}]"#,
    )
    .unwrap();
    let out =
        isocert(&["convert", "--from", "chronos", "--to", "elle", &path("lost.json"), &path("lost.edn")]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("start_ts/commit_ts of 2 transactions") && err.contains("--lossy"), "{err}");
    assert!(!dir.path().join("lost.edn").exists(), "nothing is written");
    let out = isocert(&[
        "convert",
        "--from",
        "chronos",
        "--to",
        "elle",
        "--lossy",
        &path("lost.json"),
        &path("lost.edn"),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("start_ts/commit_ts of 2 transactions were dropped"), "{err}");

    // Real times (strict serializability) and an empty transaction.
    std::fs::write(
        path("timed.jsonl"),
        r#"{"id":1,"session":1,"invoked_at":1,"completed_at":2,"ops":[{"f":"w","key":1,"value":1}]}
{"id":2,"session":1,"invoked_at":3,"completed_at":4,"ops":[]}
{"id":3,"session":2,"invoked_at":5,"completed_at":6,"ops":[{"f":"r","key":1,"value":1}]}
"#,
    )
    .unwrap();
    let out =
        isocert(&["convert", "--from", "v1", "--to", "dbcop-hist", &path("timed.jsonl"), &path("t.hist")]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("invoked_at/completed_at (real time) of 2 transactions"), "{err}");
    let out = isocert(&[
        "convert",
        "--from",
        "v1",
        "--to",
        "dbcop-hist",
        "--lossy",
        &path("timed.jsonl"),
        &path("t.hist"),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 transactions without operations were left out"), "{err}");
    let out =
        isocert(&["convert", "--from", "dbcop-hist", "--to", "v1", &path("t.hist"), &path("back.jsonl")]);
    assert_eq!(out.status.code(), Some(0), "the written .hist reads back: {}", text(&out.stderr));
    // Elle carries real time: no refusal; the empty transaction is still left out.
    let out = isocert(&["convert", "--from", "v1", "--to", "elle", &path("timed.jsonl"), &path("t.edn")]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("without operations"), "{err}");
}
