//! Reading then writing a v1 history gives back the same lines; interning is dense.

use isocert_history::{v1, AggregateFn, Dialect, Op, Scalar, Status, Timestamp, Value, ValueId};

const SAMPLE: &str = r#"{"format":"isocert-history","version":1,"dialect":"mysql","initial":[{"key":5,"value":0},{"table":"t","key":1,"value":{"c0":3,"c1":7,"id":1}}]}
{"id":1,"session":0,"start_ts":10,"commit_ts":"1700000000000000000.0000000001","ops":[{"f":"w","key":5,"value":1},{"f":"r","key":6,"value":null}],"meta":{"xid":731}}
{"id":"b","session":"s1","status":"aborted","ops":[{"f":"append","key":"l","value":3},{"f":"r","key":"l","value":[1,2,3]}]}
{"id":3,"session":0,"status":"unknown","start_ts":12,"ops":[{"f":"select","table":"t","where":"c0 between 1 and 5","rows":[{"key":1,"value":{"c0":3,"c1":7,"id":1}}],"meta":{"xmins":[1]}},{"f":"update","table":"t","where":"c0 = 3","set":{"c1":8},"rows":[{"key":1,"value":{"c0":3,"c1":8,"id":1}}]},{"f":"delete","table":"t","where":"c1 > 7","rows":[{"key":1}]},{"f":"aggregate","table":"t","where":"c0 > 0","function":"max","column":"c1","result":null},{"f":"aggregate","table":"t","where":"true","function":"count","result":0}]}
"#;

#[test]
fn sample_round_trips_byte_for_byte() {
    let h = v1::read_history(SAMPLE.as_bytes()).unwrap();
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), SAMPLE);
}

#[test]
fn sample_is_interned_as_the_spec_says() {
    let h = v1::read_history(SAMPLE.as_bytes()).unwrap();
    assert_eq!(h.dialect, Dialect::Mysql);
    assert_eq!(h.txns.len(), 3);
    assert_eq!(h.initial.len(), 2);
    assert_eq!(h.session_count(), 2, "sessions 0 and \"s1\"");

    let t1 = &h.txns[0];
    assert_eq!(t1.status, Status::Committed);
    assert_eq!(t1.start_ts(), Some(Timestamp::new(10)));
    assert_eq!(t1.commit_ts(), Some(Timestamp::hlc(1_700_000_000_000_000_000, 1)));
    assert_eq!(t1.meta(), Some(&serde_json::json!({"xid": 731})));
    let Op::Read { value, .. } = t1.ops[1] else { panic!("expected a read") };
    assert_eq!(value, ValueId::ABSENT);

    let t2 = &h.txns[1];
    assert_eq!(t2.name, Scalar::Text("b".into()));
    assert_eq!(t2.status, Status::Aborted);
    let Op::Read { value, .. } = t2.ops[1] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::List(vec![Scalar::Int(1), Scalar::Int(2), Scalar::Int(3)].into()));

    let t3 = &h.txns[2];
    assert_eq!(t3.status, Status::Unknown);
    assert!(t3.op_meta(0).is_some() && t3.op_meta(1).is_none());
    let Op::Aggregate { function, column, ref result, .. } = t3.ops[3] else {
        panic!("expected an aggregate")
    };
    assert_eq!((function, result), (AggregateFn::Max, &Scalar::Null));
    assert!(column.is_some());

    // The initial row and the row returned by the select are one interned value.
    let (_, initial_row) = h.initial[1];
    let Op::Select { ref rows, .. } = t3.ops[0] else { panic!("expected a select") };
    assert_eq!(rows[0].value, initial_row);
    assert_eq!(rows[0].obj, h.initial[1].0);
}

#[test]
fn ids_of_different_types_are_different_transactions() {
    let text = r#"{"id":17,"session":1,"ops":[]}
{"id":"17","session":1,"ops":[]}"#;
    let h = v1::read_history(text.as_bytes()).unwrap();
    assert_eq!(h.txns.len(), 2);
    assert_ne!(h.txn_by_name(&Scalar::Int(17)), h.txn_by_name(&Scalar::Text("17".into())));
}

#[test]
fn streaming_reader_yields_one_transaction_at_a_time() {
    let mut r = v1::HistoryReader::new(SAMPLE.as_bytes());
    let mut seen = Vec::new();
    while let Some(id) = r.next_txn().unwrap() {
        seen.push((id.index(), r.line()));
    }
    assert_eq!(seen, vec![(0, 2), (1, 3), (2, 4)]);
}

#[test]
fn blank_lines_are_skipped_and_header_is_optional() {
    let text = "\n{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":2.5}]}\n\n";
    let h = v1::read_history(text.as_bytes()).unwrap();
    let Op::Write { value, .. } = h.txns[0].ops[0] else { panic!("expected a write") };
    assert_eq!(h.value(value), &Value::Scalar(Scalar::Float(2.5)));
}

#[test]
fn the_dgraph_dialect_round_trips_and_unknown_dialects_name_the_choices() {
    let text = concat!(
        r#"{"format":"isocert-history","version":1,"dialect":"dgraph"}"#,
        "\n",
        r#"{"id":1,"session":0,"ops":[{"f":"select","table":"t","where":"ge(v, 3) AND lt(v, 9)","rows":[]}]}"#,
        "\n"
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    assert_eq!(h.dialect, Dialect::Dgraph);
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
    let e = v1::read_history(r#"{"format":"isocert-history","version":1,"dialect":"gql"}"#.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("dialect") && e.contains("dgraph"), "{e}");
}

#[test]
fn real_times_round_trip_and_the_fast_reader_accepts_them() {
    let text = r#"{"id":1,"session":0,"invoked_at":10,"completed_at":25,"ops":[{"f":"r","key":5,"value":null}]}
{"id":2,"session":1,"status":"unknown","invoked_at":12,"completed_at":9223372036854775807,"ops":[{"f":"w","key":5,"value":1}]}
"#;
    let h = v1::read_history(text.as_bytes()).unwrap();
    let rt = h.txns[0].real_time().unwrap();
    assert_eq!((rt.invoked_at, rt.completed_at), (10, 25));
    assert!(rt.precedes(&isocert_history::RealTime { invoked_at: 26, completed_at: 30 }));
    assert!(!rt.precedes(&isocert_history::RealTime { invoked_at: 25, completed_at: 30 }));
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
    // The key-value fast reader keeps them, and so does the fast path of read_history_bytes.
    let kv = isocert_history::read_kv_v1_bytes(text.as_bytes()).unwrap();
    assert_eq!(kv.real_time(isocert_history::TxnId(0)), Some(rt));
    let fast = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap();
    assert_eq!(
        fast.txns.iter().map(|t| t.real_time()).collect::<Vec<_>>(),
        h.txns.iter().map(|t| t.real_time()).collect::<Vec<_>>()
    );
    for bad in [
        r#"{"id":1,"session":0,"invoked_at":5,"ops":[]}"#,
        r#"{"id":1,"session":0,"invoked_at":7,"completed_at":6,"ops":[]}"#,
        r#"{"id":1,"session":0,"invoked_at":1.5,"completed_at":6,"ops":[]}"#,
        r#"{"id":1,"session":0,"invoked_at":1,"invoked_at":2,"completed_at":6,"ops":[]}"#,
    ] {
        let err = isocert_history::read_kv_v1_bytes(bad.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("_at"), "{bad}: {err}");
    }
}

/// The header's `serial_order` (docs/FORMAT.md) round trips; both readers take it, and
/// both refuse a spelling they do not know, naming the field and the choices.
#[test]
fn serial_order_round_trips_in_both_readers_and_unknown_spellings_are_refused() {
    use isocert_history::{read_kv_v1_bytes, SerialOrder};
    let text = concat!(
        r#"{"format":"isocert-history","version":1,"serial_order":"unknown"}"#,
        "\n",
        r#"{"id":1,"session":0,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":1,"value":2}]}"#,
        "\n"
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    assert_eq!(h.serial_order, SerialOrder::Unknown);
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
    assert_eq!(read_kv_v1_bytes(text.as_bytes()).unwrap().dict().serial_order, SerialOrder::Unknown);

    // The default (commit order) writes no header of its own, as files without it read.
    let plain = text.split_once('\n').unwrap().1;
    assert_eq!(v1::read_history(plain.as_bytes()).unwrap().serial_order, SerialOrder::CommitTs);
    let explicit = text.replace("\"unknown\"", "\"commit_ts\"");
    let h = v1::read_history(explicit.as_bytes()).unwrap();
    assert_eq!(h.serial_order, SerialOrder::CommitTs);
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), plain);
    assert_eq!(read_kv_v1_bytes(explicit.as_bytes()).unwrap().dict().serial_order, SerialOrder::CommitTs);

    let bad = text.replace("\"unknown\"", "\"commit\"");
    let general = v1::read_history(bad.as_bytes()).unwrap_err().to_string();
    let fast = read_kv_v1_bytes(bad.as_bytes()).unwrap_err().to_string();
    for e in [general, fast] {
        assert!(e.contains("serial_order") && e.contains("commit_ts or unknown"), "{e}");
    }
}

/// The header's `isolation` (the level the recording run checked at, which `isocert check`
/// uses without `--isolation`) round trips; both readers take it and refuse a level they
/// do not know, naming the field.
#[test]
fn the_level_to_check_round_trips_in_both_readers_and_unknown_levels_are_refused() {
    use isocert_history::{read_kv_v1_bytes, IsolationLevel};
    let text = concat!(
        r#"{"format":"isocert-history","version":1,"isolation":"snapshot-isolation"}"#,
        "\n",
        r#"{"id":1,"session":0,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":1,"value":2}]}"#,
        "\n"
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    assert_eq!(h.isolation, Some(IsolationLevel::SnapshotIsolation));
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
    assert_eq!(
        read_kv_v1_bytes(text.as_bytes()).unwrap().dict().isolation,
        Some(IsolationLevel::SnapshotIsolation)
    );
    let alias = text.replace("\"snapshot-isolation\"", "\"si\"");
    assert_eq!(
        v1::read_history(alias.as_bytes()).unwrap().isolation,
        Some(IsolationLevel::SnapshotIsolation)
    );

    let plain = text.split_once('\n').unwrap().1;
    assert_eq!(v1::read_history(plain.as_bytes()).unwrap().isolation, None);

    let bad = text.replace("\"snapshot-isolation\"", "\"sometimes\"");
    let general = v1::read_history(bad.as_bytes()).unwrap_err().to_string();
    let fast = read_kv_v1_bytes(bad.as_bytes()).unwrap_err().to_string();
    for e in [general, fast] {
        assert!(e.contains("line 1") && e.contains("isolation") && e.contains("sometimes"), "{e}");
    }
}

/// Expression assignments, an upsert's proposed row and the header's promises (docs/FORMAT.md).
const PROMISED: &str = r#"{"format":"isocert-history","version":1,"initial":[{"table":"items","key":1,"value":{"id":1,"n":40,"v":1}}],"promises":{"database":"PostgreSQL","statements":["one-snapshot","write-to-qualifying","write-from-replaced"]}}
{"id":7,"session":0,"ops":[{"f":"update","table":"items","where":"id = 1","set":{"n":{"expr":"n + 3"},"v":77},"rows":[{"key":1,"value":{"id":1,"n":43,"v":77}}]}]}
{"id":8,"session":1,"ops":[{"f":"update","table":"items","where":"id = 1","set":{"n":{"expr":"items.n + excluded.n"},"v":{"expr":"excluded.v"}},"excluded":{"id":1,"n":5,"v":78},"rows":[{"key":1,"value":{"id":1,"n":48,"v":78}}]}]}
"#;

#[test]
fn expression_assignments_and_promises_round_trip_and_old_constants_read_the_same() {
    use isocert_history::{Assign, StatementPromise};
    let h = v1::read_history(PROMISED.as_bytes()).unwrap();
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), PROMISED);
    let p = h.promises.as_ref().expect("promises read");
    assert_eq!(&*p.database, "PostgreSQL");
    assert!(p.makes(StatementPromise::WriteFromReplaced) && p.makes(StatementPromise::OneSnapshot));
    let Op::Update { set, .. } = &h.txns[0].ops[0] else { panic!("an update") };
    let Assign::Expr(e) = &set[0].1 else { panic!("an expression") };
    assert_eq!((&*e.sql, e.excluded), ("n + 3", None));
    assert_eq!(set[1].1, Assign::Const(Scalar::Int(77)));
    assert!(h.txns[0].ops[0].has_expressions());
    let Op::Update { set, .. } = &h.txns[1].ops[0] else { panic!("an update") };
    let excluded = set[0].1.expr().and_then(|e| e.excluded).expect("the proposed row");
    assert_eq!(
        h.value_label(h.object_by_key(h.table_by_name("items").unwrap(), &Scalar::Int(1)).unwrap(), excluded),
        "{id: 1, n: 5, v: 78}"
    );
    // The sample's constant-only update reads as before: constants, no expression.
    let old = v1::read_history(SAMPLE.as_bytes()).unwrap();
    let Op::Update { set, .. } = &old.txns[2].ops[1] else { panic!("an update") };
    assert_eq!(set[0].1, Assign::Const(Scalar::Int(8)));
    assert!(!old.txns[2].ops[1].has_expressions());
}

#[test]
fn the_fast_reader_reads_the_promises_of_an_item_history() {
    let text = concat!(
        r#"{"format":"isocert-history","version":1,"promises":{"database":"PostgreSQL","statements":["one-snapshot"]}}"#,
        "\n",
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":1}]}"#,
        "\n"
    );
    let fast = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap();
    let general = v1::read_history(text.as_bytes()).unwrap();
    assert_eq!(fast.promises, general.promises);
    assert!(fast.promises.is_some());
}
