//! Changefeed payloads exactly as CockroachDB emits them. Where each shape comes from:
//! - the wrapped envelope with `updated`, `mvcc_timestamp` and `diff` (`before`), key
//!   order `after, before, updated, mvcc_timestamp` and `", "`/`": "` spacing: the docs page
//!   "Changefeed Messages" (Responses, Delete messages, Resolved messages) and
//!   `pkg/ccl/changefeedccl/encoder_json.go` (`initWrappedEnvelope`, `EncodeResolvedTimestamp`);
//! - timestamps `%d.%010d`: `pkg/util/hlc/timestamp.go` (`AsOfSystemTime`);
//! - sinkless rows `(table, key, value)` with BYTES key and value, shown by pgwire's text
//!   format as `\x` hex, and resolved rows with NULL table and key: "Create and Configure
//!   Changefeeds" (sinkless changefeeds) and `cockroach sql` output there.

use super::*;

const T1: &str = "1700000000100000000.0000000000";
const T2: &str = "1700000000200000000.0000000000";
const T2B: &str = "1700000000200000000.0000000001";
const T3: &str = "1700000000300000000.0000000000";

fn ts(s: &str) -> Timestamp {
    parse_hlc(s).unwrap()
}

fn json(s: &str) -> Json {
    serde_json::from_str(s).unwrap()
}

fn msg(table: &str, key: &str, value: &str) -> FeedMessage {
    parse_message(Some(table), Some(&json(key)), &json(value)).unwrap()
}

fn insert(key: i64, v: i64, at: &str) -> FeedMessage {
    msg(
        "items",
        &format!("[{key}]"),
        &format!(
            r#"{{"after": {{"id": {key}, "v": {v}}}, "before": null, "mvcc_timestamp": "{at}", "updated": "{at}"}}"#
        ),
    )
}

fn resolved(at: &str) -> FeedMessage {
    parse_message(None, None, &json(&format!(r#"{{"resolved": "{at}"}}"#))).unwrap()
}

#[test]
fn inserts_updates_and_deletes_parse_with_their_before_images() {
    let FeedMessage::Change(c) = insert(1, 10, T1) else { panic!("a change") };
    assert_eq!((c.table.as_str(), &c.key, c.updated), ("items", &Scalar::Int(1), ts(T1)));
    assert_eq!(c.after, Some(vec![("id".into(), Scalar::Int(1)), ("v".into(), Scalar::Int(10))]));
    assert_eq!((c.before, c.mvcc_timestamp), (None, Some(ts(T1))));
    let FeedMessage::Change(u) = msg(
        "items",
        "[1]",
        &format!(
            r#"{{"after": {{"id": 1, "v": 11}}, "before": {{"id": 1, "v": 10}}, "mvcc_timestamp": "{T2}", "updated": "{T2}"}}"#
        ),
    ) else {
        panic!("a change")
    };
    assert_eq!(u.before, Some(vec![("id".into(), Scalar::Int(1)), ("v".into(), Scalar::Int(10))]));
    let FeedMessage::Change(d) = msg(
        "items",
        "[1]",
        &format!(
            r#"{{"after": null, "before": {{"id": 1, "v": 11}}, "mvcc_timestamp": "{T3}", "updated": "{T3}"}}"#
        ),
    ) else {
        panic!("a change")
    };
    assert_eq!((d.after, d.updated), (None, ts(T3)));
    assert_eq!(resolved(T3), FeedMessage::Resolved(ts(T3)));
}

#[test]
fn sinkless_rows_arrive_as_hex_bytes() {
    // `[1]` and a value, as pgwire's text format shows BYTES.
    let hex = |s: &str| format!("\\x{}", s.bytes().map(|b| format!("{b:02x}")).collect::<String>());
    let key = bytes_text(&hex("[1]")).unwrap();
    let value =
        bytes_text(&hex(&format!(r#"{{"after": {{"id": 1, "v": 10}}, "before": null, "updated": "{T1}"}}"#)))
            .unwrap();
    assert_eq!(parse_message(Some("items"), Some(&key), &value).unwrap(), {
        let FeedMessage::Change(mut c) = insert(1, 10, T1) else { panic!() };
        c.mvcc_timestamp = None;
        FeedMessage::Change(c)
    });
    assert!(bytes_text("\\x5b3").unwrap_err().contains("odd-length"));
    assert!(bytes_text("\\xzz").unwrap_err().contains("bad hex"));
}

#[test]
fn bad_messages_name_the_field() {
    let e = |table: Option<&str>, key: Option<&str>, value: &str| {
        parse_message(table, key.map(json).as_ref(), &json(value)).unwrap_err()
    };
    assert!(e(Some("items"), Some("[1]"), r#"{"id": 1, "v": 10}"#).contains("wrapped envelope"));
    assert!(e(Some("items"), Some("[1]"), r#"{"after": {"id": 1}}"#).contains("WITH updated"));
    assert!(e(Some("items"), Some("[1, 2]"), &format!(r#"{{"after": null, "updated": "{T1}"}}"#))
        .contains("2 columns"));
    assert!(e(Some("items"), Some("[1]"), r#"{"after": null, "updated": "soon"}"#).contains("updated"));
    assert!(e(Some("items"), Some("[1]"), &format!(r#"{{"after": {{"v": [1]}}, "updated": "{T1}"}}"#))
        .contains("after.v"));
    assert!(e(None, Some("[1]"), &format!(r#"{{"after": null, "updated": "{T1}"}}"#)).contains("table"));
    assert!(e(Some("items"), None, "[1]").contains("not a JSON object"));
}

#[test]
fn changes_group_into_transactions_by_commit_timestamp_in_hlc_order() {
    let mut log = FeedLog::new();
    // A transaction writing rows 1 and 2 at T2, one writing row 3 at T1, delivered out of
    // order (different ranges), and a delete at T3.
    for m in [insert(2, 20, T2), insert(3, 30, T1), insert(1, 21, T2)] {
        assert!(log.push(0, m).unwrap());
    }
    log.push(
        0,
        msg(
            "items",
            "[3]",
            &format!(r#"{{"after": null, "before": {{"id": 3, "v": 30}}, "updated": "{T3}"}}"#),
        ),
    )
    .unwrap();
    let raw = log.to_raw_log();
    let shape: Vec<(i64, Vec<String>)> = raw
        .txns()
        .iter()
        .map(|t| {
            (t.commit_time, t.changes.iter().map(|c| format!("{}:{}", c.key, c.row.is_some())).collect())
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (1700000000100000000, vec!["3:true".to_string()]),
            (1700000000200000000, vec!["1:true".to_string(), "2:true".to_string()]),
            (1700000000300000000, vec!["3:false".to_string()]),
        ]
    );
    assert_eq!(raw.txns().iter().map(|t| t.commit_lsn).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!((log.txn_count(), log.change_count()), (3, 4));
}

#[test]
fn a_row_rewritten_in_one_transaction_is_one_change() {
    // INSERT then UPDATE of row 5 in one transaction: CockroachDB emits only the last
    // version, `before` being the row before the transaction (none).
    let mut log = FeedLog::new();
    log.push(0, insert(5, 52, T1)).unwrap();
    let raw = log.to_raw_log();
    assert_eq!(raw.change_count(), 1);
    assert_eq!(raw.txns()[0].changes[0].row.as_ref().unwrap()[1].1, Scalar::Int(52));
    // A second, different change of that row at the same timestamp cannot come from CockroachDB.
    let e = log.push(0, insert(5, 51, T1)).unwrap_err();
    assert!(e.contains("items[5]") && e.contains("one change per row"), "{e}");
}

#[test]
fn redeliveries_are_dropped_even_after_newer_changes() {
    let mut log = FeedLog::new();
    assert!(log.push(0, insert(1, 10, T1)).unwrap());
    assert!(log.push(0, insert(1, 11, T2)).unwrap());
    // After a restart CockroachDB re-emits from its last checkpoint: T1 again, then T2.
    assert!(!log.push(0, insert(1, 10, T1)).unwrap());
    assert!(!log.push(0, insert(1, 11, T2)).unwrap());
    assert_eq!((log.duplicates(), log.change_count(), log.to_raw_log().len()), (2, 2, 2));
}

#[test]
fn hlc_ties_on_the_wall_clock_are_ordered_by_the_logical_counter() {
    let mut log = FeedLog::new();
    log.push(0, insert(1, 12, T2B)).unwrap();
    log.push(0, insert(1, 11, T2)).unwrap();
    let raw = log.to_raw_log();
    assert_eq!(raw.len(), 2, "same wall time, different logical: two transactions");
    let values: Vec<&Scalar> = raw.txns().iter().map(|t| &t.changes[0].row.as_ref().unwrap()[1].1).collect();
    assert_eq!(values, [&Scalar::Int(11), &Scalar::Int(12)]);
    assert_eq!(raw.txns()[0].commit_time, raw.txns()[1].commit_time);
}

#[test]
fn the_watermark_is_the_lowest_partition_and_completeness_needs_it_past_the_last_commit() {
    let mut log = FeedLog::new();
    log.push(0, insert(1, 10, T1)).unwrap();
    log.push(1, insert(2, 20, T2)).unwrap();
    assert!(!log.is_complete() && log.watermark().is_none());
    log.push(0, resolved(T3)).unwrap();
    assert_eq!(log.watermark_of(2), None, "partition 1 has not resolved yet");
    log.push(1, resolved(T1)).unwrap();
    assert_eq!(log.watermark(), Some(ts(T1)));
    assert!(log.covers(ts(T1)) && !log.is_complete());
    log.push(1, resolved(T2)).unwrap();
    // An older resolved timestamp never moves a partition back.
    log.push(1, resolved(T1)).unwrap();
    assert_eq!(log.watermark_of(2), Some(ts(T2)));
    assert!(log.is_complete());
    // A new change below its partition's resolved timestamp is counted as late.
    log.push(0, insert(3, 30, T2B)).unwrap();
    assert_eq!(log.late(), 1);
}

#[test]
fn capture_files_hold_sinkless_rows_and_bad_lines_are_named() {
    let lines = [
        capture_line(
            Some("items"),
            Some(&json("[1]")),
            &json(&format!(r#"{{"after": {{"id": 1, "v": 10}}, "updated": "{T1}"}}"#)),
            None,
        ),
        // `cockroach sql --format=ndjson` shows BYTES as strings of JSON.
        format!(
            r#"{{"table":"items","key":"[2]","value":"{{\"after\": {{\"id\": 2, \"v\": 20}}, \"updated\": \"{T2}\"}}"}}"#
        ),
        format!(r#"{{"table":null,"key":null,"value":{{"resolved":"{T2}"}}}}"#),
        String::new(),
        format!(r#"{{"resolved":"{T3}"}}"#),
    ];
    let log = read_capture(lines.join("\n").as_bytes()).unwrap();
    assert_eq!((log.txn_count(), log.watermark()), (2, Some(ts(T3))));
    assert!(log.is_complete());
    let e = read_capture(format!("{}\n{{\"table\":\"items\",\"key\":[3]}}\n", lines[0]).as_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2: changefeed") && e.contains("value"), "{e}");
    let e =
        read_capture("{\"partition\":-1,\"resolved\":\"1.0000000000\"}".as_bytes()).unwrap_err().to_string();
    assert!(e.contains("line 1: changefeed: partition"), "{e}");
}

/// Variants across versions, each as CockroachDB writes it, and the near misses of each
/// that must be refused. Sources: `pkg/ccl/changefeedccl/encoder_json.go` (cockroachdb/
/// cockroach master, 2024: `EncodeResolvedTimestamp` writes `{"resolved":"…"}` without
/// spaces, as the Kafka sink delivers it; the wrapped envelope leaves `before` out unless
/// `diff` is asked for and `mvcc_timestamp` unless `mvcc_timestamp` is), the docs page
/// "Changefeed Messages" (`envelope=bare` puts the row at the top level with
/// its metadata under `__crdb__`), and isocert's own options (`WITH updated`).
#[test]
fn envelope_variants_parse_and_their_near_misses_are_refused() {
    // Kafka's compact resolved message.
    let compact = json(&format!(r#"{{"resolved":"{T2}"}}"#));
    assert_eq!(parse_message(None, None, &compact).unwrap(), FeedMessage::Resolved(ts(T2)));
    // Without `diff` and `mvcc_timestamp` (a changefeed created with `updated` only).
    let FeedMessage::Change(c) =
        msg("items", "[7]", &format!(r#"{{"after":{{"id":7,"v":70}},"updated":"{T2B}"}}"#))
    else {
        panic!("a change")
    };
    assert_eq!((c.before, c.mvcc_timestamp, c.updated), (None, None, ts(T2B)));
    // A key given as the JSON text of the array, as `cockroach sql --format=ndjson` prints BYTES.
    let FeedMessage::Change(c) = parse_message(
        Some("items"),
        Some(&Json::String("[7]".into())),
        &json(&format!(r#"{{"after":null,"updated":"{T3}"}}"#)),
    )
    .unwrap() else {
        panic!("a change")
    };
    assert_eq!((c.key, c.after), (Scalar::Int(7), None));

    let refused = |value: &str| parse_message(Some("items"), Some(&json("[7]")), &json(value)).unwrap_err();
    // envelope=bare: the row with `__crdb__` metadata, not the wrapped envelope.
    let bare = refused(&format!(r#"{{"id":7,"v":70,"__crdb__":{{"updated":"{T2}"}}}}"#));
    assert!(bare.contains("wrapped envelope"), "{bare}");
    // A resolved timestamp as a number, not Go's `%d.%010d` text.
    let e = parse_message(None, None, &json(r#"{"resolved":1700000000300000000}"#)).unwrap_err();
    assert!(e.contains("resolved") && e.contains("HLC timestamp string"), "{e}");
    // `updated` left out: created without `WITH updated`.
    assert!(refused(r#"{"after":{"id":7,"v":70},"before":null}"#).contains("WITH updated"));
    // A before image that is neither a row nor null.
    let e = refused(&format!(r#"{{"after":null,"before":[7],"updated":"{T3}"}}"#));
    assert!(e.contains("before"), "{e}");
}
