//! Jepsen/Elle EDN, elle-cli JSON, closed predicates and list-append traceability.

use isocert_history::formats::{list_append_certificate, Format};
use isocert_history::{FormatError, Op, Scalar, Status, TxnId, Value, ValueId};

use super::{assert_round_trip, error_of, read_fixture, v1_history};

fn name(h: &isocert_history::History, id: TxnId) -> Scalar {
    h.txn(id).name.clone()
}

#[test]
fn list_append_fixture_pairs_invocations_and_derives_the_version_order() {
    let imported = read_fixture(Format::Elle, "elle-list-append.edn");
    let h = &imported.history;
    let names: Vec<_> = h.txns.iter().map(|t| (t.name.clone(), t.status)).collect();
    assert_eq!(
        names,
        [
            (Scalar::Int(1), Status::Committed),
            (Scalar::Int(3), Status::Committed),
            (Scalar::Int(5), Status::Aborted),
            (Scalar::Int(7), Status::Committed),
            (Scalar::Int(9), Status::Unknown),
        ],
        "named by completion index; the nemesis is skipped"
    );
    assert_eq!(h.txns[2].ops.len(), 1, "the failed transaction's unobserved read is left out");
    assert!(imported.notes.iter().any(|n| n.contains("1 reads")), "{:?}", imported.notes);
    let Op::Read { value, .. } = h.txns[3].ops[0] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::List(vec![Scalar::Int(1), Scalar::Int(2)].into()));
    let cert = imported.certificate.expect("list-append histories get a certificate");
    let order = cert.version_order.unwrap();
    let kv = h.table_by_name("kv").unwrap();
    let x = h.object_by_key(kv, &Scalar::Text("x".into())).unwrap();
    let y = h.object_by_key(kv, &Scalar::Text("y".into())).unwrap();
    let names_of = |obj| order[&obj].iter().map(|&t| name(h, t)).collect::<Vec<_>>();
    assert_eq!(names_of(x), [Scalar::Int(1), Scalar::Int(3)], "T9's unknown append is not in any read");
    assert_eq!(names_of(y), [Scalar::Int(1)]);
}

#[test]
fn reads_that_disagree_on_a_prefix_are_reported() {
    let imported = read_fixture(Format::Elle, "elle-incompatible-order.edn");
    let h = &imported.history;
    let trace = list_append_certificate(h);
    assert_eq!(trace.conflicts.len(), 1);
    let c = &trace.conflicts[0];
    assert_eq!(
        (name(h, c.longest.txn), name(h, c.other.txn), c.position),
        (Scalar::Int(5), Scalar::Int(7), 0)
    );
    assert!(
        imported.notes.iter().any(|n| n.contains("incompatible order") && n.contains("T7")),
        "{:?}",
        imported.notes
    );
}

#[test]
fn consistent_reads_give_no_conflict_and_unread_appends_are_left_out_of_the_order() {
    let h = v1_history(
        r#"{"id":1,"session":0,"ops":[{"f":"append","key":1,"value":1}]}
{"id":2,"session":1,"ops":[{"f":"append","key":1,"value":2}]}
{"id":3,"session":1,"ops":[{"f":"append","key":1,"value":3}]}
{"id":4,"session":0,"ops":[{"f":"r","key":1,"value":[2]},{"f":"r","key":1,"value":null}]}
{"id":5,"session":2,"ops":[{"f":"r","key":1,"value":[2,1]}]}
"#,
    );
    let trace = list_append_certificate(&h);
    assert!(trace.conflicts.is_empty(), "{:?}", trace.conflicts);
    let order = trace.certificate.version_order.unwrap();
    let obj = h.object_by_key(h.table_by_name("kv").unwrap(), &Scalar::Int(1)).unwrap();
    assert_eq!(order[&obj], [TxnId(1), TxnId(0)], "the unread append of 3 is not guessed into the order");
    assert_eq!(trace.unordered, [obj]);
}

#[test]
fn closed_predicate_fixture_becomes_initial_versions_and_predicate_reads() {
    let h = read_fixture(Format::Elle, "elle-closed-predicate.edn").history;
    assert_eq!(h.initial.len(), 2);
    assert_eq!(h.txns.len(), 2);
    let t = &h.txns[0];
    assert!(matches!(t.ops[1], Op::Write { value: ValueId::ABSENT, .. }), "[:delete :x]");
    let preds: Vec<&str> =
        h.txns[1].ops.iter().filter_map(|op| op.predicate()).map(|p| &*h.predicate(p).sql).collect();
    assert_eq!(preds, ["true", "value % 2 = 0", "value = 3"]);
    let Op::Select { rows, .. } = &h.txns[1].ops[0] else { panic!("expected a select") };
    assert_eq!(rows.len(), 2);
}

/// The version set of `txn` op `op` as `(key, writer name or None for the initial)`, sorted.
fn version_set(
    imported: &isocert_history::formats::Imported,
    txn: usize,
    op: u32,
) -> Vec<(Scalar, Option<Scalar>)> {
    let h = &imported.history;
    let sets = imported.certificate.as_ref().and_then(|c| c.version_sets.as_ref()).expect("version sets");
    let at = isocert_history::OpRef { txn: TxnId::from_index(txn), op };
    let mut out: Vec<_> =
        sets[&at].iter().map(|v| (h.object(v.obj).key.clone(), v.writer.txn().map(|t| name(h, t)))).collect();
    out.sort();
    out
}

#[test]
fn closed_predicate_version_sets_follow_by_elimination() {
    let imported = read_fixture(Format::Elle, "elle-closed-predicate.edn");
    let text = |s: &str| Scalar::Text(s.into());
    let t3 = Some(Scalar::Int(3));
    // :true returned y and z (T3's versions); x was not returned, and only its deleted
    // version fails :true, so the read saw T3's delete.
    assert_eq!(
        version_set(&imported, 1, 0),
        [(text("x"), t3.clone()), (text("y"), t3.clone()), (text("z"), t3.clone())]
    );
    // [:mod 2 0] did not return x: x=1 is odd and deleted x matches nothing, so either
    // version explains it and the initial one is named; z=3 is odd, unborn z matches
    // nothing either: unborn is left out of the set.
    assert_eq!(version_set(&imported, 1, 1), [(text("x"), None), (text("y"), t3.clone())]);
    let order = imported.certificate.as_ref().unwrap().version_order.as_ref().unwrap();
    assert!(order.values().all(|w| w.len() == 1), "one mutation per key");
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
}

#[test]
fn a_key_mutated_twice_is_outside_the_closed_universe() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.edn");
    std::fs::write(
        &path,
        "{:type :ok, :f :txn, :value [[:w :x 1]], :process 0, :index 0}\n\
         {:type :ok, :f :txn, :value [[:w :x 2] [:rp :true {:x 2}]], :process 1, :index 1}\n",
    )
    .unwrap();
    let imported = Format::Elle.read_path(&path).unwrap();
    assert!(imported.certificate.is_none());
    let notes = imported.notes.join("\n");
    assert!(
        notes.contains("no closed-universe certificate") && notes.contains("mutated by both T0 and T1"),
        "{notes}"
    );
}

#[test]
fn elle_cli_json_fixtures() {
    let h = read_fixture(Format::ElleJson, "elle-cli-aborted-read.json").history;
    assert_eq!(h.txns[0].status, Status::Aborted);
    let Op::Read { value, .. } = h.txns[1].ops[0] else { panic!("expected a read") };
    assert_eq!(h.value(value), &Value::List(vec![Scalar::Int(1)].into()));
    let h = read_fixture(Format::ElleJson, "elle-cli-rw-register.json").history;
    assert_eq!(h.txns.len(), 2);
    assert_eq!(h.txns[1].name, Scalar::Int(4));
}

const ELLE_SHAPED: &str = r#"{"format":"isocert-history","version":1,"initial":[{"key":"a","value":1}]}
{"id":10,"session":0,"ops":[{"f":"append","key":5,"value":1},{"f":"r","key":5,"value":[1]},{"f":"w","key":"a","value":"text"}]}
{"id":"t2","session":"client-b","status":"aborted","ops":[{"f":"append","key":5,"value":2}]}
{"id":12,"session":3,"status":"unknown","ops":[{"f":"w","key":"a","value":null}]}
{"id":13,"session":0,"ops":[{"f":"r","key":5,"value":null},{"f":"select","table":"kv","where":"value % 2 = 0","rows":[{"key":"b","value":4}]},{"f":"select","table":"kv","where":"true","rows":[]}]}
"#;

#[test]
fn edn_and_json_round_trip() {
    assert_round_trip(ELLE_SHAPED, Format::Elle);
    assert_round_trip(ELLE_SHAPED, Format::ElleJson);
}

#[test]
fn malformed_histories_name_line_and_field() {
    let cases: [(&[u8], &str); 6] = [
        (b"{:type :invoke, :value [[:r 1 nil]], :process 0}\n{:type :ok :value [[:r 1 nil]] :process 0", "line 2"),
        (b"{:type :invoke, :value [[:r 1 nil]], :process 0}\n{:type :done, :value [], :process 0}", "line 2: type"),
        (b"{:type :ok, :value [[:r 1 nil]], :process 4.5}", "process: expected an integer"),
        (b"{:type :invoke, :value [[:r 1 nil] [:x 1 2]], :process 0}\n{:type :ok, :value [[:r 1 nil] [:x 1 2]], :process 0}", "line 2: value[1]"),
        (b"{:type :invoke, :value [[:r 1 nil]], :process 0}\n{:type :invoke, :value [], :process 0}", "invokes again"),
        (b"{:type :invoke, :f :read, :process 0}\n{:type :ok, :f :read, :value 3, :process 0}", "unsupported operation :read"),
    ];
    for (text, expected) in cases {
        let (err, message) = error_of(Format::Elle, "h.edn", text);
        assert!(matches!(err, FormatError::InFile { .. }), "{message}");
        assert!(message.contains(expected), "expected {expected:?} in: {message}");
    }
    let (_, m) = error_of(Format::ElleJson, "h.json", b"[{\"type\":\"invoke\",\"process\":0,\n \"value\":[[\"r\",1]]},\n{\"type\":\"ok\",\"process\":0,\"value\":[[\"r\",1]]}]");
    assert!(m.contains("[:r ...] has 2 elements"), "{m}");
}

#[test]
fn sql_tables_are_refused_by_name() {
    let h = v1_history(r#"{"id":1,"session":0,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1}}]}"#);
    let err = Format::Elle.write(&h, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("T1, ops[0]") && err.to_string().contains("table t"), "{err}");
}

#[test]
fn pretty_printed_json_documents_are_read_whole() {
    let text = "[\n  {\n    \"type\": \"invoke\", \"process\": 0,\n    \"value\": [[\"append\", 1, 1]]\n  },\n  {\"type\": \"ok\", \"process\": 0, \"index\": 9, \"value\": [[\"append\", 1, 1]]}\n]\n";
    let h = isocert_history::formats::read_elle_json(text.as_bytes()).unwrap().history;
    assert_eq!(h.txns.len(), 1);
    assert_eq!(h.txns[0].name, Scalar::Int(9));
}

#[test]
fn completion_only_histories_are_read_whole() {
    // Viper's Jepsen logs and other filtered histories keep only the `:ok` lines.
    let text = "{:type :ok, :f :txn, :value [[:append 1 1]], :process 0, :index 1}\n{:type :ok, :f :txn, :value [[:r 1 [1]]], :process 1, :index 3}\n{:type :info, :f :txn, :value nil, :process 2, :index 4}\n";
    let imported = isocert_history::formats::read_elle_edn(text.as_bytes()).unwrap();
    let names: Vec<_> = imported.history.txns.iter().map(|t| (t.name.clone(), t.status)).collect();
    assert_eq!(names, [(Scalar::Int(1), Status::Committed), (Scalar::Int(3), Status::Committed)]);
    assert!(imported.notes.iter().any(|n| n.contains("1 :info completions")), "{:?}", imported.notes);
}

#[test]
fn jepsen_op_records_are_read_as_maps() {
    let text = "#jepsen.history.Op{:index 0, :time 1, :type :invoke, :process 0, :f :txn, :value [[:append 1 1]]}\n#jepsen.history.Op{:index 1, :time 2, :type :ok, :process 0, :f :txn, :value [[:append 1 1]]}\n";
    let h = isocert_history::formats::read_elle_edn(text.as_bytes()).unwrap().history;
    assert_eq!(h.txns.len(), 1);
    assert_eq!(h.txns[0].name, Scalar::Int(1));
}

#[test]
fn reads_with_an_element_twice_are_reported() {
    let h = v1_history(
        r#"{"id":1,"session":0,"ops":[{"f":"append","key":1,"value":1}]}
{"id":2,"session":1,"ops":[{"f":"r","key":1,"value":[1,1]}]}
"#,
    );
    let trace = list_append_certificate(&h);
    assert_eq!(trace.duplicates, [isocert_history::OpRef { txn: TxnId(1), op: 0 }]);
}

#[test]
fn operation_maps_may_span_lines() {
    let text = "; pretty-printed\n{:type :invoke,\n :f :txn,\n :value [[:append 1 1]\n         [:r 1 nil]],\n :process 0}\n{:type :ok, :f :txn, :value [[:append 1 1] [:r 1 [1]]], :process 0, :index 7}\n{:type :invoke,\n :value [[:r 1 nil]], :process 1}\n{:type :ok :process 1 :value [[:r 1 nil] [:bogus]]}\n";
    let err = isocert_history::formats::read_elle_edn(text.as_bytes()).unwrap_err().to_string();
    assert!(err.starts_with("line 10: value[1]"), "{err}");
    let good = text.replace(" [:bogus]", "");
    let h = isocert_history::formats::read_elle_edn(good.as_bytes()).unwrap().history;
    assert_eq!(h.txns.len(), 2);
    assert_eq!(h.txns[0].name, Scalar::Int(7));
    let long = format!("{{:type :invoke, :process 0, :value [[:append 1 1]\n{}]}}\n{{:type :ok, :process 0, :value [[:append 1 1]]}}\n", "\n".repeat(1500));
    assert_eq!(isocert_history::formats::read_elle_edn(long.as_bytes()).unwrap().history.txns.len(), 1);
}

/// Issue 10, item 10: a truncated or structurally wrong elle-json file is an error, never
/// a shorter history.
#[test]
fn truncated_or_misshapen_elle_json_is_refused() {
    let op = r#"{"type":"ok","f":"txn","process":0,"value":[["r","x",1]]}"#;
    for (text, expected) in [
        (format!("[{op},\n{op}"), "the history is truncated: its array is not closed"),
        (format!("[{op},\n{op},\n"), "the history is truncated"),
        ("[[]]".to_string(), "[0]: expected an operation object"),
        (format!("[{op}\n[[[[\n"), "line 2"),
        (format!("[{op}]\n{op}\n"), "text after the end of the history's array"),
    ] {
        let (_, message) = error_of(Format::ElleJson, "h.json", text.as_bytes());
        assert!(message.contains(expected), "expected {expected:?} for {text:?} in: {message}");
    }
    let whole = format!("[{op},\n{op}]\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.json");
    std::fs::write(&path, whole).unwrap();
    let imported = Format::ElleJson.read_path(&path).expect("a closed array is read");
    assert_eq!(imported.history.txns.len(), 2);
}

#[test]
fn jepsen_time_becomes_the_transactions_real_time() {
    let text = b"{:type :invoke, :f :txn, :value [[:r 1 nil]], :process 0, :time 100}
{:type :invoke, :f :txn, :value [[:w 1 5]], :process 1, :time 150}
{:type :ok, :f :txn, :value [[:r 1 0]], :process 0, :time 200}
{:type :info, :f :txn, :value [[:w 1 5]], :process 1, :time 300}
{:type :invoke, :f :txn, :value [[:w 2 7]], :process 2, :time 400}
";
    let h = isocert_history::formats::read_elle_edn(&text[..]).unwrap().history;
    let times: Vec<_> =
        h.txns.iter().map(|t| t.real_time().map(|rt| (rt.invoked_at, rt.completed_at))).collect();
    // Completed, indeterminate (:info stays open), never completed (open).
    assert_eq!(times, [Some((100, 200)), Some((150, i64::MAX)), Some((400, i64::MAX))]);
    // Written back as EDN, the times survive (an open completion has no :time).
    let mut out = Vec::new();
    Format::Elle.write(&h, &mut out).unwrap();
    let again = isocert_history::formats::read_elle_edn(&out[..]).unwrap().history;
    let again: Vec<_> = again.txns.iter().map(|t| t.real_time()).collect();
    assert_eq!(again, h.txns.iter().map(|t| t.real_time()).collect::<Vec<_>>());

    let backwards = b"{:type :invoke, :value [[:r 1 nil]], :process 0, :time 500}\n{:type :ok, :value [[:r 1 0]], :process 0, :time 400}\n";
    let (_, message) = error_of(Format::Elle, "h.edn", backwards);
    assert!(message.contains("line 2: time") && message.contains("before its invocation"), "{message}");
    let (_, message) =
        error_of(Format::Elle, "h.edn", b"{:type :ok, :value [[:r 1 0]], :process 0, :time 1.5}\n");
    assert!(message.contains("time: expected an integer"), "{message}");
}
