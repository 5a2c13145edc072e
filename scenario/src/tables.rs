//! The tables a scenario's setup creates, and which of them its statements are recorded on:
//! a one-column integer key (the primary key, or a unique integer column) and columns of the
//! types the seam records.

use isocert_adapters::{ColumnType, TableSpec};
use isocert_history::Dialect;
use sqlparser::ast::{ColumnOption, CreateTable, DataType, Statement, TableConstraint};

use crate::split::split_statements;
use crate::translate::{column_name, last_name, parse_one};

/// A table a scenario's statements are recorded on: one its setup creates with a
/// one-column integer primary key and columns of the types [`column_type`] knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScenarioTable {
    /// Its name and columns, primary key first (the seam's vocabulary).
    pub spec: TableSpec,
}

/// The seam's type of a column declared `t`, or `None` for a type isocert does not record
/// (`char(n)` pads its values, `real` rounds them to single precision, dates, arrays, ...).
pub fn column_type(t: &DataType) -> Option<ColumnType> {
    if is_integer_type(t) {
        return Some(ColumnType::Integer);
    }
    Some(match t {
        DataType::Text | DataType::Varchar(_) | DataType::CharacterVarying(_) | DataType::String(None) => {
            ColumnType::Text
        }
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 => ColumnType::Float,
        DataType::Numeric(_) | DataType::Decimal(_) | DataType::Dec(_) => ColumnType::Numeric,
        DataType::Boolean | DataType::Bool => ColumnType::Boolean,
        DataType::Custom(name, _) if last_name(name).is_some_and(|n| n == "float8") => ColumnType::Float,
        _ => return None,
    })
}

fn is_integer_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int(_)
            | DataType::Integer(_)
            | DataType::BigInt(_)
            | DataType::SmallInt(_)
            | DataType::TinyInt(_)
            | DataType::MediumInt(_)
            | DataType::Int2(_)
            | DataType::Int4(_)
            | DataType::Int8(_)
    ) || matches!(t, DataType::Custom(name, _)
        if last_name(name).is_some_and(|n| matches!(n.as_str(), "serial" | "bigserial" | "smallserial" | "serial2" | "serial4" | "serial8")))
}

/// `sql` without PostgreSQL's `INCLUDE (...)` after a key constraint (covering columns of
/// its index, which sqlparser does not read and which change nothing that is recorded).
pub(crate) fn without_include(sql: &str) -> String {
    let lower = sql.to_ascii_lowercase();
    let mut out = String::new();
    let mut rest = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find("include") {
        let at = from + found;
        let before = lower[..at].chars().next_back();
        let after = lower[at + "include".len()..].trim_start();
        from = at + "include".len();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || !after.starts_with('(') {
            continue;
        }
        let open = lower.len() - after.len();
        let Some(close) = lower[open..].find(')') else { break };
        out.push_str(&sql[rest..at]);
        rest = open + close + 1;
        from = rest;
    }
    out.push_str(&sql[rest..]);
    out
}

/// A table the setup creates that is not recorded, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SkippedTable {
    /// Its name as written.
    pub table: String,
    /// Why it is not recorded (the first reason found).
    pub why: String,
}

/// Every table `setup` creates that the runner can record (see [`ScenarioTable`]), in the
/// order it creates them (a name created twice counts once).
pub fn find_tables(setup: &[String], dialect: Dialect) -> Vec<ScenarioTable> {
    survey_tables(setup, dialect).0
}

/// The tables `setup` creates: those the runner can record (as [`find_tables`]) and the
/// others with the reason.
pub fn survey_tables(setup: &[String], dialect: Dialect) -> (Vec<ScenarioTable>, Vec<SkippedTable>) {
    let mut found: Vec<ScenarioTable> = Vec::new();
    let mut skipped: Vec<SkippedTable> = Vec::new();
    let unique_indexes = unique_indexes(setup, dialect);
    for sql in setup.iter().flat_map(|b| split_statements(b, dialect)) {
        let Some(statement) = parse_one(&without_include(&sql), dialect) else {
            skipped.extend(unparsed_create_table(&sql));
            continue;
        };
        let Statement::CreateTable(create) = statement else { continue };
        match recorded_name_and_key(&create, &unique_indexes) {
            Err(why) => skipped.push(SkippedTable { table: create.name.to_string(), why }),
            Ok((name, _)) if found.iter().any(|t| t.spec.name == name) => {}
            Ok((name, pk)) => found.push(ScenarioTable { spec: table_spec(&create, name, pk) }),
        }
    }
    drop_inheritance_parents(&mut found, &mut skipped, setup, dialect);
    (found, skipped)
}

/// The one-column unique indexes `setup` creates, as (table, column): `CREATE UNIQUE INDEX
/// ... ON t (c)` without a predicate is a key for a table without a primary key.
fn unique_indexes(setup: &[String], dialect: Dialect) -> Vec<(String, String)> {
    setup
        .iter()
        .flat_map(|b| split_statements(b, dialect))
        .filter_map(|sql| match parse_one(&without_include(&sql), dialect)? {
            Statement::CreateIndex(i) if i.unique && i.predicate.is_none() && i.columns.len() == 1 => {
                Some((last_name(&i.table_name)?, column_name(&i.columns[0].column.expr)?))
            }
            _ => None,
        })
        .collect()
}

/// A `CREATE TABLE` statement sqlparser cannot read, as a skipped table; `None` for any
/// other statement.
fn unparsed_create_table(sql: &str) -> Option<SkippedTable> {
    let lower = sql.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("create table") || lower.starts_with("create unlogged table")) {
        return None;
    }
    let name = lower.split_whitespace().nth(2).unwrap_or_default().trim_end_matches('(').to_string();
    let why = "sqlparser cannot parse its CREATE TABLE (partitions, PostgreSQL-only syntax)";
    Some(SkippedTable { table: name, why: why.into() })
}

/// The name and key column of the table `create` makes, if the runner can record it;
/// otherwise why not (the first reason found).
fn recorded_name_and_key(
    create: &CreateTable,
    unique_indexes: &[(String, String)],
) -> Result<(String, String), String> {
    // A table in a named schema is not recorded (the seam names tables unqualified).
    let Some(name) = last_name(&create.name).filter(|_| create.name.0.len() == 1) else {
        return Err("a table in a named schema".into());
    };
    if create.temporary {
        return Err("a temporary table (other sessions cannot read it)".into());
    }
    if create.columns.is_empty() {
        return Err("no column list (CREATE TABLE AS, LIKE or PARTITION OF)".into());
    }
    if create.inherits.is_some() {
        return Err("it inherits from another table".into());
    }
    if let Some(c) = create.columns.iter().find(|c| column_type(&c.data_type).is_none()) {
        return Err(format!(
            "a column of a type isocert does not record ({}): column {}",
            c.data_type, c.name
        ));
    }
    let pk = match key_columns(create, &name, unique_indexes).as_slice() {
        [pk] => pk.clone(),
        [] => return Err("no primary key and no unique integer column".into()),
        _ => return Err("a primary key of several columns".into()),
    };
    if declared_type(create, &pk) != Some(ColumnType::Integer) {
        return Err("a primary key that is not an integer".into());
    }
    Ok((name, pk))
}

/// The key columns of table `name` as `create` declares them: its primary key, or without
/// one the first integer column with a one-column unique constraint or unique index (the
/// row's identity).
fn key_columns(create: &CreateTable, name: &str, unique_indexes: &[(String, String)]) -> Vec<String> {
    let mut keys: Vec<String> = create
        .columns
        .iter()
        .filter(|c| {
            c.options.iter().any(|o| matches!(o.option, ColumnOption::Unique { is_primary: true, .. }))
        })
        .map(|c| c.name.value.to_ascii_lowercase())
        .collect();
    for constraint in &create.constraints {
        if let TableConstraint::PrimaryKey { columns, .. } = constraint {
            keys.extend(columns.iter().map(|c| c.column.expr.to_string().to_ascii_lowercase()));
        }
    }
    if !keys.is_empty() {
        return keys;
    }
    let mut unique: Vec<String> = create
        .columns
        .iter()
        .filter(|c| {
            c.options.iter().any(|o| matches!(o.option, ColumnOption::Unique { is_primary: false, .. }))
        })
        .map(|c| c.name.value.to_ascii_lowercase())
        .collect();
    for constraint in &create.constraints {
        if let TableConstraint::Unique { columns, .. } = constraint {
            if let [c] = columns.as_slice() {
                unique.extend(column_name(&c.column.expr));
            }
        }
    }
    unique.extend(unique_indexes.iter().filter(|(t, _)| *t == name).map(|(_, c)| c.clone()));
    let key = create.columns.iter().map(|c| c.name.value.to_ascii_lowercase()).find(|c| {
        unique.contains(c)
            && create.columns.iter().any(|d| {
                d.name.value.eq_ignore_ascii_case(c) && column_type(&d.data_type) == Some(ColumnType::Integer)
            })
    });
    keys.extend(key);
    keys
}

/// The seam's type of column `name` of `create` (names compared without case).
fn declared_type(create: &CreateTable, name: &str) -> Option<ColumnType> {
    create
        .columns
        .iter()
        .find(|c| c.name.value.eq_ignore_ascii_case(name))
        .and_then(|c| column_type(&c.data_type))
}

/// The seam's description of the table `create` makes, named `name` with key `pk` first.
fn table_spec(create: &CreateTable, name: String, pk: String) -> TableSpec {
    let mut columns = vec![pk.clone()];
    columns.extend(create.columns.iter().map(|c| c.name.value.to_ascii_lowercase()).filter(|c| *c != pk));
    let types: Vec<ColumnType> =
        columns.iter().map(|c| declared_type(create, c).expect("every column's type was checked")).collect();
    // The seam's vocabulary names tables and columns with 'static strings (workload
    // tables are constants); a scenario's few names are leaked once per table.
    let columns: Vec<&'static str> = columns.into_iter().map(|c| &*Box::leak(c.into_boxed_str())).collect();
    TableSpec {
        name: Box::leak(name.into_boxed_str()),
        columns: Box::leak(columns.into_boxed_slice()),
        types: Box::leak(types.into_boxed_slice()),
        partitioned: create.partition_by.is_some(),
    }
}

/// Moves the tables with children by inheritance from `found` to `skipped`: their rows are
/// changed under their children's names. (A partitioned table's changes are published under
/// its own name, `publish_via_partition_root`; an inheritance parent's are not.)
fn drop_inheritance_parents(
    found: &mut Vec<ScenarioTable>,
    skipped: &mut Vec<SkippedTable>,
    setup: &[String],
    dialect: Dialect,
) {
    let statements: Vec<String> = setup
        .iter()
        .flat_map(|b| split_statements(b, dialect))
        .map(|sql| sql.to_ascii_lowercase().split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    found.retain(|t| {
        let name = t.spec.name;
        let parent = statements.iter().any(|sql| {
            sql.contains(&format!("inherits ({name})")) || sql.contains(&format!("inherits({name})"))
        });
        if parent {
            skipped
                .push(SkippedTable { table: name.to_string(), why: "it has child tables (INHERITS)".into() });
        }
        !parent
    });
}
