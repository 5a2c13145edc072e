//! The history model: transactions of operations over interned objects and values.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::intern::{row_hash, KeyIndex, Keys};
use crate::{ColId, ObjId, PredId, Row, Scalar, SessionId, TableId, Timestamp, TxnId, Value, ValueId};

/// The name of the key-value store's table, and of the default table.
pub const KV_TABLE: &str = "kv";

/// How a transaction ended, as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Status {
    /// The database acknowledged the commit.
    #[default]
    Committed,
    /// The transaction rolled back (by the client or the database).
    Aborted,
    /// The client lost the answer: the commit may or may not have happened.
    Unknown,
}

impl Status {
    /// The v1 spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Committed => "committed",
            Status::Aborted => "aborted",
            Status::Unknown => "unknown",
        }
    }
}

/// A row in a predicate operation's result: the object and the version it returned or installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResultRow {
    /// The row's object.
    pub obj: ObjId,
    /// The row as returned (select) or as installed (update); [`ValueId::ABSENT`] for delete.
    pub value: ValueId,
}

/// One operation of a transaction, in program order.
///
/// Histories hold millions of these, so the predicate variants keep their rows and
/// assignments in boxed slices (16 bytes, not a vector's 24): an `Op` is 40 bytes, not 56
/// (docs/PERFORMANCE.md, "Where the bytes go"; a compile-time assertion holds it there).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Item read of `obj`; `value` is what the read returned ([`ValueId::ABSENT`]: no row).
    Read {
        /// The object read.
        obj: ObjId,
        /// The value returned.
        value: ValueId,
    },
    /// Item write (insert, update, upsert); [`ValueId::ABSENT`] deletes.
    Write {
        /// The object written.
        obj: ObjId,
        /// The value installed.
        value: ValueId,
    },
    /// Append of one scalar to the list at `obj` (Elle list-append).
    Append {
        /// The list object.
        obj: ObjId,
        /// The appended element.
        element: Scalar,
    },
    /// `SELECT * FROM table WHERE predicate`: the full result set, order ignored.
    Select {
        /// The predicate (which names its table).
        predicate: PredId,
        /// The rows returned.
        rows: Box<[ResultRow]>,
    },
    /// `UPDATE table SET ... WHERE predicate`: `rows` are the new versions installed.
    Update {
        /// The predicate (which names its table).
        predicate: PredId,
        /// The assignments, by column: a constant, or an expression over the replaced row.
        set: Box<[(ColId, Assign)]>,
        /// The new versions installed.
        rows: Box<[ResultRow]>,
    },
    /// `DELETE FROM table WHERE predicate`: `rows` are the deleted objects (value absent).
    Delete {
        /// The predicate (which names its table).
        predicate: PredId,
        /// The deleted rows.
        rows: Box<[ResultRow]>,
    },
    /// `SELECT function(column) FROM table WHERE predicate` (project extension `aggregate`):
    /// a predicate read that returns one scalar instead of rows.
    Aggregate {
        /// The predicate (which names its table).
        predicate: PredId,
        /// The aggregate function.
        function: AggregateFn,
        /// The aggregated column (`None` for `count(*)`).
        column: Option<ColId>,
        /// What the database returned (NULL for min/max/sum over no rows).
        result: Scalar,
    },
}

/// The value an update assigns to one column (project extension: expression assignments).
#[derive(Clone, Debug, PartialEq)]
pub enum Assign {
    /// A constant (`"set":{"v":77}`): the same value on every row.
    Const(Scalar),
    /// A SQL expression over the row version the update replaced (`"set":{"n":{"expr":"n + 3"}}`),
    /// evaluated by the oracle; boxed so an assignment stays a [`Scalar`]'s size.
    Expr(Box<SetExpr>),
}

impl Assign {
    /// The constant, if this assigns one.
    pub fn constant(&self) -> Option<&Scalar> {
        match self {
            Assign::Const(s) => Some(s),
            Assign::Expr(_) => None,
        }
    }

    /// The expression, if this assigns one.
    pub fn expr(&self) -> Option<&SetExpr> {
        match self {
            Assign::Const(_) => None,
            Assign::Expr(e) => Some(e),
        }
    }
}

/// An assignment's SQL expression, as `UPDATE ... SET c = <sql>` or an upsert's
/// `DO UPDATE SET c = <sql>` wrote it: it names the replaced row's columns (`n`, or
/// `items.n`) and, in an upsert, the proposed row's (`excluded.n`).
#[derive(Clone, Debug, PartialEq)]
pub struct SetExpr {
    /// The expression text.
    pub sql: Box<str>,
    /// The row the statement proposed (an upsert's `EXCLUDED`), as a value of the update's
    /// table; `None` when the statement proposed none (the expression may not name it).
    pub excluded: Option<ValueId>,
}

/// An aggregate function over the rows a predicate matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggregateFn {
    /// Smallest non-NULL value, NULL when there is none.
    Min,
    /// Largest non-NULL value, NULL when there is none.
    Max,
    /// Number of matching rows (`count(*)`) or of non-NULL values (`count(column)`).
    Count,
    /// Sum of the non-NULL values, NULL when there is none.
    Sum,
}

impl AggregateFn {
    /// The v1 spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregateFn::Min => "min",
            AggregateFn::Max => "max",
            AggregateFn::Count => "count",
            AggregateFn::Sum => "sum",
        }
    }

    /// Parses the v1 spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "min" => AggregateFn::Min,
            "max" => AggregateFn::Max,
            "count" => AggregateFn::Count,
            "sum" => AggregateFn::Sum,
            _ => return None,
        })
    }
}

/// The size of an [`Op`] in bytes; a larger variant would fail the build here.
const OP_SIZE: usize = 40;
const _: () = assert!(std::mem::size_of::<Op>() == OP_SIZE, "an Op grew: box the new variant's payload");

impl Op {
    /// The predicate of a select, update, delete or aggregate.
    pub fn predicate(&self) -> Option<PredId> {
        match self {
            Op::Select { predicate, .. }
            | Op::Update { predicate, .. }
            | Op::Delete { predicate, .. }
            | Op::Aggregate { predicate, .. } => Some(*predicate),
            _ => None,
        }
    }

    /// Whether this is an update that assigns at least one expression (project extension).
    pub fn has_expressions(&self) -> bool {
        matches!(self, Op::Update { set, .. } if set.iter().any(|(_, a)| matches!(a, Assign::Expr(_))))
    }

    /// Whether the operation installs versions (write, append, predicate update or delete).
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. })
    }
}

/// One client transaction.
///
/// What most transactions carry (name, session, status, operations, and the database's
/// timestamps, which every adapter and `isocert gen` record) is held inline, the
/// timestamps without an `Option` each (a flag says which are set); what only some
/// histories record (real time, adapter facts) sits behind one box. Both are read and set
/// through accessors. A transaction is 96 bytes instead of 168 (docs/PERFORMANCE.md,
/// "Session 17": 70 MB at a million transactions); boxing the timestamps too (64 bytes)
/// cost a timestamped history an allocation per transaction and 8 MB more at 100,000.
#[derive(Clone, Debug, PartialEq)]
pub struct Transaction {
    /// The id it has in the file (integer or string; `17` and `"17"` differ).
    pub name: Scalar,
    /// The session (connection) that ran it.
    pub session: SessionId,
    /// How it ended.
    pub status: Status,
    /// Its operations in program order.
    pub ops: Vec<Op>,
    /// Which of `start` and `commit` are set ([`HAS_START`], [`HAS_COMMIT`]).
    timestamps: u8,
    /// The start timestamp if [`HAS_START`] is set, else the default (so that equal
    /// transactions compare equal).
    start: Timestamp,
    /// The commit timestamp if [`HAS_COMMIT`] is set, else the default.
    commit: Timestamp,
    /// The rarely recorded facts; `None` whenever every one of them is unset, so that two
    /// transactions with the same facts compare equal however they were set.
    extra: Option<Box<TxnExtra>>,
}

/// [`Transaction::timestamps`]: the start timestamp is set.
const HAS_START: u8 = 1;
/// [`Transaction::timestamps`]: the commit timestamp is set.
const HAS_COMMIT: u8 = 2;

/// The facts of a [`Transaction`] only some histories record.
#[derive(Clone, Debug, Default, PartialEq)]
struct TxnExtra {
    /// Adapter facts (project extension `meta`): opaque to checkers, read by recovery.
    meta: Option<serde_json::Value>,
    /// Per-operation adapter facts (project extension: `meta` on an op), by op index.
    op_meta: Vec<(u32, serde_json::Value)>,
    /// When the client invoked it and saw its outcome, if recorded.
    real_time: Option<RealTime>,
}

impl TxnExtra {
    fn is_empty(&self) -> bool {
        self.meta.is_none() && self.op_meta.is_empty() && self.real_time.is_none()
    }
}

/// The size of a [`Transaction`] in bytes; a new inline field would fail the build here
/// (rarely set facts belong in its boxed extension).
const TRANSACTION_SIZE: usize = 96;
const _: () = assert!(
    std::mem::size_of::<Transaction>() == TRANSACTION_SIZE,
    "a Transaction grew: put a rarely set field behind its box"
);

/// The client's view of a transaction's duration (project extension `invoked_at` /
/// `completed_at`): it was invoked at `invoked_at` and its outcome was known at
/// `completed_at`, both on one clock shared by every session of the file (`isocert run`
/// writes nanoseconds since the run started; Jepsen's `:time` is the same). One transaction
/// precedes another in real time when it completed strictly before the other was invoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RealTime {
    /// When the client sent the transaction's first statement.
    pub invoked_at: i64,
    /// When the client received its commit's (or abort's) answer; never before `invoked_at`.
    pub completed_at: i64,
}

impl RealTime {
    /// Whether a transaction of this span precedes one of `later` in real time.
    pub fn precedes(&self, later: &RealTime) -> bool {
        self.completed_at < later.invoked_at
    }
}

impl Transaction {
    /// A committed transaction with no timestamps and no adapter facts.
    pub fn new(name: Scalar, session: SessionId, ops: Vec<Op>) -> Self {
        Transaction {
            name,
            session,
            status: Status::Committed,
            ops,
            timestamps: 0,
            start: Timestamp::default(),
            commit: Timestamp::default(),
            extra: None,
        }
    }

    /// Whether the transaction committed.
    pub fn is_committed(&self) -> bool {
        self.status == Status::Committed
    }

    /// Start timestamp reported by the database, if any.
    pub fn start_ts(&self) -> Option<Timestamp> {
        (self.timestamps & HAS_START != 0).then_some(self.start)
    }

    /// Commit timestamp reported by the database, if any.
    pub fn commit_ts(&self) -> Option<Timestamp> {
        (self.timestamps & HAS_COMMIT != 0).then_some(self.commit)
    }

    /// When the client invoked it and saw its outcome, if recorded (project extension
    /// `invoked_at` / `completed_at`): the real-time order strict serializability keeps.
    pub fn real_time(&self) -> Option<RealTime> {
        self.extra.as_ref().and_then(|e| e.real_time)
    }

    /// Adapter facts (project extension `meta`): opaque to checkers, read by recovery.
    pub fn meta(&self) -> Option<&serde_json::Value> {
        self.extra.as_ref().and_then(|e| e.meta.as_ref())
    }

    /// Per-operation adapter facts (project extension: `meta` on an op), by op index, in
    /// the order they were recorded.
    pub fn op_metas(&self) -> &[(u32, serde_json::Value)] {
        self.extra.as_ref().map_or(&[], |e| e.op_meta.as_slice())
    }

    /// The adapter facts recorded for operation `op`, if any.
    pub fn op_meta(&self, op: usize) -> Option<&serde_json::Value> {
        self.op_metas().iter().find(|(i, _)| *i as usize == op).map(|(_, m)| m)
    }

    /// Sets (or clears) the start timestamp.
    pub fn set_start_ts(&mut self, ts: Option<Timestamp>) {
        self.start = ts.unwrap_or_default();
        self.timestamps = (self.timestamps & !HAS_START) | if ts.is_some() { HAS_START } else { 0 };
    }

    /// Sets (or clears) the commit timestamp.
    pub fn set_commit_ts(&mut self, ts: Option<Timestamp>) {
        self.commit = ts.unwrap_or_default();
        self.timestamps = (self.timestamps & !HAS_COMMIT) | if ts.is_some() { HAS_COMMIT } else { 0 };
    }

    /// Sets (or clears) the real-time span.
    pub fn set_real_time(&mut self, span: Option<RealTime>) {
        self.update(span.is_some(), |e| e.real_time = span);
    }

    /// Sets (or clears) the adapter facts.
    pub fn set_meta(&mut self, meta: Option<serde_json::Value>) {
        self.update(meta.is_some(), |e| e.meta = meta);
    }

    /// Replaces the per-operation adapter facts.
    pub fn set_op_metas(&mut self, op_meta: Vec<(u32, serde_json::Value)>) {
        self.update(!op_meta.is_empty(), |e| e.op_meta = op_meta);
    }

    /// Records adapter facts for operation `op` (after those recorded before).
    pub fn push_op_meta(&mut self, op: u32, meta: serde_json::Value) {
        self.update(true, |e| e.op_meta.push((op, meta)));
    }

    /// Changes the extension with `change` (`sets`: whether it sets something), allocating
    /// it only when something is set and dropping it when nothing is left.
    fn update(&mut self, sets: bool, change: impl FnOnce(&mut TxnExtra)) {
        if !sets && self.extra.is_none() {
            return;
        }
        let mut extra = self.extra.take().unwrap_or_default();
        change(&mut extra);
        if !extra.is_empty() {
            self.extra = Some(extra);
        }
    }
}

/// A table and the columns its rows have used, in first-seen order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The table name.
    pub name: Box<str>,
    /// Column names, indexed by [`ColId`]. Table `kv` has exactly `key` and `value`.
    pub columns: Vec<Box<str>>,
}

impl Table {
    /// The id of column `name`, if the table has it.
    pub fn column(&self, name: &str) -> Option<ColId> {
        self.columns.iter().position(|c| &**c == name).map(ColId::from_index)
    }

    /// Whether this is the key-value store, whose values are plain scalars.
    pub fn is_kv(&self) -> bool {
        &*self.name == KV_TABLE
    }
}

/// An object: a row identified by table and primary key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// The table.
    pub table: TableId,
    /// The primary key (integer or text).
    pub key: Scalar,
}

/// The hash a predicate is filed under in the history's predicate index.
fn predicate_hash(table: TableId, sql: &str) -> u64 {
    FxBuildHasher.hash_one((table, sql))
}

/// A distinct predicate: `where` text over one table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Predicate {
    /// The table it ranges over.
    pub table: TableId,
    /// The SQL boolean expression, as written.
    pub sql: Box<str>,
}

/// The SQL dialect the history's predicates are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// PostgreSQL (the default): C-collation text, strict types.
    #[default]
    Postgres,
    /// MySQL/TiDB: case-insensitive default collation, implicit conversions.
    Mysql,
    /// MongoDB: each predicate text is a query filter document in (relaxed) extended JSON,
    /// such as `{"value": {"$gte": 2, "$lt": 5}}`, with MongoDB's comparison order and
    /// type bracketing.
    Mongodb,
    /// Dgraph: each predicate is a DQL filter (`ge(value, 3) AND lt(value, 9)`) over the
    /// row's columns; a node without a column's predicate matches no function of it.
    Dgraph,
}

impl Dialect {
    /// The header spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Postgres => "postgres",
            Dialect::Mysql => "mysql",
            Dialect::Mongodb => "mongodb",
            Dialect::Dgraph => "dgraph",
        }
    }
}

/// The header's spellings, with the aliases `postgresql` and `tidb` (which speaks MySQL's
/// dialect); both v1 readers parse `dialect` with it.
impl std::str::FromStr for Dialect {
    type Err = crate::UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "postgres" | "postgresql" => Dialect::Postgres,
            "mysql" | "tidb" => Dialect::Mysql,
            "mongodb" => Dialect::Mongodb,
            "dgraph" => Dialect::Dgraph,
            _ => {
                return Err(crate::UnknownName {
                    what: "dialect",
                    given: s.to_string(),
                    choices: "postgres, mysql, mongodb or dgraph",
                })
            }
        })
    }
}

/// The transactions' names, as the keys of the transaction index.
struct TxnNames<'a>(&'a [Transaction]);

impl Keys<Scalar> for TxnNames<'_> {
    fn key(&self, id: u32) -> &Scalar {
        &self.0[id as usize].name
    }
}

/// A whole history: interned tables, objects, values, predicates and sessions, plus the
/// transactions in file order (which respects session order).
#[derive(Clone, Debug, Default)]
pub struct History {
    /// The predicates' SQL dialect.
    pub dialect: Dialect,
    /// Versions that exist before the first transaction (the implicit initial transaction).
    pub initial: Vec<(ObjId, ValueId)>,
    /// Facts an adapter recorded about the history as a whole (the header's `meta`), e.g.
    /// PostgreSQL's `initial_xids`: the writers of the initial versions its client read,
    /// which `isocert serve` shows rather than hides (docs/POSTGRES.md). Checkers ignore it.
    pub meta: Option<Box<serde_json::Value>>,
    /// Whether the commit timestamps are the serialization order of a serializable run (the
    /// header's `serial_order`): what Chronos and Aion may conclude at serializability.
    pub serial_order: crate::SerialOrder,
    /// The level the run that recorded the history checks it at (the header's
    /// `isolation`), which `isocert check` checks when no `--isolation` is given.
    pub isolation: Option<crate::IsolationLevel>,
    /// What the database that ran the history documents for its statements beyond Adya's
    /// level (the header's `promises`); `None` when nothing is declared.
    pub promises: Option<crate::Promises>,
    /// Transactions in file order; a [`TxnId`] indexes this vector.
    pub txns: Vec<Transaction>,
    tables: Vec<Table>,
    objects: Vec<ObjectKey>,
    object_index: FxHashMap<ObjectKey, ObjId>,
    values: Vec<Value>,
    value_index: KeyIndex<Value>,
    predicates: Vec<Predicate>,
    /// The id of each predicate, compared through `predicates` ([`predicate_hash`]).
    predicate_index: HashTable<u32>,
    sessions: Vec<Scalar>,
    session_index: FxHashMap<Scalar, SessionId>,
    txn_index: KeyIndex<Scalar>,
    /// The buffer [`History::intern_row`] lays a row out in (empty between calls).
    row_buffer: Vec<Scalar>,
}

impl History {
    /// An empty history (the value table already holds [`Value::Absent`]).
    pub fn new() -> Self {
        let mut h = History::default();
        h.intern_value(Value::Absent);
        h
    }

    /// A copy of the interning tables (tables, objects, values, predicates, sessions),
    /// the initial versions and the dialect, without the transactions: the dictionary a
    /// compact history ([`crate::KvHistory`]) shares with this one.
    pub fn without_txns(&self) -> History {
        History {
            dialect: self.dialect,
            initial: self.initial.clone(),
            meta: self.meta.clone(),
            serial_order: self.serial_order,
            isolation: self.isolation,
            promises: self.promises.clone(),
            txns: Vec::new(),
            tables: self.tables.clone(),
            objects: self.objects.clone(),
            object_index: self.object_index.clone(),
            values: self.values.clone(),
            value_index: self.value_index.clone(),
            predicates: self.predicates.clone(),
            predicate_index: self.predicate_index.clone(),
            sessions: self.sessions.clone(),
            session_index: self.session_index.clone(),
            txn_index: KeyIndex::default(),
            row_buffer: Vec::new(),
        }
    }

    /// Interns a table by name; table `kv` gets the columns `key` and `value`.
    pub fn intern_table(&mut self, name: &str) -> TableId {
        if let Some(i) = self.tables.iter().position(|t| &*t.name == name) {
            return TableId::from_index(i);
        }
        let columns = if name == KV_TABLE { vec!["key".into(), "value".into()] } else { Vec::new() };
        self.tables.push(Table { name: name.into(), columns });
        TableId::from_index(self.tables.len() - 1)
    }

    /// Interns a column of `table`.
    pub fn intern_column(&mut self, table: TableId, name: &str) -> ColId {
        let t = &mut self.tables[table.index()];
        match t.column(name) {
            Some(c) => c,
            None => {
                t.columns.push(name.into());
                ColId::from_index(t.columns.len() - 1)
            }
        }
    }

    /// Interns an object.
    pub fn intern_object(&mut self, table: TableId, key: Scalar) -> ObjId {
        let k = ObjectKey { table, key };
        if let Some(&id) = self.object_index.get(&k) {
            return id;
        }
        let id = ObjId::from_index(self.objects.len());
        self.objects.push(k.clone());
        self.object_index.insert(k, id);
        id
    }

    /// Interns a value.
    pub fn intern_value(&mut self, value: Value) -> ValueId {
        if let Some(id) = self.value_index.get(&value, self.values.as_slice()) {
            return ValueId(id);
        }
        let id = ValueId::from_index(self.values.len());
        self.value_index.insert(&value, id.0);
        self.values.push(value);
        id
    }

    /// Interns the integer scalar `i`: [`History::intern_value`] of `Value::Scalar(Scalar::Int(i))`
    /// without building and dropping a [`Value`] for every lookup (converting a key-value
    /// history interns one per operation: 98 instructions a call through `intern_value`,
    /// 5% of an Emme check of 100,000 transactions, issue 34).
    #[inline]
    pub(crate) fn intern_int(&mut self, i: i64) -> ValueId {
        if let Some(id) = self.value_index.get_int(i) {
            return ValueId(id);
        }
        let id = ValueId::from_index(self.values.len());
        self.value_index.insert_int(i, id.0);
        self.values.push(Value::Scalar(Scalar::Int(i)));
        id
    }

    /// Takes the values, initial versions and transactions of `built` in place of this
    /// history's: a key-value reader's dictionary (objects, tables, sessions) receives those
    /// its transactions were converted into ([`crate::kv::HistoryBuilder`]).
    pub(crate) fn adopt_values_and_txns(&mut self, built: History) {
        self.values = built.values;
        self.value_index = built.value_index;
        self.initial = built.initial;
        self.txns = built.txns;
        self.txn_index = built.txn_index;
    }

    /// Interns a row of `table` given as (column, scalar) pairs.
    ///
    /// The row is laid out in a buffer kept between calls and looked up from there: a row
    /// already interned (most rows a predicate read returns) allocates nothing.
    pub fn intern_row(&mut self, columns: &[(ColId, Scalar)]) -> ValueId {
        let width = columns.iter().map(|(c, _)| c.index() + 1).max().unwrap_or(0);
        let mut row = std::mem::take(&mut self.row_buffer);
        row.clear();
        row.resize(width, Scalar::Null);
        for (c, v) in columns {
            row[c.index()] = v.clone();
        }
        // As Row::new: the hash and the comparison are of the row without trailing NULLs.
        while row.last().is_some_and(Scalar::is_null) {
            row.pop();
        }
        let hash = row_hash(&row);
        let values = self.values.as_slice();
        let found = self.value_index.get_hashed(
            hash,
            |id| matches!(&values[id as usize], Value::Row(r) if r.columns() == row.as_slice()),
        );
        let id = match found {
            Some(id) => ValueId(id),
            None => {
                let id = ValueId::from_index(self.values.len());
                self.value_index.insert_hashed(hash, id.0);
                self.values.push(Value::Row(Row::new(row.clone())));
                id
            }
        };
        self.row_buffer = row;
        id
    }

    /// Interns a predicate.
    pub fn intern_predicate(&mut self, table: TableId, sql: &str) -> PredId {
        // Looked up from the borrowed text: a predicate seen before allocates nothing.
        let hash = predicate_hash(table, sql);
        let predicates = self.predicates.as_slice();
        let same = |&id: &u32| {
            let p = &predicates[id as usize];
            p.table == table && &*p.sql == sql
        };
        if let Some(&id) = self.predicate_index.find(hash, same) {
            return PredId(id);
        }
        let id = PredId::from_index(self.predicates.len());
        self.predicate_index.insert_unique(hash, id.0, |&other| {
            let p = &predicates[other as usize];
            predicate_hash(p.table, &p.sql)
        });
        self.predicates.push(Predicate { table, sql: sql.into() });
        id
    }

    /// Interns a session name.
    pub fn intern_session(&mut self, name: Scalar) -> SessionId {
        if let Some(&id) = self.session_index.get(&name) {
            return id;
        }
        let id = SessionId::from_index(self.sessions.len());
        self.sessions.push(name.clone());
        self.session_index.insert(name, id);
        id
    }

    /// Appends a transaction.
    ///
    /// # Errors
    /// Returns the transaction back when its name is already taken.
    pub fn push_txn(&mut self, txn: Transaction) -> Result<TxnId, Box<Transaction>> {
        if self.txn_index.contains(&txn.name, &TxnNames(&self.txns)) {
            return Err(Box::new(txn));
        }
        let id = TxnId::from_index(self.txns.len());
        self.txn_index.insert(&txn.name, id.0);
        self.txns.push(txn);
        Ok(id)
    }

    /// The transaction with id `id`.
    #[inline]
    pub fn txn(&self, id: TxnId) -> &Transaction {
        &self.txns[id.index()]
    }

    /// The transaction named `name` in the file.
    pub fn txn_by_name(&self, name: &Scalar) -> Option<TxnId> {
        self.txn_index.get(name, &TxnNames(&self.txns)).map(TxnId)
    }

    /// The table with id `id`.
    #[inline]
    pub fn table(&self, id: TableId) -> &Table {
        &self.tables[id.index()]
    }

    /// The table named `name`, if interned.
    pub fn table_by_name(&self, name: &str) -> Option<TableId> {
        self.tables.iter().position(|t| &*t.name == name).map(TableId::from_index)
    }

    /// All tables, indexed by [`TableId`].
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// The object with id `id`.
    #[inline]
    pub fn object(&self, id: ObjId) -> &ObjectKey {
        &self.objects[id.index()]
    }

    /// The object with this table and key, if interned.
    pub fn object_by_key(&self, table: TableId, key: &Scalar) -> Option<ObjId> {
        self.object_index.get(&ObjectKey { table, key: key.clone() }).copied()
    }

    /// Number of interned objects (object ids are `0..object_count()`).
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// The value with id `id`.
    #[inline]
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The id of `value`, if interned.
    pub fn value_id(&self, value: &Value) -> Option<ValueId> {
        self.value_index.get(value, self.values.as_slice()).map(ValueId)
    }

    /// Number of interned values.
    pub fn value_count(&self) -> usize {
        self.values.len()
    }

    /// The predicate with id `id`.
    #[inline]
    pub fn predicate(&self, id: PredId) -> &Predicate {
        &self.predicates[id.index()]
    }

    /// All predicates, indexed by [`PredId`].
    pub fn predicates(&self) -> &[Predicate] {
        &self.predicates
    }

    /// The session's name in the file.
    pub fn session_name(&self, id: SessionId) -> &Scalar {
        &self.sessions[id.index()]
    }

    /// Number of sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Transaction ids in file order.
    pub fn txn_ids(&self) -> impl Iterator<Item = TxnId> + '_ {
        (0..self.txns.len()).map(TxnId::from_index)
    }

    /// A short human label for an object: `x` style `kv[5]` or `t[1]`.
    pub fn object_label(&self, id: ObjId) -> String {
        let o = self.object(id);
        format!("{}[{}]", self.table(o.table).name, o.key)
    }

    /// A short human label for a transaction: `T17` (or `T"abc"` for string ids).
    pub fn txn_label(&self, id: TxnId) -> String {
        format!("T{}", self.txn(id).name)
    }

    /// A human rendering of a value of object `obj`'s table.
    pub fn value_label(&self, obj: ObjId, value: ValueId) -> String {
        let table = self.table(self.object(obj).table);
        match self.value(value) {
            Value::Absent => "absent".to_string(),
            Value::Scalar(s) => s.to_string(),
            Value::List(items) => {
                let parts: Vec<String> = items.iter().map(|s| s.to_string()).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Row(row) => {
                let parts: Vec<String> = row
                    .columns()
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(i, v)| format!("{}: {v}", table.columns.get(i).map(|c| &**c).unwrap_or("?")))
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_parse_their_header_spellings_and_aliases_and_refuse_others_naming_the_choices() {
        for d in [Dialect::Postgres, Dialect::Mysql, Dialect::Mongodb, Dialect::Dgraph] {
            assert_eq!(d.as_str().parse(), Ok(d));
        }
        assert_eq!("postgresql".parse(), Ok(Dialect::Postgres));
        assert_eq!("tidb".parse(), Ok(Dialect::Mysql));
        let e = "Postgres".parse::<Dialect>().unwrap_err().to_string();
        assert_eq!(e, "unknown dialect \"Postgres\": use postgres, mysql, mongodb or dgraph");
    }

    #[test]
    fn a_transaction_s_facts_read_back_as_set_and_clearing_them_leaves_it_equal_to_a_new_one() {
        let plain = Transaction::new(Scalar::Int(1), SessionId::from_index(0), Vec::new());
        let mut t = plain.clone();
        let (start, commit) = (Timestamp { wall: 7, logical: 1 }, Timestamp::new(9));
        let span = RealTime { invoked_at: 3, completed_at: 4 };
        t.set_start_ts(Some(start));
        t.set_commit_ts(Some(commit));
        t.set_real_time(Some(span));
        t.set_meta(Some(serde_json::json!({"xid": 5})));
        t.push_op_meta(2, serde_json::json!("x"));
        assert_eq!((t.start_ts(), t.commit_ts(), t.real_time()), (Some(start), Some(commit), Some(span)));
        assert_eq!(t.meta(), Some(&serde_json::json!({"xid": 5})));
        assert_eq!(t.op_meta(2), Some(&serde_json::json!("x")));
        assert_eq!(t.op_meta(1), None);
        assert_ne!(t, plain);
        t.set_start_ts(None);
        assert_eq!((t.start_ts(), t.commit_ts()), (None, Some(commit)));
        t.set_commit_ts(None);
        t.set_real_time(None);
        t.set_meta(None);
        t.set_op_metas(Vec::new());
        assert_eq!(t, plain, "no fact left: equal to a transaction that never had one");
        assert!(t.extra.is_none(), "nothing left allocated");
    }
}
