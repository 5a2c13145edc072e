//! Elle's closed-universe inference: the certificate of a closed-predicate history.
//!
//! Elle's closed-predicate workload writes every key's initial version in one `:init` and
//! then mutates each key at most once (`:insert`, `:w` or `:delete`), so every key has at
//! most two versions and their order is known. A predicate read's version set then follows
//! by elimination: a key the read returned was seen at the version holding that value; a
//! key it did not return was seen at the one version the predicate does not match, when
//! there is exactly one. When both versions fail to match, either choice gives the same
//! matches and the initial version (which induces no edges) is named; when both match, the
//! read should have returned the key, and naming the initial version lets the checker
//! report the result-set mismatch (Elle's `predicate-read-miss`).
//!
//! Histories where some key is mutated by two transactions are outside the closed
//! universe; they get no certificate (and a note saying so).

use rustc_hash::FxHashMap;

use super::edn::Edn;
use super::elle_ops::sql_to_predicate;
use crate::{
    Certificate, History, ObjId, Op, OpRef, Scalar, SeenVersion, Status, TxnId, Value, ValueId, Writer,
};

/// A closed-universe certificate, or why none could be inferred.
pub(crate) fn closed_universe_certificate(h: &History) -> Result<Certificate, String> {
    let mut mutator: FxHashMap<ObjId, (TxnId, ValueId)> = FxHashMap::default();
    for t in h.txn_ids().filter(|&t| h.txn(t).status != Status::Aborted) {
        for op in &h.txn(t).ops {
            let (obj, value) = match op {
                Op::Write { obj, value } => (*obj, *value),
                Op::Read { .. } | Op::Select { .. } => continue,
                _ => return Err("it holds operations other than reads, writes and predicate reads".into()),
            };
            match mutator.insert(obj, (t, value)) {
                Some((other, _)) if other != t => {
                    return Err(format!(
                    "{} is mutated by both {} and {} (the closed universe mutates each key once after :init)",
                    h.object_label(obj),
                    h.txn_label(other),
                    h.txn_label(t)
                ))
                }
                _ => {}
            }
        }
    }
    let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let mut universe: Vec<ObjId> = initial.keys().chain(mutator.keys()).copied().collect();
    universe.sort_unstable();
    universe.dedup();
    let mut sets: FxHashMap<OpRef, Vec<SeenVersion>> = FxHashMap::default();
    for t in h.txn_ids().filter(|&t| h.txn(t).status != Status::Aborted) {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let Op::Select { predicate, rows } = op else { continue };
            let sql = &h.predicate(*predicate).sql;
            let pred = sql_to_predicate(sql)
                .ok_or_else(|| format!("predicate {sql:?} is not one of Elle's closed predicates"))?;
            let returned_rows: FxHashMap<ObjId, ValueId> = rows.iter().map(|r| (r.obj, r.value)).collect();
            let mut set = Vec::with_capacity(universe.len());
            for &obj in &universe {
                let before = initial.get(&obj).copied().unwrap_or(ValueId::ABSENT);
                let after = mutator.get(&obj).copied();
                // The reader's own mutation is visible to it only after the mutating op.
                let own_done = after.is_some_and(|(w, _)| {
                    w == t
                        && h.txn(t).ops[..i]
                            .iter()
                            .any(|op| matches!(op, Op::Write { obj: o, .. } if *o == obj))
                });
                let (first, second) = match after {
                    Some((w, _)) if w == t && !own_done => (before, None),
                    Some((w, v)) => (before, Some((w, v))),
                    None => (before, None),
                };
                let returned = returned_rows.get(&obj).copied();
                let seen = match (returned, second) {
                    (Some(v), Some((w, v2))) if v == v2 && v != first => Writer::Txn(w),
                    (Some(_), _) => Writer::Initial,
                    (None, Some((w, v2))) => {
                        let m1 = matches(h, &pred, first)?;
                        let m2 = matches(h, &pred, v2)?;
                        if m1 && !m2 {
                            Writer::Txn(w)
                        } else {
                            Writer::Initial
                        }
                    }
                    (None, None) => Writer::Initial,
                };
                if seen == Writer::Initial && first == ValueId::ABSENT && returned.is_none() {
                    continue;
                }
                set.push(SeenVersion { obj, writer: seen });
            }
            sets.insert(OpRef { txn: t, op: i as u32 }, set);
        }
    }
    let mut order: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
    for (obj, (t, _)) in mutator {
        order.insert(obj, vec![t]);
    }
    Ok(Certificate { version_order: Some(order), version_sets: Some(sets), ..Certificate::default() })
}

/// Whether a closed predicate matches a value (absent never matches); the remainder is
/// SQL's (truncated), as the checker's oracle evaluates `value % m = r`.
fn matches(h: &History, pred: &Edn, value: ValueId) -> Result<bool, String> {
    if value == ValueId::ABSENT {
        return Ok(false);
    }
    let v = match h.value(value) {
        Value::Scalar(Scalar::Int(v)) => *v,
        other => return Err(format!("value {other:?} is not an integer, which closed predicates compare")),
    };
    Ok(match pred {
        Edn::Keyword(_) => true,
        Edn::Vector(parts) => match parts.as_slice() {
            [_, Edn::Int(goal)] => v == *goal,
            [_, Edn::Int(m), Edn::Int(r)] => v.checked_rem(*m) == Some(*r),
            _ => unreachable!("sql_to_predicate builds these shapes only"),
        },
        _ => unreachable!("sql_to_predicate builds these shapes only"),
    })
}
