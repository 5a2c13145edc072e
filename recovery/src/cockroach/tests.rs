use isocert_history::{v1, Timestamp};

use super::*;

#[test]
fn hlc_decimals_parse_as_pairs() {
    assert_eq!(parse_hlc("1700000000123456789.0000000003").unwrap(), Timestamp::hlc(1700000000123456789, 3));
    assert_eq!(parse_hlc("1700000000123456789.0000000000").unwrap(), Timestamp::hlc(1700000000123456789, 0));
    assert_eq!(parse_hlc("5.1").unwrap(), Timestamp::hlc(5, 1_000_000_000));
    assert_eq!(parse_hlc("42").unwrap(), Timestamp::new(42));
    assert_eq!(parse_hlc("1700000000000000000.0000000002?").unwrap(), Timestamp::hlc(1700000000000000000, 2));
    assert!(parse_hlc("1.00000000001").unwrap_err().contains("1.00000000001"));
    assert!(parse_hlc("x.1").is_err());
    let facts = CrdbTxnFacts { commit_ts: Some("7.0000000001".into()), ..CrdbTxnFacts::default() };
    assert_eq!(facts.commit_timestamp().unwrap(), Some(Timestamp::hlc(7, 1)));
}

const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"postgres","initial":[{"table":"items","key":1,"value":{"id":1,"v":0}},{"table":"items","key":2,"value":{"id":2,"v":0}}]}"#;

#[test]
fn a_predicate_update_and_another_write_of_its_row_are_refused_naming_the_transaction() {
    let text = format!(
        "{HEADER}\n{}",
        r#"{"id":7,"session":1,"ops":[{"f":"update","table":"items","where":"v = 0","set":{"v":5},"rows":[{"key":1,"value":{"id":1,"v":5}},{"key":2,"value":{"id":2,"v":5}}]},{"f":"w","table":"items","key":2,"value":{"id":2,"v":9}}]}"#
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    let e = single_change_per_row(&h).unwrap_err().to_string();
    assert!(e.contains("7") && e.contains("ops 0 and 1") && e.contains("last change"), "{e}");
    // Its near twin: the other write is to a row the update did not touch.
    let text = format!(
        "{HEADER}\n{}",
        r#"{"id":7,"session":1,"ops":[{"f":"update","table":"items","where":"v = 0 AND id = 1","set":{"v":5},"rows":[{"key":1,"value":{"id":1,"v":5}}]},{"f":"w","table":"items","key":2,"value":{"id":2,"v":9}}]}"#
    );
    single_change_per_row(&v1::read_history(text.as_bytes()).unwrap()).unwrap();
}
