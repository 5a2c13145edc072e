//! Viper `J*.log` session logs.

use isocert_history::formats::Format;
use isocert_history::{FormatError, Op, Scalar, Value};

use super::{assert_round_trip, error_of, read_fixture, v1_history};

#[test]
fn fixture_reads_initial_state_inserts_deletes_and_ranges() {
    let imported = read_fixture(Format::Viper, "viper");
    let h = &imported.history;
    assert_eq!(h.initial.len(), 3, "ids 1, 2 and the dead 5");
    assert_eq!(h.txns.len(), 3);
    let t1 = &h.txns[0];
    assert_eq!(t1.ops.len(), 4, "r, w, and the insert's read and write");
    assert_eq!(t1.meta().unwrap()["viper"]["postCommitTS"], 13);
    let row = |v| match h.value(v) {
        Value::Row(r) => r.columns().to_vec(),
        other => panic!("not a row: {other:?}"),
    };
    let Op::Read { value, .. } = t1.ops[2] else { panic!("expected the insert's read") };
    assert_eq!(row(value), [Scalar::Int(5), Scalar::Int(50), Scalar::Bool(true)]);
    let t2 = &h.txns[1];
    assert_eq!(t2.ops.len(), 2, "the delete's read and tombstone; the failed write is left out");
    let Op::Write { value, .. } = t2.ops[1] else { panic!("expected the tombstone") };
    assert_eq!(row(value), [Scalar::Int(2), Scalar::Int(103), Scalar::Bool(true)]);
    assert!(imported.notes.iter().any(|n| n.contains("1 writes")), "{:?}", imported.notes);
    let Op::Select { predicate, rows } = &h.txns[2].ops[0] else { panic!("expected the range") };
    assert_eq!(&*h.predicate(*predicate).sql, "id >= 1 AND id <= 5");
    assert_eq!(rows.len(), 3, "two live rows and one dead");
}

#[test]
fn round_trip_is_identity() {
    assert_round_trip(
        r#"{"format":"isocert-history","version":1,"initial":[{"table":"viper","key":1,"value":{"id":1,"val":0,"dead":false}}]}
{"id":1,"session":1,"ops":[{"f":"r","table":"viper","key":1,"value":{"id":1,"val":0,"dead":false}},{"f":"w","table":"viper","key":1,"value":{"id":1,"val":7,"dead":true}},{"f":"w","table":"viper","key":2,"value":{"id":2,"val":8,"dead":false}}],"meta":{"viper":{"preBeginTS":1}}}
{"id":2,"session":2,"ops":[{"f":"select","table":"viper","where":"id >= 1","rows":[{"key":2,"value":{"id":2,"val":8,"dead":false}},{"key":1,"value":{"id":1,"val":7,"dead":true}}]},{"f":"r","table":"viper","key":3,"value":null},{"f":"select","table":"viper","where":"true","rows":[]}]}
"#,
        Format::Viper,
    );
}

#[test]
fn malformed_lines_name_file_line_and_field() {
    for (text, expected) in [
        (
            "{\"value\": [[\"r\", 1, 2, false]]}\n{\"value\": [[\"q\", 1]]}\n",
            "line 2: value[0][0]: unknown micro-op \"q\"",
        ),
        ("{\"value\": [[\"w\", 1, 2]]}\n", "line 1: value[0]: \"w\" needs 4 elements"),
        ("{\"value\": [[\"range\", 1, 2, [{\"val\": 1}], []]]}\n", "line 1: value[0][3][0]: missing id"),
        ("{\"other\": 1}\n", "line 1: value: missing"),
        ("{\"value\": [\n", "line 1"),
        (
            "{\"value\": [[\"w\", 1, 0, false]], \"isInitial\": true}\n{\"value\": [[\"w\", 2, 0, false]], \"isInitial\": true}\n",
            "line 2: isInitial: a second initial transaction (the first is at line 1 of log 3)",
        ),
    ] {
        let (err, message) = error_of(Format::Viper, "J3.log", text.as_bytes());
        assert!(matches!(err, FormatError::InFile { .. }), "{message}");
        assert!(message.contains(expected), "expected {expected:?} in: {message}");
    }
}

#[test]
fn other_tables_and_blind_deletes_are_refused_by_name() {
    let h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"w","key":1,"value":2}]}"#);
    let dir = tempfile::tempdir().unwrap();
    let err = Format::Viper.write_path(&h, dir.path()).unwrap_err();
    assert!(err.to_string().contains("T1, ops[0]: table kv"), "{err}");
}

#[test]
fn isovista_logs_with_success_in_the_dead_slot_read_as_live_rows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("J24.log"), "{\"value\":[[\"w\",1,5,true]]}\n").unwrap();
    std::fs::write(dir.path().join("J25.log"), "{\"value\":[[\"r\",1,5,true],[\"r\",2,7,true]]}\n").unwrap();
    let imported = Format::Viper.read_path(dir.path()).unwrap();
    let h = &imported.history;
    let (Op::Write { value: w, .. }, Op::Read { value: r, .. }) = (&h.txns[0].ops[0], &h.txns[1].ops[0])
    else {
        panic!("expected a write and a read")
    };
    assert_eq!(w, r, "the read sees the live row the write installed");
    assert!(imported.notes.iter().any(|n| n.contains("1 item reads")), "{:?}", imported.notes);
    let Op::Read { value, .. } = h.txns[1].ops[1] else { panic!("expected a read") };
    let Value::Row(row) = h.value(value) else { panic!("expected a row") };
    assert_eq!(row.columns()[2], Scalar::Bool(true), "no writer: the log's flag is kept");
}
