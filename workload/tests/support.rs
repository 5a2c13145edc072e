//! A database for the tests and helpers to run a workload on it.

use std::sync::OnceLock;

use isocert_adapters::EmbeddedPostgres;
use isocert_history::History;
use isocert_workload::{run, setup, WorkloadConfig};

/// Where the tests' server is: `ISOCERT_TEST_PG`, or one embedded server for the whole test
/// binary (kept alive until the process exits).
pub(crate) fn server_url() -> String {
    static EMBEDDED: OnceLock<(EmbeddedPostgres, String)> = OnceLock::new();
    if let Ok(url) = std::env::var("ISOCERT_TEST_PG") {
        return url;
    }
    EMBEDDED
        .get_or_init(|| {
            let pg = EmbeddedPostgres::start()
                .expect("ISOCERT_TEST_PG unset and the embedded PostgreSQL did not start");
            let url = pg.url();
            (pg, url)
        })
        .1
        .clone()
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
