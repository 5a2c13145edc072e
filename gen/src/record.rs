//! The generator's own compact record of a finished transaction, before any output format.
//!
//! Objects are dense generator indexes (`u32`: the key of table `kv` or the `id` of a row
//! of table `t`), values are small `Copy` data. Sinks turn records into a
//! [`History`](isocert_history::History) or into v1 JSON lines.

/// Name of the SQL table of [`DataModel::SqlTable`](crate::DataModel::SqlTable).
pub(crate) const SQL_TABLE: &str = "t";

/// Columns of the SQL table, in the order rows are written (`id` is the primary key).
pub(crate) const SQL_COLUMNS: [&str; 4] = ["id", "c0", "c1", "c2"];

/// One row of the SQL table, its key aside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowVal {
    pub(crate) c0: i64,
    pub(crate) c1: i64,
    pub(crate) c2: i64,
}

/// One version's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    /// No row / no value (unborn or deleted).
    Absent,
    /// A kv value.
    Int(i64),
    /// A SQL row.
    Row(RowVal),
    /// A list of this many elements (the elements live in the store).
    List(u32),
}

/// A predicate over the SQL table's `c0` (and `c2`) columns, evaluated natively and
/// rendered as PostgreSQL `where` text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PredSpec {
    /// `c0 >= lo AND c0 < hi`.
    Range { lo: i64, hi: i64 },
    /// `c0 BETWEEN lo AND hi`.
    Between { lo: i64, hi: i64 },
    /// `c0 >= lo AND c0 < hi AND c2 <> c2`.
    RangeExcept { lo: i64, hi: i64, c2: i64 },
}

impl PredSpec {
    /// Whether the row matches (an absent row never does).
    pub(crate) fn matches(self, val: Val) -> bool {
        let Val::Row(r) = val else { return false };
        match self {
            PredSpec::Range { lo, hi } => r.c0 >= lo && r.c0 < hi,
            PredSpec::Between { lo, hi } => r.c0 >= lo && r.c0 <= hi,
            PredSpec::RangeExcept { lo, hi, c2 } => r.c0 >= lo && r.c0 < hi && r.c2 != c2,
        }
    }

    /// Appends the SQL text to `out`.
    pub(crate) fn render(self, out: &mut String) {
        use std::fmt::Write;
        let _ = match self {
            PredSpec::Range { lo, hi } => write!(out, "c0 >= {lo} AND c0 < {hi}"),
            PredSpec::Between { lo, hi } => write!(out, "c0 BETWEEN {lo} AND {hi}"),
            PredSpec::RangeExcept { lo, hi, c2 } => write!(out, "c0 >= {lo} AND c0 < {hi} AND c2 <> {c2}"),
        };
    }

    /// The SQL text.
    pub(crate) fn sql(self) -> String {
        let mut s = String::new();
        self.render(&mut s);
        s
    }
}

/// Whose version a predicate operation evaluated for one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeenWriter {
    /// The initial version (header `initial`).
    Initial,
    /// A committed transaction's version (its record id).
    Txn(u32),
    /// The transaction's own buffered write (resolved to its id on output).
    Own,
}

/// One row of a predicate operation's version set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) obj: u32,
    pub(crate) writer: SeenWriter,
}

/// One operation as executed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OpRec {
    /// Item read of a kv value or SQL row.
    Read { obj: u32, val: Val },
    /// Item read of a list.
    ReadList { obj: u32, elems: Vec<i64> },
    /// Item write of a kv value or SQL row.
    Write { obj: u32, val: Val },
    /// Append to a list.
    Append { obj: u32, elem: i64 },
    /// `SELECT * FROM t WHERE pred`.
    Select { pred: PredSpec, rows: Vec<(u32, RowVal)>, seen: Vec<Seen>, seen_at: u64 },
    /// `UPDATE t SET c1 = set_c1 WHERE pred`; rows are the new versions.
    Update { pred: PredSpec, set_c1: i64, rows: Vec<(u32, RowVal)>, seen: Vec<Seen>, seen_at: u64 },
    /// `DELETE FROM t WHERE pred`; rows are the deleted keys.
    Delete { pred: PredSpec, rows: Vec<u32>, seen: Vec<Seen>, seen_at: u64 },
}

impl OpRec {
    /// The version set of a predicate operation, and the snapshot timestamp it was
    /// evaluated at.
    pub(crate) fn seen(&self) -> Option<(&[Seen], u64)> {
        match self {
            OpRec::Select { seen, seen_at, .. }
            | OpRec::Update { seen, seen_at, .. }
            | OpRec::Delete { seen, seen_at, .. } => Some((seen, *seen_at)),
            _ => None,
        }
    }
}

/// How a recorded transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Committed,
    Aborted,
}

/// A finished transaction.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TxnRecord {
    /// Its id, which is also its position in the output.
    pub(crate) id: u32,
    pub(crate) session: u32,
    pub(crate) outcome: Outcome,
    pub(crate) start_ts: u64,
    /// Present when committed.
    pub(crate) commit_ts: Option<u64>,
    pub(crate) ops: Vec<OpRec>,
}

/// Receives finished transactions in output order (session order respected).
pub(crate) trait Sink {
    /// Called once before any transaction with the initial versions.
    fn initial(&mut self, model: crate::DataModel, initial: &[(u32, Val)]) -> Result<(), crate::GenError>;
    /// Called for every transaction, in id order.
    fn txn(&mut self, rec: &TxnRecord) -> Result<(), crate::GenError>;
}
