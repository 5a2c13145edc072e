//! A live server in the test process (issue 32): the real router, listener, CPU pool,
//! store (SQLite) and PostgreSQL recovery rule, with the database's position fixed, so
//! that hostile requests reach every parser, compiler and checker the server calls
//! without a database server. Stored changes have the shape the PostgreSQL feed stores
//! (`FeedTxn` of `adapters/src/postgres/feed.rs`: one row change per key, the row's
//! `key`/`value` columns).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use isocert_adapters::postgres::Postgres;
use isocert_adapters::{AdapterError, FeedProgress, FeedTxn, TableIncarnation};
use isocert_history::{History, Scalar};
use isocert_recovery::{CommittedTxn, RawLog, RowChange};
use isocert_server::api::{router, ApiConfig, AppState};
use isocert_server::certify::{Backend, CertifyError, Recovery, SeamBackend};
use isocert_server::cpu::CpuPool;
use isocert_server::listen::{serve, ConnectionLimits};
use isocert_server::store::VersionStore;
use isocert_server::tenants::{TenantRegistry, Tenants};
use proptest::prelude::*;

/// PostgreSQL's recovery rule with the database's position fixed at 1 (the feed's
/// progress is past it).
struct Offline(SeamBackend<Postgres>);

impl Backend for Offline {
    fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>> {
        Box::pin(async { Ok(1) })
    }
    fn recover(&self, h: &mut History, log: &RawLog, reveal: bool) -> Result<Recovery, CertifyError> {
        self.0.recover(h, log, reveal)
    }
    fn recorded(&self, h: &History, writers: &[(u64, u64)]) -> usize {
        self.0.recorded(h, writers)
    }
}

pub(crate) const TOKEN: &str = "tok";

/// A running server: its address, and the runtime thread (stopped on drop).
pub(crate) struct Live {
    pub(crate) addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn kv_change(table: &TableIncarnation, key: i64, value: i64) -> RowChange {
    RowChange {
        table: table.name.clone(),
        key: Scalar::Int(key),
        row: Some(vec![(Arc::from("key"), Scalar::Int(key)), (Arc::from("value"), Scalar::Int(value))]),
    }
}

/// Starts a server whose store holds two transactions (xids 700 and 701) on one
/// incarnation of `public.kv` (keys 1..=4), then one (xid 800) on a newer incarnation (the
/// table dropped and created again).
pub(crate) fn start(limits: ConnectionLimits, body_limit: usize) -> Live {
    start_with(limits, body_limit, Budget { bodies: 1 << 30, per_token: 64 })
}

/// The bounds on bodies held at once: all requests' bytes, and each token's requests.
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    bodies: usize,
    per_token: usize,
}

/// [`start`] with `budget`.
pub(crate) fn start_with(limits: ConnectionLimits, body_limit: usize, budget: Budget) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("store.sqlite").display());
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let store = VersionStore::open(&store_url).await.unwrap();
            let kv = TableIncarnation { id: 16384, schema: "public".into(), name: "kv".into() };
            let recreated = TableIncarnation { id: 20000, schema: "public".into(), name: "kv".into() };
            let txns: Vec<FeedTxn> =
                [(100u64, 700u64, 1i64, &kv), (200, 701, 2, &kv), (250, 800, 3, &recreated)]
                    .into_iter()
                    .map(|(lsn, xid, v, kv)| {
                        let changes: Vec<RowChange> = (1..=4).map(|k| kv_change(kv, k, v * 10 + k)).collect();
                        FeedTxn {
                            tables: vec![kv.clone(); changes.len()],
                            txn: CommittedTxn {
                                xid,
                                commit_lsn: lsn,
                                end_lsn: lsn + 1,
                                commit_time: 0,
                                commit_ts: None,
                                changes,
                            },
                            truncated: Vec::new(),
                        }
                    })
                    .collect();
            store.store(&txns, 300).await.unwrap();
            let progress = FeedProgress::new();
            progress.advance(300);
            let tenants = Arc::new(TenantRegistry::fixed(Tenants::demo(TOKEN)));
            let config = ApiConfig {
                feed_name: "test".into(),
                wait: Duration::from_secs(1),
                body_limit,
                retention: Duration::from_secs(3600),
                bodies_budget: budget.bodies,
                requests_per_token: budget.per_token,
            };
            let backend: Arc<dyn Backend> =
                Arc::new(Offline(SeamBackend(Postgres::new("postgres://offline/x"))));
            let state = AppState::new(backend, store, progress, tenants, config, CpuPool::new(2).unwrap());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener, None, router(state), limits, async {
                let _ = stopped.await;
            })
            .await;
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(30)).expect("the server starts");
    Live { addr, stop: Some(stop), thread: Some(thread), _dir: dir }
}

/// Sends `request` (raw HTTP/1.1) and returns the status and body of the answer; `None`
/// when the connection closed without one (a crash, or a refused connection).
pub(crate) fn raw(addr: SocketAddr, request: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    s.write_all(request).ok()?;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// The head of a `post` answer: its status line and headers.
fn post_head(addr: SocketAddr, path: &str, headers: &[&str], body: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut request =
        format!("POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    s.write_all(request.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.split_once("\r\n\r\n").map_or(text.clone(), |(head, _)| head.to_ascii_lowercase())
}

/// POSTs `body` to `path` with `headers` (each `Name: value`), closing the connection after.
pub(crate) fn post(addr: SocketAddr, path: &str, headers: &[&str], body: &[u8]) -> Option<(u16, String)> {
    let mut request =
        format!("POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    raw(addr, &bytes)
}

fn auth() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

/// A history of one committed transaction whose one operation is `op` (JSON).
fn history_with(op: &str) -> Vec<u8> {
    format!(
        "{{\"format\":\"isocert-history\",\"version\":1,\"initial\":[]}}\n\
         {{\"id\":1,\"session\":0,\"status\":\"committed\",\"ops\":[{op}]}}\n"
    )
    .into_bytes()
}

fn select_where(predicate: &str) -> Vec<u8> {
    history_with(&format!(
        "{{\"f\":\"select\",\"table\":\"kv\",\"where\":{},\"rows\":[]}}",
        serde_json::to_string(predicate).unwrap()
    ))
}

/// `value + 0 + 0 ...` with `terms` zeros, `>= 0`: nested `terms` levels deep.
fn chain(terms: usize) -> String {
    let mut p = String::from("value");
    for _ in 0..terms {
        p.push_str(" + 0");
    }
    p.push_str(" >= 0");
    p
}

fn healthy(addr: SocketAddr) -> bool {
    raw(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").is_some_and(|(s, _)| s == 200)
}

/// Issue 32: one op with a 1,000-term `value + 0 ...` overflowed a 2 MiB worker stack and
/// aborted the process. Now: every depth is answered, deeper than the compiler's limit
/// with a 422 naming it, and the server lives on.
#[test]
fn issue_32_deep_predicates_are_answered_and_never_abort_the_server() {
    let live = start(ConnectionLimits::default(), 8 << 20);
    for terms in [1_000, 5_000, 9_000] {
        let answer = post(live.addr, "/v1/certificates", &[&auth()], &select_where(&chain(terms)));
        let (status, body) = answer.unwrap_or_else(|| panic!("{terms} terms: no answer (the server died?)"));
        assert!(status == 200 || status == 409 || status == 422, "{terms} terms: {status} {body}");
        assert!(!body.contains("levels deep"), "{terms} terms are within the limit: {body}");
    }
    for (terms, path) in [(10_500, "/v1/certificates"), (12_000, "/v1/check?isolation=serializable")] {
        let (status, body) =
            post(live.addr, path, &[&auth()], &select_where(&chain(terms))).expect("an answer");
        assert_eq!(status, 422, "{terms} terms: {body}");
        assert!(body.contains("10000 levels"), "the limit is named: {body}");
    }
    // Longer than any tree a stack can free: refused by size before it is parsed.
    let (status, body) =
        post(live.addr, "/v1/certificates", &[&auth()], &select_where(&chain(40_000))).unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("65536"), "{body}");
    assert!(healthy(live.addr));
}

/// Hostile shapes of predicates, generated.
fn hostile_predicate() -> impl Strategy<Value = String> {
    let depth = 1usize..14_000;
    prop_oneof![
        depth.clone().prop_map(chain),
        depth.clone().prop_map(|d| format!("{}value{} > 0", "(".repeat(d), ")".repeat(d))),
        depth.clone().prop_map(|d| format!("{}true", "NOT ".repeat(d))),
        depth.clone().prop_map(|d| format!("value = {}1", "- ".repeat(d))),
        depth.clone().prop_map(|d| format!("value IN ({})", vec!["1"; d].join(","))),
        depth.prop_map(|d| format!("{}value > 0", "value > 0 AND ".repeat(d))),
        "[ -~]{0,200}",
    ]
}

/// Hostile bodies: valid histories around hostile predicates, and broken JSON.
fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => hostile_predicate().prop_map(|p| select_where(&p)),
        1 => (1usize..5_000).prop_map(|d| history_with(&format!(
            "{{\"f\":\"r\",\"table\":\"kv\",\"key\":1,\"value\":{}1{}}}", "[".repeat(d), "]".repeat(d)
        ))),
        1 => proptest::collection::vec(any::<u8>(), 0..2_000),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every generated hostile history gets an answer, none a 5xx, and the server stays up.
    #[test]
    fn every_hostile_history_is_answered(bodies in proptest::collection::vec(hostile_body(), 1..4)) {
        let live = shared();
        for body in bodies {
            for path in ["/v1/certificates", "/v1/check?isolation=serializable"] {
                let answer = post(live.addr, path, &[&auth()], &body);
                let (status, text) = answer.expect("an answer (the server died?)");
                prop_assert!(
                    [200, 202, 400, 404, 409, 410, 413, 422].contains(&status),
                    "{path}: {status} {text}"
                );
                prop_assert!(text.starts_with('{'), "not JSON: {text}");
            }
        }
        prop_assert!(healthy(live.addr));
    }
}

/// One server for the generated cases (starting one per case would dominate the test).
fn shared() -> &'static Live {
    static LIVE: std::sync::OnceLock<Live> = std::sync::OnceLock::new();
    LIVE.get_or_init(|| start(ConnectionLimits::default(), 8 << 20))
}

/// Without a token nothing is read: a request announcing a huge body gets 401 at once
/// (the body is never sent); a gzip body without a token gets 401, not 413.
#[test]
fn requests_without_a_token_are_refused_before_their_body_is_read() {
    let live = start(ConnectionLimits::default(), 1 << 20);
    let started = Instant::now();
    let head =
        b"POST /v1/certificates HTTP/1.1\r\nHost: x\r\nContent-Length: 60000000\r\nConnection: close\r\n\r\n";
    let (status, body) = raw(live.addr, head).expect("an answer");
    assert_eq!(status, 401, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "the server waited for the body");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![b' '; 4 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    let (status, _) = post(live.addr, "/v1/check?isolation=ser", &["Content-Encoding: gzip"], &bomb).unwrap();
    assert_eq!(status, 401);
    // With the token: the same body is 413 (inflated past 1 MiB), the raw size limit too,
    // each as JSON.
    for (headers, body) in [
        (vec![auth(), "Content-Encoding: GZIP".to_string()], bomb.clone()),
        (vec![auth()], vec![b' '; (1 << 20) + 1]),
    ] {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (status, text) = post(live.addr, "/v1/certificates", &headers, &body).unwrap();
        assert_eq!(status, 413, "{text}");
        assert!(text.starts_with("{\"error\""), "{text}");
    }
    // Unknown content encodings, routes, methods and query strings: JSON too.
    let (status, text) =
        post(live.addr, "/v1/certificates", &[&auth(), "Content-Encoding: br"], b"x").unwrap();
    assert_eq!((status, text.starts_with("{\"error\"")), (415, true), "{text}");
    let (status, text) = post(live.addr, "/v1/check?isolation=ser&schema=%ZZ", &[&auth()], b"x").unwrap();
    assert_eq!((status, text.starts_with("{\"error\"")), (400, true), "{text}");
    let (status, text) = post(live.addr, "/v1/check", &[&auth()], b"x").unwrap();
    assert_eq!((status, text.starts_with("{\"error\"")), (400, true), "missing isolation: {text}");
    let (status, text) =
        raw(live.addr, b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!((status, text.starts_with("{\"error\"")), (404, true), "{text}");
    let (status, text) =
        raw(live.addr, b"GET /v1/certificates HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!((status, text.starts_with("{\"error\"")), (405, true), "{text}");
    let (status, _) =
        raw(live.addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(status, 404, "/metrics is not served to tenants");
    // The OpenAPI document lists every status each route answers.
    let (status, doc) =
        raw(live.addr, b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(status, 200);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    for (path, method, statuses) in [
        (
            "/v1/certificates",
            "post",
            &[200, 202, 400, 401, 403, 404, 408, 409, 410, 413, 415, 422, 429, 500, 503][..],
        ),
        (
            "/v1/check",
            "post",
            &[200, 202, 400, 401, 403, 404, 408, 409, 410, 413, 415, 422, 429, 500, 503][..],
        ),
        ("/v1/status", "get", &[200, 400, 401, 429, 503][..]),
        ("/healthz", "get", &[200, 503][..]),
    ] {
        for code in statuses {
            assert!(
                doc["paths"][path][method]["responses"][code.to_string()].is_object(),
                "{method} {path}: {code} is not in the OpenAPI document"
            );
        }
    }
    // The bearer scheme in lowercase is accepted.
    let (status, text) =
        post(live.addr, "/v1/certificates", &[&format!("authorization: bearer {TOKEN}")], b"not json\n")
            .unwrap();
    assert_eq!(status, 400, "{text}");
}

/// A client with a valid token still sending a body the server refuses hears why: the
/// server reads the rest of the body (and throws it away) before it answers, so the
/// connection is not reset under the client's write. Both ways a body is too large
/// (declared, and grown past the limit in chunks), and refusals before the body is read
/// (an unknown encoding, a bad query string).
#[test]
fn a_refused_body_is_answered_not_reset() {
    let live = start(ConnectionLimits::default(), 1 << 20);
    let declared = vec![b' '; 6 << 20];
    let mut chunked = format!(
        "POST /v1/certificates HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{}\r\nTransfer-Encoding: chunked\r\n\r\n",
        auth()
    )
    .into_bytes();
    for _ in 0..96 {
        chunked.extend_from_slice(format!("{:x}\r\n", 64 << 10).as_bytes());
        chunked.extend_from_slice(&[b' '; 64 << 10]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    for round in 0..8 {
        let answer = post(live.addr, "/v1/certificates", &[&auth()], &declared);
        assert_eq!(answer.map(|a| a.0), Some(413), "declared, round {round}");
        let answer = raw(live.addr, &chunked);
        assert_eq!(answer.map(|a| a.0), Some(413), "chunked, round {round}");
        let answer = post(live.addr, "/v1/certificates", &[&auth(), "Content-Encoding: br"], &declared);
        assert_eq!(answer.map(|a| a.0), Some(415), "encoding, round {round}");
        let answer = post(live.addr, "/v1/check?isolation=nope", &[&auth()], &declared);
        assert_eq!(answer.map(|a| a.0), Some(400), "query string, round {round}");
    }
}

/// Slow and idle clients are cut off; the connection cap holds, and the server answers
/// again once the idle connections are gone.
#[test]
fn slow_and_idle_connections_are_bounded() {
    let limits = ConnectionLimits { max_connections: 4, header_timeout: Duration::from_secs(1) };
    let live = start(limits, 1 << 20);
    // A half-sent request line is closed after the header timeout.
    let mut half = TcpStream::connect(live.addr).unwrap();
    half.write_all(b"POST /v1/certif").unwrap();
    half.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = half.read_to_end(&mut buf);
    assert!(started.elapsed() < Duration::from_secs(5), "a half-sent request stayed open");
    // Four idle connections fill the cap: a fifth client waits, then is served once the
    // idle ones time out.
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(live.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    assert!(healthy(live.addr), "served after the idle connections were closed");
    assert!(started.elapsed() >= Duration::from_millis(300), "the cap did not hold: {:?}", started.elapsed());
    drop(idle);
    // A body that stalls after its headers is cut off too (408).
    let mut slow = TcpStream::connect(live.addr).unwrap();
    slow.write_all(
        format!("POST /v1/certificates HTTP/1.1\r\nHost: x\r\n{}\r\nContent-Length: 100\r\n\r\nabc", auth())
            .as_bytes(),
    )
    .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answer = Vec::new();
    let _ = slow.read_to_end(&mut answer);
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// Issue 32: a history is certified from the table incarnation its transactions are in,
/// not the newest one (which gave 422: "T0 committed (xid Some(700)) but its write ... is
/// not in the replication stream").
#[test]
fn issue_32_the_incarnation_is_the_one_holding_the_historys_transactions() {
    let live = start(ConnectionLimits::default(), 1 << 20);
    let mut history = String::from("{\"format\":\"isocert-history\",\"version\":1,\"initial\":[]}\n");
    for (id, xid, v) in [(1, 700, 1), (2, 701, 2)] {
        let ops: Vec<String> = (1..=4)
            .map(|k| format!("{{\"f\":\"w\",\"table\":\"kv\",\"key\":{k},\"value\":{}}}", v * 10 + k))
            .collect();
        history.push_str(&format!(
            "{{\"id\":{id},\"session\":0,\"status\":\"committed\",\"meta\":{{\"xid\":{xid}}},\"ops\":[{}]}}\n",
            ops.join(",")
        ));
    }
    let (status, body) = post(live.addr, "/v1/certificates", &[&auth()], history.as_bytes()).unwrap();
    assert_eq!(status, 200, "{body}");
    let cert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cert["version_order"][0]["writers"], serde_json::json!([1, 2]), "{cert}");
    assert!(cert.get("foreign_writers").is_none_or(|w| w.as_array().is_none_or(Vec::is_empty)), "{cert}");
    // A write the log does not hold: 422 naming the transaction's xid as a number.
    let wrong = history
        .replace("\"value\":11}", "\"value\":11},{\"f\":\"w\",\"table\":\"kv\",\"key\":9,\"value\":9}");
    let (status, body) = post(live.addr, "/v1/certificates", &[&auth()], wrong.as_bytes()).unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("(xid 700)") && !body.contains("Some("), "{body}");
}

/// The two-transaction history of the first incarnation of `public.kv` (xids 700, 701),
/// one line per element.
fn two_kv_transactions() -> Vec<String> {
    let mut lines = vec![String::from("{\"format\":\"isocert-history\",\"version\":1,\"initial\":[]}\n")];
    for (id, xid, v) in [(1, 700, 1), (2, 701, 2)] {
        let ops: Vec<String> = (1..=4)
            .map(|k| format!("{{\"f\":\"w\",\"table\":\"kv\",\"key\":{k},\"value\":{}}}", v * 10 + k))
            .collect();
        lines.push(format!(
            "{{\"id\":{id},\"session\":0,\"status\":\"committed\",\"meta\":{{\"xid\":{xid}}},\"ops\":[{}]}}\n",
            ops.join(",")
        ));
    }
    lines
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// Issue 47 item 1: a body of several gzip members (`pigz`, `cat a.gz b.gz`) was decoded
/// up to the end of its first member and the rest dropped: a transaction in the second
/// member was never certified, a repeated id there never seen, and gzip followed by garbage
/// answered 200. Now every member is read, on both routes, and trailing bytes are 400.
#[test]
fn issue_47_every_gzip_member_of_a_body_is_read() {
    let live = start(ConnectionLimits::default(), 1 << 20);
    let lines = two_kv_transactions();
    let mut members = gzip(format!("{}{}", lines[0], lines[1]).as_bytes());
    members.extend(gzip(lines[2].as_bytes()));
    let gz = "Content-Encoding: gzip";
    let (status, body) = post(live.addr, "/v1/certificates", &[&auth(), gz], &members).unwrap();
    assert_eq!(status, 200, "{body}");
    let cert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cert["version_order"][0]["writers"], serde_json::json!([1, 2]), "{cert}");
    let (status, body) = post(live.addr, "/v1/check?isolation=ser", &[&auth(), gz], &members).unwrap();
    assert_eq!(status, 200, "{body}");
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["stats"]["txns"], serde_json::json!(2), "{report}");
    // A repeated transaction id in the second member is seen.
    let mut repeated = gzip(format!("{}{}", lines[0], lines[1]).as_bytes());
    repeated.extend(gzip(lines[1].as_bytes()));
    for path in ["/v1/certificates", "/v1/check?isolation=ser"] {
        let (status, body) = post(live.addr, path, &[&auth(), gz], &repeated).unwrap();
        assert_eq!(status, 400, "{path}: {body}");
        // Garbage after the last member: 400 naming it.
        let mut trailing = members.clone();
        trailing.extend_from_slice(b"\n{\"id\":9}\n");
        let (status, body) = post(live.addr, path, &[&auth(), gz], &trailing).unwrap();
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("after its last member"), "{body}");
    }
}

/// A certificate request whose headers (declaring `length` bytes) and first `sent` bytes
/// were sent, then one byte every second (never stalling long enough for a 408), until
/// dropped: the connection is closed then.
struct Trickle {
    stream: TcpStream,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trickle {
    fn start(addr: SocketAddr, length: usize, sent: usize) -> Trickle {
        let mut s = TcpStream::connect(addr).unwrap();
        let head = format!(
            "POST /v1/certificates HTTP/1.1\r\nHost: x\r\n{}\r\nContent-Length: {length}\r\n\r\n",
            auth()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(&vec![b' '; sent]).unwrap();
        let mut writer = s.try_clone().unwrap();
        let thread = std::thread::spawn(move || {
            for _ in sent + 1..length {
                std::thread::sleep(Duration::from_secs(1));
                if writer.write_all(b" ").is_err() {
                    return;
                }
            }
        });
        Trickle { stream: s, thread: Some(thread) }
    }
}

impl Trickle {
    /// Starts `count` uploads as [`Trickle::start`] does and waits until the server has
    /// taken each in (a second without an answer on any): a request sent before the last
    /// upload was taken in could otherwise take the room that upload needs, and the
    /// upload, not the request, would be refused (the tests' race, not the server's).
    fn start_all(addr: SocketAddr, count: usize, length: usize, sent: usize) -> Vec<Trickle> {
        for _ in 0..10 {
            let uploads: Vec<Trickle> = (0..count).map(|_| Trickle::start(addr, length, sent)).collect();
            std::thread::sleep(Duration::from_secs(1));
            if !uploads.iter().any(Trickle::answered) {
                return uploads;
            }
        }
        panic!("the server refused a slow upload ten times before any other request was sent");
    }

    /// Whether the server answered this upload (it was refused) before the body ended.
    fn answered(&self) -> bool {
        let _ = self.stream.set_read_timeout(Some(Duration::from_millis(100)));
        let mut byte = [0u8; 1];
        matches!(self.stream.peek(&mut byte), Ok(n) if n > 0)
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until `answer` gives a status `wanted` accepts (the server sees stalled uploads
/// start and end a little after the client does), for at most 30 s; the last answer.
fn eventually(
    wanted: impl Fn(u16) -> bool,
    mut answer: impl FnMut() -> Option<(u16, String)>,
) -> Option<(u16, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = answer();
        if got.as_ref().is_some_and(|(s, _)| wanted(*s)) || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 47 item 5: slow uploads with one valid token held `--max-connections` ×
/// `--max-body-mib` bytes. Now one token has at most `--max-requests-per-token` requests in
/// flight (429 past it) and all bodies together at most `--max-bodies-mib` (503 past it),
/// each with Retry-After; the budget is given back when the uploads end.
#[test]
fn issue_47_bodies_held_at_once_are_bounded() {
    let body = history_with("{\"f\":\"r\",\"table\":\"kv\",\"key\":1,\"value\":null}");
    let retry = |text: &str| text.starts_with("{\"error\"");
    let admitted = |status| status != 429 && status != 503;
    // Per token: two uploads in flight, the third is 429.
    let live = start_with(ConnectionLimits::default(), 1 << 20, Budget { bodies: 64 << 20, per_token: 2 });
    let uploads = Trickle::start_all(live.addr, 2, 1000, 10);
    let third = eventually(|s| s == 429, || post(live.addr, "/v1/certificates", &[&auth()], &body));
    let (status, text) = third.unwrap();
    assert_eq!((status, retry(&text)), (429, true), "{text}");
    assert!(text.contains("in flight"), "{text}");
    let head = post_head(live.addr, "/v1/certificates", &[&auth()], &body);
    assert!(head.starts_with("http/1.1 429") && head.contains("retry-after: 1"), "{head}");
    drop(uploads);
    let (status, text) =
        eventually(admitted, || post(live.addr, "/v1/certificates", &[&auth()], &body)).unwrap();
    assert!(status != 429 && status != 503, "{status} {text}");
    // All bodies: two slow uploads of 600 KiB declared fill a 1.2 MiB budget; a third
    // body is 503 with Retry-After, a body that grows past what is left too.
    let live = start_with(ConnectionLimits::default(), 1 << 20, Budget { bodies: 1200 << 10, per_token: 64 });
    let uploads = Trickle::start_all(live.addr, 2, 600 << 10, 10);
    let refused = eventually(|s| s == 503, || post(live.addr, "/v1/certificates", &[&auth()], &body));
    let (status, text) = refused.unwrap();
    assert_eq!((status, retry(&text)), (503, true), "{text}");
    assert!(text.contains("--max-bodies-mib"), "{text}");
    let head = post_head(live.addr, "/v1/certificates", &[&auth()], &body);
    assert!(head.starts_with("http/1.1 503") && head.contains("retry-after: 1"), "{head}");
    let head = format!(
        "POST /v1/certificates HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{}\r\nTransfer-Encoding: chunked\r\n\r\n",
        auth()
    );
    let mut chunked = head.into_bytes();
    chunked.extend_from_slice(format!("{:x}\r\n", 64 << 10).as_bytes());
    chunked.extend_from_slice(&[b' '; 64 << 10]);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let (status, text) = raw(live.addr, &chunked).unwrap();
    assert_eq!(status, 503, "{text}");
    drop(uploads);
    let (status, text) =
        eventually(admitted, || post(live.addr, "/v1/certificates", &[&auth()], &body)).unwrap();
    assert!(status != 429 && status != 503, "the budget was given back: {status} {text}");
}

/// Issue 47 item 8: the answers hyper gives itself to a request it cannot parse (400 for a
/// bad Content-Length, 414, 431) had empty bodies, though every answer is JSON; two
/// `Authorization` headers were accepted (the first won). Now each is JSON, and two
/// headers are 400 on every `/v1` route, before anything is read.
#[test]
fn issue_47_unparsable_requests_and_two_tokens_are_answered_in_json() {
    let live = start(ConnectionLimits::default(), 1 << 20);
    let json_error = |answer: Option<(u16, String)>| -> (u16, bool) {
        let (status, body) = answer.expect("an answer");
        let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        (status, parsed.is_some_and(|v| v["error"].is_string()))
    };
    let auth = auth();
    for length in ["abc", "5, 6", "-1", "1 2"] {
        let request = format!(
            "POST /v1/certificates HTTP/1.1\r\nHost: x\r\n{auth}\r\nContent-Length: {length}\r\n\r\nxxxxx"
        );
        assert_eq!(json_error(raw(live.addr, request.as_bytes())), (400, true), "Content-Length: {length}");
    }
    let long_uri = format!("GET /v1/status?{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    assert_eq!(json_error(raw(live.addr, long_uri.as_bytes())), (414, true));
    let mut many = String::from("GET /v1/status HTTP/1.1\r\nHost: x\r\n");
    for i in 0..200 {
        many.push_str(&format!("X-Header-{i}: {i}\r\n"));
    }
    many.push_str("\r\n");
    assert_eq!(json_error(raw(live.addr, many.as_bytes())), (431, true));
    // Two Authorization headers: 400 whichever comes first, on every route.
    for second in [auth.as_str(), "Authorization: Bearer other"] {
        let request =
            format!("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n{second}\r\n\r\n");
        assert_eq!(json_error(raw(live.addr, request.as_bytes())), (400, true), "{second}");
        let body = history_with("{\"f\":\"r\",\"table\":\"kv\",\"key\":1,\"value\":null}");
        for path in ["/v1/certificates", "/v1/check?isolation=ser"] {
            let (status, text) =
                post(live.addr, path, &["Authorization: Bearer other", &auth], &body).unwrap();
            assert_eq!(status, 400, "{path}: {text}");
            assert!(text.contains("more than one Authorization header"), "{text}");
            assert_eq!(json_error(post(live.addr, path, &[&auth, second], &body)), (400, true), "{path}");
        }
    }
    assert!(healthy(live.addr));
}
