//! dbcop JSON, `.hist` text and legacy bincode.

use isocert_history::formats::{read_dbcop_bincode, Format};
use isocert_history::{FormatError, Op, Scalar, Status, Value, ValueId};

use super::{assert_round_trip, error_of, read_fixture, round_trip, v1_history, v1_text};

/// dbcop histories name sessions 1.. and transactions 1.. in session order.
const DBCOP_SHAPED: &str = r#"{"format":"isocert-history","version":1,"initial":[{"key":0,"value":0}]}
{"id":1,"session":1,"ops":[{"f":"r","key":0,"value":0},{"f":"w","key":0,"value":1},{"f":"r","key":7,"value":null}]}
{"id":2,"session":1,"status":"aborted","ops":[{"f":"w","key":7,"value":3}]}
{"id":3,"session":2,"ops":[{"f":"r","key":0,"value":1},{"f":"w","key":7,"value":4}]}
"#;

#[test]
fn documented_write_skew_reads_as_three_transactions() {
    let h = read_fixture(Format::DbcopJson, "dbcop-write-skew.json").history;
    assert_eq!(h.txns.len(), 3);
    assert_eq!(h.session_count(), 2);
    let t3 = &h.txns[2];
    assert_eq!((t3.name.clone(), h.session_name(t3.session).clone()), (Scalar::Int(3), Scalar::Int(2)));
    let Op::Read { value, .. } = t3.ops[0] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(1)));
    assert!(h.initial.is_empty(), "nothing reads version 0");
}

#[test]
fn standalone_document_compact_events_version_zero_and_uncommitted() {
    let h = read_fixture(Format::DbcopJson, "dbcop-standalone.json").history;
    assert_eq!(h.txns.len(), 3);
    assert_eq!(h.txns[1].status, Status::Aborted);
    assert_eq!(h.initial.len(), 1, "variable 0 is read at version 0 and never written 0");
    let Op::Read { value, .. } = h.txns[1].ops[0] else { panic!("expected a read") };
    assert_eq!(value, ValueId::ABSENT, "version null of a variable with no initial read is absent");
}

#[test]
fn hist_text_matches_the_json_example() {
    let text = read_fixture(Format::DbcopText, "dbcop-write-skew.hist").history;
    assert_eq!(text.txns.len(), 4);
    assert_eq!(text.txns[3].status, Status::Aborted, "a trailing ! is uncommitted");
    let Op::Read { obj, value } = text.txns[3].ops[0] else { panic!("expected a read") };
    assert_eq!((h_key(&text, obj), value), (Scalar::Text("z".into()), ValueId::ABSENT));
    let json = read_fixture(Format::DbcopJson, "dbcop-write-skew.json").history;
    for (a, b) in text.txns.iter().zip(&json.txns).take(3) {
        assert_eq!(a.ops.len(), b.ops.len());
        assert_eq!(a.session, b.session);
    }
}

fn h_key(h: &isocert_history::History, obj: isocert_history::ObjId) -> Scalar {
    h.object(obj).key.clone()
}

#[test]
fn json_hist_and_bincode_round_trip() {
    assert_round_trip(DBCOP_SHAPED, Format::DbcopJson);
    assert_round_trip(DBCOP_SHAPED, Format::DbcopText);
    assert_round_trip(
        DBCOP_SHAPED.replace(r#",{"f":"r","key":7,"value":null}"#, "").as_str(),
        Format::DbcopBincode,
    );
}

#[test]
fn hist_keeps_text_variables() {
    assert_round_trip(
        r#"{"id":1,"session":1,"ops":[{"f":"w","key":"balance","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"balance","value":1},{"f":"r","key":"other","value":null}]}
"#,
        Format::DbcopText,
    );
}

#[test]
fn bincode_layout_is_the_legacy_one() {
    let h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"w","key":3,"value":9}]}"#);
    let mut bytes = Vec::new();
    Format::DbcopBincode.write(&h, &mut bytes).unwrap();
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
    assert_eq!(
        (word(8), word(16), word(24), word(32)),
        (1, 1, 1, 1),
        "nodes, variables, transactions, events"
    );
    let mut expected = Vec::new();
    for n in [1u64, 1, 1] {
        expected.extend_from_slice(&n.to_le_bytes());
    }
    expected.push(1);
    expected.extend_from_slice(&3u64.to_le_bytes());
    expected.extend_from_slice(&9u64.to_le_bytes());
    expected.extend_from_slice(&[1, 1]);
    let tail = &bytes[bytes.len() - expected.len()..];
    assert_eq!(tail, &expected[..], "sessions=1, txns=1, events=1, (write, 3, 9, ok), committed");
    let back = read_dbcop_bincode(&bytes[..]).unwrap().history;
    assert_eq!(v1_text(&back).lines().last(), v1_text(&h).lines().last());
}

#[test]
fn bincode_failed_events_are_counted_not_lost_silently() {
    let h =
        v1_history(r#"{"id":1,"session":1,"ops":[{"f":"w","key":3,"value":9},{"f":"w","key":4,"value":1}]}"#);
    let mut bytes = Vec::new();
    Format::DbcopBincode.write(&h, &mut bytes).unwrap();
    let last_event_success = bytes.len() - 2;
    bytes[last_event_success] = 0;
    let imported = read_dbcop_bincode(&bytes[..]).unwrap();
    assert_eq!(imported.history.txns[0].ops.len(), 1);
    assert!(imported.notes[0].contains("1 events"), "{:?}", imported.notes);
}

#[test]
fn truncated_bincode_names_offset_and_field() {
    let h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"w","key":3,"value":9}]}"#);
    let mut bytes = Vec::new();
    Format::DbcopBincode.write(&h, &mut bytes).unwrap();
    for cut in [3, 50, bytes.len() - 5, bytes.len() - 1] {
        let (err, message) = error_of(Format::DbcopBincode, "history.bincode", &bytes[..cut]);
        let FormatError::InFile { error, .. } = err else { panic!("{message}") };
        assert!(matches!(*error, FormatError::Binary { .. }), "cut at {cut}: {message}");
        assert!(message.contains("byte offset"), "{message}");
    }
    let mut huge = bytes.clone();
    huge[bytes.len() - 43..bytes.len() - 35].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_, message) = error_of(Format::DbcopBincode, "history.bincode", &huge);
    assert!(message.contains("data.len") && message.contains("cannot fit"), "{message}");
}

#[test]
fn malformed_json_and_hist_name_the_place() {
    let (_, m) = error_of(
        Format::DbcopJson,
        "h.json",
        b"[[{\"events\":[{\"Read\":{\"variable\":0}}],\n\"committed\":tru}]]",
    );
    assert!(m.contains("line 2"), "{m}");
    let (_, m) = error_of(Format::DbcopJson, "h.json", br#"[[{"events":[["x",0,1]],"committed":true}]]"#);
    assert!(m.contains("data[0][0].events[0]") && m.contains("\"x\""), "{m}");
    let (_, m) = error_of(Format::DbcopText, "h.hist", b"[x:=1]\n---\n[y==1 x:=]\n");
    assert!(m.contains("line 3") && m.contains("column 7") && m.contains("x:="), "{m}");
    let (_, m) = error_of(Format::DbcopText, "h.hist", b"[x:=1\n");
    assert!(m.contains("line 1") && m.contains("closing"), "{m}");
}

#[test]
fn deletes_and_unknown_status_are_refused_by_name() {
    let h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"w","key":3,"value":null}]}"#);
    let err = Format::DbcopJson.write(&h, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("T1, ops[0]"), "{err}");
    let h = v1_history(r#"{"id":1,"session":1,"status":"unknown","ops":[]}"#);
    assert!(Format::DbcopText.write(&h, &mut Vec::new()).unwrap_err().to_string().contains("unknown"));
    let back = round_trip(&v1_history(DBCOP_SHAPED), Format::DbcopJson);
    assert!(back.notes.is_empty());
}
