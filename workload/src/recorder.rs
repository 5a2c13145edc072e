//! Turns what the sessions saw into the history, one finished transaction at a time.

use isocert_history::{
    ColId, Dialect, History, ObjId, Op, ResultRow, Scalar, SessionId, Status, TableId, Transaction, Value,
    ValueId,
};
use serde_json::{Map, Value as Json};

use isocert_adapters::{RecordedOp, TableSpec};

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
}

/// The history under construction: interned table, columns and sessions, transactions in
/// the order they finished (which keeps each session's order). Random workloads and
/// scripted scenarios (isocert-scenario) record through it.
#[derive(Debug)]
pub struct Recorder {
    history: History,
    spec: TableSpec,
    table: TableId,
    columns: Vec<ColId>,
    sessions: Vec<SessionId>,
}

impl Recorder {
    /// A recorder for table `spec` with `sessions` sessions named 0..sessions, whose
    /// predicates are in `dialect`. The table `kv` with columns `key`, `value` is v1's
    /// key-value table (plain scalar values); any other is recorded as rows.
    pub fn new(spec: TableSpec, sessions: u32, dialect: Dialect) -> Self {
        let mut history = History::new();
        history.dialect = dialect;
        let table = history.intern_table(spec.name);
        let columns = spec.columns.iter().map(|c| history.intern_column(table, c)).collect();
        let sessions = (0..sessions).map(|s| history.intern_session(Scalar::Int(i64::from(s)))).collect();
        Recorder { history, spec, table, columns, sessions }
    }

    fn is_kv(&self) -> bool {
        self.spec.name == "kv" && self.spec.columns == ["key", "value"]
    }

    fn object(&mut self, key: i64) -> ObjId {
        self.history.intern_object(self.table, Scalar::Int(key))
    }

    fn value(&mut self, row: Option<&[i64]>) -> ValueId {
        match row {
            None => ValueId::ABSENT,
            Some(r) if self.is_kv() => self.history.intern_value(Value::Scalar(Scalar::Int(r[1]))),
            Some(r) => {
                let cols: Vec<(ColId, Scalar)> =
                    self.columns.iter().zip(r).map(|(&c, &v)| (c, Scalar::Int(v))).collect();
                self.history.intern_row(&cols)
            }
        }
    }

    fn column(&self, name: &str) -> ColId {
        let i = self.spec.columns.iter().position(|c| *c == name).expect("column of the table");
        self.columns[i]
    }

    fn result_rows(&mut self, rows: &[Vec<i64>]) -> Vec<ResultRow> {
        rows.iter().map(|r| ResultRow { obj: self.object(r[0]), value: self.value(Some(r)) }).collect()
    }

    /// Records the rows that exist before the first transaction (the header's `initial`).
    pub fn set_initial(&mut self, rows: &[Vec<i64>]) {
        self.history.initial = rows.iter().map(|r| (self.object(r[0]), self.value(Some(r)))).collect();
    }

    /// Appends a finished transaction with the next id.
    pub fn push(&mut self, raw: RawTxn) {
        let mut ops = Vec::with_capacity(raw.ops.len());
        let mut op_meta = Vec::new();
        for (i, (op, meta)) in raw.ops.into_iter().enumerate() {
            ops.push(self.op(op));
            if !meta.is_empty() {
                op_meta.push((i as u32, Json::Object(meta)));
            }
        }
        let id = Scalar::Int(self.history.txns.len() as i64);
        let mut txn = Transaction::new(id, self.sessions[raw.session as usize], ops);
        txn.status = raw.status;
        txn.meta = Some(Box::new(Json::Object(raw.meta)));
        txn.op_meta = op_meta;
        // Ids are the position in the history, so they cannot collide.
        let _ = self.history.push_txn(txn);
    }

    fn op(&mut self, op: RecordedOp) -> Op {
        match op {
            RecordedOp::Read { key, row } => {
                Op::Read { obj: self.object(key), value: self.value(row.as_deref()) }
            }
            RecordedOp::Write { key, row } => {
                Op::Write { obj: self.object(key), value: self.value(row.as_deref()) }
            }
            RecordedOp::Select { predicate, rows } => {
                let predicate = self.history.intern_predicate(self.table, &predicate);
                Op::Select { predicate, rows: self.result_rows(&rows) }
            }
            RecordedOp::Update { predicate, set, rows } => {
                let predicate = self.history.intern_predicate(self.table, &predicate);
                let set = set.iter().map(|(c, v)| (self.column(c), Scalar::Int(*v))).collect();
                Op::Update { predicate, set, rows: self.result_rows(&rows) }
            }
            RecordedOp::Delete { predicate, keys } => {
                let predicate = self.history.intern_predicate(self.table, &predicate);
                let rows =
                    keys.iter().map(|&k| ResultRow { obj: self.object(k), value: ValueId::ABSENT }).collect();
                Op::Delete { predicate, rows }
            }
            RecordedOp::Aggregate { predicate, function, column, result } => {
                let predicate = self.history.intern_predicate(self.table, &predicate);
                let result = result.map_or(Scalar::Null, Scalar::Int);
                Op::Aggregate { predicate, function, column: Some(self.column(column)), result }
            }
        }
    }

    /// The finished history.
    pub fn finish(self) -> History {
        self.history
    }
}
