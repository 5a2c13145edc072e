//! Certificates: resolved against their history, written back stably, errors named by field.

use isocert_history::{v1, HiddenRead, HiddenReason, OpRef, Scalar, SeenVersion, TxnId, Writer};

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
    assert_eq!(t1.commit_ts(), Some(isocert_history::Timestamp::hlc(7, 2)));
    assert_eq!(
        t2.start_ts(),
        Some(isocert_history::Timestamp::new(3)),
        "a field left out keeps the history's"
    );
    assert_eq!(t2.commit_ts(), Some(isocert_history::Timestamp::new(9)));
    let mut out = Vec::new();
    v1::write_certificate_with_facts(&h, &c, &[TxnId(0), TxnId(1)], &[], None, &mut out).unwrap();
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
fn a_certificate_whose_timestamps_are_no_serial_order_says_so_and_the_history_then_knows() {
    use isocert_history::SerialOrder;
    let history = "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"w\",\"key\":5,\"value\":1}]}\n";
    let read = |cert: &str| {
        let mut h = v1::read_history(history.as_bytes()).unwrap();
        assert_eq!(h.serial_order, SerialOrder::CommitTs, "the header's default");
        v1::read_certificate(cert.as_bytes(), &mut h).map(|_| h)
    };
    let written = |h: &isocert_history::History| {
        let mut out = Vec::new();
        let no_cert = isocert_history::Certificate::default();
        v1::write_certificate_with_facts(h, &no_cert, &[TxnId(0)], &[], None, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let unknown = read(r#"{"transactions":[{"txn":1,"commit_ts":4}],"serial_order":"unknown"}"#).unwrap();
    assert_eq!(
        unknown.serial_order,
        SerialOrder::Unknown,
        "the certificate's source knows less than the header claims"
    );
    let text = written(&unknown);
    assert!(text.contains(r#""serial_order":"unknown""#), "{text}");
    assert_eq!(read(&text).unwrap().serial_order, SerialOrder::Unknown, "round trip");

    let commit_ts = read(r#"{"transactions":[{"txn":1,"commit_ts":4}],"serial_order":"commit_ts"}"#).unwrap();
    assert_eq!(commit_ts.serial_order, SerialOrder::CommitTs);
    let text = written(&commit_ts);
    assert!(!text.contains("serial_order"), "the default is written by leaving it out: {text}");

    let mut h = v1::read_history(
        format!("{{\"format\":\"isocert-history\",\"version\":1,\"serial_order\":\"unknown\"}}\n{history}")
            .as_bytes(),
    )
    .unwrap();
    v1::read_certificate(r#"{"serial_order":"commit_ts"}"#.as_bytes(), &mut h).unwrap();
    assert_eq!(
        h.serial_order,
        SerialOrder::Unknown,
        "a certificate cannot vouch for more than the history knows"
    );

    let e = cert_error(r#"{"serial_order":"hlc"}"#);
    assert!(e.contains("serial_order") && e.contains("hlc") && e.contains("commit_ts or unknown"), "{e}");
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

/// Issue 32: `hidden_reads` (what `isocert serve` marks) resolve, round-trip, and a bad one
/// is named by field; a certificate without them reads as before.
#[test]
fn hidden_reads_resolve_round_trip_and_errors_name_the_field() {
    let history = "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"r\",\"key\":5,\"value\":-3}]}\n";
    let cert = r#"{"format":"isocert-certificate","version":1,"foreign_writers":[{"id":"~1","writes":[{"key":5}]}],"hidden_reads":[{"txn":1,"op":0,"why":"value-written-outside"}],"version_order":[{"key":5,"writers":["~1"]}]}
"#;
    let mut h = v1::read_history(history.as_bytes()).unwrap();
    let c = v1::read_certificate(cert.as_bytes(), &mut h).unwrap();
    let mark = HiddenRead { at: OpRef { txn: TxnId(0), op: 0 }, why: HiddenReason::ValueWrittenOutside };
    assert_eq!(c.hidden_reads, vec![mark]);
    let mut out = Vec::new();
    let kv = h.table_by_name("kv").unwrap();
    let k5 = h.object_by_key(kv, &Scalar::Int(5)).unwrap();
    let foreign = [isocert_history::ForeignWriter { txn: TxnId(1), writes: vec![(k5, None)] }];
    v1::write_certificate_with_facts(&h, &c, &[], &foreign, None, &mut out).unwrap();
    let again = String::from_utf8(out).unwrap();
    assert_eq!(again, cert.replace("]}\n", "],\"transactions\":[]}\n"));
    let e = cert_error(r#"{"hidden_reads":[{"txn":40,"op":0,"why":"a guess"}]}"#);
    assert!(e.contains("hidden_reads[0].why"), "{e}");
    let e = cert_error(r#"{"hidden_reads":[{"txn":40,"op":7,"why":"predicate-over-hidden"}]}"#);
    assert!(e.contains("hidden_reads[0].op"), "{e}");
    let e = cert_error(r#"{"hidden_reads":[{"txn":41,"op":0,"why":"predicate-over-hidden"}]}"#);
    assert!(e.contains("hidden_reads[0].txn"), "{e}");
}

/// Issue 32: a certificate's `initial` versions (what `isocert serve` answers) replace the
/// history's claimed ones, a row without a value being the opaque stand-in; they round-trip
/// and a bad one is named by field.
#[test]
fn initial_versions_of_a_certificate_replace_the_claimed_ones_and_round_trip() {
    let history = "{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"key\":5,\"value\":-3},{\"key\":7,\"value\":1}],\"meta\":{\"initial_xids\":[4]}}\n\
                   {\"id\":1,\"session\":0,\"ops\":[{\"f\":\"r\",\"key\":5,\"value\":-3}]}\n";
    let cert = r#"{"format":"isocert-certificate","version":1,"initial":[{"key":5},{"key":6,"value":2}],"version_order":[]}
"#;
    let mut h = v1::read_history(history.as_bytes()).unwrap();
    assert_eq!(h.meta.as_deref().unwrap()["initial_xids"][0], 4);
    let c = v1::read_certificate(cert.as_bytes(), &mut h).unwrap();
    let kv = h.table_by_name("kv").unwrap();
    let key = |k: i64| h.object_by_key(kv, &Scalar::Int(k)).unwrap();
    let (k5, k6) = (key(5), key(6));
    assert_eq!(h.initial.len(), 2, "row 7 is no longer listed: it starts unborn");
    assert!(isocert_history::is_opaque_value(&h, k5, h.initial[0].1) && h.initial[0].0 == k5);
    assert_eq!((h.initial[1].0, h.value_label(k6, h.initial[1].1)), (k6, "2".to_string()));
    let mut out = Vec::new();
    let shown = [(k5, None), (k6, Some(h.initial[1].1))];
    v1::write_certificate_with_facts(&h, &c, &[], &[], Some(&shown), &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), cert.replace("]}\n", "],\"transactions\":[]}\n"));
    // The header's facts are written back as read.
    let mut text = Vec::new();
    v1::write_history(&v1::read_history(history.as_bytes()).unwrap(), &mut text).unwrap();
    assert_eq!(String::from_utf8(text).unwrap(), history);
    let e = cert_error(r#"{"initial":[{"key":5},{"key":5}]}"#);
    assert!(e.contains("initial[1].key"), "{e}");
    let e = cert_error(r#"{"initial":[{"key":[1]}]}"#);
    assert!(e.contains("initial[0].key"), "{e}");
}

/// A table `t` of three rows, two writers with commit timestamps, and a reader whose
/// select's version set the certificate gives as a snapshot (docs/FORMAT.md).
const SNAP_HISTORY: &str = r#"{"format":"isocert-history","version":1,"initial":[{"table":"t","key":1,"value":{"k":1,"c0":0}},{"table":"t","key":2,"value":{"k":2,"c0":0}}]}
{"id":1,"session":0,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","table":"t","key":1,"value":{"k":1,"c0":5}}]}
{"id":2,"session":1,"start_ts":3,"commit_ts":6,"ops":[{"f":"w","table":"t","key":2,"value":{"k":2,"c0":7}},{"f":"w","table":"t","key":3,"value":{"k":3,"c0":9}}]}
{"id":3,"session":2,"start_ts":4,"commit_ts":8,"ops":[{"f":"w","table":"t","key":2,"value":{"k":2,"c0":1}},{"f":"select","table":"t","where":"c0 >= 0","rows":[]}]}
"#;

fn snapshot_cert(snapshot: &str) -> String {
    format!(
        r#"{{"format":"isocert-certificate","version":1,"version_order":[{{"table":"t","key":1,"writers":[1]}},{{"table":"t","key":2,"writers":[2,3]}},{{"table":"t","key":3,"writers":[2]}}],"version_sets":[{{"txn":3,"op":1,"snapshot":{snapshot}}}]}}
"#
    )
}

fn resolved(snapshot: &str) -> Vec<(i64, Writer)> {
    let mut h = v1::read_history(SNAP_HISTORY.as_bytes()).unwrap();
    let mut cert = v1::read_certificate(snapshot_cert(snapshot).as_bytes(), &mut h).unwrap();
    cert.expand_snapshot_sets(&h).unwrap();
    let set = &cert.version_sets.as_ref().unwrap()[&OpRef { txn: TxnId(2), op: 1 }];
    set.iter()
        .map(|s| match h.object(s.obj).key {
            Scalar::Int(k) => (k, s.writer),
            ref other => panic!("key {other:?}"),
        })
        .collect()
}

#[test]
fn a_compact_version_set_resolves_by_the_snapshot_rule_and_round_trips() {
    let (t1, t2, t3) = (Writer::Txn(TxnId(0)), Writer::Txn(TxnId(1)), Writer::Txn(TxnId(2)));
    // Through 4: T1 (committed at 2) is visible, T2 (at 6) is not; row 2 is T3's own
    // write; row 3 was unborn.
    assert_eq!(resolved(r#"{"visible_through":4}"#), vec![(1, t1), (2, t3), (3, t2)][..2].to_vec());
    // Through 6: T2's row 3 too (row 2 stays the reader's own).
    assert_eq!(resolved(r#"{"visible_through":6}"#), vec![(1, t1), (2, t3), (3, t2)]);
    // Through 1: nothing committed yet, the initial rows only.
    assert_eq!(resolved(r#"{"visible_through":1}"#), vec![(1, Writer::Initial), (2, t3)]);
    // Exceptions win over the rule.
    assert_eq!(
        resolved(
            r#"{"visible_through":6,"except":[{"table":"t","key":1,"writer":null}],"unseen":[{"table":"t","key":3}]}"#
        ),
        vec![(1, Writer::Initial), (2, t3)]
    );
    // Written back byte for byte.
    let text = snapshot_cert(
        r#"{"visible_through":6,"except":[{"table":"t","key":1,"writer":null}],"unseen":[{"table":"t","key":3}]}"#,
    );
    let mut h = v1::read_history(SNAP_HISTORY.as_bytes()).unwrap();
    let cert = v1::read_certificate(text.as_bytes(), &mut h).unwrap();
    assert!(cert.snapshot_sets.is_some());
    let mut out = Vec::new();
    v1::write_certificate(&h, &cert, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
}

#[test]
fn compact_version_set_errors_name_the_field() {
    let error = |snapshot: &str| {
        let mut h = v1::read_history(SNAP_HISTORY.as_bytes()).unwrap();
        v1::read_certificate(snapshot_cert(snapshot).as_bytes(), &mut h).unwrap_err().to_string()
    };
    let e = error(r#"{"visible_through":"x"}"#);
    assert!(e.contains("version_sets[0].snapshot.visible_through"), "{e}");
    let e = error(r#"{"visible_through":4,"except":[{"table":"t","key":1,"writer":99}]}"#);
    assert!(e.contains("version_sets[0].snapshot.except[0].writer") && e.contains("99"), "{e}");
    let e = error(
        r#"{"visible_through":4,"except":[{"table":"t","key":1,"writer":1}],"unseen":[{"table":"t","key":1}]}"#,
    );
    assert!(e.contains("version_sets[0].snapshot.unseen[0]") && e.contains("twice"), "{e}");
    let e = error(r#"{"visible_through":4,"bogus":1}"#);
    assert!(e.contains("bogus"), "{e}");
    // Both forms, or neither.
    let mut h = v1::read_history(SNAP_HISTORY.as_bytes()).unwrap();
    let both = r#"{"version_sets":[{"txn":3,"op":1,"versions":[],"snapshot":{"visible_through":4}}]}"#;
    let e = v1::read_certificate(both.as_bytes(), &mut h).unwrap_err().to_string();
    assert!(e.contains("version_sets[0]") && e.contains("both"), "{e}");
    let neither = r#"{"version_sets":[{"txn":3,"op":1}]}"#;
    let e = v1::read_certificate(neither.as_bytes(), &mut h).unwrap_err().to_string();
    assert!(e.contains("version_sets[0]") && e.contains("versions"), "{e}");
    // A writer without a commit timestamp cannot be placed: the expansion says which.
    let no_ts = SNAP_HISTORY.replace(r#","commit_ts":6"#, "");
    let mut h = v1::read_history(no_ts.as_bytes()).unwrap();
    let mut cert =
        v1::read_certificate(snapshot_cert(r#"{"visible_through":4}"#).as_bytes(), &mut h).unwrap();
    let e = cert.expand_snapshot_sets(&h).unwrap_err().to_string();
    assert!(e.contains("T2") && e.contains("commit timestamp"), "{e}");
}

/// The per-row interface the checker's delta walk uses (`seek`, `row`, `take_changes`,
/// `resolve_object`) against `resolve_into`, at every snapshot of the history, moving back
/// and forth.
#[test]
fn the_resolver_rows_and_changes_agree_with_resolving_the_whole_set() {
    use isocert_history::{SnapshotResolver, SnapshotRow, SnapshotSet, Timestamp};
    let mut h = v1::read_history(SNAP_HISTORY.as_bytes()).unwrap();
    let cert = v1::read_certificate(snapshot_cert(r#"{"visible_through":4}"#).as_bytes(), &mut h).unwrap();
    let at = OpRef { txn: TxnId(2), op: 1 };
    let table = h.predicate(h.txn(at.txn).ops[1].predicate().unwrap()).table;
    let mut resolver = SnapshotResolver::new(&h, &cert);
    resolver.record_changes();
    let mut rows: Vec<SnapshotRow> = resolver.objects(table).iter().map(|&o| resolver.row(o)).collect();
    let (mut changes, mut moved) = (Vec::new(), 0);
    for wall in [7, 1, 6, 2, 9, 3, 3, 0] {
        let snap = SnapshotSet {
            visible_through: Timestamp { wall, logical: 0 },
            except: Vec::new(),
            unseen: Vec::new(),
        };
        resolver.seek(snap.visible_through);
        resolver.take_changes(&mut changes);
        moved += changes.len();
        let objs = resolver.objects(table).to_vec();
        for (k, &o) in objs.iter().enumerate() {
            let now = resolver.row(o);
            assert!(now == rows[k] || changes.contains(&o), "row {k} changed unannounced at {wall}");
            rows[k] = now;
        }
        let mut whole = Vec::new();
        resolver.resolve_into(&h, at, &snap, &mut whole).unwrap();
        let own = SnapshotResolver::earlier_writes(&h, at);
        let one_by_one: Vec<SeenVersion> =
            objs.iter().filter_map(|&o| resolver.resolve_object(&h, at, &snap, o, &own).unwrap()).collect();
        assert_eq!(whole, one_by_one, "through {wall}");
        // Rows the reader did not write show the snapshot's newest writer.
        let row1 = match rows[0] {
            SnapshotRow::Txn(w) => Writer::Txn(w),
            SnapshotRow::Initial => Writer::Initial,
            other => panic!("row 1 is {other:?}"),
        };
        assert_eq!(whole[0].writer, row1, "through {wall}");
    }
    assert!(moved >= 4, "the snapshot moved over commits {moved} times");
}
