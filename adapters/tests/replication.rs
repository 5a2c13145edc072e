//! The replication consumer records every committed transaction in commit order, even when
//! its connection is killed mid-run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use isocert_adapters::postgres::{connect, ReplicationMode, ReplicationSlot};
use isocert_adapters::EmbeddedPostgres;
use isocert_history::Scalar;

/// A fresh `(id, v)` table with full replica identity, and the admin connection that made it.
async fn items_table(url: &str, table: &str) -> tokio_postgres::Client {
    let admin = connect(url).await.unwrap();
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id integer PRIMARY KEY, v bigint NOT NULL); \
             ALTER TABLE {table} REPLICA IDENTITY FULL"
        ))
        .await
        .unwrap();
    admin
}

/// The server under test: `$ISOCERT_TEST_PG` when set, else a private embedded one;
/// `None` after `isocert_testsupport` printed `SKIPPED: ...` (a failure under `CI=true`).
fn server() -> Option<(String, Option<EmbeddedPostgres>)> {
    Some(match isocert_testsupport::POSTGRES.source(EmbeddedPostgres::is_installed())? {
        isocert_testsupport::Source::Url(url) => (url, None),
        isocert_testsupport::Source::Embedded => {
            let pg = EmbeddedPostgres::start().expect("embedded PostgreSQL starts");
            (pg.url(), Some(pg))
        }
    })
}

/// Runs `sessions` concurrent writers of `txns` transactions each against `table`;
/// every fourth transaction rolls back. Returns the committed xids with their writes.
async fn run_writers(
    url: &str,
    table: &str,
    sessions: u32,
    txns: u32,
) -> BTreeMap<u64, Vec<(i64, Option<i64>)>> {
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let url = url.to_string();
        let table = table.to_string();
        tasks.push(tokio::spawn(async move {
            let client = connect(&url).await.unwrap();
            let mut committed = Vec::new();
            for i in 0..txns {
                let key = i64::from((i * 7 + s * 3) % 10);
                let value = i64::from(s * 100_000 + i);
                client.batch_execute("BEGIN").await.unwrap();
                let mut writes = Vec::new();
                let deleted = client
                    .execute(&format!("DELETE FROM {table} WHERE id = {} RETURNING id", key + 100), &[])
                    .await;
                if deleted.as_ref().is_ok_and(|n| *n > 0) {
                    writes.push((key + 100, None));
                }
                let upsert = format!(
                    "INSERT INTO {table} (id, v) VALUES ({key}, {value}) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v"
                );
                let ok = deleted.is_ok() && client.batch_execute(&upsert).await.is_ok();
                writes.push((key, Some(value)));
                if ok && i % 5 == 2 {
                    let insert = format!("INSERT INTO {table} (id, v) VALUES ({}, {value}) ON CONFLICT DO NOTHING RETURNING id", key + 100);
                    if client.query(&insert, &[]).await.is_ok_and(|r| !r.is_empty()) {
                        writes.push((key + 100, Some(value)));
                    }
                }
                let xid: i64 = client.query_one("SELECT pg_current_xact_id()::text::bigint", &[]).await.unwrap().get(0);
                if !ok || i % 4 == 3 {
                    client.batch_execute("ROLLBACK").await.unwrap();
                } else if client.batch_execute("COMMIT").await.is_ok() {
                    committed.push((xid as u64, writes));
                }
            }
            committed
        }));
    }
    let mut all = BTreeMap::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

#[test]
fn killing_the_streaming_connection_loses_no_version() {
    kill_the_consumer_while_writers_run(ReplicationMode::Stream);
}

#[test]
fn killing_the_polling_connection_loses_no_version() {
    kill_the_consumer_while_writers_run(ReplicationMode::Poll);
}

fn kill_the_consumer_while_writers_run(mode: ReplicationMode) {
    let Some((url, _pg)) = server() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let table = format!("repl_{mode}_{}", std::process::id());
        let admin = items_table(&url, &table).await;
        let slot = ReplicationSlot::create(&url, &format!("isocert_{table}"), &[&table]).await.unwrap();
        let consumer = slot.mode(mode).start();

        // Kill the consumer's connection a few times while the writers run.
        let done = Arc::new(AtomicBool::new(false));
        let killer = {
            let done = done.clone();
            let url = url.clone();
            let pid = Arc::new(std::sync::Mutex::new(None::<i32>));
            let pid_source = pid.clone();
            (
                tokio::spawn(async move {
                    let admin = connect(&url).await.unwrap();
                    let mut kills = 0;
                    while !done.load(Ordering::SeqCst) && kills < 4 {
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        let current = *pid.lock().unwrap();
                        if let Some(p) = current {
                            let killed: bool = admin
                                .query_one("SELECT pg_terminate_backend($1)", &[&p])
                                .await
                                .unwrap()
                                .get(0);
                            kills += usize::from(killed);
                        }
                    }
                    kills
                }),
                pid_source,
            )
        };
        let writers = tokio::spawn({
            let url = url.clone();
            let table = table.clone();
            async move { run_writers(&url, &table, 4, 150).await }
        });
        while !writers.is_finished() {
            *killer.1.lock().unwrap() = consumer.backend_pid();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let committed = writers.await.unwrap();
        done.store(true, Ordering::SeqCst);
        let mut kills = killer.0.await.unwrap();
        if kills == 0 {
            // The writers outran the killer: kill once now, before the consumer has finished.
            if let Some(p) = consumer.backend_pid() {
                let killed: bool =
                    admin.query_one("SELECT pg_terminate_backend($1)", &[&p]).await.unwrap().get(0);
                kills += usize::from(killed);
            }
        }
        assert!(kills >= 1, "the consumer's connection was never killed");
        // The consumer notices a kill at its next read of the slot; give a loaded machine time.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while consumer.reconnects() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(consumer.reconnects() >= 1, "the consumer never had to reconnect");
        let log = consumer.finish().await.unwrap();

        let logged: BTreeMap<u64, Vec<(i64, Option<i64>)>> = log
            .txns()
            .iter()
            .map(|t| {
                let writes = t
                    .changes
                    .iter()
                    .map(|c| {
                        let Scalar::Int(k) = c.key else { panic!("key {:?}", c.key) };
                        let v = c.row.as_ref().map(|r| match r[1].1 {
                            Scalar::Int(v) => v,
                            ref other => panic!("value {other:?}"),
                        });
                        (k, v)
                    })
                    .collect();
                (t.xid, writes)
            })
            .collect();
        assert!(committed.len() > 300, "only {} committed", committed.len());
        assert_eq!(logged.len(), log.len(), "a transaction was recorded twice");
        assert_eq!(logged, committed, "the log differs from what the writers committed");
        assert!(log.txns().windows(2).all(|w| w[0].commit_lsn < w[1].commit_lsn));

        let left: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
                &[&format!("isocert_{table}")],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(left, 0, "the slot was not dropped");
        admin.batch_execute(&format!("DROP TABLE {table}")).await.unwrap();
    });
}

#[test]
fn the_stream_records_commits_as_they_happen_and_finishes_when_idle() {
    let Some((url, _pg)) = server() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let table = format!("live_{}", std::process::id());
        let admin = items_table(&url, &table).await;

        // Nothing committed: finish returns an empty log (the stream learns it is caught up
        // from the server's keepalive, there is no commit to see).
        let idle = ReplicationSlot::create(&url, &format!("isocert_idle_{table}"), &[&table]).await.unwrap();
        let log =
            tokio::time::timeout(Duration::from_secs(60), idle.start().finish()).await.unwrap().unwrap();
        assert!(log.is_empty(), "{} transactions from an idle table", log.len());

        // Commits are recorded while the consumer runs, before anyone calls finish.
        let slot = ReplicationSlot::create(&url, &format!("isocert_{table}"), &[&table]).await.unwrap();
        let mut consumer = slot.mode(ReplicationMode::Stream).start();
        consumer.wait_started(Duration::from_secs(60)).await.expect("the stream starts");
        for i in 0..20i32 {
            admin.execute(&format!("INSERT INTO {table} (id, v) VALUES ($1, 1)"), &[&i]).await.unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while consumer.recorded() < 20 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(consumer.recorded(), 20, "the stream did not deliver the commits on its own");
        assert_eq!(consumer.reconnects(), 0);
        let log = consumer.finish().await.unwrap();
        let keys: Vec<Scalar> = log.txns().iter().map(|t| t.changes[0].key.clone()).collect();
        assert_eq!(keys, (0..20).map(Scalar::Int).collect::<Vec<_>>());
        admin.batch_execute(&format!("DROP TABLE {table}")).await.unwrap();
    });
}

#[test]
fn a_stream_that_cannot_start_is_reported_before_any_workload_runs() {
    let Some((url, _pg)) = server() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let table = format!("nostart_{}", std::process::id());
        let admin = items_table(&url, &table).await;
        let slot = ReplicationSlot::create(&url, &format!("isocert_{table}"), &[&table]).await.unwrap();
        slot.drop().await.unwrap();
        let mut consumer = slot.mode(ReplicationMode::Stream).start();
        let err =
            tokio::time::timeout(Duration::from_secs(60), consumer.wait_started(Duration::from_secs(30)))
                .await
                .expect("wait_started returns")
                .expect_err("the slot is gone, so the stream cannot start");
        assert!(err.to_string().contains("does not exist"), "{err}");
        admin.batch_execute(&format!("DROP TABLE {table}")).await.unwrap();
    });
}
