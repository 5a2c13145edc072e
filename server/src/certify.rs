//! A certificate for a submitted history, from the store: which table incarnations the
//! history names (and whether its tenant may see them), waiting until the feed has stored
//! every commit the history can contain, the log of those tables, and the database's
//! recovery rule applied to history + log.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use isocert_adapters::{AdapterError, Database};
use isocert_history::{v1, History};
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_recovery::{RawLog, Recovered, RecoveryError};

use crate::store::{StoreError, StoredTable, VersionStore};
use crate::tenants::Tenant;

/// The database behind the server, with its type erased: what certifying needs of the
/// seam.
pub trait Backend: Send + Sync + 'static {
    /// The database's change-stream position now ([`Database::stream_position`]).
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>>;
    /// The recovery rule ([`Database::recover`]) with the SQL predicate interpreter.
    fn recover(&self, h: &mut History, log: &RawLog) -> Result<Recovered, CertifyError>;
}

/// [`Backend`] for an adapter of the seam.
#[derive(Debug)]
pub struct SeamBackend<D>(pub D);

impl<D: Database> Backend for SeamBackend<D> {
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>> {
        Box::pin(self.0.stream_position())
    }

    fn recover(&self, h: &mut History, log: &RawLog) -> Result<Recovered, CertifyError> {
        let interpreter = Interpreter::new(h).map_err(|e| CertifyError::BadHistory(e.to_string()))?;
        let matcher = |h: &History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
        D::recover(h, log, &matcher).map_err(|e| match &e {
            // A change the history does not record: another client wrote rows of these
            // tables. Its id and values belong to someone else: never echo them.
            RecoveryError::UnknownWriter { .. } => {
                // The vendor's log may say which; the answer may not.
                tracing::warn!("certificate refused for foreign writers: {e}");
                CertifyError::ForeignWriters
            }
            other => CertifyError::Disagrees(other.to_string()),
        })
    }
}

/// Why no certificate was given; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    /// The body is not a v1 history (400).
    #[error("the history cannot be read: {0}")]
    BadHistory(String),
    /// The history names a table the tenant may not see (403). Only the history's own
    /// table name is said.
    #[error("this token may not read table {0}")]
    Forbidden(String),
    /// A table name several granted schemas hold (400).
    #[error("table {table} is in several schemas this token may read ({schemas}): pass ?schema=NAME")]
    Ambiguous {
        /// The history's table name.
        table: String,
        /// The schemas.
        schemas: String,
    },
    /// The feed has not stored the history's commits yet (202).
    #[error("the change feed has not reached the history's last commit yet")]
    NotReady,
    /// The history's table has no stored changes (404).
    #[error("no change of table {0} was recorded by this server (was it written since the server started?)")]
    UnknownTable(String),
    /// Some versions were garbage-collected (410).
    #[error("table {0} has versions older than the retention window; they were collected")]
    Collected(String),
    /// The table was truncated (409).
    #[error("table {0} was truncated: its rows have no versions to certify")]
    Truncated(String),
    /// Rows the history touched were also written by transactions outside it (409).
    #[error(
        "rows of the history's tables were written by transactions the history does not record \
         (foreign writers are not supported yet: record every client writing these tables)"
    )]
    ForeignWriters,
    /// History and log disagree (422).
    #[error("the history does not agree with the database's change stream: {0}")]
    Disagrees(String),
    /// The database or the store failed (503).
    #[error("{0}")]
    Unavailable(String),
}

impl From<StoreError> for CertifyError {
    fn from(e: StoreError) -> Self {
        CertifyError::Unavailable(e.to_string())
    }
}

/// A recovered certificate with the history it belongs to (its statuses and timestamps
/// as recovery settled them).
#[derive(Debug)]
pub struct Certified {
    /// The history, updated by recovery.
    pub history: History,
    /// The certificate.
    pub recovered: Recovered,
}

/// Reads a submitted history.
///
/// # Errors
/// [`CertifyError::BadHistory`] naming the line and field.
pub fn read_history(body: &[u8]) -> Result<History, CertifyError> {
    v1::read_history(body).map_err(|e| CertifyError::BadHistory(e.to_string()))
}

/// The table incarnation each of the history's tables names, for `tenant`.
async fn resolve_tables(
    store: &VersionStore,
    tenant: &Tenant,
    h: &History,
    schema: Option<&str>,
) -> Result<Vec<StoredTable>, CertifyError> {
    let mut out = Vec::new();
    for table in h.tables() {
        let name = &*table.name;
        // Authorisation was checked before: only granted schemas are looked at here.
        let schemas: Vec<String> = match schema {
            Some(s) => vec![s.to_string()],
            None => store.schemas_of(name).await?.into_iter().filter(|s| tenant.may_see(s, name)).collect(),
        };
        let chosen = match schemas.as_slice() {
            [] => return Err(CertifyError::UnknownTable(name.to_string())),
            [one] => one.clone(),
            many => {
                return Err(CertifyError::Ambiguous { table: name.to_string(), schemas: many.join(", ") })
            }
        };
        let newest = store
            .incarnations(&chosen, name)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| CertifyError::UnknownTable(name.to_string()))?;
        if newest.truncated {
            return Err(CertifyError::Truncated(name.to_string()));
        }
        if newest.collected {
            return Err(CertifyError::Collected(name.to_string()));
        }
        out.push(newest);
    }
    Ok(out)
}

/// Certifies `h` for `tenant`: waits (at most `wait`) for the feed to pass the database's
/// current position, then recovers from the stored log of the history's tables.
///
/// # Errors
/// A [`CertifyError`]; none of them carries another tenant's data or a foreign writer's.
pub async fn certify(
    backend: &Arc<dyn Backend>,
    store: &VersionStore,
    progress: &isocert_adapters::FeedProgress,
    tenant: &Tenant,
    mut h: History,
    schema: Option<&str>,
    wait: Duration,
) -> Result<Certified, CertifyError> {
    if h.tables().is_empty() {
        return Err(CertifyError::BadHistory("the history names no table".into()));
    }
    // Authorisation before anything else, so a refused tenant learns nothing (not even
    // whether the feed is behind).
    for table in h.tables() {
        let name = &*table.name;
        let granted = match schema {
            Some(s) => tenant.may_see(s, name),
            None => tenant.grants.iter().any(|g| g.table.as_deref().is_none_or(|t| t == name)),
        };
        if !granted {
            return Err(CertifyError::Forbidden(name.to_string()));
        }
    }
    let position = backend.stream_position().await.map_err(|e| CertifyError::Unavailable(e.to_string()))?;
    if !progress.wait_for(position, wait).await {
        return Err(CertifyError::NotReady);
    }
    let tables = resolve_tables(store, tenant, &h, schema).await?;
    let ids: Vec<u64> = tables.iter().map(|t| t.table.id).collect();
    let log = store.log_for(&ids).await?;
    // Recovery is CPU work: off the async workers, so that other requests keep flowing.
    let backend = Arc::clone(backend);
    tokio::task::spawn_blocking(move || {
        let log = isocert_recovery::without_initial_load(&h, &log);
        let recovered = backend.recover(&mut h, &log)?;
        Ok(Certified { history: h, recovered })
    })
    .await
    .map_err(|e| CertifyError::Unavailable(format!("recovery stopped: {e}")))?
}
