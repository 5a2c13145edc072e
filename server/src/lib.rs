//! `isocert serve`: the version-certificate API of the Emme paper's deployment story. A
//! database vendor runs it inside its own infrastructure, beside the database: it consumes
//! the database's change stream through the adapter seam into a durable version store, and
//! answers each customer's history with the certificate for exactly those transactions,
//! without the customer holding replication privileges or seeing other tenants' data.
//!
//! - [`store`]: the durable version store (SQLite or PostgreSQL through sqlx).
//! - [`tenants`]: tokens (hashed), table grants, rate limits, reloaded at run time.
//! - [`certify`]: history + stored log -> certificate, with the database's recovery rule.
//! - [`api`]: the HTTP routes (axum) and their OpenAPI document (utoipa).
//! - [`client`]: the client side, used by `isocert certificate` and `isocert run
//!   --certificate-api`.
//!
//! docs/API.md describes the deployment, every endpoint and what a tenant can see.

pub mod answers;
pub mod api;
pub mod certify;
pub mod client;
pub mod cpu;
pub mod listen;
pub mod logs;
pub mod metrics;
pub mod position;
pub mod store;
pub mod tenants;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use isocert_adapters::{Database, FeedProgress, FeedSink, FeedTxn};
use tokio::sync::watch;

use crate::api::{ApiConfig, AppState};
use crate::certify::SeamBackend;
use crate::cpu::CpuPool;
use crate::listen::ConnectionLimits;
use crate::store::{Leadership, VersionStore};
use crate::tenants::TenantRegistry;

/// How a server is set up.
#[derive(Debug)]
pub struct ServeConfig {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Where `/metrics` is served (never on the tenants' listener); `None`: not served.
    pub metrics_listen: Option<SocketAddr>,
    /// The store URL (`sqlite://PATH` or `postgres://...`).
    pub store_url: String,
    /// The tenants.
    pub tenants: Arc<TenantRegistry>,
    /// Limits and bounds of the API.
    pub api: ApiConfig,
    /// Bounds on connections.
    pub connections: ConnectionLimits,
    /// TLS certificate and key files (PEM), for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// The addresses a started server answers on.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The tenants' API.
    pub api: SocketAddr,
    /// The metrics listener, if any.
    pub metrics: Option<SocketAddr>,
}

/// The sink that stores the feed's batches.
struct StoreSink(VersionStore);

impl FeedSink for StoreSink {
    async fn store(&mut self, txns: Vec<FeedTxn>, resume: u64) -> Result<(), String> {
        self.0.store(&txns, resume).await.map_err(|e| e.to_string())
    }
}

/// How often stored versions older than the retention window are collected.
const GC_INTERVAL: Duration = Duration::from_secs(60);
/// How often the tenants file is checked for changes.
const TENANTS_INTERVAL: Duration = Duration::from_secs(1);
/// Pause before the feed is restarted after it stopped with an error.
const FEED_RESTART: Duration = Duration::from_secs(2);
/// How often a follower replica tries to take the lead, and a leader checks it still holds
/// it: a leader killed with SIGKILL is replaced within about this (plus the feed's start).
const LEAD_INTERVAL: Duration = Duration::from_secs(1);
/// How often a follower reads the stored position while a request waits for it.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

/// Runs the server on `db` until SIGINT or SIGTERM: opens the store, takes the lead of the
/// change feed (or follows the replica that has it, on a shared PostgreSQL store), serves
/// the API. `ready` is called with the bound addresses once requests are accepted.
///
/// # Errors
/// A store or listener that cannot be set up. A feed that cannot be taken (a slot ahead
/// of the store: its transactions in between would be missing from certificates) is not
/// an error: the server follows, reports it on `/healthz`, and tries again.
pub async fn run_server<D: Database>(
    db: D,
    config: ServeConfig,
    ready: impl FnOnce(Bound),
) -> anyhow::Result<()> {
    let store = VersionStore::open(&config.store_url).await.context("opening the version store")?;
    let name = config.api.feed_name.clone();
    let progress = FeedProgress::new();
    let backend: Arc<dyn certify::Backend> = Arc::new(SeamBackend(db.clone()));
    let cpu = CpuPool::per_core().context("starting the request threads")?;
    let state = AppState::new(
        backend,
        store.clone(),
        Arc::clone(&progress),
        Arc::clone(&config.tenants),
        config.api.clone(),
        cpu,
    );
    // The first replica to start leads. One that cannot take the feed (a store behind the
    // slot) does not exit: replicas started together must all come up (issue 47), and
    // another may store what this one lacks. It follows, says why on /healthz and in its
    // log, and tries again every LEAD_INTERVAL.
    let lead = match store.try_lead(&name).await.context("electing the feed's leader")? {
        Some(lead) => match open_feed(&db, &store, &name).await {
            Ok(resume) => Some((resume, lead)),
            Err(e) => {
                refuse_feed(&state, &name, &e);
                lead.release().await;
                None
            }
        },
        None => {
            tracing::info!(
                feed = name,
                "another server consumes the change feed: following it through the store"
            );
            None
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let feed =
        tokio::spawn(lead_or_follow(db, name, lead, store.clone(), Arc::clone(&state), stop_rx.clone()));
    let gc = tokio::spawn(collect_garbage(Arc::clone(&state), config.api.retention, stop_rx.clone()));
    let reload = tokio::spawn(reload_tenants(Arc::clone(&config.tenants), stop_rx.clone()));

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let tls = match &config.tls {
        Some((cert, key)) => Some(listen::tls_acceptor(cert, key)?),
        None => None,
    };
    let metrics = match config.metrics_listen {
        Some(addr) => {
            let l =
                tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
            let bound = l.local_addr()?;
            let router = api::metrics_router(Arc::clone(&state));
            let mut stop = stop_rx.clone();
            let limits = ConnectionLimits { max_connections: 64, ..config.connections };
            tokio::spawn(listen::serve(l, None, router, limits, async move {
                let _ = stop.changed().await;
            }));
            Some(bound)
        }
        None => None,
    };
    ready(Bound { api: listener.local_addr()?, metrics });
    let shutdown = async move {
        wait_for_signal().await;
        tracing::info!("stopping: finishing the requests in flight");
    };
    listen::serve(listener, tls, api::router(Arc::clone(&state)), config.connections, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = feed.await;
    gc.abort();
    reload.abort();
    Ok(())
}

/// Opens (creating if needed) the feed and the position to resume it from: the store's,
/// unless the store has none yet.
async fn open_feed<D: Database>(db: &D, store: &VersionStore, name: &str) -> anyhow::Result<u64> {
    let slot_position = db.open_feed(name).await.context("opening the change feed")?;
    match store.resume_position().await? {
        Some(stored) if slot_position > stored => anyhow::bail!(
            "the change feed {name} has moved past what the store holds (slot at {slot_position}, store at \
             {stored}): transactions in between would be missing. Use a new --feed-name (and store) for this \
             database"
        ),
        Some(stored) => Ok(stored),
        None => Ok(slot_position),
    }
}

/// Reports why this server cannot take the change feed (log, `/healthz`); it follows.
fn refuse_feed(state: &AppState, name: &str, error: &anyhow::Error) {
    let message = format!("{error:#}");
    tracing::error!(
        feed = name,
        "cannot take the change feed: {message}; following, and trying again every {LEAD_INTERVAL:?}"
    );
    *state.feed_error.lock().expect("feed error lock") = Some(message);
}

/// Leads the feed while this server holds the lead, follows the store otherwise, and
/// takes the lead when the leader is gone (a shared PostgreSQL store; with SQLite this
/// server always leads).
async fn lead_or_follow<D: Database>(
    db: D,
    name: String,
    mut lead: Option<(u64, Leadership)>,
    store: VersionStore,
    state: Arc<AppState>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if let Some((resume, leadership)) = lead.take() {
            state.leader.store(true, Ordering::SeqCst);
            tracing::info!(feed = name, "leading: this server consumes the change feed");
            let leadership =
                run_feed_while_leading(&db, &name, resume, &store, &state, leadership, &stop).await;
            state.leader.store(false, Ordering::SeqCst);
            state.progress.set_connected(false);
            leadership.release().await;
            if *stop.borrow() {
                return;
            }
            tracing::warn!(feed = name, "lost the lead of the change feed: following");
        }
        // Following: the store's position is what this server can certify up to.
        let mut next_try = tokio::time::Instant::now();
        loop {
            if let Ok(Some(stored)) = store.resume_position().await {
                state.progress.advance(stored);
            }
            if tokio::time::Instant::now() >= next_try {
                next_try = tokio::time::Instant::now() + LEAD_INTERVAL;
                match store.try_lead(&name).await {
                    Ok(Some(leadership)) => match open_feed(&db, &store, &name).await {
                        Ok(resume) => {
                            *state.feed_error.lock().expect("feed error lock") = None;
                            lead = Some((resume, leadership));
                            break;
                        }
                        Err(e) => {
                            refuse_feed(&state, &name, &e);
                            leadership.release().await;
                        }
                    },
                    // Another replica holds the feed: what this one could not take is not
                    // this one's to report.
                    Ok(None) => *state.feed_error.lock().expect("feed error lock") = None,
                    Err(e) => tracing::warn!(feed = name, "electing the feed's leader: {e}"),
                }
            }
            let waiting = state.progress.wanted() > state.progress.covered();
            let pause = if waiting { FOLLOW_INTERVAL } else { LEAD_INTERVAL };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = state.progress.asked() => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// Runs the feed (restarting it after errors) until the server stops or the lead is lost;
/// returns the lead to be released.
async fn run_feed_while_leading<D: Database>(
    db: &D,
    name: &str,
    mut resume: u64,
    store: &VersionStore,
    state: &Arc<AppState>,
    mut leadership: Leadership,
    stop: &watch::Receiver<bool>,
) -> Leadership {
    let (term_tx, term_rx) = watch::channel(false);
    // The feed stops when the server does, or as soon as the lock's session may be gone
    // (another replica may hold the lead then).
    let watch_lead = async {
        let mut stop = stop.clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(LEAD_INTERVAL) => {
                    if !leadership.still_held().await {
                        break;
                    }
                }
                _ = stop.changed() => break,
            }
        }
        let _ = term_tx.send(true);
    };
    let feed = async {
        loop {
            let result = db
                .run_feed(
                    name,
                    resume,
                    StoreSink(store.clone()),
                    Arc::clone(&state.progress),
                    term_rx.clone(),
                )
                .await;
            if *term_rx.borrow() {
                return;
            }
            let message = match result {
                Ok(()) => "the change feed ended".to_string(),
                Err(e) => format!("{e:#}"),
            };
            tracing::error!(feed = name, "{message}; restarting in {FEED_RESTART:?}");
            *state.feed_error.lock().expect("feed error lock") = Some(message);
            let mut term = term_rx.clone();
            tokio::select! {
                _ = tokio::time::sleep(FEED_RESTART) => {}
                _ = term.changed() => return,
            }
            if let Ok(Some(stored)) = store.resume_position().await {
                resume = stored;
            }
            *state.feed_error.lock().expect("feed error lock") = None;
        }
    };
    tokio::join!(watch_lead, feed);
    leadership
}

/// Collects versions older than the retention window, on the leader only.
async fn collect_garbage(state: Arc<AppState>, retention: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(GC_INTERVAL) => {}
            _ = stop.changed() => return,
        }
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
            - retention.as_secs() as i64;
        if !state.is_leader() {
            continue;
        }
        match state.store.collect_garbage(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(transactions = n, "collected versions older than the retention window"),
            Err(e) => tracing::warn!("garbage collection: {e}"),
        }
    }
}

async fn reload_tenants(tenants: Arc<TenantRegistry>, mut stop: watch::Receiver<bool>) {
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        let force = tokio::select! {
            _ = tokio::time::sleep(TENANTS_INTERVAL) => false,
            _ = async { match &mut hangup { Some(h) => { h.recv().await; } None => std::future::pending().await } } => true,
            _ = stop.changed() => return,
        };
        tenants.reload(force);
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
