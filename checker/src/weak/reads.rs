//! What the reads of a history with unique written values say, as the weak levels need it:
//! every external read (not only the first of each object: read committed allows a
//! transaction to read an object twice from different writers), the session order, and
//! each transaction's written objects.

use isocert_history::{KvHistory, KvOpKind, KvValue, ObjId, OpRef, TxnId, Writer};
use rustc_hash::FxHashMap;

use crate::items::{self, value_label, WriteSites};
use crate::{Anomaly, AnomalyKind};

/// A read answered by another transaction's installed version (or the initial one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExternalRead {
    /// The op index in the reading transaction.
    pub(crate) op: u32,
    /// The object read.
    pub(crate) obj: ObjId,
    /// The writer of the version read.
    pub(crate) writer: Writer,
}

/// The reads, sessions and writes of the transactions that are graph nodes.
#[derive(Debug)]
pub(crate) struct Reads {
    /// Whether each transaction is a node (committed, or unknown and read by someone).
    pub(crate) in_graph: Vec<bool>,
    /// Per transaction, its external reads in program order: `reads[read_start[t]..read_start[t + 1]]`.
    read_start: Vec<u32>,
    reads: Vec<ExternalRead>,
    /// Per transaction, the objects it wrote, sorted: `written[write_start[t]..write_start[t + 1]]`.
    write_start: Vec<u32>,
    written: Vec<ObjId>,
    /// Per node, its dense session index (`u32::MAX` for transactions that are not nodes).
    pub(crate) session: Vec<u32>,
    /// Per node, its 1-based position in its session (0 for transactions that are not nodes).
    pub(crate) position: Vec<u32>,
    /// Per session, its nodes in order.
    pub(crate) sessions: Vec<Vec<TxnId>>,
    /// Reads no level allows (aborted, intermediate, garbage, internally inconsistent).
    pub(crate) anomalies: Vec<Anomaly>,
}

impl Reads {
    /// Resolves every read of `kv` by value (as MTC and the SAT checkers do), given where
    /// each value was written ([`WriteSites`]).
    pub(crate) fn resolve(kv: &KvHistory, sites: &WriteSites) -> Reads {
        let n = kv.len();
        let in_graph = items::graph_nodes(kv, sites);
        // Each object's initial value, by dense object id (one array read per read).
        let initial = items::initial_values(kv);
        // Sized from the nodes' reads and writes (an upper bound): a guess that grew held
        // the old array beside one twice its size.
        let (mut read_ops, mut write_ops) = (0, 0);
        for t in kv.txn_ids().filter(|t| in_graph[t.index()]) {
            for op in kv.ops(t) {
                match op.kind() {
                    KvOpKind::Read => read_ops += 1,
                    KvOpKind::Write => write_ops += 1,
                    KvOpKind::Append => {}
                }
            }
        }
        let mut out = Reads {
            in_graph,
            read_start: Vec::with_capacity(n + 1),
            reads: Vec::with_capacity(read_ops),
            write_start: Vec::with_capacity(n + 1),
            written: Vec::with_capacity(write_ops),
            session: vec![u32::MAX; n],
            position: vec![0; n],
            sessions: Vec::new(),
            anomalies: Vec::new(),
        };
        let mut session_index: FxHashMap<u32, u32> = FxHashMap::default();
        // The transaction's own latest write per object, for reads after it.
        let mut own: Vec<(ObjId, KvValue, u32)> = Vec::new();
        for t in kv.txn_ids() {
            out.read_start.push(out.reads.len() as u32);
            out.write_start.push(out.written.len() as u32);
            if !out.in_graph[t.index()] {
                continue;
            }
            let next = session_index.len() as u32;
            let s = *session_index.entry(kv.session(t).0).or_insert(next);
            if s as usize == out.sessions.len() {
                out.sessions.push(Vec::new());
            }
            out.sessions[s as usize].push(t);
            out.session[t.index()] = s;
            out.position[t.index()] = out.sessions[s as usize].len() as u32;
            own.clear();
            for (i, op) in kv.ops(t).iter().enumerate() {
                let (i, obj, value) = (i as u32, op.obj(), op.value());
                match op.kind() {
                    KvOpKind::Write => match own.iter_mut().find(|e| e.0 == obj) {
                        Some(e) => *e = (obj, value, i),
                        None => own.push((obj, value, i)),
                    },
                    KvOpKind::Read => {
                        if let Some(&(_, mine, at)) = own.iter().find(|e| e.0 == obj) {
                            if mine != value {
                                out.anomalies.push(own_write_ignored(kv, t, i, obj, value, mine, at));
                            }
                            continue;
                        }
                        let init = initial[obj.index()];
                        let writer = items::resolve(
                            kv,
                            &out.in_graph,
                            sites,
                            init,
                            t,
                            i,
                            obj,
                            value,
                            &mut out.anomalies,
                        );
                        match writer {
                            Some(Writer::Txn(w)) if w == t => {
                                out.anomalies.push(future_read(kv, t, i, obj, value))
                            }
                            Some(writer) => out.reads.push(ExternalRead { op: i, obj, writer }),
                            None => {}
                        }
                    }
                    KvOpKind::Append => {}
                }
            }
            let first = out.written.len();
            out.written.extend(own.iter().map(|e| e.0));
            out.written[first..].sort_unstable();
        }
        out.read_start.push(out.reads.len() as u32);
        out.write_start.push(out.written.len() as u32);
        out
    }

    /// The external reads of `t`, in program order.
    pub(crate) fn of(&self, t: TxnId) -> &[ExternalRead] {
        &self.reads[self.read_start[t.index()] as usize..self.read_start[t.index() + 1] as usize]
    }

    /// Whether `t` wrote `obj`.
    pub(crate) fn wrote(&self, t: TxnId, obj: ObjId) -> bool {
        let keys =
            &self.written[self.write_start[t.index()] as usize..self.write_start[t.index() + 1] as usize];
        keys.binary_search(&obj).is_ok()
    }

    /// The objects `t` wrote, sorted.
    pub(crate) fn writes_of(&self, t: TxnId) -> &[ObjId] {
        &self.written[self.write_start[t.index()] as usize..self.write_start[t.index() + 1] as usize]
    }

    /// The node just before `t` in its session, if any.
    pub(crate) fn session_predecessor(&self, t: TxnId) -> Option<TxnId> {
        let pos = self.position[t.index()];
        (pos > 1).then(|| self.sessions[self.session[t.index()] as usize][pos as usize - 2])
    }

    /// The number of external reads.
    pub(crate) fn len(&self) -> usize {
        self.reads.len()
    }
}

/// A read after the transaction's own write that returned something else.
fn own_write_ignored(
    kv: &KvHistory,
    t: TxnId,
    op: u32,
    obj: ObjId,
    value: KvValue,
    mine: KvValue,
    at: u32,
) -> Anomaly {
    Anomaly::new(
        AnomalyKind::InternalInconsistency,
        vec![t],
        format!(
            "{} read {} at op {op} after it wrote {} at op {at}",
            kv.txn_label(t),
            value_label(kv, obj, value),
            value_label(kv, obj, mine)
        ),
    )
    .with_ops(vec![OpRef { txn: t, op }, OpRef { txn: t, op: at }])
    .with_objects(vec![obj])
}

/// A read of a value the transaction itself writes only later.
fn future_read(kv: &KvHistory, t: TxnId, op: u32, obj: ObjId, value: KvValue) -> Anomaly {
    Anomaly::new(
        AnomalyKind::InternalInconsistency,
        vec![t],
        format!(
            "{} read {} at op {op}, a value it writes only later",
            kv.txn_label(t),
            value_label(kv, obj, value)
        ),
    )
    .with_ops(vec![OpRef { txn: t, op }])
    .with_objects(vec![obj])
}
