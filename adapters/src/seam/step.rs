//! The database-neutral vocabulary between the test client and an adapter: the table a
//! workload runs on, the steps an adapter executes, and the operations it reports back.
//!
//! Rows are SQL scalars ([`Scalar`]): the random workloads write integers only, scenarios
//! (PostgreSQL isolation specs) also text, numeric, float and boolean columns. Adapters
//! that record integer columns only (CockroachDB, Dgraph, MongoDB) convert a step with
//! [`Step::integers`], which refuses any other value, and report [`IntOp`]s.

use isocert_history::{AggregateFn, Scalar};

use super::DbError;

/// The SQL type of a table's column, as the test client records its values.
///
/// Each type has one canonical [`Scalar`] form ([`ColumnType::canonical`]), which the
/// client's rows, the adapters' decoding of what the database answered and of its change
/// stream all produce, so that equal values compare equal in recovery and the oracle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// `integer`, `bigint`, `smallint`, `serial`: [`Scalar::Int`].
    Integer,
    /// `text`, `varchar(n)`: [`Scalar::Text`] (never padded).
    Text,
    /// `double precision` (`float8`, MySQL `DOUBLE`): [`Scalar::Float`].
    Float,
    /// `numeric`/`decimal`: compared as a double ([`Scalar::Float`]); a value with more
    /// than 15 significant digits is refused rather than rounded.
    Numeric,
    /// `boolean` (MySQL's `TINYINT(1)`): [`Scalar::Bool`].
    Boolean,
}

impl ColumnType {
    /// The type's name in messages and DDL (`integer`, `text`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::Integer => "integer",
            ColumnType::Text => "text",
            ColumnType::Float => "double precision",
            ColumnType::Numeric => "numeric",
            ColumnType::Boolean => "boolean",
        }
    }

    /// `value` in this type's canonical form (NULL stays NULL).
    ///
    /// # Errors
    /// A message naming the value when it is not of this type (text in an integer column,
    /// a numeric with more than 15 significant digits, a boolean other than 0 or 1).
    pub fn canonical(self, value: Scalar) -> Result<Scalar, String> {
        let bad = |v: &Scalar| format!("{v} is not a value of type {}", self.as_str());
        Ok(match (self, value) {
            (_, Scalar::Null) => Scalar::Null,
            (ColumnType::Integer, Scalar::Int(i)) => Scalar::Int(i),
            (ColumnType::Text, Scalar::Text(t)) => Scalar::Text(t),
            (ColumnType::Float | ColumnType::Numeric, Scalar::Int(i)) if i.unsigned_abs() < (1 << 53) => {
                Scalar::Float(i as f64)
            }
            (ColumnType::Float | ColumnType::Numeric, Scalar::Float(f)) => Scalar::Float(f),
            (ColumnType::Boolean, Scalar::Bool(b)) => Scalar::Bool(b),
            (ColumnType::Boolean, Scalar::Int(i @ (0 | 1))) => Scalar::Bool(i == 1),
            (_, v) => return Err(bad(&v)),
        })
    }

    /// The database's text form of a value of this type (PostgreSQL's output, a MySQL
    /// decimal) in canonical form.
    ///
    /// # Errors
    /// A message naming the text when it is not a value of this type.
    pub fn parse(self, text: &str) -> Result<Scalar, String> {
        let bad = || format!("{text:?} is not a value of type {}", self.as_str());
        match self {
            ColumnType::Integer => text.parse().map(Scalar::Int).map_err(|_| bad()),
            ColumnType::Text => Ok(Scalar::Text(text.into())),
            ColumnType::Float => text.parse().map(Scalar::Float).map_err(|_| bad()),
            ColumnType::Numeric => {
                let digits: String = text.chars().filter(char::is_ascii_digit).collect();
                let (mantissa, _) = text.split_once(['e', 'E']).unwrap_or((text, ""));
                let mantissa: String = mantissa.chars().filter(char::is_ascii_digit).collect();
                let significant = mantissa.trim_start_matches('0').trim_end_matches('0').len();
                if digits.is_empty() {
                    return Err(bad());
                }
                if significant > 15 {
                    return Err(format!(
                        "{text:?}: a numeric of more than 15 significant digits (compared as a double)"
                    ));
                }
                text.parse().map(Scalar::Float).map_err(|_| bad())
            }
            ColumnType::Boolean => match text {
                "t" | "true" | "1" => Ok(Scalar::Bool(true)),
                "f" | "false" | "0" => Ok(Scalar::Bool(false)),
                _ => Err(bad()),
            },
        }
    }
}

/// A workload table: the primary key (an integer) comes first; in the random workloads
/// every column is an integer and the last one holds the unique value each write draws (so
/// a version names its writer).
///
/// Adapters render a workload table in their own DDL: the key column is `integer`, the
/// last column `bigint`, the others `integer`, all `NOT NULL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSpec {
    /// The table name, in SQL and in the history.
    pub name: &'static str,
    /// All columns, primary key first, unique value column last.
    pub columns: &'static [&'static str],
    /// The type of each column, in the order of `columns`; empty: every column is an
    /// integer (the workloads' tables).
    pub types: &'static [ColumnType],
    /// A partitioned table (PostgreSQL `PARTITION BY`): PostgreSQL cannot return the
    /// system column `xmin` of its rows from a write, so the writer of a version it
    /// installs is the writing transaction's own id, and deletes are not recorded.
    pub partitioned: bool,
}

impl TableSpec {
    /// A table whose columns are all integers.
    pub const fn integers(name: &'static str, columns: &'static [&'static str]) -> Self {
        TableSpec { name, columns, types: &[], partitioned: false }
    }

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

    /// The type of column `i`.
    pub fn column_type(&self, i: usize) -> ColumnType {
        self.types.get(i).copied().unwrap_or(ColumnType::Integer)
    }

    /// The type of the column named `name` (an integer if the table has no such column).
    pub fn type_of(&self, name: &str) -> ColumnType {
        self.columns.iter().position(|c| *c == name).map_or(ColumnType::Integer, |i| self.column_type(i))
    }

    /// Whether every column is an integer.
    pub fn all_integers(&self) -> bool {
        self.types.iter().all(|t| *t == ColumnType::Integer)
    }
}

/// A SQL literal of a scalar: integers and floats as numbers, text quoted with `'`
/// doubled, booleans as `TRUE`/`FALSE`, `NULL`. Backslashes are doubled as well when
/// `backslash_escapes` (MySQL's default string syntax).
pub fn sql_literal(value: &Scalar, backslash_escapes: bool) -> String {
    match value {
        Scalar::Null => "NULL".into(),
        Scalar::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => format!("{f:?}"),
        Scalar::Text(t) => {
            let mut out = t.replace('\'', "''");
            if backslash_escapes {
                out = out.replace('\\', "\\\\");
            }
            format!("'{out}'")
        }
    }
}

/// The key of a row (its first column), if it is an integer.
pub fn row_key(row: &[Scalar]) -> Option<i64> {
    match row.first() {
        Some(Scalar::Int(k)) => Some(*k),
        _ => None,
    }
}

/// A row of integers as scalars.
pub fn int_row(row: Vec<i64>) -> Vec<Scalar> {
    row.into_iter().map(Scalar::Int).collect()
}

/// One statement of a transaction, fully decided by the test client: rows carry every
/// column (key first; in the workloads a fresh unique value last), predicates are SQL
/// `WHERE` text over the table's columns in the common subset of the SQL dialects
/// (comparisons, `AND`, `OR`, `BETWEEN`, `IN`).
///
/// An adapter runs it inside the open transaction and reports what the database answered
/// as [`RecordedOp`]s; it never changes what the step writes.
///
/// `V` is the type of the values (rows, assignments): [`Scalar`] for the adapters that
/// record every column type, `i64` for the integer-only ones ([`IntStep`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Step<V = Scalar> {
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
        row: Vec<V>,
    },
    /// `INSERT` of the row: fails (an error of the database) when the key exists.
    Insert {
        /// The full row.
        row: Vec<V>,
    },
    /// `UPDATE ... SET <non-key columns> WHERE pk = row[0]`: installs a version only if the
    /// row exists (report nothing otherwise).
    Update {
        /// The full row.
        row: Vec<V>,
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
        set: Vec<(&'static str, V)>,
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
    /// A write in the scenario's own SQL, whatever its values are made of (`SET v = v + 5`,
    /// `INSERT ... SELECT`, several rows): the adapter runs it as written and records each
    /// row it wrote as the database reports it (PostgreSQL: `RETURNING` with the row's
    /// `xmin`; MariaDB: the rows re-read after the statement under its locks), never what
    /// the client thought the values would be. Scenarios only (isocert-scenario);
    /// integer-only adapters refuse it.
    Statement {
        /// The statement, as written, without `RETURNING`.
        sql: String,
        /// What it writes and how it is recorded.
        write: StatementWrite<V>,
    },
    /// Elle's list append on SQL: insert the row `(key, key, 'element')`, or when the key
    /// exists append `,element` to its last column (PostgreSQL `INSERT ... ON CONFLICT (pk)
    /// DO UPDATE SET val = CONCAT(t.val, ',', element)`, MySQL `ON DUPLICATE KEY UPDATE`).
    /// The table's columns are the key, a secondary key and the text list; reads of it
    /// return the row, which the test client records as a list.
    Append {
        /// The key.
        key: i64,
        /// The element appended (unique per key).
        element: i64,
    },
}

/// What a [`Step::Statement`] writes, which decides how it is recorded.
#[derive(Clone, Debug, PartialEq)]
pub enum StatementWrite<V = Scalar> {
    /// `UPDATE table SET ... WHERE predicate` (no key column assigned): a predicate update
    /// of the rows it changed (a row an assignment left as it was installs nothing).
    Update {
        /// The `WHERE` text (`true` without one).
        predicate: String,
        /// The assignments of constants, for the record; the rows hold what was written.
        set: Vec<(&'static str, V)>,
    },
    /// `INSERT INTO table ...`: an item write of each row it installed.
    Insert,
    /// `UPDATE table SET c = <expression>, ... WHERE predicate` whose assignments may be SQL
    /// expressions over the row it replaces (`SET n = n + 3, v = 77`): recorded as an
    /// expression update ([`RecordedOp::ExprUpdate`]), so the checker can evaluate them on
    /// the version each row replaced (docs/CHECKING.md, "Statement-level promises").
    ///
    /// An upsert (`INSERT ... ON CONFLICT (pk) DO UPDATE SET n = t.n + EXCLUDED.n`) on a
    /// row that exists is one too: its `predicate` is `pk = key`, `excluded` the row it
    /// proposed (which its expressions name as `excluded.c`). The caller guarantees the row
    /// exists (the counter workload never deletes), so the statement updates it.
    ExprUpdate {
        /// The `WHERE` text.
        predicate: String,
        /// The assignments, in the statement's order.
        set: Vec<(&'static str, SetValue)>,
        /// An upsert's proposed row (`EXCLUDED`), all columns in the table's order.
        excluded: Option<Vec<Scalar>>,
    },
}

/// One assignment of an expression update: a constant, or SQL over the replaced row.
#[derive(Clone, Debug, PartialEq)]
pub enum SetValue {
    /// A constant.
    Const(Scalar),
    /// A SQL expression over the columns of the row the statement replaces (`n + 3`).
    Expr(String),
}

/// One operation as the client saw it, before interning into the history. A step reports
/// zero (a no-op update or delete), one, or more (PostgreSQL may return two versions of one
/// row: see docs/POSTGRES.md) operations.
///
/// `V` is the type of the values, as for [`Step`] ([`IntOp`] for integer-only adapters).
#[derive(Clone, Debug, PartialEq)]
pub enum RecordedOp<V = Scalar> {
    /// Item read: the row, or `None` when absent.
    Read {
        /// The key.
        key: i64,
        /// The row read.
        row: Option<Vec<V>>,
    },
    /// Item write: the row installed, or `None` for a delete.
    Write {
        /// The key.
        key: i64,
        /// The row installed.
        row: Option<Vec<V>>,
    },
    /// Predicate read: the rows returned.
    Select {
        /// The predicate, as the step gave it.
        predicate: String,
        /// The rows, one per key.
        rows: Vec<Vec<V>>,
    },
    /// Predicate update: the assignments and the new rows.
    Update {
        /// The predicate.
        predicate: String,
        /// The assignments.
        set: Vec<(&'static str, V)>,
        /// The rows as the update left them.
        rows: Vec<Vec<V>>,
    },
    /// Expression update ([`StatementWrite::ExprUpdate`]): the assignments as written and
    /// the new rows.
    ExprUpdate {
        /// The predicate.
        predicate: String,
        /// The assignments.
        set: Vec<(&'static str, SetValue)>,
        /// An upsert's proposed row (`EXCLUDED`).
        excluded: Option<Vec<Scalar>>,
        /// The rows as the update left them.
        rows: Vec<Vec<V>>,
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
    /// List append ([`Step::Append`]): one element appended to the list at the key.
    Append {
        /// The key.
        key: i64,
        /// The element.
        element: i64,
    },
}

/// A [`Step`] whose values are all integers, for the adapters that record integer columns
/// only ([`Step::integers`]).
pub type IntStep = Step<i64>;

/// A [`RecordedOp`] of integer rows, as the integer-only adapters report it (it converts
/// into a [`RecordedOp`]).
pub type IntOp = RecordedOp<i64>;

impl Step {
    /// The step with integer values only, for an adapter that records integer columns only.
    ///
    /// # Errors
    /// [`DbError`] (fatal) naming the first value that is not an integer.
    pub fn integers(&self) -> Result<IntStep, DbError> {
        let int = |v: &Scalar| match v {
            Scalar::Int(i) => Ok(*i),
            other => Err(DbError::unexpected(
                "a step",
                format!("{other} is not an integer: this database's adapter records integer columns only"),
            )),
        };
        let ints = |row: &[Scalar]| row.iter().map(int).collect::<Result<Vec<i64>, DbError>>();
        Ok(match self {
            Step::Read { key } => IntStep::Read { key: *key },
            Step::Upsert { row } => IntStep::Upsert { row: ints(row)? },
            Step::Insert { row } => IntStep::Insert { row: ints(row)? },
            Step::Update { row } => IntStep::Update { row: ints(row)? },
            Step::Delete { key } => IntStep::Delete { key: *key },
            Step::Select { predicate } => IntStep::Select { predicate: predicate.clone() },
            Step::PredicateUpdate { predicate, set } => IntStep::PredicateUpdate {
                predicate: predicate.clone(),
                set: set.iter().map(|(c, v)| Ok((*c, int(v)?))).collect::<Result<_, DbError>>()?,
            },
            Step::PredicateDelete { predicate } => IntStep::PredicateDelete { predicate: predicate.clone() },
            Step::Aggregate { predicate, function, column } => {
                IntStep::Aggregate { predicate: predicate.clone(), function: *function, column }
            }
            Step::Statement { .. } => return Err(DbError::unexpected(
                "a step",
                "a scenario's own SQL statement: this database's adapter records the workload's steps only",
            )),
            Step::Append { key, element } => IntStep::Append { key: *key, element: *element },
        })
    }
}

impl From<IntStep> for Step {
    fn from(step: IntStep) -> Self {
        match step {
            IntStep::Read { key } => Step::Read { key },
            IntStep::Upsert { row } => Step::Upsert { row: int_row(row) },
            IntStep::Insert { row } => Step::Insert { row: int_row(row) },
            IntStep::Update { row } => Step::Update { row: int_row(row) },
            IntStep::Delete { key } => Step::Delete { key },
            IntStep::Select { predicate } => Step::Select { predicate },
            IntStep::PredicateUpdate { predicate, set } => Step::PredicateUpdate {
                predicate,
                set: set.into_iter().map(|(c, v)| (c, Scalar::Int(v))).collect(),
            },
            IntStep::PredicateDelete { predicate } => Step::PredicateDelete { predicate },
            IntStep::Aggregate { predicate, function, column } => {
                Step::Aggregate { predicate, function, column }
            }
            IntStep::Statement { sql, write } => Step::Statement {
                sql,
                write: match write {
                    StatementWrite::Update { predicate, set } => StatementWrite::Update {
                        predicate,
                        set: set.into_iter().map(|(c, v)| (c, Scalar::Int(v))).collect(),
                    },
                    StatementWrite::Insert => StatementWrite::Insert,
                    StatementWrite::ExprUpdate { predicate, set, excluded } => {
                        StatementWrite::ExprUpdate { predicate, set, excluded }
                    }
                },
            },
            IntStep::Append { key, element } => Step::Append { key, element },
        }
    }
}

impl From<IntOp> for RecordedOp {
    fn from(op: IntOp) -> Self {
        match op {
            IntOp::Read { key, row } => RecordedOp::Read { key, row: row.map(int_row) },
            IntOp::Write { key, row } => RecordedOp::Write { key, row: row.map(int_row) },
            IntOp::Select { predicate, rows } => {
                RecordedOp::Select { predicate, rows: rows.into_iter().map(int_row).collect() }
            }
            IntOp::Update { predicate, set, rows } => RecordedOp::Update {
                predicate,
                set: set.into_iter().map(|(c, v)| (c, Scalar::Int(v))).collect(),
                rows: rows.into_iter().map(int_row).collect(),
            },
            IntOp::Delete { predicate, keys } => RecordedOp::Delete { predicate, keys },
            IntOp::Aggregate { predicate, function, column, result } => {
                RecordedOp::Aggregate { predicate, function, column, result }
            }
            IntOp::Append { key, element } => RecordedOp::Append { key, element },
            IntOp::ExprUpdate { predicate, set, excluded, rows } => RecordedOp::ExprUpdate {
                predicate,
                set,
                excluded,
                rows: rows.into_iter().map(int_row).collect(),
            },
        }
    }
}

/// Refuses a table with a column that is not an integer, for the adapters that record
/// integer columns only.
///
/// # Errors
/// [`DbError`] (fatal) naming the table, the column and its type.
pub fn integer_table(table: &TableSpec) -> Result<(), DbError> {
    match table.columns.iter().enumerate().find(|(i, _)| table.column_type(*i) != ColumnType::Integer) {
        None => Ok(()),
        Some((i, c)) => Err(DbError::unexpected(
            &format!("table {}", table.name),
            format!(
                "column {c} is of type {}: this database's adapter records integer columns only",
                table.column_type(i).as_str()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_has_one_canonical_form_whatever_the_source() {
        use ColumnType::*;
        // What the client writes (a literal) and what the database answers (text, a typed
        // binary log value) meet in one form.
        assert_eq!(Numeric.canonical(Scalar::Int(10)), Ok(Scalar::Float(10.0)));
        assert_eq!(Numeric.parse("10.00"), Ok(Scalar::Float(10.0)));
        assert_eq!(Numeric.parse("-0.5"), Ok(Scalar::Float(-0.5)));
        assert!(Numeric.parse("1234567890.1234567").unwrap_err().contains("15 significant digits"));
        assert_eq!(Numeric.parse("100000000000000000000"), Ok(Scalar::Float(1e20)));
        assert!(Numeric.parse("NaN").unwrap_err().contains("is not a value of type numeric"));
        assert_eq!(Float.parse("0.1"), Ok(Scalar::Float(0.1)));
        assert_eq!(Boolean.parse("t"), Ok(Scalar::Bool(true)));
        assert_eq!(Boolean.parse("0"), Ok(Scalar::Bool(false)));
        assert_eq!(Boolean.canonical(Scalar::Int(1)), Ok(Scalar::Bool(true)));
        assert!(Boolean.canonical(Scalar::Int(2)).is_err());
        assert_eq!(Text.parse("it's"), Ok(Scalar::Text("it's".into())));
        assert!(Integer.canonical(Scalar::Text("1".into())).is_err());
        assert!(Integer.parse("1.5").is_err());
        assert_eq!(Text.canonical(Scalar::Null), Ok(Scalar::Null));
    }

    #[test]
    fn literals_quote_text_for_each_dialect() {
        let t = Scalar::Text("a'b\\c".into());
        assert_eq!(sql_literal(&t, false), "'a''b\\c'");
        assert_eq!(sql_literal(&t, true), "'a''b\\\\c'");
        assert_eq!(sql_literal(&Scalar::Float(-2.5), false), "-2.5");
        assert_eq!(sql_literal(&Scalar::Bool(true), true), "TRUE");
        assert_eq!(sql_literal(&Scalar::Null, true), "NULL");
    }

    #[test]
    fn integer_only_adapters_refuse_other_values_by_name() {
        let step = Step::Upsert { row: vec![Scalar::Int(1), Scalar::Text("x".into())] };
        let e = step.integers().unwrap_err().to_string();
        assert!(e.contains("\"x\" is not an integer"), "{e}");
        let step = Step::Upsert { row: int_row(vec![1, 2]) };
        assert_eq!(step.integers().unwrap(), IntStep::Upsert { row: vec![1, 2] });
        let table = TableSpec {
            name: "t",
            columns: &["id", "name"],
            types: &[ColumnType::Integer, ColumnType::Text],
            partitioned: false,
        };
        let e = integer_table(&table).unwrap_err().to_string();
        assert!(e.contains("column name is of type text"), "{e}");
        assert!(integer_table(&TableSpec::integers("t", &["id", "v"])).is_ok());
    }
}
