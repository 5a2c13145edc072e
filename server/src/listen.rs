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
//! - A request hyper cannot parse (a malformed `Content-Length` or header: 400; a URI too
//!   long: 414; headers too large or too many: 431) is answered by hyper itself, before any
//!   route, with an empty body; [`JsonParseErrors`] gives that answer the JSON body
//!   `{"error": "..."}` every other answer has.
//! - On shutdown the listener stops accepting and lets the requests in flight finish (at
//!   most [`SHUTDOWN_GRACE`]).
//!
//! Written on hyper directly rather than with `axum::serve` (which has no connection cap and
//! no header timeout) or axum-server (whose plain and TLS paths differ): one accept loop
//! serves both.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
        .serve_connection(TokioIo::new(JsonParseErrors::new(io)), service);
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

/// A connection whose answers from hyper itself (to a request it cannot parse: 400, 414,
/// 431, a head with `content-length: 0` and no body) are given a JSON body naming the
/// problem, as docs/API.md promises for every answer. Every other byte passes unchanged.
///
/// hyper writes such an answer as one head, in one write, and closes the connection after
/// it; the routes' answers always have a body and a `content-type`, so they never match.
struct JsonParseErrors<I> {
    inner: I,
    /// The answer written instead of the one hyper is writing: its bytes, how many were
    /// written, and the length of hyper's (reported written once all of ours are).
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<I> JsonParseErrors<I> {
    fn new(inner: I) -> Self {
        JsonParseErrors { inner, replacing: None }
    }
}

/// The JSON answer for hyper's own answer `head`, if it is one.
fn json_parse_error(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let (status_line, headers) = text.strip_suffix("\r\n\r\n")?.split_once("\r\n")?;
    if headers.contains("\r\n\r\n") || !status_line.starts_with("HTTP/1.") {
        return None;
    }
    let message = match status_line.get(9..12)? {
        "400" => "the request cannot be parsed: a malformed request line or header (a Content-Length that is not one \
                  number, say)",
        "414" => "the request's URI is too long",
        "431" => "the request's headers are too large or too many",
        _ => return None,
    };
    let lines: Vec<&str> = headers.split("\r\n").collect();
    let is = |line: &&str, name: &str| {
        line.split_once(':').is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
    };
    let empty = lines
        .iter()
        .any(|l| is(l, "content-length") && l.split_once(':').is_some_and(|(_, v)| v.trim() == "0"));
    if !empty || lines.iter().any(|l| is(l, "content-type")) {
        return None;
    }
    let body = serde_json::json!({ "error": message }).to_string();
    let mut out =
        format!("{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len());
    for line in lines.iter().filter(|l| !is(l, "content-length")) {
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonParseErrors<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            match json_parse_error(buf) {
                Some(answer) => this.replacing = Some((answer, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        let Some((answer, written, reported)) = &mut this.replacing else { unreachable!("set above") };
        while *written < answer.len() {
            match ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => *written += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        let reported = *reported;
        this.replacing = None;
        Poll::Ready(Ok(reported))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_own_empty_answers_are_given_a_json_body() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(json_parse_error(hyper).unwrap()).unwrap();
        assert!(answer.starts_with(
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        ));
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())) && head.contains("date: x"),
            "{head}"
        );
        assert!(serde_json::from_str::<serde_json::Value>(body).unwrap()["error"].is_string());
        for routes in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"{\"error\": \"HTTP/1.1 400\"}",
        ] {
            assert!(json_parse_error(routes).is_none(), "{}", String::from_utf8_lossy(routes));
        }
    }
}
