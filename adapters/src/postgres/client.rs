//! The PostgreSQL test-client session: the SQL dialect of each [`Step`] and the facts
//! recorded with it (the contract is docs/POSTGRES.md).
//!
//! Every statement embeds `pg_current_snapshot()` so the snapshot recorded is the one the
//! statement ran under. Statements use the simple query protocol with literal integers:
//! one round trip, and the `where` text PostgreSQL evaluated is the text the history
//! records. `BEGIN` travels with the transaction's first statement, and the xid with
//! `COMMIT`.

use isocert_history::{AggregateFn, Scalar};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage, SimpleQueryRow};

pub use isocert_recovery::{PgOpFacts, PgTxnFacts};

use crate::postgres::{Postgres, Snapshot};
use crate::seam::{
    has_transaction_snapshot, redact_url, row_key, sql_literal, unrunnable_level, CommitOutcome, Database,
    DbError, ErrorClass, IsolationLevel, RecordedOp, Session, StatementWrite, Step, TableSpec,
};

/// Sent when a session connects.
const DEADLOCK_TIMEOUT: &str = "SET deadlock_timeout = '20ms'";

/// The one place PostgreSQL errors are classified: serialization failure (40001) and
/// deadlock (40P01) are retryable; no SQLSTATE (closed, I/O) and classes 08 and 57P mean
/// the connection is gone.
pub fn classify(e: &tokio_postgres::Error) -> ErrorClass {
    match e.code() {
        None => ErrorClass::ConnectionLost,
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED => {
            ErrorClass::Retryable
        }
        Some(c) if c.code().starts_with("08") || c.code().starts_with("57P") => ErrorClass::ConnectionLost,
        Some(_) => ErrorClass::Fatal,
    }
}

/// A [`DbError`] from a driver error, classified.
pub(crate) fn db_error(context: &str, e: tokio_postgres::Error) -> DbError {
    DbError::new(classify(&e), e.code().map(|c| c.code().to_string()), context, e)
}

/// One test-client connection to PostgreSQL.
#[derive(Debug)]
pub struct PgSession {
    client: Client,
    pid: i32,
    isolation: IsolationLevel,
    /// The statement that begins a transaction at `isolation`.
    begin: &'static str,
    /// `BEGIN ...` not yet sent: it goes in front of the transaction's first statement
    /// (one simple query, so nothing runs outside the transaction if BEGIN fails).
    pending_begin: bool,
    /// The xid the transaction's own writes recorded (the `xmin` of a version it
    /// installed), for when the answer to the xid query at COMMIT is lost.
    own_xid: Option<u64>,
    /// The server's `server_version_num` (`170006`): before 17 a `MERGE` has no `RETURNING`
    /// and cannot sit in a `WITH`, so it is recorded by reading its row back.
    server_version_num: u32,
}

impl PgSession {
    /// Connects, lowers `deadlock_timeout` when allowed, and reads the backend pid.
    pub(crate) async fn connect(url: &str) -> Result<Self, DbError> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(|e| db_error(&format!("connecting to {}", redact_url(url)), e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("workload connection ended: {e}");
            }
        });
        // Deadlocks are expected (predicate updates lock rows in scan order); detect them fast
        // instead of after the default second. Only superusers may set it: ignore a refusal.
        if let Err(e) = client.simple_query(DEADLOCK_TIMEOUT).await {
            tracing::debug!("cannot lower deadlock_timeout: {e}");
        }
        let sql = "SELECT pg_backend_pid(), current_setting('server_version_num')";
        let rows = query(&client, sql).await?;
        let field = |i: usize| rows.first().and_then(|r| r.get(i));
        let pid = field(0).and_then(|t| t.parse().ok()).ok_or_else(|| DbError::unexpected(sql, "no pid"))?;
        let server_version_num = field(1)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| DbError::unexpected(sql, "no server_version_num"))?;
        Ok(PgSession {
            client,
            pid,
            isolation: IsolationLevel::Serializable,
            begin: BEGIN_SERIALIZABLE,
            pending_begin: false,
            own_xid: None,
            server_version_num,
        })
    }

    /// Runs `sql`, preceded by the transaction's `BEGIN` when that is still pending.
    async fn query(&mut self, sql: &str) -> Result<Vec<SimpleQueryRow>, DbError> {
        if std::mem::take(&mut self.pending_begin) {
            query(&self.client, &format!("{}; {sql}", self.begin)).await
        } else {
            query(&self.client, sql).await
        }
    }

    /// Runs `sql` as [`PgSession::query`] does and returns every message: its rows and each
    /// statement's completion with the number of rows it affected.
    async fn query_messages(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>, DbError> {
        let sql = if std::mem::take(&mut self.pending_begin) {
            format!("{}; {sql}", self.begin)
        } else {
            sql.to_string()
        };
        self.client.simple_query(&sql).await.map_err(|e| db_error(&sql, e))
    }

    /// Records an operation's statement snapshot: the transaction's first one at
    /// repeatable read and serializable, each statement's own at read committed.
    fn record_snapshot(&self, facts: &mut PgTxnFacts, op: &mut PgOpFacts, snap: &Snapshot) {
        if has_transaction_snapshot(self.isolation) {
            facts.snapshot.get_or_insert_with(|| snap.to_string());
        } else {
            op.snapshot = Some(snap.to_string());
        }
    }
}

/// The statement that starts a transaction at `level`.
///
/// # Errors
/// [`unrunnable_level`] for a level PostgreSQL is not run at.
fn begin_sql(level: IsolationLevel) -> Result<&'static str, DbError> {
    match level {
        IsolationLevel::Serializable => Ok(BEGIN_SERIALIZABLE),
        IsolationLevel::RepeatableRead => Ok("BEGIN ISOLATION LEVEL REPEATABLE READ"),
        IsolationLevel::ReadCommitted => Ok("BEGIN ISOLATION LEVEL READ COMMITTED"),
        other => Err(unrunnable_level(other, Postgres::RUN_LEVELS)),
    }
}

/// The statement that begins a serializable transaction.
const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";

impl Session for PgSession {
    type TxnFacts = PgTxnFacts;
    type OpFacts = PgOpFacts;

    fn server_id(&self) -> u64 {
        self.pid as u64
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<PgTxnFacts, DbError> {
        self.begin = begin_sql(level)?;
        self.isolation = level;
        self.pending_begin = true;
        self.own_xid = None;
        Ok(PgTxnFacts { isolation: Some(level.as_str().to_string()), ..PgTxnFacts::default() })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        facts: &mut PgTxnFacts,
    ) -> Result<Vec<(RecordedOp, PgOpFacts)>, DbError> {
        let recorded = match step {
            Step::Read { key } => read(self, table, *key).await?,
            Step::Upsert { row } => vec![upsert(self, table, row.clone()).await?],
            Step::Insert { row } => vec![insert(self, table, row.clone()).await?],
            Step::Update { row } => update(self, table, row.clone()).await?.into_iter().collect(),
            Step::Delete { key } => delete(self, table, *key).await?.into_iter().collect(),
            Step::Select { predicate } => select(self, table, predicate).await?,
            Step::Aggregate { predicate, function, column } => {
                vec![aggregate(self, table, predicate, *function, column).await?]
            }
            Step::PredicateUpdate { predicate, set } => {
                vec![predicate_update(self, table, predicate, set.clone()).await?]
            }
            Step::PredicateDelete { predicate } => vec![predicate_delete(self, table, predicate).await?],
            Step::Statement { sql, write: StatementWrite::Update { predicate, set } } => {
                vec![statement_update(self, table, sql, predicate, set.clone()).await?]
            }
            Step::Statement { sql, write: StatementWrite::Insert } => {
                statement_insert(self, table, sql).await?
            }
            Step::Statement { sql, write: StatementWrite::ExprUpdate { predicate, set, excluded } } => {
                let mut recorded = if is_merge(sql) && self.server_version_num < MERGE_RETURNING_VERSION_NUM {
                    merge_read_back(self, table, sql, predicate).await?
                } else {
                    statement_update(self, table, sql, predicate, Vec::new()).await?
                };
                if let RecordedOp::Update { predicate, rows, .. } = recorded.op {
                    let excluded = excluded.clone();
                    recorded.op = RecordedOp::ExprUpdate { predicate, set: set.clone(), excluded, rows };
                }
                vec![recorded]
            }
            Step::Append { key, element } => vec![append(self, table, *key, *element).await?],
        };
        let mut out = Vec::with_capacity(recorded.len());
        for Recorded { op, mut meta, snapshot } in recorded {
            self.record_snapshot(facts, &mut meta, &snapshot);
            if self.own_xid.is_none() {
                self.own_xid = match &op {
                    RecordedOp::Write { row: Some(_), .. } | RecordedOp::Append { .. } => meta.xmin,
                    RecordedOp::Update { rows, .. } | RecordedOp::ExprUpdate { rows, .. }
                        if !rows.is_empty() =>
                    {
                        meta.xmins.as_ref().and_then(|x| x.first().copied())
                    }
                    _ => None,
                };
            }
            out.push((op, meta));
        }
        Ok(out)
    }

    async fn commit(&mut self, facts: &mut PgTxnFacts) -> CommitOutcome {
        if std::mem::take(&mut self.pending_begin) {
            if let Err(e) = query(&self.client, self.begin).await {
                return if e.is_connection_lost() {
                    CommitOutcome::Unknown(e)
                } else {
                    CommitOutcome::Failed(e)
                };
            }
        }
        // The xid and the COMMIT travel in one simple query: one round trip, and COMMIT is
        // skipped by the server if the SELECT fails.
        let sql = "SELECT pg_current_xact_id_if_assigned()::text; COMMIT";
        match query(&self.client, sql).await {
            Ok(rows) => {
                if let Some(x) = rows.first().and_then(|r| r.get(0)) {
                    match x.parse() {
                        Ok(x) => facts.xid = Some(x),
                        Err(_) => {
                            return CommitOutcome::Failed(DbError::unexpected(
                                sql,
                                format!("not an xid: {x:?}"),
                            ))
                        }
                    }
                }
                CommitOutcome::Committed
            }
            Err(e) => {
                if let Some(x) = self.own_xid {
                    facts.xid = Some(x);
                }
                if e.is_connection_lost() {
                    tracing::debug!("commit outcome unknown: {e}");
                }
                CommitOutcome::failed_with(e)
            }
        }
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        self.query(sql).await.map(|_| ())
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.pending_begin = false;
        // The server already rolled back on error; ROLLBACK ends the failed transaction block.
        self.client.simple_query("ROLLBACK").await.map(|_| ()).map_err(|e| db_error("ROLLBACK", e))
    }

    fn note_error(&self, facts: &mut PgTxnFacts, error: &DbError) {
        facts.sqlstate = Some(error.fact());
    }
}

/// An operation with its adapter facts and the snapshot of the statement that ran it.
#[derive(Clone, Debug)]
struct Recorded {
    op: RecordedOp,
    meta: PgOpFacts,
    snapshot: Snapshot,
}

/// Runs `sql` and returns its data rows (shared with the CockroachDB session).
pub(crate) async fn query_with(
    client: &Client,
    sql: &str,
    classify: fn(&tokio_postgres::Error) -> ErrorClass,
) -> Result<Vec<SimpleQueryRow>, DbError> {
    let messages = client
        .simple_query(sql)
        .await
        .map_err(|e| DbError::new(classify(&e), e.code().map(|c| c.code().to_string()), sql, e))?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .collect())
}

/// Runs `sql` and returns its data rows.
async fn query(client: &Client, sql: &str) -> Result<Vec<SimpleQueryRow>, DbError> {
    let messages = client.simple_query(sql).await.map_err(|e| db_error(sql, e))?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .collect())
}

/// Column `i` of `row` as text (`None` for NULL).
pub(crate) fn text<'r>(sql: &str, row: &'r SimpleQueryRow, i: usize) -> Result<Option<&'r str>, DbError> {
    row.try_get(i).map_err(|e| DbError::unexpected(sql, format!("column {i}: {e}")))
}

/// Column `i` of `row` as an integer (`None` for NULL).
pub(crate) fn int(sql: &str, row: &SimpleQueryRow, i: usize) -> Result<Option<i64>, DbError> {
    match text(sql, row, i)? {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| DbError::unexpected(sql, format!("column {i} is not an integer: {t:?}"))),
    }
}

fn snapshot(sql: &str, row: &SimpleQueryRow, i: usize) -> Result<Snapshot, DbError> {
    let t = text(sql, row, i)?.ok_or_else(|| DbError::unexpected(sql, "no snapshot"))?;
    t.parse::<Snapshot>().map_err(|e| DbError::unexpected(sql, e.to_string()))
}

/// A 32-bit `xmin` column widened to the full xid next to `snap`.
fn xmin(sql: &str, row: &SimpleQueryRow, i: usize, snap: &Snapshot) -> Result<Option<u64>, DbError> {
    match text(sql, row, i)? {
        None => Ok(None),
        Some(t) => {
            let x: u32 =
                t.parse().map_err(|_| DbError::unexpected(sql, format!("xmin is not an xid: {t:?}")))?;
            Ok(Some(snap.widen(x)))
        }
    }
}

/// Columns `from..from+n` of `row` as a full table row; `None` when the key column is NULL.
pub(crate) fn table_row(
    sql: &str,
    row: &SimpleQueryRow,
    from: usize,
    n: usize,
) -> Result<Option<Vec<i64>>, DbError> {
    if int(sql, row, from)?.is_none() {
        return Ok(None);
    }
    (from..from + n)
        .map(|i| int(sql, row, i)?.ok_or_else(|| DbError::unexpected(sql, format!("column {i} is NULL"))))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Columns `from..from+n` of `row` as the first `n` columns of `table`, each parsed by its
/// type ([`crate::seam::ColumnType::parse`]); `None` when the key column is NULL.
pub(crate) fn typed_row(
    sql: &str,
    row: &SimpleQueryRow,
    from: usize,
    table: &TableSpec,
    n: usize,
) -> Result<Option<Vec<Scalar>>, DbError> {
    if text(sql, row, from)?.is_none() {
        return Ok(None);
    }
    (0..n)
        .map(|i| match text(sql, row, from + i)? {
            None => Ok(Scalar::Null),
            Some(t) => table
                .column_type(i)
                .parse(t)
                .map_err(|e| DbError::unexpected(sql, format!("column {}: {e}", table.columns[i]))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What a write returns as the writer of the version it installed: its `xmin`, or on a
/// partitioned table (whose system columns a write cannot return) the transaction's own
/// id, which is the same without subtransactions.
fn own_xmin(s: &TableSpec) -> &'static str {
    if s.partitioned {
        "pg_current_xact_id()::text::bigint % 4294967296 AS xmin"
    } else {
        "xmin"
    }
}

/// A row's values as SQL literals, comma-separated.
fn literals(row: &[Scalar]) -> String {
    row.iter().map(|v| sql_literal(v, false)).collect::<Vec<_>>().join(", ")
}

/// The key of a step's row (its first column).
fn key_of(row: &[Scalar]) -> Result<i64, DbError> {
    row_key(row).ok_or_else(|| DbError::unexpected("a step", "a row whose key is not an integer"))
}

pub(crate) fn one_row(sql: &str, mut rows: Vec<SimpleQueryRow>) -> Result<SimpleQueryRow, DbError> {
    match rows.len() {
        1 => Ok(rows.pop().expect("one row")),
        n => {
            let shown: Vec<String> = rows
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get(i).unwrap_or("NULL")).collect::<Vec<_>>().join("|"))
                .collect();
            Err(DbError::unexpected(sql, format!("expected one row, got {n}: {}", shown.join("; "))))
        }
    }
}

pub(crate) fn literal_row(row: &[i64]) -> String {
    row.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

async fn read(ps: &mut PgSession, s: &TableSpec, key: i64) -> Result<Vec<Recorded>, DbError> {
    let cols: Vec<String> = s.columns.iter().map(|c| format!("t.{c}")).collect();
    let sql = format!(
        "SELECT pg_current_snapshot()::text, t.xmin::text, {} FROM (SELECT 1) s LEFT JOIN {} t ON t.{} = {key}",
        cols.join(", "),
        s.name,
        s.pk()
    );
    let result = ps.query(&sql).await?;
    let first = result.first().ok_or_else(|| DbError::unexpected(&sql, "no row"))?;
    let snap = snapshot(&sql, first, 0)?;
    let mut versions = Vec::with_capacity(1);
    for r in &result {
        if let Some(row) = typed_row(&sql, r, 2, s, s.columns.len())? {
            let x = xmin(&sql, r, 1, &snap)?.ok_or_else(|| DbError::unexpected(&sql, "row without xmin"))?;
            versions.push((row, x));
        }
    }
    if versions.is_empty() {
        return Ok(vec![Recorded {
            op: RecordedOp::Read { key, row: None },
            meta: PgOpFacts::default(),
            snapshot: snap,
        }]);
    }
    // Normally one version. More than one is PostgreSQL at REPEATABLE READ returning both
    // its own insert and the snapshot's version of a row a concurrent transaction deleted:
    // record each as a read, own (newest) first (docs/POSTGRES.md).
    versions.sort_by_key(|(_, x)| std::cmp::Reverse(*x));
    let n = versions.len();
    Ok(versions
        .into_iter()
        .map(|(row, x)| {
            let meta =
                PgOpFacts { xmin: Some(x), versions_returned: (n > 1).then_some(n), ..PgOpFacts::default() };
            Recorded { op: RecordedOp::Read { key, row: Some(row) }, meta, snapshot: snap.clone() }
        })
        .collect())
}

/// Runs a statement of shape `SELECT snapshot, (SELECT xmin FROM w)` for a single-row write.
async fn write_statement(ps: &mut PgSession, sql: &str) -> Result<(Snapshot, Option<u64>), DbError> {
    let r = one_row(sql, ps.query(sql).await?)?;
    let snap = snapshot(sql, &r, 0)?;
    let x = xmin(sql, &r, 1, &snap)?;
    Ok((snap, x))
}

async fn upsert(ps: &mut PgSession, s: &TableSpec, row: Vec<Scalar>) -> Result<Recorded, DbError> {
    let updates: Vec<String> = s.columns[1..].iter().map(|c| format!("{c} = EXCLUDED.{c}")).collect();
    let sql = format!(
        "WITH w AS (INSERT INTO {t} ({cols}) VALUES ({vals}) ON CONFLICT ({pk}) DO UPDATE SET {set} RETURNING {own}) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.name,
        own = own_xmin(s),
        cols = s.column_list(),
        vals = literals(&row),
        pk = s.pk(),
        set = updates.join(", ")
    );
    let (snap, x) = write_statement(ps, &sql).await?;
    let x = x.ok_or_else(|| DbError::unexpected(&sql, "an upsert installed no row"))?;
    let meta = PgOpFacts { xmin: Some(x), ..PgOpFacts::default() };
    Ok(Recorded { op: RecordedOp::Write { key: key_of(&row)?, row: Some(row) }, meta, snapshot: snap })
}

/// Elle's list append as Jepsen's PostgreSQL test writes it: insert the key with a
/// one-element list, or concatenate the element onto the list the row holds.
async fn append(ps: &mut PgSession, s: &TableSpec, key: i64, element: i64) -> Result<Recorded, DbError> {
    let [pk, sk, val] = s.columns else {
        return Err(DbError::unexpected("a list append", format!("table {} is not (id, sk, val)", s.name)));
    };
    let sql = format!(
        "WITH w AS (INSERT INTO {t} AS t ({pk}, {sk}, {val}) VALUES ({key}, {key}, '{element}') \
         ON CONFLICT ({pk}) DO UPDATE SET {val} = CONCAT(t.{val}, ',', '{element}') RETURNING {own}) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.name,
        own = own_xmin(s),
    );
    let (snap, x) = write_statement(ps, &sql).await?;
    let x = x.ok_or_else(|| DbError::unexpected(&sql, "an append installed no row"))?;
    let meta = PgOpFacts { xmin: Some(x), ..PgOpFacts::default() };
    Ok(Recorded { op: RecordedOp::Append { key, element }, meta, snapshot: snap })
}

async fn insert(ps: &mut PgSession, s: &TableSpec, row: Vec<Scalar>) -> Result<Recorded, DbError> {
    let sql = format!(
        "WITH w AS (INSERT INTO {t} ({cols}) VALUES ({vals}) RETURNING {own}) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.name,
        own = own_xmin(s),
        cols = s.column_list(),
        vals = literals(&row),
    );
    let (snap, x) = write_statement(ps, &sql).await?;
    let x = x.ok_or_else(|| DbError::unexpected(&sql, "an insert installed no row"))?;
    let meta = PgOpFacts { xmin: Some(x), ..PgOpFacts::default() };
    Ok(Recorded { op: RecordedOp::Write { key: key_of(&row)?, row: Some(row) }, meta, snapshot: snap })
}

async fn update(ps: &mut PgSession, s: &TableSpec, row: Vec<Scalar>) -> Result<Option<Recorded>, DbError> {
    let set: Vec<String> = s.columns[1..]
        .iter()
        .zip(&row[1..])
        .map(|(c, v)| format!("{c} = {}", sql_literal(v, false)))
        .collect();
    let key = key_of(&row)?;
    let sql = format!(
        "WITH w AS (UPDATE {t} SET {set} WHERE {pk} = {key} RETURNING {own}) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.name,
        own = own_xmin(s),
        set = set.join(", "),
        pk = s.pk(),
    );
    let (snap, x) = write_statement(ps, &sql).await?;
    Ok(x.map(|x| Recorded {
        op: RecordedOp::Write { key, row: Some(row) },
        meta: PgOpFacts { xmin: Some(x), ..PgOpFacts::default() },
        snapshot: snap,
    }))
}

async fn delete(ps: &mut PgSession, s: &TableSpec, key: i64) -> Result<Option<Recorded>, DbError> {
    let sql = format!(
        "WITH d AS (DELETE FROM {t} WHERE {pk} = {key} RETURNING xmin) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM d)",
        t = s.name,
        pk = s.pk()
    );
    let (snap, x) = write_statement(ps, &sql).await?;
    Ok(x.map(|x| Recorded {
        op: RecordedOp::Write { key, row: None },
        meta: PgOpFacts { xmin: Some(x), ..PgOpFacts::default() },
        snapshot: snap,
    }))
}

async fn select(ps: &mut PgSession, s: &TableSpec, predicate: &str) -> Result<Vec<Recorded>, DbError> {
    let cols: Vec<String> = s.columns.iter().map(|c| format!("t.{c}")).collect();
    let sql = format!(
        "SELECT s.snap, t.xmin::text, {} FROM (SELECT pg_current_snapshot()::text AS snap) s LEFT JOIN {} t ON ({predicate})",
        cols.join(", "),
        s.name
    );
    let result = ps.query(&sql).await?;
    let first = result.first().ok_or_else(|| DbError::unexpected(&sql, "no row"))?;
    let snap = snapshot(&sql, first, 0)?;
    let mut versions = Vec::with_capacity(result.len());
    for r in &result {
        if let Some(row) = typed_row(&sql, r, 2, s, s.columns.len())? {
            let x = xmin(&sql, r, 1, &snap)?.ok_or_else(|| DbError::unexpected(&sql, "row without xmin"))?;
            versions.push((row, x));
        }
    }
    // A result set has one row per key; should PostgreSQL return two versions of one row
    // (see `read`), the select keeps the newest and the others become item reads after it.
    let mut extra = Vec::new();
    let mut rows: Vec<Vec<Scalar>> = Vec::with_capacity(versions.len());
    let mut xmins: Vec<u64> = Vec::with_capacity(versions.len());
    for (row, x) in versions {
        match rows.iter().position(|r| r[0] == row[0]) {
            None => {
                rows.push(row);
                xmins.push(x);
            }
            Some(i) => {
                let stale = if x > xmins[i] {
                    (std::mem::replace(&mut rows[i], row), std::mem::replace(&mut xmins[i], x))
                } else {
                    (row, x)
                };
                extra.push(stale);
            }
        }
    }
    let meta = PgOpFacts { xmins: Some(xmins), ..PgOpFacts::default() };
    let mut recorded = vec![Recorded {
        op: RecordedOp::Select { predicate: predicate.to_string(), rows },
        meta,
        snapshot: snap.clone(),
    }];
    for (row, x) in extra {
        let meta = PgOpFacts { xmin: Some(x), extra_version_of_select: Some(true), ..PgOpFacts::default() };
        recorded.push(Recorded {
            op: RecordedOp::Read { key: key_of(&row)?, row: Some(row) },
            meta,
            snapshot: snap.clone(),
        });
    }
    Ok(recorded)
}

async fn aggregate(
    ps: &mut PgSession,
    s: &TableSpec,
    predicate: &str,
    function: AggregateFn,
    column: &'static str,
) -> Result<Recorded, DbError> {
    let sql = format!(
        "SELECT pg_current_snapshot()::text, (SELECT {f}({column}) FROM {t} WHERE {predicate})",
        f = function.as_str(),
        t = s.name
    );
    let r = one_row(&sql, ps.query(&sql).await?)?;
    let snap = snapshot(&sql, &r, 0)?;
    let result = int(&sql, &r, 1)?;
    Ok(Recorded {
        op: RecordedOp::Aggregate { predicate: predicate.to_string(), function, column, result },
        meta: PgOpFacts::default(),
        snapshot: snap,
    })
}

/// The rows of a predicate write statement, by tag: `s` snapshot, `c` candidate, `w` written.
struct Tagged {
    snapshot: Snapshot,
    candidates: Vec<(i64, u64)>,
    written: Vec<(Vec<Scalar>, u64)>,
}

/// Runs a predicate UPDATE or DELETE wrapped so that one statement returns its snapshot,
/// at read committed the candidates (rows matching in the snapshot), and the written rows.
async fn tagged_write(
    ps: &mut PgSession,
    s: &TableSpec,
    predicate: &str,
    write_cte: String,
    written_columns: usize,
) -> Result<Tagged, DbError> {
    // Every value as text (one type per column of the UNION), parsed back by its type.
    let nulls = |n: usize| ", NULL::text".repeat(n);
    let record_candidates = !has_transaction_snapshot(ps.isolation);
    let mut sql = String::from("WITH ");
    if record_candidates {
        sql.push_str(&format!(
            "c AS (SELECT {pk}, xmin FROM {t} WHERE {predicate}), ",
            pk = s.pk(),
            t = s.name
        ));
    }
    let written: Vec<String> = s.columns[..written_columns].iter().map(|c| format!("{c}::text")).collect();
    sql.push_str(&format!(
        "w AS ({write_cte}) SELECT 's', pg_current_snapshot()::text{n} UNION ALL SELECT 'w', xmin::text, {w} FROM w",
        n = nulls(written_columns),
        w = written.join(", ")
    ));
    if record_candidates {
        sql.push_str(&format!(
            " UNION ALL SELECT 'c', xmin::text, {pk}::text{n} FROM c",
            pk = s.pk(),
            n = nulls(written_columns - 1)
        ));
    }
    let result = ps.query(&sql).await?;
    let snap_row = result
        .iter()
        .find(|r| r.get(0) == Some("s"))
        .ok_or_else(|| DbError::unexpected(&sql, "no snapshot row"))?;
    let snap = snapshot(&sql, snap_row, 1)?;
    let mut tagged = Tagged { snapshot: snap, candidates: Vec::new(), written: Vec::new() };
    for r in &result {
        let tag = r.get(0);
        if tag == Some("s") {
            continue;
        }
        let x = xmin(&sql, r, 1, &tagged.snapshot)?
            .ok_or_else(|| DbError::unexpected(&sql, "row without xmin"))?;
        let row = typed_row(&sql, r, 2, s, if tag == Some("c") { 1 } else { written_columns })?
            .ok_or_else(|| DbError::unexpected(&sql, "row without key"))?;
        match tag {
            Some("c") => tagged.candidates.push((key_of(&row)?, x)),
            Some("w") => tagged.written.push((row, x)),
            other => return Err(DbError::unexpected(&sql, format!("unknown row tag {other:?}"))),
        }
    }
    Ok(tagged)
}

async fn predicate_update(
    ps: &mut PgSession,
    s: &TableSpec,
    predicate: &str,
    set: Vec<(&'static str, Scalar)>,
) -> Result<Recorded, DbError> {
    let assignments: Vec<String> =
        set.iter().map(|(c, v)| format!("{c} = {}", sql_literal(v, false))).collect();
    let sql = format!("UPDATE {t} SET {a} WHERE {predicate}", t = s.name, a = assignments.join(", "));
    statement_update(ps, s, &sql, predicate, set).await
}

/// An `UPDATE` (`sql`, whose `WHERE` is `predicate`) recorded from what it returned: the
/// rows as it left them with their new `xmin`, whatever its assignments compute.
async fn statement_update(
    ps: &mut PgSession,
    s: &TableSpec,
    sql: &str,
    predicate: &str,
    set: Vec<(&'static str, Scalar)>,
) -> Result<Recorded, DbError> {
    let cte = format!("{sql} RETURNING {own}, {cols}", own = own_xmin(s), cols = s.column_list());
    let tagged = tagged_write(ps, s, predicate, cte, s.columns.len()).await?;
    let meta = PgOpFacts {
        xmins: Some(tagged.written.iter().map(|(_, x)| *x).collect()),
        candidates: (!has_transaction_snapshot(ps.isolation)).then_some(tagged.candidates),
        ..PgOpFacts::default()
    };
    let rows = tagged.written.into_iter().map(|(r, _)| r).collect();
    Ok(Recorded {
        op: RecordedOp::Update { predicate: predicate.to_string(), set, rows },
        meta,
        snapshot: tagged.snapshot,
    })
}

/// The first `server_version_num` whose `MERGE` takes `RETURNING` and may sit in a `WITH`
/// (PostgreSQL 17).
const MERGE_RETURNING_VERSION_NUM: u32 = 170_000;

/// Whether `sql` is a `MERGE` statement.
fn is_merge(sql: &str) -> bool {
    sql.trim_start().get(..6).is_some_and(|w| w.eq_ignore_ascii_case("MERGE "))
}

/// A `MERGE` (`sql`, matching the rows of `predicate`) on a server before PostgreSQL 17,
/// where it has no `RETURNING` and cannot sit in a `WITH`: recorded as [`statement_update`]
/// records an `UPDATE`, from three statements of one round trip. The snapshot is the one
/// taken just before the `MERGE` (its own is not observable; a version committed between
/// the two is one the statement's re-check saw, as recovery already allows at read
/// committed); the rows are read back after it with their `xmin`, which the transaction's
/// row locks keep as the `MERGE` left them. No candidates are recorded.
async fn merge_read_back(
    ps: &mut PgSession,
    s: &TableSpec,
    sql: &str,
    predicate: &str,
) -> Result<Recorded, DbError> {
    let written: Vec<String> = s.columns.iter().map(|c| format!("{c}::text")).collect();
    let query = format!(
        "SELECT 's', pg_current_snapshot()::text{n}; {sql}; \
         SELECT 'w', xmin::text, {w} FROM {t} WHERE {predicate} AND xmin::text::bigint = \
         pg_current_xact_id()::text::bigint % 4294967296",
        n = ", NULL::text".repeat(s.columns.len()),
        w = written.join(", "),
        t = s.name
    );
    let messages = ps.query_messages(&query).await?;
    let completed: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .collect();
    let merged = completed.len().checked_sub(2).map(|i| completed[i]);
    let result: Vec<&SimpleQueryRow> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .collect();
    let snap_row = result
        .iter()
        .find(|r| r.get(0) == Some("s"))
        .ok_or_else(|| DbError::unexpected(&query, "no snapshot row"))?;
    let snap = snapshot(&query, snap_row, 1)?;
    let read_back = result.iter().filter(|r| r.get(0) == Some("w")).count();
    if merged != Some(read_back as u64) {
        return Err(DbError::unexpected(
            &query,
            format!(
                "the MERGE wrote {} row(s) but its transaction reads back {read_back} of them: the \
                 transaction's snapshot shows an older version of a row the MERGE updated (a MERGE \
                 at repeatable read or serializable that updated a row changed after its snapshot \
                 instead of failing with 40001: docs/FINDINGS.md, merge-repeatable-read), which \
                 this server's MERGE, without RETURNING, leaves unrecorded",
                merged.map_or_else(|| "?".to_string(), |n| n.to_string())
            ),
        ));
    }
    let mut xmins = Vec::new();
    let mut rows = Vec::new();
    for r in result.iter().filter(|r| r.get(0) == Some("w")) {
        let x = xmin(&query, r, 1, &snap)?.ok_or_else(|| DbError::unexpected(&query, "row without xmin"))?;
        let row = typed_row(&query, r, 2, s, s.columns.len())?
            .ok_or_else(|| DbError::unexpected(&query, "row without key"))?;
        xmins.push(x);
        rows.push(row);
    }
    Ok(Recorded {
        op: RecordedOp::Update { predicate: predicate.to_string(), set: Vec::new(), rows },
        meta: PgOpFacts { xmins: Some(xmins), ..PgOpFacts::default() },
        snapshot: snap,
    })
}

/// An `INSERT` in the scenario's own SQL (several rows, `INSERT ... SELECT`, `ON CONFLICT`):
/// an item write of each row it returned, with its `xmin`; a row `ON CONFLICT DO NOTHING`
/// skipped is not returned, and installs nothing.
async fn statement_insert(ps: &mut PgSession, s: &TableSpec, sql: &str) -> Result<Vec<Recorded>, DbError> {
    let written: Vec<String> = s.columns.iter().map(|c| format!("{c}::text")).collect();
    let query = format!(
        "WITH w AS ({sql} RETURNING {own}, {cols}) \
         SELECT 's', pg_current_snapshot()::text{n} UNION ALL SELECT 'w', xmin::text, {w} FROM w",
        own = own_xmin(s),
        cols = s.column_list(),
        n = ", NULL::text".repeat(s.columns.len()),
        w = written.join(", ")
    );
    let result = ps.query(&query).await?;
    let snap_row = result
        .iter()
        .find(|r| r.get(0) == Some("s"))
        .ok_or_else(|| DbError::unexpected(&query, "no snapshot row"))?;
    let snap = snapshot(&query, snap_row, 1)?;
    let mut recorded = Vec::new();
    for r in result.iter().filter(|r| r.get(0) == Some("w")) {
        let x = xmin(&query, r, 1, &snap)?.ok_or_else(|| DbError::unexpected(&query, "row without xmin"))?;
        let row = typed_row(&query, r, 2, s, s.columns.len())?
            .ok_or_else(|| DbError::unexpected(&query, "row without key"))?;
        recorded.push(Recorded {
            op: RecordedOp::Write { key: key_of(&row)?, row: Some(row) },
            meta: PgOpFacts { xmin: Some(x), ..PgOpFacts::default() },
            snapshot: snap.clone(),
        });
    }
    Ok(recorded)
}

async fn predicate_delete(ps: &mut PgSession, s: &TableSpec, predicate: &str) -> Result<Recorded, DbError> {
    let cte = format!("DELETE FROM {t} WHERE {predicate} RETURNING xmin, {pk}", t = s.name, pk = s.pk());
    let tagged = tagged_write(ps, s, predicate, cte, 1).await?;
    let meta = PgOpFacts {
        xmins: Some(tagged.written.iter().map(|(_, x)| *x).collect()),
        candidates: (!has_transaction_snapshot(ps.isolation)).then_some(tagged.candidates),
        ..PgOpFacts::default()
    };
    let keys = tagged.written.iter().map(|(r, _)| key_of(r)).collect::<Result<_, _>>()?;
    Ok(Recorded {
        op: RecordedOp::Delete { predicate: predicate.to_string(), keys },
        meta,
        snapshot: tagged.snapshot,
    })
}

#[cfg(test)]
mod tests {
    use super::is_merge;

    /// Only a statement that starts with the `MERGE` keyword is taken for one.
    #[test]
    fn merge_is_recognised_by_its_first_word() {
        assert!(is_merge("MERGE INTO counters t USING (VALUES (1, 2, 3)) AS s(sid, sn, sv) ON t.id = s.sid"));
        assert!(is_merge("  merge into counters t USING x ON true WHEN MATCHED THEN DO NOTHING"));
        assert!(!is_merge("UPDATE counters SET n = n + 1 WHERE id = 1"));
        assert!(!is_merge("MERGED"));
        assert!(!is_merge("MERGE"));
    }
}
