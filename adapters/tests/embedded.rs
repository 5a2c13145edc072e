//! The embedded server really starts, is configured for logical decoding, and goes away.

use isocert_adapters::postgres::connect;
use isocert_adapters::EmbeddedPostgres;

/// Starts a server; `None` when PostgreSQL is not installed, after `isocert_testsupport`
/// printed `SKIPPED: ...` (a failure under `CI=true`).
fn start() -> Option<EmbeddedPostgres> {
    if !isocert_testsupport::POSTGRES.embedded(EmbeddedPostgres::is_installed()) {
        return None;
    }
    Some(EmbeddedPostgres::start().unwrap_or_else(|e| panic!("embedded PostgreSQL did not start: {e}")))
}

#[test]
fn starts_configured_and_is_removed_by_shutdown() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(pg) = start() else { return };
    let data = pg.data_dir();
    assert!(data.join("PG_VERSION").is_file());
    assert!(pg.url().starts_with("postgres://postgres@127.0.0.1:"));
    rt.block_on(async {
        let client = connect(&pg.url()).await.unwrap();
        let show = |name: &'static str| {
            let client = &client;
            async move { client.query_one(&format!("SHOW {name}"), &[]).await.unwrap().get::<_, String>(0) }
        };
        assert_eq!(show("wal_level").await, "logical");
        assert_eq!(show("fsync").await, "off");
        assert_eq!(show("lc_collate").await, "C");
        assert_eq!(show("server_encoding").await, "UTF8");
        let slots: String = show("max_replication_slots").await;
        assert!(slots.parse::<u32>().unwrap() >= 8);
        // A logical slot can be created: what certificate recovery needs.
        client
            .execute("SELECT pg_create_logical_replication_slot('isocert_test', 'pgoutput')", &[])
            .await
            .unwrap();
        client.execute("SELECT pg_drop_replication_slot('isocert_test')", &[]).await.unwrap();
    });
    let root = data.parent().unwrap().to_path_buf();
    pg.shutdown().expect("clean shutdown");
    assert!(!root.exists(), "{} left behind", root.display());
}

#[test]
fn drop_stops_the_server_and_removes_the_directory() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if !isocert_testsupport::POSTGRES.embedded(EmbeddedPostgres::is_installed()) {
        return;
    }
    let pg = rt.block_on(EmbeddedPostgres::start_async()).unwrap();
    let url = pg.url();
    let root = pg.data_dir().parent().unwrap().to_path_buf();
    rt.block_on(async { connect(&url).await.unwrap() });
    drop(pg);
    assert!(!root.exists());
    let err = rt.block_on(connect(&url)).unwrap_err();
    assert!(err.to_string().contains("connecting to"), "{err}");
}

#[test]
fn two_servers_run_side_by_side() {
    let Some(a) = start() else { return };
    let b = EmbeddedPostgres::start().unwrap();
    assert_ne!(a.port(), b.port());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        for pg in [&a, &b] {
            let c = connect(&pg.url()).await.unwrap();
            let one: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
            assert_eq!(one, 1);
        }
    });
    rt.block_on(async { a.shutdown_async().await.unwrap() });
    b.shutdown().unwrap();
}
