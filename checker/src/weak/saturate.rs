//! The write orders each level's axiom forces (Biswas and Enea, "On the complexity of
//! checking transactional consistency", 2019). For a read of `x` by `t3` from `t1` and a
//! transaction `t2 ≠ t1` that wrote `x`, the commit order must put `t2` before `t1` when
//!
//! - read committed: `t3` read something from `t2` earlier in its program (wr ; po);
//! - read atomic: `t2` precedes `t3` directly, in its session or by a read (so ∪ wr);
//! - causal: `t2` causally precedes `t3` ((so ∪ wr)⁺).
//!
//! The premises mention only session order and reads, never the commit order, so one pass
//! saturates: the history satisfies the level exactly when session order, reads and these
//! forced orders are acyclic. Orders already implied are skipped where cheap to see: only
//! the last writer of `x` in each session needs an edge (session order puts the earlier
//! ones before it), and at causal consistency an order `t2 → t1` that causal precedence
//! already implies is left out. When `t1` is the initial state, no order can put `t2`
//! before it: that read is a violation by itself, recorded apart.

use isocert_history::{ObjId, TxnId, Writer};
use rustc_hash::FxHashMap;

use super::clock::Clocks;
use super::reads::{ExternalRead, Reads};

/// Why `t2` must precede the read's writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Read committed: the reader read from `t2` at this earlier op.
    EarlierRead(u32),
    /// Read atomic: `t2` came before the reader in its session.
    Session,
    /// Read atomic: the reader read from `t2` at this op.
    Read(u32),
    /// Causal: `t2` causally precedes the reader.
    Causal,
}

/// A forced write order: `t2`'s write of `obj` before the writer of what `reader` read at `op`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forced {
    /// The object both wrote.
    pub(crate) obj: ObjId,
    /// The transaction whose read forces the order.
    pub(crate) reader: TxnId,
    /// The read's op index.
    pub(crate) op: u32,
    /// Why `t2` must come first.
    pub(crate) via: Via,
}

/// The forced orders of one level.
#[derive(Debug, Default)]
pub(crate) struct Saturation {
    /// `(t2, t1, why)`: `t2`'s version before `t1`'s.
    pub(crate) edges: Vec<(u32, u32, Forced)>,
    /// `(t2, why)` where the read saw the initial version although `t2` had to be before it.
    pub(crate) initial: Vec<(TxnId, Forced)>,
}

impl Saturation {
    fn add(&mut self, t2: TxnId, reader: TxnId, read: &ExternalRead, via: Via) {
        let why = Forced { obj: read.obj, reader, op: read.op, via };
        match read.writer {
            Writer::Txn(t1) => self.edges.push((t2.0, t1.0, why)),
            Writer::Initial => self.initial.push((t2, why)),
        }
    }
}

/// One object's writers, grouped by session: per session `(session, first index)`, and
/// the writers as `(position in session, transaction)`, each session's in order.
#[derive(Debug, Default)]
struct KeyWriters {
    sessions: Vec<(u32, u32)>,
    writers: Vec<(u32, TxnId)>,
}

/// Per object, its writers grouped by session (causal consistency's index).
pub(crate) struct SessionWriters(FxHashMap<ObjId, KeyWriters>);

impl SessionWriters {
    /// Indexes every node's written objects.
    pub(crate) fn build(reads: &Reads) -> SessionWriters {
        let mut by_obj: FxHashMap<ObjId, KeyWriters> = FxHashMap::default();
        // Sessions in order, each in order: every object's writers arrive grouped and sorted.
        for (s, session) in reads.sessions.iter().enumerate() {
            for &t in session {
                for &obj in reads.writes_of(t) {
                    let k = by_obj.entry(obj).or_default();
                    if k.sessions.last().is_none_or(|e| e.0 != s as u32) {
                        k.sessions.push((s as u32, k.writers.len() as u32));
                    }
                    k.writers.push((reads.position[t.index()], t));
                }
            }
        }
        SessionWriters(by_obj)
    }

    /// For each session that wrote `obj`, its last writer at a position `seen(session)` or
    /// earlier (`seen` gives 0 for a session none of which is wanted).
    fn last_each(&self, obj: ObjId, seen: impl Fn(u32) -> u32, mut found: impl FnMut(TxnId)) {
        let Some(k) = self.0.get(&obj) else { return };
        for (i, &(s, start)) in k.sessions.iter().enumerate() {
            let limit = seen(s);
            if limit == 0 {
                continue;
            }
            let end = k.sessions.get(i + 1).map_or(k.writers.len(), |e| e.1 as usize);
            let segment = &k.writers[start as usize..end];
            let at = segment.partition_point(|e| e.0 <= limit);
            if at > 0 {
                found(segment[at - 1].1);
            }
        }
    }
}

/// Read committed: for each read, every distinct writer the transaction read from earlier.
pub(crate) fn read_committed(reads: &Reads) -> Saturation {
    let mut out = Saturation::default();
    let mut earlier: Vec<(TxnId, u32)> = Vec::new();
    for session in &reads.sessions {
        for &t3 in session {
            earlier.clear();
            for read in reads.of(t3) {
                for &(t2, op) in &earlier {
                    if read.writer != Writer::Txn(t2) && reads.wrote(t2, read.obj) {
                        out.add(t2, t3, read, Via::EarlierRead(op));
                    }
                }
                if let Writer::Txn(t1) = read.writer {
                    if !earlier.iter().any(|e| e.0 == t1) {
                        earlier.push((t1, read.op));
                    }
                }
            }
        }
    }
    out
}

/// Read atomic: for each read, the session's last earlier writer of the object (tracked
/// while walking the session) and every distinct writer the transaction read from.
pub(crate) fn read_atomic(reads: &Reads) -> Saturation {
    let mut out = Saturation::default();
    let mut direct: Vec<(TxnId, u32)> = Vec::new();
    let mut last_writer: FxHashMap<ObjId, TxnId> = FxHashMap::default();
    for session in &reads.sessions {
        last_writer.clear();
        for &t3 in session {
            direct.clear();
            for read in reads.of(t3) {
                if let Writer::Txn(t1) = read.writer {
                    if !direct.iter().any(|e| e.0 == t1) {
                        direct.push((t1, read.op));
                    }
                }
            }
            for read in reads.of(t3) {
                if let Some(&t2) = last_writer.get(&read.obj) {
                    if read.writer != Writer::Txn(t2) {
                        out.add(t2, t3, read, Via::Session);
                    }
                }
                for &(t2, op) in &direct {
                    if read.writer != Writer::Txn(t2) && reads.wrote(t2, read.obj) {
                        out.add(t2, t3, read, Via::Read(op));
                    }
                }
            }
            for &obj in reads.writes_of(t3) {
                last_writer.insert(obj, t3);
            }
        }
    }
    out
}

/// Causal: for each read and session, that session's last writer of the object that
/// causally precedes the reader, unless it already causally precedes the read's writer.
pub(crate) fn causal(reads: &Reads, writers: &SessionWriters, clocks: &Clocks) -> Saturation {
    let mut out = Saturation::default();
    let mut found: Vec<TxnId> = Vec::new();
    for session in &reads.sessions {
        for &t3 in session {
            for read in reads.of(t3) {
                found.clear();
                writers.last_each(read.obj, |s| clocks.last_seen(t3, s), |t2| found.push(t2));
                for &t2 in &found {
                    match read.writer {
                        Writer::Txn(t1) if t1 == t2 || clocks.precedes(reads, t2, t1) => {}
                        _ => out.add(t2, t3, read, Via::Causal),
                    }
                }
            }
        }
    }
    out
}
