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

pub mod api;
pub mod certify;
pub mod client;
pub mod metrics;
pub mod store;
pub mod tenants;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use isocert_adapters::{Database, FeedProgress, FeedSink, FeedTxn};
use tokio::sync::watch;

use crate::api::{ApiConfig, AppState};
use crate::certify::SeamBackend;
use crate::store::VersionStore;
use crate::tenants::TenantRegistry;

/// How a server is set up.
#[derive(Debug)]
pub struct ServeConfig {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The store URL (`sqlite://PATH` or `postgres://...`).
    pub store_url: String,
    /// The tenants.
    pub tenants: Arc<TenantRegistry>,
    /// Limits and bounds of the API.
    pub api: ApiConfig,
    /// TLS certificate and key files (PEM), for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
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

/// Runs the server on `db` until SIGINT or SIGTERM: opens the store and the feed, resumes
/// the feed from the store's position, serves the API. `ready` is called with the bound
/// address once requests are accepted.
///
/// # Errors
/// A store, feed or listener that cannot be set up; a slot that is ahead of the store
/// (its transactions in between would be missing from certificates).
pub async fn run_server<D: Database>(
    db: D,
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let store = VersionStore::open(&config.store_url).await.context("opening the version store")?;
    let name = config.api.feed_name.clone();
    let slot_position = db.open_feed(&name).await.context("opening the change feed")?;
    let resume = match store.resume_position().await? {
        Some(stored) if slot_position > stored => anyhow::bail!(
            "the change feed {name} has moved past what the store holds (slot at {slot_position}, store at \
             {stored}): transactions in between would be missing. Use a new --feed-name (and store) for this \
             database"
        ),
        Some(stored) => stored,
        None => slot_position,
    };
    let progress = FeedProgress::new();
    let backend: Arc<dyn certify::Backend> = Arc::new(SeamBackend(db.clone()));
    let state = AppState::new(
        backend,
        store.clone(),
        Arc::clone(&progress),
        Arc::clone(&config.tenants),
        config.api.clone(),
    );
    let (stop_tx, stop_rx) = watch::channel(false);

    let feed = tokio::spawn(run_feed_forever(
        db,
        name,
        resume,
        store.clone(),
        Arc::clone(&progress),
        Arc::clone(&state),
        stop_rx.clone(),
    ));
    let gc = tokio::spawn(collect_garbage(store.clone(), config.api.retention, stop_rx.clone()));
    let reload = tokio::spawn(reload_tenants(Arc::clone(&config.tenants), stop_rx.clone()));

    let router = api::router(Arc::clone(&state));
    let shutdown = async move {
        wait_for_signal().await;
        tracing::info!("stopping: finishing the requests in flight");
    };
    let served = match &config.tls {
        None => {
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .with_context(|| format!("listening on {}", config.listen))?;
            ready(listener.local_addr()?);
            axum::serve(listener, router).with_graceful_shutdown(shutdown).await.context("serving")
        }
        Some((cert, key)) => {
            // Several crypto providers may be linked (reqwest's, ours): name the one to use.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let tls =
                axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await.with_context(|| {
                    format!("reading TLS certificate {} and key {}", cert.display(), key.display())
                })?;
            let handle = axum_server::Handle::new();
            let listener = std::net::TcpListener::bind(config.listen)
                .with_context(|| format!("listening on {}", config.listen))?;
            let addr = listener.local_addr()?;
            let stopper = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                stopper.graceful_shutdown(Some(Duration::from_secs(10)));
            });
            ready(addr);
            axum_server::from_tcp_rustls(listener, tls)
                .handle(handle)
                .serve(router.into_make_service())
                .await
                .context("serving")
        }
    };
    let _ = stop_tx.send(true);
    let _ = feed.await;
    gc.abort();
    reload.abort();
    served
}

/// Keeps the feed running: restarts it after an error, which is shown in `/healthz` and
/// `/v1/status` meanwhile.
async fn run_feed_forever<D: Database>(
    db: D,
    name: String,
    mut resume: u64,
    store: VersionStore,
    progress: Arc<FeedProgress>,
    state: Arc<AppState>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let result =
            db.run_feed(&name, resume, StoreSink(store.clone()), Arc::clone(&progress), stop.clone()).await;
        if *stop.borrow() {
            return;
        }
        let message = match result {
            Ok(()) => "the change feed ended".to_string(),
            Err(e) => format!("{e:#}"),
        };
        tracing::error!(feed = name, "{message}; restarting in {FEED_RESTART:?}");
        *state.feed_error.lock().expect("feed error lock") = Some(message);
        tokio::select! {
            _ = tokio::time::sleep(FEED_RESTART) => {}
            _ = stop.changed() => return,
        }
        if let Ok(Some(stored)) = store.resume_position().await {
            resume = stored;
        }
        *state.feed_error.lock().expect("feed error lock") = None;
    }
}

async fn collect_garbage(store: VersionStore, retention: Duration, mut stop: watch::Receiver<bool>) {
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
        match store.collect_garbage(before).await {
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
