//! The generalized polygraph of a key-value history: known edges (certain from the reads,
//! or forced by pruning) and, per key, the pairs of writers whose order is still open.

use batsat::Lit;
use isocert_history::{KvHistory, KvOpKind, ObjId, TxnId, Writer};
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

/// One key's writers and what is known of their order.
///
/// The order is kept as a transitively closed relation over the writers (a bitset row per
/// writer), never as a list of pairs: a key with `k` writers costs `k² / 8` bytes however
/// many of its pairs are ordered, and a pair is open exactly when its two writers are
/// incomparable.
#[derive(Debug)]
pub(crate) struct KeyOrder {
    /// The key.
    pub(crate) obj: ObjId,
    /// Its writers (final writes of transactions in the graph), in id order; the order's
    /// rows and columns are indices into this list.
    pub(crate) writers: Vec<TxnId>,
    /// The known order, transitively closed and acyclic.
    before: Poset,
    /// Orders that would have made `before` cyclic: kept as direct orders (their edges
    /// close a ww cycle, which the cycle search reports).
    stuck: Vec<(u32, u32)>,
    /// The covering pairs of `before` that give edges (those of read-modify-writes are
    /// certain edges already), plus `stuck`.
    edges: Vec<(u32, u32)>,
}

impl KeyOrder {
    /// Whether the order of writers `i < j` is still open.
    pub(crate) fn is_open(&self, i: usize, j: usize) -> bool {
        !self.before.has(i, j) && !self.before.has(j, i)
    }

    /// How many pairs of writers are still open.
    fn open_count(&self) -> usize {
        let k = self.writers.len();
        let ordered: usize = (0..k).map(|a| self.before.row_count(a)).sum();
        k * k.saturating_sub(1) / 2 - ordered
    }
}

/// Known edges and open pairs.
#[derive(Debug)]
pub(crate) struct Polygraph {
    /// Transaction count (graph nodes are transaction indices).
    pub(crate) n: usize,
    /// Each transaction's session index (a hint for the chains of [`super::reach`]).
    pub(crate) session: Vec<u32>,
    /// Known so, wr and ww edges: the certain ones, then those of forced orders.
    pub(crate) deps: Vec<Arc>,
    /// Known rw edges: the certain ones, then those of forced orders.
    pub(crate) anti: Vec<Arc>,
    /// How many of `deps` and `anti` are certain (the rest is rebuilt from the orders).
    certain_len: (usize, usize),
    /// Pairs of writers whose order is open, listed by [`Polygraph::list_open_pairs`] once
    /// pruning is done (the solver's variables).
    pub(crate) pairs: Vec<Pair>,
    /// Per key with writers, its writers and their known order, by key.
    pub(crate) keys: Vec<KeyOrder>,
    /// Per version, its external readers and the reading op.
    readers: FxHashMap<(ObjId, Writer), Vec<(TxnId, u32)>>,
    /// The orders read-modify-writes fix (their edges are among the certain ones).
    rmw_order: FxHashSet<(ObjId, TxnId, TxnId)>,
    /// The orders the certificate's version order gave: `(obj, first, second)`.
    given: FxHashSet<(ObjId, TxnId, TxnId)>,
}

/// Newly known orders of one key: its index in [`Polygraph::keys`] and pairs of writer
/// indices `(first, second)`.
pub(crate) type Batch = (usize, Vec<(u32, u32)>);

impl Polygraph {
    /// Builds the polygraph from what the reads say ([`mtc::infer`]).
    pub(crate) fn build(kv: &KvHistory, inf: &mtc::Inference) -> Self {
        let mut writers: FxHashMap<ObjId, Vec<TxnId>> = FxHashMap::default();
        for t in kv.txn_ids().filter(|t| inf.in_graph[t.index()]) {
            let mut mine: Vec<ObjId> = Vec::new();
            for op in kv.ops(t).iter().filter(|op| op.kind() == KvOpKind::Write) {
                if !mine.contains(&op.obj()) {
                    mine.push(op.obj());
                    writers.entry(op.obj()).or_default().push(t);
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
        let mut rmw_order: FxHashSet<(ObjId, TxnId, TxnId)> = FxHashSet::default();
        let mut rmw_by_key: FxHashMap<ObjId, Vec<(TxnId, TxnId)>> = FxHashMap::default();
        for (&(obj, w), kids) in &inf.children {
            if let Writer::Txn(a) = w {
                for &b in kids {
                    rmw_order.insert((obj, a, b));
                    rmw_by_key.entry(obj).or_default().push((a, b));
                }
            }
        }
        let mut keys = Vec::with_capacity(objs.len());
        let mut batches = Vec::new();
        for (i, &obj) in objs.iter().enumerate() {
            let ws = writers.remove(&obj).expect("every listed key has writers");
            let at = |t: TxnId| ws.binary_search(&t).expect("orders are between the key's writers") as u32;
            if let Some(rmw) = rmw_by_key.get(&obj) {
                let mut rmw: Vec<(u32, u32)> = rmw.iter().map(|&(a, b)| (at(a), at(b))).collect();
                rmw.sort_unstable();
                batches.push((i, rmw));
            }
            let k = ws.len();
            keys.push(KeyOrder {
                obj,
                writers: ws,
                before: Poset::new(k),
                stuck: Vec::new(),
                edges: Vec::new(),
            });
        }
        let certain_len = (deps.len(), anti.len());
        let mut pg = Polygraph {
            n: kv.len(),
            session: kv.txn_ids().map(|t| kv.session(t).index() as u32).collect(),
            deps,
            anti,
            certain_len,
            pairs: Vec::new(),
            keys,
            readers,
            rmw_order,
            given: FxHashSet::default(),
        };
        pg.learn(batches);
        pg
    }

    /// Adds real-time order (strict serializability) as certain edges: the chain of
    /// [`mtc::realtime::chain_arcs`], `chain` auxiliary nodes after the transactions, so a
    /// transaction that completed before another was invoked reaches it in O(n log n) edges
    /// instead of n². The chain nodes share one session hint (they are one path, which the
    /// chain index of [`super::reach`] then takes as one chain).
    pub(crate) fn add_real_time(&mut self, arcs: Vec<(u32, u32, Dep)>, chain: usize) {
        self.deps.truncate(self.certain_len.0);
        self.deps.extend(arcs.into_iter().map(|(a, b, dep)| (a, b, Tagged { dep, origin: Origin::Certain })));
        self.certain_len.0 = self.deps.len();
        let hint = self.session.iter().max().map_or(0, |&s| s + 1);
        self.session.extend(std::iter::repeat_n(hint, chain));
        self.n += chain;
        // Rebuild the edges of the keys' known orders after the certain ones.
        self.learn(Vec::new());
    }

    /// Fixes single orders `(key, a, b)`: `a`'s version of the key before `b`'s (list-append
    /// histories: an append no read shows after the last one a read shows). Pairs whose
    /// transactions are not both writers of the key in the graph are passed over. Returns
    /// how many orders were fixed.
    pub(crate) fn give_pairs(&mut self, pairs: &[(ObjId, TxnId, TxnId)]) -> usize {
        let index: FxHashMap<ObjId, usize> = self.keys.iter().enumerate().map(|(i, k)| (k.obj, i)).collect();
        let mut batches: FxHashMap<usize, Vec<(u32, u32)>> = FxHashMap::default();
        let mut count = 0;
        for &(obj, a, b) in pairs {
            let Some(&i) = index.get(&obj) else { continue };
            let key = &self.keys[i];
            let (Ok(x), Ok(y)) = (key.writers.binary_search(&a), key.writers.binary_search(&b)) else {
                continue;
            };
            self.given.insert((obj, a, b));
            batches.entry(i).or_default().push((x as u32, y as u32));
            count += 1;
        }
        let mut batches: Vec<Batch> = batches.into_iter().collect();
        batches.sort_unstable_by_key(|(i, _)| *i);
        self.learn(batches);
        count
    }

    /// Fixes the orders a (possibly partial) version order gives: per key, each listed
    /// writer before the next listed one (the orders between listed writers further apart
    /// follow by transitivity). Listed transactions that are not writers of the key in the
    /// graph are passed over. Returns how many orders were fixed.
    pub(crate) fn give(&mut self, order: &FxHashMap<ObjId, Vec<TxnId>>) -> usize {
        let mut batches = Vec::new();
        let mut count = 0;
        for (i, key) in self.keys.iter().enumerate() {
            let Some(listed) = order.get(&key.obj) else { continue };
            let listed: Vec<u32> =
                listed.iter().filter_map(|t| key.writers.binary_search(t).ok().map(|x| x as u32)).collect();
            let fixed: Vec<(u32, u32)> = listed.windows(2).map(|w| (w[0], w[1])).collect();
            self.given.extend(
                fixed.iter().map(|&(a, b)| (key.obj, key.writers[a as usize], key.writers[b as usize])),
            );
            count += fixed.len();
            batches.push((i, fixed));
        }
        self.learn(batches);
        count
    }

    /// How many pairs of writers are still open.
    pub(crate) fn open_count(&self) -> usize {
        self.keys.iter().map(KeyOrder::open_count).sum()
    }

    /// Lists the open pairs in [`Polygraph::pairs`] (for the solver).
    pub(crate) fn list_open_pairs(&mut self) {
        let mut pairs = Vec::new();
        for key in &self.keys {
            let k = key.writers.len();
            for i in 0..k {
                for j in i + 1..k {
                    if key.is_open(i, j) {
                        pairs.push(Pair { obj: key.obj, a: key.writers[i], b: key.writers[j] });
                    }
                }
            }
        }
        self.pairs = pairs;
    }

    /// Records newly known orders (forced, given, or those of read-modify-writes), closes
    /// each changed key's order transitively, and rebuilds the known edges from every key's
    /// order, compacted: only the covering pairs of the order give edges (ww `a → b`, rw
    /// from `a`'s readers to `b`). The edges left out are implied by paths of those kept
    /// (`a → c` by `a → b → c`, a reader's `r → c` by `r → b → c`), so the forbidden cycles
    /// stay the same, at serializable and at snapshot isolation, and the graph stays linear
    /// in the writers instead of quadratic. Orders that would make a key's order cyclic are
    /// kept as they are, so their edges close a cycle the next search reports.
    pub(crate) fn learn(&mut self, batches: Vec<Batch>) {
        for (i, batch) in batches {
            if batch.is_empty() {
                continue;
            }
            let key = &mut self.keys[i];
            let mut next = key.before.clone();
            for &(a, b) in &batch {
                next.add(a as usize, b as usize);
            }
            if next.close() {
                key.before = next;
            } else {
                key.stuck.extend(batch);
            }
            let (obj, ws) = (key.obj, &key.writers);
            let rmw = &self.rmw_order;
            key.edges = key
                .before
                .covers()
                .into_iter()
                .chain(key.stuck.iter().copied())
                .filter(|&(a, b)| !rmw.contains(&(obj, ws[a as usize], ws[b as usize])))
                .collect();
        }
        self.deps.truncate(self.certain_len.0);
        self.anti.truncate(self.certain_len.1);
        for key in &self.keys {
            for &(a, b) in &key.edges {
                let (first, second) = (key.writers[a as usize], key.writers[b as usize]);
                let origin = if self.given.contains(&(key.obj, first, second)) {
                    Origin::Given
                } else {
                    Origin::Forced
                };
                let (deps, anti) = (&mut self.deps, &mut self.anti);
                order_edges_into(&self.readers, key.obj, first, second, origin, |e| {
                    if e.2.dep.kind == EdgeKind::Ww {
                        deps.push(e)
                    } else {
                        anti.push(e)
                    }
                });
            }
        }
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
#[derive(Clone, Debug)]
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

    /// How many elements come after `a`.
    fn row_count(&self, a: usize) -> usize {
        self.after[a * self.words..(a + 1) * self.words].iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Closes the relation transitively (Warshall's algorithm, one bitset row at a time);
    /// false when it has a cycle.
    fn close(&mut self) -> bool {
        let (k, w) = (self.after.len() / self.words, self.words);
        for m in 0..k {
            for a in 0..k {
                if a != m && self.has(a, m) {
                    let (row, via) = if a < m {
                        let (lo, hi) = self.after.split_at_mut(m * w);
                        (&mut lo[a * w..(a + 1) * w], &hi[..w])
                    } else {
                        let (lo, hi) = self.after.split_at_mut(a * w);
                        (&mut hi[..w], &lo[m * w..(m + 1) * w])
                    };
                    row.iter_mut().zip(via).for_each(|(x, y)| *x |= y);
                }
            }
        }
        (0..k).all(|a| !self.has(a, a))
    }

    /// The covering pairs `(a, b)` (a before b with nothing known in between) of a closed,
    /// acyclic relation.
    fn covers(&self) -> Vec<(u32, u32)> {
        let (k, w) = (self.after.len() / self.words, self.words);
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
                    out.push((a as u32, b as u32));
                }
            }
        }
        out
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

/// Where the edges of [`forbidden_graph`] go, without their payloads: all pruning's
/// reachability needs, in a fraction of the memory (at snapshot isolation the composed
/// `deps ; anti` edges are the bulk of the graph). The edges are enumerated twice, once to
/// count each node's and once to place them, instead of being collected into a list first:
/// a read-heavy snapshot-isolation history (10,000 transactions of 50 operations, 98%
/// read-only) composes tens of millions of edges, and their list and its growth were most
/// of the check's time, in page faults (docs/PERFORMANCE.md, issue 34).
pub(crate) fn forbidden_shape(n: usize, deps: &[Arc], anti: &[Arc], si: bool) -> Csr<()> {
    if si {
        let by_source = Csr::build(n, &anti.iter().map(|&e| (e.0, e.1, ())).collect::<Vec<_>>());
        Csr::build_shape(n, |emit| {
            for &d in deps {
                emit(d.0, d.1);
                by_source.targets_from(d.1).iter().for_each(|&s| emit(d.0, s));
            }
        })
    } else {
        Csr::build_shape(n, |emit| deps.iter().chain(anti).for_each(|&e| emit(e.0, e.1)))
    }
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
