//! Chronos: each axiom's violation and its valid twin, ties, HLC, lists, SER.

use isocert_history::{v1, KvHistory, Scalar};

use super::check_chronos_kv as check_kv;
use crate::{AnomalyKind, IsolationLevel, Report};

/// Runs Chronos on a v1 history given as lines `id session start commit ops`, where ops
/// are v1 op objects; `initial` becomes the default initial value.
pub(crate) fn run(text: &str, level: IsolationLevel, initial: Option<i64>) -> Report {
    let h = v1::read_history(text.as_bytes()).expect("test history parses");
    let mut kv = KvHistory::from_history(&h).unwrap();
    kv.set_default_initial(initial.map(Scalar::Int).as_ref());
    check_kv(kv, level).expect("check runs").0
}

pub(crate) fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;

#[test]
fn ext_violation_and_its_valid_twin() {
    let bad = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":4,"ops":[{"f":"r","key":"x","value":0}]}"#;
    let r = run(bad, SI, Some(0));
    assert_eq!(kinds(&r), [AnomalyKind::Ext]);
    let e = &r.anomalies[0].explanation;
    assert!(
        e.contains("T2 (operation 1) read kv[\"x\"] = 0")
            && e.contains("expected 1, seen 0")
            && e.contains("T1"),
        "{e}"
    );
    // Twin: the reader starts before the writer commits, so 0 is right.
    let good = bad.replace(r#""start_ts":3,"commit_ts":4"#, r#""start_ts":1,"commit_ts":4"#);
    assert!(run(&good, SI, Some(0)).is_valid());
}

#[test]
fn int_violation_and_its_valid_twin() {
    let bad = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":5},{"f":"r","key":"x","value":0}]}"#;
    let r = run(bad, SI, Some(0));
    assert_eq!(kinds(&r), [AnomalyKind::Int]);
    assert!(r.anomalies[0].explanation.contains("expected 5, seen 0"), "{}", r.anomalies[0].explanation);
    let good = bad.replace(r#""value":0}]"#, r#""value":5}]"#);
    assert!(run(&good, SI, Some(0)).is_valid());
    // Repeated reads must agree too.
    let reread = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"x","value":1}]}"#;
    assert_eq!(kinds(&run(reread, SI, Some(0))), [AnomalyKind::Int]);
}

#[test]
fn session_violation_and_its_valid_twin() {
    let bad = r#"{"id":1,"session":"s","start_ts":1,"commit_ts":5,"ops":[]}
{"id":2,"session":"s","start_ts":3,"commit_ts":6,"ops":[]}"#;
    let r = run(bad, SI, None);
    assert_eq!(kinds(&r), [AnomalyKind::Session]);
    assert_eq!(r.anomalies[0].txns.len(), 2);
    let good = bad.replace(r#""start_ts":3"#, r#""start_ts":5"#);
    assert!(run(&good, SI, None).is_valid(), "commit == next start is visible");
    let other_session = bad.replace(r#""id":2,"session":"s""#, r#""id":2,"session":"t""#);
    assert!(run(&other_session, SI, None).is_valid());
}

#[test]
fn no_conflict_violation_and_its_valid_twin() {
    let bad = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":5,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":2,"commit_ts":6,"ops":[{"f":"w","key":"x","value":2}]}"#;
    let r = run(bad, SI, Some(0));
    assert_eq!(kinds(&r), [AnomalyKind::NoConflict]);
    let a = &r.anomalies[0];
    assert_eq!(a.txns, [isocert_history::TxnId(0), isocert_history::TxnId(1)]);
    assert!(a.explanation.contains("both wrote kv[\"x\"]"), "{}", a.explanation);
    let good = bad.replace(r#""start_ts":2"#, r#""start_ts":5"#);
    assert!(run(&good, SI, Some(0)).is_valid());
    // Lost update is a NoConflict violation only: each read its snapshot correctly.
    let lost = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":5,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":2,"commit_ts":6,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":2}]}"#;
    assert_eq!(kinds(&run(lost, SI, Some(0))), [AnomalyKind::NoConflict]);
}

#[test]
fn every_violation_is_reported() {
    let text = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":1,"value":1},{"f":"w","key":2,"value":1}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":4,"ops":[{"f":"r","key":1,"value":0},{"f":"r","key":2,"value":0},{"f":"r","key":3,"value":7}]}"#;
    assert_eq!(kinds(&run(text, SI, Some(0))), [AnomalyKind::Ext; 3]);
}

#[test]
fn hlc_timestamps_compare_wall_then_logical() {
    let text = r#"{"id":1,"session":1,"start_ts":"100.0000000001","commit_ts":"100.0000000002","ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":"100.0000000003","commit_ts":"100.0000000004","ops":[{"f":"r","key":"x","value":1}]}
{"id":3,"session":3,"start_ts":"100.0000000001","commit_ts":"101","ops":[{"f":"r","key":"x","value":0}]}"#;
    assert!(run(text, SI, Some(0)).is_valid());
    let stale = text.replace(r#"{"f":"r","key":"x","value":1}"#, r#"{"f":"r","key":"x","value":0}"#);
    assert_eq!(kinds(&run(&stale, SI, Some(0))), [AnomalyKind::Ext]);
}

#[test]
fn shared_timestamps_follow_the_visibility_rule() {
    // T1 commits at 5; T2 starts at 5 and so sees it; T3 is read-only with start == commit
    // == 5 and sees it too; T4 commits at 5 as well as T1, concurrently: NoConflict.
    let text = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":5,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":5,"commit_ts":7,"ops":[{"f":"r","key":"x","value":1}]}
{"id":3,"session":3,"start_ts":5,"commit_ts":5,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert!(run(text, SI, Some(0)).is_valid());
    let concurrent = format!(
        "{text}\n{}",
        r#"{"id":4,"session":4,"start_ts":2,"commit_ts":5,"ops":[{"f":"w","key":"y","value":1},{"f":"w","key":"x","value":2}]}"#
    );
    let r = run(&concurrent, SI, Some(0));
    assert!(kinds(&r).contains(&AnomalyKind::NoConflict), "{r:?}");
    // Two atomic writers of one object at one timestamp would each see the other.
    let atomic = r#"{"id":1,"session":1,"start_ts":5,"commit_ts":5,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":5,"commit_ts":5,"ops":[{"f":"w","key":"x","value":2}]}"#;
    assert_eq!(kinds(&run(atomic, SI, Some(0))), [AnomalyKind::NoConflict]);
}

#[test]
fn read_only_transactions_may_commit_at_their_start() {
    let text = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":1,"start_ts":2,"commit_ts":2,"ops":[{"f":"r","key":"x","value":1}]}
{"id":3,"session":1,"start_ts":2,"commit_ts":3,"ops":[{"f":"r","key":"x","value":1}]}"#;
    assert!(run(text, SI, Some(0)).is_valid());
}

#[test]
fn string_ids_and_aborted_transactions() {
    let text = r#"{"id":"a","session":"s1","start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":"v1"}]}
{"id":"b","session":"s2","status":"aborted","start_ts":2,"commit_ts":3,"ops":[{"f":"w","key":"x","value":"v2"}]}
{"id":"c","session":"s2","start_ts":4,"commit_ts":5,"ops":[{"f":"r","key":"x","value":"v1"}]}"#;
    assert!(run(text, SI, None).is_valid());
    let r = run(
        &text.replace(r#"{"f":"r","key":"x","value":"v1"}"#, r#"{"f":"r","key":"x","value":"v2"}"#),
        SI,
        None,
    );
    assert_eq!(kinds(&r), [AnomalyKind::Ext]);
    assert!(r.anomalies[0].explanation.contains("T\"c\""), "{}", r.anomalies[0].explanation);
}

#[test]
fn list_histories_append_and_read_lists() {
    let text = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"append","key":"l","value":1},{"f":"r","key":"l","value":[1]}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":5,"ops":[{"f":"r","key":"l","value":[1]},{"f":"append","key":"l","value":2},{"f":"r","key":"l","value":[1,2]}]}
{"id":3,"session":3,"start_ts":4,"commit_ts":6,"ops":[{"f":"r","key":"l","value":[1]}]}
{"id":4,"session":4,"start_ts":7,"commit_ts":8,"ops":[{"f":"r","key":"l","value":[1,2]},{"f":"r","key":"m","value":null}]}"#;
    assert!(run(text, SI, None).is_valid());
    let stale = text.replace(
        r#"{"f":"r","key":"l","value":[1,2]},{"f":"r","key":"m""#,
        r#"{"f":"r","key":"l","value":[1]},{"f":"r","key":"m""#,
    );
    assert_eq!(kinds(&run(&stale, SI, None)), [AnomalyKind::Ext]);
    let own = text.replace(r#"{"f":"r","key":"l","value":[1,2]}]}"#, r#"{"f":"r","key":"l","value":[2]}]}"#);
    let r = run(&own, SI, None);
    assert_eq!(kinds(&r), [AnomalyKind::Int]);
    assert!(
        r.anomalies[0].explanation.contains("expected [1, 2], seen [2]"),
        "{}",
        r.anomalies[0].explanation
    );
}

#[test]
fn serializable_runs_transactions_at_their_commit_timestamps() {
    // Write skew: valid under SI (disjoint writes, both read the initial snapshot), not SER.
    let skew = r#"{"id":1,"session":1,"start_ts":1,"commit_ts":3,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":2,"commit_ts":4,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}"#;
    assert!(run(skew, SI, Some(0)).is_valid());
    let r = run(skew, SER, Some(0));
    assert_eq!(kinds(&r), [AnomalyKind::Ext]);
    assert!(r.anomalies[0].explanation.contains("commit timestamp 4"), "{}", r.anomalies[0].explanation);
    let serial = skew.replace(
        r#""start_ts":2,"commit_ts":4,"ops":[{"f":"r","key":"x","value":0}"#,
        r#""start_ts":2,"commit_ts":4,"ops":[{"f":"r","key":"x","value":1}"#,
    );
    assert!(run(&serial, SER, Some(0)).is_valid());
}

#[test]
fn missing_timestamps_and_inverted_spans_are_input_errors() {
    let h = v1::read_history(r#"{"id":1,"session":1,"ops":[]}"#.as_bytes()).unwrap();
    let err = check_kv(KvHistory::from_history(&h).unwrap(), SI).unwrap_err();
    assert!(err.to_string().contains("start_ts and commit_ts on committed transaction T1"), "{err}");
    let h =
        v1::read_history(r#"{"id":1,"session":1,"start_ts":5,"commit_ts":4,"ops":[]}"#.as_bytes()).unwrap();
    let err = check_kv(KvHistory::from_history(&h).unwrap(), SI).unwrap_err();
    assert!(err.to_string().contains("starts after it commits"), "{err}");
    let h =
        v1::read_history(r#"{"id":1,"session":1,"start_ts":1,"commit_ts":4,"ops":[]}"#.as_bytes()).unwrap();
    assert!(check_kv(KvHistory::from_history(&h).unwrap(), IsolationLevel::ReadCommitted).is_err());
}

#[test]
fn operations_are_freed_block_by_block() {
    let mut text = String::new();
    for i in 0..(KvHistory::BLOCK * 2 + 5) {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":{},\"start_ts\":{},\"commit_ts\":{},\"ops\":[{{\"f\":\"w\",\"key\":{},\"value\":{i}}}]}}\n",
            i % 7,
            2 * i + 1,
            2 * i + 2,
            i % 13
        ));
    }
    let h = v1::read_history(text.as_bytes()).unwrap();
    let (report, kv) = check_kv(KvHistory::from_history(&h).unwrap(), SI).unwrap();
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(kv.op_count(), 0, "every block was freed");
    assert_eq!(report.stats.committed, KvHistory::BLOCK * 2 + 5);
}

/// The TimeKiller sample (`tests/fixtures/chronos/timekiller-format-kv.json`, from
/// shared/fixtures): 1,000 transactions recorded against a database under SI.
pub(crate) fn timekiller(initial: Option<i64>) -> KvHistory {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chronos/timekiller-format-kv.json");
    let file = std::fs::File::open(path).expect("the TimeKiller fixture");
    isocert_history::chronos::read_chronos(file, initial.map(Scalar::Int).as_ref()).expect("it parses")
}

#[test]
fn timekiller_sample_is_valid_with_initial_value_zero() {
    let (report, _) = check_kv(timekiller(Some(0)), SI).unwrap();
    assert!(report.is_valid(), "{:?}", report.anomalies.first());
    assert_eq!((report.stats.txns, report.stats.ops), (1000, 15000));
}

#[test]
fn timekiller_sample_without_initial_values_violates_ext_only() {
    let (report, _) = check_kv(timekiller(None), SI).unwrap();
    assert!(!report.is_valid());
    assert!(report.anomalies.iter().all(|a| a.kind == AnomalyKind::Ext));
    let first = &report.anomalies[0].explanation;
    assert!(first.contains("expected absent, seen 0"), "{first}");
}
