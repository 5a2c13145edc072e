//! A timeline of an anomaly's transactions in the style of Jepsen's timeline: one lane per
//! session, a bar from each transaction's start to its commit (aborted ones hatched), and
//! the anomaly's dependencies as arrows from one bar's end to the next bar's start.
//!
//! The x axis is the order of the transactions' timestamps (`start_ts`, `commit_ts`), not
//! their distance: what isolation depends on is which came first. A history without
//! timestamps for every transaction drawn is laid out in file order instead, and says so.

use std::fmt::Write as _;

use isocert_history::{History, Status, Timestamp};

use super::esc;
use super::graph::{color, Graph};

const LANE: f64 = 40.0;
const LEFT: f64 = 110.0;
const TOP: f64 = 26.0;
const BAR_H: f64 = 18.0;

/// Appends the timeline of anomaly number `n`.
pub(super) fn render(out: &mut String, h: &History, n: usize, g: &Graph) {
    let txns: Vec<_> = g.nodes.iter().map(|&t| (t, h.txn(t))).collect();
    let timed = txns
        .iter()
        .all(|(_, t)| t.start_ts().is_some() && (t.commit_ts().is_some() || t.status != Status::Committed));
    // Each transaction's span as two ranks on the axis.
    let spans: Vec<(usize, usize)> = if timed {
        let mut stamps: Vec<Timestamp> = Vec::new();
        for (_, t) in &txns {
            stamps.extend(t.start_ts());
            stamps.extend(t.commit_ts());
        }
        stamps.sort();
        stamps.dedup();
        let rank = |ts: Timestamp| stamps.binary_search(&ts).unwrap_or(0) * 2;
        txns.iter()
            .map(|(_, t)| {
                let s = t.start_ts().map(rank).unwrap_or(0);
                (s, t.commit_ts().map(rank).unwrap_or(s + 1).max(s + 1))
            })
            .collect()
    } else {
        let mut order: Vec<usize> = txns.iter().map(|(id, _)| id.index()).collect();
        order.sort_unstable();
        txns.iter()
            .map(|(id, _)| {
                let r = order.binary_search(&id.index()).unwrap_or(0) * 2;
                (r, r + 1)
            })
            .collect()
    };
    let mut sessions: Vec<_> = txns.iter().map(|(_, t)| t.session).collect();
    sessions.sort_unstable();
    sessions.dedup();
    let lane = |s| sessions.binary_search(&s).unwrap_or(0);
    let max_rank = spans.iter().map(|&(_, e)| e).max().unwrap_or(1).max(1);
    let step = (640.0 / max_rank as f64).clamp(14.0, 60.0);
    let x = |r: usize| LEFT + r as f64 * step;
    let width = x(max_rank) + 40.0;
    let height = TOP + sessions.len() as f64 * LANE + 30.0;

    let _ = write!(
        out,
        "<svg class=\"timeline\" id=\"a{n}-timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" \
         height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\"><defs><pattern id=\"a{n}-hatch\" \
         width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" \
         height=\"6\" fill=\"#fdecea\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c0392b\" \
         stroke-width=\"2\"/></pattern><marker id=\"a{n}-tl-m\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#333\"/></marker>\
         </defs><text class=\"axis\" x=\"{LEFT}\" y=\"14\">{axis}</text>",
        axis = if timed {
            "time: order of start and commit timestamps →"
        } else {
            "file order (not every transaction here has timestamps) →"
        }
    );
    for (i, s) in sessions.iter().enumerate() {
        let y = TOP + i as f64 * LANE;
        let _ = write!(
            out,
            "<line class=\"lane\" x1=\"{LEFT}\" x2=\"{:.0}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"lane-name\" \
             x=\"6\" y=\"{:.1}\">session {}</text>",
            width - 20.0,
            y + LANE / 2.0,
            y + LANE / 2.0,
            y + LANE / 2.0 + 4.0,
            esc(&h.session_name(*s).to_string())
        );
    }
    let bar_y = |i: usize| TOP + lane(txns[i].1.session) as f64 * LANE + (LANE - BAR_H) / 2.0;
    for (i, (id, t)) in txns.iter().enumerate() {
        let (s, e) = spans[i];
        let aborted = t.status == Status::Aborted;
        let fill = if aborted { format!("url(#a{n}-hatch)") } else { "#d6e4f5".to_string() };
        let ts = |v: Option<Timestamp>| v.map_or("?".to_string(), |v| v.to_string());
        let _ = write!(
            out,
            "<g class=\"bar txn{ab}\" id=\"a{n}-b{id}\"><title>{title} · start {} · commit {}</title><rect \
             x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{BAR_H}\" rx=\"3\" fill=\"{fill}\"/><text x=\"{:.1}\" \
             y=\"{:.1}\" text-anchor=\"middle\">{label}</text></g>",
            ts(t.start_ts()),
            ts(t.commit_ts()),
            x(s),
            bar_y(i),
            (x(e) - x(s)).max(10.0),
            x(s) + (x(e) - x(s)).max(10.0) / 2.0,
            bar_y(i) + BAR_H - 5.0,
            ab = if aborted { " aborted" } else { "" },
            id = id.0,
            title = esc(&format!("{} · {}", h.txn_label(*id), t.status.as_str())),
            label = esc(&format!("{}{}", h.txn_label(*id), if aborted { " aborted" } else { "" })),
        );
    }
    for (i, e) in g.edges.iter().enumerate() {
        let (fx, fy) = (x(spans[e.from].1), bar_y(e.from) + BAR_H / 2.0);
        let (tx, ty) = (x(spans[e.to].0), bar_y(e.to) + BAR_H / 2.0);
        let bend = if fy == ty { -22.0 } else { 0.0 };
        let _ = write!(
            out,
            "<path class=\"tl-edge {k}\" id=\"a{n}-l{i}\" d=\"M{fx:.1},{fy:.1} Q{:.1},{:.1} {tx:.1},{ty:.1}\" \
             fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" stroke-opacity=\"0.8\" marker-end=\"url(#a{n}-tl-m)\"><title>{}</title></path>",
            (fx + tx) / 2.0,
            (fy + ty) / 2.0 + bend,
            esc(&e.explanation),
            k = e.kind.as_str(),
            c = color(e.kind),
        );
    }
    out.push_str("</svg>\n");
}
