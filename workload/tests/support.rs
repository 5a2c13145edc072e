//! A database for the tests and helpers to run a workload on it.

use std::sync::{Arc, Mutex, Weak};

use isocert_adapters::EmbeddedPostgres;
use isocert_history::History;
use isocert_workload::{run, setup, WorkloadConfig};

/// A database for one test; it keeps the embedded server (if any) alive while it lives.
pub(crate) struct TestDb {
    /// Connection URL of the test's own database.
    pub(crate) url: String,
    _server: Option<Arc<EmbeddedPostgres>>,
}

/// The embedded server shared by the tests running at the same time. It is reference
/// counted: the last test to finish drops it, which stops it and removes its directory
/// (a `static` server would never be dropped and would outlive the test binary).
fn shared_server() -> Arc<EmbeddedPostgres> {
    static SHARED: Mutex<Weak<EmbeddedPostgres>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pg) = slot.upgrade() {
        return pg;
    }
    let pg = Arc::new(EmbeddedPostgres::start().expect("the embedded PostgreSQL starts"));
    *slot = Arc::downgrade(&pg);
    pg
}

/// Whether a PostgreSQL is available: `ISOCERT_TEST_PG`, or installed server programs for
/// an embedded one. Tests return early when it is not, after `isocert_testsupport` printed
/// `SKIPPED: ...`; under `CI=true` they fail.
pub(crate) fn pg_available() -> bool {
    isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed()).is_some()
}

/// A fresh database named `name` on `ISOCERT_TEST_PG` or on the shared embedded server.
pub(crate) fn fresh_database(name: &str) -> TestDb {
    let (server_url, server) = match isocert_testsupport::POSTGRES.env_url() {
        Some(url) => (url, None),
        None => {
            let pg = shared_server();
            (pg.url(), Some(pg))
        }
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = isocert_adapters::postgres::connect(&server_url).await.unwrap();
        admin.simple_query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
        admin.simple_query(&format!("CREATE DATABASE {name}")).await.unwrap();
    });
    let url = match server_url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("test URL without a database: {server_url}"),
    };
    TestDb { url, _server: server }
}

/// Sets up and runs `cfg` on a fresh database named `name`.
pub(crate) fn run_workload(name: &str, cfg: &WorkloadConfig) -> History {
    let db = fresh_database(name);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        setup(&db.url, cfg).await.unwrap();
        run(&db.url, cfg, |_| {}).await.unwrap()
    })
}
