//! The database-neutral vocabulary between the test client and an adapter: the table a
//! workload runs on, the steps an adapter executes, and the operations it reports back.

use isocert_history::AggregateFn;

/// A workload table: every column is an integer, the primary key comes first and the last
/// column holds the unique value each write draws (so a version names its writer).
///
/// Adapters render it in their own DDL: the key column is `integer`, the last column
/// `bigint`, the others `integer`, all `NOT NULL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSpec {
    /// The table name, in SQL and in the history.
    pub name: &'static str,
    /// All columns, primary key first, unique value column last.
    pub columns: &'static [&'static str],
}

impl TableSpec {
    /// The primary key column.
    pub fn pk(&self) -> &'static str {
        self.columns[0]
    }

    /// The unique value column (the last one).
    pub fn value_column(&self) -> &'static str {
        self.columns[self.columns.len() - 1]
    }

    /// `key, value` / `id, c1, c2, v`.
    pub fn column_list(&self) -> String {
        self.columns.join(", ")
    }
}

/// One statement of a transaction, fully decided by the test client: rows carry every
/// column (key first, fresh unique value last), predicates are SQL `WHERE` text over the
/// table's columns in the common subset of the SQL dialects (integer comparisons, `AND`,
/// `OR`, `BETWEEN`, `IN`).
///
/// An adapter runs it inside the open transaction and reports what the database answered
/// as [`RecordedOp`]s; it never changes what the step writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Item read of one key.
    Read {
        /// The key.
        key: i64,
    },
    /// Insert the row, or replace every non-key column when the key exists (PostgreSQL
    /// `INSERT ... ON CONFLICT DO UPDATE`, MySQL `INSERT ... ON DUPLICATE KEY UPDATE`).
    /// Always installs a version.
    Upsert {
        /// The full row.
        row: Vec<i64>,
    },
    /// `INSERT` of the row: fails (an error of the database) when the key exists.
    Insert {
        /// The full row.
        row: Vec<i64>,
    },
    /// `UPDATE ... SET <non-key columns> WHERE pk = row[0]`: installs a version only if the
    /// row exists (report nothing otherwise).
    Update {
        /// The full row.
        row: Vec<i64>,
    },
    /// `DELETE ... WHERE pk = key`: report a write of "absent" only if a row was deleted.
    Delete {
        /// The key.
        key: i64,
    },
    /// `SELECT * FROM table WHERE predicate`.
    Select {
        /// The predicate.
        predicate: String,
    },
    /// `UPDATE table SET column = value, ... WHERE predicate` (the last assignment is the
    /// unique value column with a fresh value).
    PredicateUpdate {
        /// The predicate.
        predicate: String,
        /// The assignments, in order.
        set: Vec<(&'static str, i64)>,
    },
    /// `DELETE FROM table WHERE predicate`.
    PredicateDelete {
        /// The predicate.
        predicate: String,
    },
    /// `SELECT function(column) FROM table WHERE predicate`.
    Aggregate {
        /// The predicate.
        predicate: String,
        /// `min`, `max`, ...
        function: AggregateFn,
        /// The aggregated column.
        column: &'static str,
    },
}

/// One operation as the client saw it, before interning into the history. A step reports
/// zero (a no-op update or delete), one, or more (PostgreSQL may return two versions of one
/// row: see docs/POSTGRES.md) operations.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordedOp {
    /// Item read: the row, or `None` when absent.
    Read {
        /// The key.
        key: i64,
        /// The row read.
        row: Option<Vec<i64>>,
    },
    /// Item write: the row installed, or `None` for a delete.
    Write {
        /// The key.
        key: i64,
        /// The row installed.
        row: Option<Vec<i64>>,
    },
    /// Predicate read: the rows returned.
    Select {
        /// The predicate, as the step gave it.
        predicate: String,
        /// The rows, one per key.
        rows: Vec<Vec<i64>>,
    },
    /// Predicate update: the assignments and the new rows.
    Update {
        /// The predicate.
        predicate: String,
        /// The assignments.
        set: Vec<(&'static str, i64)>,
        /// The rows as the update left them.
        rows: Vec<Vec<i64>>,
    },
    /// Predicate delete: the deleted keys.
    Delete {
        /// The predicate.
        predicate: String,
        /// The deleted keys.
        keys: Vec<i64>,
    },
    /// Aggregate over a predicate: its result (`None` = SQL NULL).
    Aggregate {
        /// The predicate.
        predicate: String,
        /// The function.
        function: AggregateFn,
        /// The aggregated column.
        column: &'static str,
        /// The result.
        result: Option<i64>,
    },
}
