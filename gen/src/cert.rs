//! The certificate as the simulation learns it, in generator ids, kept compact.

use crate::record::{Outcome, Seen, SeenWriter, TxnRecord};

/// One predicate operation's version set.
#[derive(Clone, Debug, Default)]
pub(crate) struct VersionSetRec {
    /// The transaction's id.
    pub(crate) txn: u32,
    /// The operation's index.
    pub(crate) op: u32,
    /// The snapshot it was evaluated at, usually the transaction's start timestamp (every
    /// writer committed at or before it is visible; the compact form's `visible_through`).
    pub(crate) at: u64,
    /// The versions row by row, with [`SeenWriter::Own`] resolved; empty in the compact form.
    pub(crate) seen: Vec<Seen>,
}

/// Version order, version sets and commit timestamps of the committed transactions.
#[derive(Clone, Debug, Default)]
pub(crate) struct CertBuilder {
    /// Per generator object, the committed writers oldest first.
    pub(crate) version_order: Vec<Vec<u32>>,
    /// Per predicate operation of a committed transaction, its version set.
    pub(crate) version_sets: Vec<VersionSetRec>,
    /// Keep version sets row by row (else only their snapshot timestamps).
    pub(crate) explicit: bool,
    /// (commit timestamp, id) of every committed transaction, in commit (emission) order.
    pub(crate) commits: Vec<(u64, u32)>,
}

impl CertBuilder {
    /// Records a committed transaction whose installed objects are `installed`, in
    /// installation order (each once).
    pub(crate) fn record(&mut self, rec: &TxnRecord, installed: &[u32]) {
        if rec.outcome != Outcome::Committed {
            return;
        }
        for &obj in installed {
            let i = obj as usize;
            if i >= self.version_order.len() {
                self.version_order.resize_with(i + 1, Vec::new);
            }
            self.version_order[i].push(rec.id);
        }
        for (i, op) in rec.ops.iter().enumerate() {
            if let Some((seen, at)) = op.seen() {
                let seen = if self.explicit {
                    seen.iter()
                        .map(|s| match s.writer {
                            SeenWriter::Own => Seen { obj: s.obj, writer: SeenWriter::Txn(rec.id) },
                            _ => *s,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                self.version_sets.push(VersionSetRec { txn: rec.id, op: i as u32, at, seen });
            }
        }
        self.commits.push((rec.commit_ts.unwrap_or(rec.start_ts), rec.id));
    }

    /// The committed transactions by commit timestamp (read-only ones sit at their start
    /// timestamp; ties cannot happen because every event has its own timestamp, except
    /// injected shapes, which keep emission order).
    pub(crate) fn serialization_order(&self) -> Vec<u32> {
        let mut order = self.commits.clone();
        order.sort_by_key(|&(ts, id)| (ts, id));
        order.into_iter().map(|(_, id)| id).collect()
    }
}
