//! One sentence per dependency edge, naming transactions, objects, values and operations.

use isocert_history::{History, OpRef, TxnId};

use super::RawEdge;
use crate::values::ValueStore;
use crate::versions::{writer_label, VersionTable};
use crate::{Edge, EdgeKind};

/// The explained form of `e`.
pub(crate) fn explain(h: &History, values: &ValueStore<'_>, vt: &VersionTable, e: &RawEdge) -> Edge {
    let version = |g: u32| {
        let v = vt.versions[g as usize];
        format!("{}={}", h.object_label(v.obj), values.label(v.obj, v.value))
    };
    let who = |g: u32| writer_label(h, vt.versions[g as usize].writer);
    let from = h.txn_label(TxnId(e.from));
    let to = h.txn_label(TxnId(e.to));
    let pred = |t: u32| {
        let op = &h.txn(TxnId(t)).ops[e.op as usize];
        let sql = op.predicate().map(|p| h.predicate(p).sql.to_string()).unwrap_or_default();
        format!("{}'s predicate read `{sql}` (op {})", h.txn_label(TxnId(t)), e.op)
    };
    let explanation = match e.kind {
        EdgeKind::Ww => format!("{from} installed {}; {to} installed the next version, {}", version(e.ver), version(e.aux)),
        EdgeKind::Wr => format!("{to} read {} written by {from} (op {})", version(e.ver), e.op),
        EdgeKind::Rw => format!(
            "{from} read {} written by {} (op {}); {to} installed the next version, {}",
            version(e.ver),
            who(e.ver),
            e.op,
            version(e.aux)
        ),
        EdgeKind::PredicateWr => format!(
            "{from} installed {}, which changes the matches of {}, and that read saw this version or a later one{}",
            version(e.ver),
            pred(e.to),
            if e.aux == u32::MAX || e.aux == e.ver { String::new() } else { format!(" ({})", version(e.aux)) }
        ),
        EdgeKind::PredicateRw => format!(
            "{} saw {} (by {}); {to} installed the later version {}, which changes its matches",
            pred(e.from),
            version(e.ver),
            who(e.ver),
            version(e.aux)
        ),
        EdgeKind::Session => format!("{from} precedes {to} in their session"),
        EdgeKind::StartDep => {
            let ts = |t: u32, start: bool| {
                let txn = h.txn(TxnId(t));
                let ts = if start { txn.start_ts } else { txn.commit_ts };
                ts.map_or("?".to_string(), |ts| ts.to_string())
            };
            format!("{from} committed at {}, no later than {to} started at {}", ts(e.from, false), ts(e.to, true))
        }
    };
    let obj = (e.ver != u32::MAX && e.kind != EdgeKind::StartDep).then(|| vt.versions[e.ver as usize].obj);
    let op = match e.kind {
        EdgeKind::Wr | EdgeKind::PredicateWr => Some(OpRef { txn: TxnId(e.to), op: e.op }),
        EdgeKind::Rw | EdgeKind::PredicateRw => Some(OpRef { txn: TxnId(e.from), op: e.op }),
        _ => None,
    };
    Edge { from: TxnId(e.from), to: TxnId(e.to), kind: e.kind, obj, op, explanation }
}
