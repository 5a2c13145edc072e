//! An expected serialization order for Enne.
//!
//! PostgreSQL's serializable snapshot isolation is serializable but not in commit order:
//! a transaction may read a row that a transaction committing before it overwrote (a
//! read-write anti-dependency against commit order). The order given here is a topological
//! order of the dependencies the certificate fixes (version order, item reads, and the rows
//! predicate operations returned or changed), breaking ties by the visibility timeline, so
//! that a correct execution replays without a mismatch.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use isocert_history::{History, ObjId, Op, OpRef, SeenVersion, TxnId, ValueId, Writer};
use rustc_hash::FxHashMap;

use super::matching::Matched;
use super::timeline::Timeline;

/// The committed transactions in a dependency-respecting order, and whether the
/// dependencies had a cycle (then the order is only the timeline's).
pub(crate) fn order(
    h: &History,
    m: &Matched,
    tl: &Timeline,
    sets: &FxHashMap<OpRef, Vec<SeenVersion>>,
) -> (Vec<TxnId>, bool) {
    let n = h.txns.len();
    let mut edges: Vec<(TxnId, TxnId)> = Vec::new();
    let position: FxHashMap<(TxnId, ObjId), usize> = m
        .version_order
        .iter()
        .flat_map(|(obj, order)| order.iter().enumerate().map(move |(k, t)| ((*t, *obj), k)))
        .collect();
    for order in m.version_order.values() {
        for pair in order.windows(2) {
            edges.push((pair[0], pair[1]));
        }
    }
    let mut writer_of_value: FxHashMap<(ObjId, ValueId), TxnId> = FxHashMap::default();
    for ((t, obj), value) in &m.final_value {
        if *value != ValueId::ABSENT {
            writer_of_value.insert((*obj, *value), *t);
        }
    }
    // Reader `t` saw version `w` of `obj`: w before t, t before w's successor.
    let mut saw = |t: TxnId, obj: ObjId, w: Writer| {
        let next = match w {
            Writer::Txn(w) if w == t => return,
            Writer::Txn(w) => {
                edges.push((w, t));
                position.get(&(w, obj)).map_or(usize::MAX, |k| k + 1)
            }
            Writer::Initial => 0,
        };
        if let Some(&succ) = m.version_order.get(&obj).and_then(|o| o.get(next)) {
            if succ != t {
                edges.push((t, succ));
            }
        }
    };
    for t in h.txn_ids() {
        if !h.txn(t).is_committed() {
            continue;
        }
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let r = OpRef { txn: t, op: i as u32 };
            match op {
                Op::Read { obj, value } if *value != ValueId::ABSENT => {
                    match writer_of_value.get(&(*obj, *value)) {
                        Some(w) => saw(t, *obj, Writer::Txn(*w)),
                        None if h.initial.iter().any(|(o, v)| o == obj && v == value) => {
                            saw(t, *obj, Writer::Initial)
                        }
                        None => {}
                    }
                }
                Op::Select { rows, .. } | Op::Update { rows, .. } | Op::Delete { rows, .. } => {
                    if let Some(set) = sets.get(&r) {
                        for row in rows {
                            if let Some(v) = set.iter().find(|v| v.obj == row.obj) {
                                saw(t, v.obj, v.writer);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    let committed: Vec<TxnId> = h.txn_ids().filter(|t| h.txn(*t).is_committed()).collect();
    let priority = |t: TxnId| (tl.commit[t.index()].unwrap_or(u64::MAX), t);
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<TxnId>> = vec![Vec::new(); n];
    edges.sort_unstable();
    edges.dedup();
    for &(a, b) in &edges {
        if a != b {
            out[a.index()].push(b);
            indegree[b.index()] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<(u64, TxnId)>> =
        committed.iter().filter(|t| indegree[t.index()] == 0).map(|t| Reverse(priority(*t))).collect();
    let mut result = Vec::with_capacity(committed.len());
    let mut placed = vec![false; n];
    while let Some(Reverse((_, t))) = ready.pop() {
        placed[t.index()] = true;
        result.push(t);
        for &s in &out[t.index()] {
            indegree[s.index()] -= 1;
            if indegree[s.index()] == 0 {
                ready.push(Reverse(priority(s)));
            }
        }
    }
    let cyclic = result.len() < committed.len();
    if cyclic {
        let mut rest: Vec<TxnId> = committed.into_iter().filter(|t| !placed[t.index()]).collect();
        rest.sort_by_key(|t| priority(*t));
        result.extend(rest);
    }
    (result, cyclic)
}
