//! Item dependencies (Algorithm 2): wr and rw edges from item reads, and the non-cyclic
//! anomalies a read can show (aborted, intermediate, garbage, internally inconsistent).

use isocert_history::{
    History, ObjId, Op, OpRef, Scalar, SeenVersion, Status, TxnId, Value, ValueId, Writer,
};
use rustc_hash::FxHashMap;

use super::RawEdge;
use crate::values::ValueStore;
use crate::versions::{write_sites, writer_label, VersionTable, WriteSite, INITIAL};
use crate::{Anomaly, AnomalyKind, EdgeKind, IsolationLevel};

/// What the current transaction itself did to one object so far.
#[derive(Debug, Clone)]
pub(crate) struct Own {
    /// Its current value, when known (a write, or a read followed by appends).
    pub(crate) value: Option<ValueId>,
    /// Elements appended on top of a value the transaction has not seen.
    pub(crate) appended: Vec<Scalar>,
}

/// The first append of each element to each list object: its transaction and op index.
type AppendSites<'h> = FxHashMap<(ObjId, &'h Scalar), (TxnId, u32)>;

/// The certificate's version sets, keyed by operation.
pub(crate) type VersionSets = FxHashMap<OpRef, Vec<SeenVersion>>;

/// Walks committed transactions' item operations, adding edges and anomalies.
pub(crate) struct ItemPass<'a, 'h> {
    pub(crate) h: &'h History,
    pub(crate) vt: &'a VersionTable,
    pub(crate) values: &'a mut ValueStore<'h>,
    pub(crate) edges: &'a mut Vec<RawEdge>,
    pub(crate) anomalies: &'a mut Vec<Anomaly>,
    /// The current transaction's own writes.
    pub(crate) own: FxHashMap<ObjId, Own>,
    /// The current transaction's external item reads, when the level forbids
    /// non-repeatable reads (repeatable read and stronger).
    reads: Option<FxHashMap<ObjId, (u32, ValueId)>>,
    sites: Option<FxHashMap<(ObjId, ValueId), WriteSite>>,
    /// The first append of each element to each list object: its transaction and op index.
    appends: Option<AppendSites<'h>>,
    /// The certificate's version sets, when some entry names the version an item read
    /// saw (isocert extension); `None` otherwise, so plain reads skip the lookup.
    read_versions: Option<&'a VersionSets>,
    /// Item reads that several versions could explain, whose version the certificate named.
    pub(crate) resolved_reads: usize,
    /// Item reads that several versions could explain and the certificate did not name:
    /// they add no dependency edges.
    pub(crate) ambiguous_reads: usize,
    /// Only track the transaction's own writes (the predicate pass's second walk).
    pub(crate) own_only: bool,
}

impl<'a, 'h> ItemPass<'a, 'h> {
    pub(crate) fn new(
        h: &'h History,
        vt: &'a VersionTable,
        values: &'a mut ValueStore<'h>,
        edges: &'a mut Vec<RawEdge>,
        anomalies: &'a mut Vec<Anomaly>,
        level: IsolationLevel,
        read_versions: Option<&'a VersionSets>,
    ) -> Self {
        let repeatable = !matches!(level, IsolationLevel::ReadUncommitted | IsolationLevel::ReadCommitted);
        ItemPass {
            h,
            vt,
            values,
            edges,
            anomalies,
            own: FxHashMap::default(),
            reads: repeatable.then(FxHashMap::default),
            sites: None,
            appends: None,
            read_versions,
            resolved_reads: 0,
            ambiguous_reads: 0,
            own_only: false,
        }
    }

    /// Forgets the previous transaction's writes.
    pub(crate) fn start_txn(&mut self, _t: TxnId) {
        self.own.clear();
        if let Some(reads) = self.reads.as_mut() {
            reads.clear();
        }
    }

    /// At repeatable read and above, a second read of an object the transaction has not
    /// written must return what the first returned (Elle's internal consistency).
    fn repeated_read(&mut self, t: TxnId, i: u32, obj: ObjId, value: ValueId) {
        let Some(reads) = self.reads.as_mut() else { return };
        let (first_op, first) = *reads.entry(obj).or_insert((i, value));
        if first != value {
            let h = self.h;
            self.anomalies.push(
                Anomaly::new(
                    AnomalyKind::InternalInconsistency,
                    vec![t],
                    format!(
                        "{} read {} = {} in its operation {} and {} in its operation {} without writing it in \
                         between",
                        h.txn_label(t),
                        h.object_label(obj),
                        self.values.label(obj, first),
                        first_op + 1,
                        self.values.label(obj, value),
                        i + 1
                    ),
                )
                .with_ops(vec![OpRef { txn: t, op: first_op }, OpRef { txn: t, op: i }])
                .with_objects(vec![obj]),
            );
        }
    }

    /// Processes one operation of committed transaction `t` (predicate ops only update
    /// the transaction's own writes here; [`super::predicate`] handles their reads).
    pub(crate) fn op(&mut self, t: TxnId, i: u32, op: &Op) {
        match op {
            Op::Read { .. } if self.own_only => {}
            Op::Read { obj, value } => self.read(t, i, *obj, *value),
            Op::Write { obj, value } => self.set_own(*obj, *value),
            Op::Update { rows, .. } => rows.iter().for_each(|r| self.set_own(r.obj, r.value)),
            Op::Delete { rows, .. } => rows.iter().for_each(|r| self.set_own(r.obj, ValueId::ABSENT)),
            Op::Append { obj, element } => {
                let own = self.own.entry(*obj).or_insert(Own { value: None, appended: Vec::new() });
                match own.value {
                    Some(v) => own.value = Some(self.values.append(v, element)),
                    None => own.appended.push(element.clone()),
                }
            }
            Op::Select { .. } | Op::Aggregate { .. } => {}
        }
    }

    fn set_own(&mut self, obj: ObjId, value: ValueId) {
        if let Some(reads) = self.reads.as_mut() {
            reads.remove(&obj);
        }
        self.own.insert(obj, Own { value: Some(value), appended: Vec::new() });
    }

    fn read(&mut self, t: TxnId, i: u32, obj: ObjId, value: ValueId) {
        let h = self.h;
        let value = self.values.as_version(value);
        if let Some(own) = self.own.get(&obj).cloned() {
            if let Some(expected) = own.value {
                if let Some(seen) = self.named_version(t, i).filter(|s| s.writer != Writer::Txn(t)) {
                    self.contradiction(
                        t,
                        i,
                        seen,
                        format!(
                            "{} read {} after writing it, but the certificate says it saw {} of {}",
                            h.txn_label(t),
                            h.object_label(obj),
                            version_name(h, seen.writer),
                            h.object_label(seen.obj)
                        ),
                    );
                }
                if expected != value {
                    self.anomalies.push(
                        Anomaly::new(
                            AnomalyKind::InternalInconsistency,
                            vec![t],
                            format!(
                                "{} read {}={} after writing {}={}",
                                h.txn_label(t),
                                h.object_label(obj),
                                self.values.label(obj, value),
                                h.object_label(obj),
                                self.values.label(obj, expected)
                            ),
                        )
                        .with_ops(vec![OpRef { txn: t, op: i }])
                        .with_objects(vec![obj]),
                    );
                }
                return;
            }
            // Appends on an unseen base: the read must end with them; its prefix is the
            // version the transaction read.
            let items = match self.values.get(value) {
                Value::List(items) => items.to_vec(),
                _ => Vec::new(),
            };
            let n = own.appended.len();
            if items.len() < n || items[items.len() - n..] != own.appended[..] {
                self.anomalies.push(
                    Anomaly::new(
                        AnomalyKind::InternalInconsistency,
                        vec![t],
                        format!(
                            "{} read {}={}, which does not end with the {} element(s) it appended",
                            h.txn_label(t),
                            h.object_label(obj),
                            self.values.label(obj, value),
                            n
                        ),
                    )
                    .with_ops(vec![OpRef { txn: t, op: i }])
                    .with_objects(vec![obj]),
                );
            } else {
                let prefix = items[..items.len() - n].to_vec();
                let base = if prefix.is_empty() {
                    Some(ValueId::ABSENT)
                } else {
                    self.values.lookup(&Value::List(prefix.into_boxed_slice()))
                };
                match base {
                    Some(base) => self.external_read(t, i, obj, base, value),
                    None => self.unexplained_read(t, i, obj, value),
                }
            }
            self.set_own(obj, value);
            return;
        }
        self.repeated_read(t, i, obj, value);
        self.external_read(t, i, obj, value, value);
    }

    /// The version the certificate says read `i` of `t` saw, if it names one.
    fn named_version(&self, t: TxnId, i: u32) -> Option<SeenVersion> {
        self.read_versions?.get(&OpRef { txn: t, op: i })?.first().copied()
    }

    /// A read of `obj` whose external part is version `value` (`shown` is what the read
    /// returned, for messages). The certificate's named version, when there is one, says
    /// which version that is; otherwise the value does, unless several versions hold it.
    fn external_read(&mut self, t: TxnId, i: u32, obj: ObjId, value: ValueId, shown: ValueId) {
        if let Some(seen) = self.named_version(t, i) {
            self.named_read(t, i, obj, value, shown, seen);
            return;
        }
        match self.vt.by_value(obj, value) {
            Ok(Some(gid)) => self.version_read(t, i, obj, gid, shown),
            Ok(None) => self.unexplained_read(t, i, obj, shown),
            Err(_) => match self.vt.repeated_writers(obj, value) {
                Some(writers) => self.ambiguous_repeated_read(t, i, obj, value, &writers),
                None => self.ambiguous_reads += 1,
            },
        }
    }

    /// A read of a value several versions hold, whose version the certificate (whose
    /// writers identify versions) does not name: which one it saw is unknown, so the
    /// writes of that value are a duplicate write after all.
    #[cold]
    fn ambiguous_repeated_read(&mut self, t: TxnId, i: u32, obj: ObjId, value: ValueId, writers: &[u32]) {
        let h = self.h;
        let names: Vec<String> = writers.iter().map(|&w| writer_label(h, w)).collect();
        let mut txns: Vec<TxnId> = writers.iter().copied().filter(|&w| w != INITIAL).map(TxnId).collect();
        txns.push(t);
        txns.dedup();
        self.anomalies.push(
            Anomaly::new(
                AnomalyKind::DuplicateWrite,
                txns,
                format!(
                    "{} read {}={}, which {} all installed, and the certificate does not name the version \
                     it saw, so the read is ambiguous",
                    h.txn_label(t),
                    h.object_label(obj),
                    self.values.label(obj, value),
                    names.join(", ")
                ),
            )
            .with_ops(vec![OpRef { txn: t, op: i }])
            .with_objects(vec![obj]),
        );
    }

    /// A read the certificate names version `seen` for: that version must exist and hold
    /// the value read; then its edges are the read's.
    #[cold]
    fn named_read(
        &mut self,
        t: TxnId,
        i: u32,
        obj: ObjId,
        value: ValueId,
        shown: ValueId,
        seen: SeenVersion,
    ) {
        let h = self.h;
        let gid = if seen.obj != obj {
            None
        } else {
            match seen.writer {
                Writer::Initial => Some(self.vt.initial(obj)),
                Writer::Txn(w) => self.vt.by_writer(obj, w),
            }
        };
        let what = read_what(h, self.values, t, obj, shown);
        let named = version_name(h, seen.writer);
        match gid {
            None => self.contradiction(
                t,
                i,
                seen,
                format!(
                    "{what}, and the certificate says it saw {named} of {}, which the version order does not have",
                    h.object_label(seen.obj)
                ),
            ),
            Some(gid) if self.vt.versions[gid as usize].value != value => {
                let held = self.vt.versions[gid as usize].value;
                self.contradiction(
                    t,
                    i,
                    seen,
                    format!(
                        "{what}, but the certificate says it saw {named}, {}={}",
                        h.object_label(obj),
                        self.values.label(obj, held)
                    ),
                );
            }
            Some(gid) => {
                if self.vt.by_value(obj, value).is_err() {
                    self.resolved_reads += 1;
                }
                self.version_read(t, i, obj, gid, shown);
            }
        }
    }

    /// A certificate-contradiction about read `i` of `t` and the version `seen` it names.
    fn contradiction(&mut self, t: TxnId, i: u32, seen: SeenVersion, explanation: String) {
        let mut txns = vec![t];
        txns.extend(seen.writer.txn().filter(|&w| w != t));
        self.anomalies.push(
            Anomaly::new(AnomalyKind::CertificateContradiction, txns, explanation)
                .with_ops(vec![OpRef { txn: t, op: i }])
                .with_objects(vec![seen.obj]),
        );
    }

    /// Read `i` of `t` saw version `gid` of `obj`: a wr edge from its writer and an rw
    /// edge to the writer of the next version.
    #[inline(always)]
    fn version_read(&mut self, t: TxnId, i: u32, obj: ObjId, gid: u32, shown: ValueId) {
        let writer = self.vt.versions[gid as usize].writer;
        if writer == t.0 {
            self.anomalies.push(
                Anomaly::new(
                    AnomalyKind::InternalInconsistency,
                    vec![t],
                    format!(
                        "{} read {}={} before writing that value itself",
                        self.h.txn_label(t),
                        self.h.object_label(obj),
                        self.values.label(obj, shown)
                    ),
                )
                .with_ops(vec![OpRef { txn: t, op: i }])
                .with_objects(vec![obj]),
            );
            return;
        }
        if writer != INITIAL {
            self.edges.push(RawEdge {
                from: writer,
                to: t.0,
                kind: EdgeKind::Wr,
                op: i,
                ver: gid,
                aux: u32::MAX,
            });
        }
        for next in self.vt.following(gid) {
            let nw = self.vt.versions[next as usize].writer;
            if nw != t.0 {
                self.edges.push(RawEdge {
                    from: t.0,
                    to: nw,
                    kind: EdgeKind::Rw,
                    op: i,
                    ver: gid,
                    aux: next,
                });
            }
        }
    }

    /// For a list read no committed version explains: the first of its elements that a
    /// transaction outside the graph (aborted, or unknown and not committed) appended to
    /// `obj`, with that transaction and the op index of the append.
    fn uncommitted_appender(&mut self, obj: ObjId, value: ValueId) -> Option<(TxnId, u32, Scalar)> {
        let h = self.h;
        let items = match self.values.get(value) {
            Value::List(items) => items.to_vec(),
            _ => return None,
        };
        let appends = self.appends.get_or_insert_with(|| {
            let mut appends = FxHashMap::default();
            for t in h.txn_ids() {
                for (i, op) in h.txn(t).ops.iter().enumerate() {
                    if let Op::Append { obj, element } = op {
                        appends.entry((*obj, element)).or_insert((t, i as u32));
                    }
                }
            }
            appends
        });
        items.iter().find_map(|element| {
            let &(writer, at) = appends.get(&(obj, element))?;
            (!self.vt.in_graph[writer.index()]).then(|| (writer, at, element.clone()))
        })
    }

    /// For a list read no committed version explains: the transaction of the graph that
    /// appended its last element and then appended more to `obj` (so the read saw a state
    /// that transaction overwrote, Elle's `G1b`), with the op index of that append.
    fn intermediate_appender(
        &mut self,
        t: TxnId,
        obj: ObjId,
        value: ValueId,
    ) -> Option<(TxnId, u32, Scalar)> {
        let h = self.h;
        let last = match self.values.get(value) {
            Value::List(items) => items.last()?.clone(),
            _ => return None,
        };
        let appends = self.appends.as_ref()?;
        let &(writer, at) = appends.get(&(obj, &last))?;
        let later = h.txn(writer).ops[at as usize + 1..]
            .iter()
            .any(|op| matches!(op, Op::Append { obj: o, .. } | Op::Write { obj: o, .. } if *o == obj));
        (writer != t && self.vt.in_graph[writer.index()] && later).then_some((writer, at, last))
    }

    /// A read of a value that is no committed version: classify it.
    fn unexplained_read(&mut self, t: TxnId, i: u32, obj: ObjId, value: ValueId) {
        let h = self.h;
        let written = self.sites.get_or_insert_with(|| write_sites(h)).contains_key(&(obj, value));
        let aborted_append = if written { None } else { self.uncommitted_appender(obj, value) };
        let intermediate = if written || aborted_append.is_some() {
            None
        } else {
            self.intermediate_appender(t, obj, value)
        };
        let sites = self.sites.as_ref().expect("just filled");
        let what = read_what(h, self.values, t, obj, value);
        let op = OpRef { txn: t, op: i };
        let anomaly = match sites.get(&(obj, value)).copied() {
            None if aborted_append.is_some() => {
                let (writer, at, element) = aborted_append.expect("checked");
                let status = if h.txn(writer).status == Status::Aborted {
                    "which aborted"
                } else {
                    "whose outcome is unknown and which the certificate shows did not commit"
                };
                let mut txns = vec![t, writer];
                txns.dedup();
                Anomaly::new(
                    AnomalyKind::G1a,
                    txns,
                    format!(
                        "{what}, holding element {element} appended by {}, {status}",
                        h.txn_label(writer)
                    ),
                )
                .with_ops(vec![op, OpRef { txn: writer, op: at }])
            }
            None if intermediate.is_some() => {
                let (writer, at, element) = intermediate.expect("checked");
                Anomaly::new(
                    AnomalyKind::G1b,
                    vec![t, writer],
                    format!(
                        "{what}, an intermediate version: {} appended {element} in its operation {} and then \
                         changed {} again, so no committed version ends with {element}",
                        h.txn_label(writer),
                        at + 1,
                        h.object_label(obj)
                    ),
                )
                .with_ops(vec![op, OpRef { txn: writer, op: at }])
            }
            None => Anomaly::new(
                AnomalyKind::GarbageRead,
                vec![t],
                format!("{what}, a value no transaction wrote"),
            )
            .with_ops(vec![op]),
            Some(site) if site.txn == t => Anomaly::new(
                AnomalyKind::InternalInconsistency,
                vec![t],
                format!("{what}, a value it writes only later (in its operation {})", site.op + 1),
            ),
            Some(site) => {
                let w = h.txn(site.txn);
                let writer = h.txn_label(site.txn);
                let in_graph = self.vt.in_graph[site.txn.index()];
                let (kind, why) = if w.status == Status::Aborted {
                    (AnomalyKind::G1a, format!("{what} written by {writer}, which aborted"))
                } else if !in_graph {
                    (
                        AnomalyKind::G1a,
                        format!(
                            "{what} written by {writer}, whose outcome is unknown and which the certificate shows \
                             did not commit"
                        ),
                    )
                } else if !site.is_final {
                    (
                        AnomalyKind::G1b,
                        format!(
                            "{what}, an intermediate version: {writer} wrote it in its operation {} and overwrote \
                             it later",
                            site.op + 1
                        ),
                    )
                } else {
                    (
                        AnomalyKind::CertificateContradiction,
                        format!("{what} written by {writer}, but the version order lists no such version"),
                    )
                };
                let mut txns = vec![t, site.txn];
                txns.dedup();
                Anomaly::new(kind, txns, why).with_ops(vec![op, OpRef { txn: site.txn, op: site.op }])
            }
        };
        if anomaly.ops.is_empty() {
            self.anomalies.push(anomaly.with_ops(vec![op]).with_objects(vec![obj]));
        } else {
            self.anomalies.push(anomaly.with_objects(vec![obj]));
        }
    }
}

/// "T5 read kv[x] = 3" or "T5 found no row for kv[x]", the start of a read's explanation.
fn read_what(h: &History, values: &ValueStore<'_>, t: TxnId, obj: ObjId, value: ValueId) -> String {
    if value == ValueId::ABSENT {
        format!("{} found no row for {}", h.txn_label(t), h.object_label(obj))
    } else {
        format!("{} read {} = {}", h.txn_label(t), h.object_label(obj), values.label(obj, value))
    }
}

/// "T7's version" or "the initial version", for messages about a named version.
fn version_name(h: &History, writer: Writer) -> String {
    match writer {
        Writer::Initial => "the initial version".to_string(),
        Writer::Txn(w) => format!("{}'s version", writer_label(h, w.0)),
    }
}
