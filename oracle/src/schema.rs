//! Column types, inferred from the values a history holds.
//!
//! PostgreSQL types every column, and its parser rejects `text_col + 1` or `int_col = 'abc'`
//! before it reads a row. The history carries no schema, so the oracle infers one: a column
//! that only ever held integers is `bigint`, integers and floats `double precision`, strings
//! `text`, booleans `boolean`; a column with no values or mixed kinds stays dynamically typed.

use isocert_history::{History, ObjId, Op, Scalar, TableId, Value, ValueId};

/// Bit for booleans in a kind set.
pub(crate) const BOOL: u8 = 1;
/// Bit for integers.
pub(crate) const INT: u8 = 2;
/// Bit for floats.
pub(crate) const FLOAT: u8 = 4;
/// Bit for text.
pub(crate) const TEXT: u8 = 8;

/// The kind bit of a scalar (0 for NULL).
pub(crate) fn kind_bit(s: &Scalar) -> u8 {
    match s {
        Scalar::Null => 0,
        Scalar::Bool(_) => BOOL,
        Scalar::Int(_) => INT,
        Scalar::Float(_) => FLOAT,
        Scalar::Text(_) => TEXT,
    }
}

/// The kinds of scalar each column of each table has held, scanned incrementally.
#[derive(Clone, Debug, Default)]
pub(crate) struct Schema {
    /// Per table, per column, the kind bits seen.
    kinds: Vec<Vec<u8>>,
    /// Transactions scanned so far.
    scanned_txns: usize,
    /// Objects whose keys were scanned so far.
    scanned_objects: usize,
    /// Whether the initial versions were scanned.
    scanned_initial: bool,
}

impl Schema {
    /// Whether `other` saw the same kinds in every column of every table.
    pub(crate) fn same_kinds(&self, other: &Schema) -> bool {
        self.kinds == other.kinds
    }

    /// Scans what `h` gained since the last call.
    pub(crate) fn update(&mut self, h: &History) {
        let tables = h.tables();
        self.kinds.resize(tables.len(), Vec::new());
        for (k, t) in self.kinds.iter_mut().zip(tables) {
            k.resize(t.columns.len(), 0);
        }
        for o in self.scanned_objects..h.object_count() {
            let key = &h.object(ObjId::from_index(o));
            if h.table(key.table).is_kv() {
                self.kinds[key.table.index()][0] |= kind_bit(&key.key);
            }
        }
        self.scanned_objects = h.object_count();
        if !self.scanned_initial {
            for &(obj, value) in &h.initial {
                self.note(h, obj, value);
            }
            self.scanned_initial = true;
        }
        for t in &h.txns[self.scanned_txns.min(h.txns.len())..] {
            for op in &t.ops {
                match op {
                    Op::Read { obj, value } | Op::Write { obj, value } => self.note(h, *obj, *value),
                    Op::Select { rows, .. } | Op::Update { rows, .. } => {
                        for r in rows {
                            self.note(h, r.obj, r.value);
                        }
                    }
                    _ => {}
                }
            }
        }
        self.scanned_txns = h.txns.len();
    }

    fn note(&mut self, h: &History, obj: ObjId, value: ValueId) {
        let table = h.object(obj).table;
        let kinds = &mut self.kinds[table.index()];
        match h.value(value) {
            Value::Scalar(s) if kinds.len() == 2 && h.table(table).is_kv() => kinds[1] |= kind_bit(s),
            Value::Row(r) => {
                for (k, s) in kinds.iter_mut().zip(r.columns()) {
                    *k |= kind_bit(s);
                }
            }
            _ => {}
        }
    }

    /// The kinds seen per column of `table`. A history with no operations on the table (one
    /// built in memory) falls back to every interned value of the table's shape.
    pub(crate) fn table_kinds(&self, h: &History, table: TableId) -> Vec<u8> {
        let mut kinds = self.kinds.get(table.index()).cloned().unwrap_or_default();
        kinds.resize(h.table(table).columns.len(), 0);
        let kv = h.table(table).is_kv();
        let single_row_table = h.tables().iter().filter(|t| !t.is_kv()).count() == 1;
        let unseen = if kv { kinds.get(1) == Some(&0) } else { kinds.iter().all(|k| *k == 0) };
        if unseen && (kv || single_row_table) {
            for i in 0..h.value_count() {
                match h.value(ValueId::from_index(i)) {
                    Value::Scalar(s) if kv => kinds[1] |= kind_bit(s),
                    Value::Row(r) if !kv => {
                        for (k, s) in kinds.iter_mut().zip(r.columns()) {
                            *k |= kind_bit(s);
                        }
                    }
                    _ => {}
                }
            }
        }
        kinds
    }
}
