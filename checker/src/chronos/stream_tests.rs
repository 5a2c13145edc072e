//! Streaming Chronos against the whole-history check: generated histories with violations
//! of each axiom and their valid twins, interleaved sessions, equal timestamps; bounded
//! memory on a long history; out-of-order timestamps stop the stream.

use isocert_history::{read_kv_v1, KvHistory, KvV1Reader, TxnId};
use isocert_random::rand::Rng as _;

use super::{check_chronos_kv, ChronosStream, StreamStop};
use crate::{AnomalyKind, IsolationLevel, Report};

const SI: IsolationLevel = IsolationLevel::SnapshotIsolation;
const SER: IsolationLevel = IsolationLevel::Serializable;

/// Which axiom a generated history violates (a few times), if any.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Break {
    None,
    Session,
    Int,
    Ext,
    NoConflict,
}

/// A v1 history of `n` transactions in `sessions` interleaved sessions over `keys` keys,
/// valid under snapshot isolation unless `brk` injects violations of one axiom. Many
/// transactions share timestamps (spans are short, some are read-only with start == commit).
fn generate(seed: u64, n: usize, sessions: usize, keys: u64, brk: Break) -> String {
    let mut rng = isocert_random::seeded(seed);
    let mut clock = vec![0u64; sessions];
    let mut spans: Vec<(usize, u64, u64)> = Vec::with_capacity(n);
    let mut injected = 0;
    for i in 0..n {
        let s = i % sessions;
        let mut start = clock[s] + rng.random_range(0..3);
        let commit = start + rng.random_range(0..4);
        // A Session violation: start before the session predecessor commits.
        if brk == Break::Session && i > sessions && injected < 3 && rng.random_range(0..50) == 0 {
            let prev = spans.iter().rev().find(|p| p.0 == s).copied().expect("a predecessor");
            if prev.2 > prev.1 && start >= prev.2 {
                start = prev.2 - 1;
                injected += 1;
            }
        }
        clock[s] = commit.max(start);
        spans.push((s, start, commit.max(start)));
    }
    // File order: by start timestamp (stable, so each session's order is kept).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| spans[i].1);
    let spans: Vec<_> = order.iter().map(|&i| spans[i]).collect();
    let concurrent = |a: (usize, u64, u64), b: (usize, u64, u64)| {
        (a.2 > b.1 && b.2 > a.1) || (a.1 == a.2 && b.1 == b.2 && a.1 == b.1)
    };
    let mut writes: Vec<Vec<u64>> = Vec::with_capacity(n);
    let mut clashes = 0;
    for i in 0..n {
        let mut w = Vec::new();
        for _ in 0..rng.random_range(0..3) {
            let k = rng.random_range(0..keys);
            let window = i.saturating_sub(64)..i;
            let clash = window.clone().any(|j| writes[j].contains(&k) && concurrent(spans[i], spans[j]));
            let allowed = brk == Break::NoConflict && clashes < 3 && rng.random_range(0..20) == 0;
            if (!clash || allowed) && !w.contains(&k) {
                clashes += usize::from(clash);
                w.push(k);
            }
        }
        writes.push(w);
    }
    // Reads from a simulated frontier, in the checker's event order.
    let mut events: Vec<(u64, u8, usize)> = Vec::new();
    for (i, &(_, s, c)) in spans.iter().enumerate() {
        if s == c {
            events.push((s, 1, i));
        } else {
            events.push((s, 2, i));
            events.push((c, 0, i));
        }
    }
    events.sort();
    let mut frontier = vec![0i64; keys as usize];
    let mut ops = vec![String::new(); n];
    let (mut ext, mut int) = (0, 0);
    for &(_, phase, i) in &events {
        if phase >= 1 {
            let mut parts: Vec<String> = Vec::new();
            let mut read = Vec::new();
            for _ in 0..rng.random_range(0..4) {
                let k = rng.random_range(0..keys);
                if read.contains(&k) {
                    continue;
                }
                read.push(k);
                let mut v = frontier[k as usize];
                if brk == Break::Ext && ext < 3 && rng.random_range(0..30) == 0 {
                    v += 1_000_000;
                    ext += 1;
                }
                parts.push(format!("{{\"f\":\"r\",\"key\":{k},\"value\":{v}}}"));
            }
            for &k in &writes[i] {
                parts.push(format!("{{\"f\":\"w\",\"key\":{k},\"value\":{}}}", i + 1));
                let own = if brk == Break::Int && int < 3 && rng.random_range(0..30) == 0 {
                    int += 1;
                    i + 7
                } else {
                    i + 1
                };
                parts.push(format!("{{\"f\":\"r\",\"key\":{k},\"value\":{own}}}"));
            }
            ops[i] = parts.join(",");
        }
        if phase <= 1 {
            for &k in &writes[i] {
                frontier[k as usize] = i as i64 + 1;
            }
        }
    }
    let mut text = String::from("{\"format\":\"isocert-history\",\"version\":1,\"initial\":[");
    let initial: Vec<String> = (0..keys).map(|k| format!("{{\"key\":{k},\"value\":0}}")).collect();
    text.push_str(&initial.join(","));
    text.push_str("]}\n");
    for (i, &(s, start, commit)) in spans.iter().enumerate() {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":\"s{s}\",\"start_ts\":{start},\"commit_ts\":{commit},\"ops\":[{}]}}\n",
            ops[i]
        ));
    }
    text
}

/// Streams `text` as the command line does: parts of `part` transactions appended to one
/// history, each transaction pushed as it arrives; `watch` sees the state after each push.
fn stream(
    text: &str,
    level: IsolationLevel,
    part: usize,
    mut watch: impl FnMut(&KvHistory, &ChronosStream),
) -> Result<Report, StreamStop> {
    let mut reader = KvV1Reader::new(text.as_bytes());
    let mut check = ChronosStream::new(level).unwrap();
    let mut kv: Option<KvHistory> = None;
    loop {
        let mut read = 0;
        while read < part && reader.next_txn().unwrap().is_some() {
            read += 1;
        }
        let next = reader.take_part();
        let from = kv.as_ref().map_or(0, KvHistory::len);
        let kv = match &mut kv {
            Some(kv) => {
                kv.append(next).unwrap();
                kv
            }
            None => {
                let mut first = next;
                first.drop_name_index();
                kv.insert(first)
            }
        };
        for i in from..kv.len() {
            check.push(kv, TxnId::from_index(i))?;
            watch(kv, &check);
        }
        if read < part {
            return Ok(check.finish(kv));
        }
    }
}

fn whole(text: &str, level: IsolationLevel) -> Report {
    check_chronos_kv(read_kv_v1(text.as_bytes()).unwrap(), level).unwrap().0
}

/// Every field of the anomalies, the stats and the notes.
fn assert_same(a: &Report, b: &Report, what: &str) {
    assert_eq!(a.anomalies, b.anomalies, "{what}");
    assert_eq!(a.stats, b.stats, "{what}");
    assert_eq!(a.notes, b.notes, "{what}");
}

#[test]
fn streaming_reports_equal_whole_history_reports() {
    for (brk, kind) in [
        (Break::Session, AnomalyKind::Session),
        (Break::Int, AnomalyKind::Int),
        (Break::Ext, AnomalyKind::Ext),
        (Break::NoConflict, AnomalyKind::NoConflict),
        (Break::None, AnomalyKind::Ext),
    ] {
        for seed in 1..4 {
            let text = generate(seed, 3000, 7, 40, brk);
            for level in [SI, SER] {
                let want = whole(&text, level);
                if level == SI {
                    let kinds: Vec<_> = want.anomalies.iter().map(|a| a.kind).collect();
                    if brk == Break::None {
                        assert!(want.is_valid(), "seed {seed}: {kinds:?}");
                    } else {
                        assert!(
                            !kinds.is_empty() && kinds.iter().all(|k| *k == kind),
                            "{brk:?} {seed}: {kinds:?}"
                        );
                    }
                }
                for part in [1, 13, 5000] {
                    match stream(&text, level, part, |_, _| {}) {
                        Ok(got) => {
                            assert_same(&got, &want, &format!("{brk:?} seed {seed} {level:?} part {part}"))
                        }
                        // Only a session going back in time may stop the stream.
                        Err(StreamStop::OutOfOrder { .. }) => assert_eq!(brk, Break::Session),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }
    }
}

#[test]
fn a_session_going_back_in_time_stops_the_stream() {
    let mut text = String::new();
    for i in 0..5000u64 {
        text.push_str(&format!(
            "{{\"id\":{i},\"session\":{},\"start_ts\":{},\"commit_ts\":{},\"ops\":[]}}\n",
            i % 3,
            10 * i,
            10 * i + 5
        ));
    }
    // Session 0 goes back to before where the simulation already is.
    text.push_str("{\"id\":\"late\",\"session\":0,\"start_ts\":7,\"commit_ts\":8,\"ops\":[]}\n");
    match stream(&text, SI, 100, |_, _| {}) {
        Err(StreamStop::OutOfOrder { txn, .. }) => assert_eq!(txn, "T\"late\""),
        other => panic!("expected a stop, got {other:?}"),
    }
    assert_eq!(whole(&text, SI).anomalies.len(), 1, "the whole check finds the Session violation");
    // A transaction without timestamps stops it too (the whole check names the error).
    let missing = "{\"id\":1,\"session\":1,\"ops\":[]}\n";
    assert!(matches!(stream(missing, SI, 1, |_, _| {}), Err(StreamStop::Check(_))));
}

#[test]
fn memory_stays_bounded_on_a_long_history() {
    let n = 6 * KvHistory::BLOCK + 123;
    let text = generate(9, n, 5, 30, Break::Ext);
    let (mut max_window, mut max_kept, mut max_blocks) = (0, 0, 0);
    let got = stream(&text, SI, 1000, |kv, check| {
        max_window = max_window.max(check.window());
        // Held beyond the window: retired transactions kept for the report (the part
        // appended but not yet pushed is held too, and not counted here).
        let retired = check.added() - check.window();
        max_kept = max_kept.max(kv.held_txns() - (kv.len() - retired));
        max_blocks = max_blocks.max(kv.held_blocks());
    })
    .unwrap();
    assert_same(&got, &whole(&text, SI), "long history");
    assert!(!got.is_valid());
    // The window trails reading by about one block plus a step; named and last-writer
    // transactions (30 keys, 5 sessions, a few anomalies) are all that is kept beyond it.
    assert!(max_window <= 2 * KvHistory::BLOCK + 4096, "window {max_window}");
    assert!(max_kept <= 30 + 5 + 20, "kept {max_kept}");
    assert!(max_blocks <= 3, "blocks {max_blocks}");
}
