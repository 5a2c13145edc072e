//! PolySI / Plume / AWDIT text.

use isocert_history::formats::Format;
use isocert_history::{FormatError, Op, Scalar, Status, Value};

use super::{assert_round_trip, error_of, read_fixture};

#[test]
fn long_fork_fixture_reads_sessions_transactions_and_initial_zero() {
    let h = read_fixture(Format::Plume, "plume-long-fork.txt").history;
    assert_eq!(h.txns.len(), 5);
    assert_eq!(h.session_count(), 5, "sessions 1..4 and the aborted writes' session 5");
    let t3 = &h.txns[2];
    assert_eq!(t3.name, Scalar::Int(3));
    assert_eq!(h.session_name(t3.session), &Scalar::Int(3));
    let Op::Read { obj, value } = t3.ops[1] else { panic!("expected a read") };
    assert_eq!(h.object(obj).key, Scalar::Int(1));
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(0)));
    assert!(h.initial.iter().any(|(o, v)| *o == obj && h.value(*v) == &Value::Scalar(Scalar::Int(0))));
    let aborted = &h.txns[4];
    assert_eq!((aborted.name.clone(), aborted.status), (Scalar::Int(-1), Status::Aborted));
    assert_eq!(h.initial.len(), 2, "every key starts at 0");
}

#[test]
fn round_trip_is_identity() {
    assert_round_trip(
        r#"{"format":"isocert-history","version":1,"initial":[{"key":0,"value":0},{"key":1,"value":0}]}
{"id":1,"session":1,"ops":[{"f":"w","key":0,"value":1},{"f":"r","key":1,"value":0}]}
{"id":2,"session":2,"ops":[{"f":"r","key":0,"value":1},{"f":"w","key":1,"value":5}]}
{"id":3,"session":1,"ops":[{"f":"r","key":1,"value":5}]}
{"id":-1,"session":2,"status":"aborted","ops":[{"f":"w","key":0,"value":9}]}
"#,
        Format::Plume,
    );
}

#[test]
fn malformed_lines_name_line_and_field() {
    for (text, line, field) in [
        ("w(1,2,3,4)\nr(1,x,3,4)\n", 2, "value"),
        ("w(1,2,3)\n", 1, "txn"),
        ("q(1,2,3,4)\n", 1, "op"),
        ("w(1,2,3,4)\nr(1,2,5,4)\n", 2, "session"),
        ("r(1,2,3,-1)\n", 1, "txn"),
        ("w(-1,2,3,4)\n", 1, "key"),
    ] {
        let (err, message) = error_of(Format::Plume, "bad.txt", text.as_bytes());
        let FormatError::InFile { error, .. } = err else { panic!("{message}") };
        assert!(
            matches!(*error, FormatError::Invalid { line: l, field: ref f, .. } if l == line && f == field),
            "{text:?}: {message}"
        );
    }
}

#[test]
fn what_plume_cannot_carry_is_refused_by_name() {
    let h = super::v1_history(r#"{"id":1,"session":0,"ops":[{"f":"append","key":1,"value":2}]}"#);
    let err = Format::Plume.write(&h, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(err, FormatError::Unsupported { .. }) && err.to_string().contains("T1, ops[0]"),
        "{err}"
    );
}

/// Issue 28: IsoVista's histories start with transaction 0 of session 0 writing 0 to every
/// key; it is the initial state, not a transaction that rewrites the initial value.
#[test]
fn isovista_explicit_initial_transaction_is_the_initial_state() {
    let imported = read_fixture(Format::Plume, "isovista-initial.txt");
    let h = &imported.history;
    assert_eq!(h.txns.len(), 3, "transactions 1, 2, 3; transaction 0 is the initial state");
    assert!(h.txns.iter().all(|t| t.name != Scalar::Int(0)));
    assert_eq!(h.initial.len(), 3, "keys 0, 1, 2 start at 0");
    assert!(
        imported.notes.iter().any(|n| n.contains("IsoVista's explicit initial transaction")),
        "{:?}",
        imported.notes
    );
    // Its near twin: a transaction 0 that also reads is a transaction like any other.
    let twin = "w(0,0,0,0)\nr(1,0,0,0)\nr(0,0,1,1)\n";
    let imported = isocert_history::formats::read_plume(twin.as_bytes()).expect("reads");
    assert_eq!(imported.history.txns.len(), 2);
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
}

/// Lines of transactions interleave (sessions write concurrently; AWDIT's aborted writes
/// share id -1 wherever they fall): each transaction gets its own lines in file order, in
/// the order transactions first appear, and the interning follows that order.
#[test]
fn interleaved_lines_are_grouped_by_transaction_in_file_order() {
    let text =
        "w(1,10,1,1)\nw(2,20,2,2)\nw(3,99,3,-1)\nr(2,20,1,1)\nr(1,10,2,2)\nw(1,11,1,1)\nw(4,98,2,-1)\n";
    let h = isocert_history::formats::read_plume(text.as_bytes()).expect("reads").history;
    let int_of = |value| match h.value(value) {
        Value::Scalar(Scalar::Int(v)) => *v,
        other => panic!("{other:?}"),
    };
    let shown: Vec<(Scalar, Vec<String>)> = h
        .txns
        .iter()
        .map(|t| {
            let ops = t
                .ops
                .iter()
                .map(|op| match *op {
                    Op::Read { obj, value } => format!("r{}={}", h.object(obj).key, int_of(value)),
                    Op::Write { obj, value } => format!("w{}={}", h.object(obj).key, int_of(value)),
                    ref other => panic!("{other:?}"),
                })
                .collect();
            (t.name.clone(), ops)
        })
        .collect();
    let int = Scalar::Int;
    assert_eq!(
        shown,
        vec![
            (int(1), vec!["w1=10".into(), "r2=20".into(), "w1=11".into()]),
            (int(2), vec!["w2=20".into(), "r1=10".into()]),
            (int(-1), vec!["w3=99".into(), "w4=98".into()]),
        ]
    );
    assert_eq!(h.txns[2].status, Status::Aborted);
    let keys: Vec<Scalar> =
        (0..h.object_count()).map(|i| h.object(isocert_history::ObjId(i as u32)).key.clone()).collect();
    assert_eq!(keys, vec![int(1), int(2), int(3), int(4)], "objects interned transaction by transaction");
}

/// Keys and values past 32 bits, after lines that fit (the reader widens its arrays then).
#[test]
fn keys_and_values_past_32_bits_are_read_whole() {
    let text = "w(1,10,1,1)\nw(5000000000,6000000000,1,2)\nr(5000000000,6000000000,2,3)\nr(1,10,2,3)\n";
    let h = isocert_history::formats::read_plume(text.as_bytes()).expect("reads").history;
    let Op::Read { obj, value } = h.txns[2].ops[0] else { panic!("expected a read") };
    assert_eq!(h.object(obj).key, Scalar::Int(5_000_000_000));
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(6_000_000_000)));
    let Op::Write { obj, value } = h.txns[0].ops[0] else { panic!("expected a write") };
    assert_eq!(
        (h.object(obj).key.clone(), h.value(value)),
        (Scalar::Int(1), &Value::Scalar(Scalar::Int(10)))
    );
    assert_eq!(h.txns[2].ops.len(), 2);
}
