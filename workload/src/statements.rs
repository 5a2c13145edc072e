//! The SQL of each planned step, and what its answer means for the history.
//!
//! Every statement embeds `pg_current_snapshot()` so the snapshot recorded is the one the
//! statement ran under (docs/POSTGRES.md). Statements use the simple query protocol with
//! literal integers: one round trip, and the `where` text PostgreSQL evaluated is the text
//! the history records.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use isocert_adapters::Snapshot;
use isocert_history::AggregateFn;
use serde_json::{json, Map, Value as Json};
use tokio_postgres::{Client, SimpleQueryMessage, SimpleQueryRow};

use crate::plan::{items_c1_values, Step};
use crate::schema::{Schema, ITEMS_C2_VALUES};
use crate::{Isolation, WorkloadError};

/// One operation as the client saw it, before interning into the history.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RawOp {
    /// Item read: the row, or `None` when absent.
    Read { key: i64, row: Option<Vec<i64>> },
    /// Item write: the row installed, or `None` for a delete.
    Write { key: i64, row: Option<Vec<i64>> },
    /// Predicate read: the rows returned.
    Select { predicate: String, rows: Vec<Vec<i64>> },
    /// Predicate update: the assignments and the new rows.
    Update { predicate: String, set: Vec<(&'static str, i64)>, rows: Vec<Vec<i64>> },
    /// Predicate delete: the deleted keys.
    Delete { predicate: String, keys: Vec<i64> },
    /// Aggregate over a predicate: its result (`None` = SQL NULL).
    Aggregate { predicate: String, function: AggregateFn, column: &'static str, result: Option<i64> },
}

/// An operation with its adapter facts and the snapshot of the statement that ran it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) op: RawOp,
    pub(crate) meta: Map<String, Json>,
    pub(crate) snapshot: Snapshot,
}

/// What a step needs besides the connection: the table, the level, fresh values.
pub(crate) struct StepContext<'a> {
    pub(crate) schema: &'static Schema,
    pub(crate) isolation: Isolation,
    pub(crate) keys: u32,
    pub(crate) fresh: &'a AtomicI64,
    /// `BEGIN ...` not yet sent: it goes in front of the transaction's first statement
    /// (one simple query, so nothing runs outside the transaction if BEGIN fails).
    pub(crate) pending_begin: AtomicBool,
}

impl StepContext<'_> {
    /// A value no other write has used.
    fn fresh(&self) -> i64 {
        self.fresh.fetch_add(1, Ordering::SeqCst)
    }

    /// Runs `sql`, preceded by the transaction's `BEGIN` when that is still pending.
    pub(crate) async fn query(
        &self,
        client: &Client,
        sql: &str,
    ) -> Result<Vec<SimpleQueryRow>, WorkloadError> {
        if self.pending_begin.swap(false, Ordering::SeqCst) {
            query(client, &format!("{}; {sql}", self.isolation.begin_sql())).await
        } else {
            query(client, sql).await
        }
    }
}

/// Runs one step; returns the operations it recorded (none for a no-op delete or update,
/// two for a read-modify-write).
pub(crate) async fn run_step(
    client: &Client,
    cx: &StepContext<'_>,
    step: &Step,
) -> Result<Vec<Recorded>, WorkloadError> {
    let s = cx.schema;
    Ok(match step {
        Step::Read { key } => read(client, cx, *key).await?,
        Step::ReadModifyWrite { key } => {
            let mut ops = read(client, cx, *key).await?;
            let RawOp::Read { row, .. } = &ops[0].op else { unreachable!("read records reads") };
            let middle = modified_columns(s, *key, row.as_deref(), cx.keys);
            ops.push(upsert(client, cx, s.row(*key, &middle, cx.fresh())).await?);
            ops
        }
        Step::Upsert { key, columns } => vec![upsert(client, cx, s.row(*key, columns, cx.fresh())).await?],
        Step::Update { key, columns } => {
            update(client, cx, s.row(*key, columns, cx.fresh())).await?.into_iter().collect()
        }
        Step::Delete { key } => delete(client, cx, *key).await?.into_iter().collect(),
        Step::Select { predicate } => select(client, cx, predicate).await?,
        Step::Aggregate { predicate, function, column } => {
            vec![aggregate(client, cx, predicate, *function, column).await?]
        }
        Step::PredicateUpdate { predicate, column, constant } => {
            let set = vec![(*column, *constant), (*s.columns.last().expect("columns"), cx.fresh())];
            vec![predicate_update(client, cx, predicate, set).await?]
        }
        Step::PredicateDelete { predicate } => vec![predicate_delete(client, cx, predicate).await?],
    })
}

/// The middle columns a read-modify-write installs: derived from the row read (`c2`
/// advanced by one), or from the key when the row was absent.
fn modified_columns(s: &Schema, key: i64, row: Option<&[i64]>, keys: u32) -> Vec<i64> {
    if s.is_kv() {
        return Vec::new();
    }
    match row {
        Some(r) => vec![r[1], (r[2] + 1) % ITEMS_C2_VALUES],
        None => vec![key % items_c1_values(keys), 0],
    }
}

/// Runs `sql` and returns its data rows.
pub(crate) async fn query(client: &Client, sql: &str) -> Result<Vec<SimpleQueryRow>, WorkloadError> {
    let messages = client.simple_query(sql).await.map_err(|e| WorkloadError::statement(sql, e))?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .collect())
}

/// Column `i` of `row` as text (`None` for NULL).
fn text<'r>(sql: &str, row: &'r SimpleQueryRow, i: usize) -> Result<Option<&'r str>, WorkloadError> {
    row.try_get(i).map_err(|e| WorkloadError::unexpected(sql, format!("column {i}: {e}")))
}

/// Column `i` of `row` as an integer (`None` for NULL).
fn int(sql: &str, row: &SimpleQueryRow, i: usize) -> Result<Option<i64>, WorkloadError> {
    match text(sql, row, i)? {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| WorkloadError::unexpected(sql, format!("column {i} is not an integer: {t:?}"))),
    }
}

fn snapshot(sql: &str, row: &SimpleQueryRow, i: usize) -> Result<Snapshot, WorkloadError> {
    let t = text(sql, row, i)?.ok_or_else(|| WorkloadError::unexpected(sql, "no snapshot"))?;
    t.parse::<Snapshot>().map_err(|e| isocert_adapters::AdapterError::from(e).into())
}

/// A 32-bit `xmin` column widened to the full xid next to `snap`.
fn xmin(sql: &str, row: &SimpleQueryRow, i: usize, snap: &Snapshot) -> Result<Option<u64>, WorkloadError> {
    match text(sql, row, i)? {
        None => Ok(None),
        Some(t) => {
            let x: u32 = t
                .parse()
                .map_err(|_| WorkloadError::unexpected(sql, format!("xmin is not an xid: {t:?}")))?;
            Ok(Some(snap.widen(x)))
        }
    }
}

/// Columns `from..from+n` of `row` as a full table row; `None` when the key column is NULL.
fn table_row(
    sql: &str,
    row: &SimpleQueryRow,
    from: usize,
    n: usize,
) -> Result<Option<Vec<i64>>, WorkloadError> {
    if int(sql, row, from)?.is_none() {
        return Ok(None);
    }
    (from..from + n)
        .map(|i| {
            int(sql, row, i)?.ok_or_else(|| WorkloadError::unexpected(sql, format!("column {i} is NULL")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn one_row(sql: &str, mut rows: Vec<SimpleQueryRow>) -> Result<SimpleQueryRow, WorkloadError> {
    match rows.len() {
        1 => Ok(rows.pop().expect("one row")),
        n => {
            let shown: Vec<String> = rows
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get(i).unwrap_or("NULL")).collect::<Vec<_>>().join("|"))
                .collect();
            Err(WorkloadError::unexpected(sql, format!("expected one row, got {n}: {}", shown.join("; "))))
        }
    }
}

fn literal_row(row: &[i64]) -> String {
    row.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

async fn read(client: &Client, cx: &StepContext<'_>, key: i64) -> Result<Vec<Recorded>, WorkloadError> {
    let s = cx.schema;
    let cols: Vec<String> = s.columns.iter().map(|c| format!("t.{c}")).collect();
    let sql = format!(
        "SELECT pg_current_snapshot()::text, t.xmin::text, {} FROM (SELECT 1) s LEFT JOIN {} t ON t.{} = {key}",
        cols.join(", "),
        s.table,
        s.pk()
    );
    let result = cx.query(client, &sql).await?;
    let first = result.first().ok_or_else(|| WorkloadError::unexpected(&sql, "no row"))?;
    let snap = snapshot(&sql, first, 0)?;
    let mut versions = Vec::with_capacity(1);
    for r in &result {
        if let Some(row) = table_row(&sql, r, 2, s.columns.len())? {
            let x = xmin(&sql, r, 1, &snap)?
                .ok_or_else(|| WorkloadError::unexpected(&sql, "row without xmin"))?;
            versions.push((row, x));
        }
    }
    if versions.is_empty() {
        return Ok(vec![Recorded { op: RawOp::Read { key, row: None }, meta: Map::new(), snapshot: snap }]);
    }
    // Normally one version. More than one is PostgreSQL at REPEATABLE READ returning both
    // its own insert and the snapshot's version of a row a concurrent transaction deleted:
    // record each as a read, own (newest) first (docs/POSTGRES.md).
    versions.sort_by_key(|(_, x)| std::cmp::Reverse(*x));
    let n = versions.len();
    Ok(versions
        .into_iter()
        .map(|(row, x)| {
            let mut meta = Map::from_iter([("xmin".to_string(), json!(x))]);
            if n > 1 {
                meta.insert("versions_returned".into(), json!(n));
            }
            Recorded { op: RawOp::Read { key, row: Some(row) }, meta, snapshot: snap.clone() }
        })
        .collect())
}

/// Runs a statement of shape `SELECT snapshot, (SELECT xmin FROM w)` for a single-row write.
async fn write_statement(
    client: &Client,
    cx: &StepContext<'_>,
    sql: &str,
) -> Result<(Snapshot, Option<u64>), WorkloadError> {
    let r = one_row(sql, cx.query(client, sql).await?)?;
    let snap = snapshot(sql, &r, 0)?;
    let x = xmin(sql, &r, 1, &snap)?;
    Ok((snap, x))
}

async fn upsert(client: &Client, cx: &StepContext<'_>, row: Vec<i64>) -> Result<Recorded, WorkloadError> {
    let s = cx.schema;
    let updates: Vec<String> = s.columns[1..].iter().map(|c| format!("{c} = EXCLUDED.{c}")).collect();
    let sql = format!(
        "WITH w AS (INSERT INTO {t} ({cols}) VALUES ({vals}) ON CONFLICT ({pk}) DO UPDATE SET {set} RETURNING xmin) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.table,
        cols = s.column_list(),
        vals = literal_row(&row),
        pk = s.pk(),
        set = updates.join(", ")
    );
    let (snap, x) = write_statement(client, cx, &sql).await?;
    let x = x.ok_or_else(|| WorkloadError::unexpected(&sql, "an upsert installed no row"))?;
    let meta = Map::from_iter([("xmin".to_string(), json!(x))]);
    Ok(Recorded { op: RawOp::Write { key: row[0], row: Some(row) }, meta, snapshot: snap })
}

async fn update(
    client: &Client,
    cx: &StepContext<'_>,
    row: Vec<i64>,
) -> Result<Option<Recorded>, WorkloadError> {
    let s = cx.schema;
    let set: Vec<String> = s.columns[1..].iter().zip(&row[1..]).map(|(c, v)| format!("{c} = {v}")).collect();
    let sql = format!(
        "WITH w AS (UPDATE {t} SET {set} WHERE {pk} = {key} RETURNING xmin) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM w)",
        t = s.table,
        set = set.join(", "),
        pk = s.pk(),
        key = row[0]
    );
    let (snap, x) = write_statement(client, cx, &sql).await?;
    Ok(x.map(|x| Recorded {
        op: RawOp::Write { key: row[0], row: Some(row) },
        meta: Map::from_iter([("xmin".to_string(), json!(x))]),
        snapshot: snap,
    }))
}

async fn delete(client: &Client, cx: &StepContext<'_>, key: i64) -> Result<Option<Recorded>, WorkloadError> {
    let s = cx.schema;
    let sql = format!(
        "WITH d AS (DELETE FROM {t} WHERE {pk} = {key} RETURNING xmin) \
         SELECT pg_current_snapshot()::text, (SELECT xmin::text FROM d)",
        t = s.table,
        pk = s.pk()
    );
    let (snap, x) = write_statement(client, cx, &sql).await?;
    Ok(x.map(|x| Recorded {
        op: RawOp::Write { key, row: None },
        meta: Map::from_iter([("xmin".to_string(), json!(x))]),
        snapshot: snap,
    }))
}

async fn select(
    client: &Client,
    cx: &StepContext<'_>,
    predicate: &str,
) -> Result<Vec<Recorded>, WorkloadError> {
    let s = cx.schema;
    let cols: Vec<String> = s.columns.iter().map(|c| format!("t.{c}")).collect();
    let sql = format!(
        "SELECT s.snap, t.xmin::text, {} FROM (SELECT pg_current_snapshot()::text AS snap) s LEFT JOIN {} t ON ({predicate})",
        cols.join(", "),
        s.table
    );
    let result = cx.query(client, &sql).await?;
    let first = result.first().ok_or_else(|| WorkloadError::unexpected(&sql, "no row"))?;
    let snap = snapshot(&sql, first, 0)?;
    let mut versions = Vec::with_capacity(result.len());
    for r in &result {
        if let Some(row) = table_row(&sql, r, 2, s.columns.len())? {
            let x = xmin(&sql, r, 1, &snap)?
                .ok_or_else(|| WorkloadError::unexpected(&sql, "row without xmin"))?;
            versions.push((row, x));
        }
    }
    // A result set has one row per key; should PostgreSQL return two versions of one row
    // (see `read`), the select keeps the newest and the others become item reads after it.
    let mut extra = Vec::new();
    let mut rows: Vec<Vec<i64>> = Vec::with_capacity(versions.len());
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
    let meta = Map::from_iter([("xmins".to_string(), json!(xmins))]);
    let mut recorded = vec![Recorded {
        op: RawOp::Select { predicate: predicate.to_string(), rows },
        meta,
        snapshot: snap.clone(),
    }];
    for (row, x) in extra {
        let meta = Map::from_iter([
            ("xmin".to_string(), json!(x)),
            ("extra_version_of_select".to_string(), json!(true)),
        ]);
        recorded.push(Recorded {
            op: RawOp::Read { key: row[0], row: Some(row) },
            meta,
            snapshot: snap.clone(),
        });
    }
    Ok(recorded)
}

async fn aggregate(
    client: &Client,
    cx: &StepContext<'_>,
    predicate: &str,
    function: AggregateFn,
    column: &'static str,
) -> Result<Recorded, WorkloadError> {
    let s = cx.schema;
    let sql = format!(
        "SELECT pg_current_snapshot()::text, (SELECT {f}({column}) FROM {t} WHERE {predicate})",
        f = function.as_str(),
        t = s.table
    );
    let r = one_row(&sql, cx.query(client, &sql).await?)?;
    let snap = snapshot(&sql, &r, 0)?;
    let result = int(&sql, &r, 1)?;
    Ok(Recorded {
        op: RawOp::Aggregate { predicate: predicate.to_string(), function, column, result },
        meta: Map::new(),
        snapshot: snap,
    })
}

/// The rows of a predicate write statement, by tag: `s` snapshot, `c` candidate, `w` written.
struct Tagged {
    snapshot: Snapshot,
    candidates: Vec<Json>,
    written: Vec<(Vec<i64>, u64)>,
}

/// Runs a predicate UPDATE or DELETE wrapped so that one statement returns its snapshot,
/// at read committed the candidates (rows matching in the snapshot), and the written rows.
async fn tagged_write(
    client: &Client,
    cx: &StepContext<'_>,
    predicate: &str,
    write_cte: String,
    written_columns: usize,
) -> Result<Tagged, WorkloadError> {
    let s = cx.schema;
    let nulls = |n: usize| ", NULL::bigint".repeat(n);
    let record_candidates = !cx.isolation.has_transaction_snapshot();
    let mut sql = String::from("WITH ");
    if record_candidates {
        sql.push_str(&format!(
            "c AS (SELECT {pk}, xmin FROM {t} WHERE {predicate}), ",
            pk = s.pk(),
            t = s.table
        ));
    }
    let written: Vec<String> = s.columns[..written_columns].iter().map(|c| format!("{c}::bigint")).collect();
    sql.push_str(&format!(
        "w AS ({write_cte}) SELECT 's', pg_current_snapshot()::text{n} UNION ALL SELECT 'w', xmin::text, {w} FROM w",
        n = nulls(written_columns),
        w = written.join(", ")
    ));
    if record_candidates {
        sql.push_str(&format!(
            " UNION ALL SELECT 'c', xmin::text, {pk}::bigint{n} FROM c",
            pk = s.pk(),
            n = nulls(written_columns - 1)
        ));
    }
    let result = cx.query(client, &sql).await?;
    let snap_row = result
        .iter()
        .find(|r| r.get(0) == Some("s"))
        .ok_or_else(|| WorkloadError::unexpected(&sql, "no snapshot row"))?;
    let snap = snapshot(&sql, snap_row, 1)?;
    let mut tagged = Tagged { snapshot: snap, candidates: Vec::new(), written: Vec::new() };
    for r in &result {
        let tag = r.get(0);
        if tag == Some("s") {
            continue;
        }
        let x = xmin(&sql, r, 1, &tagged.snapshot)?
            .ok_or_else(|| WorkloadError::unexpected(&sql, "row without xmin"))?;
        let row = table_row(&sql, r, 2, if tag == Some("c") { 1 } else { written_columns })?
            .ok_or_else(|| WorkloadError::unexpected(&sql, "row without key"))?;
        match tag {
            Some("c") => tagged.candidates.push(json!([row[0], x])),
            Some("w") => tagged.written.push((row, x)),
            other => return Err(WorkloadError::unexpected(&sql, format!("unknown row tag {other:?}"))),
        }
    }
    Ok(tagged)
}

async fn predicate_update(
    client: &Client,
    cx: &StepContext<'_>,
    predicate: &str,
    set: Vec<(&'static str, i64)>,
) -> Result<Recorded, WorkloadError> {
    let s = cx.schema;
    let assignments: Vec<String> = set.iter().map(|(c, v)| format!("{c} = {v}")).collect();
    let cte = format!(
        "UPDATE {t} SET {a} WHERE {predicate} RETURNING xmin, {cols}",
        t = s.table,
        a = assignments.join(", "),
        cols = s.column_list()
    );
    let tagged = tagged_write(client, cx, predicate, cte, s.columns.len()).await?;
    let mut meta = Map::new();
    meta.insert("xmins".into(), tagged.written.iter().map(|(_, x)| json!(x)).collect());
    if !cx.isolation.has_transaction_snapshot() {
        meta.insert("candidates".into(), Json::Array(tagged.candidates));
    }
    let rows = tagged.written.into_iter().map(|(r, _)| r).collect();
    Ok(Recorded {
        op: RawOp::Update { predicate: predicate.to_string(), set, rows },
        meta,
        snapshot: tagged.snapshot,
    })
}

async fn predicate_delete(
    client: &Client,
    cx: &StepContext<'_>,
    predicate: &str,
) -> Result<Recorded, WorkloadError> {
    let s = cx.schema;
    let cte = format!("DELETE FROM {t} WHERE {predicate} RETURNING xmin, {pk}", t = s.table, pk = s.pk());
    let tagged = tagged_write(client, cx, predicate, cte, 1).await?;
    let mut meta = Map::new();
    meta.insert("xmins".into(), tagged.written.iter().map(|(_, x)| json!(x)).collect());
    if !cx.isolation.has_transaction_snapshot() {
        meta.insert("candidates".into(), Json::Array(tagged.candidates));
    }
    let keys = tagged.written.into_iter().map(|(r, _)| r[0]).collect();
    Ok(Recorded {
        op: RawOp::Delete { predicate: predicate.to_string(), keys },
        meta,
        snapshot: tagged.snapshot,
    })
}
