//! The live rule against offline recovery: on random MariaDB-shaped histories cut into
//! random groups, every transaction gets the ticks recovery gives the whole history, and
//! the same number of snapshots is moved.

use std::collections::VecDeque;
use std::fmt::Write as _;

use isocert_history::{v1, Scalar, Timestamp, Transaction, TxnId};

use super::InnoDbLiveTicks;
use crate::{binlog_key, recover_innodb, CommittedTxn, LiveTicks, RawLog, RowChange};

/// A small deterministic generator (xorshift), so the test needs no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A random run: text of its history (REPEATABLE READ, 3 keys, sessions overlapping in
/// real time within a group, a gap at each cut), its binary log, and the group sizes.
/// Snapshot positions are reported up to two commits behind the read view, and reads see
/// the view or one commit older (a stale read: a lost update when it writes), so
/// placements move, are contradicted and stay.
fn random_run(seed: u64) -> (String, Vec<CommittedTxn>, Vec<usize>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let keys = 3;
    let mut text = String::from(
        r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":0},{"key":2,"value":0},{"key":3,"value":0}]}"#,
    );
    text.push('\n');
    // Per key, its versions as (log position, value).
    let mut versions: Vec<Vec<(Option<usize>, Option<i64>)>> = vec![vec![(None, Some(0))]; keys];
    let mut log: Vec<CommittedTxn> = Vec::new();
    let mut groups = Vec::new();
    let (mut clock, mut value, mut in_group, mut cut_len) = (0i64, 100i64, 0usize, 0usize);
    let value_at = |versions: &[(Option<usize>, Option<i64>)], p: usize| {
        versions.iter().rev().find(|(pos, _)| pos.is_none_or(|q| q < p)).and_then(|v| v.1)
    };
    for id in 0..60 {
        if in_group > 0 && rng.below(5) == 0 {
            groups.push(in_group);
            in_group = 0;
            clock += 1000;
            cut_len = log.len();
        }
        in_group += 1;
        let view = log.len() - rng.below(2).min(log.len() as u64 - cut_len as u64) as usize;
        let reported = view.saturating_sub(rng.below(3) as usize).max(cut_len);
        let mut ops = Vec::new();
        let mut writes = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let key = rng.below(keys as u64) as usize;
            if rng.below(2) == 0 {
                let v = value_at(&versions[key], view);
                let v = v.map_or("null".to_string(), |v| v.to_string());
                ops.push(format!(r#"{{"f":"r","key":{},"value":{v}}}"#, key + 1));
            } else {
                let present =
                    value_at(&versions[key], usize::MAX).is_some() && writes.iter().all(|(k, _)| *k != key);
                let v = if present && rng.below(6) == 0 {
                    None
                } else {
                    value += 1;
                    Some(value)
                };
                let shown = v.map_or("null".to_string(), |v| v.to_string());
                ops.push(format!(r#"{{"f":"w","key":{},"value":{shown}}}"#, key + 1));
                writes.retain(|(k, _)| *k != key);
                writes.push((key, v));
            }
        }
        let changes = writes;
        let mut meta =
            format!(r#""isolation":"repeatable-read","snapshot":"binlog.000001:{}""#, 1000 * reported + 500);
        if changes.is_empty() {
            let _ = write!(meta, r#","before_commit_gtid":"0-1-{}""#, log.len());
        } else {
            let pos = log.len();
            let seq = pos as u64 + 1;
            let _ = write!(meta, r#","gtid":"0-1-{seq}""#);
            for &(k, v) in &changes {
                versions[k].push((Some(pos), v));
            }
            let key = binlog_key("binlog.000001", 1000 * seq + 500).unwrap();
            log.push(CommittedTxn {
                xid: seq,
                commit_lsn: key,
                end_lsn: key,
                commit_time: 0,
                commit_ts: None,
                changes: changes
                    .iter()
                    .map(|&(k, v)| RowChange {
                        table: "kv".into(),
                        key: Scalar::Int(k as i64 + 1),
                        row: v.map(|v| {
                            vec![("key".into(), Scalar::Int(k as i64 + 1)), ("value".into(), Scalar::Int(v))]
                        }),
                    })
                    .collect(),
            });
        }
        let session = id % 4;
        let invoked = clock + 10 * (id % 4) as i64;
        let _ = writeln!(
            text,
            r#"{{"id":{id},"session":{session},"invoked_at":{invoked},"completed_at":{},"ops":[{}],"meta":{{{meta}}}}}"#,
            invoked + 30,
            ops.join(",")
        );
        clock += 10;
    }
    groups.push(in_group);
    (text, log, groups)
}

/// The number at the start of the warning containing `marker` (0 without one).
fn counted(warnings: &[String], marker: &str) -> usize {
    warnings
        .iter()
        .find(|w| w.contains(marker))
        .and_then(|w| w.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn groups_get_the_ticks_and_moves_of_the_whole_history() {
    let (mut moved, mut contradicted) = (0, 0);
    for seed in 1..=200 {
        let (text, log, groups) = random_run(seed);
        let mut whole = v1::read_history(text.as_bytes()).unwrap();
        let mut raw = RawLog::new();
        log.iter().cloned().for_each(|c| assert!(raw.push(c)));
        let r = recover_innodb(&mut whole, &raw, &|_, _, _, _| Ok(false)).unwrap();
        let want: Vec<Option<(Timestamp, Timestamp)>> =
            whole.txns.iter().map(|t| t.start_ts().zip(t.commit_ts())).collect();

        let h = v1::read_history(text.as_bytes()).unwrap();
        let mut rule = InnoDbLiveTicks::new();
        rule.initial(&h.initial);
        let mut stream: VecDeque<CommittedTxn> = VecDeque::new();
        let (mut got, mut from) = (Vec::new(), 0);
        for size in groups {
            let txns: Vec<(TxnId, &Transaction)> =
                (from..from + size).map(|i| (TxnId::from_index(i), &h.txns[i])).collect();
            // The stream up to the cut, and perhaps a commit of the next group already.
            let upto = h.txns[..from + size]
                .iter()
                .filter_map(|t| t.meta()?.get("gtid")?.as_str()?.rsplit('-').next()?.parse::<usize>().ok())
                .max()
                .unwrap_or(0);
            let taken = log.len().min(upto + usize::from(seed % 2 == 0));
            stream.extend(log[stream.len() + rule.positions.len()..taken].iter().cloned());
            let low = rule.low();
            let ticks = rule.group(&txns, &mut stream).unwrap();
            for t in ticks.iter().flatten() {
                assert!(t.0 >= low && t.1 >= low, "seed {seed}: {t:?} below the watermark {low:?}");
            }
            got.extend(ticks);
            from += size;
        }
        assert_eq!(got, want, "seed {seed}\n{text}");
        let (c, u) = rule.moved();
        assert_eq!(c, counted(&r.warnings, "REPEATABLE READ snapshot position(s)"), "seed {seed}");
        assert_eq!(u, counted(&r.warnings, "no anomaly is claimed"), "seed {seed}");
        contradicted += c;
        moved += u;
    }
    // The generator exercises both kinds of move.
    assert!(contradicted > 20 && moved > 5, "{contradicted} contradicted, {moved} unprovable");
}
