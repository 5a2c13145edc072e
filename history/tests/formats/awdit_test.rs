//! AWDIT's test-suite text (`r KEY VALUE`, `-----`, `=====`).

use isocert_history::formats::Format;
use isocert_history::{FormatError, Op, Scalar, Value};

use super::{assert_round_trip, error_of, read_fixture};

#[test]
fn fractured_read_fixture_reads_sessions_transactions_and_no_initial_state() {
    let h = read_fixture(Format::AwditTest, "awdit-test-fractured.txt").history;
    assert_eq!(h.txns.len(), 3);
    assert_eq!(h.session_count(), 3);
    let names: Vec<_> = h.txns.iter().map(|t| (t.name.clone(), h.session_name(t.session).clone())).collect();
    assert_eq!(
        names,
        [(0, 0), (1, 1), (2, 2)].map(|(t, s)| (Scalar::Int(t), Scalar::Int(s))),
        "transactions and sessions numbered in file order"
    );
    let Op::Read { obj, value } = h.txns[2].ops[1] else { panic!("expected a read") };
    assert_eq!(h.object(obj).key, Scalar::Int(1));
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(0)));
    assert!(h.initial.is_empty(), "the format has no initial state: 0 is what transaction 0 wrote");
}

#[test]
fn separators_and_blank_lines_are_skipped_as_awdit_skips_them() {
    let text = "w 0 1\n---\n---\n\n===\n===\nr 0 1\n";
    let h = isocert_history::formats::read_awdit_test(text.as_bytes()).unwrap().history;
    assert_eq!(h.txns.len(), 2, "empty transactions are not transactions");
    assert_eq!(h.session_count(), 2, "an empty session is not a session");
    assert_eq!(h.session_name(h.txns[1].session), &Scalar::Int(1));
}

#[test]
fn round_trip_is_identity() {
    assert_round_trip(
        r#"{"format":"isocert-history","version":1}
{"id":0,"session":0,"ops":[{"f":"w","key":0,"value":0},{"f":"w","key":1,"value":0}]}
{"id":1,"session":0,"ops":[{"f":"r","key":0,"value":0},{"f":"w","key":1,"value":5}]}
{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":5},{"f":"r","key":0,"value":0}]}
"#,
        Format::AwditTest,
    );
}

#[test]
fn malformed_lines_name_line_and_field() {
    for (text, line, field) in [
        ("w 1 2\nr 1 x\n", 2, "value"),
        ("w 1\n", 1, "value"),
        ("q 1 2\n", 1, "op"),
        ("w -1 2\n", 1, "key"),
        ("r 1 2 3\n", 1, "op"),
        ("w(1,2,3,4)\n", 1, "op"),
        ("w 1 2\n--=--\n", 2, "op"),
    ] {
        let (err, message) = error_of(Format::AwditTest, "bad.txt", text.as_bytes());
        let FormatError::InFile { error, .. } = err else { panic!("{message}") };
        assert!(
            matches!(*error, FormatError::Invalid { line: l, field: ref f, .. } if l == line && f == field),
            "{text:?}: {message}"
        );
    }
}

#[test]
fn what_the_format_cannot_carry_is_refused_by_name() {
    for (text, says) in [
        (r#"{"id":1,"session":0,"ops":[{"f":"append","key":1,"value":2}]}"#, "T1, ops[0]"),
        (r#"{"id":1,"session":0,"status":"aborted","ops":[{"f":"w","key":1,"value":2}]}"#, "not committed"),
        (r#"{"id":1,"session":0,"ops":[{"f":"r","key":1,"value":null}]}"#, "absent object"),
    ] {
        let h = super::v1_history(text);
        let err = Format::AwditTest.write(&h, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, FormatError::Unsupported { .. }) && err.to_string().contains(says), "{err}");
    }
    let h = super::v1_history(
        "{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"key\":0,\"value\":0}]}\n\
         {\"id\":1,\"session\":0,\"ops\":[{\"f\":\"r\",\"key\":0,\"value\":0}]}",
    );
    let err = Format::AwditTest.write(&h, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("initial value"), "{err}");
}
