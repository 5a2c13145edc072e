//! A database for the tests and helpers to run a workload on it.

use std::sync::OnceLock;

use isocert_adapters::EmbeddedPostgres;
use isocert_history::History;
use isocert_workload::{run, setup, WorkloadConfig};

/// Where the tests' server is: `ISOCERT_TEST_PG`, or one embedded server for the whole test
/// binary (kept alive until the process exits); `None` when neither is available.
fn server() -> Option<String> {
    static EMBEDDED: OnceLock<Option<(EmbeddedPostgres, String)>> = OnceLock::new();
    if let Ok(url) = std::env::var("ISOCERT_TEST_PG") {
        return Some(url);
    }
    EMBEDDED
        .get_or_init(|| match EmbeddedPostgres::start() {
            Ok(pg) => {
                let url = pg.url();
                Some((pg, url))
            }
            Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("CI=true but ISOCERT_TEST_PG is unset and the embedded PostgreSQL did not start: {e}")
            }
            Err(e) => {
                eprintln!("skipping PostgreSQL test: ISOCERT_TEST_PG is unset and {e}");
                None
            }
        })
        .as_ref()
        .map(|(_, url)| url.clone())
}

/// Whether a PostgreSQL is available; tests return early (skip) when it is not. Fails
/// instead under `CI=true`.
pub(crate) fn pg_available() -> bool {
    server().is_some()
}

fn server_url() -> String {
    server().expect("call pg_available() first")
}

/// A fresh database on the test server, so tests can run in parallel.
pub(crate) fn fresh_database(name: &str) -> String {
    let url = server_url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = isocert_adapters::postgres::connect(&url).await.unwrap();
        admin.simple_query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
        admin.simple_query(&format!("CREATE DATABASE {name}")).await.unwrap();
    });
    match url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("test URL without a database: {url}"),
    }
}

/// Sets up and runs `cfg` on a fresh database named `name`.
pub(crate) fn run_workload(name: &str, cfg: &WorkloadConfig) -> History {
    let url = fresh_database(name);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        setup(&url, cfg).await.unwrap();
        run(&url, cfg, |_| {}).await.unwrap()
    })
}
