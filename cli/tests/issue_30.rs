//! Issue 30 (hostile input and faults, round 3): each class the sweep found, through the
//! binary, at every place the class occurs.

use std::path::Path;
use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Item 1: a number beyond the 64-bit float range (`1e400`) used to become `null`, a delete,
/// so a later read of `null` checked VALID. Every reader refuses it, naming line and field.
#[test]
fn issue_30_out_of_range_floats_are_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("big.jsonl");
    std::fs::write(
        &v1,
        "{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{\"f\":\"w\",\"key\":\"x\",\"value\":1e400}]}\n\
         {\"id\":2,\"session\":1,\"start_ts\":3,\"commit_ts\":4,\"ops\":[{\"f\":\"r\",\"key\":\"x\",\"value\":null}]}\n",
    )
    .unwrap();
    for (checker, level) in [
        ("emme", "rc"),
        ("chronos", "si"),
        ("aion", "si"),
        ("weak", "rc"),
        ("cobra", "ser"),
        ("polysi", "si"),
    ] {
        let out = isocert(&["check", s(&v1), "--isolation", level, "--checker", checker]);
        assert_eq!(out.status.code(), Some(2), "{checker}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("line 1") && stderr(&out).contains("out of range"),
            "{checker}: {}",
            stderr(&out)
        );
    }
    let converted = dir.path().join("out.jsonl");
    let out = isocert(&["convert", "--from", "v1", "--to", "v1", s(&v1), s(&converted)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!converted.exists());
    // A SQL table's row takes the general (serde_json) reader.
    let rows = dir.path().join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"table\":\"t\",\"key\":1,\"value\":{\"id\":1,\"c\":-1e999}}]}\n",
    )
    .unwrap();
    let out = isocert(&["check", s(&rows), "--isolation", "rc", "--checker", "emme"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
    let chronos = dir.path().join("big.chronos.json");
    std::fs::write(
        &chronos,
        "[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":2,\"l\":0},\"ops\":[{\"t\":\"write\",\"k\":1,\"v\":1e400}]}]\n",
    )
    .unwrap();
    let out = isocert(&["check", s(&chronos), "--format", "chronos", "--isolation", "si"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("out of range"), "{}", stderr(&out));
    let edn = dir.path().join("big.edn");
    std::fs::write(
        &edn,
        "{:type :invoke, :f :txn, :value [[:w :x 1.0e400]], :process 0, :index 0}\n\
         {:type :ok, :f :txn, :value [[:w :x 1.0e400]], :process 0, :index 1}\n",
    )
    .unwrap();
    let out = isocert(&["check", s(&edn), "--format", "elle", "--isolation", "rc"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1") && stderr(&out).contains("out of range"), "{}", stderr(&out));
    let json = dir.path().join("big.json");
    std::fs::write(
        &json,
        "[{\"type\":\"invoke\",\"f\":\"txn\",\"process\":0,\"value\":[[\"w\",\"x\",1e400]]},\n\
         {\"type\":\"ok\",\"f\":\"txn\",\"process\":0,\"value\":[[\"w\",\"x\",1e400]]}]\n",
    )
    .unwrap();
    let out = isocert(&["check", s(&json), "--format", "elle-json", "--isolation", "rc"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
}

/// Item 6: 20,000 nested `[` in a transaction's `value` or `meta` overflowed the stack of
/// the fast readers (`--checker aion`, streaming chronos: exit 134). Every checker now says
/// the recursion limit was exceeded, naming the line, and exits 2.
#[test]
fn issue_30_deep_nesting_is_an_error_for_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    for field in ["value", "meta"] {
        let path = dir.path().join(format!("{field}.jsonl"));
        let op_value = if field == "value" { deep.as_str() } else { "1" };
        let meta = if field == "meta" { format!(",\"meta\":{deep}") } else { String::new() };
        std::fs::write(
            &path,
            format!(
                "{{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{{\"f\":\"w\",\"key\":\"x\",\"value\":1}}]}}\n\
                 {{\"id\":2,\"session\":1,\"start_ts\":3,\"commit_ts\":4{meta},\"ops\":[{{\"f\":\"w\",\"key\":\"x\",\"value\":{op_value}}}]}}\n"
            ),
        )
        .unwrap();
        for (checker, level) in
            [("aion", "si"), ("chronos", "si"), ("emme", "rc"), ("weak", "rc"), ("cobra", "ser")]
        {
            let out = isocert(&["check", s(&path), "--isolation", level, "--checker", checker]);
            assert_eq!(out.status.code(), Some(2), "{field}, {checker}: {}", stderr(&out));
            // A nested `value` is refused as a list of lists by some readers, as too deep
            // by others; a nested `meta` is skipped, so only the limit stops it.
            let named = stderr(&out).contains("recursion limit")
                || (field == "value" && stderr(&out).contains("expected a scalar, found an array"));
            assert!(stderr(&out).contains("line 2") && named, "{field}, {checker}: {}", stderr(&out));
        }
    }
}

/// Item 2: `convert --to cobra --certificate-out` paired sessions by first appearance while
/// Cobra's logs are read back in file-name order, and refused every history whose session
/// sizes changed (every `gen --concurrency 1` history). The carried certificate now checks
/// the converted logs to the original verdict.
#[test]
fn issue_30_a_certificate_carried_to_cobra_keeps_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (h, c) = (dir.path().join("h.jsonl"), dir.path().join("c.json"));
    let gen = isocert(&[
        "gen",
        "--txns",
        "100",
        "--keys",
        "50",
        "--sessions",
        "12",
        "--seed",
        "1",
        "--concurrency",
        "1",
        "--out",
        s(&h),
        "--certificate",
        s(&c),
    ]);
    assert_eq!(gen.status.code(), Some(0), "{}", stderr(&gen));
    for format in ["cobra", "plume", "chronos", "dbcop"] {
        let (out, cert) =
            (dir.path().join(format!("out.{format}")), dir.path().join(format!("{format}.cert.json")));
        let conv = isocert(&[
            "convert",
            "--from",
            "v1",
            "--to",
            format,
            "--certificate",
            s(&c),
            "--certificate-out",
            s(&cert),
            s(&h),
            s(&out),
        ]);
        assert_eq!(conv.status.code(), Some(0), "{format}: {}", stderr(&conv));
        let check = isocert(&[
            "check",
            "--format",
            format,
            s(&out),
            "--certificate",
            s(&cert),
            "-i",
            "ser",
            "--checker",
            "emme",
        ]);
        assert_eq!(
            check.status.code(),
            Some(0),
            "{format}: {}{}",
            String::from_utf8_lossy(&check.stdout),
            stderr(&check)
        );
    }
}

/// Item 7: a password in `--api` was printed in the error (bad port, bad scheme, bad host,
/// unreachable server). Every URL isocert prints goes through the database URLs' redaction.
#[test]
fn issue_30_api_urls_are_printed_without_their_password() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h.jsonl");
    std::fs::write(&h, "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":\"x\",\"value\":1}]}\n")
        .unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    for api in [
        "http://user:Pass@127.0.0.1:99999/",
        "htp://user:Pass@127.0.0.1:9/",
        "http://user:Pass@[bad/",
        "user:Pass@host",
        "http://user:Pass@127.0.0.1:9/",
    ] {
        let out =
            isocert(&["certificate", s(&h), "--api", api, "--token-file", s(&token), "--timeout-secs", "1"]);
        assert_eq!(out.status.code(), Some(2), "{api}: {}", stderr(&out));
        assert!(!stderr(&out).contains("Pass"), "{api}: the password is printed: {}", stderr(&out));
        assert!(stderr(&out).contains("user:***@"), "{api}: the URL is named: {}", stderr(&out));
    }
    let out = isocert(&[
        "run",
        "--db",
        "postgres://u:Secret@127.0.0.1:1/db",
        "--certificate-api",
        "htp://user:Pass@h:1/",
        "--token-file",
        s(&token),
        "--workload",
        "kv",
        "--isolation",
        "serializable",
        "--out",
        s(&dir.path().join("run")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Pass") && !stderr(&out).contains("Secret"), "{}", stderr(&out));
}

/// Item 8: a failed convert to Cobra or Viper left `T1.log`, `T2.log` that then checked
/// VALID, and converting into a directory holding an old `T7.log` merged it in. Directory
/// formats are written into a fresh directory renamed into place; a non-empty target is
/// refused without `--force`, and `--force` replaces it whole.
#[test]
fn issue_30_directory_formats_are_written_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut text = String::new();
    for i in 1..=40 {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":{},\"ops\":[{{\"f\":\"w\",\"key\":{},\"value\":{i}}}]}}\n",
            i % 4,
            i % 3
        ));
    }
    // The last transaction holds what Cobra's logs cannot: the write of sessions 0 to 3
    // fails late.
    text.push_str("{\"id\":41,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":\"text\",\"value\":1}]}\n");
    std::fs::write(&input, &text).unwrap();
    let out = dir.path().join("logs");
    let conv = isocert(&["convert", "--from", "v1", "--to", "cobra", s(&input), s(&out)]);
    assert_eq!(conv.status.code(), Some(2), "{}", stderr(&conv));
    assert!(!out.exists(), "a failed convert left {}", out.display());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 1, "temporary directories were left: {left:?}");

    std::fs::write(&input, &text[..text.rfind("{\"id\":41").unwrap()]).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("T7.log"), b"S\0\0\0\0\0\0\0\x46C\0\0\0\0\0\0\0\x46").unwrap();
    let conv = isocert(&["convert", "--from", "v1", "--to", "cobra", s(&input), s(&out)]);
    assert_eq!(conv.status.code(), Some(2), "{}", stderr(&conv));
    assert!(stderr(&conv).contains("--force"), "{}", stderr(&conv));
    assert!(
        out.join("T7.log").exists() && !out.join("T1.log").exists(),
        "a refused target is left as it was"
    );
    let conv = isocert(&["convert", "--force", "--from", "v1", "--to", "cobra", s(&input), s(&out)]);
    assert_eq!(conv.status.code(), Some(0), "{}", stderr(&conv));
    assert!(!out.join("T7.log").exists(), "--force replaces the old logs whole");
    let check =
        isocert(&["check", "--format", "cobra", s(&out), "-i", "ser", "--checker", "cobra", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(report["stats"]["txns"], 40, "{report}");
}

/// Item 9: `check --html/--dot/--certificate-out` and `convert` wrote over their own input.
/// An output never overwrites (or, as a directory, holds) an input.
#[test]
fn issue_30_an_output_never_overwrites_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let (h, c) = (dir.path().join("history.jsonl"), dir.path().join("certificate.json"));
    let gen = isocert(&["gen", "--txns", "20", "--seed", "1", "--out", s(&h), "--certificate", s(&c)]);
    assert_eq!(gen.status.code(), Some(0), "{}", stderr(&gen));
    let before = (std::fs::read(&h).unwrap(), std::fs::read(&c).unwrap());
    let linked = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&h, &linked).unwrap();
    for flag in ["--html", "--dot", "--certificate-out"] {
        for target in [&h, &c, &linked] {
            let out = isocert(&["check", s(&h), "--certificate", s(&c), "-i", "ser", flag, s(target)]);
            assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", target.display(), stderr(&out));
            assert!(stderr(&out).contains("never overwrites an input"), "{}", stderr(&out));
        }
    }
    let out = isocert(&["convert", "--from", "v1", "--to", "v1", s(&h), s(&h)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = isocert(&[
        "convert",
        "--from",
        "v1",
        "--to",
        "v1",
        "--certificate",
        s(&c),
        "--certificate-out",
        s(&c),
        s(&h),
        s(&dir.path().join("x.jsonl")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = isocert(&["convert", "--force", "--from", "v1", "--to", "cobra", s(&h), s(dir.path())]);
    assert_eq!(out.status.code(), Some(2), "a directory holding the input: {}", stderr(&out));
    assert_eq!((std::fs::read(&h).unwrap(), std::fs::read(&c).unwrap()), before, "the inputs are unchanged");
}

/// Item 11: `run --txns 0` said VALID on an empty history that `check` refuses; it is
/// refused up front (the empty interrupted run is covered with a database in
/// tests/tests/safety.rs).
#[test]
fn issue_30_a_run_of_no_transactions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = isocert(&[
        "run",
        "--db",
        "postgres://u@127.0.0.1:1/db",
        "--txns",
        "0",
        "--workload",
        "kv",
        "--isolation",
        "serializable",
        "--out",
        s(&dir.path().join("run")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--txns"), "{}", stderr(&out));
}

/// The "Also" of issue 30: cobra and polysi on large histories grew until the OOM killer
/// ended them. A memory limit stops the check with exit 2 and a message instead.
#[test]
fn issue_30_a_check_over_its_memory_limit_stops_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h.jsonl");
    let gen = isocert(&[
        "gen",
        "--txns",
        "2000",
        "--sessions",
        "2000",
        "--concurrency",
        "1",
        "--seed",
        "1",
        "--out",
        s(&h),
    ]);
    assert_eq!(gen.status.code(), Some(0), "{}", stderr(&gen));
    let out = isocert(&["check", s(&h), "-i", "ser", "--checker", "cobra", "--memory-limit-mib", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("over its limit of 1 MiB") && stderr(&out).contains("--memory-limit-mib"),
        "{}",
        stderr(&out)
    );
    let out = isocert(&["check", s(&h), "-i", "ser", "--checker", "cobra"]);
    assert_eq!(out.status.code(), Some(0), "within the default limit: {}", stderr(&out));
}

/// Item 10: `recover --database dgraph` on a MariaDB run ignored its non-empty raw log,
/// said "recovered 0 commits" and wrote a certificate that turned the VALID run into 142
/// anomalies. A database whose dialect is not the history's, a log the database never reads,
/// and a log that holds none of the history's commits are refused (MariaDB's own run files
/// in tests/tests/mariadb.rs).
#[test]
fn issue_30_recover_refuses_another_databases_files() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    let write = "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1}]}\n";
    std::fs::write(
        &history,
        format!("{{\"format\":\"isocert-history\",\"version\":1,\"dialect\":\"mysql\"}}\n{write}"),
    )
    .unwrap();
    std::fs::write(dir.path().join("raw-log.jsonl"), "{\"commit_lsn\":1}\n").unwrap();
    let cert = dir.path().join("cert.json");
    for database in ["dgraph", "postgres"] {
        let out = isocert(&["recover", "--database", database, "--history", s(&history), "--out", s(&cert)]);
        assert_eq!(out.status.code(), Some(2), "{database}: {}", stderr(&out));
        assert!(stderr(&out).contains("mysql dialect"), "{database}: {}", stderr(&out));
        assert!(!cert.exists());
    }
    std::fs::write(&history, write).unwrap();
    let out = isocert(&["recover", "--database", "dgraph", "--history", s(&history), "--out", s(&cert)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds a captured change stream") || stderr(&out).contains("dialect"),
        "{}",
        stderr(&out)
    );
    assert!(!cert.exists());
}

/// Item 14: messages. A header after the first line said "unknown field `format`"; a wrong
/// header version said "found Int(2)"; 49 nested `NOT` said "unexpected c after the
/// expression" instead of naming the parser's limit.
#[test]
fn issue_30_messages_name_the_construct_not_internals() {
    let dir = tempfile::tempdir().unwrap();
    let write = "{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{\"f\":\"w\",\"key\":\"x\",\"value\":1}]}";
    let late = dir.path().join("late.jsonl");
    std::fs::write(&late, format!("{write}\n{{\"format\":\"isocert-history\",\"version\":1}}\n")).unwrap();
    let version = dir.path().join("version.jsonl");
    std::fs::write(&version, format!("{{\"format\":\"isocert-history\",\"version\":2}}\n{write}\n")).unwrap();
    for (checker, level) in [("emme", "rc"), ("chronos", "si")] {
        let out = isocert(&["check", s(&late), "-i", level, "--checker", checker]);
        assert_eq!(out.status.code(), Some(2), "{checker}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("line 2") && stderr(&out).contains("only be the first line"),
            "{}",
            stderr(&out)
        );
        let out = isocert(&["check", s(&version), "-i", level, "--checker", checker]);
        assert_eq!(out.status.code(), Some(2), "{checker}: {}", stderr(&out));
        assert!(stderr(&out).contains("found 2") && !stderr(&out).contains("Int("), "{}", stderr(&out));
    }
    for (nots, parses) in [(30, true), (49, false), (200, false)] {
        let path = dir.path().join(format!("not{nots}.jsonl"));
        let sql = format!("{}value > 0", "NOT ".repeat(nots));
        let line = serde_json::json!({"id": 1, "session": 1, "start_ts": 1, "commit_ts": 2,
            "ops": [{"f": "select", "table": "kv", "where": sql, "rows": []}]});
        std::fs::write(&path, format!("{line}\n")).unwrap();
        let out = isocert(&["check", s(&path), "-i", "ser", "--checker", "emme"]);
        assert_eq!(out.status.code(), Some(2), "{nots}: {}", stderr(&out));
        assert_eq!(!stderr(&out).contains("recursion limit"), parses, "{nots}: {}", stderr(&out));
        assert!(!stderr(&out).contains("after the expression"), "{nots}: {}", stderr(&out));
    }
}

/// Item 5: a server that accepts connections and never answers (as a PostgreSQL port does
/// for a `mysql://` URL: MySQL clients wait for the server's greeting) hung `run` until it
/// was killed. Each step with the database has a time limit, a clear message and exit 2.
#[test]
fn issue_30_a_server_that_never_answers_is_reported_not_waited_for() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    for scheme in ["postgres", "mysql"] {
        let url = format!("{scheme}://u:Secret@127.0.0.1:{port}/db");
        let started = std::time::Instant::now();
        let out = isocert(&[
            "run",
            "--db",
            &url,
            "--answer-timeout-secs",
            "2",
            "--workload",
            "kv",
            "--isolation",
            "serializable",
            "--txns",
            "10",
            "--out",
            s(&dir.path().join(scheme)),
        ]);
        assert_eq!(out.status.code(), Some(2), "{scheme}: {}", stderr(&out));
        assert!(started.elapsed().as_secs() < 30, "{scheme}: took {:?}", started.elapsed());
        assert!(stderr(&out).contains("gave no answer within 2s"), "{scheme}: {}", stderr(&out));
        assert!(stderr(&out).contains("u:***@") && !stderr(&out).contains("Secret"), "{}", stderr(&out));
    }
    let out = isocert(&[
        "cleanup",
        "--db",
        &format!("postgres://u@127.0.0.1:{port}/db"),
        "--answer-timeout-secs",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("gave no answer"), "{}", stderr(&out));
    drop(silent);
}

/// Item 9: `run --force` left the previous run's certificate, raw log and reports beside
/// the new history; `--html` could name one of the run's own results. `--force` removes the
/// earlier run's result files (and only those), and `--html` may not name one.
#[test]
fn issue_30_run_force_replaces_the_whole_result_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    for name in [
        "history.jsonl",
        "certificate.json",
        "raw-log.jsonl",
        "report.json",
        "report.txt",
        "report.html",
        "run.json",
        "notes.txt",
    ] {
        std::fs::write(out.join(name), "an earlier run\n").unwrap();
    }
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--db",
            "postgres://u@127.0.0.1:1/db",
            "--answer-timeout-secs",
            "2",
            "--workload",
            "kv",
        ];
        args.extend(["--isolation", "serializable", "--out", s(&out)]);
        args.extend(extra);
        isocert(&args)
    };
    let refused = run(&["--force", "--html", s(&out.join("history.jsonl"))]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("never overwrites"), "{}", stderr(&refused));
    assert!(out.join("certificate.json").exists(), "a refused run removes nothing");
    let failed = run(&["--force"]);
    assert_eq!(failed.status.code(), Some(2), "no server there: {}", stderr(&failed));
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["notes.txt"], "only the user's own file is kept");
}
