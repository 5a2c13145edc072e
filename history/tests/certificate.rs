//! Certificates: resolved against their history, written back stably, errors named by field.

use isocert_history::{v1, OpRef, Scalar, SeenVersion, TxnId, Writer};

const HISTORY: &str = r#"{"id":3,"session":0,"ops":[{"f":"w","key":5,"value":1}]}
{"id":17,"session":1,"ops":[{"f":"w","key":5,"value":2}]}
{"id":40,"session":2,"ops":[{"f":"r","key":5,"value":2},{"f":"select","table":"t","where":"c0 > 1","rows":[]}]}
"#;

const CERT: &str = r#"{"format":"isocert-certificate","version":1,"version_order":[{"key":5,"writers":[3,17]}],"version_sets":[{"txn":40,"op":1,"versions":[{"table":"t","key":1,"writer":17},{"table":"t","key":2,"writer":null}]}],"serialization_order":[3,17,40]}
"#;

#[test]
fn certificate_resolves_and_round_trips() {
    let mut h = v1::read_history(HISTORY.as_bytes()).unwrap();
    let cert = v1::read_certificate(CERT.as_bytes(), &mut h).unwrap();
    let order = cert.serialization_order.as_ref().unwrap();
    assert_eq!(order, &vec![TxnId(0), TxnId(1), TxnId(2)]);
    let kv = h.table_by_name("kv").unwrap();
    let x = h.object_by_key(kv, &Scalar::Int(5)).unwrap();
    assert_eq!(cert.version_order.as_ref().unwrap()[&x], vec![TxnId(0), TxnId(1)]);
    let set = &cert.version_sets.as_ref().unwrap()[&OpRef { txn: TxnId(2), op: 1 }];
    assert_eq!(set.len(), 2);
    assert_eq!(set[0].writer, Writer::Txn(TxnId(1)));
    assert!(matches!(set[1], SeenVersion { writer: Writer::Initial, .. }));

    let mut out = Vec::new();
    v1::write_certificate(&h, &cert, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), CERT);
}

fn cert_error(cert: &str) -> String {
    let mut h = v1::read_history(HISTORY.as_bytes()).unwrap();
    v1::read_certificate(cert.as_bytes(), &mut h).unwrap_err().to_string()
}

#[test]
fn certificate_errors_name_the_field() {
    let e = cert_error(r#"{"version_order":[{"key":5,"writers":[3,99]}]}"#);
    assert!(e.contains("version_order[0].writers[1]") && e.contains("no transaction 99"), "{e}");
    let e = cert_error(r#"{"version_sets":[{"txn":3,"op":0,"versions":[]}]}"#);
    assert!(e.contains("version_sets[0].op") && e.contains("not an item read, select"), "{e}");
    let e = cert_error(r#"{"version_sets":[{"txn":40,"op":5,"versions":[]}]}"#);
    assert!(e.contains("version_sets[0].op") && e.contains("operation 5 of T40"), "{e}");
    let e = cert_error(r#"{"serialization_order":[3,"17"]}"#);
    assert!(e.contains("serialization_order[1]"), "{e}");
    let e = cert_error(r#"{"version_order":[],"vesion_sets":[]}"#);
    assert!(e.contains("vesion_sets"), "{e}");
    let e = cert_error(r#"{"format":"isocert-history"}"#);
    assert!(e.contains("format"), "{e}");
    let e = cert_error(r#"{"version_order":[{"key":5,"writers":[3]},{"key":5,"writers":[17]}]}"#);
    assert!(e.contains("twice"), "{e}");
}

#[test]
fn an_item_read_names_the_one_version_it_saw() {
    let mut h = v1::read_history(HISTORY.as_bytes()).unwrap();
    let text = r#"{"format":"isocert-certificate","version":1,"version_sets":[{"txn":40,"op":0,"versions":[{"key":5,"writer":17}]},{"txn":40,"op":1,"versions":[]}]}
"#;
    let cert = v1::read_certificate(text.as_bytes(), &mut h).unwrap();
    let kv = h.table_by_name("kv").unwrap();
    let x = h.object_by_key(kv, &Scalar::Int(5)).unwrap();
    let sets = cert.version_sets.as_ref().unwrap();
    assert_eq!(
        sets[&OpRef { txn: TxnId(2), op: 0 }],
        vec![SeenVersion { obj: x, writer: Writer::Txn(TxnId(1)) }]
    );
    let mut out = Vec::new();
    v1::write_certificate(&h, &cert, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);

    let initial = r#"{"version_sets":[{"txn":40,"op":0,"versions":[{"key":5,"writer":null}]}]}"#;
    let cert = v1::read_certificate(initial.as_bytes(), &mut h).unwrap();
    assert_eq!(cert.version_sets.unwrap()[&OpRef { txn: TxnId(2), op: 0 }][0].writer, Writer::Initial);
}

#[test]
fn an_item_read_entry_with_the_wrong_object_or_count_is_an_error_naming_the_field() {
    let e = cert_error(r#"{"version_sets":[{"txn":40,"op":0,"versions":[{"key":6,"writer":17}]}]}"#);
    assert!(e.contains("version_sets[0].versions[0]") && e.contains("reads kv[5], not kv[6]"), "{e}");
    let e =
        cert_error(r#"{"version_sets":[{"txn":40,"op":0,"versions":[{"table":"t","key":5,"writer":17}]}]}"#);
    assert!(e.contains("version_sets[0].versions[0]") && e.contains("not t[5]"), "{e}");
    let e = cert_error(
        r#"{"version_sets":[{"txn":40,"op":0,"versions":[{"key":5,"writer":17},{"key":5,"writer":3}]}]}"#,
    );
    assert!(e.contains("version_sets[0].versions") && e.contains("exactly one version, not 2"), "{e}");
    let e = cert_error(r#"{"version_sets":[{"txn":40,"op":0,"versions":[]}]}"#);
    assert!(e.contains("exactly one version, not 0"), "{e}");
    let e = cert_error(r#"{"version_sets":[{"txn":40,"op":0,"versions":[{"key":5,"writer":99}]}]}"#);
    assert!(e.contains("version_sets[0].versions[0].writer") && e.contains("no transaction 99"), "{e}");
}

#[test]
fn the_transactions_extension_sets_outcomes_and_timestamps_and_round_trips() {
    let history =
        "{\"id\":1,\"session\":0,\"status\":\"unknown\",\"ops\":[{\"f\":\"w\",\"key\":5,\"value\":1}]}\n\
                   {\"id\":2,\"session\":1,\"start_ts\":3,\"ops\":[{\"f\":\"r\",\"key\":5,\"value\":1}]}\n";
    let cert = r#"{"transactions":[{"txn":1,"status":"committed","start_ts":1,"commit_ts":"7.2"},{"txn":2,"commit_ts":9}]}"#;
    let mut h = v1::read_history(history.as_bytes()).unwrap();
    let c = v1::read_certificate(cert.as_bytes(), &mut h).unwrap();
    assert!(c.is_empty(), "the facts go to the history, not the certificate");
    let (t1, t2) = (h.txn(TxnId(0)), h.txn(TxnId(1)));
    assert_eq!(t1.status, isocert_history::Status::Committed);
    assert_eq!(t1.commit_ts, Some(isocert_history::Timestamp::hlc(7, 2)));
    assert_eq!(t2.start_ts, Some(isocert_history::Timestamp::new(3)), "a field left out keeps the history's");
    assert_eq!(t2.commit_ts, Some(isocert_history::Timestamp::new(9)));
    let mut out = Vec::new();
    v1::write_certificate_with_facts(&h, &c, &[TxnId(0), TxnId(1)], &[], &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(r#""transactions":[{"txn":1,"status":"committed","start_ts":1,"commit_ts":"7.0000000002"},{"txn":2,"status":"committed","start_ts":3,"commit_ts":9}]"#),
        "{text}"
    );
    let e = cert_error(r#"{"transactions":[{"txn":3,"status":"maybe"}]}"#);
    assert!(e.contains("transactions[0].status") && e.contains("maybe"), "{e}");
    let e = cert_error(r#"{"transactions":[{"txn":3,"commit_ts":[1]}]}"#);
    assert!(e.contains("transactions[0].commit_ts"), "{e}");
    let e = cert_error(r#"{"transactions":[{"txn":3,"node":1}]}"#);
    assert!(e.contains("node"), "{e}");
}

#[test]
fn foreign_writers_become_transactions_with_shown_or_opaque_values() {
    let history = "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"r\",\"key\":5,\"value\":-3}]}\n";
    let cert = r#"{"foreign_writers":[{"id":"~1","writes":[{"key":5,"value":-3},{"key":6}]},{"id":"~2","writes":[{"key":6}]}],"version_order":[{"key":5,"writers":["~1"]},{"key":6,"writers":["~1","~2"]}]}"#;
    let mut h = v1::read_history(history.as_bytes()).unwrap();
    let c = v1::read_certificate(cert.as_bytes(), &mut h).unwrap();
    assert_eq!(h.txns.len(), 3);
    let (f1, f2) = (h.txn(TxnId(1)), h.txn(TxnId(2)));
    assert_eq!(f1.name, Scalar::Text("~1".into()));
    assert_ne!(f1.session, f2.session, "each foreign writer has its own session");
    let kv = h.table_by_name("kv").unwrap();
    let (k5, k6) =
        (h.object_by_key(kv, &Scalar::Int(5)).unwrap(), h.object_by_key(kv, &Scalar::Int(6)).unwrap());
    let shown = h.value_id(&isocert_history::Value::Scalar(Scalar::Int(-3))).unwrap();
    assert_eq!(f1.ops[0], isocert_history::Op::Write { obj: k5, value: shown });
    let isocert_history::Op::Write { value: opaque, .. } = f1.ops[1] else { panic!("a write") };
    assert!(
        isocert_history::is_opaque_value(&h, k6, opaque) && !isocert_history::is_opaque_value(&h, k5, shown)
    );
    assert_eq!(c.version_order.unwrap()[&k6], vec![TxnId(1), TxnId(2)]);
    let e = cert_error(r#"{"foreign_writers":[{"id":"x1","writes":[]}]}"#);
    assert!(e.contains("foreign_writers[0].id") && e.contains("~"), "{e}");
    let e = cert_error(r#"{"foreign_writers":[{"id":"~1","writes":[{"key":[1]}]}]}"#);
    assert!(e.contains("foreign_writers[0].writes[0].key"), "{e}");
}
