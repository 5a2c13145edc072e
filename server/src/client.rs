//! The client of the certificate API (reqwest): sends a history, retries while the server
//! says "not yet" (202), is rate limiting (429) or unavailable (5xx), with exponential
//! backoff up to a deadline, and turns every other refusal into an error that says what
//! to do.

use std::io::Write;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

/// Why the API gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The token file could not be read, or is empty.
    #[error("token file {path}: {message}")]
    Token {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The API's URL is not an `http://` or `https://` URL with a host.
    #[error("--api {url}: {message}")]
    BadUrl {
        /// The URL as given, its password replaced by `***`.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The server could not be reached.
    #[error("cannot reach the certificate API at {url}: {source}")]
    Unreachable {
        /// The API's base URL, its password replaced by `***`.
        url: String,
        /// The cause (without the URL, which may carry a password).
        source: reqwest::Error,
    },
    /// The server refused; `message` is its explanation.
    #[error("the certificate API answered {status}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's message, with a hint for the common cases.
        message: String,
    },
    /// Retries ran out.
    #[error("the certificate API at {url} did not have the certificate ready within {deadline:?} (last answer: {last})")]
    Timeout {
        /// The API's base URL, its password replaced by `***`.
        url: String,
        /// How long the client kept retrying.
        deadline: Duration,
        /// The last answer (or connection error, without the URL).
        last: String,
    },
}

/// What to ask for.
#[derive(Clone, Copy, Debug)]
pub enum Request<'a> {
    /// `POST /v1/certificates`.
    Certificate,
    /// `POST /v1/check?isolation=LEVEL`.
    Check(&'a str),
}

/// A client of one API with one token. Every message names the API by its redacted URL
/// (`http://user:***@host/`, as database URLs are printed), and its `Debug` shows neither
/// the token nor the password.
#[derive(Clone)]
pub struct CertificateClient {
    base: String,
    shown: String,
    token: String,
    http: reqwest::Client,
    /// How long to keep retrying.
    pub deadline: Duration,
}

impl std::fmt::Debug for CertificateClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateClient")
            .field("base", &self.shown)
            .field("token", &"***")
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl CertificateClient {
    /// A client of the API at `base` (`http://host:port`) with the token in `token_file`
    /// (its first line; the file should be readable by its owner only).
    ///
    /// # Errors
    /// [`ClientError::BadUrl`] when `base` is not an `http://` or `https://` URL with a host;
    /// [`ClientError::Token`] when the file cannot be read or holds no token.
    pub fn new(base: &str, token_file: &std::path::Path) -> Result<Self, ClientError> {
        check_url(base)?;
        let bad = |message: String| ClientError::Token { path: token_file.display().to_string(), message };
        let text = std::fs::read_to_string(token_file).map_err(|e| bad(e.to_string()))?;
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.is_empty() {
            return Err(bad("holds no token".into()));
        }
        Ok(Self::with_token(base, token))
    }

    /// A client with the token given directly.
    pub fn with_token(base: &str, token: String) -> Self {
        let base = base.trim_end_matches('/').to_string();
        CertificateClient {
            shown: isocert_adapters::redact_url(&base),
            base,
            token,
            http: reqwest::Client::new(),
            deadline: Duration::from_secs(120),
        }
    }

    /// Sends `history` (v1 JSON Lines; gzipped on the wire) and returns the answer's body.
    ///
    /// # Errors
    /// [`ClientError`]: unreachable, refused (401, 403, 413, 422, ... with the server's
    /// message), or still not ready at the deadline.
    pub async fn fetch(
        &self,
        history: &[u8],
        request: Request<'_>,
        schema: Option<&str>,
    ) -> Result<Vec<u8>, ClientError> {
        // Parameters are URL-encoded by reqwest (a schema may hold any character).
        let (url, mut params) = match request {
            Request::Certificate => (format!("{}/v1/certificates", self.base), Vec::new()),
            Request::Check(level) => (format!("{}/v1/check", self.base), vec![("isolation", level)]),
        };
        if let Some(schema) = schema {
            params.push(("schema", schema));
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(history).and_then(|_| gz.flush()).expect("writing to memory");
        let body = gz.finish().expect("writing to memory");
        let started = Instant::now();
        let mut pause = Duration::from_millis(100);
        loop {
            let sent = self
                .http
                .post(&url)
                .query(&params)
                .bearer_auth(&self.token)
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .header(reqwest::header::CONTENT_ENCODING, "gzip")
                .body(body.clone())
                .send()
                .await;
            let (retry, last) = match sent {
                Err(e) if e.is_connect() || e.is_timeout() => (true, format!("{}", e.without_url())),
                Err(source) => {
                    return Err(ClientError::Unreachable {
                        url: self.shown.clone(),
                        source: source.without_url(),
                    })
                }
                Ok(response) => {
                    let status = response.status();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    let text = response.bytes().await.map_err(|source| ClientError::Unreachable {
                        url: self.shown.clone(),
                        source: source.without_url(),
                    })?;
                    if status == StatusCode::OK {
                        return Ok(text.to_vec());
                    }
                    let message = server_message(&text);
                    if status == StatusCode::ACCEPTED
                        || status == StatusCode::TOO_MANY_REQUESTS
                        || status.is_server_error()
                    {
                        if let Some(secs) = retry_after {
                            pause = pause.max(Duration::from_secs(secs.min(10)));
                        }
                        (true, format!("{} {message}", status.as_u16()))
                    } else {
                        return Err(ClientError::Refused {
                            status: status.as_u16(),
                            message: with_hint(status, message),
                        });
                    }
                }
            };
            if !retry || started.elapsed() + pause > self.deadline {
                return Err(ClientError::Timeout { url: self.shown.clone(), deadline: self.deadline, last });
            }
            tracing::debug!(last, ?pause, "certificate not ready; retrying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}

/// Refuses what is not an `http://` or `https://` URL with a host, naming it redacted: the
/// HTTP client's own error printed the URL with its password.
fn check_url(base: &str) -> Result<(), ClientError> {
    let bad = |message: String| ClientError::BadUrl { url: isocert_adapters::redact_url(base), message };
    let url = reqwest::Url::parse(base).map_err(|e| bad(format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!("scheme {:?} is not http or https", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("names no host".into()));
    }
    Ok(())
}

fn server_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error").or_else(|| v.get("message")).and_then(|m| m.as_str()).map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned())
}

fn with_hint(status: StatusCode, message: String) -> String {
    match status {
        StatusCode::UNAUTHORIZED => {
            format!("{message} (check --token-file: the token is unknown or was revoked)")
        }
        StatusCode::FORBIDDEN => format!("{message} (ask the API's operator to grant this token the table)"),
        StatusCode::PAYLOAD_TOO_LARGE => format!("{message} (record fewer transactions per history)"),
        _ => message,
    }
}
