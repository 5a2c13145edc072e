//! Cobra binary client logs.

use isocert_history::formats::{Format, COBRA_INIT_ID};
use isocert_history::{FormatError, Op, Scalar, Status, Value, ValueId};

use super::{assert_round_trip, error_of, read_fixture, v1_history};

#[test]
fn fixture_logs_become_sessions_with_write_ids_as_values() {
    let imported = read_fixture(Format::Cobra, "cobra");
    let h = &imported.history;
    let names: Vec<_> =
        h.txns.iter().map(|t| (t.name.clone(), h.session_name(t.session).clone(), t.status)).collect();
    assert_eq!(
        names,
        [
            (Scalar::Int(1), Scalar::Int(1), Status::Committed),
            (Scalar::Int(3), Scalar::Int(1), Status::Committed),
            (Scalar::Int(2), Scalar::Int(2), Status::Committed),
            (Scalar::Int(4), Scalar::Int(2), Status::Unknown),
        ]
    );
    let Op::Read { value, .. } = h.txns[0].ops[1] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(COBRA_INIT_ID)), "a read of the initial version");
    assert_eq!(h.initial.len(), 1);
    let Op::Read { value, .. } = h.txns[2].ops[0] else { panic!("expected a read") };
    assert_eq!(value, ValueId::ABSENT, "the null writer means the key did not exist");
    let Op::Read { value, .. } = h.txns[1].ops[0] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(201)));
    assert!(imported.notes.iter().any(|n| n.contains("no commit record")), "{:?}", imported.notes);
}

#[test]
fn round_trip_is_identity() {
    assert_round_trip(
        &format!(
            r#"{{"format":"isocert-history","version":1,"initial":[{{"key":8,"value":{COBRA_INIT_ID}}}]}}
{{"id":1,"session":1,"ops":[{{"f":"w","key":7,"value":101}},{{"f":"r","key":8,"value":{COBRA_INIT_ID}}}]}}
{{"id":3,"session":1,"ops":[{{"f":"r","key":8,"value":201}}]}}
{{"id":2,"session":2,"ops":[{{"f":"r","key":9,"value":null}},{{"f":"w","key":8,"value":201}}]}}
{{"id":4,"session":2,"status":"unknown","ops":[{{"f":"r","key":7,"value":101}}]}}
"#
        ),
        Format::Cobra,
    );
}

#[test]
fn malformed_records_name_file_offset_and_field() {
    let mut log = vec![b'S'];
    log.extend_from_slice(&5i64.to_be_bytes());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        ([&log[..], b"X"].concat(), "byte offset 9: record: unknown record type 'X'"),
        ([&log[..], b"W\0\0"].concat(), "byte offset 9: W record: file ends inside the record"),
        (
            [&log[..], b"C", &6i64.to_be_bytes()[..]].concat(),
            "byte offset 9: C.txn_id: commits 6 but transaction 5 is open",
        ),
        (
            [&log[..], &log[..]].concat(),
            "byte offset 9: S.txn_id: transaction 5 started at byte 0 has no commit",
        ),
        ([&b"R"[..], &[0u8; 32][..]].concat(), "byte offset 0: R: read outside a transaction"),
    ];
    for (bytes, expected) in cases {
        let (err, message) = error_of(Format::Cobra, "T1.log", &bytes);
        assert!(
            matches!(err, FormatError::InFile { ref error, .. } if matches!(**error, FormatError::Binary { .. })),
            "{message}"
        );
        assert!(message.contains(expected), "expected {expected:?} in: {message}");
    }
}

#[test]
fn aborted_transactions_and_unwritten_reads_are_refused_by_name() {
    let h = v1_history(r#"{"id":1,"session":1,"status":"aborted","ops":[]}"#);
    let dir = tempfile::tempdir().unwrap();
    let err = Format::Cobra.write_path(&h, dir.path()).unwrap_err();
    assert!(err.to_string().contains("T1: aborted"), "{err}");
    let h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"r","key":1,"value":5}]}"#);
    let err = Format::Cobra.write_path(&h, dir.path()).unwrap_err();
    assert!(err.to_string().contains("T1, ops[0]: reads a value no transaction wrote"), "{err}");
}
