//! The certificate facts one dependency edge relies on, as HTML: the object's version order
//! around the versions involved (ww, wr, rw), the version set of a predicate read (predicate
//! edges, and item reads the certificate resolved), the timestamps of a start-dependency,
//! the clients' times of a real-time edge.

use isocert_history::{Certificate, History, ObjId, OpRef, TxnId, Writer};

use super::esc;
use crate::{Edge, EdgeKind};

/// How many version order entries are shown on each side of the ones an edge involves.
const CONTEXT: usize = 2;

/// The facts behind `e`, as an HTML fragment.
pub(super) fn edge_facts(h: &History, cert: &Certificate, e: &Edge) -> String {
    let mut parts: Vec<String> = Vec::new();
    match e.kind {
        EdgeKind::StartDep => {
            let (from, to) = (h.txn(e.from), h.txn(e.to));
            let ts = |t: Option<isocert_history::Timestamp>| t.map_or("none".to_string(), |t| t.to_string());
            parts.push(format!(
                "commit_ts of {} = {} &le; start_ts of {} = {} (history timestamps)",
                esc(&h.txn_label(e.from)),
                esc(&ts(from.commit_ts())),
                esc(&h.txn_label(e.to)),
                esc(&ts(to.start_ts()))
            ));
        }
        EdgeKind::RealTime => {
            let time = |t: TxnId| h.txn(t).real_time();
            if let (Some(a), Some(b)) = (time(e.from), time(e.to)) {
                parts.push(format!(
                    "completed_at of {} = {} &lt; invoked_at of {} = {} (the clients' clock)",
                    esc(&h.txn_label(e.from)),
                    a.completed_at,
                    esc(&h.txn_label(e.to)),
                    b.invoked_at
                ));
            }
        }
        EdgeKind::Session => parts.push(format!(
            "both ran in session {}; {} comes first in the history",
            esc(&h.session_name(h.txn(e.from).session).to_string()),
            esc(&h.txn_label(e.from))
        )),
        _ => {
            if let Some(obj) = e.obj {
                if let Some(op) = e.op {
                    let which =
                        format!("version set of {} operation {}", esc(&h.txn_label(op.txn)), op.op + 1);
                    match seen_in_set(cert, op, obj) {
                        Some(Seen::Listed(w)) => parts.push(format!(
                            "{which}: it saw the version of {} by {}",
                            esc(&h.object_label(obj)),
                            esc(&writer_name(h, w))
                        )),
                        Some(Seen::Unlisted) => parts.push(format!(
                            "{which}: {} is not in it, so the operation saw it before it existed",
                            esc(&h.object_label(obj))
                        )),
                        None => {}
                    }
                }
                parts.push(version_order(h, cert, obj, e));
            }
        }
    }
    parts.join("<br>")
}

/// What an operation's version set says about one object.
enum Seen {
    /// The set lists the object's version by this writer.
    Listed(Writer),
    /// The set does not list the object: it was unborn for the operation.
    Unlisted,
}

/// What the certificate's version set of `op` says about `obj` (`None`: `op` has no set).
fn seen_in_set(cert: &Certificate, op: OpRef, obj: ObjId) -> Option<Seen> {
    let set = cert.version_sets.as_ref()?.get(&op)?;
    Some(set.iter().find(|v| v.obj == obj).map_or(Seen::Unlisted, |v| Seen::Listed(v.writer)))
}

/// The writer of the version of `obj` that operation `op` saw, per the certificate's version
/// sets (an unlisted object was unborn: the initial version).
fn seen_by(cert: &Certificate, op: OpRef, obj: ObjId) -> Option<Writer> {
    match seen_in_set(cert, op, obj)? {
        Seen::Listed(w) => Some(w),
        Seen::Unlisted => Some(Writer::Initial),
    }
}

fn writer_name(h: &History, w: Writer) -> String {
    match w {
        Writer::Initial => "the initial state".to_string(),
        Writer::Txn(t) => h.txn_label(t),
    }
}

/// The version order of `obj` near the entries of `e`'s transactions, those in bold.
fn version_order(h: &History, cert: &Certificate, obj: ObjId, e: &Edge) -> String {
    let label = esc(&h.object_label(obj));
    let Some(order) = cert.version_order.as_ref() else {
        return format!("the certificate has no version order (for {label})");
    };
    let empty = Vec::new();
    let writers: &Vec<TxnId> = order.get(&obj).unwrap_or(&empty);
    // Position 0 is the initial version; transaction k of the order is at k + 1.
    let mut entries: Vec<String> = vec!["initial".to_string()];
    entries.extend(writers.iter().map(|&t| h.txn_label(t)));
    let pos = |t: TxnId| writers.iter().position(|&w| w == t).map(|p| p + 1);
    let mut marked: Vec<usize> = Vec::new();
    match e.kind {
        EdgeKind::Ww | EdgeKind::Wr => {
            marked.extend(pos(e.from));
            marked.extend(pos(e.to));
        }
        EdgeKind::Rw | EdgeKind::PredicateRw => {
            // `from` read a version (the one its version set names, else for item reads the
            // one just before `to`'s) and `to` installed a later one.
            let seen = e.op.and_then(|op| seen_by(cert, op, obj)).map(|w| match w {
                Writer::Initial => Some(0),
                Writer::Txn(t) => pos(t),
            });
            if let Some(p) = pos(e.to) {
                marked.push(p);
                if e.kind == EdgeKind::Rw && seen.is_none() {
                    marked.push(p - 1);
                }
            }
            marked.extend(seen.flatten());
        }
        _ => {
            marked.extend(pos(e.from));
            marked.extend(pos(e.to));
        }
    }
    if marked.is_empty() {
        return format!(
            "version order of {label}: {} (neither transaction is in it)",
            esc(&entries.join(" → "))
        );
    }
    marked.sort_unstable();
    marked.dedup();
    let lo = marked[0].saturating_sub(CONTEXT);
    let hi = (marked[marked.len() - 1] + CONTEXT).min(entries.len() - 1);
    let mut shown: Vec<String> = Vec::new();
    if lo > 0 {
        shown.push(format!("… {lo} earlier"));
    }
    for (i, entry) in entries.iter().enumerate().take(hi + 1).skip(lo) {
        if marked.contains(&i) {
            shown.push(format!("<b>{}</b>", esc(entry)));
        } else {
            shown.push(esc(entry));
        }
    }
    if hi + 1 < entries.len() {
        shown.push(format!("{} later …", entries.len() - 1 - hi));
    }
    format!("version order of {label}: {}", shown.join(" → "))
}
