//! Dgraph Alpha's HTTP API, the parts isocert uses, and the one place Dgraph's errors are
//! classified ([`classify`]).
//!
//! Shapes (Dgraph's `dgraph/cmd/alpha/http.go` and the "Raw HTTP" client guide):
//!
//! - `POST /query[?startTs=N]` (`application/json`, `{"query": DQL}`) answers
//!   `{"data": {...}, "extensions": {"txn": {"start_ts": N}, ...}}`;
//! - `POST /mutate[?startTs=N]` (`application/json`, `{"set": [...]}` / `{"delete": [...]}`)
//!   answers `{"data": {"code": "Success", "message": "Done", "uids": {...}}, "extensions":
//!   {"txn": {"start_ts": N, "keys": [...], "preds": [...]}}}`; the client keeps the union of
//!   `keys` and `preds` for the commit;
//! - `POST /commit?startTs=N` with body `{"keys": [...], "preds": [...]}` answers
//!   `{"data": {"code": "Success", "message": "Done"}, "extensions": {"txn": {"start_ts": N,
//!   "commit_ts": M}}}`; `&abort=true` aborts;
//! - `POST /alter` with schema text or `{"drop_attr": P}`;
//! - any failure: `{"errors": [{"message": "...", "extensions": {"code": "ErrorInvalidRequest"}}]}`,
//!   an abort being "Transaction has been aborted. Please retry".

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value as Json};

use crate::seam::{DbError, ErrorClass};
use crate::AdapterError;

/// The transaction context of an answer (`extensions.txn`: dgo's `api.TxnContext` as JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct TxnContext {
    /// The transaction's start timestamp: its snapshot.
    #[serde(default)]
    pub start_ts: u64,
    /// The commit timestamp (answers of `/commit` only).
    #[serde(default)]
    pub commit_ts: u64,
    /// Whether the transaction was aborted.
    #[serde(default)]
    pub aborted: bool,
    /// Conflict keys the mutation touched (to send back at commit).
    #[serde(default)]
    pub keys: Vec<String>,
    /// Predicates the mutation touched (to send back at commit).
    #[serde(default)]
    pub preds: Vec<String>,
}

/// One successful answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// `data`: the query's blocks, or the mutation's `code`/`message`/`uids`.
    pub data: Json,
    /// `extensions.txn` (defaults when absent).
    pub txn: TxnContext,
}

/// A failed request to Dgraph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DgraphError {
    /// Dgraph answered with `errors`.
    #[error("Dgraph: {message}")]
    Server {
        /// `errors[0].extensions.code` (`ErrorInvalidRequest`), empty when absent.
        code: String,
        /// `errors[0].message`.
        message: String,
    },
    /// The request did not reach Dgraph or its answer was lost (connection refused or
    /// reset, timeout).
    #[error("no answer from Dgraph: {0}")]
    Transport(String),
    /// An HTTP error status without Dgraph's JSON.
    #[error("HTTP {status}: {body}")]
    Http {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// An answer that is not Dgraph's JSON.
    #[error("not Dgraph's JSON ({message}): {body}")]
    Malformed {
        /// What is wrong.
        message: String,
        /// The start of the body.
        body: String,
    },
}

impl DgraphError {
    /// Whether Dgraph aborted the transaction (a conflict at commit, or a mutation of a
    /// transaction already aborted): retrying it may succeed.
    pub fn is_aborted(&self) -> bool {
        matches!(self, DgraphError::Server { message, .. }
            if message.contains("Transaction has been aborted") || message.contains("Transaction is too old"))
    }

    /// The error's code for the history: `aborted`, Dgraph's `extensions.code`, the HTTP
    /// status, or none for a lost answer.
    pub fn code(&self) -> Option<String> {
        match self {
            e if e.is_aborted() => Some("aborted".into()),
            DgraphError::Server { code, .. } if !code.is_empty() => Some(code.clone()),
            DgraphError::Http { status, .. } => Some(format!("http-{status}")),
            _ => None,
        }
    }
}

/// How a failed request is handled: the one place Dgraph errors are classified. An abort is
/// retryable; a request without an answer (or a gateway's 502/503/504) is a lost
/// connection, so a lost `/commit` answer makes the attempt unknown; the rest is fatal.
pub fn classify(e: &DgraphError) -> ErrorClass {
    match e {
        e if e.is_aborted() => ErrorClass::Retryable,
        DgraphError::Transport(_) => ErrorClass::ConnectionLost,
        DgraphError::Http { status: 502..=504, .. } => ErrorClass::ConnectionLost,
        _ => ErrorClass::Fatal,
    }
}

/// A classified [`DbError`] for `e` while doing `context`.
pub(crate) fn db_error(context: &str, e: DgraphError) -> DbError {
    DbError::new(classify(&e), e.code(), context, e)
}

fn shorten(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if body.len() > 300 {
        format!("{text}...")
    } else {
        text
    }
}

/// Parses one answer of Dgraph's HTTP API (module doc): `errors` first, then the HTTP
/// status, then `data` and `extensions.txn`.
///
/// # Errors
/// [`DgraphError::Server`] for Dgraph's `errors`, [`DgraphError::Http`] for an error status
/// without them, [`DgraphError::Malformed`] for anything else that is not its JSON.
pub fn parse_answer(status: u16, body: &[u8]) -> Result<Answer, DgraphError> {
    let malformed = |message: String| DgraphError::Malformed { message, body: shorten(body) };
    let v: Json = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) if !(200..300).contains(&status) => {
            return Err(DgraphError::Http { status, body: shorten(body) })
        }
        Err(e) => return Err(malformed(e.to_string())),
    };
    if let Some(errors) = v.get("errors").and_then(Json::as_array).filter(|e| !e.is_empty()) {
        let first = &errors[0];
        let message = first.get("message").and_then(Json::as_str).unwrap_or("(no message)").to_string();
        let code = first.pointer("/extensions/code").and_then(Json::as_str).unwrap_or_default().to_string();
        return Err(DgraphError::Server { code, message });
    }
    if !(200..300).contains(&status) {
        return Err(DgraphError::Http { status, body: shorten(body) });
    }
    let Some(object) = v.as_object() else { return Err(malformed("not an object".into())) };
    let txn = match object.get("extensions").and_then(|e| e.get("txn")) {
        // serde reads a struct from an array too (`[9]` as `start_ts` 9): only an object is one.
        Some(t) if !t.is_object() => return Err(malformed(format!("extensions.txn: {t} is not an object"))),
        Some(t) => TxnContext::deserialize(t).map_err(|e| malformed(format!("extensions.txn: {e}")))?,
        None => TxnContext::default(),
    };
    Ok(Answer { data: object.get("data").cloned().unwrap_or(Json::Null), txn })
}

/// A client of one Dgraph Alpha's HTTP API (cheap to clone: the connection pool is shared).
#[derive(Clone, Debug)]
pub struct DgraphHttp {
    client: reqwest::Client,
    base: String,
}

impl DgraphHttp {
    /// A client for `base` (`http://host:8080`).
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS setup).
    pub fn new(base: &str, timeout: Duration) -> Result<Self, AdapterError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| AdapterError::Protocol { message: format!("building the HTTP client: {e}") })?;
        Ok(DgraphHttp { client, base: base.trim_end_matches('/').to_string() })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    async fn post(&self, path: &str, content_type: &str, body: String) -> Result<Answer, DgraphError> {
        let url = format!("{}{path}", self.base);
        let response = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await
            .map_err(|e| DgraphError::Transport(format!("POST {url}: {e}")))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| DgraphError::Transport(format!("POST {url}: {e}")))?;
        parse_answer(status, &bytes)
    }

    /// Runs a DQL query in transaction `start_ts` (a new one when `None`).
    ///
    /// # Errors
    /// As [`parse_answer`], or [`DgraphError::Transport`].
    pub async fn query(&self, start_ts: Option<u64>, dql: &str) -> Result<Answer, DgraphError> {
        let path = match start_ts {
            Some(ts) => format!("/query?startTs={ts}"),
            None => "/query".to_string(),
        };
        self.post(&path, "application/json", json!({ "query": dql }).to_string()).await
    }

    /// Runs a JSON mutation (`{"set": [...]}`, `{"delete": [...]}`) in transaction
    /// `start_ts` (a new one when `None`), committing it at once with `commit_now`.
    ///
    /// # Errors
    /// As [`DgraphHttp::query`].
    pub async fn mutate(
        &self,
        start_ts: Option<u64>,
        mutation: &Json,
        commit_now: bool,
    ) -> Result<Answer, DgraphError> {
        let mut params = Vec::new();
        if let Some(ts) = start_ts {
            params.push(format!("startTs={ts}"));
        }
        if commit_now {
            params.push("commitNow=true".to_string());
        }
        let path =
            if params.is_empty() { "/mutate".to_string() } else { format!("/mutate?{}", params.join("&")) };
        self.post(&path, "application/json", mutation.to_string()).await
    }

    /// Commits transaction `start_ts` with the conflict keys and predicates its mutations
    /// returned; the answer's `txn.commit_ts` is the commit timestamp.
    ///
    /// # Errors
    /// As [`DgraphHttp::query`]; an abort is "Transaction has been aborted".
    pub async fn commit(
        &self,
        start_ts: u64,
        keys: &BTreeSet<String>,
        preds: &BTreeSet<String>,
    ) -> Result<Answer, DgraphError> {
        let body = json!({ "keys": keys, "preds": preds }).to_string();
        self.post(&format!("/commit?startTs={start_ts}"), "application/json", body).await
    }

    /// Aborts transaction `start_ts`.
    ///
    /// # Errors
    /// As [`DgraphHttp::query`].
    pub async fn abort(&self, start_ts: u64) -> Result<Answer, DgraphError> {
        self.post(&format!("/commit?startTs={start_ts}&abort=true"), "application/json", String::new()).await
    }

    /// Sends an `/alter` operation: schema text, or a JSON operation (`{"drop_attr": P}`).
    ///
    /// # Errors
    /// As [`DgraphHttp::query`].
    pub async fn alter(&self, body: String) -> Result<Answer, DgraphError> {
        self.post("/alter", "application/json", body).await
    }

    /// `GET /health`: whether Alpha answers.
    ///
    /// # Errors
    /// [`DgraphError::Transport`] or [`DgraphError::Http`].
    pub async fn health(&self) -> Result<(), DgraphError> {
        let url = format!("{}/health", self.base);
        let response = self
            .client
            .get(&url)
            .send()
            .await
            .map_err(|e| DgraphError::Transport(format!("GET {url}: {e}")))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let body = response.bytes().await.unwrap_or_default();
        Err(DgraphError::Http { status, body: shorten(&body) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Answers shaped as dgraph/cmd/alpha/http.go writes them (queryHandler: `data` then
    // `extensions`; mutationHandler: `code`, `message`, `uids`, `queries`; handleCommit:
    // `extensions.txn` with `commit_ts`; x.SetStatus: `errors`).

    #[test]
    fn query_mutate_and_commit_answers_give_the_transaction_context() {
        let query = br#"{"data":{"q":[{"uid":"0x2","c0":1,"c1":7}]},"extensions":{"server_latency":{"parsing_ns":13140,"processing_ns":1205443,"encoding_ns":38051,"assign_timestamp_ns":612113,"total_ns":2016785},"txn":{"start_ts":10051},"metrics":{"num_uids":{"isocert.kv.key":1,"uid":1}}}}"#;
        let a = parse_answer(200, query).unwrap();
        assert_eq!(a.txn.start_ts, 10051);
        assert_eq!(a.data["q"][0]["uid"], "0x2");

        let mutate = br#"{"data":{"code":"Success","message":"Done","queries":null,"uids":{"row":"0x4e2b"}},"extensions":{"server_latency":{"parsing_ns":21625,"processing_ns":4076133,"assign_timestamp_ns":702291,"total_ns":4875233},"txn":{"start_ts":10051,"keys":["1c9oj8qrcdgxk","3hzbl77ax6wg9"],"preds":["1-0-isocert.kv.key","1-0-isocert.kv.value"]}}}"#;
        let a = parse_answer(200, mutate).unwrap();
        assert_eq!(a.txn.keys, ["1c9oj8qrcdgxk", "3hzbl77ax6wg9"]);
        assert_eq!(a.txn.preds.len(), 2);
        assert_eq!(a.data["uids"]["row"], "0x4e2b");

        let commit = br#"{"data":{"code":"Success","message":"Done"},"extensions":{"txn":{"start_ts":10051,"commit_ts":10055,"preds":["1-0-isocert.kv.key","1-0-isocert.kv.value"]}}}"#;
        let a = parse_answer(200, commit).unwrap();
        assert_eq!((a.txn.start_ts, a.txn.commit_ts), (10051, 10055));
    }

    #[test]
    fn aborts_retry_lost_answers_are_lost_connections_and_the_rest_is_fatal() {
        let abort = br#"{"errors":[{"message":"Transaction has been aborted. Please retry","extensions":{"code":"ErrorInvalidRequest"}}]}"#;
        let e = parse_answer(200, abort).unwrap_err();
        assert!(e.is_aborted());
        assert_eq!(classify(&e), ErrorClass::Retryable);
        assert_eq!(e.code().as_deref(), Some("aborted"));

        let syntax = br#"{"errors":[{"message":"line 1 column 10: Expected comma or language but got: 5","extensions":{"code":"ErrorInvalidRequest"}}],"data":null}"#;
        let e = parse_answer(200, syntax).unwrap_err();
        assert_eq!(classify(&e), ErrorClass::Fatal);
        assert_eq!(e.code().as_deref(), Some("ErrorInvalidRequest"));
        assert!(e.to_string().contains("Expected comma"), "{e}");

        let lost = DgraphError::Transport("POST http://h:8080/commit?startTs=5: connection reset".into());
        assert_eq!(classify(&lost), ErrorClass::ConnectionLost);
        assert_eq!(db_error("commit", lost).fact(), "connection");

        let gateway = parse_answer(503, b"<html>Service Unavailable</html>").unwrap_err();
        assert_eq!(classify(&gateway), ErrorClass::ConnectionLost);
        let teapot = parse_answer(200, b"<html>").unwrap_err();
        assert!(matches!(teapot, DgraphError::Malformed { .. }), "{teapot}");
        let bad_txn = parse_answer(200, br#"{"data":{},"extensions":{"txn":{"start_ts":"x"}}}"#).unwrap_err();
        assert!(bad_txn.to_string().contains("extensions.txn"), "{bad_txn}");
    }

    /// `extensions.txn` across versions: dgo's `protos/api.proto` `TxnContext` (`start_ts`,
    /// `commit_ts`, `aborted`, `keys`, `preds`; Dgraph 1.0 also `lin_read`, dgo commit
    /// 01540839) as Go's `encoding/json` writes it (zero fields left out), and an aborted
    /// commit answered as a context with `aborted: true`. Near misses: a context that is not
    /// an object, and negative or fractional timestamps.
    #[test]
    fn transaction_contexts_across_versions_and_their_near_misses() {
        let v1 = br#"{"data":{"code":"Success","message":"Done","uids":{"blank-0":"0x1"}},"extensions":{"server_latency":{"parsing_ns":1,"processing_ns":2},"txn":{"start_ts":7,"keys":["AAALX3ByZWRpY2F0ZV8AAAAAAAAAAAE="],"lin_read":{"ids":{"1":15}}}}}"#;
        let a = parse_answer(200, v1).unwrap();
        assert_eq!((a.txn.start_ts, a.txn.keys.len(), a.txn.aborted), (7, 1, false));
        let read_only = br#"{"data":{"q":[]},"extensions":{"txn":{"start_ts":9}}}"#;
        assert_eq!(
            parse_answer(200, read_only).unwrap().txn,
            TxnContext { start_ts: 9, ..TxnContext::default() }
        );
        let aborted = br#"{"data":{"code":"Success","message":"Done"},"extensions":{"txn":{"start_ts":9,"aborted":true}}}"#;
        assert!(parse_answer(200, aborted).unwrap().txn.aborted);
        let no_extensions = br#"{"data":{"q":[]}}"#;
        assert_eq!(parse_answer(200, no_extensions).unwrap().txn, TxnContext::default());
        for bad in [
            &br#"{"data":{},"extensions":{"txn":[9]}}"#[..],
            br#"{"data":{},"extensions":{"txn":{"start_ts":-9}}}"#,
            br#"{"data":{},"extensions":{"txn":{"start_ts":9,"commit_ts":10.5}}}"#,
        ] {
            let e = parse_answer(200, bad).unwrap_err().to_string();
            assert!(e.contains("extensions.txn"), "{}: {e}", String::from_utf8_lossy(bad));
        }
    }
}
