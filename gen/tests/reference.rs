//! A deliberately simple reference checker for generated histories: replays committed
//! transactions by timestamp and checks every read, list read and predicate operation, the
//! certificate, and (for SI) first-committer-wins. Slow and obvious on purpose; predicates
//! are evaluated by the real SQL interpreter of isocert-oracle.

use isocert_history::{
    Certificate, History, ObjId, Op, OpRef, Scalar, SeenVersion, Status, TxnId, Value, ValueId, Writer,
};
use isocert_oracle::{Interpreter, MatchesOracle};
use rustc_hash::FxHashMap;

/// Which rule the replay checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Reads see every commit at or before the start timestamp; concurrent writers of one
    /// object are forbidden.
    Snapshot,
    /// Reads see every commit before the commit timestamp (transactions run at commit time).
    CommitTime,
}

#[derive(Clone, Debug)]
struct Current {
    value: ValueId,
    list: Vec<Scalar>,
    writer: Writer,
}

/// Every violation found, one sentence each.
pub(crate) fn violations(h: &History, cert: &Certificate, rule: Rule) -> Vec<String> {
    // Version sets row by row: compact ones are expanded by the format's rule first.
    let mut cert = cert.clone();
    cert.expand_snapshot_sets(h).expect("compact version sets resolve");
    let cert = &cert;
    let oracle = Interpreter::new(h).expect("generated predicates compile");
    let mut out = Vec::new();
    let committed: Vec<TxnId> = h.txn_ids().filter(|&t| h.txn(t).status == Status::Committed).collect();
    for &t in &committed {
        let x = h.txn(t);
        let (Some(s), Some(c)) = (x.start_ts(), x.commit_ts()) else {
            out.push(format!("T{t:?} has no timestamps"));
            continue;
        };
        if s > c {
            out.push(format!("T{t:?} commits before it starts"));
        }
    }
    // Events: (timestamp, 0 = install / 1 = read for Snapshot; reversed for CommitTime, txn).
    let mut events: Vec<(u64, u8, TxnId)> = Vec::new();
    for &t in &committed {
        let x = h.txn(t);
        let (s, c) = (x.start_ts().unwrap().wall, x.commit_ts().unwrap().wall);
        let (install, read) = match rule {
            Rule::Snapshot => ((c, 0), (s, 1)),
            Rule::CommitTime => ((c, 1), (c, 0)),
        };
        events.push((install.0, install.1, t));
        events.push((read.0, read.1, t));
    }
    events.sort();
    let mut state: FxHashMap<ObjId, Current> = FxHashMap::default();
    for &(obj, value) in &h.initial {
        state.insert(obj, Current { value, list: Vec::new(), writer: Writer::Initial });
    }
    let mut writers: FxHashMap<ObjId, Vec<(u64, u64, TxnId)>> = FxHashMap::default();
    let mut finals: FxHashMap<TxnId, Vec<(ObjId, Current)>> = FxHashMap::default();
    for (_, kind, t) in events {
        let is_install = match rule {
            Rule::Snapshot => kind == 0,
            Rule::CommitTime => kind == 1,
        };
        if is_install {
            for (obj, cur) in finals.remove(&t).unwrap_or_default() {
                let x = h.txn(t);
                writers.entry(obj).or_default().push((
                    x.start_ts().unwrap().wall,
                    x.commit_ts().unwrap().wall,
                    t,
                ));
                let prev = state.get(&obj).map(|c| c.list.clone()).unwrap_or_default();
                let mut cur = cur;
                if !cur.list.is_empty() || matches!(h.value(cur.value), Value::List(_)) {
                    let mut list = prev;
                    list.append(&mut cur.list);
                    cur.list = list;
                }
                state.insert(obj, cur);
            }
        } else {
            finals.insert(t, replay(h, cert, &oracle, t, rule, &state, &mut out));
        }
    }
    check_certificate(h, cert, &committed, &writers, &mut out);
    check_sessions(h, &mut out);
    if rule == Rule::Snapshot {
        for (obj, ws) in &writers {
            let mut ws = ws.clone();
            ws.sort_by_key(|w| w.1);
            for pair in ws.windows(2) {
                if pair[1].0 < pair[0].1 {
                    out.push(format!(
                        "concurrent writers {:?} and {:?} of {}",
                        pair[0].2,
                        pair[1].2,
                        h.object_label(*obj)
                    ));
                }
            }
        }
    }
    out
}

/// Replays one transaction's operations against `state` (its snapshot) and returns what it installs.
fn replay(
    h: &History,
    cert: &Certificate,
    oracle: &Interpreter,
    t: TxnId,
    rule: Rule,
    state: &FxHashMap<ObjId, Current>,
    out: &mut Vec<String>,
) -> Vec<(ObjId, Current)> {
    let mut own: Vec<(ObjId, Current)> = Vec::new();
    let view = |own: &[(ObjId, Current)], obj: ObjId| -> Option<Current> {
        own.iter().rev().find(|(o, _)| *o == obj).map(|(_, c)| c.clone()).or_else(|| state.get(&obj).cloned())
    };
    let label = h.txn_label(t);
    for (i, op) in h.txn(t).ops.iter().enumerate() {
        let put = |own: &mut Vec<(ObjId, Current)>, obj: ObjId, value: ValueId, list: Vec<Scalar>| {
            own.retain(|(o, _)| *o != obj);
            own.push((obj, Current { value, list, writer: Writer::Txn(t) }));
        };
        match op {
            Op::Read { obj, value } => {
                let seen = view(&own, *obj);
                let ok = match h.value(*value) {
                    Value::List(items) => {
                        let mut expect = seen.as_ref().map(|c| c.list.clone()).unwrap_or_default();
                        if let Some((_, c)) = own.iter().find(|(o, _)| o == obj) {
                            let base = state.get(obj).map(|c| c.list.clone()).unwrap_or_default();
                            expect = base.into_iter().chain(c.list.iter().cloned()).collect();
                        }
                        **items == *expect
                    }
                    _ => seen.map_or(ValueId::ABSENT, |c| c.value) == *value,
                };
                if !ok {
                    out.push(format!(
                        "{label} op {i}: read of {} is not what the replay says",
                        h.object_label(*obj)
                    ));
                }
            }
            Op::Write { obj, value } => put(&mut own, *obj, *value, Vec::new()),
            Op::Append { obj, element } => {
                let mut list =
                    own.iter().find(|(o, _)| o == obj).map(|(_, c)| c.list.clone()).unwrap_or_default();
                list.push(element.clone());
                let marker = h.value_id(&Value::List(Box::new([]))).unwrap_or(ValueId::ABSENT);
                put(&mut own, *obj, marker, list);
            }
            Op::Select { predicate, rows }
            | Op::Update { predicate, rows, .. }
            | Op::Delete { predicate, rows } => {
                let table = h.predicate(*predicate).table;
                let mut expect = Vec::new();
                let mut seen_set = Vec::new();
                for o in (0..h.object_count()).map(ObjId::from_index).filter(|&o| h.object(o).table == table)
                {
                    let Some(cur) = view(&own, o) else { continue };
                    seen_set.push(SeenVersion { obj: o, writer: cur.writer });
                    if oracle.matches(h, *predicate, o, cur.value).unwrap() {
                        expect.push((o, cur.value));
                    }
                }
                let mut got: Vec<ObjId> = rows.iter().map(|r| r.obj).collect();
                got.sort();
                let want: Vec<ObjId> = expect.iter().map(|e| e.0).collect();
                if got != want {
                    out.push(format!("{label} op {i}: predicate rows {got:?}, replay matched {want:?}"));
                }
                if let Op::Select { rows, .. } = op {
                    for r in rows {
                        if !expect.contains(&(r.obj, r.value)) {
                            out.push(format!(
                                "{label} op {i}: select returned a version the replay did not match"
                            ));
                        }
                    }
                }
                let mut listed =
                    cert.version_sets.as_ref().and_then(|v| v.get(&OpRef { txn: t, op: i as u32 })).cloned();
                if let Some(l) = &mut listed {
                    l.retain(|s| h.object(s.obj).table == table);
                    l.sort_by_key(|s| s.obj);
                }
                // Version sets are what the operation evaluated: its start snapshot. Under
                // the commit-time rule only the matches must agree (checked above).
                if rule == Rule::Snapshot && listed.as_ref() != Some(&seen_set) {
                    out.push(format!("{label} op {i}: version set differs from the replay's"));
                }
                match op {
                    Op::Update { rows, .. } => {
                        rows.iter().for_each(|r| put(&mut own, r.obj, r.value, Vec::new()))
                    }
                    Op::Delete { rows, .. } => {
                        rows.iter().for_each(|r| put(&mut own, r.obj, ValueId::ABSENT, Vec::new()))
                    }
                    _ => {}
                }
            }
            Op::Aggregate { .. } => {
                out.push(format!("{label} op {i}: the generator never writes aggregates"))
            }
        }
    }
    own
}

fn check_certificate(
    h: &History,
    cert: &Certificate,
    committed: &[TxnId],
    writers: &FxHashMap<ObjId, Vec<(u64, u64, TxnId)>>,
    out: &mut Vec<String>,
) {
    let order = cert.version_order.as_ref().expect("version order");
    let mut objs: Vec<&ObjId> = writers.keys().chain(order.keys()).collect();
    objs.sort();
    objs.dedup();
    for obj in objs {
        let mut ws = writers.get(obj).cloned().unwrap_or_default();
        ws.sort_by_key(|w| w.1);
        let want: Vec<TxnId> = ws.iter().map(|w| w.2).collect();
        if order.get(obj).cloned().unwrap_or_default() != want {
            out.push(format!("version order of {} is not commit order", h.object_label(*obj)));
        }
    }
    let mut by_commit: Vec<TxnId> = committed.to_vec();
    by_commit.sort_by_key(|&t| (h.txn(t).commit_ts(), t));
    if cert.serialization_order.as_ref() != Some(&by_commit) {
        out.push("serialization order is not commit-timestamp order".into());
    }
}

/// A session's transaction must start after its predecessor committed.
fn check_sessions(h: &History, out: &mut Vec<String>) {
    let mut last_commit: FxHashMap<isocert_history::SessionId, u64> = FxHashMap::default();
    for t in h.txn_ids() {
        let x = h.txn(t);
        if let (Some(prev), Some(start)) = (last_commit.get(&x.session), x.start_ts()) {
            if start.wall < *prev {
                out.push(format!(
                    "{} starts before its session's previous transaction commits",
                    h.txn_label(t)
                ));
            }
        }
        if let Some(c) = x.commit_ts() {
            last_commit.insert(x.session, c.wall);
        }
    }
}
