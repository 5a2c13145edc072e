//! One sentence per dependency edge, naming transactions, objects, values and operations.

use isocert_history::{History, OpRef, TxnId, ValueId};

use super::RawEdge;
use crate::values::ValueStore;
use crate::versions::{writer_label, VersionTable, INITIAL};
use crate::{Edge, EdgeBasis, EdgeKind};

/// The explained form of `e`: one sentence in the words of Adya's thesis (who wrote which
/// version, which version a read saw, why that orders the two transactions). Operation
/// indices are left to [`Edge::op`] (shown by `-v`).
pub(crate) fn explain(h: &History, values: &ValueStore<'_>, vt: &VersionTable, e: &RawEdge) -> Edge {
    let absent = |g: u32| vt.versions[g as usize].value == ValueId::ABSENT;
    let obj = |g: u32| h.object_label(vt.versions[g as usize].obj);
    let value = |g: u32| {
        let v = vt.versions[g as usize];
        values.label(v.obj, v.value)
    };
    let who = |g: u32| writer_label(h, vt.versions[g as usize].writer);
    let initial = |g: u32| vt.versions[g as usize].writer == INITIAL;
    // A version as a reader saw it: "kv[x] = 1 (written by T3)", "no row for t[4] (T9 had deleted it)".
    let seen = |g: u32| match (absent(g), initial(g)) {
        (true, true) => format!("no row for {} (it did not exist yet)", obj(g)),
        (true, false) => format!("no row for {} ({} had deleted it)", obj(g), who(g)),
        (false, true) => format!("{} = {} (its initial value)", obj(g), value(g)),
        (false, false) => format!("{} = {} (written by {})", obj(g), value(g), who(g)),
    };
    // What a writer did: "wrote kv[x] = 2", "deleted t[4]".
    let installed = |g: u32| {
        if absent(g) {
            format!("deleted {}", obj(g))
        } else {
            format!("wrote {} = {}", obj(g), value(g))
        }
    };
    // A version of an unordered tail: its value depends on an order nobody observed.
    let appended = |g: u32| format!("appended to {}", obj(g));
    let from = h.txn_label(TxnId(e.from));
    let to = h.txn_label(TxnId(e.to));
    let pred = |t: u32| {
        let op = &h.txn(TxnId(t)).ops[e.op as usize];
        let sql = op.predicate().map(|p| h.predicate(p).sql.to_string()).unwrap_or_default();
        format!("{}'s predicate read `{sql}`", h.txn_label(TxnId(t)))
    };
    let explanation = match e.kind {
        EdgeKind::Ww if vt.is_unordered(e.aux) => format!(
            "{from} {}; {to} then {}: no read shows {to}'s append, so it came after every version the reads show",
            installed(e.ver),
            appended(e.aux)
        ),
        EdgeKind::Rw if vt.is_unordered(e.aux) => format!(
            "{from} saw {}; {to} then {}, which no read shows, so it came after the version {from} saw",
            seen(e.ver),
            appended(e.aux)
        ),
        EdgeKind::Ww => format!(
            "{from} {}; {to} then {}, the next version in the database's order",
            installed(e.ver),
            installed(e.aux)
        ),
        EdgeKind::Wr => format!("{to} saw {}", seen(e.ver)),
        EdgeKind::Rw => format!(
            "{from} saw {}; {to} then {}, the next version, which {from} did not see",
            seen(e.ver),
            installed(e.aux)
        ),
        EdgeKind::PredicateWr => format!(
            "{from} {}, which changes what {} matches, and that read saw this version or a later one{}",
            installed(e.ver),
            pred(e.to),
            if e.aux == u32::MAX || e.aux == e.ver { String::new() } else { format!(" ({})", seen(e.aux)) }
        ),
        EdgeKind::PredicateRw => format!(
            "{} saw {}; {to} then {}, a later version that changes its matches, which the read did not see",
            pred(e.from),
            seen(e.ver),
            installed(e.aux)
        ),
        EdgeKind::Session => format!("{from} precedes {to} in their session"),
        // Emme does not decide strict serializability (MTC explains its own edges).
        EdgeKind::RealTime => format!("{from} completed before {to} was invoked"),
        EdgeKind::StartDep => {
            let ts = |t: u32, start: bool| {
                let txn = h.txn(TxnId(t));
                let ts = if start { txn.start_ts() } else { txn.commit_ts() };
                ts.map_or("?".to_string(), |ts| ts.to_string())
            };
            format!(
                "{from} committed (commit_ts {}) no later than {to} started (start_ts {}), so {to}'s snapshot \
                 includes {from}",
                ts(e.from, false),
                ts(e.to, true)
            )
        }
    };
    let obj = (e.ver != u32::MAX && e.kind != EdgeKind::StartDep).then(|| vt.versions[e.ver as usize].obj);
    let op = match e.kind {
        EdgeKind::Wr | EdgeKind::PredicateWr => Some(OpRef { txn: TxnId(e.to), op: e.op }),
        EdgeKind::Rw | EdgeKind::PredicateRw => Some(OpRef { txn: TxnId(e.from), op: e.op }),
        _ => None,
    };
    Edge {
        from: TxnId(e.from),
        to: TxnId(e.to),
        kind: e.kind,
        obj,
        op,
        explanation,
        basis: EdgeBasis::of_kind(e.kind),
    }
}
