//! Item histories as the black-box checkers read them, and their reads resolved by value.
//!
//! The black-box checkers see only item reads and writes, so they take the compact
//! key-value model ([`KvHistory`]: 16-byte operations, integer values inline, no interned
//! value per write) instead of the general [`History`] (40-byte operations, every value
//! interned): a 10,000-transaction Plume history is 1.6 MB there against 6 MB
//! (docs/PERFORMANCE.md, "Black-box checkers on the compact model"). `isocert check`
//! reads Plume and v1 files into it directly; a [`History`] is converted first
//! ([`item_history`]).
//!
//! With unique written values, a read names its writer by value: [`WriteSites`] finds the
//! write behind each (object, value), [`graph_nodes`] says which transactions are nodes of
//! the graph, and [`resolve`] turns a read into its writer or into the anomaly no level
//! allows (an aborted, intermediate or garbage read).

use hashbrown::HashTable;
use isocert_history::{
    History, KvHistory, KvOpKind, KvValue, ObjId, Op, OpRef, Scalar, Status, TxnId, Writer,
};
use rustc_hash::{FxBuildHasher, FxHashSet};
use std::hash::BuildHasher;

use crate::{Anomaly, AnomalyKind, CheckError, CheckerKind};

/// Transactions with more operations than this index their objects in a set where shorter
/// ones scan a list ([`WriteSites::build`], MTC's inference): a Plume file's aborted writes
/// are one transaction, and a Cobra log of one 100,000-read transaction took 8.8 s when
/// scanned once per operation (issue 28).
pub(crate) const LONG_TXN: usize = 32;

/// Where a written value came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    /// The writing transaction.
    pub(crate) txn: TxnId,
    /// Where the write is stored ([`KvHistory::op_position`]); [`Site::op`] gives its index.
    position: u32,
    /// Whether it is the transaction's last write of the object (an installed version).
    pub(crate) is_final: bool,
}

impl Site {
    /// The write's op index in its transaction.
    pub(crate) fn op(&self, kv: &KvHistory) -> u32 {
        kv.op_index(self.txn, self.position)
    }
}

/// A [`Site`] in eight bytes: the position with the top bit set when the write is not final.
#[derive(Clone, Copy, Debug)]
struct PackedSite {
    txn: u32,
    position: u32,
}

/// [`PackedSite::position`]'s flag: an intermediate write (the transaction wrote the object
/// again).
const NOT_FINAL: u32 = 1 << 31;

impl PackedSite {
    fn unpack(self) -> Site {
        Site {
            txn: TxnId(self.txn),
            position: self.position & !NOT_FINAL,
            is_final: self.position & NOT_FINAL == 0,
        }
    }
}

/// The write behind every (object, value) written in a history; a later transaction's write
/// of the same (object, value) replaces an earlier one's, and a transaction that wrote it
/// twice is named by its first such write (not final: it wrote the object again).
///
/// A hash table of indices into the sites, compared through the history's operations: about
/// 13 bytes a write (a map keyed by (object, value) held the key again beside each site,
/// 40 bytes a write with the table's slack).
#[derive(Debug)]
pub(crate) struct WriteSites {
    table: HashTable<u32>,
    sites: Vec<PackedSite>,
    /// The writes indexed (more than the sites when some (object, value) was written twice).
    writes: usize,
}

/// The hash (object, value) is filed under.
fn site_hash(obj: ObjId, value: KvValue) -> u64 {
    FxBuildHasher.hash_one((obj, value))
}

impl WriteSites {
    /// Indexes every write of `kv`.
    pub(crate) fn build(kv: &KvHistory) -> WriteSites {
        let writes = write_count(kv);
        let mut sites =
            WriteSites { table: HashTable::with_capacity(writes), sites: Vec::with_capacity(writes), writes };
        // Objects written later in the transaction (walking backwards): a list for short
        // transactions, a set for long ones (a plume file's aborted writes are one transaction).
        let mut later: Vec<ObjId> = Vec::new();
        for t in kv.txn_ids() {
            let ops = kv.ops(t);
            let start = kv.op_position(t, 0);
            let mut later_set: Option<FxHashSet<ObjId>> = (ops.len() > LONG_TXN).then(FxHashSet::default);
            later.clear();
            for (i, op) in ops.iter().enumerate().rev() {
                if op.kind() != KvOpKind::Write {
                    continue;
                }
                let obj = op.obj();
                let is_final = match &mut later_set {
                    Some(set) => set.insert(obj),
                    None if later.contains(&obj) => false,
                    None => {
                        later.push(obj);
                        true
                    }
                };
                let flag = if is_final { 0 } else { NOT_FINAL };
                sites.insert(
                    kv,
                    obj,
                    op.value(),
                    PackedSite { txn: t.0, position: (start + i as u32) | flag },
                );
            }
        }
        sites
    }

    fn insert(&mut self, kv: &KvHistory, obj: ObjId, value: KvValue, site: PackedSite) {
        let hash = site_hash(obj, value);
        let sites = &self.sites;
        let same = |&i: &u32| written(kv, sites[i as usize]) == (obj, value);
        match self.table.find(hash, same) {
            Some(&i) => self.sites[i as usize] = site,
            None => {
                let i = self.sites.len() as u32;
                self.sites.push(site);
                let sites = &self.sites;
                self.table.insert_unique(hash, i, |&j| {
                    let (o, v) = written(kv, sites[j as usize]);
                    site_hash(o, v)
                });
            }
        }
    }

    /// The site of `value` written to `obj`, if any transaction wrote it.
    #[inline]
    pub(crate) fn get(&self, kv: &KvHistory, obj: ObjId, value: KvValue) -> Option<Site> {
        let found =
            self.table.find(site_hash(obj, value), |&i| written(kv, self.sites[i as usize]) == (obj, value));
        found.map(|&i| self.sites[i as usize].unpack())
    }

    /// The number of distinct (object, value) pairs written.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sites.len()
    }

    /// Whether some (object, value) was written more than once.
    pub(crate) fn has_repeats(&self) -> bool {
        self.sites.len() != self.writes
    }
}

/// The object and value of the write at `site`.
#[inline]
fn written(kv: &KvHistory, site: PackedSite) -> (ObjId, KvValue) {
    let op = kv.op_at(TxnId(site.txn), site.position & !NOT_FINAL);
    (op.obj(), op.value())
}

/// Which transactions are nodes of the graph: the committed ones, and those of unknown
/// outcome whose write a transaction that may have committed read.
pub(crate) fn graph_nodes(kv: &KvHistory, sites: &WriteSites) -> Vec<bool> {
    let mut in_graph: Vec<bool> = kv.txn_ids().map(|t| kv.status(t) == Status::Committed).collect();
    if !kv.txn_ids().any(|t| kv.status(t) == Status::Unknown) {
        return in_graph;
    }
    for t in kv.txn_ids().filter(|&t| kv.status(t) != Status::Aborted) {
        for op in kv.ops(t).iter().filter(|op| op.kind() == KvOpKind::Read) {
            if let Some(s) = sites.get(kv, op.obj(), op.value()) {
                if s.txn != t && kv.status(s.txn) == Status::Unknown {
                    in_graph[s.txn.index()] = true;
                }
            }
        }
    }
    in_graph
}

/// The writer of the version an external read saw, or `None` (and an anomaly) when no
/// committed final write explains it: `t` read `value` of `obj` at op `op`; `initial` is
/// the object's initial value.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve(
    kv: &KvHistory,
    in_graph: &[bool],
    sites: &WriteSites,
    initial: KvValue,
    t: TxnId,
    op: u32,
    obj: ObjId,
    value: KvValue,
    anomalies: &mut Vec<Anomaly>,
) -> Option<Writer> {
    if value == initial {
        return Some(Writer::Initial);
    }
    let here = OpRef { txn: t, op };
    let read = || format!("{} read {} at op {op}", kv.txn_label(t), value_label(kv, obj, value));
    let Some(site) = sites.get(kv, obj, value) else {
        anomalies.push(
            Anomaly::new(
                AnomalyKind::GarbageRead,
                vec![t],
                format!("{}, a value no transaction wrote", read()),
            )
            .with_ops(vec![here])
            .with_objects(vec![obj]),
        );
        return None;
    };
    let w = site.txn;
    let unreadable = |kind, why: String| {
        Anomaly::new(kind, vec![t, w], format!("{}, {why}", read()))
            .with_ops(vec![here, OpRef { txn: w, op: site.op(kv) }])
            .with_objects(vec![obj])
    };
    if !in_graph[w.index()] {
        anomalies.push(unreadable(
            AnomalyKind::G1a,
            format!("written by {}, which did not commit", kv.txn_label(w)),
        ));
        return None;
    }
    if !site.is_final {
        let why = format!("an intermediate value {} overwrote before committing", kv.txn_label(w));
        anomalies.push(unreadable(AnomalyKind::G1b, why));
        return None;
    }
    Some(Writer::Txn(w))
}

/// Each object's initial value, by dense object id: one array read per read where
/// [`KvHistory::initial_value`] looks the object up.
pub(crate) fn initial_values(kv: &KvHistory) -> Vec<KvValue> {
    (0..kv.dict().object_count()).map(|o| kv.initial_value(ObjId::from_index(o))).collect()
}

/// A human rendering of `value` of `obj`, as [`History::value_label`] renders it.
pub(crate) fn value_label(kv: &KvHistory, obj: ObjId, value: KvValue) -> String {
    match value {
        KvValue::Absent => "absent".to_string(),
        KvValue::Int(i) => Scalar::Int(i).to_string(),
        KvValue::Interned(id) => kv.dict().value_label(obj, id),
    }
}

/// A short label for an object, as [`History::object_label`].
pub(crate) fn object_label(kv: &KvHistory, obj: ObjId) -> String {
    kv.dict().object_label(obj)
}

/// Whether `kv` appends to lists.
pub(crate) fn has_appends(kv: &KvHistory) -> bool {
    kv.txn_ids().any(|t| kv.ops(t).iter().any(|op| op.kind() == KvOpKind::Append))
}

/// The number of item writes of every transaction.
pub(crate) fn write_count(kv: &KvHistory) -> usize {
    kv.txn_ids().map(|t| kv.ops(t).iter().filter(|op| op.kind() == KvOpKind::Write).count()).sum()
}

/// The number of operations of every transaction.
pub(crate) fn op_count(kv: &KvHistory) -> usize {
    kv.txn_ids().map(|t| kv.ops(t).len()).sum()
}

/// `h` in the compact model, for `checker`, which refuses predicate operations and
/// histories `shape` refuses, naming the first operation in file order that breaks either:
/// a predicate operation as `what(label, kind)` words it (`label`: `T7 op 2`; `kind`: `a
/// predicate read` or `a predicate write`), unless `shape` refuses the history before it.
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first predicate operation, or `shape`'s
/// refusal of what comes before it.
pub(crate) fn item_history(
    h: &History,
    checker: CheckerKind,
    what: impl Fn(String, &str) -> String,
    shape: impl Fn(&KvHistory) -> Result<(), CheckError>,
) -> Result<KvHistory, CheckError> {
    for t in h.txn_ids() {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let kind = match op {
                Op::Read { .. } | Op::Write { .. } | Op::Append { .. } => continue,
                Op::Select { .. } | Op::Aggregate { .. } => "a predicate read",
                Op::Update { .. } | Op::Delete { .. } => "a predicate write",
            };
            shape(&before(h, t, i))?;
            return Err(CheckError::UnsupportedHistory {
                checker,
                what: what(format!("{} op {i}", h.txn_label(t)), kind),
            });
        }
    }
    Ok(KvHistory::from_history(h).expect("a history of item reads, writes and appends converts"))
}

/// `h` in the compact model, for a checker of item reads and writes of unique values
/// (Cobra, PolySI, weak), which refuses a predicate operation as it refuses a delete or a
/// repeated value ([`unique_values`]).
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first operation that breaks the shape.
pub(crate) fn unique_items(h: &History, checker: CheckerKind) -> Result<KvHistory, CheckError> {
    let not_an_item = |label: String, _: &str| {
        format!("{label} is not an item read or write (black-box checking needs item reads and writes of unique values)")
    };
    item_history(h, checker, not_an_item, |kv| unique_values(kv, checker, &WriteSites::build(kv)))
}

/// What comes before operation `op` of `t` in `h`, which holds no predicate operation
/// before it, in the compact model: the transactions before `t` and `t`'s first `op`
/// operations.
fn before(h: &History, t: TxnId, op: usize) -> KvHistory {
    let mut prefix = h.without_txns();
    for u in h.txn_ids().take(t.index()) {
        prefix.push_txn(h.txn(u).clone()).expect("names are unique in a history");
    }
    let mut cut = h.txn(t).clone();
    cut.ops.truncate(op);
    prefix.push_txn(cut).expect("names are unique in a history");
    KvHistory::from_history(&prefix).expect("item reads, writes and appends convert")
}

/// Only item reads and writes, no deletes, no write of an object's initial value, and no
/// (object, value) written twice (`sites` says whether one was, so only then are the
/// writes looked up one by one, to name the first).
///
/// # Errors
/// [`CheckError::UnsupportedHistory`] naming the first operation (in file order) that
/// breaks the shape, for `checker`.
pub(crate) fn unique_values(
    kv: &KvHistory,
    checker: CheckerKind,
    sites: &WriteSites,
) -> Result<(), CheckError> {
    let repeats = sites.has_repeats();
    let initial = initial_values(kv);
    let mut seen = FxHashSet::default();
    for t in kv.txn_ids() {
        for (i, op) in kv.ops(t).iter().enumerate() {
            let refuse = |what: String| {
                Err(CheckError::UnsupportedHistory {
                    checker,
                    what: format!(
                        "{} op {i} {what} (black-box checking needs item reads and writes of unique values)",
                        kv.txn_label(t)
                    ),
                })
            };
            let (obj, value) = (op.obj(), op.value());
            match op.kind() {
                KvOpKind::Read => {}
                KvOpKind::Write => {
                    if value == KvValue::Absent {
                        return refuse(format!("deletes {}", object_label(kv, obj)));
                    }
                    if initial[obj.index()] == value {
                        return refuse(format!("writes the initial value {}", value_label(kv, obj, value)));
                    }
                    if repeats && !seen.insert((obj, value)) {
                        return refuse(format!(
                            "writes {}, which another write also wrote",
                            value_label(kv, obj, value)
                        ));
                    }
                }
                KvOpKind::Append => return refuse("is not an item read or write".into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_history::v1;
    use isocert_random::rand::Rng as _;
    use rustc_hash::FxHashMap;

    /// The sites against a map keyed by (object, value), the reference: values shared by
    /// several objects, the same (object, value) written twice (the later write wins),
    /// intermediate writes, values never written.
    #[test]
    fn write_sites_agree_with_a_map_keyed_by_object_and_value() {
        let mut rng = isocert_random::seeded(0x5173);
        let mut next = |bound: u64| rng.random_range(0..bound);
        for _ in 0..100 {
            let mut text = String::new();
            for t in 0..next(12) + 1 {
                let ops: Vec<String> = (0..next(6))
                    .map(|_| {
                        let (key, value) = (next(4), next(9));
                        let value = if next(5) == 0 { format!("\"s{value}\"") } else { value.to_string() };
                        format!(r#"{{"f":"w","key":{key},"value":{value}}}"#)
                    })
                    .collect();
                text.push_str(&format!("{{\"id\":{t},\"session\":1,\"ops\":[{}]}}\n", ops.join(",")));
            }
            let h = v1::read_history(text.as_bytes()).unwrap();
            let kv = KvHistory::from_history(&h).unwrap();
            let sites = WriteSites::build(&kv);
            let mut reference: FxHashMap<(ObjId, KvValue), (TxnId, u32, bool)> = FxHashMap::default();
            // Transactions in order, each one's writes from its last: a later transaction's
            // write replaces an earlier one's, and within a transaction its first write of
            // the (object, value) is the one kept.
            for t in kv.txn_ids() {
                let ops = kv.ops(t);
                for (i, op) in ops.iter().enumerate().rev() {
                    let last = !ops[i + 1..].iter().any(|o| o.obj() == op.obj());
                    reference.insert((op.obj(), op.value()), (t, i as u32, last));
                }
            }
            assert_eq!(sites.len(), reference.len());
            for obj in (0..kv.dict().object_count()).map(ObjId::from_index) {
                let mut values: Vec<KvValue> = (0..10).map(KvValue::Int).collect();
                values.extend(
                    (0..kv.dict().value_count())
                        .map(|v| KvValue::Interned(isocert_history::ValueId::from_index(v))),
                );
                for value in values {
                    let got = sites.get(&kv, obj, value).map(|s| (s.txn, s.op(&kv), s.is_final));
                    assert_eq!(got, reference.get(&(obj, value)).copied(), "{obj:?} {value:?}\n{text}");
                }
            }
        }
    }
}
