//! Dgraph's rule on histories shaped as the Dgraph session records them: `meta` holds
//! `start_ts` (from `extensions.txn.start_ts` of the first `/query` or `/mutate` answer) and
//! `commit_ts` (from `extensions.txn.commit_ts` of `/commit`), the shapes of Dgraph's
//! `dgraph/cmd/alpha/http.go` (queryHandler, mutationHandler, handleCommit).

use isocert_history::{v1, History, OpRef, Scalar, Status, Timestamp, TxnId, Writer};

use super::recover_dgraph;
use crate::{RawLog, RecoveryError};

const HEADER: &str = r#"{"format":"isocert-history","version":1,"dialect":"dgraph","initial":[{"table":"t","key":1,"value":{"id":1,"v":0}},{"table":"t","key":2,"value":{"id":2,"v":0}}]}"#;

fn history(lines: &[&str]) -> History {
    let text = std::iter::once(HEADER).chain(lines.iter().copied()).collect::<Vec<_>>().join("\n");
    v1::read_history(text.as_bytes()).expect("history")
}

fn recover(h: &mut History) -> Result<crate::Recovered, RecoveryError> {
    recover_dgraph(h, &RawLog::new(), &|_, _, _, _| Ok(true))
}

fn key(h: &History, k: i64) -> isocert_history::ObjId {
    h.object_by_key(h.table_by_name("t").unwrap(), &Scalar::Int(k)).unwrap()
}

const W1: &str = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"isolation":"repeatable-read","start_ts":100,"commit_ts":110}}"#;
const W2: &str = r#"{"id":2,"session":2,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":20}}],"meta":{"isolation":"repeatable-read","start_ts":111,"commit_ts":120}}"#;
/// Mutates nothing (its predicate update matches no row): never sent to /commit, so no commit_ts.
const R_MID: &str = r#"{"id":3,"session":3,"ops":[{"f":"r","table":"t","key":1,"value":{"id":1,"v":10}},{"f":"select","table":"t","where":"ge(v, 5)","rows":[{"key":1,"value":{"id":1,"v":10}}]},{"f":"update","table":"t","where":"gt(v, 100)","set":{"v":7},"rows":[]}],"meta":{"isolation":"repeatable-read","start_ts":115}}"#;

#[test]
fn versions_follow_commit_ts_and_reads_see_their_start_ts_snapshot() {
    let mut h = history(&[W1, W2, R_MID]);
    let r = recover(&mut h).expect("recovers");
    let order = r.certificate.version_order.as_ref().unwrap();
    assert_eq!(order[&key(&h, 1)], vec![TxnId(0), TxnId(1)]);
    let sets = r.certificate.version_sets.as_ref().unwrap();
    // Read at 115: T1 (110) committed, T2 (120) not yet.
    assert_eq!(sets[&OpRef { txn: TxnId(2), op: 0 }][0].writer, Writer::Txn(TxnId(0)));
    let seen: Vec<Writer> = sets[&OpRef { txn: TxnId(2), op: 1 }].iter().map(|s| s.writer).collect();
    assert!(seen.contains(&Writer::Txn(TxnId(0))) && seen.contains(&Writer::Initial), "{seen:?}");
    // Timestamps land in the history; the read-only transaction commits at its snapshot.
    assert_eq!(h.txns[1].commit_ts(), Some(Timestamp::new(120)));
    assert_eq!(
        (h.txns[2].start_ts(), h.txns[2].commit_ts()),
        (Some(Timestamp::new(115)), Some(Timestamp::new(115)))
    );
    // Recovering again from the history's own timestamps gives the same certificate.
    let again = recover(&mut h).expect("recovers twice");
    assert_eq!(again.certificate.version_order, r.certificate.version_order);
}

#[test]
fn timestamps_in_the_history_alone_suffice() {
    let bare = |line: &str| {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let meta = v.as_object_mut().unwrap().remove("meta").unwrap();
        v["start_ts"] = meta["start_ts"].clone();
        if let Some(c) = meta.get("commit_ts") {
            v["commit_ts"] = c.clone();
        }
        v.to_string()
    };
    let lines = [bare(W1), bare(W2), bare(R_MID)];
    let mut h = history(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let r = recover(&mut h).expect("recovers");
    assert_eq!(r.certificate.version_order.unwrap()[&key(&h, 1)], vec![TxnId(0), TxnId(1)]);
}

#[test]
fn a_lost_commit_answer_nobody_read_is_aborted_and_one_read_is_refused() {
    let lost = r#"{"id":4,"session":4,"status":"unknown","ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":40}}],"meta":{"start_ts":130,"error":"connection"}}"#;
    let mut h = history(&[W1, lost]);
    recover(&mut h).expect("recovers");
    assert_eq!(h.txns[1].status, Status::Aborted);

    let reader = r#"{"id":5,"session":5,"ops":[{"f":"r","table":"t","key":2,"value":{"id":2,"v":40}}],"meta":{"start_ts":150}}"#;
    let mut h = history(&[W1, lost, reader]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("uncertified") && e.contains("T5 op 0 read the value it wrote"), "{e}");
}

/// Issue 46: a lost commit answer is settled by every read, not only item reads. T4 (outcome
/// unknown, snapshot 130) writes row 2 = 40. The old rule saw no item read of 40 and settled
/// it as aborted, so a select that returned it became a g1a, and a select, aggregate or
/// predicate update whose snapshot could include T4's commit (a result that may rest on
/// row 2's version) was judged against a version order without it. Each is now refused,
/// naming the reader. Near twins: the same reads at a snapshot before T4's (130), which its
/// commit cannot be in, settle it as aborted.
#[test]
fn a_lost_commit_answer_is_settled_by_selects_aggregates_and_predicate_writes_too() {
    let lost = r#"{"id":4,"session":4,"status":"unknown","ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"v":40}}],"meta":{"start_ts":130,"error":"connection"}}"#;
    let readers = [
        (
            r#"{"f":"select","table":"t","where":"ge(v, 5)","rows":[{"key":1,"value":{"id":1,"v":10}},{"key":2,"value":{"id":2,"v":40}}]}"#,
            "returned a row holding a value it wrote",
        ),
        (
            r#"{"f":"select","table":"t","where":"ge(v, 5)","rows":[{"key":1,"value":{"id":1,"v":10}}]}"#,
            "evaluated its predicate",
        ),
        (
            r#"{"f":"aggregate","table":"t","where":"ge(v, 5)","function":"count","result":1}"#,
            "evaluated its predicate",
        ),
        (
            r#"{"f":"update","table":"t","where":"ge(v, 30)","set":{"v":7},"rows":[]}"#,
            "evaluated its predicate",
        ),
    ];
    for (op, why) in readers {
        let reader = format!(r#"{{"id":5,"session":5,"ops":[{op}],"meta":{{"start_ts":150}}}}"#);
        let mut h = history(&[W1, lost, &reader]);
        let e = recover(&mut h).unwrap_err().to_string();
        assert!(
            e.contains("T4") && e.contains("uncertified") && e.contains("T5 op 0") && e.contains(why),
            "{op}: {e}"
        );
        if why == "evaluated its predicate" {
            let before = reader.replace(r#""start_ts":150"#, r#""start_ts":125"#);
            let mut h = history(&[W1, lost, &before]);
            recover(&mut h).expect("a snapshot before T4's start cannot hold its commit");
            assert_eq!(h.txns[1].status, Status::Aborted, "{op}");
        }
    }
}

#[test]
fn bad_timestamps_are_refused_naming_the_transaction_and_field() {
    // Two writers of key 1 committing at the same timestamp: impossible in Dgraph.
    let tie = W2.replace(r#""start_ts":111,"commit_ts":120"#, r#""start_ts":105,"commit_ts":110"#);
    let mut h = history(&[W1, &tie]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("same timestamp"), "{e}");

    let backwards = W1.replace(r#""commit_ts":110"#, r#""commit_ts":90"#);
    let mut h = history(&[&backwards]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("meta.commit_ts") && e.contains("not after start_ts"), "{e}");

    let no_start = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"commit_ts":110}}"#;
    let mut h = history(&[no_start]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("start_ts"), "{e}");

    let no_commit = r#"{"id":1,"session":1,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"start_ts":100}}"#;
    let mut h = history(&[no_commit]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("commit timestamp"), "{e}");

    let disagree = r#"{"id":1,"session":1,"start_ts":99,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"v":10}}],"meta":{"start_ts":100,"commit_ts":110}}"#;
    let mut h = history(&[disagree]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("meta.start_ts") && e.contains("99"), "{e}");

    let malformed = r#"{"id":1,"session":1,"ops":[],"meta":{"start_ts":"soon"}}"#;
    let mut h = history(&[malformed]);
    let e = recover(&mut h).unwrap_err().to_string();
    assert!(e.contains("meta"), "{e}");
}

/// Live, each transaction gets the timestamps its session recorded, which recovery keeps;
/// what recovery would refuse or settle later stops the rule instead.
#[test]
fn live_ticks_are_the_recorded_timestamps_recovery_keeps() {
    use std::collections::VecDeque;

    use crate::{LiveTicks, RecordedLiveTicks};

    let lines = [W1, W2, R_MID];
    let mut whole = history(&lines);
    recover(&mut whole).expect("recovers");
    let want: Vec<Option<(Timestamp, Timestamp)>> =
        whole.txns.iter().map(|t| t.start_ts().zip(t.commit_ts())).collect();
    let h = history(&lines);
    let mut rule = RecordedLiveTicks::new(super::dgraph_timestamps);
    assert!(!rule.needs_stream());
    let mut stream = VecDeque::new();
    let mut got = rule.group(&[(TxnId(0), &h.txns[0])], &mut stream).unwrap();
    assert_eq!(rule.low(), Timestamp::new(110), "every later start is above what Zero handed out");
    got.extend(rule.group(&[(TxnId(1), &h.txns[1]), (TxnId(2), &h.txns[2])], &mut stream).unwrap());
    assert_eq!(got, want);

    let stops = |lines: &[&str], groups: &[&[usize]]| {
        let h = history(lines);
        let mut rule = RecordedLiveTicks::new(super::dgraph_timestamps);
        let mut last = Ok(Vec::new());
        for group in groups {
            let txns: Vec<(TxnId, &isocert_history::Transaction)> =
                group.iter().map(|&i| (TxnId::from_index(i), &h.txns[i])).collect();
            last = rule.group(&txns, &mut VecDeque::new());
            if last.is_err() {
                break;
            }
        }
        last.unwrap_err().to_string()
    };
    // Two writers of one row at one commit timestamp: recovery refuses them.
    let tie = W2.replace("\"start_ts\":111,\"commit_ts\":120", "\"start_ts\":105,\"commit_ts\":110");
    let e = stops(&[W1, &tie], &[&[0, 1]]);
    assert!(e.contains("T2 and T1") && e.contains("110"), "{e}");
    // An unknown outcome: recovery settles it by what later transactions read.
    let unknown = W2.replace("\"session\":2,", "\"session\":2,\"status\":\"unknown\",");
    assert!(stops(&[W1, &unknown], &[&[0, 1]]).contains("unknown"));
    // A start below the watermark already sent (not expected of Zero): never a wrong mark.
    let early = R_MID.replace("\"start_ts\":115", "\"start_ts\":105");
    assert!(stops(&[W1, &early], &[&[0], &[1]]).contains("below the watermark 110"));
}
