//! [`Dgraph`]: the seam's [`Database`] for Dgraph.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use isocert_history::{Dialect, History};
use isocert_recovery::{
    dgraph_timestamps, recover_dgraph, LiveTicks, RawLog, RecordedLiveTicks, Recovered, RecoveryError,
    RowMatcher,
};
use serde_json::json;

use super::dql;
use super::http::{db_error, DgraphHttp};
use super::session::{DgraphSession, OpenTxns};
use super::url::DgraphUrl;
use crate::seam::{
    CaptureOptions, ChangeCapture, Database, DatabaseKind, DbError, IsolationLevel, NoThrowawayServer,
    TableSpec,
};
use crate::AdapterError;

/// How long one HTTP request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Rows per mutation when loading the table.
const LOAD_BATCH: usize = 500;

/// A Dgraph cluster under test, reached through one Alpha's HTTP port.
#[derive(Clone, Debug)]
pub struct Dgraph {
    url: DgraphUrl,
    http: DgraphHttp,
    next_session: Arc<AtomicU64>,
    open: OpenTxns,
}

impl Dgraph {
    /// The adapter for a `dgraph://host:8080` URL (docs/DGRAPH.md).
    ///
    /// # Errors
    /// A URL [`DgraphUrl::parse`] refuses.
    pub fn new(url: &str) -> Result<Self, AdapterError> {
        let url = DgraphUrl::parse(url)?;
        let http = DgraphHttp::new(&url.http_url, REQUEST_TIMEOUT)?;
        Ok(Dgraph { url, http, next_session: Arc::new(AtomicU64::new(1)), open: OpenTxns::default() })
    }

    /// The parsed URL.
    pub fn url(&self) -> &DgraphUrl {
        &self.url
    }

    /// Which of `table`'s predicates the cluster's schema has.
    async fn existing_predicates(&self, table: &TableSpec) -> Result<Vec<String>, DbError> {
        let dql = dql::schema_query(table);
        let answer = self.http.query(None, &dql).await.map_err(|e| db_error(&dql, e))?;
        let ours = dql::predicates(table);
        let listed = answer.data.get("schema").and_then(|s| s.as_array()).cloned().unwrap_or_default();
        Ok(listed
            .iter()
            .filter_map(|entry| entry.get("predicate").and_then(|p| p.as_str()))
            .filter(|p| ours.iter().any(|o| o == p))
            .map(str::to_string)
            .collect())
    }

    /// Drops those of `table`'s predicates that exist (and with them every value of every
    /// node), only those.
    async fn drop_predicates(&self, table: &TableSpec) -> Result<(), DbError> {
        for p in self.existing_predicates(table).await? {
            let body = json!({ "drop_attr": p }).to_string();
            self.http.alter(body).await.map_err(|e| db_error(&format!("/alter drop_attr {p}"), e))?;
        }
        Ok(())
    }
}

/// Dgraph has no change stream and no per-key version API: the certificate comes from the
/// history's timestamps alone ([`recover_dgraph`]), so the capture only checks that Alpha
/// answers and returns an empty log.
#[derive(Debug)]
pub struct TimestampsOnly {
    http: DgraphHttp,
}

impl ChangeCapture for TimestampsOnly {
    async fn wait_started(&mut self, _timeout: Duration) -> Result<(), AdapterError> {
        self.http.health().await.map_err(|e| AdapterError::Protocol {
            message: format!("Dgraph Alpha at {}: {e}", self.http.base()),
        })
    }

    fn recorded(&self) -> usize {
        0
    }

    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        Ok(RawLog::new())
    }
}

impl Database for Dgraph {
    type Session = DgraphSession;
    type Capture = TimestampsOnly;
    type Server = NoThrowawayServer<Self>;

    const KIND: DatabaseKind = DatabaseKind::Dgraph;
    const DIALECT: Dialect = Dialect::Dgraph;
    /// Dgraph runs every transaction at snapshot isolation, which `run` names repeatable read.
    const RUN_LEVELS: &'static [IsolationLevel] = &[IsolationLevel::RepeatableRead];
    const NEEDS_LOG: bool = false;

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        Dgraph::new(url)
    }

    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, Self::Server), AdapterError> {
        NoThrowawayServer::refused("one", "dgraph", "dgraph://127.0.0.1:8080")
    }

    /// The timestamps each session recorded (Zero's `start_ts`/`commit_ts`), as each
    /// transaction completes: recovery has no log to match and keeps them as they are.
    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(RecordedLiveTicks::new(dgraph_timestamps)))
    }

    async fn connect(&self) -> Result<DgraphSession, DbError> {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        Ok(DgraphSession::new(self.http.clone(), id, self.open.clone()))
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        self.drop_predicates(table).await?;
        let schema = dql::schema(table);
        self.http.alter(schema.clone()).await.map_err(|e| db_error(&format!("/alter {schema}"), e))?;
        for batch in rows.chunks(LOAD_BATCH) {
            let nodes = batch.iter().map(|r| dql::set_row(table, None, r)).collect::<Vec<_>>();
            // One blank node per row: `_:row` would make them one node.
            let nodes = nodes
                .into_iter()
                .zip(batch)
                .map(|(mut n, r)| {
                    n["uid"] = format!("_:row{}", r[0]).into();
                    n
                })
                .collect();
            let mutation = dql::set_mutation(nodes);
            self.http
                .mutate(None, &mutation, true)
                .await
                .map_err(|e| db_error(&format!("loading {} rows into {}", batch.len(), table.name), e))?;
        }
        Ok(())
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        Ok(!self.existing_predicates(table).await?.is_empty())
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        self.drop_predicates(table).await
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<isocert_history::Scalar>>, DbError> {
        crate::seam::integer_table(table)?;
        let rows: Result<Vec<Vec<i64>>, DbError> = async {
            let dql = dql::filter_query(table, None);
            let answer = self.http.query(None, &dql).await.map_err(|e| db_error(&dql, e))?;
            let nodes = dql::parse_nodes(table, &answer.data).map_err(|e| DbError::unexpected(&dql, e))?;
            Ok(nodes.into_iter().map(|n| n.row).collect())
        }
        .await;
        Ok(rows?.into_iter().map(crate::seam::int_row).collect())
    }

    /// Dgraph's HTTP API has no connections to end: the session's open transaction is
    /// aborted instead, so its next request or commit fails as Dgraph's aborts do.
    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        let start_ts = self.open.lock().ok().and_then(|open| open.get(&server_id).copied());
        let Some(start_ts) = start_ts else { return Ok(()) };
        match self.http.abort(start_ts).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_aborted() => Ok(()),
            Err(e) => Err(db_error(&format!("abort of start_ts {start_ts}"), e)),
        }
    }

    async fn start_capture(
        &self,
        _table: &TableSpec,
        options: &CaptureOptions,
    ) -> Result<TimestampsOnly, AdapterError> {
        if let Some(mode) = &options.mode {
            return Err(AdapterError::NotSupportedHere {
                message: format!(
                    "Dgraph's certificate comes from its transaction timestamps; --replication {mode} is PostgreSQL's"
                ),
            });
        }
        Ok(TimestampsOnly { http: self.http.clone() })
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_dgraph(h, log, matcher)
    }
}
