//! Malformed histories: every error names its line and field, none panics.

use isocert_history::{v1, FormatError};

fn error_of(text: &str) -> String {
    match v1::read_history(text.as_bytes()) {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_error(text: &str, line: usize, needles: &[&str]) {
    let message = error_of(text);
    assert!(message.starts_with(&format!("line {line}:")), "{message}");
    for needle in needles {
        assert!(message.contains(needle), "{message:?} should mention {needle:?}");
    }
}

const OK: &str = r#"{"id":1,"session":0,"ops":[]}"#;

#[test]
fn unknown_fields_are_rejected_with_their_name() {
    assert_error(&format!("{OK}\n{{\"id\":2,\"session\":0,\"ops\":[],\"colour\":1}}"), 2, &["colour"]);
    assert_error(r#"{"id":2,"session":0,"ops":[{"f":"r","key":1,"value":1,"extra":true}]}"#, 1, &["extra"]);
    assert_error(r#"{"format":"isocert-history","version":1,"inital":[]}"#, 1, &["inital"]);
}

#[test]
fn broken_json_names_the_line_and_column() {
    let second = OK.replace("\"id\":1", "\"id\":2");
    assert_error(&format!("{OK}\n{second}\n{{\"id\":3,"), 3, &["column"]);
    assert_error("[1,2]", 1, &["expected a JSON object"]);
}

#[test]
fn missing_required_fields() {
    assert_error(r#"{"session":0,"ops":[]}"#, 1, &["id"]);
    assert_error(r#"{"id":1,"ops":[]}"#, 1, &["session"]);
    assert_error(r#"{"id":1,"session":0}"#, 1, &["ops"]);
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"r","key":1}]}"#, 1, &["ops[0].value", "missing"]);
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"w","value":1}]}"#, 1, &["ops[0].key", "missing"]);
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"t","rows":[]}]}"#,
        1,
        &["ops[0].where"],
    );
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"update","table":"t","where":"a=1","rows":[]}]}"#,
        1,
        &["set"],
    );
}

#[test]
fn bad_values_and_types() {
    assert_error(r#"{"id":1.5,"session":0,"ops":[]}"#, 1, &["id", "float"]);
    assert_error(r#"{"id":1,"session":[0],"ops":[]}"#, 1, &["session", "array"]);
    assert_error(r#"{"id":1,"session":0,"status":"done","ops":[]}"#, 1, &["status", "done"]);
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"x","key":1,"value":1}]}"#, 1, &["ops[0].f", "\"x\""]);
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":{"a":1}}]}"#,
        1,
        &["kv holds scalars"],
    );
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"t","key":1,"value":4}]}"#,
        1,
        &["ops[0].value", "object of columns"],
    );
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":[1]}]}"#, 1, &["append"]);
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"append","key":1,"value":null}]}"#, 1, &["null"]);
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":18446744073709551615}]}"#,
        1,
        &["64-bit"],
    );
    assert_error(r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":1,"where":"a"}]}"#, 1, &["where"]);
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"t","where":"a=1","rows":[{"key":1,"value":{"a":1}},{"key":1,"value":{"a":1}}]}]}"#,
        1,
        &["twice"],
    );
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"aggregate","table":"t","where":"a=1","function":"avg","column":"a","result":1}]}"#,
        1,
        &["avg"],
    );
}

#[test]
fn bad_timestamps() {
    assert_error(r#"{"id":1,"session":0,"start_ts":-1,"ops":[]}"#, 1, &["start_ts"]);
    assert_error(r#"{"id":1,"session":0,"commit_ts":"12.x","ops":[]}"#, 1, &["commit_ts", "logical"]);
    assert_error(r#"{"id":1,"session":0,"commit_ts":{"p":1},"ops":[]}"#, 1, &["commit_ts", "\"l\""]);
    assert_error(r#"{"id":1,"session":0,"commit_ts":{"p":1,"l":0,"q":2},"ops":[]}"#, 1, &["\"q\""]);
}

#[test]
fn duplicate_transaction_ids() {
    assert_error(&format!("{OK}\n{OK}"), 2, &["id", "twice"]);
}

#[test]
fn bad_headers() {
    assert_error(r#"{"format":"other","version":1}"#, 1, &["format"]);
    assert_error(r#"{"format":"isocert-history","version":2}"#, 1, &["version", "2"]);
    assert_error(r#"{"format":"isocert-history","version":1,"dialect":"oracle"}"#, 1, &["dialect"]);
    assert_error(
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":0},{"key":1,"value":1}]}"#,
        1,
        &["initial[1].key", "twice"],
    );
}

#[test]
fn errors_are_structured() {
    let err = v1::read_history(r#"{"id":1,"session":0,"status":"done","ops":[]}"#.as_bytes()).unwrap_err();
    match err {
        FormatError::Invalid { line, field, .. } => assert_eq!((line, field.as_str()), (1, "status")),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn bad_real_times() {
    assert_error(r#"{"id":1,"session":0,"invoked_at":5,"ops":[]}"#, 1, &["completed_at", "missing"]);
    assert_error(r#"{"id":1,"session":0,"completed_at":5,"ops":[]}"#, 1, &["invoked_at", "missing"]);
    assert_error(
        r#"{"id":1,"session":0,"invoked_at":"5","completed_at":6,"ops":[]}"#,
        1,
        &["invoked_at", "integer"],
    );
    assert_error(
        r#"{"id":1,"session":0,"invoked_at":7,"completed_at":6,"ops":[]}"#,
        1,
        &["completed_at", "before"],
    );
}

/// Issue 47, item 4: a number that does not round-trip through a 64-bit float is refused by
/// every reader that takes JSON numbers, naming the line and field (it read as the nearest
/// float, and a read of a value nobody wrote passed as valid); ordinary floats and
/// integers at the edges of 64 bits still read.
#[test]
fn issue_47_numbers_that_do_not_round_trip_are_refused_by_every_reader() {
    for number in ["0.1000000000000000001", "9007199254740993.0", "1e-400", "-1e-400"] {
        let text = format!(
            "{OK}\n{{\"id\":2,\"session\":0,\"start_ts\":1,\"commit_ts\":2,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":{number}}}]}}\n"
        );
        assert_error(&text, 2, &["value", number, "does not round-trip", "write it as a string"]);
        let fast = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Keep).unwrap_err().to_string();
        assert!(fast.starts_with("line 2: value:") && fast.contains(number), "{fast}");
        let row = format!(
            "{{\"id\":1,\"session\":0,\"ops\":[{{\"f\":\"w\",\"table\":\"t\",\"key\":1,\"value\":{{\"c\":{number}}}}}]}}\n"
        );
        assert_error(&row, 1, &["c:", number]);
        let chronos = format!(
            "[{{\"tid\":1,\"sid\":1,\"sts\":{{\"p\":1,\"l\":0}},\"cts\":{{\"p\":2,\"l\":0}},\"ops\":[{{\"t\":\"w\",\"k\":\"x\",\"v\":{number}}}]}}]"
        );
        let err = isocert_history::chronos::read_chronos(chronos.as_bytes(), None).unwrap_err().to_string();
        assert!(err.contains(number) && err.contains("write it as a string"), "{err}");
        let elle =
            format!("{{\"type\":\"ok\",\"f\":\"txn\",\"process\":0,\"value\":[[\"w\",1,{number}]]}}\n");
        let err = isocert_history::formats::read_elle_json(elle.as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("line 1: value:") && err.contains(number), "{err}");
        let edn = format!("{{:type :ok, :f :txn, :process 0, :value [[:w 1 {number}]]}}\n");
        let err = isocert_history::formats::read_elle_edn(edn.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains(number), "{err}");
        let mut h = v1::read_history(OK.as_bytes()).unwrap();
        let cert = format!("{{\"version_order\":[{{\"key\":1,\"writers\":[1]}}],\n\"x\":{number}}}");
        let err = v1::read_certificate_bytes(cert.as_bytes(), &mut h).unwrap_err().to_string();
        assert!(err.starts_with("line 2: x:") && err.contains(number), "{err}");
    }
    let fine = format!(
        "{OK}\n{{\"id\":2,\"session\":0,\"ops\":[{{\"f\":\"w\",\"key\":1,\"value\":0.1}},{{\"f\":\"w\",\"key\":2,\"value\":9007199254740992.0}},\
         {{\"f\":\"w\",\"key\":3,\"value\":-9223372036854775808}},{{\"f\":\"w\",\"key\":4,\"value\":2.5e-3}},\
         {{\"f\":\"w\",\"key\":5,\"value\":5e-324}},{{\"f\":\"w\",\"key\":6,\"value\":-0.0}},{{\"f\":\"w\",\"key\":7,\"value\":\"1e-400\"}}]}}\n"
    );
    v1::read_history(fine.as_bytes()).unwrap();
    v1::read_history_bytes(fine.as_bytes(), v1::AdapterFacts::Keep).unwrap();
}

/// Issue 47, item 8: a NUL-filled file (or `/dev/zero`) in any line format is refused on
/// line 1 naming byte 0x00, and a UTF-8 byte order mark by name, instead of being read to
/// the memory limit or reported as `'ï'`.
#[test]
fn issue_47_nul_bytes_and_a_bom_are_named_in_every_text_format() {
    use isocert_history::formats::Format;
    let dir = tempfile::tempdir().unwrap();
    let nul = dir.path().join("zeros");
    std::fs::write(&nul, vec![0u8; 1 << 20]).unwrap();
    let bom = dir.path().join("bom");
    std::fs::write(&bom, b"\xEF\xBB\xBF{\"id\":1,\"session\":1,\"ops\":[]}\n").unwrap();
    for format in isocert_history::formats::ALL_FORMATS {
        if matches!(format, Format::DbcopBincode | Format::Cobra | Format::Viper) {
            continue; // binary, or directories of logs
        }
        let err = format.read_path(&nul).unwrap_err().to_string();
        assert!(err.contains("line 1: byte 0x00 (NUL)"), "{format}: {err}");
        let err = format.read_path(&bom).unwrap_err().to_string();
        assert!(err.contains("line 1: the file starts with a UTF-8 byte order mark"), "{format}: {err}");
    }
    for format in [Format::V1, Format::Chronos, Format::Plume, Format::Elle] {
        let err = isocert_history::open(&nul, format, v1::AdapterFacts::Keep, |f| f).unwrap_err();
        let chain =
            format!("{err}: {}", std::error::Error::source(&err).map_or(String::new(), |s| s.to_string()));
        assert!(chain.contains("line 1: byte 0x00 (NUL)"), "{format}: {chain}");
        let err = isocert_history::open_kv(&nul, format, 1).unwrap_err();
        let chain =
            format!("{err}: {}", std::error::Error::source(&err).map_or(String::new(), |s| s.to_string()));
        assert!(chain.contains("line 1: byte 0x00 (NUL)"), "{format} (key-value): {chain}");
    }
    let err = isocert_history::open(&nul, Format::Elle, v1::AdapterFacts::Keep, |f| f).unwrap_err();
    assert_eq!(err.to_string(), "reading an elle history");
    assert_eq!(Format::AwditTest.with_article(), "an awdit-test");
    assert_eq!(Format::Plume.with_article(), "a plume");
    if std::path::Path::new("/dev/zero").exists() {
        let zero = std::path::Path::new("/dev/zero");
        for format in [Format::V1, Format::Chronos] {
            let err = isocert_history::open_kv(zero, format, 1).unwrap_err();
            let chain = format!(
                "{err}: {}",
                std::error::Error::source(&err).map_or(String::new(), |s| s.to_string())
            );
            assert!(chain.contains("line 1: byte 0x00 (NUL)"), "{format}: {chain}");
        }
        let err = isocert_history::open(zero, Format::V1, v1::AdapterFacts::Keep, |f| f).unwrap_err();
        let chain =
            format!("{err}: {}", std::error::Error::source(&err).map_or(String::new(), |s| s.to_string()));
        assert!(chain.contains("line 1: byte 0x00 (NUL)"), "{chain}");
    }
}

#[test]
fn bad_expression_assignments_and_promises_name_the_line_and_field() {
    let update = |set: &str, extra: &str| {
        format!(
            r#"{OK}
{{"id":2,"session":0,"ops":[{{"f":"update","table":"t","where":"id = 1","set":{set}{extra},"rows":[]}}]}}"#
        )
    };
    assert_error(&update(r#"{"n":{"expr":""}}"#, ""), 2, &["set", "column n", "empty expression"]);
    assert_error(&update(r#"{"n":{"expr":3}}"#, ""), 2, &["set", "column n", "SQL text"]);
    assert_error(&update(r#"{"n":{"sql":"n + 1"}}"#, ""), 2, &["set", "column n", "expr"]);
    assert_error(&update(r#"{"n":1}"#, r#","excluded":{"n":2}"#), 2, &["excluded", "expression"]);
    assert_error(
        &update(r#"{"n":{"expr":"n + excluded.n"}}"#, r#","excluded":null"#),
        2,
        &["excluded", "null"],
    );
    assert_error(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":1,"excluded":{"n":1}}]}"#,
        1,
        &["excluded"],
    );
    let header = |p: &str| format!(r#"{{"format":"isocert-history","version":1,"promises":{p}}}"#);
    assert_error(
        &header(r#"{"database":"PostgreSQL","statements":["fast"]}"#),
        1,
        &["promises.statements[0]", "fast"],
    );
    assert_error(&header(r#"{"statements":[]}"#), 1, &["promises.database", "missing"]);
    assert_error(&header(r#"{"database":"x","statements":[],"level":1}"#), 1, &["promises.level"]);
    assert_error(
        &header(r#"{"database":"x","statements":["one-snapshot","one-snapshot"]}"#),
        1,
        &["promises.statements[1]", "twice"],
    );
}
