//! A certificate for a submitted history, from the store: which table incarnations the
//! history names (and whether its tenant may see them), waiting until the feed has stored
//! every commit the history can contain, the log of those tables, and the database's
//! recovery rule applied to history + log.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use isocert_adapters::{AdapterError, Database};
use isocert_certify::CertifyError as PipelineError;
use isocert_history::{
    v1, Certificate, ForeignWriter, HiddenRead, HiddenReason, History, ObjId, Op, OpRef, TxnId, ValueId,
    Writer,
};
use isocert_oracle::Interpreter;
use isocert_recovery::{CommittedTxn, InitialVersion, RawLog, Recovered, RecoveryError};
use rustc_hash::FxHashSet;

use crate::cpu::CpuPool;
use crate::logs::LogCache;
use crate::position::PositionCache;
use crate::store::{StoreError, StoredTable, VersionStore};
use crate::tenants::Tenant;

/// The database behind the server, with its type erased: what certifying needs of the
/// seam.
pub trait Backend: Send + Sync + 'static {
    /// The database's change-stream position now ([`Database::stream_position`]).
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>>;
    /// The recovery rule ([`Database::recover`]) with the SQL predicate interpreter, on
    /// `log` without the history's initial load ([`Database::initial_load`]: decided by
    /// position, never by value), whose effect becomes `h`'s initial versions whatever it
    /// claims ([`Database::settle_initial`]), after the log's foreign writers were added to
    /// `h` ([`Database::add_foreign_writers`]); returns them and the initial versions as the
    /// certificate may show them. Unless `reveal`, foreign values (initial ones included)
    /// are hidden before anything is computed ([`Database::hide_foreign_values`]) and the
    /// certificate marks the operations whose outcome rests on them
    /// ([`Certificate::hidden_reads`]).
    fn recover(&self, h: &mut History, log: &RawLog, reveal: bool) -> Result<Recovery, CertifyError>;
    /// How many of `writers` (commit position, database id: the transactions of one table
    /// incarnation) are transactions `h` records, as [`Database::add_foreign_writers`]
    /// tells them from foreign ones; 0 when the adapter cannot tell.
    fn recorded(&self, h: &History, writers: &[(u64, u64)]) -> usize;
}

/// What [`Backend::recover`] gives: the certificate, the foreign writers and the initial
/// versions as the certificate may show them.
#[derive(Debug)]
pub struct Recovery {
    /// The certificate.
    pub recovered: Recovered,
    /// The foreign writers.
    pub foreign: Vec<ForeignWriter>,
    /// The initial versions the initial load left (`None` per row: hidden), or `None` when
    /// the adapter has no rule for them and the history's claims stand.
    pub initial: Option<Vec<InitialVersion>>,
}

/// [`Backend`] for an adapter of the seam.
#[derive(Debug)]
pub struct SeamBackend<D>(pub D);

impl<D: Database> Backend for SeamBackend<D> {
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>> {
        Box::pin(self.0.stream_position())
    }

    fn recover(&self, h: &mut History, log: &RawLog, reveal: bool) -> Result<Recovery, CertifyError> {
        let disagrees = |e: RecoveryError| CertifyError::Disagrees(e.to_string());
        let load = D::initial_load(h, log).map_err(disagrees)?;
        let initial = D::settle_initial(h, &log.txns()[..load], reveal).map_err(disagrees)?;
        let hidden_initial: Vec<ObjId> =
            initial.iter().flatten().filter(|(_, v)| v.is_none()).map(|(o, _)| *o).collect();
        let mut rest = RawLog::new();
        for txn in &log.txns()[load..] {
            rest.push(txn.clone());
        }
        let log = &rest;
        let hidden = if reveal {
            None
        } else {
            D::hide_foreign_values(h, log).map_err(|e| CertifyError::HiddenOutcome(e.to_string()))?
        };
        let log = hidden.as_ref().unwrap_or(log);
        let submitted = h.txns.len();
        let foreign = D::add_foreign_writers(h, log).map_err(|e| CertifyError::Disagrees(e.to_string()))?;
        let mut interpreter = Interpreter::new(h).map_err(|e| CertifyError::Predicate(e.to_string()))?;
        let recovered = isocert_certify::recover::<D>(h, log, &mut interpreter).map_err(|e| match e {
            // A change the history does not record, that the adapter could not take for a
            // foreign writer. Its id and values belong to someone else: never echo them.
            PipelineError::Recovery(e @ RecoveryError::UnknownWriter { .. }) => {
                tracing::warn!("certificate refused for unknown writers: {e}");
                CertifyError::ForeignWriters
            }
            PipelineError::Recovery(other) => CertifyError::Disagrees(other.to_string()),
            PipelineError::Predicates(e) => CertifyError::Predicate(e.to_string()),
            other => CertifyError::Disagrees(other.to_string()),
        })?;
        let mut recovered = recovered;
        if !reveal && (!foreign.is_empty() || !hidden_initial.is_empty()) {
            recovered.certificate.hidden_reads =
                hidden_reads(h, submitted, &recovered.certificate, &foreign, &hidden_initial);
        }
        Ok(Recovery { recovered, foreign: foreign_writers(h, &foreign, reveal), initial })
    }

    fn recorded(&self, h: &History, writers: &[(u64, u64)]) -> usize {
        let mut log = RawLog::new();
        for &(commit_lsn, xid) in writers {
            log.push(CommittedTxn {
                xid,
                commit_lsn,
                end_lsn: commit_lsn,
                commit_time: 0,
                commit_ts: None,
                changes: Vec::new(),
            });
        }
        let mut scratch = h.clone();
        // An adapter that cannot tell (the seam's default) calls every one recorded, and
        // so the newest incarnation is taken, as before there was a choice.
        D::add_foreign_writers(&mut scratch, &log)
            .map_or(0, |foreign| log.len().saturating_sub(foreign.len()))
    }
}

/// The foreign writers as the certificate shows them: with every value when `reveal`, else
/// with none (their values were hidden before recovery: every one is the stand-in).
fn foreign_writers(h: &History, foreign: &[TxnId], reveal: bool) -> Vec<ForeignWriter> {
    foreign
        .iter()
        .map(|&t| ForeignWriter {
            txn: t,
            writes: h
                .txn(t)
                .ops
                .iter()
                .filter_map(|op| match op {
                    Op::Write { obj, value } => Some((*obj, reveal.then_some(*value))),
                    _ => None,
                })
                .collect(),
        })
        .collect()
}

/// The operations of the submitted history (its first `submitted` transactions) whose
/// outcome rests on a hidden value: an item read or a returned row, of a row a foreign
/// writer wrote or whose initial version is hidden (`hidden_initial`), whose value no
/// submitted transaction wrote and that is not a shown initial value (decided from the
/// history alone; a hidden initial version is the stand-in, never the value claimed); a
/// predicate operation whose version set holds a foreign version or a hidden initial one
/// (decided by snapshots and positions, not values).
fn hidden_reads(
    h: &History,
    submitted: usize,
    cert: &Certificate,
    foreign: &[TxnId],
    hidden_initial: &[ObjId],
) -> Vec<HiddenRead> {
    let is_foreign: FxHashSet<TxnId> = foreign.iter().copied().collect();
    let hidden_initial: FxHashSet<ObjId> = hidden_initial.iter().copied().collect();
    let foreign_rows: FxHashSet<ObjId> = foreign
        .iter()
        .flat_map(|&t| h.txn(t).ops.iter())
        .filter_map(|op| match op {
            Op::Write { obj, .. } => Some(*obj),
            _ => None,
        })
        .chain(hidden_initial.iter().copied())
        .collect();
    let mut sourced: FxHashSet<(ObjId, ValueId)> = h.initial.iter().copied().collect();
    let submitted_ids = || h.txn_ids().take(submitted);
    for t in submitted_ids() {
        for op in &h.txn(t).ops {
            match op {
                Op::Write { obj, value } => {
                    sourced.insert((*obj, *value));
                }
                Op::Update { rows, .. } => sourced.extend(rows.iter().map(|r| (r.obj, r.value))),
                Op::Delete { rows, .. } => sourced.extend(rows.iter().map(|r| (r.obj, ValueId::ABSENT))),
                _ => {}
            }
        }
    }
    // An object the header does not list starts unborn: its absent value is the initial one.
    let listed: FxHashSet<ObjId> = h.initial.iter().map(|(o, _)| *o).collect();
    sourced.extend(foreign_rows.iter().filter(|o| !listed.contains(o)).map(|&o| (o, ValueId::ABSENT)));
    let unsourced =
        |obj: ObjId, value: ValueId| foreign_rows.contains(&obj) && !sourced.contains(&(obj, value));
    let mut out = Vec::new();
    for t in submitted_ids() {
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let marked = match op {
                Op::Read { obj, value } => unsourced(*obj, *value),
                Op::Select { rows, .. } => rows.iter().any(|r| unsourced(r.obj, r.value)),
                _ => false,
            };
            if marked {
                out.push(HiddenRead {
                    at: OpRef { txn: t, op: i as u32 },
                    why: HiddenReason::ValueWrittenOutside,
                });
            }
        }
    }
    for (at, seen) in cert.version_sets.iter().flatten() {
        let predicate = h.txn(at.txn).ops[at.op as usize].predicate().is_some();
        let over_hidden = seen.iter().any(|s| match s.writer {
            Writer::Txn(w) => is_foreign.contains(&w),
            Writer::Initial => hidden_initial.contains(&s.obj),
        });
        if predicate && over_hidden && at.txn.index() < submitted {
            out.push(HiddenRead { at: *at, why: HiddenReason::PredicateOverHidden });
        }
    }
    out.sort_unstable();
    out.dedup_by_key(|r| r.at);
    out
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
    /// Recovery would have to compare the history's values with hidden foreign values
    /// (a transaction of unknown outcome that recorded no id, while others wrote its
    /// tables); said whatever the values are (409).
    #[error("the certificate cannot be given without revealing other writers' values: {0}")]
    HiddenOutcome(String),
    /// A predicate of the history cannot be compiled or evaluated, for instance one nested
    /// deeper than the compiler's limit, which the message names (422).
    #[error("a predicate of the history cannot be evaluated: {0}")]
    Predicate(String),
    /// History and log disagree (422).
    #[error("the history does not agree with the database's change stream: {0}")]
    Disagrees(String),
    /// A bug: the work panicked (500).
    #[error("{0}")]
    Internal(String),
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
    /// The initial versions as the certificate shows them ([`Recovery::initial`]).
    pub initial: Option<Vec<InitialVersion>>,
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
            self.initial.as_deref(),
            &mut out,
        )
        .expect("writing to memory");
        out
    }
}

/// The longest predicate (SQL text) a submitted history may hold. The compiler refuses
/// expressions nested deeper than 10,000 levels by name, but only after sqlparser built
/// the tree, and a tree is freed by recursion: a 60 MiB body of `value + 0 + 0 ...` would
/// build a tree some 30 million levels deep, whose freeing no stack holds. 64 KiB bounds
/// the tree to about 32,000 levels (the request threads' stack frees that with room to
/// spare) and is far beyond any predicate a workload writes.
pub const MAX_PREDICATE_BYTES: usize = 64 << 10;

/// Reads a submitted history (CPU work: run it on the CPU pool).
///
/// # Errors
/// [`CertifyError::BadHistory`] naming the line and field; [`CertifyError::Predicate`]
/// for a predicate longer than [`MAX_PREDICATE_BYTES`].
pub fn read_history(body: &[u8]) -> Result<History, CertifyError> {
    let h = v1::read_history(body).map_err(|e| CertifyError::BadHistory(e.to_string()))?;
    if let Some(long) = h.predicates().iter().find(|p| p.sql.len() > MAX_PREDICATE_BYTES) {
        return Err(CertifyError::Predicate(format!(
            "a WHERE clause of {} bytes; at most {MAX_PREDICATE_BYTES} are accepted",
            long.sql.len()
        )));
    }
    Ok(h)
}

/// The table incarnation each of the history's tables names, for `tenant`. Only the
/// tenant's schemas are looked at: another tenant's table of the same name is never looked
/// up, so it answers exactly as a table that was never written (404). Of several
/// incarnations (the table was dropped and created again), the one holding the history's
/// transactions is taken; the newest when the history wrote nothing.
async fn resolve_tables(
    backend: &Arc<dyn Backend>,
    store: &VersionStore,
    tenant: &Tenant,
    h: &History,
    schema: Option<&str>,
) -> Result<Vec<StoredTable>, CertifyError> {
    let mut out = Vec::new();
    for table in h.tables() {
        let name = &*table.name;
        let mut found: Vec<(String, Vec<StoredTable>)> = Vec::new();
        let schemas: Vec<&str> = match schema {
            Some(s) => vec![s],
            None => {
                let mut granted: Vec<&str> = tenant
                    .grants
                    .iter()
                    .filter(|g| g.table.as_deref().is_none_or(|t| t == name))
                    .map(|g| g.schema.as_str())
                    .collect();
                granted.sort_unstable();
                granted.dedup();
                granted
            }
        };
        for s in schemas {
            let incarnations = store.incarnations(s, name).await?;
            if !incarnations.is_empty() {
                found.push((s.to_string(), incarnations));
            }
        }
        let incarnations = match found.len() {
            0 => return Err(CertifyError::UnknownTable(name.to_string())),
            1 => found.pop().map(|(_, i)| i).unwrap_or_default(),
            _ => {
                let schemas = found.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(", ");
                return Err(CertifyError::Ambiguous { table: name.to_string(), schemas });
            }
        };
        let chosen = choose_incarnation(backend, store, h, incarnations, name).await?;
        out.push(chosen);
    }
    Ok(out)
}

/// Of a table's incarnations (newest first), the one whose stored transactions include
/// the history's; refused when that one was truncated (409) or collected (410).
async fn choose_incarnation(
    backend: &Arc<dyn Backend>,
    store: &VersionStore,
    h: &History,
    incarnations: Vec<StoredTable>,
    name: &str,
) -> Result<StoredTable, CertifyError> {
    let mut chosen = None;
    if incarnations.len() > 1 {
        for incarnation in &incarnations {
            let writers = store.writers_of(incarnation.table.id).await?;
            if backend.recorded(h, &writers) > 0 {
                chosen = Some(incarnation.clone());
                break;
            }
        }
        // None holds a transaction of the history: it wrote nothing that is still stored.
        // Were some versions collected, they may have been the history's.
        if chosen.is_none() && incarnations.iter().any(|i| i.collected) {
            return Err(CertifyError::Collected(name.to_string()));
        }
    }
    let chosen = chosen
        .or_else(|| incarnations.into_iter().next())
        .ok_or_else(|| CertifyError::UnknownTable(name.to_string()))?;
    if chosen.truncated {
        return Err(CertifyError::Truncated(name.to_string()));
    }
    if chosen.collected {
        return Err(CertifyError::Collected(name.to_string()));
    }
    Ok(chosen)
}

/// What certifying needs of the server.
#[derive(Debug, Clone, Copy)]
pub struct CertifyContext<'a> {
    /// The database.
    pub backend: &'a Arc<dyn Backend>,
    /// The version store.
    pub store: &'a VersionStore,
    /// The feed's progress.
    pub progress: &'a isocert_adapters::FeedProgress,
    /// The database's position, asked once for many concurrent requests.
    pub positions: &'a PositionCache,
    /// Where recovery runs.
    pub cpu: &'a CpuPool,
    /// The decoded logs kept between requests.
    pub logs: &'a LogCache,
    /// How long to wait for the feed.
    pub wait: Duration,
}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backend")
    }
}

/// Whether `tenant` may read the history's tables at all, decided from the grants alone
/// (nothing is looked up): a table name no grant covers (in `schema`, when given) is 403.
///
/// # Errors
/// [`CertifyError::Forbidden`] naming the history's own table, or
/// [`CertifyError::BadHistory`] for a history naming no table.
pub fn authorize(tenant: &Tenant, h: &History, schema: Option<&str>) -> Result<(), CertifyError> {
    if h.tables().is_empty() {
        return Err(CertifyError::BadHistory("the history names no table".into()));
    }
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
    Ok(())
}

/// The history's table incarnations, once the feed has stored every commit made before
/// the request.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The incarnation of each of the history's tables.
    pub tables: Vec<StoredTable>,
    /// The commit position of the last change stored for them: what the log, and so the
    /// certificate, depends on.
    pub last_change: Option<u64>,
    /// Whether the tenant's grants reveal other writers' values in every one of them
    /// ([`Tenant::reveals`]); else every foreign version is opaque.
    pub reveal: bool,
}

/// Prepares certifying `h` for `tenant`: checks the grants ([`authorize`]), waits (at most
/// `wait`) for the feed to pass the database's current position, and resolves the history's
/// tables to their incarnations.
///
/// # Errors
/// A [`CertifyError`]; none of them carries another tenant's data or a foreign writer's.
pub async fn resolve(
    cx: CertifyContext<'_>,
    tenant: &Tenant,
    h: &History,
    schema: Option<&str>,
) -> Result<Resolved, CertifyError> {
    // Authorisation before anything else, so a refused tenant learns nothing (not even
    // whether the feed is behind).
    authorize(tenant, h, schema)?;
    let position = cx.positions.position(cx.backend.as_ref()).await?;
    if !cx.progress.wait_for(position, cx.wait).await {
        return Err(CertifyError::NotReady);
    }
    let tables = resolve_tables(cx.backend, cx.store, tenant, h, schema).await?;
    let ids: Vec<u64> = tables.iter().map(|t| t.table.id).collect();
    let last_change = cx.store.last_change(&ids).await?;
    let reveal = tables.iter().all(|t| tenant.reveals(&t.table.schema, &t.table.name));
    Ok(Resolved { tables, last_change, reveal })
}

/// Certifies `h` over the resolved tables: their stored log and the database's recovery
/// rule, on the CPU pool.
///
/// # Errors
/// A [`CertifyError`]; none of them carries another tenant's data or a foreign writer's.
pub async fn recover(
    cx: CertifyContext<'_>,
    h: History,
    resolved: &Resolved,
) -> Result<Certified, CertifyError> {
    let ids: Vec<u64> = resolved.tables.iter().map(|t| t.table.id).collect();
    let log = cx.logs.log(cx.store, &ids, resolved.last_change).await?;
    let backend = Arc::clone(cx.backend);
    let reveal = resolved.reveal;
    cx.cpu
        .run(move || {
            let mut h = h;
            let submitted = h.txns.len();
            let Recovery { recovered, foreign, initial } = backend.recover(&mut h, &log, reveal)?;
            Ok(Certified { history: h, submitted, recovered, foreign, initial })
        })
        .await
        .map_err(|e| match e {
            crate::cpu::CpuError::Panicked(_) => CertifyError::Internal(e.to_string()),
            crate::cpu::CpuError::Stopped => CertifyError::Unavailable(e.to_string()),
        })?
}
