//! A scenario's SQL as what the runner does with it: transaction control, a statement the
//! test client records (a [`Step`] of the seam: the adapter runs its own equivalent
//! statement and records what the database answered with its facts), or SQL run as
//! written and listed as unrecorded.
//!
//! Recorded, on any of the scenario's recordable tables (integer columns, one integer
//! primary key; see [`find_tables`]):
//! - `SELECT * | cols FROM t [WHERE p]` → an item read (`WHERE pk = N`) or a predicate read;
//!   `SELECT count(*) | count(c) | sum(c) | min(c) | max(c) FROM t [WHERE p]` → an aggregate;
//! - `INSERT INTO t [(cols)] VALUES (...), ...` with every column an integer literal;
//! - `UPDATE t SET c = N, ... [WHERE p]` with integer constants;
//! - `DELETE FROM t [WHERE p]`.
//!
//! Not recorded (run as written): anything with a join, subquery, `GROUP BY`, `ORDER BY`
//! with `LIMIT`, locking clauses (`FOR UPDATE`/`FOR SHARE`: the locks differ from a plain
//! read), `RETURNING`, `ON CONFLICT`, expressions in `SET`, a predicate isocert's oracle
//! cannot evaluate; statements on tables that are not recordable; DDL; anything sqlparser
//! cannot parse.

use isocert_adapters::{ColumnType, IsolationLevel, StatementWrite, Step};
use isocert_history::{AggregateFn, Dialect, History, Scalar};
use isocert_oracle::Interpreter;

pub use crate::split::split_statements;
pub use crate::tables::{column_type, find_tables, survey_tables, ScenarioTable, SkippedTable};
use sqlparser::ast::{
    AssignmentTarget, BinaryOperator, DoUpdate, Expr, FromTable, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, ObjectName, ObjectNamePart, OnConflict, OnConflictAction, OnInsert,
    Query, SelectItem, Set, SetExpr, Statement, TableFactor, TableObject, TableWithJoins,
    TransactionIsolationLevel, TransactionMode, UnaryOperator, Value,
};
use sqlparser::dialect::{MySqlDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;

/// What an unrecorded statement may do to the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing the history would hold (`SET`, `SHOW`, DDL of other objects, `SELECT 1`).
    None,
    /// It may read or write the recorded table, or something else, unseen: the verdict is
    /// partial.
    Unseen,
    /// It writes a recorded table: the version order holds writes the history lacks, so
    /// the permutation cannot be certified.
    WritesTable,
}

/// What the runner does with one statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `BEGIN` / `START TRANSACTION`, with a level if it names one.
    Begin(Option<IsolationLevel>),
    /// `SET TRANSACTION ISOLATION LEVEL ...`: the level of the open or next transaction.
    SetLevel(IsolationLevel),
    /// `COMMIT` / `END`.
    Commit,
    /// `ROLLBACK` / `ABORT`.
    Rollback,
    /// A recorded statement on one of the recorded tables.
    Record(ScenarioTable, Step),
    /// SQL run as written.
    Raw {
        /// The statement.
        sql: String,
        /// What it may do.
        effect: Effect,
        /// Why it is not recorded (empty for [`Effect::None`]).
        why: String,
    },
}

pub(crate) fn parse_one(sql: &str, dialect: Dialect) -> Option<Statement> {
    let parsed = match dialect {
        Dialect::Postgres => Parser::parse_sql(&PostgreSqlDialect {}, sql),
        Dialect::Mysql => Parser::parse_sql(&MySqlDialect {}, sql),
        // Scenarios are SQL; a MongoDB history has no SQL statements to translate.
        Dialect::Mongodb => return None,
        // Scenarios are SQL; a Dgraph history's predicates are DQL filters.
        Dialect::Dgraph => return None,
    };
    let mut statements = parsed.ok()?;
    (statements.len() == 1).then(|| statements.remove(0))
}

pub(crate) fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(id) => Some(id.value.to_ascii_lowercase()),
        _ => None,
    }
}

fn level(l: &TransactionIsolationLevel) -> Option<IsolationLevel> {
    match l {
        TransactionIsolationLevel::Serializable => Some(IsolationLevel::Serializable),
        TransactionIsolationLevel::RepeatableRead | TransactionIsolationLevel::Snapshot => {
            Some(IsolationLevel::RepeatableRead)
        }
        // PostgreSQL runs READ UNCOMMITTED as READ COMMITTED; isocert records it so.
        TransactionIsolationLevel::ReadCommitted | TransactionIsolationLevel::ReadUncommitted => {
            Some(IsolationLevel::ReadCommitted)
        }
    }
}

fn mode_level(modes: &[TransactionMode]) -> Option<IsolationLevel> {
    modes.iter().find_map(|m| match m {
        TransactionMode::IsolationLevel(l) => level(l),
        _ => None,
    })
}

fn integer(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => integer(expr).map(|n| -n),
        Expr::Nested(e) => integer(e),
        _ => None,
    }
}

/// A literal (a number, a quoted string, `TRUE`/`FALSE`, `NULL`, a negated number) as a
/// value of column type `ty` in canonical form; `None` for anything else or a literal of
/// another type (text in an integer column: the database would convert it, isocert does
/// not guess how).
fn literal(e: &Expr, ty: ColumnType) -> Option<Scalar> {
    let scalar = match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => match n.parse::<i64>() {
                Ok(i) => Scalar::Int(i),
                Err(_) if matches!(ty, ColumnType::Float | ColumnType::Numeric) => ty.parse(n).ok()?,
                Err(_) => return None,
            },
            // sqlparser keeps an E'...' string's text with its escapes resolved.
            Value::SingleQuotedString(t) | Value::EscapedStringLiteral(t) if ty == ColumnType::Text => {
                Scalar::Text(t.as_str().into())
            }
            Value::Boolean(b) => Scalar::Bool(*b),
            Value::Null => Scalar::Null,
            _ => return None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => match literal(expr, ty)? {
            Scalar::Int(i) => Scalar::Int(-i),
            Scalar::Float(f) => Scalar::Float(-f),
            _ => return None,
        },
        Expr::Nested(e) => return literal(e, ty),
        _ => return None,
    };
    ty.canonical(scalar).ok()
}

pub(crate) fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(id) => Some(id.value.to_ascii_lowercase()),
        Expr::CompoundIdentifier(ids) => ids.last().map(|id| id.value.to_ascii_lowercase()),
        _ => None,
    }
}

/// The statement's single table, if it names exactly one plain table without joins.
fn single_table(from: &[TableWithJoins]) -> Option<String> {
    let [t] = from else { return None };
    if !t.joins.is_empty() {
        return None;
    }
    match &t.relation {
        TableFactor::Table { name, args: None, .. } => last_name(name),
        _ => None,
    }
}

/// Translates statements for the recorded tables.
#[derive(Debug)]
pub struct Translator {
    tables: Vec<ScenarioTable>,
    dialect: Dialect,
}

impl Translator {
    /// A translator recording on `tables` (none: nothing is recorded), in `dialect`.
    pub fn new(tables: Vec<ScenarioTable>, dialect: Dialect) -> Self {
        Translator { tables, dialect }
    }

    /// The actions of an SQL block, one per statement.
    pub fn block(&self, sql: &str) -> Vec<Action> {
        split_statements(sql, self.dialect).into_iter().map(|s| self.statement(&s)).collect()
    }

    fn raw(&self, sql: &str, effect: Effect, why: &str) -> Action {
        Action::Raw {
            sql: sql.to_string(),
            effect,
            why: if effect == Effect::None { String::new() } else { why.to_string() },
        }
    }

    /// The action of one statement.
    pub fn statement(&self, sql: &str) -> Action {
        // PostgreSQL's spellings sqlparser does not know.
        let lower = sql.trim().to_ascii_lowercase();
        match lower.as_str() {
            "abort" | "abort work" | "abort transaction" => return Action::Rollback,
            "end" | "end work" | "end transaction" => return Action::Commit,
            _ => {}
        }
        // Maintenance changes no row's contents (a reproducer's maintenance session, `isocert
        // hunt`): nothing the history would hold.
        let words: Vec<&str> = lower.split_whitespace().take(2).collect();
        if matches!(words.first(), Some(&("vacuum" | "analyze" | "analyse" | "checkpoint" | "reindex")))
            || words == ["drop", "index"]
        {
            return self.raw(sql, Effect::None, "");
        }
        let Some(statement) = parse_one(sql, self.dialect) else {
            return self.raw(sql, self.unparsed_effect(sql), "sqlparser cannot parse it");
        };
        match &statement {
            Statement::StartTransaction { modes, .. } => Action::Begin(mode_level(modes)),
            Statement::Set(Set::SetTransaction { modes, session: false, .. }) => match mode_level(modes) {
                Some(l) => Action::SetLevel(l),
                None => self.raw(sql, Effect::None, ""),
            },
            Statement::Commit { .. } => Action::Commit,
            Statement::Rollback { savepoint: None, .. } => Action::Rollback,
            // The history cannot take back what a recorded statement did.
            Statement::Rollback { savepoint: Some(_), .. } if !self.tables.is_empty() => {
                self.raw(sql, Effect::WritesTable, "ROLLBACK TO SAVEPOINT undoes recorded statements")
            }
            Statement::Merge { .. } | Statement::Truncate { .. } => {
                self.raw(sql, self.unparsed_effect(sql), "MERGE or TRUNCATE")
            }
            Statement::Query(q) => self.query(sql, q),
            Statement::Insert(insert) => self.insert(sql, insert),
            Statement::Update { table, assignments, from, selection, returning, limit, .. } => {
                let Some(name) = single_table(std::slice::from_ref(table)) else {
                    return self.raw(sql, Effect::Unseen, "an UPDATE of a join");
                };
                let Some(t) = self.ours(&name) else { return self.elsewhere(sql, &name) };
                if from.is_some() || returning.is_some() || limit.is_some() {
                    return self.raw(sql, Effect::WritesTable, "UPDATE with FROM, RETURNING or LIMIT");
                }
                // The rows it writes are recorded as the database returns them, so an
                // assignment may be any expression over the row (`v = v + 5`, CASE, `||`);
                // the constants are kept in the record's `set`.
                let mut set = Vec::new();
                for a in assignments {
                    let AssignmentTarget::ColumnName(c) = &a.target else {
                        return self.raw(sql, Effect::WritesTable, "a tuple assignment");
                    };
                    let Some(col) = last_name(c).and_then(|c| self.column(&t, &c)) else {
                        return self.raw(sql, Effect::WritesTable, "SET of a column the table does not have");
                    };
                    if col == t.spec.pk() {
                        return self.raw(sql, Effect::WritesTable, "an UPDATE of the primary key");
                    }
                    if reads_elsewhere(&a.value) {
                        return self.raw(
                            sql,
                            Effect::WritesTable,
                            "SET of a subquery (it reads unrecorded rows)",
                        );
                    }
                    match literal(&a.value, t.spec.type_of(col)) {
                        Some(v) => set.push((col, v)),
                        // isocert does not guess how the database converts '10' into a
                        // number, nor rounds a numeric: the write could not be compared.
                        None if is_literal(&a.value) => {
                            return self.raw(
                                sql,
                                Effect::WritesTable,
                                "SET of a constant that is not a literal of the column's type",
                            )
                        }
                        None => {}
                    }
                }
                match self.predicate(&t, selection.as_ref()) {
                    Ok(predicate) => Action::Record(
                        t,
                        Step::Statement {
                            sql: sql.to_string(),
                            write: StatementWrite::Update { predicate, set },
                        },
                    ),
                    Err(why) => self.raw(sql, Effect::WritesTable, &why),
                }
            }
            Statement::Delete(delete) => {
                let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
                let Some(name) = single_table(from) else {
                    return self.raw(sql, Effect::Unseen, "a DELETE of several tables");
                };
                let Some(t) = self.ours(&name) else { return self.elsewhere(sql, &name) };
                if t.spec.partitioned {
                    // PostgreSQL cannot return the deleted version's xmin from a partitioned table.
                    return self.raw(sql, Effect::WritesTable, "a DELETE on a partitioned table");
                }
                if delete.using.is_some() || delete.returning.is_some() || delete.limit.is_some() {
                    return self.raw(sql, Effect::WritesTable, "DELETE with USING, RETURNING or LIMIT");
                }
                if let Some(key) = self.key_equality(&t, delete.selection.as_ref()) {
                    return Action::Record(t, Step::Delete { key });
                }
                match self.predicate(&t, delete.selection.as_ref()) {
                    Ok(predicate) => Action::Record(t, Step::PredicateDelete { predicate }),
                    Err(why) => self.raw(sql, Effect::WritesTable, &why),
                }
            }
            Statement::CreateTable(c) if last_name(&c.name).is_some_and(|n| self.ours(&n).is_some()) => {
                self.raw(sql, Effect::WritesTable, "DDL of the recorded table")
            }
            Statement::Set(_)
            | Statement::ShowVariable { .. }
            | Statement::CreateTable(_)
            | Statement::CreateIndex(_) => self.raw(sql, Effect::None, ""),
            _ => self.raw(sql, Effect::Unseen, "outside the recordable subset"),
        }
    }

    /// An unparsable statement that names a recorded table may write it, unless it is a
    /// `SELECT` (sqlparser does not read `FOR KEY SHARE`, `FOR NO KEY UPDATE`, `SKIP LOCKED`)
    /// or a `LOCK`: those take locks and read, never write.
    fn unparsed_effect(&self, sql: &str) -> Effect {
        let lower = sql.to_ascii_lowercase();
        let first = lower.split_whitespace().next().unwrap_or_default();
        if first == "select" || first == "lock" {
            return Effect::Unseen;
        }
        let names_one = lower
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| self.tables.iter().any(|t| t.spec.name == w));
        if names_one {
            Effect::WritesTable
        } else {
            Effect::Unseen
        }
    }

    /// A statement on a table (or view, or catalog) that is not recorded: what it reads or
    /// writes is outside the history.
    fn elsewhere(&self, sql: &str, name: &str) -> Action {
        let why = match name.starts_with("pg_") || name.starts_with("information_schema") {
            true => "a statement on a catalog",
            false => "a statement on a table that is not recorded",
        };
        self.raw(sql, Effect::Unseen, why)
    }

    fn ours(&self, name: &str) -> Option<ScenarioTable> {
        self.tables.iter().copied().find(|t| t.spec.name == name)
    }

    fn column(&self, t: &ScenarioTable, name: &str) -> Option<&'static str> {
        t.spec.columns.iter().copied().find(|c| *c == name)
    }

    fn key_equality(&self, t: &ScenarioTable, selection: Option<&Expr>) -> Option<i64> {
        let Some(Expr::BinaryOp { left, op: BinaryOperator::Eq, right }) = selection else { return None };
        let pk = t.spec.pk();
        match (column_name(left), column_name(right)) {
            (Some(c), _) if c == pk => integer(right),
            (_, Some(c)) if c == pk => integer(left),
            _ => None,
        }
    }

    /// The `WHERE` text, if isocert's oracle can evaluate it on the table.
    fn predicate(&self, t: &ScenarioTable, selection: Option<&Expr>) -> Result<String, String> {
        let text = selection.map_or_else(|| "true".to_string(), ToString::to_string);
        let mut h = History::new();
        h.dialect = self.dialect;
        let table = h.intern_table(t.spec.name);
        for c in t.spec.columns {
            h.intern_column(table, c);
        }
        h.intern_predicate(table, &text);
        Interpreter::new(&h)
            .map(|_| text)
            .map_err(|e| format!("the oracle cannot evaluate the predicate ({e})"))
    }

    fn query(&self, sql: &str, q: &Query) -> Action {
        // A data-modifying WITH (`WITH w AS (INSERT ... RETURNING ...) SELECT ...`) writes
        // whatever its outer query reads.
        let modifies = q.with.as_ref().is_some_and(|w| {
            w.cte_tables.iter().any(|cte| {
                matches!(
                    cte.query.body.as_ref(),
                    SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_)
                )
            })
        });
        if modifies {
            return self.raw(
                sql,
                self.unparsed_effect(sql),
                "a WITH that writes (INSERT, UPDATE, DELETE or MERGE)",
            );
        }
        let SetExpr::Select(select) = q.body.as_ref() else {
            return self.raw(sql, Effect::Unseen, "a query that is not a plain SELECT");
        };
        let Some(name) = single_table(&select.from) else {
            return match select.from.is_empty() {
                true => self.raw(sql, Effect::None, ""),
                false => self.raw(sql, Effect::Unseen, "a join or a table function"),
            };
        };
        let Some(t) = self.ours(&name) else { return self.elsewhere(sql, &name) };
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
        if q.with.is_some()
            || !q.locks.is_empty()
            || q.limit_clause.is_some()
            || q.fetch.is_some()
            || grouped
            || select.having.is_some()
            || select.distinct.is_some()
        {
            return self.raw(sql, Effect::Unseen, "WITH, FOR UPDATE/SHARE, LIMIT, GROUP BY or DISTINCT");
        }
        if let [SelectItem::UnnamedExpr(Expr::Function(f))
        | SelectItem::ExprWithAlias { expr: Expr::Function(f), .. }] = select.projection.as_slice()
        {
            let function = match last_name(&f.name).as_deref() {
                Some("count") => AggregateFn::Count,
                Some("sum") => AggregateFn::Sum,
                Some("min") => AggregateFn::Min,
                Some("max") => AggregateFn::Max,
                _ => return self.raw(sql, Effect::Unseen, "a function other than count, sum, min or max"),
            };
            let column = match &f.args {
                FunctionArguments::List(list)
                    if list.duplicate_treatment.is_none() && list.args.len() == 1 =>
                {
                    match &list.args[0] {
                        FunctionArg::Unnamed(FunctionArgExpr::Wildcard) if function == AggregateFn::Count => {
                            Some(t.spec.pk())
                        }
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                            column_name(e).and_then(|c| self.column(&t, &c))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            let Some(column) = column else {
                return self.raw(sql, Effect::Unseen, "an aggregate of something other than one column");
            };
            // The recorded result is an integer; MySQL's aggregate step also reads the last
            // column of each row as an integer (InnoDB's recovery facts).
            let counted = function == AggregateFn::Count || t.spec.type_of(column) == ColumnType::Integer;
            let last_integer = t.spec.column_type(t.spec.columns.len() - 1) == ColumnType::Integer;
            if !counted || (self.dialect == Dialect::Mysql && !last_integer) {
                return self.raw(sql, Effect::Unseen, "an aggregate over a column that is not an integer");
            }
            return match self.predicate(&t, select.selection.as_ref()) {
                Ok(predicate) => Action::Record(t, Step::Aggregate { predicate, function, column }),
                Err(why) => self.raw(sql, Effect::Unseen, &why),
            };
        }
        let plain = select.projection.iter().all(|item| match item {
            SelectItem::Wildcard(_) => true,
            SelectItem::UnnamedExpr(e) => column_name(e).is_some_and(|c| self.column(&t, &c).is_some()),
            _ => false,
        });
        if !plain {
            return self.raw(sql, Effect::Unseen, "a projection of something other than the table's columns");
        }
        if let Some(key) = self.key_equality(&t, select.selection.as_ref()) {
            return Action::Record(t, Step::Read { key });
        }
        match self.predicate(&t, select.selection.as_ref()) {
            Ok(predicate) => Action::Record(t, Step::Select { predicate }),
            Err(why) => self.raw(sql, Effect::Unseen, &why),
        }
    }

    fn insert(&self, sql: &str, insert: &sqlparser::ast::Insert) -> Action {
        let TableObject::TableName(name) = &insert.table else {
            return self.raw(sql, Effect::Unseen, "INSERT into a table function");
        };
        let Some(name) = last_name(name) else {
            return self.raw(sql, Effect::Unseen, "INSERT into an unnamed table");
        };
        let Some(t) = self.ours(&name) else { return self.elsewhere(sql, &name) };
        if insert.returning.is_some() || insert.ignore || insert.replace_into {
            return self.raw(sql, Effect::WritesTable, "INSERT with RETURNING, IGNORE or REPLACE");
        }
        let statement =
            Action::Record(t, Step::Statement { sql: sql.to_string(), write: StatementWrite::Insert });
        match &insert.on {
            None => {}
            // The rows it installs are returned; a row it skips installs nothing.
            Some(OnInsert::OnConflict(OnConflict { action: OnConflictAction::DoNothing, .. }))
                if self.dialect == Dialect::Postgres => {}
            // An unconditional update of the conflicting row: recorded as the write of the
            // row it returns. What it computes from the row it replaces (`v = t.v + 1`) is a
            // read of that row's newest version, which it locks and replaces: the version
            // order's edge from that version's writer already orders the two as the read
            // would, and no other version can come between.
            Some(OnInsert::OnConflict(OnConflict {
                action: OnConflictAction::DoUpdate(DoUpdate { assignments, selection: None }),
                ..
            })) if self.dialect == Dialect::Postgres
                && !assignments.iter().any(|a| reads_elsewhere(&a.value)) => {}
            // `DO UPDATE ... WHERE` reads the conflicting row and may leave it: a read the
            // record would not show. MySQL's ON DUPLICATE KEY UPDATE returns no rows.
            Some(_) => {
                return self.raw(
                    sql,
                    Effect::WritesTable,
                    "INSERT ... ON CONFLICT DO UPDATE ... WHERE or ON DUPLICATE KEY UPDATE",
                )
            }
        }
        let Some(source) = insert.source.as_deref() else {
            return self.raw(sql, Effect::WritesTable, "INSERT ... DEFAULT VALUES");
        };
        let values = match source.body.as_ref() {
            SetExpr::Values(values) if source.with.is_none() => values,
            // `INSERT ... SELECT` of values (no FROM): recorded from what it returned; one
            // that reads a table reads rows the record would not show.
            SetExpr::Select(select)
                if source.with.is_none()
                    && select.from.is_empty()
                    && !select.projection.iter().any(reads_elsewhere_item) =>
            {
                return statement
            }
            _ => return self.raw(sql, Effect::WritesTable, "INSERT ... SELECT reading a table"),
        };
        if values.rows.iter().flatten().any(reads_elsewhere) {
            return self.raw(sql, Effect::WritesTable, "INSERT of a subquery (it reads unrecorded rows)");
        }
        if insert.on.is_some() {
            return statement;
        }
        let columns: Vec<Option<&'static str>> = if insert.columns.is_empty() {
            // Without a column list the values follow the table's definition, which
            // `find_table` reordered to put the key first: only the key-first layout is known.
            t.spec.columns.iter().map(|c| Some(*c)).collect()
        } else {
            insert.columns.iter().map(|c| self.column(&t, &c.value.to_ascii_lowercase())).collect()
        };
        // One row of literals for every column: the seam's own insert. Anything else
        // (several rows, expressions, defaults) runs as written, recorded from what it
        // returned.
        for row in &values.rows {
            for (c, e) in columns.iter().zip(row) {
                let Some(c) = c else { continue };
                if is_literal(e) && literal(e, t.spec.type_of(c)).is_none() {
                    return self.raw(
                        sql,
                        Effect::WritesTable,
                        "a value that is not a literal of its column's type",
                    );
                }
            }
        }
        let [row] = values.rows.as_slice() else { return statement };
        if columns.len() != t.spec.columns.len()
            || columns.iter().any(Option::is_none)
            || row.len() != columns.len()
        {
            return statement;
        }
        let mut full = vec![Scalar::Null; t.spec.columns.len()];
        for (c, e) in columns.iter().zip(row) {
            let i = t.spec.columns.iter().position(|x| Some(*x) == *c).expect("a column of the table");
            match literal(e, t.spec.column_type(i)) {
                Some(v) if i > 0 || matches!(v, Scalar::Int(_)) => full[i] = v,
                _ => return statement,
            }
        }
        Action::Record(t, Step::Insert { row: full })
    }
}

/// Whether an expression is a constant as written (a number, a string, `TRUE`, `NULL`, a
/// negated number).
fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(_) => true,
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } | Expr::Nested(expr) => is_literal(expr),
        _ => false,
    }
}

/// Whether an expression reads rows through a subquery (`(SELECT ...)`, `EXISTS`, `IN
/// (SELECT ...)`), which the record of the statement would not show.
fn reads_elsewhere(e: &Expr) -> bool {
    e.to_string()
        .to_ascii_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w == "select")
}

fn reads_elsewhere_item(item: &SelectItem) -> bool {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => reads_elsewhere(e),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_adapters::int_row;

    fn tables() -> Vec<ScenarioTable> {
        find_tables(
            &["CREATE TABLE t (v int NOT NULL, id int PRIMARY KEY, c int); \
               CREATE TABLE w (a int PRIMARY KEY, b point); \
               CREATE TABLE u (a int, b bigint, PRIMARY KEY (b))"
                .to_string()],
            Dialect::Postgres,
        )
    }

    fn table() -> ScenarioTable {
        tables()[0]
    }

    #[test]
    fn serial_columns_and_covering_keys_are_recordable() {
        let found = find_tables(
            &["CREATE TABLE s (id serial PRIMARY KEY, n bigserial); \
               CREATE TABLE c (key int, value int, PRIMARY KEY (key) INCLUDE (value))"
                .to_string()],
            Dialect::Postgres,
        );
        let found: Vec<(&str, &[&str])> = found.iter().map(|t| (t.spec.name, t.spec.columns)).collect();
        assert_eq!(found, [("s", &["id", "n"][..]), ("c", &["key", "value"][..])]);
        assert_eq!(crate::tables::without_include("a INCLUDE (b, c)) included_x"), "a ) included_x");
    }

    #[test]
    fn every_recordable_table_is_found_with_its_key_first() {
        let found: Vec<(&str, &[&str])> = tables().iter().map(|t| (t.spec.name, t.spec.columns)).collect();
        // w has a point column: not recordable.
        assert_eq!(found, [("t", &["id", "v", "c"][..]), ("u", &["b", "a"][..])]);
        let (_, skipped) = survey_tables(
            &["CREATE TABLE w (a int PRIMARY KEY, b point); CREATE TABLE x (a int); \
               CREATE TABLE s.y (a int PRIMARY KEY); CREATE TEMP TABLE z (a int PRIMARY KEY); \
               CREATE TABLE p (a int, b int, PRIMARY KEY (a, b)); \
               CREATE TABLE parent (a int PRIMARY KEY); CREATE TABLE child (b int) INHERITS (parent)"
                .to_string()],
            Dialect::Postgres,
        );
        let why: Vec<(&str, &str)> = skipped.iter().map(|s| (s.table.as_str(), s.why.as_str())).collect();
        assert_eq!(
            why,
            [
                ("w", "a column of a type isocert does not record (point): column b"),
                ("x", "no primary key and no unique integer column"),
                ("s.y", "a table in a named schema"),
                ("z", "a temporary table (other sessions cannot read it)"),
                ("p", "a primary key of several columns"),
                ("child", "it inherits from another table"),
                ("parent", "it has child tables (INHERITS)"),
            ]
        );
    }

    #[test]
    fn statements_become_steps_or_stay_raw_with_a_reason() {
        let tr = Translator::new(tables(), Dialect::Postgres);
        let t = table();
        let actions = tr.block(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM t WHERE id = 1; \
             SELECT * FROM t WHERE v > 5; SELECT count(*) FROM t WHERE c = 2; \
             INSERT INTO t (id, v, c) VALUES (3, 30, -1); UPDATE t SET v = 11 WHERE id = 1; \
             DELETE FROM t WHERE id = 2; DELETE FROM t WHERE v < 0; COMMIT",
        );
        assert_eq!(actions[0], Action::Begin(Some(IsolationLevel::RepeatableRead)));
        assert_eq!(actions[1], Action::Record(t, Step::Read { key: 1 }));
        assert_eq!(actions[2], Action::Record(t, Step::Select { predicate: "v > 5".into() }));
        assert_eq!(
            actions[3],
            Action::Record(
                t,
                Step::Aggregate { predicate: "c = 2".into(), function: AggregateFn::Count, column: "id" }
            )
        );
        assert_eq!(actions[4], Action::Record(t, Step::Insert { row: int_row(vec![3, 30, -1]) }));
        assert_eq!(
            actions[5],
            Action::Record(
                t,
                Step::Statement {
                    sql: "UPDATE t SET v = 11 WHERE id = 1".into(),
                    write: StatementWrite::Update {
                        predicate: "id = 1".into(),
                        set: vec![("v", Scalar::Int(11))]
                    }
                }
            )
        );
        assert_eq!(actions[6], Action::Record(t, Step::Delete { key: 2 }));
        assert_eq!(actions[7], Action::Record(t, Step::PredicateDelete { predicate: "v < 0".into() }));
        assert_eq!(actions[8], Action::Commit);
        let raw = |sql: &str| match tr.statement(sql) {
            Action::Raw { effect, why, .. } => (effect, why),
            other => panic!("{sql}: {other:?}"),
        };
        // Expressions, several rows, INSERT ... SELECT of values, ON CONFLICT: recorded from
        // what the database returns (issue 29).
        let statement = |sql: &str| match tr.statement(sql) {
            Action::Record(_, Step::Statement { write, .. }) => write,
            other => panic!("{sql}: {other:?}"),
        };
        assert_eq!(
            statement("UPDATE t SET v = v + 5, c = 1 WHERE id = 2"),
            StatementWrite::Update { predicate: "id = 2".into(), set: vec![("c", Scalar::Int(1))] }
        );
        assert_eq!(
            statement("UPDATE t SET v = CASE WHEN v > 1 THEN 0 ELSE 1 END"),
            StatementWrite::Update { predicate: "true".into(), set: vec![] }
        );
        assert_eq!(statement("INSERT INTO t VALUES (1, 2, 3), (4, 5, 6)"), StatementWrite::Insert);
        assert_eq!(statement("INSERT INTO t SELECT 7, 8, 9"), StatementWrite::Insert);
        assert_eq!(statement("INSERT INTO t (id, v) VALUES (9, 9)"), StatementWrite::Insert);
        assert_eq!(
            statement("INSERT INTO t VALUES (1, 2, 3) ON CONFLICT DO NOTHING"),
            StatementWrite::Insert
        );
        assert_eq!(
            statement("INSERT INTO t VALUES (1, 2, 3) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v + 1"),
            StatementWrite::Insert
        );
        assert_eq!(
            statement("INSERT INTO t VALUES (1, 2, 3) ON CONFLICT (id) DO UPDATE SET v = t.v + 1"),
            StatementWrite::Insert
        );
        assert_eq!(
            raw("INSERT INTO t VALUES (1, 2, 3) ON CONFLICT (id) DO UPDATE SET v = 1 WHERE t.v > 0").0,
            Effect::WritesTable
        );
        assert_eq!(raw("INSERT INTO t SELECT id, v, c FROM u").0, Effect::WritesTable);
        assert_eq!(
            raw("WITH w AS (INSERT INTO t VALUES (1, 2, 3) RETURNING id) SELECT * FROM w").0,
            Effect::WritesTable
        );
        assert_eq!(raw("WITH w AS (SELECT * FROM t) SELECT * FROM w").0, Effect::Unseen);
        assert_eq!(raw("UPDATE t SET v = (SELECT max(a) FROM u)").0, Effect::WritesTable);
        assert_eq!(raw("UPDATE t SET id = id + 1").0, Effect::WritesTable);
        assert!(raw("SELECT * FROM t WHERE id = 1 FOR UPDATE").1.contains("FOR UPDATE"));
        assert_eq!(raw("SELECT * FROM t JOIN u ON t.id = u.id").0, Effect::Unseen);
        assert_eq!(raw("SET enable_seqscan = off").0, Effect::None);
        for maintenance in [
            "VACUUM kv",
            "ANALYZE kv",
            "CHECKPOINT",
            "REINDEX TABLE CONCURRENTLY kv",
            "DROP INDEX CONCURRENTLY IF EXISTS kv_m",
        ] {
            assert_eq!(raw(maintenance).0, Effect::None, "{maintenance}");
        }
        assert_eq!(raw("SELECT pg_sleep(0.1)").0, Effect::None);
        assert_eq!(raw("DO $$ BEGIN UPDATE t SET v = 1; END $$").0, Effect::WritesTable);
        assert_eq!(raw("SELECT * FROM t WHERE id = 1 FOR KEY SHARE").0, Effect::Unseen);
        assert_eq!(raw("LOCK t IN SHARE MODE").0, Effect::Unseen);
        assert_eq!(raw("ROLLBACK TO SAVEPOINT a").0, Effect::WritesTable);
        assert_eq!(raw("TRUNCATE t").0, Effect::WritesTable);
        assert_eq!(raw("TRUNCATE w").0, Effect::Unseen);
        // Every recordable table is recorded; one that is not makes the verdict partial.
        let u = tables()[1];
        assert_eq!(
            tr.statement("UPDATE u SET a = 3 WHERE b = 2"),
            Action::Record(
                u,
                Step::Statement {
                    sql: "UPDATE u SET a = 3 WHERE b = 2".into(),
                    write: StatementWrite::Update {
                        predicate: "b = 2".into(),
                        set: vec![("a", Scalar::Int(3))]
                    }
                }
            )
        );
        assert_eq!(raw("SELECT * FROM w").0, Effect::Unseen);
        assert_eq!(raw("INSERT INTO w VALUES (1, '(1,2)')").0, Effect::Unseen);
        assert!(raw("SELECT * FROM pg_locks").1.contains("catalog"));
        assert_eq!(
            tr.statement("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
            Action::SetLevel(IsolationLevel::Serializable)
        );
        assert_eq!(tr.statement("START TRANSACTION"), Action::Begin(None));
        assert_eq!(tr.statement("ABORT"), Action::Rollback);
    }

    #[test]
    fn text_numeric_float_and_boolean_columns_are_recorded_as_scalars() {
        let (found, skipped) = survey_tables(
            &["CREATE TABLE acct (id int PRIMARY KEY, name text NOT NULL, tag varchar(10), \
                 balance numeric(10,2), rate double precision, open boolean); \
               CREATE TABLE k (name text PRIMARY KEY, n int); CREATE TABLE c (id int PRIMARY KEY, code char(3)); \
               CREATE TABLE r (id int PRIMARY KEY, x real)"
                .to_string()],
            Dialect::Postgres,
        );
        let t = found[0];
        assert_eq!(found.len(), 1);
        assert_eq!(t.spec.columns, ["id", "name", "tag", "balance", "rate", "open"]);
        use ColumnType::*;
        assert_eq!(t.spec.types, [Integer, Text, Text, Numeric, Float, Boolean]);
        let why: Vec<(&str, &str)> = skipped.iter().map(|s| (s.table.as_str(), s.why.as_str())).collect();
        assert_eq!(
            why,
            [
                ("k", "a primary key that is not an integer"),
                ("c", "a column of a type isocert does not record (CHAR(3)): column code"),
                ("r", "a column of a type isocert does not record (REAL): column x"),
            ]
        );
        let tr = Translator::new(found.clone(), Dialect::Postgres);
        let text = |s: &str| Scalar::Text(s.into());
        assert_eq!(
            tr.statement("INSERT INTO acct VALUES (1, 'it''s', NULL, 10, -2.5, true)"),
            Action::Record(
                t,
                Step::Insert {
                    row: vec![
                        Scalar::Int(1),
                        text("it's"),
                        Scalar::Null,
                        Scalar::Float(10.0),
                        Scalar::Float(-2.5),
                        Scalar::Bool(true)
                    ]
                }
            )
        );
        assert_eq!(
            tr.statement("UPDATE acct SET name = 'bob', balance = 1.25 WHERE name = 'al'"),
            Action::Record(
                t,
                Step::Statement {
                    sql: "UPDATE acct SET name = 'bob', balance = 1.25 WHERE name = 'al'".into(),
                    write: StatementWrite::Update {
                        predicate: "name = 'al'".into(),
                        set: vec![("name", text("bob")), ("balance", Scalar::Float(1.25))]
                    }
                }
            )
        );
        assert_eq!(
            tr.statement("SELECT * FROM acct WHERE name >= 'b'"),
            Action::Record(t, Step::Select { predicate: "name >= 'b'".into() })
        );
        // An escape string is a text literal (issue 30, item 13).
        match tr.statement(r"UPDATE acct SET name = E'it\'s; fine' WHERE id = 1") {
            Action::Record(_, Step::Statement { write: StatementWrite::Update { set, .. }, .. }) => {
                assert_eq!(set, vec![("name", text("it's; fine"))])
            }
            other => panic!("{other:?}"),
        }
        let raw = |sql: &str| match tr.statement(sql) {
            Action::Raw { effect, why, .. } => (effect, why),
            other => panic!("{sql}: {other:?}"),
        };
        // A literal of another type is not converted: the statement runs unrecorded.
        assert_eq!(raw("UPDATE acct SET name = 5 WHERE id = 1").0, Effect::WritesTable);
        assert_eq!(raw("INSERT INTO acct VALUES (2, 'x', 'y', '10', 1, false)").0, Effect::WritesTable);
        // More digits than a double holds: refused, not rounded.
        assert_eq!(raw("UPDATE acct SET balance = 1234567890.1234567 WHERE id = 1").0, Effect::WritesTable);
        assert!(raw("SELECT sum(balance) FROM acct").1.contains("not an integer"));
        assert_eq!(
            tr.statement("SELECT count(*) FROM acct WHERE open"),
            Action::Record(
                t,
                Step::Aggregate { predicate: "open".into(), function: AggregateFn::Count, column: "id" }
            )
        );
    }

    #[test]
    fn a_unique_integer_column_keys_a_table_without_primary_key_and_partitioned_tables_are_recorded() {
        let tables = find_tables(
            &["CREATE TABLE a (v text, id int UNIQUE); \
               CREATE TABLE b (v int, id int NOT NULL, UNIQUE (id)); \
               CREATE TABLE c (name text, id int); CREATE UNIQUE INDEX c_id ON c (id); \
               CREATE TABLE d (name text, id int); CREATE UNIQUE INDEX d_part ON d (id) WHERE id > 0; \
               CREATE TABLE e (name text UNIQUE, n int); \
               CREATE TABLE p (id int PRIMARY KEY, v text) PARTITION BY RANGE (id); \
               CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (10)"
                .to_string()],
            Dialect::Postgres,
        );
        let found: Vec<(&str, &[&str])> = tables.iter().map(|t| (t.spec.name, t.spec.columns)).collect();
        // d's unique index is partial, e's unique column is text: neither is a key.
        let tr = Translator::new(tables.clone(), Dialect::Postgres);
        assert!(tables[3].spec.partitioned && !tables[0].spec.partitioned);
        match tr.statement("DELETE FROM p WHERE id = 1") {
            Action::Raw { effect: Effect::WritesTable, why, .. } => {
                assert!(why.contains("partitioned"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            found,
            [
                ("a", &["id", "v"][..]),
                ("b", &["id", "v"][..]),
                ("c", &["id", "name"][..]),
                ("p", &["id", "v"][..])
            ]
        );
    }
}
