//! The workload's steps in MySQL's SQL, shared by the adapters that speak the MySQL
//! protocol (MariaDB, TiDB).

use isocert_history::{AggregateFn, Scalar};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::seam::{
    row_key, sql_literal, ColumnType, DbError, ErrorClass, RecordedOp, StatementWrite, Step, TableSpec,
};

/// How a MySQL-protocol driver error is handled, given the server's error numbers that
/// mean "retry the transaction" and "the session is gone" (each server has its own).
pub(crate) fn classify_codes(e: &mysql_async::Error, retryable: &[u16], gone: &[u16]) -> ErrorClass {
    match e {
        mysql_async::Error::Server(s) if retryable.contains(&s.code) => ErrorClass::Retryable,
        mysql_async::Error::Server(s) if gone.contains(&s.code) => ErrorClass::ConnectionLost,
        mysql_async::Error::Server(_) | mysql_async::Error::Url(_) => ErrorClass::Fatal,
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => ErrorClass::ConnectionLost,
        mysql_async::Error::Other(_) => ErrorClass::Fatal,
    }
}

/// A [`DbError`] from a driver error, classified by `classify` (each server's own).
pub(crate) fn db_error_with(
    classify: fn(&mysql_async::Error) -> ErrorClass,
    context: &str,
    e: mysql_async::Error,
) -> DbError {
    let code = match &e {
        mysql_async::Error::Server(s) => Some(s.code.to_string()),
        _ => None,
    };
    DbError::new(classify(&e), code, context, e)
}

/// A value of a MySQL row (text protocol: bytes; binary log: typed) as a scalar of column
/// type `ty`, in canonical form.
///
/// # Errors
/// A message when the value is not of the column's type.
pub(crate) fn scalar_of(ty: ColumnType, value: &mysql_async::Value) -> Result<Scalar, String> {
    use mysql_async::Value;
    match value {
        Value::NULL => Ok(Scalar::Null),
        Value::Bytes(b) => {
            let text = std::str::from_utf8(b).map_err(|_| format!("{b:?} is not UTF-8 text"))?;
            ty.parse(text)
        }
        Value::Int(i) => ty.canonical(Scalar::Int(*i)),
        Value::UInt(u) => {
            ty.canonical(Scalar::Int(i64::try_from(*u).map_err(|_| format!("{u} does not fit 64 bits"))?))
        }
        Value::Double(f) => ty.canonical(Scalar::Float(*f)),
        other => Err(format!("{other:?} is not a value of type {}", ty.as_str())),
    }
}

/// Every column of `row`, each by its type in `table`; `None` when the key is NULL.
pub(crate) fn typed(sql: &str, row: &Row, table: &TableSpec) -> Result<Option<Vec<Scalar>>, DbError> {
    let cell = |i: usize| {
        let value = row.as_ref(i).ok_or_else(|| DbError::unexpected(sql, format!("no column {i}")))?;
        scalar_of(table.column_type(i), value)
            .map_err(|e| DbError::unexpected(sql, format!("column {}: {e}", table.columns[i])))
    };
    if cell(0)?.is_null() {
        return Ok(None);
    }
    (0..table.columns.len()).map(cell).collect::<Result<Vec<_>, _>>().map(Some)
}

fn key_of(row: &[Scalar]) -> Result<i64, DbError> {
    row_key(row).ok_or_else(|| DbError::unexpected("a step", "a row whose key is not an integer"))
}

/// An identifier quoted for MySQL (`key` is a reserved word there).
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The table's columns, quoted, comma-separated.
pub(crate) fn column_list(table: &TableSpec) -> String {
    table.columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
}

fn assignments(table: &TableSpec, row: &[Scalar]) -> String {
    let pairs = table.columns[1..].iter().zip(&row[1..]);
    pairs.map(|(c, v)| format!("{} = {}", quote(c), sql_literal(v, true))).collect::<Vec<_>>().join(", ")
}

fn values(row: &[Scalar]) -> String {
    row.iter().map(|v| sql_literal(v, true)).collect::<Vec<_>>().join(", ")
}

fn int_values(row: &[i64]) -> String {
    row.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// What a step's statements tell recovery beyond the operations (InnoDB's op facts).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StepFacts {
    /// An aggregate's rows as `[key, value column]` pairs.
    pub(crate) aggregated_rows: Option<Vec<[i64; 2]>>,
    /// A read made under the statement's row locks (a current read), not in the
    /// transaction's snapshot.
    pub(crate) locking: bool,
}

/// A step's statements on `conn`, in the open transaction (a predicate delete as
/// `DELETE ... RETURNING`, which MariaDB has and TiDB lacks: its session runs that step
/// itself): the operations recorded and,
/// for an aggregate, the rows it ranged over as `[key, value column]` pairs (read by the
/// same statement through a window function). Errors are classified by `classify`.
pub(crate) async fn execute_step(
    conn: &mut Conn,
    table: &TableSpec,
    step: &Step,
    classify: fn(&mysql_async::Error) -> ErrorClass,
) -> Result<Vec<(RecordedOp, StepFacts)>, DbError> {
    let t = quote(table.name);
    let pk = quote(table.pk());
    let cols = column_list(table);
    let ops = match step {
        Step::Read { key } => {
            let sql = format!("SELECT {cols} FROM {t} WHERE {pk} = {key}");
            let rows: Vec<Row> = conn.query(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            let row = rows.first().map(|r| typed(&sql, r, table)).transpose()?.flatten();
            vec![RecordedOp::Read { key: *key, row }]
        }
        Step::Upsert { row } => {
            let update =
                table.columns[1..].iter().map(|c| format!("{0} = VALUES({0})", quote(c))).collect::<Vec<_>>();
            let sql = format!(
                "INSERT INTO {t} ({cols}) VALUES ({}) ON DUPLICATE KEY UPDATE {}",
                values(row),
                update.join(", ")
            );
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            vec![RecordedOp::Write { key: key_of(row)?, row: Some(row.clone()) }]
        }
        Step::Insert { row } => {
            let sql = format!("INSERT INTO {t} ({cols}) VALUES ({})", values(row));
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            vec![RecordedOp::Write { key: key_of(row)?, row: Some(row.clone()) }]
        }
        Step::Update { row } => {
            let key = key_of(row)?;
            let sql = format!("UPDATE {t} SET {} WHERE {pk} = {key}", assignments(table, row));
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            match conn.affected_rows() {
                0 => Vec::new(),
                _ => vec![RecordedOp::Write { key, row: Some(row.clone()) }],
            }
        }
        Step::Delete { key } => {
            let sql = format!("DELETE FROM {t} WHERE {pk} = {key}");
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            match conn.affected_rows() {
                0 => Vec::new(),
                _ => vec![RecordedOp::Write { key: *key, row: None }],
            }
        }
        Step::Select { predicate } => {
            let sql = format!("SELECT {cols} FROM {t} WHERE {predicate} ORDER BY {pk}");
            let rows: Vec<Row> = conn.query(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            let rows =
                rows.iter().filter_map(|r| typed(&sql, r, table).transpose()).collect::<Result<_, _>>()?;
            vec![RecordedOp::Select { predicate: predicate.clone(), rows }]
        }
        Step::PredicateUpdate { predicate, set } => {
            let assign = set
                .iter()
                .map(|(c, v)| format!("{} = {}", quote(c), sql_literal(v, true)))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("UPDATE {t} SET {assign} WHERE {predicate}");
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            // An UPDATE that changed no row (every match already held the values) installs
            // nothing, and InnoDB logs no row event for it.
            if conn.affected_rows() == 0 {
                return Ok(vec![(
                    RecordedOp::Update { predicate: predicate.clone(), set: set.clone(), rows: Vec::new() },
                    StepFacts::default(),
                )]);
            }
            // No RETURNING on UPDATE: the rows it wrote are the ones carrying the
            // statement's fresh unique value (the last assignment), which the transaction
            // sees as its own writes.
            let (value_col, fresh) = set.last().ok_or_else(|| DbError::unexpected(&sql, "no assignment"))?;
            let read = format!(
                "SELECT {cols} FROM {t} WHERE {} = {} ORDER BY {pk}",
                quote(value_col),
                sql_literal(fresh, true)
            );
            let rows: Vec<Row> = conn.query(&read).await.map_err(|e| db_error_with(classify, &read, e))?;
            let rows =
                rows.iter().filter_map(|r| typed(&read, r, table).transpose()).collect::<Result<_, _>>()?;
            vec![RecordedOp::Update { predicate: predicate.clone(), set: set.clone(), rows }]
        }
        Step::Append { key, element } => {
            let [_, sk, val] = table.columns else {
                return Err(DbError::unexpected("a list append", format!("table {t} is not (id, sk, val)")));
            };
            let (sk, val) = (quote(sk), quote(val));
            let sql = format!(
                "INSERT INTO {t} ({pk}, {sk}, {val}) VALUES ({key}, {key}, '{element}') \
                 ON DUPLICATE KEY UPDATE {val} = CONCAT({val}, ',', '{element}')"
            );
            conn.query_drop(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            vec![RecordedOp::Append { key: *key, element: *element }]
        }
        Step::PredicateDelete { predicate } => {
            let sql = format!("DELETE FROM {t} WHERE {predicate} RETURNING {pk}");
            let mut keys: Vec<i64> = conn.query(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            keys.sort_unstable();
            vec![RecordedOp::Delete { predicate: predicate.clone(), keys }]
        }
        Step::Statement { sql, write: StatementWrite::Update { predicate, set } } => {
            let (narrowed, rows, unchanged) = statement_update(conn, table, sql, predicate, classify).await?;
            // The rows it matched and left as they were: read (a current read, under its
            // locks) and not written, so item reads of the versions it saw.
            let mut ops: Vec<(RecordedOp, StepFacts)> = unchanged
                .into_iter()
                .map(|row| {
                    Ok((
                        RecordedOp::Read { key: key_of(&row)?, row: Some(row) },
                        StepFacts { locking: true, ..StepFacts::default() },
                    ))
                })
                .collect::<Result<_, DbError>>()?;
            ops.push((
                RecordedOp::Update { predicate: narrowed, set: set.clone(), rows },
                StepFacts::default(),
            ));
            return Ok(ops);
        }
        Step::Statement { write: StatementWrite::ExprUpdate { .. }, .. } => {
            return Err(DbError::unexpected(
                "an expression update",
                "the MySQL-protocol adapters do not record expression updates yet (issue 50)",
            ))
        }
        Step::Statement { sql, write: StatementWrite::Insert } => {
            // MariaDB returns the rows an INSERT installed (10.5 and later).
            let sql = format!("{sql} RETURNING {cols}");
            let rows: Vec<Row> = conn.query(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            let mut ops = Vec::with_capacity(rows.len());
            for r in &rows {
                let row =
                    typed(&sql, r, table)?.ok_or_else(|| DbError::unexpected(&sql, "a row without key"))?;
                ops.push(RecordedOp::Write { key: key_of(&row)?, row: Some(row) });
            }
            ops
        }
        Step::Aggregate { predicate, function, column } => {
            let f = match function {
                AggregateFn::Min => "MIN",
                AggregateFn::Max => "MAX",
                AggregateFn::Count => "COUNT",
                AggregateFn::Sum => "SUM",
            };
            // One statement, one read: the aggregate over the matching rows, repeated on
            // each of them (a window function), with each row's key and value column.
            let sql = format!(
                "SELECT {pk}, {v}, CAST({f}({c}) OVER () AS SIGNED) FROM {t} WHERE {predicate} ORDER BY {pk}",
                v = quote(table.value_column()),
                c = if *column == "*" { "*".to_string() } else { quote(column) },
            );
            let rows: Vec<(i64, i64, Option<i64>)> =
                conn.query(&sql).await.map_err(|e| db_error_with(classify, &sql, e))?;
            let result = match rows.first() {
                Some((_, _, value)) => *value,
                None if *function == AggregateFn::Count => Some(0),
                None => None,
            };
            let op =
                RecordedOp::Aggregate { predicate: predicate.clone(), function: *function, column, result };
            let aggregated = Some(rows.iter().map(|(k, v, _)| [*k, *v]).collect());
            return Ok(vec![(op, StepFacts { aggregated_rows: aggregated, locking: false })]);
        }
    };
    Ok(ops.into_iter().map(|op| (op, StepFacts::default())).collect())
}

/// An `UPDATE` in the scenario's own SQL (`sql`, whose `WHERE` is `predicate`), recorded
/// from the rows themselves, as MySQL has no `UPDATE ... RETURNING`: the matching rows are
/// read with the locks the UPDATE takes anyway (`FOR UPDATE`, a current read), the UPDATE
/// runs, and the same rows are read again under those locks; a row that differs is one it
/// changed (its new version), a row that does not was left as it was (InnoDB counts and logs
/// only changed rows, and the count must agree).
///
/// Returns the predicate to record with the rows: `predicate` itself when every matching
/// row changed, else narrowed to the changed rows' keys (`(p) AND pk IN (...)`, `(p) AND
/// FALSE` when none changed): a row InnoDB left as it was has no new version, and the
/// record's rows are the versions installed. The rows it left as they were come third:
/// the caller records them as reads of the versions the statement saw.
async fn statement_update(
    conn: &mut Conn,
    table: &TableSpec,
    sql: &str,
    predicate: &str,
    classify: fn(&mysql_async::Error) -> ErrorClass,
) -> Result<(String, Vec<Vec<Scalar>>, Vec<Vec<Scalar>>), DbError> {
    let t = quote(table.name);
    let pk = quote(table.pk());
    let cols = column_list(table);
    let before_sql = format!("SELECT {cols} FROM {t} WHERE {predicate} ORDER BY {pk} FOR UPDATE");
    let before: Vec<Row> =
        conn.query(&before_sql).await.map_err(|e| db_error_with(classify, &before_sql, e))?;
    let before: Vec<Vec<Scalar>> =
        before.iter().filter_map(|r| typed(&before_sql, r, table).transpose()).collect::<Result<_, _>>()?;
    conn.query_drop(sql).await.map_err(|e| db_error_with(classify, sql, e))?;
    let changed = conn.affected_rows();
    let narrowed = |rows: &[Vec<Scalar>]| -> Result<String, DbError> {
        if rows.len() == before.len() {
            return Ok(predicate.to_string());
        }
        let keys = rows.iter().map(|r| key_of(r).map(|k| k.to_string())).collect::<Result<Vec<_>, _>>()?;
        Ok(match keys.is_empty() {
            true => format!("({predicate}) AND FALSE"),
            false => format!("({predicate}) AND {} IN ({})", table.pk(), keys.join(", ")),
        })
    };
    if before.is_empty() {
        return Ok((predicate.to_string(), Vec::new(), Vec::new()));
    }
    if changed == 0 {
        return Ok((narrowed(&[])?, Vec::new(), before));
    }
    let keys = before.iter().map(|r| key_of(r).map(|k| k.to_string())).collect::<Result<Vec<_>, _>>()?;
    let after_sql =
        format!("SELECT {cols} FROM {t} WHERE {pk} IN ({}) ORDER BY {pk} FOR UPDATE", keys.join(", "));
    let after: Vec<Row> = conn.query(&after_sql).await.map_err(|e| db_error_with(classify, &after_sql, e))?;
    let after: Vec<Vec<Scalar>> =
        after.iter().filter_map(|r| typed(&after_sql, r, table).transpose()).collect::<Result<_, _>>()?;
    let (unchanged, rows): (Vec<Vec<Scalar>>, Vec<Vec<Scalar>>) =
        after.into_iter().partition(|row| before.contains(row));
    if rows.len() as u64 != changed {
        return Err(DbError::unexpected(
            sql,
            format!(
                "it changed {changed} row(s), but {} of the {} rows it matched differ afterwards",
                rows.len(),
                before.len()
            ),
        ));
    }
    Ok((narrowed(&rows)?, rows, unchanged))
}

/// Rows per `INSERT` when loading the initial rows.
const INSERT_BATCH: usize = 1000;

/// The table administration of a MySQL-protocol adapter: each call opens one connection
/// (`mysql://` URL; `mariadb://` is read as `mysql://`), runs, and closes it.
#[derive(Clone, Debug)]
pub(crate) struct MySqlAdmin {
    url: String,
    classify: fn(&mysql_async::Error) -> ErrorClass,
}

impl MySqlAdmin {
    /// An administrator of the server at `url`, whose errors `classify` classifies.
    pub(crate) fn new(url: &str, classify: fn(&mysql_async::Error) -> ErrorClass) -> Self {
        MySqlAdmin { url: url.to_string(), classify }
    }

    /// The driver's options for the URL.
    pub(crate) fn opts(&self) -> Result<mysql_async::Opts, DbError> {
        mysql_opts(&self.url)
    }

    /// Opens a connection.
    pub(crate) async fn connect(&self) -> Result<Conn, DbError> {
        let context = format!("connecting to {}", crate::seam::redact_url(&self.url));
        Conn::new(self.opts()?).await.map_err(|e| db_error_with(self.classify, &context, e))
    }

    async fn run(&self, conn: &mut Conn, sql: &str) -> Result<(), DbError> {
        conn.query_drop(sql).await.map_err(|e| db_error_with(self.classify, sql, e))
    }

    /// Runs `statements` in order on one connection.
    pub(crate) async fn execute(&self, statements: &[String]) -> Result<(), DbError> {
        let mut conn = self.connect().await?;
        for sql in statements {
            if let Err(e) = self.run(&mut conn, sql).await {
                let _ = conn.disconnect().await;
                return Err(e);
            }
        }
        let _ = conn.disconnect().await;
        Ok(())
    }

    /// Drops and recreates `table` with `CREATE TABLE` text `create`, and inserts `rows`.
    pub(crate) async fn prepare_table(
        &self,
        table: &TableSpec,
        create: String,
        rows: &[Vec<i64>],
    ) -> Result<(), DbError> {
        let t = quote(table.name);
        let mut statements = vec![format!("DROP TABLE IF EXISTS {t}"), create];
        for batch in rows.chunks(INSERT_BATCH) {
            let values: Vec<String> = batch.iter().map(|r| format!("({})", int_values(r))).collect();
            statements.push(format!("INSERT INTO {t} ({}) VALUES {}", column_list(table), values.join(", ")));
        }
        self.execute(&statements).await
    }

    /// Whether `table` exists in the URL's database.
    pub(crate) async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        let mut conn = self.connect().await?;
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{}'",
            table.name
        );
        let n: Result<Option<i64>, _> = conn.query_first(&sql).await;
        let _ = conn.disconnect().await;
        Ok(n.map_err(|e| db_error_with(self.classify, &sql, e))?.unwrap_or(0) > 0)
    }

    /// Whether connection `thread` waits for a lock: an InnoDB row lock (its transaction in
    /// `information_schema.INNODB_TRX` is in `LOCK WAIT`) or a metadata lock (its
    /// `PROCESSLIST` state says it waits for one). InnoDB refreshes `INNODB_TRX` only when
    /// it was not read for 100 ms, so callers must ask less often than that (a faster
    /// poll sees the same stale rows forever); the transaction is recognised by its
    /// connection id or by the statement it runs.
    pub(crate) async fn lock_waiting(&self, thread: u64) -> Result<bool, DbError> {
        let mut conn = self.connect().await?;
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST p \
             LEFT JOIN information_schema.INNODB_TRX t \
               ON t.trx_state = 'LOCK WAIT' AND (t.trx_mysql_thread_id = p.id OR t.trx_query = p.info) \
             WHERE p.id = {thread} AND (t.trx_id IS NOT NULL OR p.state LIKE 'Waiting for%lock%')"
        );
        let n: Result<Option<i64>, _> = conn.query_first(&sql).await;
        let _ = conn.disconnect().await;
        Ok(n.map_err(|e| db_error_with(self.classify, &sql, e))?.unwrap_or(0) > 0)
    }

    /// Drops `table`.
    pub(crate) async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        self.execute(&[format!("DROP TABLE IF EXISTS {}", quote(table.name))]).await
    }

    /// `table`'s rows, by key.
    pub(crate) async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<Scalar>>, DbError> {
        let mut conn = self.connect().await?;
        let sql = format!("SELECT {} FROM {} ORDER BY 1", column_list(table), quote(table.name));
        let rows: Result<Vec<Row>, _> = conn.query(&sql).await;
        let _ = conn.disconnect().await;
        let rows = rows.map_err(|e| db_error_with(self.classify, &sql, e))?;
        rows.iter()
            .map(|r| {
                typed(&sql, r, table)?.ok_or_else(|| DbError::unexpected(&sql, "a row whose key is NULL"))
            })
            .collect()
    }
}

/// The driver's options for `url`: `mysql://`, or `mariadb://` read as `mysql://`.
pub(crate) fn mysql_opts(url: &str) -> Result<mysql_async::Opts, DbError> {
    let mysql_url = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
        _ => url.to_string(),
    };
    mysql_async::Opts::from_url(&mysql_url).map_err(|e| {
        DbError::new(ErrorClass::Fatal, None, format!("reading the URL {}", crate::seam::redact_url(url)), e)
    })
}
