//! The database oracle: PostgreSQL itself decides whether a row matches a predicate.
//!
//! As in the paper (section 4.2), the row is loaded into the database and the predicate is
//! run against it. Each table of the history gets a session-private probe table: a copy of
//! the real table's definition (`CREATE TEMP TABLE .. (LIKE t)`) when the connected database
//! has that table, otherwise columns typed from the values the history holds. One call is one
//! statement, `WITH r AS (INSERT INTO probe .. RETURNING *) SELECT (predicate) FROM r AS t`,
//! so the row is a table row (not a constant the planner could fold) and the predicate keeps
//! the database's own evaluation rules, errors included.

use std::fmt::Write as _;
use std::sync::Mutex;

use isocert_history::{History, ObjId, PredId, Scalar, TableId, Value, ValueId};
use postgres::{Client, NoTls, Statement};
use rustc_hash::FxHashMap;

use crate::schema::{self, Schema};
use crate::{MatchesOracle, OracleError};

/// Rows a probe table holds before it is truncated.
const PROBE_ROWS: u32 = 10_000;

/// A probe table standing in for one table of the history.
struct Probe {
    /// The probe's (temporary) table name.
    name: String,
    /// The history table's column names, in `ColId` order, when the probe was made.
    columns: Vec<String>,
    /// The SQL type of each column.
    types: Vec<String>,
    /// Rows inserted since the last truncation.
    rows: u32,
}

struct Inner {
    client: Client,
    probes: FxHashMap<TableId, Probe>,
    statements: FxHashMap<PredId, Statement>,
}

/// The database matches oracle: answers [`MatchesOracle`] by running each predicate in a
/// live PostgreSQL. Slow (one round trip per question) but needs no interpreter; used to
/// cross-check the [`Interpreter`](crate::Interpreter) and as an opt-in fallback for
/// predicates it cannot compile ([`FallbackOracle`](crate::FallbackOracle)).
///
/// The predicate text is sent to the database as written: point it at a scratch database.
pub struct PostgresOracle {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PostgresOracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOracle").finish_non_exhaustive()
    }
}

fn db_error(e: postgres::Error) -> OracleError {
    OracleError::Database { message: e.to_string() }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The text PostgreSQL's input functions read back as exactly this scalar.
fn scalar_text(s: &Scalar) -> Option<String> {
    Some(match s {
        Scalar::Null => return None,
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) if f.is_nan() => "NaN".to_owned(),
        Scalar::Float(f) if f.is_infinite() => if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned(),
        Scalar::Float(f) => format!("{f:e}"),
        Scalar::Text(t) => t.to_string(),
    })
}

/// The SQL type for a column that held these kinds of scalars.
fn column_type(seen: u8) -> &'static str {
    match seen {
        schema::BOOL => "boolean",
        schema::INT => "bigint",
        k if k == schema::FLOAT || k == schema::FLOAT | schema::INT => "double precision",
        _ => "text",
    }
}

impl PostgresOracle {
    /// Connects to `url` (`postgres://user@host:port/db`).
    ///
    /// # Errors
    /// [`OracleError::Database`] when the connection fails.
    pub fn connect(url: &str) -> Result<Self, OracleError> {
        Ok(Self::from_client(Client::connect(url, NoTls).map_err(db_error)?))
    }

    /// Uses an open connection.
    pub fn from_client(client: Client) -> Self {
        PostgresOracle {
            inner: Mutex::new(Inner {
                client,
                probes: FxHashMap::default(),
                statements: FxHashMap::default(),
            }),
        }
    }

    /// The three-valued result of predicate `pred` on version `value` of `obj`, as the
    /// database computes it (`None`: NULL, or no row).
    ///
    /// # Errors
    /// [`OracleError::Eval`] with the database's message when the predicate fails on the
    /// row; [`OracleError::Database`] when the database cannot be used.
    pub fn truth(
        &self,
        h: &History,
        pred: PredId,
        obj: ObjId,
        value: ValueId,
    ) -> Result<Option<bool>, OracleError> {
        let p = h.predicate(pred);
        let o = h.object(obj);
        if o.table != p.table {
            return Ok(None);
        }
        let row: Vec<Option<String>> = match h.value(value) {
            Value::Absent => return Ok(None),
            Value::Scalar(s) => vec![scalar_text(&o.key), scalar_text(s)],
            Value::Row(r) => {
                let width = h.table(p.table).columns.len();
                (0..width).map(|i| r.columns().get(i).and_then(scalar_text)).collect()
            }
            Value::List(_) => return Err(self.eval_error(h, pred, obj, value, "a list is not a row".into())),
        };
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        let width = h.table(p.table).columns.len();
        let stale = inner.probes.get(&p.table).is_none_or(|probe| probe.columns.len() != width);
        if stale {
            let probe = make_probe(&mut inner.client, h, p.table, inner.probes.len())?;
            inner.probes.insert(p.table, probe);
            inner.statements.retain(|id, _| h.predicate(*id).table != p.table);
        }
        let probe = inner
            .probes
            .get_mut(&p.table)
            .ok_or_else(|| OracleError::Database { message: "probe table missing".into() })?;
        if probe.rows >= PROBE_ROWS {
            inner.client.batch_execute(&format!("TRUNCATE {}", probe.name)).map_err(db_error)?;
            probe.rows = 0;
        }
        let statement = match inner.statements.get(&pred) {
            Some(s) => s.clone(),
            None => {
                let sql = probe_query(probe, &h.table(p.table).name, &p.sql);
                let s = inner.client.prepare(&sql).map_err(|e| self.sql_error(h, pred, obj, value, e))?;
                inner.statements.insert(pred, s.clone());
                s
            }
        };
        probe.rows += 1;
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            row.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)).collect();
        let result = inner
            .client
            .query_one(&statement, &params)
            .map_err(|e| self.sql_error(h, pred, obj, value, e))?;
        result.try_get::<_, Option<bool>>(0).map_err(|e| self.sql_error(h, pred, obj, value, e))
    }

    fn eval_error(
        &self,
        h: &History,
        pred: PredId,
        obj: ObjId,
        value: ValueId,
        message: String,
    ) -> OracleError {
        OracleError::Eval {
            pred,
            sql: h.predicate(pred).sql.to_string(),
            row: format!("{} = {}", h.object_label(obj), h.value_label(obj, value)),
            message,
        }
    }

    fn sql_error(
        &self,
        h: &History,
        pred: PredId,
        obj: ObjId,
        value: ValueId,
        e: postgres::Error,
    ) -> OracleError {
        match e.as_db_error() {
            Some(db) => self.eval_error(h, pred, obj, value, db.message().to_owned()),
            None if e.is_closed() => db_error(e),
            None => self.eval_error(h, pred, obj, value, e.to_string()),
        }
    }
}

/// `WITH r AS (INSERT INTO probe (..) VALUES ($1::text::type, ..) RETURNING *) SELECT .. FROM r AS table`.
fn probe_query(probe: &Probe, table: &str, sql: &str) -> String {
    let mut q = format!("WITH r AS (INSERT INTO {} (", probe.name);
    let cols: Vec<String> = probe.columns.iter().map(|c| quote_ident(c)).collect();
    q.push_str(&cols.join(", "));
    q.push_str(") VALUES (");
    for (i, ty) in probe.types.iter().enumerate() {
        if i > 0 {
            q.push_str(", ");
        }
        let _ = write!(q, "${}::text::{ty}", i + 1);
    }
    // CASE WHEN gives the predicate the boolean context of WHERE (a string literal means a
    // boolean there, not text) while keeping NULL apart from FALSE.
    let _ = write!(
        q,
        ") RETURNING *) SELECT CASE WHEN ({sql}) THEN true WHEN NOT ({sql}) THEN false END FROM r AS {}",
        quote_ident(table)
    );
    q
}

fn make_probe(client: &mut Client, h: &History, table: TableId, n: usize) -> Result<Probe, OracleError> {
    let t = h.table(table);
    let name = format!("isocert_probe_{n}_{}", t.columns.len());
    let columns: Vec<String> = t.columns.iter().map(|c| c.to_string()).collect();
    let exists = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&quote_ident(&t.name)])
        .map_err(db_error)?
        .get::<_, bool>(0);
    let mut types = Vec::with_capacity(columns.len());
    if exists {
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {name}; CREATE TEMP TABLE {name} (LIKE {})",
                quote_ident(&t.name)
            ))
            .map_err(db_error)?;
        for c in &columns {
            let ty: Option<String> = client
                .query_one(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
                     WHERE attrelid = $1::text::regclass AND attname = $2::text AND NOT attisdropped",
                    &[&name, c],
                )
                .map(|r| r.get(0))
                .ok();
            types.push(ty.ok_or_else(|| OracleError::Database {
                message: format!("table {} in the database has no column {c:?}", t.name),
            })?);
        }
    } else {
        let mut schema = Schema::default();
        schema.update(h);
        let kinds = schema.table_kinds(h, table);
        types = kinds.iter().map(|k| column_type(*k).to_owned()).collect();
        let defs: Vec<String> =
            columns.iter().zip(&types).map(|(c, ty)| format!("{} {ty}", quote_ident(c))).collect();
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {name}; CREATE TEMP TABLE {name} ({})",
                defs.join(", ")
            ))
            .map_err(db_error)?;
    }
    Ok(Probe { name, columns, types, rows: 0 })
}

impl MatchesOracle for PostgresOracle {
    fn matches(&self, h: &History, pred: PredId, obj: ObjId, value: ValueId) -> Result<bool, OracleError> {
        Ok(self.truth(h, pred, obj, value)? == Some(true))
    }
}
