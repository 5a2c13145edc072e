//! From the key-value model to the general [`History`], one transaction at a time.
//!
//! The general reader interns every value (integers too) in the order the file first uses
//! it; the key-value readers keep integers inline and intern the other values in their own
//! order. [`HistoryBuilder`] interns the values again as each transaction arrives, in file
//! order, so the history it builds has the general reader's value ids. The fast v1 reader
//! feeds it each transaction as soon as it is parsed
//! ([`super::v1_fast::read_history_through`]); [`KvHistory::into_history`] feeds it a
//! finished key-value history.

use super::{KvHistory, KvOp, KvOpKind, KvTxnFields, KvValue};
use crate::{History, ObjId, Op, Scalar, Transaction, TxnId, Value, ValueId};

/// A [`History`] built from key-value transactions whose objects, sessions and values a
/// key-value history's dictionary ([`KvHistory::dict`]) interned.
#[derive(Debug)]
pub(crate) struct HistoryBuilder {
    /// The values (in the general reader's order), initial versions and transactions built
    /// so far; its other tables stay empty until [`HistoryBuilder::finish`].
    out: History,
    /// For each value id of the dictionary, its id in `out` (`u32::MAX`: not used yet).
    renumbered: Vec<u32>,
    /// Whether the dictionary's initial versions (the header's, read before any
    /// transaction) were renumbered.
    initial_done: bool,
}

impl Default for HistoryBuilder {
    fn default() -> Self {
        // `History::new`, not its `Default`: a new history interns the absent value first.
        HistoryBuilder { out: History::new(), renumbered: Vec::new(), initial_done: false }
    }
}

impl HistoryBuilder {
    /// Room for `n` more transactions.
    pub(crate) fn reserve_exact(&mut self, n: usize) {
        self.out.txns.reserve_exact(n);
    }

    /// The id in the built history of the dictionary's value `id`.
    fn renumber(&mut self, dict: &History, id: ValueId) -> ValueId {
        let i = id.index();
        if i >= self.renumbered.len() {
            self.renumbered.resize(dict.value_count().max(i + 1), u32::MAX);
        }
        if self.renumbered[i] == u32::MAX {
            self.renumbered[i] = self.out.intern_value(dict.value(id).clone()).0;
        }
        ValueId(self.renumbered[i])
    }

    /// The id in the built history of the value `v`.
    fn value(&mut self, dict: &History, v: KvValue) -> ValueId {
        match v {
            KvValue::Absent => ValueId::ABSENT,
            KvValue::Int(i) => self.out.intern_int(i),
            KvValue::Interned(id) => self.renumber(dict, id),
        }
    }

    /// Renumbers the initial versions, once, before the first transaction's values.
    fn initial(&mut self, dict: &History) {
        if std::mem::replace(&mut self.initial_done, true) {
            return;
        }
        for &(obj, id) in &dict.initial {
            let id = self.renumber(dict, id);
            self.out.initial.push((obj, id));
        }
    }

    /// Adds the transaction with `fields` and `ops`; the name back if another transaction
    /// already has it.
    pub(crate) fn push(
        &mut self,
        dict: &History,
        fields: KvTxnFields,
        ops: &[KvOp],
    ) -> Result<TxnId, Scalar> {
        self.initial(dict);
        let mut converted = Vec::with_capacity(ops.len());
        for op in ops {
            converted.push(match op.kind() {
                KvOpKind::Read => Op::Read { obj: op.obj(), value: self.value(dict, op.value()) },
                KvOpKind::Write => Op::Write { obj: op.obj(), value: self.value(dict, op.value()) },
                KvOpKind::Append => Op::Append { obj: op.obj(), element: element(dict, op.value()) },
            });
        }
        let mut txn = Transaction::new(fields.name, fields.session, converted);
        txn.status = fields.status;
        txn.set_start_ts(fields.start);
        txn.set_commit_ts(fields.commit);
        txn.set_real_time(fields.real_time);
        self.out.push_txn(txn).map_err(|txn| txn.name)
    }

    /// The history: the dictionary of `kv` (objects, tables, sessions) with the values,
    /// initial versions and transactions built here, and `kv`'s default initial value set
    /// for every object without an explicit one.
    pub(crate) fn finish(mut self, kv: KvHistory) -> History {
        let mut h = kv.dict;
        self.initial(&h);
        if let Some(default) = kv.default_initial {
            let listed: rustc_hash::FxHashSet<ObjId> = self.out.initial.iter().map(|(o, _)| *o).collect();
            let value = self.value(&h, default);
            for o in 0..h.object_count() {
                let obj = ObjId::from_index(o);
                if !listed.contains(&obj) && value != ValueId::ABSENT {
                    self.out.initial.push((obj, value));
                }
            }
        }
        h.adopt_values_and_txns(self.out);
        h
    }
}

/// An appended element: a scalar (an absent value appends null).
fn element(dict: &History, v: KvValue) -> Scalar {
    match v {
        KvValue::Absent => Scalar::Null,
        KvValue::Int(i) => Scalar::Int(i),
        KvValue::Interned(id) => match dict.value(id) {
            Value::Scalar(s) => s.clone(),
            _ => Scalar::Null,
        },
    }
}
