//! In-place injections: one operation of a generated transaction, or the certificate.

use super::Injection;
use crate::record::{OpRec, Outcome, RowVal, TxnRecord, Val};
use crate::sim::Sim;
use crate::GenError;

/// Edits `rec` (a finished transaction about to be emitted) when it is the injection's site:
/// the first committed transaction from the middle of the history on with a suitable op.
pub(crate) fn maybe_edit(sim: &mut Sim<'_>, rec: &mut TxnRecord) {
    let planted = &sim.planted;
    if planted.edited || rec.outcome != Outcome::Committed || rec.id < planted.edit_from {
        return;
    }
    match planted.kind {
        Some(Injection::GarbageRead) => {
            let Some(i) = external_read(&rec.ops) else { return };
            let OpRec::Read { obj, val } = rec.ops[i] else { return };
            let garbage = garbage_for(sim, val);
            rec.ops[i] = OpRec::Read { obj, val: garbage };
            sim.stats.injected = format!(
                "garbage-read: T{} op {i} now reads key {obj} = {} (a value nobody wrote)",
                rec.id,
                describe(garbage)
            );
        }
        Some(Injection::ResultSetMismatch) => {
            let site =
                rec.ops.iter().position(|op| matches!(op, OpRec::Select { rows, .. } if !rows.is_empty()));
            let Some(i) = site else { return };
            let OpRec::Select { rows, .. } = &mut rec.ops[i] else { return };
            let (dropped, _) = rows.pop().expect("non-empty select");
            sim.stats.injected = format!(
                "result-set-mismatch: T{} op {i} (a select) no longer returns row {dropped}, which its \
                 version set says matched",
                rec.id
            );
        }
        _ => return,
    }
    sim.planted.edited = true;
}

/// The first item read of an object the transaction has not written before it.
fn external_read(ops: &[OpRec]) -> Option<usize> {
    ops.iter().enumerate().position(|(i, op)| match op {
        OpRec::Read { obj, .. } => !ops[..i].iter().any(|o| writes(o, *obj)),
        _ => false,
    })
}

/// Whether `op` installs a version of `obj`.
pub(crate) fn writes(op: &OpRec, obj: u32) -> bool {
    match op {
        OpRec::Write { obj: o, .. } | OpRec::Append { obj: o, .. } => *o == obj,
        OpRec::Update { rows, .. } => rows.iter().any(|(o, _)| *o == obj),
        OpRec::Delete { rows, .. } => rows.contains(&obj),
        _ => false,
    }
}

/// A value of the same shape as `like` that nobody wrote: generated values and row stamps
/// are positive, so a negative one is garbage (and taking it does not shift the stamps of
/// the transactions generated after the edit).
pub(crate) fn garbage_for(sim: &Sim<'_>, like: Val) -> Val {
    match like {
        Val::Row(r) => Val::Row(RowVal { c1: GARBAGE, ..r }),
        Val::Absent if sim.model == crate::DataModel::SqlTable => {
            Val::Row(RowVal { c0: 0, c1: GARBAGE, c2: 0 })
        }
        _ => Val::Int(GARBAGE),
    }
}

/// The value (or row stamp) of a garbage read.
const GARBAGE: i64 = -1;

/// A short rendering of a value for the injection's description.
pub(crate) fn describe(val: Val) -> String {
    match val {
        Val::Absent => "absent".into(),
        Val::Int(i) => i.to_string(),
        Val::Row(r) => format!("{{c0: {}, c1: {}, c2: {}}}", r.c0, r.c1, r.c2),
        Val::List(n) => format!("a list of {n}"),
    }
}

/// Adds to the version order of the most-written object a committed transaction that
/// never wrote it, at the end (as if it had installed the newest version).
pub(crate) fn certificate_contradiction(sim: &mut Sim<'_>) -> Result<(), GenError> {
    let no_site =
        |reason: &str| GenError::NoInjectionSite { kind: "certificate-contradiction", reason: reason.into() };
    let cert =
        sim.cert.as_mut().ok_or_else(|| no_site("the run keeps no certificate (give --certificate)"))?;
    let (obj, writers) = cert
        .version_order
        .iter()
        .enumerate()
        .max_by_key(|(i, w)| (w.len(), usize::MAX - i))
        .filter(|(_, w)| !w.is_empty())
        .ok_or_else(|| no_site("no committed transaction wrote anything"))?;
    let mut sorted = writers.clone();
    sorted.sort_unstable();
    let intruder = cert
        .commits
        .iter()
        .map(|&(_, id)| id)
        .find(|id| sorted.binary_search(id).is_err())
        .ok_or_else(|| no_site("every committed transaction wrote the most-written object"))?;
    cert.version_order[obj].push(intruder);
    sim.stats.injected = format!(
        "certificate-contradiction: the version order of key {obj} now ends with T{intruder}, which never wrote it"
    );
    Ok(())
}
