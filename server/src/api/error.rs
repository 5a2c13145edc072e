//! Error answers: every refusal is a status and a JSON body `{"error": "..."}` (202 is
//! `{"status": "pending", "message": "..."}`), with `Retry-After` where a retry can help.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::certify::CertifyError;
use crate::cpu::CpuError;

/// An error answer: status, message, and when to retry.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), retry_after: None }
    }

    pub(crate) fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
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
            CertifyError::Truncated(_) | CertifyError::ForeignWriters | CertifyError::HiddenOutcome(_) => {
                StatusCode::CONFLICT
            }
            CertifyError::Disagrees(_) | CertifyError::Predicate(_) => StatusCode::UNPROCESSABLE_ENTITY,
            CertifyError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            CertifyError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let error = ApiError::new(status, e.to_string());
        if status == StatusCode::ACCEPTED || status == StatusCode::SERVICE_UNAVAILABLE {
            error.retry_after(1)
        } else {
            error
        }
    }
}

impl From<CpuError> for ApiError {
    fn from(e: CpuError) -> Self {
        match e {
            CpuError::Panicked(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            CpuError::Stopped => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).retry_after(1),
        }
    }
}

/// The answer to a path no route serves.
pub(crate) async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "no such route (see /openapi.json)").into_response()
}

/// The answer to a method a route does not serve.
pub(crate) async fn method_not_allowed() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "this route does not serve that method (see /openapi.json)")
        .into_response()
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
            (CertifyError::HiddenOutcome("T3".into()), 409, false),
            (CertifyError::Collected("kv".into()), 410, false),
            (CertifyError::Disagrees("x".into()), 422, false),
            (CertifyError::Predicate("x".into()), 422, false),
            (CertifyError::Unavailable("down".into()), 503, true),
        ];
        for (error, status, retry) in cases {
            let response = ApiError::from(error).into_response();
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(response.headers().get(header::RETRY_AFTER).is_some(), retry, "{status}");
        }
    }
}
