//! King Cobra's `.vo` version order beside Cobra logs: fixtures shaped like its examples,
//! round trips with a certificate, and malformed files.

use isocert_history::formats::{
    parse_king_cobra_version_order, read_cobra_dir_with_version_order, read_cobra_log_with_version_order,
    write_king_cobra_version_order, Format, COBRA_INIT_ID,
};
use isocert_history::{v1, Certificate, FormatError, History, Scalar};

use super::{fixture, v1_history, v1_text};

fn be(words: &[i64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A one-client log: transaction 1 writes keys 0 and 1 (write ids 1 and 2, values 10 and
/// 20); transaction 2 reads key 0 from it and writes key 0 again (write id 3, value 11).
fn log() -> Vec<u8> {
    let mut b = vec![b'S'];
    b.extend(be(&[1]));
    b.push(b'W');
    b.extend(be(&[1, 0, 10]));
    b.push(b'W');
    b.extend(be(&[2, 1, 20]));
    b.push(b'C');
    b.extend(be(&[1]));
    b.push(b'S');
    b.extend(be(&[2]));
    b.push(b'R');
    b.extend(be(&[1, 1, 0, 10]));
    b.push(b'W');
    b.extend(be(&[3, 0, 11]));
    b.push(b'C');
    b.extend(be(&[2]));
    b
}

/// The version order as `(key, writer names)`, keys sorted.
fn order_of(h: &History, cert: &Certificate) -> Vec<(Scalar, Vec<Scalar>)> {
    let mut out: Vec<_> = cert
        .version_order
        .as_ref()
        .expect("a version order")
        .iter()
        .map(|(&obj, ts)| (h.object(obj).key.clone(), ts.iter().map(|&t| h.txn(t).name.clone()).collect()))
        .collect();
    out.sort();
    out
}

#[test]
fn the_cyclic_example_orders_every_write_by_its_value() {
    let dir = fixture("king-cobra/cyclic");
    let imported =
        read_cobra_dir_with_version_order(&dir.join("history"), &dir.join("version_order.vo")).unwrap();
    let h = &imported.history;
    assert_eq!(h.session_name(h.txns[0].session), &Scalar::Int(0), "King Cobra's 0.log is session 0");
    let cert = imported.certificate.expect("the .vo becomes the certificate");
    let int = Scalar::Int;
    assert_eq!(
        order_of(h, &cert),
        [(int(0), vec![int(1), int(2)]), (int(1), vec![int(1), int(3)])],
        "value 0 of each key is transaction 1's, value 1 is the later writer's"
    );
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
}

#[test]
fn a_partial_order_is_read_with_a_note_naming_the_missing_write() {
    let dir = fixture("king-cobra/serial");
    let imported = read_cobra_dir_with_version_order(&dir.join("history"), &dir.join("partial.vo")).unwrap();
    let notes = imported.notes.join("\n");
    assert!(notes.contains("partial") && notes.contains("T3's write of key 1"), "{notes}");
    let order = imported.certificate.unwrap().version_order.unwrap();
    let h = &imported.history;
    let listed: usize = order.values().map(Vec::len).sum();
    let committed_writes: usize = h
        .txns
        .iter()
        .filter(|t| t.status == isocert_history::Status::Committed)
        .map(|t| t.ops.iter().filter(|o| matches!(o, isocert_history::Op::Write { .. })).count())
        .sum();
    assert!(listed > 0 && listed < committed_writes, "{listed} of {committed_writes} writes listed");
}

#[test]
fn versions_nobody_wrote_and_unknown_keys_are_skipped_and_noted() {
    let vo = be(&[2, 0, 3, 10, 99, 11, 7, 1, 5]);
    let empty = read_cobra_log_with_version_order(Scalar::Int(0), &log(), &be(&[0])).unwrap();
    assert!(empty.notes.join("\n").contains("partial"), "{:?}", empty.notes);
    let vo_complete = [vo, be(&[])].concat();
    let partial = read_cobra_log_with_version_order(Scalar::Int(0), &log(), &vo_complete).unwrap();
    assert!(
        partial.notes.join("\n").contains("T1's write of key 1"),
        "key 1 is not ordered: {:?}",
        partial.notes
    );
    let vo = be(&[3, 0, 3, 10, 99, 11, 1, 1, 20, 7, 1, 5]);
    let imported = read_cobra_log_with_version_order(Scalar::Int(0), &log(), &vo).unwrap();
    let int = Scalar::Int;
    let cert = imported.certificate.as_ref().unwrap();
    assert_eq!(order_of(&imported.history, cert), [(int(0), vec![int(1), int(2)]), (int(1), vec![int(1)])]);
    let notes = imported.notes.join("\n");
    assert!(notes.contains("1 keys of the version order do not occur"), "{notes}");
    assert!(notes.contains("1 versions of the version order match no write"), "{notes}");
}

#[test]
fn the_implicit_initial_version_may_lead_the_order() {
    let mut log = vec![b'S'];
    log.extend(be(&[5]));
    log.push(b'R');
    log.extend(be(&[COBRA_INIT_ID, COBRA_INIT_ID, 4, COBRA_INIT_ID]));
    log.push(b'W');
    log.extend(be(&[9, 4, 40]));
    log.push(b'C');
    log.extend(be(&[5]));
    let ok =
        read_cobra_log_with_version_order(Scalar::Int(0), &log, &be(&[1, 4, 2, COBRA_INIT_ID, 40])).unwrap();
    assert_eq!(ok.certificate.unwrap().version_order.unwrap().values().next().unwrap().len(), 1);
    let err = read_cobra_log_with_version_order(Scalar::Int(0), &log, &be(&[1, 4, 2, 40, COBRA_INIT_ID]))
        .unwrap_err();
    assert!(err.to_string().contains("must come first"), "{err}");
}

#[test]
fn a_value_two_transactions_wrote_cannot_name_a_version() {
    let mut two = log();
    two.push(b'S');
    two.extend(be(&[3]));
    two.push(b'W');
    two.extend(be(&[4, 0, 10]));
    two.push(b'C');
    two.extend(be(&[3]));
    let err = read_cobra_log_with_version_order(Scalar::Int(0), &two, &be(&[1, 0, 1, 10])).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, FormatError::Binary { offset: 24, .. }), "{message}");
    assert!(message.contains("written by both T1 and T3") && message.contains("unique per key"), "{message}");
}

#[test]
fn malformed_files_name_offset_and_field() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0, 0, 0], "byte offset 0: key_count: file ends inside the number"),
        (be(&[-1]), "byte offset 0: key_count: -1 keys cannot fit"),
        (be(&[1 << 40]), "byte offset 0: key_count: 1099511627776 keys cannot fit"),
        (be(&[1, 7, 3, 1]), "byte offset 16: version_count: key 7 declares 3 versions but 8 bytes follow"),
        (be(&[2, 7, 0, 7, 0]), "byte offset 24: key: key 7 is listed twice (first at byte 8)"),
        (be(&[1, 7, 2, 5, 5]), "byte offset 32: version: key 7 lists value 5 twice"),
        ([be(&[1, 7, 1, 5]), vec![1]].concat(), "byte offset 32: end: 1 bytes follow the last of the 1 keys"),
        (
            [be(&[1, 7, 1]), vec![0, 0]].concat(),
            "byte offset 16: version_count: key 7 declares 1 versions but 2 bytes follow",
        ),
    ];
    for (bytes, expected) in cases {
        let message = parse_king_cobra_version_order(&bytes).unwrap_err().to_string();
        assert!(message.contains(expected), "expected {expected:?} in: {message}");
    }
}

#[test]
fn malformed_file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0.log"), log()).unwrap();
    let vo = dir.path().join("order.vo");
    std::fs::write(&vo, [0u8; 5]).unwrap();
    let err = read_cobra_dir_with_version_order(dir.path(), &vo).unwrap_err().to_string();
    assert!(err.contains("order.vo: byte offset 0: key_count"), "{err}");
}

#[test]
fn round_trip_with_the_certificate_is_identity() {
    let mut h = v1_history(&format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"key":8,"value":{COBRA_INIT_ID}}}]}}
{{"id":1,"session":1,"ops":[{{"f":"w","key":7,"value":101}},{{"f":"r","key":8,"value":{COBRA_INIT_ID}}}]}}
{{"id":3,"session":1,"ops":[{{"f":"r","key":8,"value":201}},{{"f":"w","key":7,"value":301}}]}}
{{"id":2,"session":2,"ops":[{{"f":"r","key":9,"value":null}},{{"f":"w","key":8,"value":201}}]}}
{{"id":4,"session":2,"status":"unknown","ops":[{{"f":"r","key":7,"value":101}}]}}
"#
    ));
    let cert_text =
        r#"{"version_order":[{"table":"kv","key":7,"writers":[1,3]},{"table":"kv","key":8,"writers":[2]}]}"#;
    let cert = v1::read_certificate(cert_text.as_bytes(), &mut h).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("history");
    Format::Cobra.write_path(&h, &logs).unwrap();
    let vo = dir.path().join("version_order.vo");
    let mut bytes = Vec::new();
    write_king_cobra_version_order(&h, &cert, &mut bytes).unwrap();
    std::fs::write(&vo, bytes).unwrap();
    let back = read_cobra_dir_with_version_order(&logs, &vo).unwrap();
    assert_eq!(v1_text(&back.history), v1_text(&h), "the history survives");
    let cert_back = back.certificate.unwrap();
    assert_eq!(order_of(&back.history, &cert_back), order_of(&h, &cert), "the version order survives");
}

#[test]
fn writing_refuses_what_the_file_cannot_name() {
    let mut h = v1_history(r#"{"id":1,"session":1,"ops":[{"f":"append","key":1,"value":5}]}"#);
    let cert = v1::read_certificate(
        r#"{"version_order":[{"table":"kv","key":1,"writers":[1]}]}"#.as_bytes(),
        &mut h,
    )
    .unwrap();
    let err = write_king_cobra_version_order(&h, &cert, &mut Vec::new()).unwrap_err().to_string();
    assert!(err.contains("T1 has no item write of"), "{err}");
    let err = write_king_cobra_version_order(&h, &Certificate::default(), &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("no version order"), "{err}");
}

#[test]
fn a_king_cobra_example_directory_gets_a_hint() {
    let dir = fixture("king-cobra/cyclic");
    let err = Format::Cobra.read_path(&dir).unwrap_err().to_string();
    assert!(err.contains("no *.log files (King Cobra's layout: give"), "{err}");
    assert!(err.contains("--certificate") && err.contains("version_order.vo"), "{err}");
}
