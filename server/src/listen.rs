//! The listener: accepts connections (plain or TLS) and serves HTTP/1.1 on each with hyper,
//! within limits that no unauthenticated client can exhaust.
//!
//! - At most [`ConnectionLimits::max_connections`] connections are open at once; past that
//!   the listener stops accepting until one closes (the kernel's backlog holds the rest).
//! - A client must send a request's headers within [`ConnectionLimits::header_timeout`],
//!   counted from the moment the connection waits for them: a connection that sends nothing
//!   (an idle keep-alive, or a half-sent request line) is closed then. A TLS handshake has
//!   the same bound. Bodies are read by the routes, with their own idle bound
//!   (`api::BODY_IDLE_TIMEOUT`) and only after the token was checked.
//! - On shutdown the listener stops accepting and lets the requests in flight finish (at
//!   most [`SHUTDOWN_GRACE`]).
//!
//! Written on hyper directly rather than with `axum::serve` (which has no connection cap and
//! no header timeout) or axum-server (whose plain and TLS paths differ): one accept loop
//! serves both.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// How long requests in flight may take to finish once the server is stopping.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Bounds on connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Time to send a request's headers (and to finish a TLS handshake).
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits { max_connections: 1024, header_timeout: Duration::from_secs(10) }
    }
}

/// A TLS acceptor for the certificate chain and key in two PEM files, speaking HTTP/1.1.
///
/// # Errors
/// A file that cannot be read or holds no certificate or key; a key that does not fit.
pub fn tls_acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading TLS certificate {}", cert.display()))?;
    let private =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading TLS key {}", key.display()))?;
    // Several crypto providers may be linked (reqwest's, ours): name the one to use.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .with_context(|| format!("TLS certificate {} and key {}", cert.display(), key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits for the requests in
/// flight (at most [`SHUTDOWN_GRACE`]).
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
        let (stream, _peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before it was taken:
                // pause briefly rather than spin.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (router, tls, stop) = (router.clone(), tls.clone(), stop_rx.clone());
        connections.spawn(async move {
            let _slot = slot;
            match tls {
                None => serve_connection(stream, router, limits, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, router, limits, stop).await,
                        Ok(Err(e)) => tracing::debug!("TLS handshake: {e}"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let finished =
        tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} })
            .await;
    if finished.is_err() {
        tracing::warn!("requests still running after {SHUTDOWN_GRACE:?} were cut off");
    }
}

async fn serve_connection<I>(io: I, router: Router, limits: ConnectionLimits, mut stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut router = router.clone();
        async move { tower_service::Service::call(&mut router, request.map(Body::new)).await }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!("connection: {e}");
            }
        }
        _ = stop.changed() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
