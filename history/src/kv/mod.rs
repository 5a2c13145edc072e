//! A compact, columnar history of key-value and list operations, for the timestamp checkers.
//!
//! [`History`] keeps one [`Op`] enum (up to 64 bytes) per operation, in one `Vec` per
//! transaction: fine for predicate histories, too heavy for a million transactions of
//! fifteen item operations. [`KvHistory`] stores an item operation in 16 bytes
//! ([`KvOp`]: object, kind and an inline integer value or an interned value id), keeps the
//! transactions' fields in columns, and groups operations in blocks of
//! [`KvHistory::BLOCK`] transactions that a checker may drop once it is done with them,
//! so memory falls as a check proceeds. The fast readers ([`read_kv_v1`],
//! [`crate::chronos`]) fill it straight from the bytes without building a JSON tree.

mod build;
mod column;
mod convert;
mod parallel;
pub(crate) mod scan;
pub(crate) mod v1_fast;

use rustc_hash::FxHashMap;

use crate::intern::{KeyIndex, Keys};
use crate::{
    FormatError, History, ObjId, Op, RealTime, Scalar, SessionId, Status, Timestamp, TxnId, Value, ValueId,
};

pub(crate) use build::{RecordError, RecordReader};
use column::LazyColumn;
pub(crate) use convert::HistoryBuilder;
pub use parallel::{read_kv_v1_chunks, read_kv_v1_file, ChunkFailed, KvV1Chunks};
pub(crate) use v1_fast::read_history_through;
pub use v1_fast::{read_kv_v1, read_kv_v1_bytes, KvV1Reader};

/// A value as the kv checkers compare it: absent, an inline integer, or an interned value.
///
/// Integers are never interned, so two `KvValue`s are equal exactly when the values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KvValue {
    /// No value (unborn or deleted object, or a read that found nothing).
    #[default]
    Absent,
    /// An integer scalar, stored inline.
    Int(i64),
    /// Any other value (text, float, boolean, null scalar, list), interned in the history.
    Interned(ValueId),
}

/// What an item operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvOpKind {
    /// Read of the object; the value is what the read returned.
    Read,
    /// Write of the value (absent deletes).
    Write,
    /// Append of the value (a scalar) to the list at the object.
    Append,
}

/// One item operation in 16 bytes: object, kind and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvOp {
    bits: i64,
    obj: ObjId,
    code: u8,
}

impl KvOp {
    /// Packs an operation.
    #[inline]
    pub fn new(kind: KvOpKind, obj: ObjId, value: KvValue) -> Self {
        let (tag, bits) = match value {
            KvValue::Absent => (0u8, 0i64),
            KvValue::Int(i) => (1, i),
            KvValue::Interned(id) => (2, i64::from(id.0)),
        };
        let k = match kind {
            KvOpKind::Read => 0u8,
            KvOpKind::Write => 1,
            KvOpKind::Append => 2,
        };
        KvOp { bits, obj, code: k * 4 + tag }
    }

    /// The object.
    #[inline]
    pub fn obj(self) -> ObjId {
        self.obj
    }

    /// The kind of operation.
    #[inline]
    pub fn kind(self) -> KvOpKind {
        match self.code >> 2 {
            0 => KvOpKind::Read,
            1 => KvOpKind::Write,
            _ => KvOpKind::Append,
        }
    }

    /// The value read, written or appended.
    #[inline]
    pub fn value(self) -> KvValue {
        match self.code & 3 {
            0 => KvValue::Absent,
            1 => KvValue::Int(self.bits),
            _ => KvValue::Interned(ValueId(self.bits as u32)),
        }
    }
}

/// Freed operation blocks a history keeps for reuse ([`KvHistory::free_block`]).
const SPARE_BLOCKS: usize = 2;

/// The most operations per transaction a new block is sized for when the estimate comes
/// from a few transactions (a history's first): one huge transaction (a Plume file's aborted
/// writes are one transaction of 22,000 operations) would otherwise reserve its size for
/// each of the block's 16,384 transactions. A block of larger transactions grows as it fills.
const MAX_GUESSED_OPS_PER_TXN: usize = 16;

/// Transactions whose average operation count sizes a new block as it is, uncapped.
const TRUSTED_SAMPLE: usize = 256;

/// The operations to reserve for a block of [`KvHistory::BLOCK`] transactions like the
/// `sample_txns` transactions that had `sample_ops` operations in all (the block before, or
/// the block's first transaction), with an eighth more so that a block is rarely copied to
/// grow; a small sample is trusted up to [`MAX_GUESSED_OPS_PER_TXN`] a transaction.
fn block_capacity(sample_ops: usize, sample_txns: usize) -> usize {
    let average = sample_ops.div_ceil(sample_txns.max(1));
    let per_txn = if sample_txns >= TRUSTED_SAMPLE { average } else { average.min(MAX_GUESSED_OPS_PER_TXN) };
    per_txn * KvHistory::BLOCK + per_txn * KvHistory::BLOCK / 8
}

/// The operations of [`KvHistory::BLOCK`] consecutive transactions.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpBlock {
    ops: Vec<KvOp>,
    /// End offset in `ops` of each transaction of the block.
    ends: Vec<u32>,
}

/// A compact history of item reads, writes and appends, with columnar transaction fields.
///
/// The interning tables (objects, values, sessions, initial versions) live in an inner
/// [`History`] without transactions ([`KvHistory::dict`]), so labels and values render
/// exactly as for a full history.
#[derive(Clone, Debug, Default)]
pub struct KvHistory {
    dict: History,
    default_initial: Option<KvValue>,
    initial: FxHashMap<ObjId, KvValue>,
    names: Vec<Scalar>,
    /// The transaction of each name, compared through `names` ([`NameColumn`]) so that no
    /// name is held twice.
    name_index: KeyIndex<Scalar>,
    sessions: Vec<SessionId>,
    status: Vec<Status>,
    /// Start timestamps by column index; empty until the first transaction that has one
    /// (most histories have none), then padded with `None`.
    start: LazyColumn<Timestamp>,
    /// Commit timestamps, like `start`.
    commit: LazyColumn<Timestamp>,
    /// Clients' real times, like `start`.
    real_time: LazyColumn<RealTime>,
    blocks: Vec<Option<OpBlock>>,
    /// Freed blocks kept, emptied, for the next block to reuse (at most [`SPARE_BLOCKS`]):
    /// a streaming check frees a block and starts another every 16,384 transactions, and
    /// fresh memory costs a page fault and a zeroed page per 4 KB.
    spare_blocks: Vec<OpBlock>,
    int_keys: Vec<u32>,
    /// Whether the reader skipped adapter facts (`meta`) that a [`History`] would keep.
    skipped_meta: bool,
    /// Whether transaction names are left out of `name_index` (a part of a file read on
    /// several threads: [`KvHistory::append`] indexes them, and finds repeats, when merging).
    unindexed: bool,
    /// Transactions before this index have left the columns ([`KvHistory::retire`]).
    base: usize,
    /// Retired transactions that a checker still names, by index.
    kept: FxHashMap<u32, KeptTxn>,
}

/// The names column as the keys of [`KvHistory`]'s name index: the name of transaction
/// `id` is at `id - base` (transactions before `base` have left the column; the index is
/// dropped when they leave, [`KvHistory::retire`]).
struct NameColumn<'a> {
    names: &'a [Scalar],
    base: usize,
}

impl Keys<Scalar> for NameColumn<'_> {
    fn key(&self, id: u32) -> &Scalar {
        &self.names[id as usize - self.base]
    }
}

/// The fields of a retired transaction that a checker keeps for its report.
#[derive(Clone, Debug)]
struct KeptTxn {
    name: Scalar,
    session: SessionId,
    status: Status,
    start: Option<Timestamp>,
    commit: Option<Timestamp>,
    real_time: Option<RealTime>,
}

/// The fields of one transaction, handed to [`KvHistory::push_txn`].
#[derive(Clone, Debug)]
pub struct KvTxnFields {
    /// Its id in the file.
    pub name: Scalar,
    /// Its session.
    pub session: SessionId,
    /// How it ended.
    pub status: Status,
    /// Start timestamp, if reported.
    pub start: Option<Timestamp>,
    /// Commit timestamp, if reported.
    pub commit: Option<Timestamp>,
    /// The clients' real times (`invoked_at` / `completed_at`), if recorded.
    pub real_time: Option<RealTime>,
}

impl KvHistory {
    /// Transactions per operation block (the unit a checker frees).
    pub const BLOCK: usize = 1 << 14;

    /// Largest integer key of table `kv` resolved through a direct table instead of hashing.
    const DIRECT_KEYS: i64 = 1 << 20;

    /// An empty history.
    pub fn new() -> Self {
        KvHistory { dict: History::new(), ..KvHistory::default() }
    }

    /// The interning tables: objects, values, sessions, tables, initial versions (no transactions).
    pub fn dict(&self) -> &History {
        &self.dict
    }

    /// Mutable interning tables, for readers that intern sessions and objects.
    pub fn dict_mut(&mut self) -> &mut History {
        &mut self.dict
    }

    /// Whether the reader that built this history skipped adapter facts (`meta` on a
    /// transaction or an operation), which checkers ignore and [`KvHistory::into_history`]
    /// cannot give back.
    pub fn skipped_meta(&self) -> bool {
        self.skipped_meta
    }

    /// Notes that a reader skipped adapter facts.
    pub(crate) fn note_skipped_meta(&mut self) {
        self.skipped_meta = true;
    }

    /// Number of transactions (retired ones included).
    pub fn len(&self) -> usize {
        self.base + self.names.len()
    }

    /// Whether there are no transactions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column index of `t`, or `None` when it was retired.
    #[inline]
    fn col(&self, t: TxnId) -> Option<usize> {
        t.index().checked_sub(self.base)
    }

    /// A retired transaction that was kept.
    ///
    /// # Panics
    /// If `t` was retired without being kept.
    fn kept(&self, t: TxnId) -> &KeptTxn {
        self.kept.get(&t.0).expect("a retired transaction that was not kept")
    }

    /// Stops indexing transaction names (a streaming checker of millions of transactions
    /// finds repeated ids itself): [`KvHistory::txn_by_name`] then finds nothing and
    /// [`KvHistory::push_txn`] no longer refuses a repeated name.
    pub fn drop_name_index(&mut self) {
        self.name_index = KeyIndex::default();
        self.unindexed = true;
    }

    /// The names column, as the name index compares through it.
    fn name_column(&self) -> NameColumn<'_> {
        NameColumn { names: &self.names, base: self.base }
    }

    /// Indexes `name` as transaction `id`'s, unless names are not indexed.
    ///
    /// # Errors
    /// The name back when a transaction already has it.
    fn index_name(&mut self, name: Scalar, id: TxnId) -> Result<Scalar, Scalar> {
        if !self.unindexed {
            if self.name_index.contains(&name, &self.name_column()) {
                return Err(name);
            }
            self.name_index.insert(&name, id.0);
        }
        Ok(name)
    }

    /// Retires the transactions before index `upto` from the columns (names, sessions,
    /// statuses, timestamps, real times), keeping those for which `keep` says so, so that a
    /// streaming checker holds only the transactions it still needs. Retiring does not free
    /// operations ([`KvHistory::free_block`] does). Accessors of a retired transaction that
    /// was not kept panic, and so does [`KvHistory::label_history`] then
    /// ([`KvHistory::label_history_of`] names only some).
    ///
    /// Retiring stops indexing names, as [`KvHistory::drop_name_index`] does (the index
    /// compares through the names column, which retired names leave; a streaming checker,
    /// the one caller, drops the index anyway).
    pub fn retire(&mut self, upto: usize, mut keep: impl FnMut(TxnId) -> bool) {
        let upto = upto.min(self.len());
        if upto <= self.base {
            return;
        }
        self.drop_name_index();
        let n = upto - self.base;
        for j in 0..n {
            let t = TxnId::from_index(self.base + j);
            if keep(t) {
                let fields = KeptTxn {
                    name: std::mem::replace(&mut self.names[j], Scalar::Null),
                    session: self.sessions[j],
                    status: self.status[j],
                    start: self.start.get(j),
                    commit: self.commit.get(j),
                    real_time: self.real_time.get(j),
                };
                self.kept.insert(t.0, fields);
            }
        }
        self.names.drain(..n);
        self.sessions.drain(..n);
        self.status.drain(..n);
        self.start.drain_front(n);
        self.commit.drain_front(n);
        self.real_time.drain_front(n);
        self.base = upto;
    }

    /// Forgets a retired transaction that was kept (the checker no longer names it).
    pub fn release(&mut self, t: TxnId) {
        self.kept.remove(&t.0);
    }

    /// Transactions whose fields are held: in the columns, plus retired ones kept.
    pub fn held_txns(&self) -> usize {
        self.names.len() + self.kept.len()
    }

    /// Operation blocks not freed.
    pub fn held_blocks(&self) -> usize {
        self.blocks.iter().flatten().count()
    }

    /// Sets the initial value of every object that has no explicit initial version
    /// (the Chronos tools' `--initial-value`): the paper's initial transaction writes it.
    pub fn set_default_initial(&mut self, value: Option<&Scalar>) {
        self.default_initial = value.map(|s| self.intern_scalar(s));
    }

    /// The default initial value, if any.
    pub fn default_initial(&self) -> Option<KvValue> {
        self.default_initial
    }

    /// The value `obj` holds before the first transaction.
    pub fn initial_value(&self, obj: ObjId) -> KvValue {
        match self.initial.get(&obj) {
            Some(v) => *v,
            None => self.default_initial.unwrap_or(KvValue::Absent),
        }
    }

    /// Records an explicit initial version of `obj`.
    pub fn set_initial(&mut self, obj: ObjId, value: KvValue) {
        let id = self.value_id(value);
        // Only a replaced entry is searched for: setting n new objects stays linear.
        if self.initial.insert(obj, value).is_some() {
            self.dict.initial.retain(|(o, _)| *o != obj);
        }
        self.dict.initial.push((obj, id));
    }

    /// Interns object `key` of table `kv`, with a direct table for small integer keys.
    #[inline]
    pub fn kv_object(&mut self, key: i64) -> ObjId {
        if (0..Self::DIRECT_KEYS).contains(&key) {
            let k = key as usize;
            if let Some(&id) = self.int_keys.get(k) {
                if id != u32::MAX {
                    return ObjId(id);
                }
            }
            let table = self.dict.intern_table(crate::KV_TABLE);
            let id = self.dict.intern_object(table, Scalar::Int(key));
            if self.int_keys.len() <= k {
                self.int_keys.resize((k + 1).max(1024).next_power_of_two(), u32::MAX);
            }
            self.int_keys[k] = id.0;
            return id;
        }
        let table = self.dict.intern_table(crate::KV_TABLE);
        self.dict.intern_object(table, Scalar::Int(key))
    }

    /// Interns a scalar as a [`KvValue`] (integers inline).
    #[inline]
    pub fn intern_scalar(&mut self, s: &Scalar) -> KvValue {
        match s {
            Scalar::Int(i) => KvValue::Int(*i),
            other => KvValue::Interned(self.dict.intern_value(Value::Scalar(other.clone()))),
        }
    }

    /// Interns any value as a [`KvValue`].
    pub fn intern_value(&mut self, v: Value) -> KvValue {
        match v {
            Value::Absent => KvValue::Absent,
            Value::Scalar(Scalar::Int(i)) => KvValue::Int(i),
            other => KvValue::Interned(self.dict.intern_value(other)),
        }
    }

    /// The [`KvValue`] of an interned [`ValueId`].
    pub fn kv_value(&self, id: ValueId) -> KvValue {
        match self.dict.value(id) {
            Value::Absent => KvValue::Absent,
            Value::Scalar(Scalar::Int(i)) => KvValue::Int(*i),
            _ => KvValue::Interned(id),
        }
    }

    /// The value a [`KvValue`] stands for.
    pub fn value(&self, v: KvValue) -> Value {
        match v {
            KvValue::Absent => Value::Absent,
            KvValue::Int(i) => Value::Scalar(Scalar::Int(i)),
            KvValue::Interned(id) => self.dict.value(id).clone(),
        }
    }

    /// The value as a scalar, if it is one (list elements, appended values).
    pub fn scalar(&self, v: KvValue) -> Option<Scalar> {
        match self.value(v) {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The interned [`ValueId`] of a [`KvValue`] (interning integers on demand).
    pub fn value_id(&mut self, v: KvValue) -> ValueId {
        match v {
            KvValue::Absent => ValueId::ABSENT,
            KvValue::Int(i) => self.dict.intern_value(Value::Scalar(Scalar::Int(i))),
            KvValue::Interned(id) => id,
        }
    }

    /// A human rendering of a value (`absent`, `5`, `"x"`, `[1, 2]`).
    pub fn value_label(&self, v: KvValue) -> String {
        match v {
            KvValue::Absent => "absent".to_string(),
            KvValue::Int(i) => i.to_string(),
            KvValue::Interned(id) => match self.dict.value(id) {
                Value::Scalar(s) => s.to_string(),
                Value::List(items) => {
                    let parts: Vec<String> = items.iter().map(|s| s.to_string()).collect();
                    format!("[{}]", parts.join(", "))
                }
                Value::Row(_) => format!("row #{}", id.0),
                Value::Absent => "absent".to_string(),
            },
        }
    }

    /// Appends a transaction and its operations.
    ///
    /// # Errors
    /// Returns the name back when a transaction already has it (unless names are not
    /// indexed, [`KvHistory::drop_name_index`]).
    pub fn push_txn(&mut self, fields: KvTxnFields, ops: &[KvOp]) -> Result<TxnId, Scalar> {
        let id = TxnId::from_index(self.len());
        let name = self.index_name(fields.name, id)?;
        self.names.push(name);
        self.sessions.push(fields.session);
        self.status.push(fields.status);
        let at = id.index() - self.base;
        self.start.push(at, fields.start);
        self.commit.push(at, fields.commit);
        self.real_time.push(at, fields.real_time);
        let b = id.index() / Self::BLOCK;
        if b == self.blocks.len() {
            let (sample_ops, sample_txns) = self.sample_before(ops.len());
            self.start_block(block_capacity(sample_ops, sample_txns));
        }
        let block = self.blocks[b].as_mut().expect("blocks are only freed by checkers, after loading");
        block.ops.extend_from_slice(ops);
        block.ends.push(u32::try_from(block.ops.len()).expect("fewer than 4 billion operations per block"));
        Ok(id)
    }

    /// The id of transaction `t` in the file.
    pub fn name(&self, t: TxnId) -> &Scalar {
        match self.col(t) {
            Some(i) => &self.names[i],
            None => &self.kept(t).name,
        }
    }

    /// The transaction named `name` (`None` when names are not indexed,
    /// [`KvHistory::drop_name_index`]).
    pub fn txn_by_name(&self, name: &Scalar) -> Option<TxnId> {
        self.name_index.get(name, &self.name_column()).map(TxnId)
    }

    /// A label such as `T17`, the same as [`History::txn_label`].
    pub fn txn_label(&self, t: TxnId) -> String {
        format!("T{}", self.name(t))
    }

    /// The session of `t`.
    #[inline]
    pub fn session(&self, t: TxnId) -> SessionId {
        match self.col(t) {
            Some(i) => self.sessions[i],
            None => self.kept(t).session,
        }
    }

    /// How `t` ended.
    #[inline]
    pub fn status(&self, t: TxnId) -> Status {
        match self.col(t) {
            Some(i) => self.status[i],
            None => self.kept(t).status,
        }
    }

    /// The start timestamp of `t`.
    #[inline]
    pub fn start_ts(&self, t: TxnId) -> Option<Timestamp> {
        match self.col(t) {
            Some(i) => self.start.get(i),
            None => self.kept(t).start,
        }
    }

    /// The commit timestamp of `t`.
    #[inline]
    pub fn commit_ts(&self, t: TxnId) -> Option<Timestamp> {
        match self.col(t) {
            Some(i) => self.commit.get(i),
            None => self.kept(t).commit,
        }
    }

    /// The operations of `t`, in program order.
    ///
    /// # Panics
    /// If a checker freed `t`'s block with [`KvHistory::free_block`].
    #[inline]
    pub fn ops(&self, t: TxnId) -> &[KvOp] {
        let i = t.index();
        let block = self.blocks[i / Self::BLOCK].as_ref().expect("operations of a freed block");
        let j = i % Self::BLOCK;
        let start = if j == 0 { 0 } else { block.ends[j - 1] as usize };
        &block.ops[start..block.ends[j] as usize]
    }

    /// Where `t`'s operation `op` is stored, for [`KvHistory::op_at`]: an index that
    /// finds it again in one memory access, without looking up where `t`'s operations start
    /// (an index of millions of writes compares through them: one cache miss instead of
    /// three).
    ///
    /// # Panics
    /// As [`KvHistory::ops`].
    #[inline]
    pub fn op_position(&self, t: TxnId, op: usize) -> u32 {
        let i = t.index();
        let block = self.blocks[i / Self::BLOCK].as_ref().expect("operations of a freed block");
        let j = i % Self::BLOCK;
        let start = if j == 0 { 0 } else { block.ends[j - 1] };
        start + op as u32
    }

    /// The operation of `t` at `position` ([`KvHistory::op_position`]).
    ///
    /// # Panics
    /// As [`KvHistory::ops`], or for a position that is not one of `t`'s block's.
    #[inline]
    pub fn op_at(&self, t: TxnId, position: u32) -> KvOp {
        let block = self.blocks[t.index() / Self::BLOCK].as_ref().expect("operations of a freed block");
        block.ops[position as usize]
    }

    /// The index in `t`'s operations of the one at `position` ([`KvHistory::op_position`]).
    #[inline]
    pub fn op_index(&self, t: TxnId, position: u32) -> u32 {
        position - self.op_position(t, 0)
    }

    /// Total number of operations (of blocks not freed).
    pub fn op_count(&self) -> usize {
        self.blocks.iter().flatten().map(|b| b.ops.len()).sum()
    }

    /// Frees the operations of block `b` (transactions `b * BLOCK ..`): a checker that is
    /// done with them calls this so memory falls as it proceeds.
    pub fn free_block(&mut self, b: usize) {
        if let Some(mut block) = self.blocks.get_mut(b).and_then(Option::take) {
            if self.spare_blocks.len() < SPARE_BLOCKS {
                block.ops.clear();
                block.ends.clear();
                self.spare_blocks.push(block);
            }
        }
    }

    /// The transactions a new block is sized from ([`block_capacity`]), its first one having
    /// `first` operations: the operations and transactions of the block before it if that is
    /// held, else that first transaction's.
    fn sample_before(&self, first: usize) -> (usize, usize) {
        match self.blocks.last() {
            Some(Some(last)) if !last.ends.is_empty() => (last.ops.len(), last.ends.len()),
            _ => (first, 1),
        }
    }

    /// Sizes the columns and operation blocks for exactly the transactions to come, whose
    /// operation counts `txn_ops` gives in order: a reader that knows them before it pushes
    /// the first (the Plume reader groups the whole file) holds no slack, where growing by
    /// doubling holds up to half again, and reserving blocks from the first transaction's
    /// count can hold far more. The reader must then push exactly these transactions.
    pub(crate) fn reserve_exact(&mut self, txn_ops: impl ExactSizeIterator<Item = usize>) {
        self.names.reserve_exact(txn_ops.len());
        self.sessions.reserve_exact(txn_ops.len());
        self.status.reserve_exact(txn_ops.len());
        let mut t = self.len();
        let (mut txns, mut ops) = (0, 0);
        for count in txn_ops {
            txns += 1;
            ops += count;
            t += 1;
            if t.is_multiple_of(Self::BLOCK) {
                self.reserve_block_exact((t - 1) / Self::BLOCK, txns, ops);
                (txns, ops) = (0, 0);
            }
        }
        if txns > 0 {
            self.reserve_block_exact((t - 1) / Self::BLOCK, txns, ops);
        }
    }

    /// Makes room in block `b` (the last one held or the next) for exactly `txns` more
    /// transactions of `ops` operations in all.
    fn reserve_block_exact(&mut self, b: usize, txns: usize, ops: usize) {
        if b == self.blocks.len() {
            self.blocks.push(Some(OpBlock { ops: Vec::new(), ends: Vec::new() }));
        }
        let block = self.blocks[b].as_mut().expect("blocks are only freed by checkers, after loading");
        block.ops.reserve_exact(ops);
        block.ends.reserve_exact(txns);
    }

    /// The bytes this history's transaction columns, name index, initial values and
    /// operation blocks have allocated (capacities, spare blocks included), not counting
    /// the dictionary ([`KvHistory::dict`]) nor the text of names: what the compact model
    /// costs beyond the interned tables, for memory reports and tests (issue 34).
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let blocks = self.blocks.iter().flatten().chain(&self.spare_blocks);
        let ops: usize = blocks.map(|b| bytes(&b.ops) + bytes(&b.ends)).sum();
        let kept = self.kept.capacity() * (std::mem::size_of::<(u32, KeptTxn)>() + 1);
        let initial = self.initial.capacity() * (std::mem::size_of::<(ObjId, KvValue)>() + 1);
        ops + bytes(&self.blocks)
            + bytes(&self.spare_blocks)
            + bytes(&self.names)
            + self.name_index.heap_bytes()
            + bytes(&self.sessions)
            + bytes(&self.status)
            + self.start.heap_bytes()
            + self.commit.heap_bytes()
            + self.real_time.heap_bytes()
            + bytes(&self.int_keys)
            + initial
            + kept
    }

    /// Starts the next operation block, room for `ops` operations: a spare one if there is
    /// one ([`KvHistory::free_block`]).
    pub(crate) fn start_block(&mut self, ops: usize) {
        let mut block = self.spare_blocks.pop().unwrap_or_default();
        block.ops.reserve(ops);
        block.ends.reserve(Self::BLOCK);
        self.blocks.push(Some(block));
    }

    /// Empties this history for a reader to fill again, keeping the memory of its columns
    /// and operation blocks (a reader thread reusing the chunk a checker has appended,
    /// [`KvHistory::append_from`]); whether names are indexed is kept too.
    pub(crate) fn clear_for_reuse(&mut self) {
        for b in 0..self.blocks.len() {
            self.free_block(b);
        }
        self.blocks.clear();
        self.dict = History::new();
        self.default_initial = None;
        self.initial.clear();
        self.names.clear();
        self.name_index.clear();
        self.sessions.clear();
        self.status.clear();
        self.start.clear();
        self.commit.clear();
        self.real_time.clear();
        self.int_keys.clear();
        self.skipped_meta = false;
        self.base = 0;
        self.kept.clear();
    }

    /// The clients' real times of transaction `t`, if recorded.
    pub fn real_time(&self, t: TxnId) -> Option<RealTime> {
        match self.col(t) {
            Some(i) => self.real_time.get(i),
            None => self.kept(t).real_time,
        }
    }

    /// Every transaction id in file order, retired ones included (their accessors panic
    /// unless they were kept, see [`KvHistory::retire`]).
    pub fn txn_ids(&self) -> impl Iterator<Item = TxnId> {
        (0..self.len()).map(TxnId::from_index)
    }

    /// A [`History`] with this one's interning tables and transactions (names, sessions,
    /// statuses, timestamps) but no operations: what reports and renderers need, built
    /// after a checker freed the operations.
    pub fn label_history(&self) -> History {
        self.label_history_of(self.txn_ids())
    }

    /// Like [`KvHistory::label_history`] but with only the transactions `txns` (in that
    /// order, without repeats), the `i`-th of them as `TxnId(i)`: what a report naming
    /// only these needs once its ids are renumbered likewise.
    pub fn label_history_of(&self, txns: impl IntoIterator<Item = TxnId>) -> History {
        let mut h = self.dict.without_txns();
        for t in txns {
            let mut txn = crate::Transaction::new(self.name(t).clone(), self.session(t), Vec::new());
            txn.status = self.status(t);
            txn.set_start_ts(self.start_ts(t));
            txn.set_commit_ts(self.commit_ts(t));
            txn.set_real_time(self.real_time(t));
            h.push_txn(txn).expect("a KvHistory has unique transaction names");
        }
        h
    }

    /// Converts a general history: every operation must be an item read, write or append.
    /// The columns and operation blocks are sized exactly for its transactions.
    ///
    /// # Errors
    /// [`FormatError::Unsupported`] naming the first predicate or aggregate operation.
    pub fn from_history(h: &History) -> Result<KvHistory, FormatError> {
        let mut kv = KvHistory { dict: h.without_txns(), ..KvHistory::default() };
        for &(obj, value) in &h.initial {
            let v = kv.kv_value(value);
            kv.initial.insert(obj, v);
        }
        kv.reserve_exact(h.txns.iter().map(|t| t.ops.len()));
        let mut ops = Vec::new();
        for t in h.txn_ids() {
            let txn = h.txn(t);
            ops.clear();
            for (i, op) in txn.ops.iter().enumerate() {
                ops.push(match op {
                    Op::Read { obj, value } => KvOp::new(KvOpKind::Read, *obj, kv.kv_value(*value)),
                    Op::Write { obj, value } => KvOp::new(KvOpKind::Write, *obj, kv.kv_value(*value)),
                    Op::Append { obj, element } => {
                        let v = kv.intern_scalar(element);
                        KvOp::new(KvOpKind::Append, *obj, v)
                    }
                    _ => {
                        return Err(FormatError::Unsupported {
                            format: "a key-value history",
                            message: format!(
                                "{} ops[{i}] is a predicate operation; timestamp checkers handle item \
                                 reads, writes and list appends (use --checker emme or enne)",
                                h.txn_label(t)
                            ),
                        })
                    }
                });
            }
            let fields = KvTxnFields {
                name: txn.name.clone(),
                session: txn.session,
                status: txn.status,
                start: txn.start_ts(),
                commit: txn.commit_ts(),
                real_time: txn.real_time(),
            };
            kv.push_txn(fields, &ops).expect("a History has unique transaction names");
        }
        Ok(kv)
    }

    /// Converts into a general [`History`] (for other checkers, renderers and writers);
    /// a default initial value becomes an explicit initial version of every object.
    ///
    /// Values are interned in the order the general reader ([`crate::v1::read_history`])
    /// interns them: the initial versions, then the value of each read and write in file
    /// order (appended elements are not interned). A history read by [`read_kv_v1`] and
    /// converted here therefore has the same value ids as the general reader gives it.
    ///
    /// # Panics
    /// If a checker freed a block of operations.
    pub fn into_history(mut self) -> History {
        // Transactions go straight into the history, reserved at its exact size, and each
        // block of operations is freed once converted, so the history's operations reuse
        // its memory (a doubling transaction vector and every block held to the end cost
        // page faults: issue 34).
        let mut built = HistoryBuilder::default();
        built.reserve_exact(self.len());
        for t in self.txn_ids() {
            let (b, i) = (t.index() / Self::BLOCK, t.index());
            if i % Self::BLOCK == 0 && b > 0 {
                self.blocks[b - 1] = None;
            }
            let fields = KvTxnFields {
                name: std::mem::replace(&mut self.names[i], Scalar::Null),
                session: self.sessions[i],
                status: self.status[i],
                start: self.start.get(i),
                commit: self.commit.get(i),
                real_time: self.real_time.get(i),
            };
            built.push(&self.dict, fields, self.ops(t)).expect("a KvHistory has unique transaction names");
        }
        built.finish(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_pack_into_sixteen_bytes_and_round_trip() {
        assert_eq!(std::mem::size_of::<KvOp>(), 16);
        for v in [KvValue::Absent, KvValue::Int(-7), KvValue::Int(i64::MIN), KvValue::Interned(ValueId(9))] {
            for k in [KvOpKind::Read, KvOpKind::Write, KvOpKind::Append] {
                let op = KvOp::new(k, ObjId(3), v);
                assert_eq!((op.kind(), op.obj(), op.value()), (k, ObjId(3), v));
            }
        }
    }

    #[test]
    fn converts_both_ways_and_frees_blocks() {
        let text = r#"{"id":1,"session":"a","start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":"v"},{"f":"append","key":3,"value":4}]}
{"id":"2","session":"b","status":"aborted","ops":[{"f":"r","key":"x","value":null},{"f":"r","key":3,"value":[4]}]}"#;
        let h = crate::v1::read_history(text.as_bytes()).unwrap();
        let mut kv = KvHistory::from_history(&h).unwrap();
        assert_eq!(kv.len(), 2);
        assert_eq!(kv.ops(TxnId(0))[1].kind(), KvOpKind::Append);
        assert_eq!(kv.txn_label(TxnId(1)), "T\"2\"");
        let back = kv.clone().into_history();
        let mut a = Vec::new();
        let mut b = Vec::new();
        crate::v1::write_history(&h, &mut a).unwrap();
        crate::v1::write_history(&back, &mut b).unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        kv.free_block(0);
        assert_eq!(kv.op_count(), 0);
        let labels = kv.label_history();
        assert_eq!((labels.txn_label(TxnId(1)), labels.txns[0].ops.len()), ("T\"2\"".to_string(), 0));
    }

    #[test]
    fn retired_transactions_leave_the_columns_unless_kept() {
        let mut text = String::new();
        for i in 0..10 {
            text.push_str(&format!(
                "{{\"id\":{i},\"session\":{},\"start_ts\":{i},\"commit_ts\":{},\"ops\":[]}}\n",
                i % 2,
                i + 1
            ));
        }
        let mut kv = crate::read_kv_v1(text.as_bytes()).unwrap();
        let before = kv.label_history_of([TxnId(3), TxnId(8)]);
        assert_eq!(kv.txn_by_name(&Scalar::Int(8)), Some(TxnId(8)));
        kv.retire(6, |t| t.0 == 3);
        assert_eq!(kv.txn_by_name(&Scalar::Int(8)), None, "retiring stops indexing names");
        assert_eq!((kv.len(), kv.held_txns()), (10, 5));
        assert_eq!(kv.txn_ids().collect::<Vec<_>>(), (0..10).map(TxnId).collect::<Vec<_>>());
        assert_eq!(kv.txn_label(TxnId(3)), "T3");
        assert_eq!(
            (kv.start_ts(TxnId(3)), kv.commit_ts(TxnId(7))),
            (Some(Timestamp::new(3)), Some(Timestamp::new(8)))
        );
        assert_eq!(kv.session(TxnId(8)), kv.session(TxnId(6)));
        let after = kv.label_history_of([TxnId(3), TxnId(8)]);
        assert_eq!(format!("{:?}", before.txns), format!("{:?}", after.txns));
        kv.release(TxnId(3));
        assert_eq!(kv.held_txns(), 4);
        let fields = KvTxnFields {
            name: Scalar::Int(10),
            session: kv.session(TxnId(9)),
            status: Status::Committed,
            start: None,
            commit: None,
            real_time: None,
        };
        assert_eq!(kv.push_txn(fields, &[]), Ok(TxnId(10)));
        assert_eq!(kv.txn_label(TxnId(10)), "T10");
    }

    #[test]
    fn timestamps_are_held_only_from_the_first_transaction_that_has_one() {
        let mut kv = KvHistory::new();
        let session = kv.dict_mut().intern_session(Scalar::Int(0));
        let fields = |i: i64, ts: Option<u64>| KvTxnFields {
            name: Scalar::Int(i),
            session,
            status: Status::Committed,
            start: ts.map(Timestamp::new),
            commit: ts.map(|t| Timestamp::new(t + 1)),
            real_time: None,
        };
        for i in 0..3 {
            kv.push_txn(fields(i, None), &[]).unwrap();
        }
        assert_eq!((kv.start.heap_bytes(), kv.commit.heap_bytes()), (0, 0));
        kv.push_txn(fields(3, Some(10)), &[]).unwrap();
        kv.push_txn(fields(4, None), &[]).unwrap();
        assert_eq!((kv.start_ts(TxnId(2)), kv.commit_ts(TxnId(4))), (None, None));
        assert_eq!(
            (kv.start_ts(TxnId(3)), kv.commit_ts(TxnId(3))),
            (Some(Timestamp::new(10)), Some(Timestamp::new(11)))
        );
        let labels = kv.label_history();
        assert_eq!((labels.txns[3].start_ts(), labels.txns[1].commit_ts()), (Some(Timestamp::new(10)), None));
        kv.retire(4, |t| t.0 == 3);
        assert_eq!((kv.start_ts(TxnId(3)), kv.start_ts(TxnId(4))), (Some(Timestamp::new(10)), None));
        kv.push_txn(fields(5, Some(20)), &[]).unwrap();
        assert_eq!(kv.commit_ts(TxnId(5)), Some(Timestamp::new(21)));
        let back = KvHistory::from_history(&labels).unwrap().into_history();
        assert_eq!(format!("{:?}", back.txns), format!("{:?}", labels.txns));
    }

    #[test]
    fn names_are_indexed_without_a_copy_and_repeats_refused() {
        let mut kv = KvHistory::new();
        let session = kv.dict_mut().intern_session(Scalar::Int(0));
        let fields = |name: Scalar| KvTxnFields {
            name,
            session,
            status: Status::Committed,
            start: None,
            commit: None,
            real_time: None,
        };
        let names =
            [Scalar::Int(5), Scalar::Text("a".into()), Scalar::Int(-3), Scalar::Int(1 << 40), Scalar::Null];
        for (i, name) in names.iter().enumerate() {
            assert_eq!(kv.push_txn(fields(name.clone()), &[]), Ok(TxnId::from_index(i)));
        }
        for (i, name) in names.iter().enumerate() {
            assert_eq!(kv.txn_by_name(name), Some(TxnId::from_index(i)), "{name:?}");
            assert_eq!(kv.push_txn(fields(name.clone()), &[]), Err(name.clone()));
        }
        assert_eq!((kv.len(), kv.txn_by_name(&Scalar::Text("b".into()))), (names.len(), None));
        kv.drop_name_index();
        assert_eq!(kv.txn_by_name(&Scalar::Int(5)), None);
        assert_eq!(kv.push_txn(fields(Scalar::Int(5)), &[]), Ok(TxnId::from_index(names.len())));
    }

    /// A history of one session whose transaction `i` (named `i`) has `ops[i]` writes.
    fn with_op_counts(kv: &mut KvHistory, counts: impl IntoIterator<Item = usize>) {
        let session = kv.dict_mut().intern_session(Scalar::Int(0));
        let obj = kv.kv_object(1);
        for count in counts {
            let fields = KvTxnFields {
                name: Scalar::Int(kv.len() as i64),
                session,
                status: Status::Committed,
                start: None,
                commit: None,
                real_time: None,
            };
            let ops = vec![KvOp::new(KvOpKind::Write, obj, KvValue::Int(count as i64)); count];
            kv.push_txn(fields, &ops).unwrap();
        }
    }

    #[test]
    fn a_huge_first_transaction_does_not_size_its_block() {
        let mut kv = KvHistory::new();
        with_op_counts(&mut kv, std::iter::once(22_000).chain(std::iter::repeat_n(10, 100)));
        let reserved = kv.blocks[0].as_ref().unwrap().ops.capacity();
        assert_eq!(reserved, block_capacity(MAX_GUESSED_OPS_PER_TXN, 1));
        assert!(kv.heap_bytes() < 6 << 20, "{} bytes", kv.heap_bytes());
        // A full block's average sizes the next block, however large.
        let mut kv = KvHistory::new();
        with_op_counts(&mut kv, std::iter::repeat_n(40, KvHistory::BLOCK + 1));
        assert_eq!(
            kv.blocks[1].as_ref().unwrap().ops.capacity(),
            block_capacity(40 * KvHistory::BLOCK, KvHistory::BLOCK)
        );
        assert_eq!(kv.ops(TxnId::from_index(KvHistory::BLOCK)).len(), 40);
    }

    #[test]
    fn reserved_exactly_the_columns_and_blocks_hold_no_slack() {
        let counts: Vec<usize> = (0..KvHistory::BLOCK + 300).map(|i| i % 7).collect();
        let mut kv = KvHistory::new();
        with_op_counts(&mut kv, counts[..5].iter().copied());
        let rest = &counts[5..];
        kv.reserve_exact(rest.iter().copied());
        with_op_counts(&mut kv, rest.iter().copied());
        assert_eq!(kv.len(), counts.len());
        assert_eq!(
            (kv.names.capacity(), kv.sessions.capacity(), kv.status.capacity()),
            (kv.len(), kv.len(), kv.len())
        );
        for block in kv.blocks.iter().flatten() {
            assert_eq!((block.ops.capacity(), block.ends.capacity()), (block.ops.len(), block.ends.len()));
        }
        let in_second: usize = counts[KvHistory::BLOCK..].iter().sum();
        assert_eq!(kv.blocks[1].as_ref().unwrap().ops.len(), in_second);
        assert_eq!(kv.op_count(), counts.iter().sum::<usize>());
    }

    #[test]
    fn an_operation_is_found_again_at_its_position_in_every_block() {
        let mut text = String::new();
        for i in 0..KvHistory::BLOCK + 40 {
            let ops: Vec<String> =
                (0..i % 4).map(|k| format!(r#"{{"f":"w","key":{k},"value":{i}}}"#)).collect();
            text.push_str(&format!("{{\"id\":{i},\"session\":1,\"ops\":[{}]}}\n", ops.join(",")));
        }
        let kv = crate::read_kv_v1(text.as_bytes()).unwrap();
        for t in kv.txn_ids() {
            for (i, op) in kv.ops(t).iter().enumerate() {
                let at = kv.op_position(t, i);
                assert_eq!((kv.op_at(t, at), kv.op_index(t, at)), (*op, i as u32), "{t:?} op {i}");
            }
        }
    }

    #[test]
    fn predicate_operations_are_refused_by_name() {
        let text = r#"{"id":1,"session":1,"ops":[{"f":"select","table":"t","where":"c > 1","rows":[]}]}"#;
        let h = crate::v1::read_history(text.as_bytes()).unwrap();
        let err = KvHistory::from_history(&h).unwrap_err().to_string();
        assert!(err.contains("T1 ops[0]"), "{err}");
    }
}
