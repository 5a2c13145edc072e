//! Renderers of a [`Report`]: text for people, JSON for machines, Graphviz DOT of the
//! counterexamples.

use std::fmt::Write as _;

use isocert_history::{History, ObjId, OpRef, TxnId};
use serde_json::{json, Value as Json};

use crate::{Anomaly, AnomalyKind, Edge, Report};

/// The report as text for a terminal: the verdict, a table of the anomalies per class, then
/// each anomaly in plain words with, for cycles, one line per dependency saying why it
/// orders its two transactions.
pub fn render_text(report: &Report, h: &History) -> String {
    text(report, h, false)
}

/// [`render_text`] plus the internal detail (`-v`): per dependency its kind, object and
/// operation (`T5#3` is T5's operation 3, counted from 1 as explanations count them), and
/// the operations each anomaly names.
pub fn render_text_verbose(report: &Report, h: &History) -> String {
    text(report, h, true)
}

fn op_label(h: &History, op: OpRef) -> String {
    format!("{}#{}", h.txn_label(op.txn), op.op + 1)
}

fn text(report: &Report, h: &History, verbose: bool) -> String {
    let mut out = String::new();
    let verdict = if report.is_valid() { "VALID" } else { "INVALID" };
    let _ = writeln!(
        out,
        "{verdict}: {} transactions checked for {} ({}) by {}; {} anomal{} found",
        report.stats.txns,
        report.level_checked(),
        report.session_order,
        report.checker,
        report.anomalies.len(),
        if report.anomalies.len() == 1 { "y" } else { "ies" }
    );
    if !report.anomalies.is_empty() {
        let mut counts: Vec<(AnomalyKind, usize)> = Vec::new();
        for a in &report.anomalies {
            match counts.iter_mut().find(|(k, _)| *k == a.kind) {
                Some((_, c)) => *c += 1,
                None => counts.push((a.kind, 1)),
            }
        }
        counts.sort();
        let width = counts.iter().map(|(k, _)| k.as_str().len()).max().unwrap_or(5).max(5);
        let _ = writeln!(out, "\n  {:<width$}  {:>6}  what it means", "class", "count");
        for (kind, count) in counts {
            let _ = writeln!(
                out,
                "  {:<width$}  {count:>6}  {}",
                kind.as_str(),
                crate::words::class_meaning(kind)
            );
        }
    }
    if !report.notes.is_empty() {
        out.push('\n');
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for (i, a) in report.anomalies.iter().enumerate() {
        let txns: Vec<String> = a.txns.iter().map(|&t| h.txn_label(t)).collect();
        let _ = writeln!(out, "\n[{}] {} ({})", i + 1, a.kind, txns.join(", "));
        let _ = writeln!(out, "    {}", a.explanation);
        if verbose && !a.ops.is_empty() {
            let ops: Vec<String> = a.ops.iter().map(|&op| op_label(h, op)).collect();
            let _ = writeln!(out, "    operations: {}", ops.join(", "));
        }
        if !a.cycle.is_empty() {
            let _ = writeln!(out, "    the cycle, one dependency per line:");
            for e in &a.cycle {
                let _ = writeln!(
                    out,
                    "      {} -> {} ({}, {}): {}",
                    h.txn_label(e.from),
                    h.txn_label(e.to),
                    crate::words::edge_meaning(e.kind),
                    e.basis,
                    e.explanation
                );
                if verbose {
                    let _ = writeln!(
                        out,
                        "        [edge {}, object {}, operation {}]",
                        e.kind,
                        e.obj.map_or("-".to_string(), |o| h.object_label(o)),
                        e.op.map_or("-".to_string(), |op| op_label(h, op))
                    );
                }
            }
        }
    }
    out
}

fn txn_json(h: &History, t: TxnId) -> Json {
    h.txn(t).name.to_json()
}

fn obj_json(h: &History, o: ObjId) -> Json {
    let key = h.object(o);
    json!({ "table": &*h.table(key.table).name, "key": key.key.to_json() })
}

fn op_json(h: &History, op: OpRef) -> Json {
    json!({ "txn": txn_json(h, op.txn), "op": op.op })
}

fn edge_json(h: &History, e: &Edge) -> Json {
    json!({
        "from": txn_json(h, e.from),
        "to": txn_json(h, e.to),
        "kind": e.kind.as_str(),
        "object": e.obj.map(|o| obj_json(h, o)),
        "op": e.op.map(|op| op_json(h, op)),
        "explanation": e.explanation,
        "basis": e.basis.as_str(),
    })
}

fn anomaly_json(h: &History, a: &Anomaly) -> Json {
    json!({
        "kind": a.kind.as_str(),
        "txns": a.txns.iter().map(|&t| txn_json(h, t)).collect::<Vec<_>>(),
        "ops": a.ops.iter().map(|&op| op_json(h, op)).collect::<Vec<_>>(),
        "objects": a.objects.iter().map(|&o| obj_json(h, o)).collect::<Vec<_>>(),
        "explanation": a.explanation,
        "cycle": a.cycle.iter().map(|e| edge_json(h, e)).collect::<Vec<_>>(),
    })
}

/// The report as JSON: `valid`, `level`, `checker`, `stats`, `notes` and `anomalies`
/// (each with `kind`, `txns` and `ops` by their ids in the history file, `objects` as
/// `{table, key}`, `explanation` and the explained `cycle`).
pub fn render_json(report: &Report, h: &History) -> Json {
    json!({
        "valid": report.is_valid(),
        "level": report.level.as_str(),
        "documented_by": report.documented_by.as_deref(),
        "session_order": report.session_order == crate::SessionOrder::Included,
        "checker": report.checker.as_str(),
        "stats": {
            "txns": report.stats.txns,
            "committed": report.stats.committed,
            "ops": report.stats.ops,
            "edges": report.stats.edges,
            "reads_resolved_by_certificate": report.stats.reads_resolved_by_certificate,
            "ambiguous_reads": report.stats.ambiguous_reads,
        },
        "notes": report.notes,
        "anomalies": report.anomalies.iter().map(|a| anomaly_json(h, a)).collect::<Vec<_>>(),
    })
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The counterexamples as a Graphviz digraph: one cluster per anomaly, transactions as
/// nodes, each cycle edge labelled with its kind and object. Non-cyclic anomalies appear
/// as their transactions with the explanation as the cluster label.
pub fn render_dot(report: &Report, h: &History) -> String {
    let mut out =
        String::from("digraph isocert {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    let _ = writeln!(
        out,
        "  label=\"{}\";",
        dot_escape(&format!(
            "{} under {} ({}): {} anomalies",
            if report.is_valid() { "valid" } else { "invalid" },
            report.level,
            report.checker,
            report.anomalies.len()
        ))
    );
    for (i, a) in report.anomalies.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{i} {{");
        let _ = writeln!(
            out,
            "    label=\"{}\";",
            dot_escape(&format!("[{}] {}: {}", i + 1, a.kind, a.explanation))
        );
        for &t in &a.txns {
            let _ = writeln!(out, "    a{i}_t{} [label=\"{}\"];", t.0, dot_escape(&h.txn_label(t)));
        }
        for e in &a.cycle {
            let label = match e.obj {
                Some(o) => format!("{} {}", e.kind, h.object_label(o)),
                None => e.kind.to_string(),
            };
            let style = if e.kind.is_anti() { ", style=dashed" } else { "" };
            let _ = writeln!(
                out,
                "    a{i}_t{} -> a{i}_t{} [label=\"{}\", tooltip=\"{}\"{style}];",
                e.from.0,
                e.to.0,
                dot_escape(&label),
                dot_escape(&e.explanation)
            );
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}
