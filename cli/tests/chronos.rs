//! `isocert check --checker chronos|aion` and `isocert convert` on the TimeKiller sample.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../checker/tests/fixtures/chronos/timekiller-format-kv.json")
}

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

#[test]
fn chronos_and_aion_accept_the_sample_with_initial_value_zero() {
    let path = sample();
    let path = path.to_str().unwrap();
    for checker in ["chronos", "aion"] {
        let out = isocert(&[
            "check",
            "--checker",
            checker,
            "-i",
            "si",
            "--format",
            "chronos",
            "--initial-value",
            "0",
            path,
        ]);
        assert_eq!(out.status.code(), Some(0), "{checker}: {}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("VALID: 1000 transactions"));
    }
}

#[test]
fn without_initial_values_the_sample_has_ext_violations() {
    let path = sample();
    let out = isocert(&[
        "check",
        "--checker",
        "chronos",
        "-i",
        "si",
        "--format",
        "chronos",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let anomalies = report["anomalies"].as_array().unwrap();
    assert!(!anomalies.is_empty() && anomalies.iter().all(|a| a["kind"] == "ext"));
    assert_eq!(anomalies[0]["txns"][0], 50, "ids are the file's tids");
}

#[test]
fn convert_round_trips_and_aion_reads_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("tk.jsonl");
    let back = dir.path().join("tk.json");
    let sample = sample();
    let out = isocert(&[
        "convert",
        "--from",
        "chronos",
        "--to",
        "v1",
        "--initial-value",
        "0",
        sample.to_str().unwrap(),
        v1.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = isocert(&[
        "convert",
        "--from",
        "v1",
        "--to",
        "chronos",
        v1.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = isocert(&[
        "check",
        "--checker",
        "chronos",
        "-i",
        "si",
        "--format",
        "chronos",
        "--initial-value",
        "0",
        back.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // The v1 file carries the initial values in its header; stream it to Aion.
    let mut child = Command::new(env!("CARGO_BIN_EXE_isocert"))
        .args(["check", "--checker", "aion", "-i", "si", "-"])
        .stdin(std::fs::File::open(&v1).unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn bad_input_is_exit_code_two_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[\n{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":2,\"l\":0},\"ops\":[{\"t\":\"x\",\"k\":1}]}]").unwrap();
    let out =
        isocert(&["check", "--checker", "chronos", "-i", "si", "--format", "chronos", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: ops[0].t: unknown operation"), "{err}");
    let out = isocert(&[
        "check",
        "--checker",
        "chronos",
        "-i",
        "rc",
        "--format",
        "chronos",
        sample().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `isocert gen` of 400 transactions (6 sessions, 15 keys, seed 5) with `extra` into `path`.
fn generate(path: &str, extra: &[&str]) {
    let mut args =
        vec!["gen", "--txns", "400", "--sessions", "6", "--keys", "15", "--seed", "5", "--out", path];
    args.extend_from_slice(extra);
    let out = isocert(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Histories from `isocert gen` (an independent MVCC simulation with timestamps): valid
/// ones pass Chronos and Aion at the level they were simulated under; each injected
/// anomaly is rejected at the levels the generator documents.
#[test]
fn generated_histories_and_injections_get_the_documented_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let p = path.to_str().unwrap();
    let gen = |extra: &[&str]| generate(p, extra);
    let verdict =
        |checker: &str, level: &str| isocert(&["check", "--checker", checker, "-i", level, p]).status.code();
    for (model, iso) in [("kv", "si"), ("kv", "ser"), ("list-append", "si"), ("list-append", "ser")] {
        gen(&["--model", model, "--isolation", iso]);
        for checker in ["chronos", "aion"] {
            assert_eq!(verdict(checker, iso), Some(0), "{model} {iso} {checker}");
        }
    }
    for (inject, rejected_at_si) in [
        ("lost-update", true),
        ("write-skew", false),
        ("ext", true),
        ("no-conflict", true),
        ("session", true),
        ("int", true),
    ] {
        gen(&["--isolation", "si", "--inject", inject]);
        for checker in ["chronos", "aion"] {
            let want = if rejected_at_si { 1 } else { 0 };
            assert_eq!(verdict(checker, "si"), Some(want), "{inject} at si by {checker}");
            assert_eq!(verdict(checker, "ser"), Some(1), "{inject} at ser by {checker}");
        }
    }
}

#[test]
fn predicate_operations_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.jsonl");
    std::fs::write(
        &path,
        "{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{\"f\":\"select\",\"table\":\"t\",\"where\":\"c > 1\",\"rows\":[]}]}\n",
    )
    .unwrap();
    for checker in ["chronos", "aion"] {
        let out = isocert(&["check", "--checker", checker, "-i", "si", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{checker}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("select") || err.contains("predicate operation"), "{checker}: {err}");
    }
}

#[test]
fn predicate_operations_on_standard_input_are_refused_not_lost() {
    let line = "{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{\"f\":\"select\",\"table\":\"t\",\"where\":\"c > 1\",\"rows\":[]}]}\n";
    let mut child = Command::new(env!("CARGO_BIN_EXE_isocert"))
        .args(["check", "--checker", "chronos", "-i", "si", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), line.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("predicate operation"));
}

/// `n` valid v1 transactions in one session, one after another, each writing key 1 and
/// reading the previous write; transaction `i` spans [10i, 10i + 5].
fn aion_lines(n: usize) -> String {
    let mut text = String::from(
        "{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"key\":1,\"value\":0}]}\n",
    );
    for i in 0..n {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":1,\"start_ts\":{},\"commit_ts\":{},\"ops\":[{{\"f\":\"r\",\"key\":1,\"value\":{i}}},{{\"f\":\"w\",\"key\":1,\"value\":{}}}]}}\n",
            10 * i,
            10 * i + 5,
            i + 1
        ));
    }
    text
}

fn aion_stdin(text: &str, extra: &[&str]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_isocert"))
        .args(["check", "--checker", "aion", "-i", "si"])
        .args(extra)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let text = text.to_string();
    let writer = std::thread::spawn(move || {
        // The checker may stop reading early (an error): a broken pipe is expected then.
        let _ = stdin.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn aion_reads_batches_on_a_thread_and_agrees_with_chronos() {
    // More transactions than one batch of the reader thread, several operation blocks.
    let mut text = aion_lines(40_000);
    let valid = aion_stdin(&text, &[]);
    assert_eq!(valid.status.code(), Some(0), "{}", String::from_utf8_lossy(&valid.stderr));
    assert!(String::from_utf8_lossy(&valid.stdout).starts_with("VALID: 40000 transactions"));
    // A stale read late in the stream: both checkers name the same transaction.
    text.push_str("{\"id\":40000,\"session\":2,\"start_ts\":400000,\"commit_ts\":400001,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":7}]}\n");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.jsonl");
    std::fs::write(&file, &text).unwrap();
    let aion = aion_stdin(&text, &["--json"]);
    let chronos = isocert(&["check", "--checker", "chronos", "-i", "si", "--json", file.to_str().unwrap()]);
    assert_eq!(aion.status.code(), Some(1), "{}", String::from_utf8_lossy(&aion.stderr));
    let anomalies = |out: &Output| {
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["anomalies"].clone()
    };
    assert_eq!(anomalies(&aion), anomalies(&chronos));
    assert_eq!(anomalies(&aion)[0]["txns"][0], 40000);
}

#[test]
fn aion_names_the_malformed_line_after_batches_were_checked() {
    let mut text = aion_lines(5000);
    text.push_str("{\"id\":5000,\"session\":1,\"ops\":[}\n");
    text.push_str(&aion_lines(3).lines().skip(1).collect::<Vec<_>>().join("\n"));
    let out = aion_stdin(&text, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("history -: line 5002:"), "{err}");
    // A transaction id repeated in a later batch of the reader thread names its line too.
    let mut text = aion_lines(5000);
    text.push_str("{\"id\":3,\"session\":2,\"start_ts\":1,\"commit_ts\":2,\"ops\":[]}\n");
    let out = aion_stdin(&text, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 5002: id: transaction id 3 appears twice"), "{err}");
}

#[test]
fn aion_reports_a_final_anomaly_while_the_stream_is_still_open() {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_isocert"))
        .args(["check", "--checker", "aion", "-i", "si", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Two overlapping writers of one key: a NoConflict violation, final at once.
    stdin
        .write_all(
            b"{\"id\":1,\"session\":1,\"start_ts\":1,\"commit_ts\":5,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1}]}\n\
              {\"id\":2,\"session\":2,\"start_ts\":2,\"commit_ts\":6,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":2}]}\n",
        )
        .unwrap();
    stdin.flush().unwrap();
    // The warning must come while standard input is still open.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("no-conflict") && !line.contains("NoConflict") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "stderr closed before the anomaly was reported");
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

/// Streaming Chronos (`--chronos-stream always`) prints what the whole-history check
/// prints (`never`), text and JSON, on valid and injected `isocert gen` histories, and
/// gives the same error for malformed input and a repeated id.
#[test]
fn streaming_chronos_prints_what_the_whole_history_check_prints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let p = path.to_str().unwrap();
    let gen = |extra: &[&str]| {
        let mut args =
            vec!["gen", "--txns", "3000", "--sessions", "6", "--keys", "15", "--seed", "7", "--out", p];
        args.extend_from_slice(extra);
        let out = isocert(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let both = |what: &str, extra: &[&str]| {
        let run = |mode: &str, chunk: &str| {
            let mut args =
                vec!["check", "--checker", "chronos", "--chronos-stream", mode, "--chronos-chunk", chunk];
            args.extend_from_slice(extra);
            args.push(p);
            isocert(&args)
        };
        let whole = run("never", "8388608");
        // One chunk, then chunks of a few hundred or thousand transactions read on both cores.
        let mut code = None;
        for chunk in ["8388608", "200000", "31337"] {
            let streamed = run("always", chunk);
            let what = format!("{what}, chunks of {chunk} bytes");
            assert_eq!(streamed.status.code(), whole.status.code(), "{what}");
            assert_eq!(
                String::from_utf8_lossy(&streamed.stdout),
                String::from_utf8_lossy(&whole.stdout),
                "{what}"
            );
            let err = |o: &Output| {
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .filter(|l| l.contains("rror"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(err(&streamed), err(&whole), "{what}");
            code = streamed.status.code();
        }
        code
    };
    let mut rejected = 0;
    for model in ["kv", "list-append"] {
        for inject in ["", "lost-update", "write-skew", "ext", "no-conflict", "session", "int"] {
            if model == "list-append" && !inject.is_empty() {
                continue; // `isocert gen` injects into kv histories only
            }
            let mut args = vec!["--model", model, "--isolation", "si"];
            if !inject.is_empty() {
                args.extend(["--inject", inject]);
            }
            gen(&args);
            for level in ["si", "ser"] {
                for json in [false, true] {
                    let mut extra = vec!["-i", level];
                    if json {
                        extra.push("--json");
                    }
                    rejected += usize::from(both(&format!("{model} {inject} {level}"), &extra) == Some(1));
                }
            }
        }
    }
    assert!(rejected >= 20, "{rejected} rejections: the injections must be found");
    // Malformed input and a repeated id: the whole-history errors.
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap().to_string();
    std::fs::write(&path, format!("{text}{last}\n")).unwrap();
    assert_eq!(both("repeated id", &["-i", "si"]), Some(2));
    std::fs::write(&path, format!("{text}{{\"id\":\"x\",\"session\":1,\"ops\":[}}\n")).unwrap();
    assert_eq!(both("malformed", &["-i", "si"]), Some(2));
    // A malformed line in the middle, with chunks after it read on the other thread: the
    // error names the file's line, not the chunk's.
    let lines: Vec<&str> = text.lines().collect();
    let middle = lines.len() / 2;
    let broken = format!(
        "{}\n{{\"id\":\"x\",\"session\":1,\"ops\":[}}\n{}\n",
        lines[..middle].join("\n"),
        lines[middle..].join("\n")
    );
    std::fs::write(&path, broken).unwrap();
    assert_eq!(both("malformed in the middle", &["-i", "si"]), Some(2));
    let out = isocert(&[
        "check",
        "--checker",
        "chronos",
        "--chronos-stream",
        "always",
        "--chronos-chunk",
        "31337",
        "-i",
        "si",
        p,
    ]);
    let line = format!("line {}", middle + 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&line), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A history whose header says its timestamps are not its serial order
/// (`"serial_order":"unknown"`, what PostgreSQL's recovery writes, for SSI): at
/// serializability a violation of commit order is no anomaly, so write skew is
/// uncertified (exit 2, never 1), an `int` anomaly stays one, a valid history stays valid,
/// and snapshot isolation is judged as before. The near twin without the field is the
/// test above (write skew: exit 1 at ser).
#[test]
fn commit_order_findings_are_uncertified_where_the_header_disowns_commit_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let p = path.to_str().unwrap();
    let gen = |extra: &[&str]| {
        generate(p, extra);
        let text = std::fs::read_to_string(&path).unwrap();
        let text = match text.strip_prefix(r#"{"format""#) {
            Some(rest) => format!(r#"{{"serial_order":"unknown","format"{rest}"#),
            None => format!(
                "{{\"format\":\"isocert-history\",\"version\":1,\"serial_order\":\"unknown\"}}\n{text}"
            ),
        };
        std::fs::write(&path, text).unwrap();
    };
    let check = |checker: &str, level: &str, extra: &[&str]| {
        let mut args = vec!["check", "--checker", checker, "-i", level, p];
        args.extend_from_slice(extra);
        isocert(&args)
    };
    let streamed: &[&str] = &["--chronos-stream", "always"];
    for (inject, at_ser) in [(None, 0), (Some("write-skew"), 2), (Some("ext"), 2), (Some("int"), 1)] {
        match inject {
            Some(i) => gen(&["--isolation", "si", "--inject", i]),
            None => gen(&["--isolation", "ser"]),
        }
        for (checker, extra) in [("chronos", &[][..]), ("chronos", streamed), ("aion", &[][..])] {
            let out = check(checker, "ser", extra);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(at_ser), "{inject:?} at ser by {checker} {extra:?}: {stderr}");
            if at_ser == 2 {
                assert!(
                    stderr.contains("uncertified")
                        && stderr.contains("not serializable in commit-timestamp order"),
                    "{stderr}"
                );
            }
        }
        let at_si = if inject.is_some_and(|i| i != "write-skew") { 1 } else { 0 };
        assert_eq!(check("chronos", "si", &[]).status.code(), Some(at_si), "{inject:?} at si");
    }
    // The Chronos format has no place for the field: converting says what is lost.
    let tk = dir.path().join("tk.json");
    let out = isocert(&["convert", "--from", "v1", "--to", "chronos", p, tk.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("serial_order is unknown") && stderr.contains("no place for it"), "{stderr}");
    generate(p, &["--isolation", "ser"]);
    let out = isocert(&["convert", "--from", "v1", "--to", "chronos", "--force", p, tk.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("serial_order"), "the near twin loses nothing");
}

/// The timestamps of a history recorded by a client that could not read them come from the
/// certificate `isocert serve` answers (its `transactions`), and with them whether they are
/// the serial order (its `serial_order`, docs/FORMAT.md): a PostgreSQL certificate says
/// `unknown`, so write skew found by commit order alone is uncertified (exit 2), by Chronos
/// with and without session order and by Aion. The near twins, the same certificate without
/// the field or with `commit_ts`, are an anomaly (exit 1).
#[test]
fn a_certificate_s_serial_order_governs_the_timestamps_it_supplies() {
    let dir = tempfile::tempdir().unwrap();
    let generated = dir.path().join("g.jsonl");
    generate(generated.to_str().unwrap(), &["--isolation", "si", "--inject", "write-skew"]);
    let mut history = String::new();
    let mut facts = Vec::new();
    for line in std::fs::read_to_string(&generated).unwrap().lines() {
        let mut txn: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
        if txn.contains_key("id") {
            let mut fact = serde_json::Map::new();
            fact.insert("txn".into(), txn["id"].clone());
            for field in ["start_ts", "commit_ts"] {
                if let Some(ts) = txn.remove(field) {
                    fact.insert(field.into(), ts);
                }
            }
            facts.push(serde_json::Value::Object(fact));
        }
        history.push_str(&serde_json::Value::Object(txn).to_string());
        history.push('\n');
    }
    assert!(!history.contains("commit_ts"), "the client recorded no timestamps");
    let path = dir.path().join("h.jsonl");
    std::fs::write(&path, history).unwrap();
    let check_with = |serial_order: Option<&str>, checker: &str, session_order: bool| {
        let mut cert =
            serde_json::json!({"format": "isocert-certificate", "version": 1, "transactions": facts});
        if let Some(order) = serial_order {
            cert["serial_order"] = order.into();
        }
        let cert_path = dir.path().join("c.json");
        std::fs::write(&cert_path, cert.to_string()).unwrap();
        let mut args = vec!["check", "--checker", checker, "-i", "ser", "--certificate"];
        args.extend([cert_path.to_str().unwrap(), path.to_str().unwrap()]);
        if !session_order {
            args.push("--no-session-order");
        }
        isocert(&args)
    };
    for (checker, session_order) in [("chronos", true), ("chronos", false), ("aion", true)] {
        let out = check_with(Some("unknown"), checker, session_order);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{checker}, session order {session_order}: {stderr}");
        assert!(
            stderr.contains("uncertified") && stderr.contains("not serializable in commit-timestamp order"),
            "{stderr}"
        );
        for twin in [None, Some("commit_ts")] {
            let out = check_with(twin, checker, session_order);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{twin:?}, {checker}, session order {session_order}: {stderr}"
            );
        }
    }
    // Streaming is asked for but cannot be had: refused by name, not silently dropped.
    let cert_path = dir.path().join("c.json");
    let out = isocert(&[
        "check",
        "--checker",
        "chronos",
        "-i",
        "ser",
        "--chronos-stream",
        "always",
        "--certificate",
        cert_path.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--certificate") && stderr.contains("--chronos-stream always"), "{stderr}");
}
