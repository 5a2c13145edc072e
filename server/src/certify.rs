//! A certificate for a submitted history, from the store: which table incarnations the
//! history names (and whether its tenant may see them), waiting until the feed has stored
//! every commit the history can contain, the log of those tables, and the database's
//! recovery rule applied to history + log.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use isocert_adapters::{AdapterError, Database};
use isocert_history::{opaque_value, v1, Certificate, ForeignWriter, History, ObjId, Op, TxnId, Writer};
use isocert_oracle::{Interpreter, MatchesOracle};
use isocert_recovery::{values_the_history_holds, RawLog, Recovered, RecoveryError};
use rustc_hash::FxHashSet;

use crate::store::{StoreError, StoredTable, VersionStore};
use crate::tenants::Tenant;

/// The database behind the server, with its type erased: what certifying needs of the
/// seam.
pub trait Backend: Send + Sync + 'static {
    /// The database's change-stream position now ([`Database::stream_position`]).
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>>;
    /// The recovery rule ([`Database::recover`]) with the SQL predicate interpreter, after
    /// the log's foreign writers were added to `h` ([`Database::add_foreign_writers`]);
    /// returns them as the certificate may show them.
    fn recover(&self, h: &mut History, log: &RawLog)
        -> Result<(Recovered, Vec<ForeignWriter>), CertifyError>;
}

/// [`Backend`] for an adapter of the seam.
#[derive(Debug)]
pub struct SeamBackend<D>(pub D);

impl<D: Database> Backend for SeamBackend<D> {
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>> {
        Box::pin(self.0.stream_position())
    }

    fn recover(
        &self,
        h: &mut History,
        log: &RawLog,
    ) -> Result<(Recovered, Vec<ForeignWriter>), CertifyError> {
        let foreign = D::add_foreign_writers(h, log).map_err(|e| CertifyError::Disagrees(e.to_string()))?;
        let interpreter = Interpreter::new(h).map_err(|e| CertifyError::BadHistory(e.to_string()))?;
        let matcher = |h: &History, p, o, v| interpreter.matches(h, p, o, v).map_err(|e| e.to_string());
        let recovered = D::recover(h, log, &matcher).map_err(|e| match &e {
            // A change the history does not record, that the adapter could not take for a
            // foreign writer. Its id and values belong to someone else: never echo them.
            RecoveryError::UnknownWriter { .. } => {
                tracing::warn!("certificate refused for unknown writers: {e}");
                CertifyError::ForeignWriters
            }
            other => CertifyError::Disagrees(other.to_string()),
        })?;
        let shown = foreign_writers(h, &recovered.certificate, &foreign, &interpreter)?;
        Ok((recovered, shown))
    }
}

/// The foreign writers as the certificate shows them: a value only where the history read
/// it. An opaque version that a predicate operation evaluated must give the same answer
/// from its stand-in ([`opaque_value`]) as from the real row, and must not count in an
/// aggregate; otherwise the certificate cannot be given without the value (409).
fn foreign_writers(
    h: &mut History,
    cert: &Certificate,
    foreign: &[TxnId],
    interpreter: &Interpreter,
) -> Result<Vec<ForeignWriter>, CertifyError> {
    if foreign.is_empty() {
        return Ok(Vec::new());
    }
    let shown = values_the_history_holds(h, foreign);
    let is_foreign: FxHashSet<TxnId> = foreign.iter().copied().collect();
    let written = |h: &History, w: TxnId, obj: ObjId| {
        h.txn(w).ops.iter().find_map(|op| match op {
            Op::Write { obj: o, value } if *o == obj => Some(*value),
            _ => None,
        })
    };
    let mut evaluated = Vec::new();
    for (at, seen) in cert.version_sets.iter().flatten() {
        let op = &h.txn(at.txn).ops[at.op as usize];
        let Some(pred) = op.predicate() else { continue };
        let aggregate = matches!(op, Op::Aggregate { .. });
        for s in seen {
            let Writer::Txn(w) = s.writer else { continue };
            if is_foreign.contains(&w) && !shown.get(&(w, s.obj)).copied().unwrap_or(false) {
                evaluated.push((pred, s.obj, w, aggregate));
            }
        }
    }
    for (pred, obj, w, aggregate) in evaluated {
        let real = written(h, w, obj)
            .ok_or_else(|| CertifyError::Disagrees("a foreign version has no write".into()))?;
        let stand_in = opaque_value(h, obj);
        let truth =
            |v| interpreter.matches(h, pred, obj, v).map_err(|e| CertifyError::Disagrees(e.to_string()));
        let (real_matches, stand_in_matches) = (truth(real)?, truth(stand_in)?);
        if real_matches != stand_in_matches || (aggregate && real_matches) {
            return Err(CertifyError::OpaqueMatch);
        }
    }
    Ok(foreign
        .iter()
        .map(|&t| ForeignWriter {
            txn: t,
            writes: h
                .txn(t)
                .ops
                .iter()
                .filter_map(|op| match op {
                    Op::Write { obj, value } => {
                        Some((*obj, shown.get(&(t, *obj)).copied().unwrap_or(false).then_some(*value)))
                    }
                    _ => None,
                })
                .collect(),
        })
        .collect())
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
    /// Rows the history touched were also written by transactions outside it that the
    /// adapter cannot take for foreign writers (409).
    #[error(
        "rows of the history's tables were written by transactions the history does not record, \
         and this database's adapter cannot describe them as foreign writers"
    )]
    ForeignWriters,
    /// A predicate operation evaluated a foreign writer's version the history did not read,
    /// and its answer depends on the value, which may not be shown (409).
    #[error(
        "a predicate read of the history evaluated a row written outside the history, and its answer \
         depends on that row's value, which is not shown to you"
    )]
    OpaqueMatch,
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
    /// The history, updated by recovery, with the foreign writers appended after the
    /// submitted transactions.
    pub history: History,
    /// How many transactions were submitted (the first ones of `history`).
    pub submitted: usize,
    /// The certificate.
    pub recovered: Recovered,
    /// The foreign writers as the certificate shows them.
    pub foreign: Vec<ForeignWriter>,
}

impl Certified {
    /// The certificate as the submitter may see it (v1 JSON with the `transactions` and
    /// `foreign_writers` extensions).
    pub fn to_json(&self) -> Vec<u8> {
        let txns: Vec<TxnId> = self.history.txn_ids().take(self.submitted).collect();
        let mut out = Vec::new();
        v1::write_certificate_with_facts(
            &self.history,
            &self.recovered.certificate,
            &txns,
            &self.foreign,
            &mut out,
        )
        .expect("writing to memory");
        out
    }
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
        let submitted = h.txns.len();
        let (recovered, foreign) = backend.recover(&mut h, &log)?;
        Ok(Certified { history: h, submitted, recovered, foreign })
    })
    .await
    .map_err(|e| CertifyError::Unavailable(format!("recovery stopped: {e}")))?
}
