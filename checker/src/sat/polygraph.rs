//! The generalized polygraph of a key-value history: known edges (certain from the reads,
//! or forced by pruning) and, per key, the pairs of writers whose order is still open.

use batsat::Lit;
use isocert_history::{History, ObjId, Op, TxnId, Writer};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::mtc::graph::Csr;
use crate::mtc::{self, Dep};
use crate::EdgeKind;

/// Why an edge is in the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Read from the history (session order, a value's writer, a read-modify-write).
    Certain,
    /// An anti-dependency from a reader of a key's initial version to a writer of the key.
    InitialRead,
    /// The other order of the two writers closes a cycle of known edges (pruning).
    Forced,
    /// Given by the certificate's (possibly partial) version order.
    Given,
    /// The order the solver tried: the literal that implies the edge.
    Chosen(Lit),
}

/// An edge with its dependency and origin.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tagged {
    pub(crate) dep: Dep,
    pub(crate) origin: Origin,
}

/// An edge `(from, to, tag)` between transaction indices.
pub(crate) type Arc = (u32, u32, Tagged);

/// Two writers of a key whose order is open; `a` comes first in transaction order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair {
    pub(crate) obj: ObjId,
    pub(crate) a: TxnId,
    pub(crate) b: TxnId,
}

/// A step of the graph that is searched for cycles: one dependency edge, at snapshot
/// isolation possibly followed by one anti-dependency.
pub(crate) type Step = (Arc, Option<Arc>);

/// Known edges and open pairs.
#[derive(Debug)]
pub(crate) struct Polygraph {
    /// Transaction count (graph nodes are transaction indices).
    pub(crate) n: usize,
    /// Known so, wr and ww edges: the certain ones, then those of forced orders.
    pub(crate) deps: Vec<Arc>,
    /// Known rw edges: the certain ones, then those of forced orders.
    pub(crate) anti: Vec<Arc>,
    /// How many of `deps` and `anti` are certain (the rest is rebuilt from the orders).
    certain_len: (usize, usize),
    /// Pairs of writers whose order is open.
    pub(crate) pairs: Vec<Pair>,
    /// Per key, its writers (final writes of transactions in the graph), in id order.
    pub(crate) writers: FxHashMap<ObjId, Vec<TxnId>>,
    /// Per version, its external readers and the reading op.
    readers: FxHashMap<(ObjId, Writer), Vec<(TxnId, u32)>>,
    /// Orders already known: `(obj, first, second)`.
    pub(crate) known_order: FxHashSet<(ObjId, TxnId, TxnId)>,
    /// The orders read-modify-writes fix (their edges are among the certain ones).
    rmw_order: FxHashSet<(ObjId, TxnId, TxnId)>,
    /// The same, per key.
    rmw_by_key: FxHashMap<ObjId, Vec<(TxnId, TxnId)>>,
    /// Per key, the orders pruning forced (and those the certificate gave).
    forced_by_key: FxHashMap<ObjId, Vec<(TxnId, TxnId)>>,
    /// The orders the certificate's version order gave: `(obj, first, second)`.
    given: FxHashSet<(ObjId, TxnId, TxnId)>,
}

impl Polygraph {
    /// Builds the polygraph from what the reads say ([`mtc::infer`]).
    pub(crate) fn build(h: &History, inf: &mtc::Inference) -> Self {
        let mut writers: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
        for t in h.txn_ids().filter(|t| inf.in_graph[t.index()]) {
            let mut mine: Vec<ObjId> = Vec::new();
            for op in &h.txn(t).ops {
                if let Op::Write { obj, .. } = op {
                    if !mine.contains(obj) {
                        mine.push(*obj);
                        writers.entry(*obj).or_default().push(t);
                    }
                }
            }
        }
        let mut readers: FxHashMap<(ObjId, Writer), Vec<(TxnId, u32)>> = FxHashMap::default();
        for &(t, obj, w, op) in &inf.reads {
            readers.entry((obj, w)).or_default().push((t, op));
        }
        let certain = |dep| Tagged { dep, origin: Origin::Certain };
        let deps: Vec<Arc> = inf.deps.iter().map(|&(a, b, dep)| (a, b, certain(dep))).collect();
        let mut anti: Vec<Arc> = inf.anti.iter().map(|&(a, b, dep)| (a, b, certain(dep))).collect();
        let mut objs: Vec<ObjId> = writers.keys().copied().collect();
        objs.sort_unstable();
        for &obj in &objs {
            for &(r, op) in readers.get(&(obj, Writer::Initial)).map(Vec::as_slice).unwrap_or(&[]) {
                for &w in &writers[&obj] {
                    if w != r {
                        let dep = Dep { kind: EdgeKind::Rw, obj, op };
                        anti.push((r.0, w.0, Tagged { dep, origin: Origin::InitialRead }));
                    }
                }
            }
        }
        // Read-modify-writes fix orders: a before b when b read a's version and overwrote it
        // (its edges are already among the certain ones).
        let mut known_order: FxHashSet<(ObjId, TxnId, TxnId)> = FxHashSet::default();
        for (&(obj, w), kids) in &inf.children {
            if let Writer::Txn(a) = w {
                known_order.extend(kids.iter().map(|&b| (obj, a, b)));
            }
        }
        let mut pairs = Vec::new();
        for &obj in &objs {
            let ws = &writers[&obj];
            for i in 0..ws.len() {
                for j in i + 1..ws.len() {
                    let (a, b) = (ws[i], ws[j]);
                    if !known_order.contains(&(obj, a, b)) && !known_order.contains(&(obj, b, a)) {
                        pairs.push(Pair { obj, a, b });
                    }
                }
            }
        }
        let certain_len = (deps.len(), anti.len());
        Polygraph {
            n: h.txns.len(),
            deps,
            anti,
            certain_len,
            pairs,
            writers,
            readers,
            rmw_by_key: known_order.iter().fold(FxHashMap::default(), |mut m, &(obj, a, b)| {
                m.entry(obj).or_insert_with(Vec::new).push((a, b));
                m
            }),
            rmw_order: known_order.clone(),
            known_order,
            forced_by_key: FxHashMap::default(),
            given: FxHashSet::default(),
        }
    }

    /// Fixes the orders a (possibly partial) version order gives: per key, each listed
    /// writer before the next listed one (the orders between listed writers further apart
    /// follow by transitivity, and pruning fixes them). Listed transactions that are not
    /// writers of the key in the graph are passed over. Returns how many orders were fixed.
    pub(crate) fn give(&mut self, order: &FxHashMap<ObjId, Vec<TxnId>>) -> usize {
        let mut objs: Vec<&ObjId> = order.keys().collect();
        objs.sort_unstable();
        let mut fixed = Vec::new();
        for obj in objs {
            let Some(ws) = self.writers.get(obj) else { continue };
            let listed: Vec<TxnId> =
                order[obj].iter().copied().filter(|t| ws.binary_search(t).is_ok()).collect();
            fixed.extend(listed.windows(2).map(|w| (*obj, w[0], w[1])));
        }
        self.given.extend(fixed.iter().copied());
        let given = &self.given;
        self.pairs.retain(|p| !given.contains(&(p.obj, p.a, p.b)) && !given.contains(&(p.obj, p.b, p.a)));
        let count = fixed.len();
        self.force(fixed);
        count
    }

    /// Records forced orders `(obj, first, second)` and rebuilds the known edges from every
    /// key's known orders, compacted: per key only the covering pairs of the order's
    /// transitive closure give edges (ww `a → b`, rw from `a`'s readers to `b`). The edges
    /// left out are implied by paths of those kept (`a → c` by `a → b → c`, a reader's
    /// `r → c` by `r → b → c`), so the forbidden cycles stay the same, at serializable and
    /// at snapshot isolation, and the graph stays linear in the writers instead of
    /// quadratic.
    pub(crate) fn force(&mut self, forced: impl IntoIterator<Item = (ObjId, TxnId, TxnId)>) {
        let mut changed: FxHashSet<ObjId> = FxHashSet::default();
        for (obj, first, second) in forced {
            self.known_order.insert((obj, first, second));
            self.forced_by_key.entry(obj).or_default().push((first, second));
            changed.insert(obj);
        }
        self.deps.truncate(self.certain_len.0);
        self.anti.truncate(self.certain_len.1);
        let mut objs: Vec<ObjId> = self.forced_by_key.keys().copied().collect();
        objs.sort_unstable();
        for obj in objs {
            let ws = &self.writers[&obj];
            let at = |t: TxnId| ws.binary_search(&t).expect("orders are between the key's writers");
            let mut before = Poset::new(ws.len());
            for &(a, b) in &self.known_order_of(obj) {
                before.add(at(a), at(b));
            }
            let mut edges = Vec::new();
            match before.covers() {
                Some(covers) => {
                    for (a, b) in covers {
                        if self.forced_pair(obj, ws[a], ws[b]) {
                            edges.push((ws[a], ws[b]));
                        }
                    }
                }
                // A cycle of orders: keep them all, the cycle search reports it.
                None => edges.extend(self.forced_by_key[&obj].iter().copied()),
            }
            for (first, second) in edges {
                let origin =
                    if self.given.contains(&(obj, first, second)) { Origin::Given } else { Origin::Forced };
                let (deps, anti) = (&mut self.deps, &mut self.anti);
                order_edges_into(&self.readers, obj, first, second, origin, |e| {
                    if e.2.dep.kind == EdgeKind::Ww {
                        deps.push(e)
                    } else {
                        anti.push(e)
                    }
                });
            }
        }
    }

    /// Every known order of `obj`'s writers (read-modify-writes and forced).
    fn known_order_of(&self, obj: ObjId) -> Vec<(TxnId, TxnId)> {
        let mut out: Vec<(TxnId, TxnId)> = self.forced_by_key.get(&obj).cloned().unwrap_or_default();
        out.extend(self.rmw_by_key.get(&obj).map(Vec::as_slice).unwrap_or(&[]));
        out
    }

    /// Whether the order `a` before `b` of `obj` was forced (its edges are not certain).
    fn forced_pair(&self, obj: ObjId, a: TxnId, b: TxnId) -> bool {
        !self.rmw_order.contains(&(obj, a, b))
    }

    /// The external readers of `writer`'s version of `obj`.
    pub(crate) fn readers_of(&self, obj: ObjId, writer: TxnId) -> &[(TxnId, u32)] {
        self.readers.get(&(obj, Writer::Txn(writer))).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The edges of ordering `first`'s write of `obj` before `second`'s: ww `first → second`,
    /// then rw `r → second` for every other reader `r` of `first`'s version.
    pub(crate) fn order_edges(
        &self,
        obj: ObjId,
        first: TxnId,
        second: TxnId,
        origin: Origin,
        edge: impl FnMut(Arc),
    ) {
        order_edges_into(&self.readers, obj, first, second, origin, edge)
    }
}

/// [`Polygraph::order_edges`] over the readers map alone (so it can run while the edge
/// lists are borrowed).
fn order_edges_into(
    readers: &FxHashMap<(ObjId, Writer), Vec<(TxnId, u32)>>,
    obj: ObjId,
    first: TxnId,
    second: TxnId,
    origin: Origin,
    mut edge: impl FnMut(Arc),
) {
    let tag = |kind, op| Tagged { dep: Dep { kind, obj, op }, origin };
    edge((first.0, second.0, tag(EdgeKind::Ww, u32::MAX)));
    for &(r, op) in readers.get(&(obj, Writer::Txn(first))).map(Vec::as_slice).unwrap_or(&[]) {
        if r != second {
            edge((r.0, second.0, tag(EdgeKind::Rw, op)));
        }
    }
}

/// A strict order over `0..k` given by some of its pairs, as bitset rows.
struct Poset {
    words: usize,
    after: Vec<u64>,
}

impl Poset {
    fn new(k: usize) -> Self {
        let words = k.div_ceil(64).max(1);
        Poset { words, after: vec![0; k * words] }
    }

    fn add(&mut self, a: usize, b: usize) {
        self.after[a * self.words + b / 64] |= 1 << (b % 64);
    }

    fn has(&self, a: usize, b: usize) -> bool {
        self.after[a * self.words + b / 64] & (1 << (b % 64)) != 0
    }

    /// The covering pairs `(a, b)` (a before b with nothing known in between) of the
    /// transitive closure, or `None` when the pairs contain a cycle.
    fn covers(mut self) -> Option<Vec<(usize, usize)>> {
        let (k, w) = (self.after.len() / self.words, self.words);
        // Warshall's closure, one bitset row at a time.
        for m in 0..k {
            for a in 0..k {
                if self.has(a, m) {
                    for x in 0..w {
                        self.after[a * w + x] |= self.after[m * w + x];
                    }
                }
            }
        }
        if (0..k).any(|a| self.has(a, a)) {
            return None;
        }
        let mut out = Vec::new();
        let mut implied = vec![0u64; w];
        for a in 0..k {
            implied.iter_mut().for_each(|x| *x = 0);
            for m in 0..k {
                if self.has(a, m) {
                    for (x, row) in implied.iter_mut().zip(&self.after[m * w..(m + 1) * w]) {
                        *x |= row;
                    }
                }
            }
            for b in 0..k {
                if self.has(a, b) && implied[b / 64] & (1 << (b % 64)) == 0 {
                    out.push((a, b));
                }
            }
        }
        Some(out)
    }
}

/// The graph whose cycles are forbidden: `deps ∪ anti` (serializable) or `deps ; anti?`
/// (snapshot isolation: a cycle needs two anti-dependencies in a row to be allowed).
pub(crate) fn forbidden_graph(n: usize, deps: &[Arc], anti: &[Arc], si: bool) -> Csr<Step> {
    let edges: Vec<(u32, u32, Step)> = if si {
        let by_source = Csr::build(n, &anti.iter().map(|&e| (e.0, e.1, e)).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(deps.len() * 2);
        for &d in deps {
            out.push((d.0, d.1, (d, None)));
            for &r in by_source.payloads_from(d.1) {
                out.push((d.0, r.1, (d, Some(r))));
            }
        }
        out
    } else {
        deps.iter().chain(anti).map(|&e| (e.0, e.1, (e, None))).collect()
    };
    Csr::build(n, &edges)
}

/// Up to `per_component` shortest cycles in each cyclic component of `g` (through nodes
/// spread over the component), each as its underlying edges.
pub(crate) fn cycles(g: &Csr<Step>, per_component: usize) -> Vec<Vec<Arc>> {
    let mut member = vec![false; g.nodes()];
    let mut out = Vec::new();
    for mut comp in g.cyclic_components() {
        comp.sort_unstable();
        comp.iter().for_each(|&x| member[x as usize] = true);
        let stride = comp.len().div_ceil(per_component.max(1));
        for &start in comp.iter().step_by(stride.max(1)) {
            let mut cycle = Vec::new();
            for (_, _, (first, then)) in g.shortest_cycle(start, &|x| member[x as usize]) {
                cycle.push(first);
                cycle.extend(then);
            }
            if !cycle.is_empty() {
                out.push(cycle);
            }
        }
        comp.iter().for_each(|&x| member[x as usize] = false);
    }
    out
}
