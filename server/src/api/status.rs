//! `/v1/status` (a tenant's view: the feed's health and the tenant's own tables),
//! `/healthz`, and `/metrics` (the operator's view, on the metrics listener only: global
//! positions and sizes, which would tell a tenant how busy other tenants are).

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::error::ApiError;
use super::request::authenticate;
use super::{Shared, TenantName};

/// `/v1/status`: what a tenant may know of the server.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// The change feed.
    pub feed: FeedStatus,
    /// The stored incarnations of the tables the token may read.
    pub tables: Vec<TableStatus>,
    /// How long versions are kept, in seconds.
    pub retention_secs: u64,
}

/// The change feed's health (no positions: they measure every tenant's traffic).
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedStatus {
    /// Whether some replica consumes the feed without error (this one, or, on a follower,
    /// the leader as far as the store shows).
    pub running: bool,
    /// Whether this server is the replica that consumes the feed.
    pub leader: bool,
}

/// One stored incarnation of a table the token may read.
#[derive(Debug, Serialize, ToSchema)]
pub struct TableStatus {
    /// The schema.
    pub schema: String,
    /// The table.
    pub table: String,
    /// Row changes stored.
    pub changes: i64,
    /// Transactions that made them.
    pub transactions: i64,
    /// Unix time (seconds) the oldest of them was stored.
    pub oldest_stored_at: Option<i64>,
    /// It was truncated: certificates over it are refused (409).
    pub truncated: bool,
    /// Some of its versions were collected: certificates that need them are refused (410).
    pub collected: bool,
}

/// The feed's health and the stored tables the token may read, with their sizes.
#[utoipa::path(
    get,
    path = "/v1/status",
    responses(
        (status = 200, description = "The feed's health and this token's tables.", body = Status),
        (status = 400, description = "Two Authorization headers."),
        (status = 401, description = "No valid bearer token."),
        (status = 429, description = "Rate limit exceeded."),
        (status = 503, description = "The store is unavailable.")
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_status(State(state): State<Shared>, request: Request) -> Response {
    let tenant = match authenticate(&state, request.headers()) {
        Ok(tenant) => tenant,
        Err(e) => return e.into_response(),
    };
    let outcome = async {
        let unavailable =
            |e: crate::store::StoreError| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
        let visible: Vec<_> = state
            .store
            .tables()
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|t| tenant.may_see(&t.table.schema, &t.table.name))
            .collect();
        let ids: Vec<u64> = visible.iter().map(|t| t.table.id).collect();
        let counts = state.store.table_counts(&ids).await.map_err(unavailable)?;
        let tables = visible
            .into_iter()
            .map(|t| {
                let c = counts.iter().find(|c| c.relation == t.table.id);
                TableStatus {
                    schema: t.table.schema.to_string(),
                    table: t.table.name.to_string(),
                    changes: c.map_or(0, |c| c.changes),
                    transactions: c.map_or(0, |c| c.transactions),
                    oldest_stored_at: c.and_then(|c| c.oldest_stored_at),
                    truncated: t.truncated,
                    collected: t.collected,
                }
            })
            .collect();
        let status = Status {
            feed: FeedStatus {
                running: state.feed_error.lock().expect("feed error lock").is_none(),
                leader: state.is_leader(),
            },
            tables,
            retention_secs: state.config.retention.as_secs(),
        };
        Ok::<_, ApiError>(Json(status).into_response())
    }
    .await;
    let mut response = outcome.unwrap_or_else(IntoResponse::into_response);
    response.extensions_mut().insert(TenantName(tenant.name.clone()));
    response
}

/// Liveness: 200 while the server runs and its feed is not stopped by an error (a
/// follower replica, which consumes no feed, is healthy while it can answer).
#[utoipa::path(
    get,
    path = "/healthz",
    responses((status = 200, description = "Healthy."), (status = 503, description = "The change feed stopped."))
)]
pub(super) async fn healthz(State(state): State<Shared>) -> Response {
    let role = if state.is_leader() { "leader" } else { "follower" };
    match state.feed_error.lock().expect("feed error lock").clone() {
        None => (
            StatusCode::OK,
            Json(json!({"status": "ok", "role": role, "feed_connected": state.progress.is_connected()})),
        )
            .into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "feed stopped", "role": role})))
            .into_response(),
    }
}

/// Counters in the Prometheus text format (the metrics listener only).
pub(super) async fn metrics(State(state): State<Shared>) -> Response {
    let stats = state.store.stats().await.unwrap_or_default();
    let text = state.metrics.render(&[
        (
            "isocert_feed_stored_position",
            "Every transaction committed before this position is stored.",
            state.progress.covered() as f64,
        ),
        (
            "isocert_feed_connected",
            "1 while this server's change feed is connected.",
            f64::from(u8::from(state.progress.is_connected())),
        ),
        (
            "isocert_feed_leader",
            "1 while this server consumes the change feed.",
            f64::from(u8::from(state.is_leader())),
        ),
        ("isocert_feed_reconnects", "Reconnects of the change feed.", state.progress.reconnects() as f64),
        (
            "isocert_store_transactions",
            "Committed transactions in the version store.",
            stats.transactions as f64,
        ),
        ("isocert_store_changes", "Row changes in the version store.", stats.changes as f64),
        ("isocert_store_tables", "Table incarnations in the version store.", stats.tables as f64),
        ("isocert_store_bytes", "Bytes the version store takes on disk.", stats.bytes as f64),
    ]);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
