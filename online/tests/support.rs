//! What the online tests share: a broker, unique topic names, histories and Chronos's
//! verdict on them, and members run on threads.

use std::time::Duration;

use isocert_checker::{check_chronos_kv, IsolationLevel};
use isocert_gen::{write_stream, GenConfig, Injection};
use isocert_history::read_kv_v1_bytes;
use isocert_online::{
    run_member, AnomalyRecord, MemberEvent, MemberOptions, OnlineTarget, ResultRecord, Summary,
};

pub(crate) use isocert_testsupport::KafkaBroker;

/// A topic name no other test (or earlier run on a shared broker) uses.
pub(crate) fn unique(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("isocert-test-{name}-{}-{nanos}-{n}", std::process::id())
}

/// A generated key-value history (v1 text).
pub(crate) fn history(
    txns: usize,
    seed: u64,
    isolation: IsolationLevel,
    inject: Option<Injection>,
) -> Vec<u8> {
    let cfg = GenConfig {
        txns,
        sessions: 6,
        ops_per_txn: 5,
        keys: 40,
        seed,
        isolation,
        inject,
        ..GenConfig::default()
    };
    let mut out = Vec::new();
    write_stream(&cfg, &mut out, None).expect("the generator makes this history");
    out
}

/// An anomaly as the output shows it.
pub(crate) type Seen = (String, String);

/// Chronos's anomalies on `text`, sorted.
pub(crate) fn offline(text: &[u8], level: IsolationLevel) -> Vec<Seen> {
    let kv = read_kv_v1_bytes(text).unwrap();
    let report = check_chronos_kv(kv, level).unwrap().0;
    let mut seen: Vec<Seen> =
        report.anomalies.iter().map(|a| (a.kind.to_string(), a.explanation.clone())).collect();
    seen.sort();
    seen
}

/// The anomalies of a summary, sorted.
pub(crate) fn seen(anomalies: &[AnomalyRecord]) -> Vec<Seen> {
    let mut seen: Vec<Seen> = anomalies.iter().map(|a| (a.kind.clone(), a.explanation.clone())).collect();
    seen.sort();
    seen
}

/// Member options for a test.
pub(crate) fn options(
    target: &OnlineTarget,
    group: &str,
    level: IsolationLevel,
    member: &str,
) -> MemberOptions {
    MemberOptions {
        target: target.clone(),
        group: group.to_string(),
        level,
        initial: None,
        producers: 1,
        results_topic: target.default_results_topic(),
        member: member.to_string(),
        session_timeout: Duration::from_secs(6),
        partitions: 4,
        client_config: Vec::new(),
    }
}

/// How long a group may take to finish a test's check: a group that never finishes (a
/// partition never assigned, a rebalance that never settles) fails its test instead of
/// hanging the suite.
const GROUP_DEADLINE: Duration = Duration::from_secs(180);

/// Runs `members` members of `group` on threads until the check is finished; returns
/// each member's summary and the anomalies each reported itself. Panics when the group
/// has not finished within [`GROUP_DEADLINE`].
pub(crate) fn run_group(
    target: &OnlineTarget,
    group: &str,
    level: IsolationLevel,
    members: usize,
) -> Vec<(Summary, Vec<AnomalyRecord>)> {
    let handles: Vec<_> = (0..members)
        .map(|m| {
            let options = options(target, group, level, &format!("{group}-m{m}"));
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let summary = run_member(&options, |e| {
                    if let MemberEvent::Reported(ResultRecord::Anomaly(a)) = e {
                        mine.push(a.clone());
                    }
                })
                .unwrap_or_else(|e| panic!("member {}: {e}", options.member));
                (summary, mine)
            })
        })
        .collect();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        let _ = done.send(results);
    });
    match finished.recv_timeout(GROUP_DEADLINE) {
        Ok(results) => results.into_iter().map(|r| r.expect("a member thread")).collect(),
        Err(_) => panic!("group {group}: {members} member(s) did not finish within {GROUP_DEADLINE:?}"),
    }
}
