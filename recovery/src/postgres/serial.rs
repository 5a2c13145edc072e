//! An expected serialization order for Enne.
//!
//! PostgreSQL's serializable snapshot isolation is serializable but not in commit order:
//! a transaction may read a row that a transaction committing before it overwrote (a
//! read-write anti-dependency against commit order). The order given here is a topological
//! order of the dependencies the certificate fixes (version order, item reads, and the rows
//! predicate operations returned or changed), breaking ties by the visibility timeline, so
//! that a correct execution replays without a mismatch. An aggregate depends on what decides
//! its result, not on every match (`isocert_oracle::dependence`, the notion Emme's checker
//! uses): ordering it against a row that cannot change its result would make cycles where
//! the execution has none (CI saw a `max(c2) WHERE c2 = 3` read ordered before a
//! transaction that moved one of several rows holding 3 out of the predicate, which in turn
//! had to follow it: Enne then replayed a correct run to false divergences).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use isocert_history::{ObjId, Op, OpRef, PredId, SeenVersion, TxnId, ValueId, Writer};
use isocert_oracle::dependence::{Dependence, Key};
use rustc_hash::FxHashMap;

use super::version_sets::Context;
use crate::matching::record_own_writes;
use crate::RecoveryError;

/// The committed transactions in a dependency-respecting order, and whether the
/// dependencies had a cycle (then the order is only the timeline's).
pub(crate) fn order(
    cx: &Context<'_>,
    sets: &FxHashMap<OpRef, Vec<SeenVersion>>,
) -> Result<(Vec<TxnId>, bool), RecoveryError> {
    let (h, m, tl) = (cx.h, cx.m, cx.tl);
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
    // Per object, its deleters: an item read of no row saw one of them, or the unborn row.
    let mut deleters: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for ((t, obj), value) in &m.final_value {
        if *value != ValueId::ABSENT {
            writer_of_value.insert((*obj, *value), *t);
        } else {
            deleters.entry(*obj).or_default().push(*t);
        }
    }
    // Reader `t` saw version `w` of `obj`: w before t, t before w's successor.
    let saw = |edges: &mut Vec<(TxnId, TxnId)>, t: TxnId, obj: ObjId, w: Writer| {
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
    let mut cache = MatchCache::default();
    for t in h.txn_ids() {
        if !h.txn(t).is_committed() {
            continue;
        }
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let r = OpRef { txn: t, op: i as u32 };
            match (op, sets.get(&r)) {
                (Op::Read { obj, .. }, Some(set)) => {
                    // The version an ambiguous read saw, named by its snapshot.
                    if let Some(seen) = set.first() {
                        saw(&mut edges, t, *obj, seen.writer);
                    }
                }
                (Op::Read { obj, value }, None) if *value != ValueId::ABSENT => {
                    match writer_of_value.get(&(*obj, *value)) {
                        Some(w) => saw(&mut edges, t, *obj, Writer::Txn(*w)),
                        None if h.initial.iter().any(|(o, v)| o == obj && v == value) => {
                            saw(&mut edges, t, *obj, Writer::Initial)
                        }
                        None => {}
                    }
                }
                // No row, held by one version only (several would have a version set
                // entry): the unborn row or the one deleter.
                (Op::Read { obj, .. }, None) => {
                    let deleted_by = deleters.get(obj).map(Vec::as_slice).unwrap_or(&[]);
                    match (cx.initial_has(*obj), deleted_by) {
                        (false, []) => saw(&mut edges, t, *obj, Writer::Initial),
                        (true, [w]) => saw(&mut edges, t, *obj, Writer::Txn(*w)),
                        _ => {}
                    }
                }
                _ => {}
            }
            if let (Some(pred), Some(set)) = (op.predicate(), sets.get(&r)) {
                let read = PredicateRead { r, pred, set };
                let dependence = match op {
                    Op::Aggregate { function, column, result, .. } => {
                        let expected = matched_rows(cx, &mut cache, &position, read)?;
                        Some(Dependence::of(h, *function, *column, result, &expected))
                    }
                    _ => None,
                };
                predicate_edges(cx, &mut cache, &position, read, dependence.as_ref(), &mut edges)?;
            }
        }
    }

    let committed: Vec<TxnId> = h.txn_ids().filter(|t| h.txn(*t).is_committed()).collect();
    let priority = |t: TxnId| (tl.commit[t.index()].unwrap_or(u64::MAX), t);
    // Session order too, where the dependencies allow it: the levels' default definition
    // includes it, and among the orders the dependencies leave open one that keeps each
    // session's order is the one a correct execution has (tie-breaking by commit alone
    // could put a read-only transaction before its session's predecessor). When the
    // dependencies and session order form a cycle, the dependencies alone decide, and the
    // checker reports the session's violation.
    let mut sessions: Vec<(TxnId, TxnId)> = Vec::new();
    let mut last: Vec<Option<TxnId>> = vec![None; h.session_count()];
    for &t in &committed {
        if let Some(before) = last[h.txn(t).session.index()].replace(t) {
            sessions.push((before, t));
        }
    }
    if let Ok(order) = topological(n, &committed, &[&edges, &sessions], priority) {
        return Ok((order, false));
    }
    match topological(n, &committed, &[&edges], priority) {
        Ok(order) => Ok((order, false)),
        // A cycle: what precedes it in topological order, then the rest by the timeline.
        Err(mut order) => {
            let mut placed = vec![false; n];
            for t in &order {
                placed[t.index()] = true;
            }
            let mut rest: Vec<TxnId> = committed.into_iter().filter(|t| !placed[t.index()]).collect();
            rest.sort_by_key(|t| priority(*t));
            order.extend(rest);
            Ok((order, true))
        }
    }
}

/// The committed transactions in an order that keeps every edge, choosing the ready
/// transaction of least `priority` first; when the edges have a cycle, `Err` with the
/// transactions placed before it.
fn topological(
    n: usize,
    committed: &[TxnId],
    edges: &[&[(TxnId, TxnId)]],
    priority: impl Fn(TxnId) -> (u64, TxnId),
) -> Result<Vec<TxnId>, Vec<TxnId>> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<TxnId>> = vec![Vec::new(); n];
    // A repeated edge counts once in the in-degree per occurrence and is released as often.
    for &(a, b) in edges.iter().copied().flatten() {
        if a != b {
            out[a.index()].push(b);
            indegree[b.index()] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<(u64, TxnId)>> =
        committed.iter().filter(|t| indegree[t.index()] == 0).map(|t| Reverse(priority(*t))).collect();
    let mut result = Vec::with_capacity(committed.len());
    while let Some(Reverse((_, t))) = ready.pop() {
        result.push(t);
        for &s in &out[t.index()] {
            indegree[s.index()] -= 1;
            if indegree[s.index()] == 0 {
                ready.push(Reverse(priority(s)));
            }
        }
    }
    if result.len() == committed.len() {
        Ok(result)
    } else {
        Err(result)
    }
}

/// Whether each version of an object matches a predicate, evaluated on first use and
/// kept per (predicate, object): reads share predicates, and a read's edges look at
/// several versions of every row of its table.
#[derive(Default)]
pub(crate) struct MatchCache {
    /// Per version index: 0 not evaluated yet, 1 no match, 2 match.
    states: FxHashMap<(PredId, ObjId), Vec<u8>>,
}

impl MatchCache {
    fn matches(
        &mut self,
        cx: &Context<'_>,
        r: OpRef,
        pred: PredId,
        obj: ObjId,
        index: usize,
    ) -> Result<bool, RecoveryError> {
        let order = cx.m.version_order.get(&obj).map(Vec::as_slice).unwrap_or(&[]);
        let states = self.states.entry((pred, obj)).or_insert_with(|| vec![0; order.len()]);
        match states[index] {
            0 => {
                let m = cx.matches(r, pred, obj, cx.value_of(obj, Writer::Txn(order[index])))?;
                states[index] = 1 + u8::from(m);
                Ok(m)
            }
            state => Ok(state == 2),
        }
    }
}

/// A committed predicate operation and the version of each row its snapshot evaluated.
#[derive(Clone, Copy)]
struct PredicateRead<'a> {
    /// The operation.
    r: OpRef,
    /// Its predicate.
    pred: PredId,
    /// Its version set, sorted by object.
    set: &'a [SeenVersion],
}

/// What a version gives a predicate read's result, compared between consecutive versions:
/// where it changes, the read is ordered against the version's writer.
#[derive(Clone, Copy, PartialEq)]
enum Contribution<'h> {
    /// Nothing: unmatched, deleted or unborn (a select, update or delete).
    Nothing,
    /// A matched version, returned as itself: its index, `None` for the initial version.
    Returned(Option<usize>),
    /// An aggregate's dependence key.
    Key(Key<'h>),
}

/// Orders a predicate read against the writers of every row of its table: after the writer
/// of the version where what the version it evaluated contributes began, and before the
/// first later version that contributes otherwise. A select, update or delete returns
/// each matching version as itself (so it follows that version's writer and precedes its
/// successor's, the item edges of a returned row) and nothing for the others (it follows
/// the writer where the row last stopped matching, at or before the version it evaluated,
/// and precedes the first successor that matches again). An aggregate contributes its
/// dependence key (`dependence`, as Emme's checker has it): a row that neither beats the
/// extremum nor is its witness changes nothing.
fn predicate_edges(
    cx: &Context<'_>,
    cache: &mut MatchCache,
    position: &FxHashMap<(TxnId, ObjId), usize>,
    read: PredicateRead<'_>,
    dependence: Option<&Dependence<'_>>,
    edges: &mut Vec<(TxnId, TxnId)>,
) -> Result<(), RecoveryError> {
    let PredicateRead { r, pred, set } = read;
    let (h, t) = (cx.h, r.txn);
    let table = h.predicate(pred).table;
    let objects = cx.objects_of.get(table.index()).map(Vec::as_slice).unwrap_or(&[]);
    let contribution = |obj: ObjId, index: Option<usize>, value: ValueId, matches: bool| match dependence {
        Some(d) => Contribution::Key(d.key(h, obj, value, matches)),
        None if matches => Contribution::Returned(index),
        None => Contribution::Nothing,
    };
    let unborn = match dependence {
        Some(_) => Contribution::Key(Key::Silent),
        None => Contribution::Nothing,
    };
    for &obj in objects {
        let Some(order) = cx.m.version_order.get(&obj) else { continue };
        let writer = set.binary_search_by_key(&obj, |v| v.obj).ok().map(|k| set[k].writer);
        // The index of the version evaluated; `None` for the initial version or no row.
        let seen = match writer {
            None | Some(Writer::Initial) => None,
            Some(Writer::Txn(w)) if w == t => continue,
            Some(Writer::Txn(w)) => match position.get(&(w, obj)) {
                Some(&k) => Some(k),
                None => continue,
            },
        };
        let initial = if cx.initial_has(obj) {
            let value = cx.value_of(obj, Writer::Initial);
            contribution(obj, None, value, cx.matches(r, pred, obj, value)?)
        } else {
            unborn
        };
        let mut at = |j: usize| -> Result<Contribution<'_>, RecoveryError> {
            let value = cx.value_of(obj, Writer::Txn(order[j]));
            Ok(contribution(obj, Some(j), value, cache.matches(cx, r, pred, obj, j)?))
        };
        let (evaluated, from) = match seen {
            None if writer.is_none() => (unborn, 0),
            None => (initial, 0),
            Some(k) => {
                let evaluated = at(k)?;
                for j in (0..=k).rev() {
                    let before = match j.checked_sub(1) {
                        Some(p) => at(p)?,
                        None => initial,
                    };
                    if before != at(j)? {
                        if order[j] != t {
                            edges.push((order[j], t));
                        }
                        break;
                    }
                }
                (evaluated, k + 1)
            }
        };
        for (j, &s) in order.iter().enumerate().skip(from) {
            if s == t {
                break;
            }
            if at(j)? != evaluated {
                edges.push((t, s));
                break;
            }
        }
    }
    Ok(())
}

/// The rows `r`'s version set matches, as (object, value) sorted by object: what an
/// aggregate computed over. A row the reader wrote itself has the value it had written by
/// then (the version set names the reader, whose final value may come later).
fn matched_rows(
    cx: &Context<'_>,
    cache: &mut MatchCache,
    position: &FxHashMap<(TxnId, ObjId), usize>,
    read: PredicateRead<'_>,
) -> Result<Vec<(ObjId, ValueId)>, RecoveryError> {
    let PredicateRead { r, pred, set } = read;
    let mut rows = Vec::new();
    for seen in set {
        let (value, matches) = match seen.writer {
            Writer::Txn(w) if w == r.txn => {
                let value = own_value_before(cx, r, seen.obj);
                (value, value != ValueId::ABSENT && cx.matches(r, pred, seen.obj, value)?)
            }
            Writer::Txn(w) => match position.get(&(w, seen.obj)) {
                Some(&k) => (cx.value_of(seen.obj, seen.writer), cache.matches(cx, r, pred, seen.obj, k)?),
                None => continue,
            },
            Writer::Initial => {
                let value = cx.value_of(seen.obj, Writer::Initial);
                (value, value != ValueId::ABSENT && cx.matches(r, pred, seen.obj, value)?)
            }
        };
        if matches {
            rows.push((seen.obj, value));
        }
    }
    rows.sort_unstable();
    Ok(rows)
}

/// The value `obj` has after the writes of `r`'s transaction before operation `r`.
fn own_value_before(cx: &Context<'_>, r: OpRef, obj: ObjId) -> ValueId {
    let mut own = FxHashMap::default();
    cx.h.txn(r.txn).ops[..r.op as usize].iter().for_each(|op| record_own_writes(op, &mut own));
    own.get(&obj).copied().unwrap_or(ValueId::ABSENT)
}
