//! PostgreSQL behind the seam: [`Postgres`] implements [`Database`] with the session of
//! `client.rs`, logical replication as the change capture, [`EmbeddedPostgres`] as the
//! throwaway server and [`recover_postgres`] as the recovery rule.

use std::time::Duration;

use isocert_history::{History, Scalar};
use isocert_recovery::{
    recover_postgres, CommittedTxn, LiveTicks, PgLiveTicks, RawLog, Recovered, RecoveryError, RowMatcher,
};

use super::client::{db_error, typed_row, PgSession};
use super::{
    connect, feed, replication, EmbeddedPostgres, EmbeddedPostgresBuilder, ReplicationConsumer,
    ReplicationMode, ReplicationSlot,
};
use tokio_postgres::Client;

use std::sync::Arc;
use tokio::sync::watch;

use super::physical::{access_path_settings, design_statements, maintenance_statements};
use crate::seam::{
    AccessPath, CaptureOptions, ChangeCapture, ColumnType, Database, DatabaseKind, DbError, ErrorClass,
    FeedProgress, FeedSink, PhysicalDesign, StaleObjects, TableLayout, TableSpec, ThrowawayServer,
};
use crate::AdapterError;

/// Rows per `INSERT` when loading the initial rows.
const INSERT_BATCH: usize = 1000;

/// A PostgreSQL server under test (needs `wal_level=logical` for the change capture).
#[derive(Clone, Debug)]
pub struct Postgres {
    url: String,
}

impl Postgres {
    /// The adapter for `url` (`postgres://` or `postgresql://`).
    pub fn new(url: impl Into<String>) -> Self {
        Postgres { url: url.into() }
    }

    /// The URL it connects to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection for setup, reading and fault injection.
    async fn admin_client(&self) -> Result<Client, DbError> {
        connect(&self.url).await.map_err(|e| match e {
            AdapterError::Db { context, source } => db_error(&context, source),
            other => DbError::new(ErrorClass::Fatal, None, "connecting to PostgreSQL", other),
        })
    }
}

/// The `CREATE TABLE` statement of a workload table, as the adapter creates it (a
/// reproducer's setup, `isocert hunt`'s `repro.spec`, creates the same table).
pub fn create_table_statement(table: &TableSpec) -> String {
    format!("CREATE TABLE {} ({});", table.name, definition(table))
}

/// `CREATE TABLE` column definitions of a workload table.
pub(super) fn definition(table: &TableSpec) -> String {
    let last = table.columns.len() - 1;
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match (i, table.column_type(i)) {
            (0, _) => format!("{c} integer PRIMARY KEY"),
            (_, ColumnType::Integer) if i == last => format!("{c} bigint NOT NULL"),
            (_, ColumnType::Integer) => format!("{c} integer NOT NULL"),
            (_, other) => format!("{c} {} NOT NULL", other.as_str()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Database for Postgres {
    type Session = PgSession;
    type Capture = PgCapture;
    type Server = EmbeddedPostgres;

    const KIND: DatabaseKind = DatabaseKind::Postgres;
    const EXPRESSION_UPDATES: bool = true;

    /// The manual's "Read Committed Isolation Level": a statement reads one snapshot; an
    /// `UPDATE`/`DELETE`/`MERGE`/`ON CONFLICT DO UPDATE` that meets a row a concurrent
    /// transaction changed waits for it, re-evaluates its `WHERE` on the newest committed
    /// version and computes its `SET` from it. At repeatable read and serializable such a
    /// statement fails with 40001 instead, so the version it replaces is again the newest
    /// (and its snapshot's): the same three promises hold at every level it runs.
    fn statement_promises(
        &self,
        _level: isocert_history::IsolationLevel,
    ) -> Option<isocert_history::Promises> {
        Some(isocert_history::Promises {
            database: "PostgreSQL".into(),
            statements: isocert_history::StatementPromise::ALL.to_vec(),
        })
    }

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        match DatabaseKind::from_url(url)? {
            DatabaseKind::Postgres => Ok(Postgres::new(url)),
            other => Err(AdapterError::Protocol {
                message: format!("a {} URL given to the PostgreSQL adapter", other.display_name()),
            }),
        }
    }

    async fn start_server(settings: &[(String, String)]) -> Result<(Self, EmbeddedPostgres), AdapterError> {
        let mut builder = EmbeddedPostgresBuilder::new();
        for (name, value) in settings {
            builder = builder.setting(name.clone(), value.clone());
        }
        let server = builder.start_async().await?;
        Ok((Postgres::new(server.url()), server))
    }

    async fn start_server_version(
        version: Option<String>,
        settings: &[(String, String)],
    ) -> Result<(Self, EmbeddedPostgres), AdapterError> {
        let mut builder = EmbeddedPostgresBuilder::new();
        if let Some(v) = &version {
            builder = builder.version(v)?;
        }
        for (name, value) in settings {
            builder = builder.setting(name.clone(), value.clone());
        }
        let server = builder.start_async().await?;
        Ok((Postgres::new(server.url()), server))
    }

    async fn server_version(&self) -> Option<String> {
        let client = self.admin_client().await.ok()?;
        let rows =
            client.simple_query("SELECT 'PostgreSQL ' || current_setting('server_version')").await.ok()?;
        rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
    }

    async fn has_merge(&self) -> bool {
        let Ok(client) = self.admin_client().await else { return false };
        let Ok(rows) = client.simple_query("SELECT current_setting('server_version_num')").await else {
            return false;
        };
        rows.iter().any(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                r.get(0).and_then(|v| v.parse::<u32>().ok()).is_some_and(|v| v >= 150_000)
            }
            _ => false,
        })
    }

    async fn connect(&self) -> Result<PgSession, DbError> {
        PgSession::connect(&self.url).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        self.prepare_designed_table(table, rows, &PhysicalDesign::default()).await.map(|_| ())
    }

    async fn prepare_designed_table(
        &self,
        table: &TableSpec,
        rows: &[Vec<i64>],
        design: &PhysicalDesign,
    ) -> Result<Vec<String>, DbError> {
        let client = self.admin_client().await?;
        let t = table.name;
        let keys: Vec<i64> = rows.iter().filter_map(|r| r.first().copied()).collect();
        let mut notes = Vec::new();
        let statements = design_statements(table, design, &keys).unwrap_or_else(|note| {
            notes.push(note);
            let plain = PhysicalDesign { layout: TableLayout::Plain, ..*design };
            design_statements(table, &plain, &keys).expect("a plain table always renders")
        });
        // A partitioned table's partitions go with it; nothing else does (no CASCADE).
        let create = format!("DROP TABLE IF EXISTS {t}; {};", statements.join("; "));
        client.simple_query(&create).await.map_err(|e| db_error(&create, e))?;
        for batch in rows.chunks(INSERT_BATCH) {
            let values: Vec<String> = batch
                .iter()
                .map(|r| format!("({})", r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))
                .collect();
            let sql = format!("INSERT INTO {t} ({}) VALUES {}", table.column_list(), values.join(", "));
            client.simple_query(&sql).await.map_err(|e| db_error(&sql, e))?;
        }
        if !design.is_default() {
            // The visibility map exists before the sessions open the table: a backend reads
            // its size once and would not see the pages VACUUM marks all-visible until an
            // invalidation reaches it (docs/FINDINGS.md, the bitmap-scan bugs).
            let vacuum = format!("VACUUM {t}");
            client.simple_query(&vacuum).await.map_err(|e| db_error(&vacuum, e))?;
        }
        Ok(notes)
    }

    fn access_path_settings(path: AccessPath) -> Result<Vec<String>, String> {
        Ok(access_path_settings(path))
    }

    fn maintenance_statements(table: &TableSpec, design: &PhysicalDesign) -> Vec<String> {
        maintenance_statements(table, design)
    }

    async fn initial_facts(&self, table: &TableSpec) -> Result<Option<serde_json::Value>, DbError> {
        let client = self.admin_client().await?;
        let sql = format!("SELECT DISTINCT xmin::text FROM {}", table.name);
        let rows = client.simple_query(&sql).await.map_err(|e| db_error(&sql, e))?;
        let mut xids: Vec<u64> = rows
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|x| x.parse().ok()),
                _ => None,
            })
            .collect();
        xids.sort_unstable();
        Ok(Some(serde_json::json!({ "initial_xids": xids })))
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        let client = self.admin_client().await?;
        let sql = "SELECT to_regclass($1) IS NOT NULL";
        let row = client.query_one(sql, &[&table.name]).await.map_err(|e| db_error(sql, e))?;
        Ok(row.get(0))
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        let client = self.admin_client().await?;
        let sql = format!("DROP TABLE IF EXISTS {}", table.name);
        client.simple_query(&sql).await.map(|_| ()).map_err(|e| db_error(&sql, e))
    }

    async fn drop_stale(&self, other_hosts: bool) -> Result<StaleObjects, AdapterError> {
        replication::drop_stale(&self.url, other_hosts).await
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<Scalar>>, DbError> {
        let client = self.admin_client().await?;
        let sql = format!("SELECT {} FROM {} ORDER BY 1", table.column_list(), table.name);
        let messages = client.simple_query(&sql).await.map_err(|e| db_error(&sql, e))?;
        let mut rows = Vec::new();
        for m in messages {
            if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                let row = typed_row(&sql, &r, 0, table, table.columns.len())?
                    .ok_or_else(|| DbError::unexpected(&sql, "a row whose key is NULL"))?;
                rows.push(row);
            }
        }
        Ok(rows)
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        let client = self.admin_client().await?;
        let sql = format!("SELECT pg_terminate_backend({server_id}, 5000)");
        client.simple_query(&sql).await.map(|_| ()).map_err(|e| db_error(&sql, e))
    }

    async fn is_blocked(&self, server_id: u64) -> Result<bool, DbError> {
        let client = self.admin_client().await?;
        // A lock wait, or a SERIALIZABLE READ ONLY DEFERRABLE transaction waiting for a safe
        // snapshot (isolationtester counts both as blocked).
        let sql = format!(
            "SELECT cardinality(pg_blocking_pids({server_id})) > 0 \
             OR cardinality(pg_safe_snapshot_blocking_pids({server_id})) > 0"
        );
        let rows = client.simple_query(&sql).await.map_err(|e| db_error(&sql, e))?;
        Ok(rows.iter().any(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0) == Some("t"),
            _ => false,
        }))
    }

    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(PgLiveTicks::new()))
    }

    async fn start_capture(
        &self,
        table: &TableSpec,
        options: &CaptureOptions,
    ) -> Result<PgCapture, AdapterError> {
        let mode: ReplicationMode = match &options.mode {
            Some(m) => m.parse().map_err(|message| AdapterError::Protocol { message })?,
            None => ReplicationMode::default(),
        };
        let slot = ReplicationSlot::create(&self.url, &options.run_name, &[table.name]).await?;
        Ok(PgCapture {
            consumer: slot.mode(mode).poll_interval(options.poll_interval).start(),
            mode,
            taken: 0,
        })
    }

    async fn open_feed(&self, name: &str) -> Result<u64, AdapterError> {
        feed::open(&self.url, name).await
    }

    async fn run_feed<S: FeedSink>(
        &self,
        name: &str,
        resume: u64,
        sink: S,
        progress: Arc<FeedProgress>,
        stop: watch::Receiver<bool>,
    ) -> Result<(), AdapterError> {
        feed::run(&self.url, name, resume, sink, progress, stop).await
    }

    async fn stream_position(&self) -> Result<u64, AdapterError> {
        let client = connect(&self.url).await?;
        replication::flush_wal(&client).await
    }

    fn add_foreign_writers(
        h: &mut History,
        log: &RawLog,
    ) -> Result<Vec<isocert_history::TxnId>, RecoveryError> {
        isocert_recovery::add_foreign_writers(h, log)
    }

    fn initial_load(h: &History, log: &RawLog) -> Result<usize, RecoveryError> {
        isocert_recovery::initial_load(h, log)
    }

    fn settle_initial(
        h: &mut History,
        load: &[isocert_recovery::CommittedTxn],
        reveal: bool,
    ) -> Result<Option<Vec<isocert_recovery::InitialVersion>>, RecoveryError> {
        isocert_recovery::settle_initial(h, load, reveal).map(Some)
    }

    fn hide_foreign_values(h: &History, log: &RawLog) -> Result<Option<RawLog>, RecoveryError> {
        isocert_recovery::hide_foreign_values(h, log)
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_postgres(h, log, matcher)
    }
}

/// Logical replication as the change capture: the consumer, and the mode it runs in for
/// the hint on failure.
#[derive(Debug)]
pub struct PgCapture {
    consumer: ReplicationConsumer,
    mode: ReplicationMode,
    /// Commits handed out by `take_committed` so far.
    taken: usize,
}

impl PgCapture {
    /// The running consumer (its pid, reconnect count).
    pub fn consumer(&self) -> &ReplicationConsumer {
        &self.consumer
    }
}

/// `e` with what was being done and, when streaming, the way around a server that refuses
/// replication connections.
fn explain(mode: ReplicationMode, doing: &str, e: AdapterError) -> AdapterError {
    if e.is_unrecordable() {
        // What the database did, not a connection problem the hint below could help with.
        return e;
    }
    let context = match mode {
        ReplicationMode::Stream => format!(
            "{doing} logical replication (streaming; `--replication poll` reads the slot over an \
             ordinary connection if replication connections are refused)"
        ),
        ReplicationMode::Poll => format!("{doing} logical replication"),
    };
    AdapterError::Context { context, source: Box::new(e) }
}

impl ChangeCapture for PgCapture {
    async fn wait_started(&mut self, timeout: Duration) -> Result<(), AdapterError> {
        let started = self.consumer.wait_started(timeout).await;
        started.map_err(|e| explain(self.mode, "starting", e))
    }

    fn recorded(&self) -> usize {
        self.consumer.recorded()
    }

    async fn take_committed(&mut self) -> Result<Vec<CommittedTxn>, AdapterError> {
        let mode = self.mode;
        let position = self.consumer.flushed_position().await?;
        self.consumer.wait_for(position).await.map_err(|e| explain(mode, "reading", e))?;
        let taken = self.consumer.committed_since(self.taken);
        self.taken += taken.len();
        Ok(taken)
    }

    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        let mode = self.mode;
        self.consumer.finish().await.map_err(|e| explain(mode, "finishing", e))
    }
}

impl ThrowawayServer for EmbeddedPostgres {
    fn url(&self) -> String {
        EmbeddedPostgres::url(self)
    }

    async fn shutdown(self) -> Result<(), AdapterError> {
        self.shutdown_async().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_declares_every_statement_promise_at_every_level_it_runs() {
        let pg = Postgres::from_url("postgresql://h/db").unwrap();
        for level in Postgres::RUN_LEVELS {
            let p = pg.statement_promises(*level).expect("declared");
            assert_eq!(
                (&*p.database, p.statements.as_slice()),
                ("PostgreSQL", &isocert_history::StatementPromise::ALL[..])
            );
        }
    }

    #[test]
    fn tables_get_integer_columns_with_a_bigint_value_column() {
        let kv = TableSpec::integers("kv", &["key", "value"]);
        assert_eq!(definition(&kv), "key integer PRIMARY KEY, value bigint NOT NULL");
        let items = TableSpec::integers("items", &["id", "c1", "c2", "v"]);
        assert_eq!(
            definition(&items),
            "id integer PRIMARY KEY, c1 integer NOT NULL, c2 integer NOT NULL, v bigint NOT NULL"
        );
        assert!(Postgres::from_url("mysql://h").is_err());
        assert_eq!(Postgres::from_url("postgresql://h/db").unwrap().url(), "postgresql://h/db");
    }
}
