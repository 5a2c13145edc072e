//! Counterexample graphs as SVG: transactions as boxes, dependencies as labelled arrows.
//!
//! Laid out by Graphviz (`dot -Tsvg`, one process for every graph of the page) when it is
//! installed, else by a built-in layered layout: a depth-first search marks the edges that
//! close cycles as back edges, the others give each node a layer (the longest path to it),
//! nodes of a layer stack vertically, forward edges run left to right and back edges loop
//! underneath. Both outputs mark nodes `g.node.txn#a<N>-t<txn>` and edges `g.edge#a<N>-e<i>`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

use isocert_history::{History, Status, TxnId};

use super::{esc, GraphLayout};
use crate::{Anomaly, EdgeKind};

/// One anomaly's graph: its transactions and its cycle's edges (indices into `nodes`).
#[derive(Debug)]
pub(super) struct Graph {
    /// The anomaly's number on the page (1-based).
    pub(super) n: usize,
    /// The transactions, in the anomaly's order, without repeats.
    pub(super) nodes: Vec<TxnId>,
    /// The cycle's edges, in cycle order.
    pub(super) edges: Vec<GraphEdge>,
}

/// One drawn dependency.
#[derive(Debug)]
pub(super) struct GraphEdge {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) kind: EdgeKind,
    pub(super) object: Option<isocert_history::ObjId>,
    pub(super) explanation: String,
}

impl Graph {
    /// The graph of anomaly number `n`.
    pub(super) fn of(n: usize, a: &Anomaly) -> Graph {
        let mut nodes: Vec<TxnId> = Vec::new();
        let index = |t: TxnId, nodes: &mut Vec<TxnId>| match nodes.iter().position(|&x| x == t) {
            Some(i) => i,
            None => {
                nodes.push(t);
                nodes.len() - 1
            }
        };
        for &t in &a.txns {
            index(t, &mut nodes);
        }
        let edges = a
            .cycle
            .iter()
            .map(|e| GraphEdge {
                from: index(e.from, &mut nodes),
                to: index(e.to, &mut nodes),
                kind: e.kind,
                object: e.obj,
                explanation: e.explanation.clone(),
            })
            .collect();
        Graph { n, nodes, edges }
    }
}

/// The colour of an edge kind, shared by graphs, timelines and the CSS.
pub(super) fn color(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::Ww => "#34495e",
        EdgeKind::Wr => "#2471a3",
        EdgeKind::Rw => "#c0392b",
        EdgeKind::PredicateWr => "#7d3c98",
        EdgeKind::PredicateRw => "#d35400",
        EdgeKind::StartDep => "#1e8449",
        EdgeKind::Session => "#7f8c8d",
        EdgeKind::RealTime => "#b7950b",
    }
}

/// `#2 rw kv[x]`: the edge's row in the facts table, its kind and object.
fn edge_label(h: &History, i: usize, e: &GraphEdge) -> String {
    match e.object {
        Some(o) => format!("#{} {} {}", i + 1, e.kind, h.object_label(o)),
        None => format!("#{} {}", i + 1, e.kind),
    }
}

fn node_title(h: &History, t: TxnId) -> String {
    let txn = h.txn(t);
    format!("{} · session {} · {}", h.txn_label(t), h.session_name(txn.session), txn.status.as_str())
}

/// Lays every graph out; returns one SVG per graph and a sentence saying how.
pub(super) fn layout_all(h: &History, graphs: &[Graph], layout: GraphLayout) -> (Vec<String>, String) {
    if graphs.is_empty() {
        return (Vec::new(), String::new());
    }
    if layout != GraphLayout::Builtin {
        match graphviz(h, graphs) {
            Ok(svgs) => return (svgs, "Graphs laid out by Graphviz dot.".into()),
            Err(why) => {
                let svgs = graphs.iter().map(|g| builtin(h, g)).collect();
                return (svgs, format!("Graphs laid out by isocert's built-in layout ({why})."));
            }
        }
    }
    (graphs.iter().map(|g| builtin(h, g)).collect(), "Graphs laid out by isocert's built-in layout.".into())
}

fn dot_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " "))
}

/// The DOT text of one graph, with the ids and classes the page relies on.
pub(super) fn dot_source(h: &History, g: &Graph) -> String {
    let mut out = format!(
        "digraph a{} {{\n  rankdir=LR; bgcolor=\"transparent\";\n  node [shape=box, style=\"rounded,filled\", \
         fillcolor=\"#eef3fb\", color=\"#4a6fa5\", fontname=\"Helvetica\", fontsize=12];\n  edge [fontname=\"Helvetica\", \
         fontsize=10];\n",
        g.n
    );
    for (i, &t) in g.nodes.iter().enumerate() {
        let aborted = h.txn(t).status == Status::Aborted;
        let _ = writeln!(
            out,
            "  n{i} [id=\"a{}-t{}\", class=\"txn{}\", label={}, tooltip={}{}];",
            g.n,
            t.0,
            if aborted { " aborted" } else { "" },
            dot_str(&h.txn_label(t)),
            dot_str(&node_title(h, t)),
            if aborted { ", fillcolor=\"#fdecea\", color=\"#c0392b\"" } else { "" }
        );
    }
    for (i, e) in g.edges.iter().enumerate() {
        let style = if e.kind.is_anti() { ", style=dashed" } else { "" };
        let _ = writeln!(
            out,
            "  n{} -> n{} [id=\"a{}-e{i}\", class=\"dep {}\", label={}, tooltip={}, color=\"{c}\", fontcolor=\"{c}\"{style}];",
            e.from,
            e.to,
            g.n,
            e.kind.as_str(),
            dot_str(&edge_label(h, i, e)),
            dot_str(&e.explanation),
            c = color(e.kind)
        );
    }
    out.push_str("}\n");
    out
}

/// Runs `dot -Tsvg` once over every graph and splits its output into one SVG each.
fn graphviz(h: &History, graphs: &[Graph]) -> Result<Vec<String>, String> {
    let mut input = String::new();
    for g in graphs {
        input.push_str(&dot_source(h, g));
    }
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("Graphviz dot could not run: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin for dot")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().map_err(|e| format!("Graphviz dot failed: {e}"))?;
    let _ = writer.join();
    if !output.status.success() {
        return Err(format!(
            "Graphviz dot failed: {}",
            String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or("no message")
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut svgs = Vec::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("<svg") {
        let Some(end) = rest[start..].find("</svg>") else { break };
        let svg = &rest[start..start + end + "</svg>".len()];
        svgs.push(svg.replacen("<svg", "<svg class=\"cycle-graph\"", 1));
        rest = &rest[start + end + "</svg>".len()..];
    }
    if svgs.len() != graphs.len() {
        return Err(format!("Graphviz dot gave {} drawings for {} graphs", svgs.len(), graphs.len()));
    }
    Ok(svgs)
}

const NODE_W: f64 = 110.0;
const NODE_H: f64 = 34.0;
const COL: f64 = 200.0;
const ROW: f64 = 90.0;
const MARGIN: f64 = 24.0;

/// Which edges close a cycle in a depth-first search from the nodes in order.
fn back_edges(g: &Graph) -> Vec<bool> {
    fn visit(g: &Graph, u: usize, state: &mut [u8], back: &mut [bool]) {
        state[u] = 1;
        for (i, e) in g.edges.iter().enumerate() {
            if e.from != u {
                continue;
            }
            match state[e.to] {
                0 => visit(g, e.to, state, back),
                1 => back[i] = true,
                _ => {}
            }
        }
        state[u] = 2;
    }
    let mut state = vec![0u8; g.nodes.len()];
    let mut back = vec![false; g.edges.len()];
    for u in 0..g.nodes.len() {
        if state[u] == 0 {
            visit(g, u, &mut state, &mut back);
        }
    }
    back
}

/// Node layers: the longest path over the forward edges.
fn layers(g: &Graph, back: &[bool]) -> Vec<usize> {
    let mut layer = vec![0usize; g.nodes.len()];
    for _ in 0..g.nodes.len() {
        let mut changed = false;
        for (e, &is_back) in g.edges.iter().zip(back) {
            if !is_back && e.from != e.to && layer[e.to] < layer[e.from] + 1 {
                layer[e.to] = layer[e.from] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    layer
}

/// The built-in layered drawing of one graph.
pub(super) fn builtin(h: &History, g: &Graph) -> String {
    let back = back_edges(g);
    let layer = layers(g, &back);
    let mut row = vec![0usize; g.nodes.len()];
    let mut per_layer: Vec<usize> = Vec::new();
    for (i, &l) in layer.iter().enumerate() {
        if per_layer.len() <= l {
            per_layer.resize(l + 1, 0);
        }
        row[i] = per_layer[l];
        per_layer[l] += 1;
    }
    let pos = |i: usize| (MARGIN + layer[i] as f64 * COL, MARGIN + 16.0 + row[i] as f64 * ROW);
    let rows = per_layer.iter().copied().max().unwrap_or(1).max(1);
    let bottom = MARGIN + 16.0 + (rows - 1) as f64 * ROW + NODE_H;
    let backs = back.iter().filter(|&&b| b).count();
    let width = MARGIN * 2.0 + (per_layer.len().max(1) - 1) as f64 * COL + NODE_W + 40.0;
    let height = bottom + MARGIN + 36.0 * backs as f64 + if backs > 0 { 20.0 } else { 0.0 };

    let mut out = format!(
        "<svg class=\"cycle-graph builtin\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" \
         height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\"><defs>"
    );
    let mut kinds: Vec<EdgeKind> = g.edges.iter().map(|e| e.kind).collect();
    kinds.sort();
    kinds.dedup();
    for k in &kinds {
        let _ = write!(
            out,
            "<marker id=\"a{}-m-{}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" \
             markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{}\"/></marker>",
            g.n,
            k.as_str(),
            color(*k)
        );
    }
    out.push_str("</defs>");
    let mut back_seen = 0usize;
    for (i, e) in g.edges.iter().enumerate() {
        let (fx, fy) = pos(e.from);
        let (tx, ty) = pos(e.to);
        // Parallel edges between one pair bend apart.
        let twins = g.edges[..i]
            .iter()
            .filter(|o| (o.from, o.to) == (e.from, e.to) || (o.from, o.to) == (e.to, e.from))
            .count() as f64;
        let (path, lx, ly) = if back[i] || e.from == e.to {
            let depth = bottom + 30.0 + 36.0 * back_seen as f64;
            back_seen += 1;
            let (sx, sy) = (fx + NODE_W / 2.0 + 10.0, fy + NODE_H);
            let (ex, ey) = (tx + NODE_W / 2.0 - 10.0, ty + NODE_H);
            let path = format!("M{sx:.1},{sy:.1} C{sx:.1},{depth:.1} {ex:.1},{depth:.1} {ex:.1},{ey:.1}");
            let ly = 0.125 * sy + 0.75 * depth + 0.125 * ey;
            (path, (sx + ex) / 2.0, ly)
        } else {
            let (sx, sy) = (fx + NODE_W, fy + NODE_H / 2.0);
            let (ex, ey) = (tx, ty + NODE_H / 2.0);
            let (cx, cy) = ((sx + ex) / 2.0, (sy + ey) / 2.0 - 26.0 * twins);
            let path = format!("M{sx:.1},{sy:.1} Q{cx:.1},{cy:.1} {ex:.1},{ey:.1}");
            (path, 0.25 * sx + 0.5 * cx + 0.25 * ex, 0.25 * sy + 0.5 * cy + 0.25 * ey - 4.0)
        };
        let _ = write!(
            out,
            "<g class=\"edge dep {k}\" id=\"a{n}-e{i}\"><title>{title}</title><path d=\"{path}\" fill=\"none\" \
             stroke=\"{c}\" stroke-width=\"1.6\"{dash} marker-end=\"url(#a{n}-m-{k})\"/><text x=\"{lx:.1}\" \
             y=\"{ly:.1}\" text-anchor=\"middle\" fill=\"{c}\">{label}</text></g>",
            k = e.kind.as_str(),
            n = g.n,
            title = esc(&e.explanation),
            c = color(e.kind),
            dash = if e.kind.is_anti() { " stroke-dasharray=\"5,3\"" } else { "" },
            label = esc(&edge_label(h, i, e)),
        );
    }
    for (i, &t) in g.nodes.iter().enumerate() {
        let (x, y) = pos(i);
        let aborted = h.txn(t).status == Status::Aborted;
        let _ = write!(
            out,
            "<g class=\"node txn{ab}\" id=\"a{n}-t{t}\"><title>{title}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" \
             width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"6\"/><text x=\"{tx:.1}\" y=\"{ty:.1}\" \
             text-anchor=\"middle\">{label}</text></g>",
            ab = if aborted { " aborted" } else { "" },
            n = g.n,
            t = t.0,
            title = esc(&node_title(h, t)),
            tx = x + NODE_W / 2.0,
            ty = y + NODE_H / 2.0 + 4.0,
            label = esc(&h.txn_label(t)),
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(nodes: usize, edges: &[(usize, usize)]) -> Graph {
        Graph {
            n: 1,
            nodes: (0..nodes as u32).map(TxnId).collect(),
            edges: edges
                .iter()
                .map(|&(from, to)| GraphEdge {
                    from,
                    to,
                    kind: EdgeKind::Rw,
                    object: None,
                    explanation: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_cycle_is_laid_out_in_layers_with_one_back_edge() {
        let g = graph(3, &[(0, 1), (1, 2), (2, 0)]);
        let back = back_edges(&g);
        assert_eq!(back, vec![false, false, true]);
        assert_eq!(layers(&g, &back), vec![0, 1, 2]);
    }

    #[test]
    fn branches_share_a_layer_and_the_longest_path_wins() {
        // 0 -> 1 -> 3, 0 -> 2 -> 3, 0 -> 3, 3 -> 0 closes the cycles.
        let g = graph(4, &[(0, 1), (1, 3), (0, 2), (2, 3), (0, 3), (3, 0)]);
        let back = back_edges(&g);
        assert_eq!(back, vec![false, false, false, false, false, true]);
        assert_eq!(layers(&g, &back), vec![0, 1, 1, 2]);
    }
}
