//! The report as one self-contained HTML page for people: a summary with counts per anomaly
//! class, then for the first anomalies the counterexample drawn as a graph (SVG), a timeline
//! of the transactions involved and the certificate facts every edge relied on, then a paged
//! list of all anomalies.
//!
//! Everything is inline (CSS, a little JavaScript, SVG): the file opens offline in any
//! browser. Graphs are laid out by Graphviz `dot -Tsvg` when it is installed and by a
//! built-in layered layout otherwise ([`GraphLayout`]); both give every transaction a
//! `g.node.txn` with id `a<N>-t<txn>` and every dependency a `g.edge` with id `a<N>-e<i>`, so
//! tests and scripts read either the same way. Clicking a transaction (in the graph or the
//! timeline) shows its operations; the URL fragment `#click=<element id>` clicks one on load.
//!
//! The page stays small on huge reports: only [`HtmlOptions::drawn`] anomalies are drawn; the
//! list of all anomalies is one compact JSON array the page renders a page at a time
//! (10,000 anomalies make about 2 MB).

mod facts;
mod graph;
mod ops;
mod timeline;

use std::fmt::Write as _;

use isocert_history::{Certificate, History, TxnId};

use crate::{Anomaly, AnomalyKind, Report};

/// How counterexample graphs are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GraphLayout {
    /// Graphviz when `dot` runs, the built-in layout otherwise.
    #[default]
    Auto,
    /// Graphviz `dot -Tsvg`; falls back to the built-in layout (saying so on the page) when
    /// `dot` cannot run.
    Graphviz,
    /// The built-in layered layout (no external program).
    Builtin,
}

impl GraphLayout {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            GraphLayout::Auto => "auto",
            GraphLayout::Graphviz => "graphviz",
            GraphLayout::Builtin => "builtin",
        }
    }
}

impl std::str::FromStr for GraphLayout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(GraphLayout::Auto),
            "graphviz" | "dot" => Ok(GraphLayout::Graphviz),
            "builtin" => Ok(GraphLayout::Builtin),
            other => Err(format!("unknown graph layout {other:?}: expected auto, graphviz or builtin")),
        }
    }
}

/// What the HTML page shows besides the report.
#[derive(Clone, Debug)]
pub struct HtmlOptions {
    /// How graphs are laid out.
    pub layout: GraphLayout,
    /// How many anomalies are drawn in full (graph, timeline, facts); the others appear in
    /// the paged list only.
    pub drawn: usize,
    /// Facts about the run shown in the summary, in order (database, workload, throughput,
    /// aborts, recovery lag, ...), as label and value.
    pub context: Vec<(String, String)>,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions { layout: GraphLayout::Auto, drawn: 50, context: Vec::new() }
    }
}

/// HTML-escapes text for element content and quoted attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON text safe inside a `<script type="application/json">` element: `<`, `>` and `&`
/// written as `\u003c`, `\u003e`, `\u0026` (so no `</script>`, `<!--` or `<script` in
/// an identifier changes where the HTML parser ends the element), U+2028 and U+2029 as
/// `\u2028`, `\u2029`. The JSON value is unchanged: these escapes are the same characters
/// to `JSON.parse`.
pub(crate) fn script_json(value: &serde_json::Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The report as a self-contained HTML page; see the module doc. `cert` supplies the
/// certificate facts shown per edge (an empty certificate shows none).
pub fn render_html(report: &Report, h: &History, cert: &Certificate, opts: &HtmlOptions) -> String {
    // The facts name versions row by row: compact version sets are expanded once (a set
    // that cannot be resolved shows no facts, as the check already reported it).
    let expanded;
    let cert = if cert.snapshot_sets.is_some() {
        let mut c = cert.clone();
        if c.expand_snapshot_sets(h).is_err() {
            c.snapshot_sets = None;
        }
        expanded = c;
        &expanded
    } else {
        cert
    };
    let drawn: Vec<&Anomaly> = report.anomalies.iter().take(opts.drawn).collect();
    let graphs: Vec<graph::Graph> =
        drawn.iter().enumerate().map(|(i, a)| graph::Graph::of(i + 1, a)).collect();
    let (svgs, layout_note) = graph::layout_all(h, &graphs, opts.layout);

    let mut out = String::with_capacity(64 * 1024);
    let verdict = if report.is_valid() { "VALID" } else { "INVALID" };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>isocert: {verdict} under {}</title><style>{}</style></head><body>\n",
        report.level,
        include_str!("page.css")
    );
    summary(&mut out, report, opts, verdict);
    if !drawn.is_empty() {
        let title = match (drawn.len(), report.anomalies.len()) {
            (1, 1) => "The anomaly, drawn".to_string(),
            (d, n) if d == n => "The anomalies, drawn".to_string(),
            (d, n) => format!("The first {d} of {n} anomalies, drawn"),
        };
        let _ = writeln!(
            out,
            "<h2 id=\"drawn\">{title}</h2>\n<p class=\"hint\">Click a transaction (a box in the graph or a bar \
             in the timeline) to see its operations, a dependency (an arrow, numbered as in its table) to \
             highlight it everywhere. {}</p>",
            esc(&layout_note)
        );
    }
    let mut involved: Vec<TxnId> = Vec::new();
    for (i, (a, g)) in drawn.iter().zip(&graphs).enumerate() {
        anomaly_section(&mut out, h, cert, i + 1, a, g, &svgs[i]);
        involved.extend(g.nodes.iter().copied());
    }
    all_list(&mut out, h, report, drawn.len());
    involved.sort_unstable();
    involved.dedup();
    out.push_str("<div id=\"txns\" hidden>\n");
    for t in involved {
        ops::txn_ops(&mut out, h, t);
    }
    out.push_str("</div>\n");
    let _ = write!(out, "<script>{}</script>\n</body></html>\n", include_str!("page.js"));
    out
}

fn summary(out: &mut String, report: &Report, opts: &HtmlOptions, verdict: &str) {
    let _ = writeln!(
        out,
        "<header><h1>isocert report <span class=\"verdict {}\" id=\"verdict\">{verdict}</span></h1>",
        verdict.to_ascii_lowercase()
    );
    let n = report.anomalies.len();
    let _ = writeln!(
        out,
        "<p class=\"lead\">{} transactions checked for <b>{}</b> ({}) by <b>{}</b>: {}.</p>",
        report.stats.txns,
        esc(&report.level_checked()),
        report.session_order,
        report.checker,
        if n == 0 {
            "no anomaly, the history satisfies the level".to_string()
        } else {
            format!("{n} anomal{} found", if n == 1 { "y" } else { "ies" })
        }
    );
    out.push_str("<dl class=\"facts\">");
    let mut row = |k: &str, v: String| {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    };
    row("level", report.level.to_string());
    row("checker", report.checker.to_string());
    for (k, v) in &opts.context {
        row(k, v.clone());
    }
    row("transactions", report.stats.txns.to_string());
    row("committed", report.stats.committed.to_string());
    row("operations", report.stats.ops.to_string());
    row("dependency edges", report.stats.edges.to_string());
    out.push_str("</dl></header>\n");
    if n > 0 {
        let mut counts: Vec<(AnomalyKind, usize)> = Vec::new();
        for a in &report.anomalies {
            match counts.iter_mut().find(|(k, _)| *k == a.kind) {
                Some((_, c)) => *c += 1,
                None => counts.push((a.kind, 1)),
            }
        }
        counts.sort();
        out.push_str(
            "<h2>Anomalies by class</h2>\n<table class=\"classes\" id=\"classes\"><thead><tr><th>class</th>\
             <th>count</th><th>what it means</th></tr></thead><tbody>\n",
        );
        for (kind, count) in counts {
            let _ = writeln!(
                out,
                "<tr data-kind=\"{k}\"><td><a href=\"#all\" class=\"filter\" data-kind=\"{k}\">{k}</a></td>\
                 <td class=\"num\">{count}</td><td>{}</td></tr>",
                esc(crate::words::class_meaning(kind)),
                k = kind.as_str()
            );
        }
        out.push_str("</tbody></table>\n");
    }
    if !report.notes.is_empty() {
        out.push_str("<h2>Notes</h2><ul class=\"notes\">");
        for note in &report.notes {
            let _ = write!(out, "<li>{}</li>", esc(note));
        }
        out.push_str("</ul>\n");
    }
}

fn anomaly_section(
    out: &mut String,
    h: &History,
    cert: &Certificate,
    n: usize,
    a: &Anomaly,
    g: &graph::Graph,
    svg: &str,
) {
    let mut ops: Vec<String> = a.ops.iter().map(|o| format!("{}:{}", o.txn.0, o.op)).collect();
    ops.extend(a.cycle.iter().filter_map(|e| e.op).map(|o| format!("{}:{}", o.txn.0, o.op)));
    ops.sort();
    ops.dedup();
    let names: Vec<String> = g.nodes.iter().map(|&t| h.txn_label(t)).collect();
    let _ = writeln!(
        out,
        "<section class=\"anomaly\" id=\"a{n}\" data-kind=\"{}\" data-ops=\"{}\">\n<h3>[{n}] {} \
         <small>{}</small></h3>\n<p class=\"meaning\">{}</p>\n<p class=\"explanation\">{}</p>",
        a.kind.as_str(),
        ops.join(" "),
        a.kind.as_str(),
        esc(&names.join(", ")),
        esc(crate::words::class_meaning(a.kind)),
        esc(&a.explanation)
    );
    let _ = writeln!(out, "<div class=\"graph\" id=\"a{n}-graph\">{svg}</div>");
    let _ = writeln!(out, "<div class=\"ops-panel\" id=\"a{n}-ops\" hidden></div>");
    out.push_str("<h4>Timeline of the transactions involved</h4>\n");
    timeline::render(out, h, n, g);
    if !a.cycle.is_empty() {
        out.push_str(
            "<h4>Each dependency, and the certificate facts it relies on</h4>\n<table class=\"edges\">\
             <thead><tr><th>#</th><th>dependency</th><th>why</th><th>certificate facts</th></tr></thead><tbody>\n",
        );
        for (i, e) in a.cycle.iter().enumerate() {
            let _ = writeln!(
                out,
                "<tr id=\"a{n}-f{i}\"><td>{}</td><td class=\"dep {}\">{} &rarr; {} <b>{}</b><br>{}<br><i>{}</i></td><td>{}</td><td>{}</td></tr>",
                i + 1,
                e.kind.as_str(),
                esc(&h.txn_label(e.from)),
                esc(&h.txn_label(e.to)),
                e.kind.as_str(),
                crate::words::edge_meaning(e.kind),
                crate::words::basis_meaning(e.basis),
                esc(&e.explanation),
                facts::edge_facts(h, cert, e)
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
}

/// The paged list of every anomaly: a JSON array (kind, transactions, explanation) the
/// page's script renders 100 rows at a time, filterable by class.
fn all_list(out: &mut String, h: &History, report: &Report, drawn: usize) {
    if report.anomalies.is_empty() {
        return;
    }
    let rows: Vec<serde_json::Value> = report
        .anomalies
        .iter()
        .map(|a| {
            let txns: Vec<String> = a.txns.iter().map(|&t| h.txn_label(t)).collect();
            serde_json::json!([a.kind.as_str(), txns.join(", "), a.explanation])
        })
        .collect();
    let data = script_json(&serde_json::Value::Array(rows));
    let _ = writeln!(
        out,
        "<section id=\"all\"><h2>All anomalies ({})</h2>\n<p class=\"hint\">The first {drawn} are drawn above. \
         Show class <select id=\"all-kind\"><option value=\"\">every class</option></select> \
         <button id=\"all-prev\">&larr; previous</button> <span id=\"all-page\"></span> \
         <button id=\"all-next\">next &rarr;</button></p>\n<table class=\"all\"><thead><tr><th>#</th>\
         <th>class</th><th>transactions</th><th>what happened</th></tr></thead><tbody id=\"all-rows\"></tbody>\
         </table>\n<script type=\"application/json\" id=\"all-data\" data-drawn=\"{drawn}\">{data}</script></section>",
        report.anomalies.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 47 item 7: what would end or reopen a script element, and the line separators
    /// older JavaScript parsers took for line ends, are `\u` escapes; the JSON is the same.
    #[test]
    fn embedded_json_has_no_markup_and_no_line_separators() {
        let value = serde_json::json!(["</script><!--<script>&\u{2028}\u{2029}", {"k": "a>b"}]);
        let text = script_json(&value);
        assert_eq!(
            text,
            r#"["\u003c/script\u003e\u003c!--\u003cscript\u003e\u0026\u2028\u2029",{"k":"a\u003eb"}]"#
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
    }
}
