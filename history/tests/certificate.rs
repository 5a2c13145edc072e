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
    let e = cert_error(r#"{"version_sets":[{"txn":40,"op":0,"versions":[]}]}"#);
    assert!(e.contains("version_sets[0].op") && e.contains("not a select"), "{e}");
    let e = cert_error(r#"{"serialization_order":[3,"17"]}"#);
    assert!(e.contains("serialization_order[1]"), "{e}");
    let e = cert_error(r#"{"version_order":[],"vesion_sets":[]}"#);
    assert!(e.contains("vesion_sets"), "{e}");
    let e = cert_error(r#"{"format":"isocert-history"}"#);
    assert!(e.contains("format"), "{e}");
    let e = cert_error(r#"{"version_order":[{"key":5,"writers":[3]},{"key":5,"writers":[17]}]}"#);
    assert!(e.contains("twice"), "{e}");
}
