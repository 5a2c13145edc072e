//! The HTTP API (axum): routes, authentication, limits, request logs, and the OpenAPI
//! document generated from the handlers' annotations (utoipa), so that every route served
//! is a route documented.

use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, MatchedPath, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use isocert_adapters::FeedProgress;
use isocert_checker::{check, render_json, CheckerKind, IsolationLevel};
use isocert_history::v1;
use isocert_oracle::Interpreter;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::certify::{certify, read_history, Backend, Certified, CertifyError};
use crate::metrics::Metrics;
use crate::store::{StoreStats, VersionStore};
use crate::tenants::{Tenant, TenantRegistry};

/// Limits and bounds of the API.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The name of the durable change feed (slot and publication).
    pub feed_name: String,
    /// How long a certificate request waits for the feed before answering 202.
    pub wait: Duration,
    /// The largest request body accepted, after decompression (bytes).
    pub body_limit: usize,
    /// How long stored versions are kept.
    pub retention: Duration,
}

/// What every handler shares.
pub struct AppState {
    /// The database behind the server.
    pub backend: Arc<dyn Backend>,
    /// The version store.
    pub store: VersionStore,
    /// The feed's progress.
    pub progress: Arc<FeedProgress>,
    /// The tenants.
    pub tenants: Arc<TenantRegistry>,
    /// Request counters.
    pub metrics: Metrics,
    /// Limits.
    pub config: ApiConfig,
    /// The last error of the feed, if it is not running.
    pub feed_error: Mutex<Option<String>>,
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
    ) -> Arc<Self> {
        Arc::new(AppState {
            backend,
            store,
            progress,
            tenants,
            metrics: Metrics::default(),
            config,
            feed_error: Mutex::new(None),
            openapi: OnceLock::new(),
        })
    }
}

type Shared = Arc<AppState>;

/// The tenant a request was made for, for the request log (never its token).
#[derive(Clone, Debug)]
struct TenantName(String);

/// An error answer: status and a JSON body `{"error": "..."}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), retry_after: None }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = if self.status == StatusCode::ACCEPTED {
            (self.status, Json(json!({"status": "pending", "message": self.message}))).into_response()
        } else {
            (self.status, Json(json!({"error": self.message}))).into_response()
        };
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<CertifyError> for ApiError {
    fn from(e: CertifyError) -> Self {
        let status = match &e {
            CertifyError::BadHistory(_) | CertifyError::Ambiguous { .. } => StatusCode::BAD_REQUEST,
            CertifyError::Forbidden(_) => StatusCode::FORBIDDEN,
            CertifyError::NotReady => StatusCode::ACCEPTED,
            CertifyError::UnknownTable(_) => StatusCode::NOT_FOUND,
            CertifyError::Collected(_) => StatusCode::GONE,
            CertifyError::Truncated(_) | CertifyError::ForeignWriters | CertifyError::OpaqueMatch => {
                StatusCode::CONFLICT
            }
            CertifyError::Disagrees(_) => StatusCode::UNPROCESSABLE_ENTITY,
            CertifyError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let mut error = ApiError::new(status, e.to_string());
        if status == StatusCode::ACCEPTED || status == StatusCode::SERVICE_UNAVAILABLE {
            error.retry_after = Some(1);
        }
        error
    }
}

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

/// `/v1/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// The change feed.
    feed: FeedStatus,
    /// The version store.
    store: StoreStats,
    /// How long versions are kept, in seconds.
    retention_secs: u64,
}

/// The change feed's state.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedStatus {
    /// The slot and publication name.
    name: String,
    /// Whether it is connected to the database now.
    connected: bool,
    /// Every transaction committed before this position is stored.
    stored_position: u64,
    /// The database's position now (if it answered).
    database_position: Option<u64>,
    /// How far behind the feed is (same unit as positions; PostgreSQL: WAL bytes).
    lag: Option<u64>,
    /// Reconnects since the server started.
    reconnects: u64,
    /// Why the feed stopped, if it did.
    error: Option<String>,
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

/// The router of the whole API, and its OpenAPI document.
pub fn router(state: Shared) -> Router {
    let (router, api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(post_certificates))
        .routes(routes!(post_check))
        .routes(routes!(get_status))
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
        .split_for_parts();
    let _ = state.openapi.set(api.to_pretty_json().unwrap_or_default());
    let limit = state.config.body_limit;
    router
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), log_requests))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Logs every request with tenant, route, status and latency, and counts it.
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
    tracing::info!(%method, route, tenant, status, latency_ms = (seconds * 1000.0).round(), "request");
    response
}

/// The bearer token's tenant, admitted by its rate limit.
fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Arc<Tenant>, ApiError> {
    let unauthorized = || ApiError::new(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(unauthorized)?;
    let (digest, tenant) = state.tenants.tenants().authenticate(token).ok_or_else(unauthorized)?;
    if !state.tenants.admit(&digest, &tenant) {
        let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "this token's request rate is exceeded");
        e.retry_after = Some(1);
        return Err(e);
    }
    Ok(tenant)
}

/// Whether the token is still valid (it may have been revoked while the request waited).
fn still_valid(state: &AppState, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| state.tenants.tenants().authenticate(token).is_some())
}

/// The body, gunzipped when `Content-Encoding: gzip`, at most the body limit.
fn body_bytes(state: &AppState, headers: &HeaderMap, body: Bytes) -> Result<Vec<u8>, ApiError> {
    let limit = state.config.body_limit;
    let too_large =
        || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the history is larger than {limit} bytes"));
    match headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()) {
        None | Some("identity") => Ok(body.to_vec()),
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&body[..]).take(limit as u64 + 1).read_to_end(&mut out).map_err(
                |e| ApiError::new(StatusCode::BAD_REQUEST, format!("the gzip body cannot be read: {e}")),
            )?;
            if out.len() > limit {
                return Err(too_large());
            }
            Ok(out)
        }
        Some(other) => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {other:?} is not accepted (use gzip or none)"),
        )),
    }
}

/// Authenticates, reads the body and certifies; the tenant's name goes to the log.
async fn certify_request(
    state: &AppState,
    headers: &HeaderMap,
    body: Bytes,
    schema: Option<&str>,
) -> Result<(Certified, String), ApiError> {
    let tenant = authenticate(state, headers)?;
    let body = body_bytes(state, headers, body)?;
    let history = read_history(&body)?;
    let certified =
        certify(&state.backend, &state.store, &state.progress, &tenant, history, schema, state.config.wait)
            .await?;
    if !still_valid(state, headers) {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "the token was revoked"));
    }
    Ok((certified, tenant.name.clone()))
}

fn with_tenant(mut response: Response, tenant: Option<String>) -> Response {
    if let Some(name) = tenant {
        response.extensions_mut().insert(TenantName(name));
    }
    response
}

fn tenant_of(state: &AppState, headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|token| state.tenants.tenants().authenticate(token))
        .map(|(_, t)| t.name.clone())
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
        (status = 400, description = "The body is not a v1 history, or a table is ambiguous."),
        (status = 401, description = "No valid bearer token."),
        (status = 403, description = "The history names a table this token may not read."),
        (status = 404, description = "No change of a table of the history was recorded."),
        (status = 409, description = "Rows were written by transactions outside the history, or the table was truncated."),
        (status = 410, description = "Versions older than the retention window were collected."),
        (status = 413, description = "The body is too large."),
        (status = 422, description = "History and change stream disagree."),
        (status = 429, description = "Rate limit exceeded."),
        (status = 503, description = "The database or the store is unavailable.")
    ),
    security(("bearer" = []))
)]
async fn post_certificates(
    State(state): State<Shared>,
    Query(query): Query<CertificateQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let tenant = tenant_of(&state, &headers);
    let answer = match certify_request(&state, &headers, body, query.schema.as_deref()).await {
        Ok((c, _)) => ([(header::CONTENT_TYPE, "application/json")], c.to_json()).into_response(),
        Err(e) => e.into_response(),
    };
    with_tenant(answer, tenant)
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
        (status = 400, description = "Bad history or isolation level."),
        (status = 401, description = "No valid bearer token."),
        (status = 403, description = "The history names a table this token may not read."),
        (status = 409, description = "Foreign writers or a truncated table."),
        (status = 413, description = "The body is too large."),
        (status = 422, description = "History and change stream disagree."),
        (status = 429, description = "Rate limit exceeded.")
    ),
    security(("bearer" = []))
)]
async fn post_check(
    State(state): State<Shared>,
    Query(query): Query<CheckQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let tenant = tenant_of(&state, &headers);
    let answer = async {
        let level: IsolationLevel =
            query.isolation.parse().map_err(|e: isocert_checker::ParseNameError| {
                ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
            })?;
        let submitted = body_bytes(&state, &headers, body.clone())?;
        let (c, _) = certify_request(&state, &headers, body, query.schema.as_deref()).await?;
        let report = tokio::task::spawn_blocking(move || {
            // Checked as the submitter would check it: the submitted history with the
            // certificate it may see, so the report shows no foreign id or hidden value.
            let unprocessable = |e: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e);
            let mut history = read_history(&submitted)?;
            let certificate = v1::read_certificate(&c.to_json()[..], &mut history)
                .map_err(|e| unprocessable(e.to_string()))?;
            let interpreter = Interpreter::new(&history)
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
            let report = check(&history, &certificate, level, CheckerKind::Auto, &interpreter)
                .map_err(|e| unprocessable(e.to_string()))?;
            Ok::<_, ApiError>(render_json(&report, &history))
        })
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the check stopped: {e}")))??;
        Ok::<_, ApiError>(Json(report).into_response())
    }
    .await
    .unwrap_or_else(IntoResponse::into_response);
    with_tenant(answer, tenant)
}

/// The change feed and the store: positions, lag, sizes, retention.
#[utoipa::path(
    get,
    path = "/v1/status",
    responses((status = 200, description = "The server's state.", body = Status), (status = 401, description = "No valid bearer token.")),
    security(("bearer" = []))
)]
async fn get_status(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let tenant = tenant_of(&state, &headers);
    let answer = async {
        authenticate(&state, &headers)?;
        let store = state
            .store
            .stats()
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        let database_position = state.backend.stream_position().await.ok();
        let stored_position = state.progress.covered();
        let status = Status {
            feed: FeedStatus {
                name: state.config.feed_name.clone(),
                connected: state.progress.is_connected(),
                stored_position,
                database_position,
                lag: database_position.map(|p| p.saturating_sub(stored_position)),
                reconnects: state.progress.reconnects(),
                error: state.feed_error.lock().expect("feed error lock").clone(),
            },
            store,
            retention_secs: state.config.retention.as_secs(),
        };
        Ok::<_, ApiError>(Json(status).into_response())
    }
    .await
    .unwrap_or_else(IntoResponse::into_response);
    with_tenant(answer, tenant)
}

/// Liveness: 200 while the server runs and its feed is not stopped by an error.
#[utoipa::path(
    get,
    path = "/healthz",
    responses((status = 200, description = "Healthy."), (status = 503, description = "The change feed stopped."))
)]
async fn healthz(State(state): State<Shared>) -> Response {
    match state.feed_error.lock().expect("feed error lock").clone() {
        None => {
            (StatusCode::OK, Json(json!({"status": "ok", "feed_connected": state.progress.is_connected()})))
                .into_response()
        }
        Some(e) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "feed stopped", "error": e})))
            .into_response(),
    }
}

/// Counters in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format.", body = String, content_type = "text/plain")))]
async fn metrics(State(state): State<Shared>) -> Response {
    let stats = state.store.stats().await.unwrap_or_default();
    let text = state.metrics.render(&[
        (
            "isocert_feed_stored_position",
            "Every transaction committed before this position is stored.",
            state.progress.covered() as f64,
        ),
        (
            "isocert_feed_connected",
            "1 while the change feed is connected.",
            f64::from(u8::from(state.progress.is_connected())),
        ),
        ("isocert_feed_reconnects", "Reconnects of the change feed.", state.progress.reconnects() as f64),
        (
            "isocert_store_transactions",
            "Committed transactions in the version store.",
            stats.transactions as f64,
        ),
        ("isocert_store_changes", "Row changes in the version store.", stats.changes as f64),
        ("isocert_store_bytes", "Bytes the version store takes on disk.", stats.bytes as f64),
    ]);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "The OpenAPI 3.1 document of this API.", body = Object)))]
async fn openapi(State(state): State<Shared>) -> Response {
    let doc = state.openapi.get().cloned().unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], doc).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_status_and_the_waits_say_when_to_retry() {
        let cases = [
            (CertifyError::NotReady, 202, true),
            (CertifyError::BadHistory("line 2".into()), 400, false),
            (CertifyError::Forbidden("kv".into()), 403, false),
            (CertifyError::UnknownTable("kv".into()), 404, false),
            (CertifyError::ForeignWriters, 409, false),
            (CertifyError::OpaqueMatch, 409, false),
            (CertifyError::Collected("kv".into()), 410, false),
            (CertifyError::Disagrees("x".into()), 422, false),
            (CertifyError::Unavailable("down".into()), 503, true),
        ];
        for (error, status, retry) in cases {
            let response = ApiError::from(error).into_response();
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(response.headers().get(header::RETRY_AFTER).is_some(), retry, "{status}");
        }
    }
}
