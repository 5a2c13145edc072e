//! Turns what the sessions saw into the history, one finished transaction at a time.

use isocert_history::{
    Assign, ColId, Dialect, History, ObjId, Op, RealTime, ResultRow, Scalar, SessionId, Status, TableId,
    Transaction, TxnId, Value, ValueId,
};
use serde_json::{Map, Value as Json};

use isocert_adapters::{RecordedOp, SetValue, TableSpec};

/// A finished transaction as one session saw it, before interning.
#[derive(Debug)]
pub struct RawTxn {
    /// The session (0-based).
    pub session: u32,
    /// How it ended.
    pub status: Status,
    /// Its operations with their adapter facts, in program order.
    pub ops: Vec<(RecordedOp, Map<String, Json>)>,
    /// Its transaction facts (xid, isolation, snapshot, sqlstate).
    pub meta: Map<String, Json>,
    /// When the client invoked it and learnt its outcome, if timed.
    pub real_time: Option<RealTime>,
}

/// One table the history records: its spec, interned id and columns.
#[derive(Debug)]
struct Recorded {
    spec: TableSpec,
    table: TableId,
    columns: Vec<ColId>,
    /// Rows of this table are lists: a read records the list its last column holds.
    lists: bool,
}

/// The history under construction: interned tables, columns and sessions, transactions in
/// the order they finished (which keeps each session's order). Random workloads and
/// scripted scenarios (isocert-scenario) record through it; a scenario may record several
/// tables, each op naming its table by index.
#[derive(Debug)]
pub struct Recorder {
    history: History,
    tables: Vec<Recorded>,
    sessions: Vec<SessionId>,
    observer: Option<Observer>,
}

/// What [`Recorder::observe`] calls: with the history so far, and the id of the
/// transaction just recorded (`None` once, when observing starts).
pub type ObserverFn = Box<dyn FnMut(&History, Option<TxnId>) + Send>;

/// An [`ObserverFn`] (a closure is not `Debug`).
struct Observer(ObserverFn);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl Recorder {
    /// A recorder for table `spec` with `sessions` sessions named 0..sessions, whose
    /// predicates are in `dialect`. The table `kv` with columns `key`, `value` is v1's
    /// key-value table (plain scalar values); any other is recorded as rows.
    pub fn new(spec: TableSpec, sessions: u32, dialect: Dialect) -> Self {
        Recorder::with_tables(&[spec], sessions, dialect)
    }

    /// A recorder for several tables (table `i` of an op is `specs[i]`); otherwise as
    /// [`Recorder::new`].
    pub fn with_tables(specs: &[TableSpec], sessions: u32, dialect: Dialect) -> Self {
        let mut history = History::new();
        history.dialect = dialect;
        let tables = specs
            .iter()
            .map(|&spec| {
                let table = history.intern_table(spec.name);
                let columns = spec.columns.iter().map(|c| history.intern_column(table, c)).collect();
                Recorded { spec, table, columns, lists: false }
            })
            .collect();
        let sessions = (0..sessions).map(|s| history.intern_session(Scalar::Int(i64::from(s)))).collect();
        Recorder { history, tables, sessions, observer: None }
    }

    /// Records reads of table `t` as lists (Elle's list-append reads): the row's last
    /// column holds the list as comma-separated text (`1,5,9`, as `CONCAT(val, ',', e)`
    /// builds it), recorded as the list of its elements (integers where they parse).
    pub fn set_lists(&mut self, t: usize) {
        self.tables[t].lists = true;
    }

    fn is_kv(&self, t: usize) -> bool {
        self.tables.len() == 1
            && self.tables[t].spec.name == "kv"
            && self.tables[t].spec.columns == ["key", "value"]
    }

    fn object(&mut self, t: usize, key: i64) -> ObjId {
        self.history.intern_object(self.tables[t].table, Scalar::Int(key))
    }

    fn value(&mut self, t: usize, row: Option<&[Scalar]>) -> ValueId {
        match row {
            None => ValueId::ABSENT,
            Some(r) if self.tables[t].lists => {
                let items: Vec<Scalar> = match r.last() {
                    Some(Scalar::Text(text)) if !text.is_empty() => text
                        .split(',')
                        .map(|e| e.parse::<i64>().map_or_else(|_| Scalar::Text(e.into()), Scalar::Int))
                        .collect(),
                    _ => Vec::new(),
                };
                self.history.intern_value(Value::List(items.into()))
            }
            Some(r) if self.is_kv(t) => self.history.intern_value(Value::Scalar(r[1].clone())),
            Some(r) => {
                let cols: Vec<(ColId, Scalar)> =
                    self.tables[t].columns.iter().zip(r).map(|(&c, v)| (c, v.clone())).collect();
                self.history.intern_row(&cols)
            }
        }
    }

    fn column(&self, t: usize, name: &str) -> ColId {
        let table = &self.tables[t];
        let i = table.spec.columns.iter().position(|c| *c == name).expect("column of the table");
        table.columns[i]
    }

    fn row_object(&mut self, t: usize, row: &[Scalar]) -> ObjId {
        self.history.intern_object(self.tables[t].table, row[0].clone())
    }

    fn result_rows(&mut self, t: usize, rows: &[Vec<Scalar>]) -> Vec<ResultRow> {
        rows.iter().map(|r| ResultRow { obj: self.row_object(t, r), value: self.value(t, Some(r)) }).collect()
    }

    /// Records the rows that exist before the first transaction (the header's `initial`).
    pub fn set_initial(&mut self, rows: &[Vec<Scalar>]) {
        self.history.initial.clear();
        self.add_initial(0, rows);
    }

    /// Records the adapter's facts about the initial rows (the header's `meta`).
    pub fn set_meta(&mut self, meta: Option<serde_json::Value>) {
        self.history.meta = meta.map(Box::new);
    }

    /// Adds table `t`'s rows to those that exist before the first transaction.
    pub fn add_initial(&mut self, t: usize, rows: &[Vec<Scalar>]) {
        for r in rows {
            let entry = (self.row_object(t, r), self.value(t, Some(r)));
            self.history.initial.push(entry);
        }
    }

    /// Calls `observer` now with the history so far (its header: initial values), then
    /// after each transaction is recorded, under the recorder's lock: what a live run
    /// publishes from (`isocert run --emit`).
    pub fn observe(&mut self, mut observer: ObserverFn) {
        observer(&self.history, None);
        self.observer = Some(Observer(observer));
    }

    /// Appends a finished transaction with the next id.
    pub fn push(&mut self, raw: RawTxn) {
        self.push_on(raw, &[]);
    }

    /// Appends a finished transaction whose op `i` is on table `tables[i]` (table 0 where
    /// `tables` is shorter).
    pub fn push_on(&mut self, raw: RawTxn, tables: &[usize]) {
        let mut ops = Vec::with_capacity(raw.ops.len());
        let mut op_meta = Vec::new();
        for (i, (op, meta)) in raw.ops.into_iter().enumerate() {
            ops.push(self.op(tables.get(i).copied().unwrap_or(0), op));
            if !meta.is_empty() {
                op_meta.push((i as u32, Json::Object(meta)));
            }
        }
        let id = Scalar::Int(self.history.txns.len() as i64);
        let mut txn = Transaction::new(id, self.sessions[raw.session as usize], ops);
        txn.status = raw.status;
        txn.set_meta(Some(Json::Object(raw.meta)));
        txn.set_op_metas(op_meta);
        txn.set_real_time(raw.real_time);
        // Ids are the position in the history, so they cannot collide.
        let _ = self.history.push_txn(txn);
        if let Some(Observer(observer)) = &mut self.observer {
            observer(&self.history, Some(TxnId::from_index(self.history.txns.len() - 1)));
        }
    }

    fn op(&mut self, t: usize, op: RecordedOp) -> Op {
        match op {
            RecordedOp::Read { key, row } => {
                Op::Read { obj: self.object(t, key), value: self.value(t, row.as_deref()) }
            }
            RecordedOp::Write { key, row } => {
                Op::Write { obj: self.object(t, key), value: self.value(t, row.as_deref()) }
            }
            RecordedOp::Select { predicate, rows } => {
                let predicate = self.history.intern_predicate(self.tables[t].table, &predicate);
                Op::Select { predicate, rows: self.result_rows(t, &rows).into() }
            }
            RecordedOp::Update { predicate, set, rows } => {
                let predicate = self.history.intern_predicate(self.tables[t].table, &predicate);
                let set = set.into_iter().map(|(c, v)| (self.column(t, c), Assign::Const(v))).collect();
                Op::Update { predicate, set, rows: self.result_rows(t, &rows).into() }
            }
            RecordedOp::ExprUpdate { predicate, set, excluded, rows } => {
                let predicate = self.history.intern_predicate(self.tables[t].table, &predicate);
                let excluded = excluded.map(|row| self.value(t, Some(&row)));
                let set = set
                    .into_iter()
                    .map(|(c, v)| {
                        let assign = match v {
                            SetValue::Const(s) => Assign::Const(s),
                            SetValue::Expr(sql) => {
                                Assign::Expr(Box::new(isocert_history::SetExpr { sql: sql.into(), excluded }))
                            }
                        };
                        (self.column(t, c), assign)
                    })
                    .collect();
                Op::Update { predicate, set, rows: self.result_rows(t, &rows).into() }
            }
            RecordedOp::Delete { predicate, keys } => {
                let predicate = self.history.intern_predicate(self.tables[t].table, &predicate);
                let rows = keys
                    .iter()
                    .map(|&k| ResultRow { obj: self.object(t, k), value: ValueId::ABSENT })
                    .collect();
                Op::Delete { predicate, rows }
            }
            RecordedOp::Append { key, element } => {
                Op::Append { obj: self.object(t, key), element: Scalar::Int(element) }
            }
            RecordedOp::Aggregate { predicate, function, column, result } => {
                let predicate = self.history.intern_predicate(self.tables[t].table, &predicate);
                let result = result.map_or(Scalar::Null, Scalar::Int);
                // `count(*)` aggregates no column.
                let column = (column != "*").then(|| self.column(t, column));
                Op::Aggregate { predicate, function, column, result }
            }
        }
    }

    /// The finished history.
    pub fn finish(self) -> History {
        self.history
    }
}
