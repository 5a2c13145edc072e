//! The HTTP API (axum): routes, authentication, limits, request logs, and the OpenAPI
//! document generated from the handlers' annotations (utoipa), so that every route served
//! is a route documented. `/metrics` is served by [`metrics_router`], on a listener of its
//! own (`--metrics-listen`), never beside the tenants' routes.

mod budget;
mod error;
mod request;
mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use isocert_adapters::FeedProgress;
use isocert_checker::{check, render_json, CheckError, CheckerKind, IsolationLevel};
use isocert_history::{v1, History};
use isocert_oracle::Interpreter;
use serde::Deserialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::budget::{BodyBudget, TokenSlots};
use self::error::ApiError;
use self::request::{
    authenticate_token, discard_body, encoding, inflate, over_budget, query, read_body, still_valid, Encoding,
};
use crate::answers::{AnswerCache, KeyBuilder, Recent};
use crate::certify::{read_history, recover, resolve, Backend, CertifyContext, CertifyError};
use crate::cpu::CpuPool;
use crate::logs::LogCache;
use crate::metrics::Metrics;
use crate::position::PositionCache;
use crate::store::VersionStore;
use crate::tenants::{Tenant, TenantRegistry};

pub use self::status::{FeedStatus, Status, TableStatus};

/// Limits and bounds of the API.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The name of the durable change feed (slot and publication).
    pub feed_name: String,
    /// How long a certificate request waits for the feed before answering 202.
    pub wait: Duration,
    /// The largest request body accepted, before and after decompression (bytes).
    pub body_limit: usize,
    /// How long stored versions are kept.
    pub retention: Duration,
    /// The bytes of request bodies held at once by all requests together (as sent, or
    /// inflated when larger); a body past it is refused (503).
    pub bodies_budget: usize,
    /// How many certificate and check requests one token may have in flight; one more is
    /// refused (429).
    pub requests_per_token: usize,
}

/// How many bytes of answers are kept for identical submissions.
const ANSWER_CACHE_BYTES: usize = 64 << 20;
/// How many parsed histories are kept, by the digest of their body as sent.
const PARSED_KEPT: usize = 8;
/// How many digests of bodies seen once are remembered: a body is kept parsed from its
/// second sighting on, so a body sent once is recovered from the history it was parsed into,
/// not a copy (the copy and its freeing were a quarter of such a request's CPU, `perf`,
/// issue 32), and is not held in memory afterwards.
const SEEN_KEPT: usize = 256;

/// What every handler shares.
pub struct AppState {
    /// The database behind the server.
    pub backend: Arc<dyn Backend>,
    /// The version store.
    pub store: VersionStore,
    /// The feed's progress (on a follower replica: the store's, polled).
    pub progress: Arc<FeedProgress>,
    /// The tenants.
    pub tenants: Arc<TenantRegistry>,
    /// Request counters.
    pub metrics: Metrics,
    /// Limits.
    pub config: ApiConfig,
    /// The last error of the feed, if it is not running.
    pub feed_error: Mutex<Option<String>>,
    /// Whether this server consumes the change feed (else another replica does).
    pub leader: AtomicBool,
    /// Where requests' CPU work runs.
    pub cpu: CpuPool,
    positions: PositionCache,
    logs: LogCache,
    parsed: Recent<History>,
    /// Digests of bodies seen once ([`SEEN_KEPT`]).
    seen: Recent<()>,
    answers: AnswerCache,
    budget: BodyBudget,
    token_slots: TokenSlots,
    openapi: OnceLock<String>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config", &self.config).finish_non_exhaustive()
    }
}

impl AppState {
    /// The shared state of a server.
    pub fn new(
        backend: Arc<dyn Backend>,
        store: VersionStore,
        progress: Arc<FeedProgress>,
        tenants: Arc<TenantRegistry>,
        config: ApiConfig,
        cpu: CpuPool,
    ) -> Arc<Self> {
        let budget = BodyBudget::new(config.bodies_budget);
        let token_slots = TokenSlots::new(config.requests_per_token);
        Arc::new(AppState {
            backend,
            store,
            progress,
            tenants,
            metrics: Metrics::default(),
            config,
            feed_error: Mutex::new(None),
            leader: AtomicBool::new(false),
            cpu,
            positions: PositionCache::default(),
            logs: LogCache::default(),
            parsed: Recent::new(PARSED_KEPT),
            seen: Recent::new(SEEN_KEPT),
            answers: AnswerCache::new(ANSWER_CACHE_BYTES),
            budget,
            token_slots,
            openapi: OnceLock::new(),
        })
    }

    /// Whether this server consumes the change feed now.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    fn certify_context(&self) -> CertifyContext<'_> {
        CertifyContext {
            backend: &self.backend,
            store: &self.store,
            progress: &self.progress,
            positions: &self.positions,
            cpu: &self.cpu,
            logs: &self.logs,
            wait: self.config.wait,
        }
    }
}

type Shared = Arc<AppState>;

/// The tenant a request was made for, for the request log (never its token).
#[derive(Clone, Debug)]
struct TenantName(String);

/// Query parameters of the certificate and check routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CertificateQuery {
    /// The schema of the history's tables, when a table name is in several schemas the
    /// token may read.
    schema: Option<String>,
}

/// Query parameters of `/v1/check`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// The level to check: serializable, snapshot-isolation, repeatable-read,
    /// read-committed or read-uncommitted (short forms ser, si, rr, rc, ru).
    isolation: String,
    /// As for `/v1/certificates`.
    schema: Option<String>,
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "isocert serve",
        description = "Version certificates for the customers of a database: submit the history your \
                       test client recorded, receive the version order, version sets and timestamps of \
                       exactly those transactions, and check them yourself."
    ),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

/// The router of the tenants' API, and its OpenAPI document. Every answer is JSON,
/// including those to unknown paths (404) and methods (405).
pub fn router(state: Shared) -> Router {
    let (router, api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(post_certificates))
        .routes(routes!(post_check))
        .routes(routes!(status::get_status))
        .routes(routes!(status::healthz))
        .routes(routes!(openapi))
        .split_for_parts();
    let _ = state.openapi.set(api.to_pretty_json().unwrap_or_default());
    router
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), log_requests))
        .with_state(state)
}

/// The router of the operator's listener: `/metrics` (global counters and positions, which
/// no tenant may see) and `/healthz`.
pub fn metrics_router(state: Shared) -> Router {
    Router::new()
        .route("/metrics", axum::routing::get(status::metrics))
        .route("/healthz", axum::routing::get(status::healthz))
        .fallback(error::not_found)
        .with_state(state)
}

/// Logs every request with tenant, route, status and latency, and counts it. At the
/// default log level: the server's own `info` lines are shown (cli/src/serve.rs).
async fn log_requests(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "(unmatched)".into());
    let method = request.method().clone();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    let tenant = response.extensions().get::<TenantName>().map(|t| t.0.clone()).unwrap_or_else(|| "-".into());
    let status = response.status().as_u16();
    state.metrics.record(&route, status, seconds);
    tracing::info!(target: "isocert::request", %method, route, tenant, status, latency_ms = (seconds * 1000.0).round(), "request");
    response
}

/// What a certificate or check request asks for.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Certificate,
    Check(IsolationLevel),
}

/// Reads and parses the body, certifies, and renders the answer (the certificate, or the
/// check's report); answers already given for the same submission and the same stored
/// changes are reused.
async fn answer(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    encoding: Encoding,
    tenant: &Arc<Tenant>,
    ask: Ask,
    schema: Option<String>,
) -> Result<Arc<Vec<u8>>, ApiError> {
    let limit = state.config.body_limit;
    // Held until the answer is rendered: the body as sent, then the larger of it and the
    // body inflated (the parsed history is of that order).
    let mut reservation = state.budget.reserve();
    let raw = read_body(headers, body, limit, &state.budget, &mut reservation).await?;
    // The body as sent (with its encoding) names the history: a body seen recently is not
    // inflated and parsed again.
    let (raw, digest) = state
        .cpu
        .run(move || {
            let digest =
                KeyBuilder::default().part(&[u8::from(encoding == Encoding::Gzip)]).part(&raw).finish();
            (raw, digest)
        })
        .await?;
    let history = match state.parsed.get(&digest) {
        Some(history) => history,
        None => {
            let raw = raw.clone();
            let inflated = state.cpu.run(move || inflate(raw, encoding, limit)).await??;
            if !reservation.cover(inflated.len()) {
                return Err(over_budget(&state.budget));
            }
            let history =
                state.cpu.run(move || Ok::<_, ApiError>(Arc::new(read_history(&inflated)?))).await??;
            if state.seen.get(&digest).is_some() {
                state.parsed.put(digest, Arc::clone(&history));
            } else {
                state.seen.put(digest, Arc::new(()));
            }
            history
        }
    };
    let cx = state.certify_context();
    let resolved = resolve(cx, tenant, &history, schema.as_deref()).await?;
    let mut key = KeyBuilder::default()
        .part(tenant.name.as_bytes())
        .part(schema.as_deref().unwrap_or("\0").as_bytes())
        .part(&digest)
        .part(&resolved.last_change.unwrap_or(0).to_le_bytes())
        .part(&[u8::from(resolved.reveal)]);
    key = match ask {
        Ask::Certificate => key.part(b"certificate"),
        Ask::Check(level) => key.part(level.to_string().as_bytes()),
    };
    for t in &resolved.tables {
        key = key.part(&t.table.id.to_le_bytes());
    }
    let key = key.finish();
    let _turn = state.answers.turn(key).await;
    if let Some(cached) = state.answers.get(&key) {
        return Ok(cached);
    }
    // The check route reads the submitted history again after recovery; otherwise a history
    // nobody else holds is recovered in place.
    let submitted = matches!(ask, Ask::Check(_)).then(|| Arc::clone(&history));
    let owned = Arc::try_unwrap(history).unwrap_or_else(|shared| History::clone(&shared));
    let certified = recover(cx, owned, &resolved).await?;
    let rendered = state
        .cpu
        .run(move || -> Result<Vec<u8>, ApiError> {
            let certificate = certified.to_json();
            drop(certified);
            let Ask::Check(level) = ask else { return Ok(certificate) };
            // Checked as the submitter would check it: the submitted history with the
            // certificate it may see, so the report shows no foreign id or hidden value.
            let unprocessable = |e: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e);
            let Some(submitted) = submitted else {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the submitted history was not kept",
                ));
            };
            let mut history = Arc::try_unwrap(submitted).unwrap_or_else(|shared| History::clone(&shared));
            let certificate = v1::read_certificate(&certificate[..], &mut history)
                .map_err(|e| unprocessable(e.to_string()))?;
            let interpreter = Interpreter::new(&history)
                .map_err(|e| ApiError::from(CertifyError::Predicate(e.to_string())))?;
            let report =
                check(&history, &certificate, level, CheckerKind::Auto, &interpreter).map_err(|e| {
                    match e {
                        // Uncertified: reads whose outcome rests on values this server hides;
                        // which they are follows from the history and the certificate alone.
                        e @ CheckError::HiddenValues { .. } => {
                            ApiError::new(StatusCode::CONFLICT, e.to_string())
                        }
                        other => unprocessable(other.to_string()),
                    }
                })?;
            serde_json::to_vec(&render_json(&report, &history))
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
        })
        .await??;
    drop(reservation);
    let rendered = Arc::new(rendered);
    state.answers.put(key, Arc::clone(&rendered));
    Ok(rendered)
}

/// Runs a certificate or check route: the token first, then the encoding and the query,
/// then the rest; the token is checked again before the answer goes out (it may have been
/// revoked meanwhile). A valid token refused before its body is read (429, or a bad query
/// string or encoding) has its body read and thrown away first, so the client hears why
/// ([`discard_body`]); an invalid one is answered 401 without a byte read.
async fn certificate_route<Q: serde::de::DeserializeOwned>(
    state: Shared,
    request: Request,
    ask: impl FnOnce(Q) -> Result<(Ask, Option<String>), ApiError>,
) -> Response {
    let limit = state.config.body_limit;
    let (parts, body) = request.into_parts();
    let (token, tenant) = match authenticate_token(&state, &parts.headers) {
        Ok(authenticated) => authenticated,
        // No token identified (none valid, or two Authorization headers): nothing is read.
        Err(e) if matches!(e.status, StatusCode::UNAUTHORIZED | StatusCode::BAD_REQUEST) => {
            return e.into_response()
        }
        Err(e) => {
            discard_body(body, limit).await;
            return e.into_response();
        }
    };
    let Some(_slot) = state.token_slots.enter(token) else {
        discard_body(body, limit).await;
        let cap = state.token_slots.cap();
        let refused = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("this token has {cap} requests in flight already (--max-requests-per-token); retry"),
        )
        .retry_after(1);
        let mut response = refused.into_response();
        response.extensions_mut().insert(TenantName(tenant.name.clone()));
        return response;
    };
    let outcome = async {
        let head = encoding(&parts.headers).and_then(|encoding| {
            let (ask, schema) = query::<Q>(&parts.uri).and_then(ask)?;
            Ok((ask, schema, encoding))
        });
        let (ask, schema, encoding) = match head {
            Ok(head) => head,
            Err(e) => {
                discard_body(body, limit).await;
                return Err(e);
            }
        };
        let body = answer(&state, &parts.headers, body, encoding, &tenant, ask, schema).await?;
        if !still_valid(&state, &parts.headers) {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "the token was revoked"));
        }
        Ok(([(header::CONTENT_TYPE, "application/json")], body.as_ref().clone()).into_response())
    }
    .await;
    let mut response = outcome.unwrap_or_else(IntoResponse::into_response);
    response.extensions_mut().insert(TenantName(tenant.name.clone()));
    response
}

/// The certificate of a history.
///
/// The body is the history as `isocert run` records it (v1 JSON Lines, with the adapter's
/// facts in `meta`; `Content-Encoding: gzip` accepted). The answer is a v1 certificate for
/// exactly those transactions: the version order of every row they touched, the version
/// sets of their predicate reads, and (extension `transactions`) each transaction's
/// outcome and timestamps as the database's change stream settled them.
#[utoipa::path(
    post,
    path = "/v1/certificates",
    params(CertificateQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "A v1 history (JSON Lines)."),
    responses(
        (status = 200, description = "The v1 certificate.", body = Object),
        (status = 202, description = "The change feed has not reached the history's commits yet; retry after Retry-After seconds."),
        (status = 400, description = "The body is not a v1 history, a table is ambiguous, the query string is malformed, or the request has two Authorization headers or a head that cannot be parsed (a bad Content-Length)."),
        (status = 401, description = "No valid bearer token."),
        (status = 403, description = "The history names a table this token may not read."),
        (status = 404, description = "No change of a table of the history was recorded."),
        (status = 408, description = "The body stalled."),
        (status = 409, description = "The table was truncated, or settling an unknown outcome would compare the history's values with other writers' hidden ones."),
        (status = 410, description = "Versions older than the retention window were collected."),
        (status = 413, description = "The body is too large (before or after decompression)."),
        (status = 415, description = "A Content-Encoding other than gzip."),
        (status = 422, description = "History and change stream disagree, or a predicate cannot be evaluated (one nested too deep, say)."),
        (status = 429, description = "Rate limit exceeded, or the token has --max-requests-per-token requests in flight."),
        (status = 500, description = "A bug in the server; the message says where."),
        (status = 503, description = "The database or the store is unavailable, or the bodies in flight fill --max-bodies-mib.")
    ),
    security(("bearer" = []))
)]
async fn post_certificates(State(state): State<Shared>, request: Request) -> Response {
    certificate_route(state, request, |q: CertificateQuery| Ok((Ask::Certificate, q.schema))).await
}

/// The verdict on a history, checked with its certificate by the server.
///
/// Same body as `/v1/certificates`; the answer is the report `isocert check --json`
/// prints (verdict, anomalies with their explained cycles).
#[utoipa::path(
    post,
    path = "/v1/check",
    params(CheckQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "A v1 history (JSON Lines)."),
    responses(
        (status = 200, description = "The report (verdict and anomalies).", body = Object),
        (status = 202, description = "Not ready yet; retry after Retry-After seconds."),
        (status = 400, description = "Bad history, isolation level or query string, two Authorization headers, or a head that cannot be parsed."),
        (status = 401, description = "No valid bearer token."),
        (status = 403, description = "The history names a table this token may not read."),
        (status = 404, description = "No change of a table of the history was recorded."),
        (status = 408, description = "The body stalled."),
        (status = 409, description = "Uncertified: reads whose outcome rests on other writers' hidden values; or as on /v1/certificates."),
        (status = 410, description = "Versions older than the retention window were collected."),
        (status = 413, description = "The body is too large (before or after decompression)."),
        (status = 415, description = "A Content-Encoding other than gzip."),
        (status = 422, description = "History and change stream disagree, or a predicate cannot be evaluated."),
        (status = 429, description = "Rate limit exceeded, or the token has --max-requests-per-token requests in flight."),
        (status = 500, description = "A bug in the server; the message says where."),
        (status = 503, description = "The database or the store is unavailable, or the bodies in flight fill --max-bodies-mib.")
    ),
    security(("bearer" = []))
)]
async fn post_check(State(state): State<Shared>, request: Request) -> Response {
    certificate_route(state, request, |q: CheckQuery| {
        let level: IsolationLevel = q.isolation.parse().map_err(|e: isocert_checker::UnknownName| {
            ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
        })?;
        Ok((Ask::Check(level), q.schema))
    })
    .await
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "The OpenAPI 3.1 document of this API.", body = Object)))]
async fn openapi(State(state): State<Shared>) -> Response {
    let doc = state.openapi.get().cloned().unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], doc).into_response()
}
