//! The streaming replication connection authenticates the way PostgreSQL asks (cleartext
//! password, md5, SCRAM-SHA-256; trust is what the other tests use), over TCP and over the
//! Unix socket, and a refused password ends the consumer with the server's error instead
//! of a reconnect loop.
//!
//! These tests rewrite `pg_hba.conf`, so they run on a private embedded server, never on
//! `$ISOCERT_TEST_PG`.

use std::time::Duration;

use isocert_adapters::postgres::{connect, ReplicationMode, ReplicationSlot};
use isocert_adapters::{AdapterError, EmbeddedPostgres};
use isocert_history::Scalar;

const HBA: &str = "\
local all postgres trust
host  all postgres 127.0.0.1/32 trust
host  all iso_clear 127.0.0.1/32 password
host  all iso_md5 127.0.0.1/32 md5
host  all iso_scram 127.0.0.1/32 scram-sha-256
local all iso_scram scram-sha-256
";

/// A private server with three password roles and pg_hba.conf requiring each one's method;
/// `None` (after `isocert_testsupport` printed `SKIPPED: ...`) when PostgreSQL is not
/// installed; a failure under `CI=true`.
async fn server_with_password_roles() -> Option<EmbeddedPostgres> {
    if !isocert_testsupport::POSTGRES.embedded(EmbeddedPostgres::is_installed()) {
        return None;
    }
    let pg = EmbeddedPostgres::start_async().await.expect("embedded PostgreSQL starts");
    let admin = connect(&pg.url()).await.unwrap();
    admin
        .batch_execute(
            "SET password_encryption = 'md5';
             CREATE ROLE iso_clear LOGIN SUPERUSER PASSWORD 'clear secret';
             CREATE ROLE iso_md5 LOGIN SUPERUSER PASSWORD 'md5 secret';
             SET password_encryption = 'scram-sha-256';
             CREATE ROLE iso_scram LOGIN SUPERUSER PASSWORD 'scram secret';
             CREATE TABLE auth_items (id integer PRIMARY KEY, v bigint NOT NULL);
             ALTER TABLE auth_items REPLICA IDENTITY FULL;",
        )
        .await
        .unwrap();
    std::fs::write(pg.data_dir().join("pg_hba.conf"), HBA).unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    // The reload is asynchronous: wait until every role's password is checked.
    for user in ["iso_clear", "iso_md5", "iso_scram"] {
        let wrong = format!("postgres://{user}:wrong@127.0.0.1:{}/postgres", pg.port());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while connect(&wrong).await.is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "pg_hba.conf was not reloaded: {user} gets in with a wrong password"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Some(pg)
}

/// Streams one committed insert through a slot opened with `url`; returns the recorded
/// (key, value) pairs.
async fn stream_one_insert(url: &str, admin_url: &str, slot: &str, key: i32) -> Vec<(i64, i64)> {
    let consumer = ReplicationSlot::create(url, slot, &["auth_items"])
        .await
        .unwrap()
        .mode(ReplicationMode::Stream)
        .start();
    let admin = connect(admin_url).await.unwrap();
    admin
        .execute("INSERT INTO auth_items (id, v) VALUES ($1, $2)", &[&key, &(i64::from(key) * 10)])
        .await
        .unwrap();
    let log = tokio::time::timeout(Duration::from_secs(60), consumer.finish()).await.unwrap().unwrap();
    log.txns()
        .iter()
        .flat_map(|t| &t.changes)
        .map(|c| {
            let (Scalar::Int(k), Some(Scalar::Int(v))) = (&c.key, c.row.as_ref().map(|r| r[1].1.clone()))
            else {
                panic!("change {c:?}")
            };
            (*k, v)
        })
        .collect()
}

#[test]
fn streaming_authenticates_with_password_md5_and_scram() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let Some(pg) = server_with_password_roles().await else { return };
        let port = pg.port();
        let cases =
            [("iso_clear", "clear%20secret"), ("iso_md5", "md5%20secret"), ("iso_scram", "scram%20secret")];
        for (i, (user, password)) in cases.into_iter().enumerate() {
            let url = format!("postgres://{user}:{password}@127.0.0.1:{port}/postgres");
            let key = i as i32 + 1;
            let recorded = stream_one_insert(&url, &pg.url(), &format!("auth_{user}"), key).await;
            assert_eq!(recorded, vec![(i64::from(key), i64::from(key) * 10)], "{user}");
        }
        // The Unix socket, SCRAM, in key=value form.
        let socket_dir = pg.data_dir().parent().unwrap().to_path_buf();
        let url = format!(
            "host={} port={port} user=iso_scram password='scram secret' dbname=postgres",
            socket_dir.display()
        );
        assert_eq!(stream_one_insert(&url, &pg.url(), "auth_unix", 9).await, vec![(9, 90)]);
    });
}

#[test]
fn a_refused_password_stops_the_stream_with_the_servers_error() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let Some(pg) = server_with_password_roles().await else { return };
        let url = format!("postgres://iso_md5:md5%20secret@127.0.0.1:{}/postgres", pg.port());
        let slot = ReplicationSlot::create(&url, "auth_refused", &["auth_items"]).await.unwrap();
        // The password changes after the slot exists: the consumer's own login fails.
        let admin = connect(&pg.url()).await.unwrap();
        admin.batch_execute("ALTER ROLE iso_md5 PASSWORD 'changed'").await.unwrap();
        let mut consumer = slot.mode(ReplicationMode::Stream).start();
        let waited = tokio::time::timeout(Duration::from_secs(30), consumer.wait_for(u64::MAX)).await;
        let err = waited.expect("the consumer gives up instead of retrying").unwrap_err();
        let AdapterError::Server { code, .. } = &err else { panic!("not the server's error: {err}") };
        assert_eq!(code, "28P01", "{err}");
        assert!(err.to_string().contains("password authentication failed"), "{err}");
        assert_eq!(consumer.reconnects(), 0);
    });
}
