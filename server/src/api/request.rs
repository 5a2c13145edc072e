//! What every `/v1` request goes through before its route's work, in this order, so that a
//! client without a valid token costs nothing but its headers:
//!
//! 1. the bearer token (scheme matched case-insensitively) and its rate: 401 / 429;
//! 2. the `Content-Encoding` (`gzip` or `identity`, any case): 415;
//! 3. the query string: 400;
//! 4. the body, streamed and bounded: a declared `Content-Length` over the limit is 413
//!    without keeping a byte, a body that grows past it is 413 as soon as it does, a body
//!    that stalls for [`BODY_IDLE_TIMEOUT`] is 408. Before a 413 the rest of the body is
//!    read and thrown away, within [`LINGER_TIME`] and the larger of the limit and
//!    [`LINGER_BYTES`] (a lingering close, RFC 9112 section 9.6): closing a connection with
//!    unread bytes resets it, and a client still sending would see a broken pipe instead
//!    of the answer. A valid token's request refused before its body is read (429, 415,
//!    a bad query string) gets the same ([`discard_body`]);
//! 5. decompression, bounded by the same limit, on the CPU pool (never on the async
//!    workers that answer other requests).

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::budget::{BodyBudget, BodyReservation};
use super::error::ApiError;
use super::AppState;
use crate::tenants::{Tenant, TokenDigest};

/// How long a request body may stall between two chunks.
pub(crate) const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a refused body is read (and thrown away) so its sender hears the 413.
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(5);

/// The fewest bytes of a refused body read (and thrown away) so its sender hears the 413;
/// a server with a larger limit reads up to its limit.
pub(crate) const LINGER_BYTES: usize = 16 << 20;

/// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The bearer token's tenant, admitted by its rate limit.
pub(crate) fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Arc<Tenant>, ApiError> {
    authenticate_token(state, headers).map(|(_, tenant)| tenant)
}

/// The bearer token's digest and tenant, admitted by its rate limit. A request with more
/// than one `Authorization` header is refused (400) rather than one of them picked.
pub(crate) fn authenticate_token(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(TokenDigest, Arc<Tenant>), ApiError> {
    if headers.get_all(header::AUTHORIZATION).iter().nth(1).is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the request has more than one Authorization header",
        ));
    }
    let unauthorized = || ApiError::new(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    let token = bearer_token(headers).ok_or_else(unauthorized)?;
    let (digest, tenant) = state.tenants.tenants().authenticate(token).ok_or_else(unauthorized)?;
    if !state.tenants.admit(&digest, &tenant) {
        return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "this token's request rate is exceeded")
            .retry_after(1));
    }
    Ok((digest, tenant))
}

/// Whether the token is still valid (it may have been revoked while the request waited).
pub(crate) fn still_valid(state: &AppState, headers: &HeaderMap) -> bool {
    bearer_token(headers).is_some_and(|token| state.tenants.tenants().authenticate(token).is_some())
}

/// How the body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// As is.
    Identity,
    /// gzip.
    Gzip,
}

/// The body's `Content-Encoding`: gzip or none (415 otherwise).
pub(crate) fn encoding(headers: &HeaderMap) -> Result<Encoding, ApiError> {
    let Some(value) = headers.get(header::CONTENT_ENCODING) else { return Ok(Encoding::Identity) };
    let text = value.to_str().unwrap_or("").trim();
    if text.eq_ignore_ascii_case("gzip") || text.eq_ignore_ascii_case("x-gzip") {
        Ok(Encoding::Gzip)
    } else if text.is_empty() || text.eq_ignore_ascii_case("identity") {
        Ok(Encoding::Identity)
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {text:?} is not accepted (use gzip or none)"),
        ))
    }
}

/// The query string's parameters (400 naming what is wrong).
pub(crate) fn query<T: DeserializeOwned>(uri: &Uri) -> Result<T, ApiError> {
    axum::extract::Query::<T>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("the query string: {}", e.body_text())))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the history is larger than {limit} bytes"))
}

/// The 503 of a body the budget of bodies held at once has no room for.
pub(crate) fn over_budget(budget: &BodyBudget) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the server holds as many request bodies as it may at once ({} bytes, --max-bodies-mib); retry",
            budget.bytes()
        ),
    )
    .retry_after(1)
}

/// The body as sent, at most `limit` bytes, each byte covered by `reservation` as it
/// arrives (a declared `Content-Length` at once): 503 when the budget has no room.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    budget: &BodyBudget,
    reservation: &mut BodyReservation,
) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut chunks = body.into_data_stream();
    if declared.is_some_and(|n| n > limit as u64) {
        discard_rest(&mut chunks, limit).await;
        return Err(too_large(limit));
    }
    if !reservation.cover(declared.map_or(0, |n| n as usize)) {
        discard_rest(&mut chunks, limit).await;
        return Err(over_budget(budget));
    }
    let mut out = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    loop {
        let chunk = match tokio::time::timeout(BODY_IDLE_TIMEOUT, chunks.next()).await {
            Err(_) => {
                return Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the body stalled for {BODY_IDLE_TIMEOUT:?}"),
                ))
            }
            Ok(None) => return Ok(out),
            Ok(Some(Err(e))) => {
                return Err(ApiError::new(StatusCode::BAD_REQUEST, format!("the body cannot be read: {e}")))
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        if out.len() + chunk.len() > limit {
            discard_rest(&mut chunks, limit).await;
            return Err(too_large(limit));
        }
        if !reservation.cover(out.len() + chunk.len()) {
            discard_rest(&mut chunks, limit).await;
            return Err(over_budget(budget));
        }
        out.extend_from_slice(&chunk);
    }
}

/// Reads and throws away a body refused before it was read (the same bounds as
/// [`read_body`]'s before a 413), so a client still sending it hears why.
pub(crate) async fn discard_body(body: Body, limit: usize) {
    discard_rest(&mut body.into_data_stream(), limit).await;
}

/// Reads and throws away what is left of a refused body, bounded by [`LINGER_TIME`] and
/// the larger of `limit` and [`LINGER_BYTES`], so a client still sending it hears the
/// answer instead of a reset connection. A body past the bound is left unread: the
/// connection then closes after the answer.
async fn discard_rest(chunks: &mut axum::body::BodyDataStream, limit: usize) {
    let budget = limit.max(LINGER_BYTES);
    let drain = async {
        let mut read = 0;
        while let Some(Ok(chunk)) = chunks.next().await {
            read += chunk.len();
            if read > budget {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

/// The body decompressed, at most `limit` bytes (CPU work: run it on the CPU pool).
///
/// A gzip body is every member it holds, in order (what `pigz` and `cat a.gz b.gz`
/// produce), not only the first: a history cut at the end of its first member would be
/// checked in part. Bytes after the last member that do not start another one are refused
/// (400), never ignored.
pub(crate) fn inflate(raw: Vec<u8>, encoding: Encoding, limit: usize) -> Result<Vec<u8>, ApiError> {
    match encoding {
        Encoding::Identity => Ok(raw),
        Encoding::Gzip => gunzip(&raw, limit),
    }
}

/// The magic bytes that open a gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Every gzip member of `raw`, decompressed and concatenated, at most `limit` bytes.
fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    let mut rest = raw;
    let mut member = 0usize;
    loop {
        member += 1;
        let mut decoder = flate2::bufread::GzDecoder::new(rest);
        let room = (limit + 1).saturating_sub(out.len()) as u64;
        (&mut decoder).take(room).read_to_end(&mut out).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the gzip body cannot be read (member {member}): {e}"),
            )
        })?;
        if out.len() > limit {
            return Err(too_large(limit));
        }
        rest = decoder.into_inner();
        if rest.is_empty() {
            return Ok(out);
        }
        if !rest.starts_with(&GZIP_MAGIC) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "the gzip body has {} bytes after its last member (member {member}, ending at byte {}) \
                     that are not gzip",
                    rest.len(),
                    raw.len() - rest.len()
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn the_bearer_scheme_and_gzip_are_matched_in_any_case() {
        let mut h = HeaderMap::new();
        for (value, want) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER  abc ", Some("abc")),
            ("Basic abc", None),
            ("Bearer ", None),
            ("Bearerabc", None),
        ] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(bearer_token(&h), want, "{value:?}");
        }
        for (value, want) in [
            ("gzip", Some(Encoding::Gzip)),
            ("GZIP", Some(Encoding::Gzip)),
            ("identity", Some(Encoding::Identity)),
            ("br", None),
        ] {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(value));
            assert_eq!(encoding(&h).ok(), want, "{value:?}");
        }
        assert_eq!(encoding(&h).unwrap_err().status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn inflating_stops_at_the_limit() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&vec![b'x'; 10_000]).unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(inflate(packed.clone(), Encoding::Gzip, 10_000).unwrap().len(), 10_000);
        assert_eq!(inflate(packed, Encoding::Gzip, 9_999).unwrap_err().status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            inflate(b"nope".to_vec(), Encoding::Gzip, 10).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    /// Issue 47 item 1: every member of a multi-member gzip body is decoded (the first
    /// alone was, and the rest dropped without a word), within the limit over all members;
    /// bytes after the last member are refused, as is a member cut short.
    #[test]
    fn issue_47_every_gzip_member_is_decoded_and_trailing_bytes_are_refused() {
        let mut packed = gzip(b"first line\n");
        packed.extend(gzip(b"second line\n"));
        packed.extend(gzip(b""));
        packed.extend(gzip(b"third line\n"));
        assert_eq!(
            inflate(packed.clone(), Encoding::Gzip, 1000).unwrap(),
            b"first line\nsecond line\nthird line\n"
        );
        assert_eq!(inflate(packed.clone(), Encoding::Gzip, 34).unwrap().len(), 34);
        assert_eq!(
            inflate(packed.clone(), Encoding::Gzip, 33).unwrap_err().status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        let mut trailing = packed.clone();
        trailing.extend_from_slice(b"garbage");
        let refused = inflate(trailing, Encoding::Gzip, 1000).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("7 bytes after its last member"), "{}", refused.message);
        let mut zeros = packed.clone();
        zeros.extend_from_slice(&[0; 4]);
        assert_eq!(inflate(zeros, Encoding::Gzip, 1000).unwrap_err().status, StatusCode::BAD_REQUEST);
        let mut cut = packed.clone();
        cut.extend_from_slice(&gzip(b"fourth")[..12]);
        assert_eq!(inflate(cut, Encoding::Gzip, 1000).unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
