//! Pins down a PostgreSQL behaviour the recorded histories expose (docs/POSTGRES.md, "Two
//! versions of one row"): a REPEATABLE READ or SERIALIZABLE transaction that inserts a key
//! whose row a concurrent transaction deleted after its snapshot then reads two rows for
//! that key, and commits. If PostgreSQL changes, the docs and the client's handling change.

use isocert_adapters::postgres::connect;

use crate::support::fresh_database;

async fn two_versions_at(url: &str, level: &str) -> (usize, bool) {
    let t = connect(url).await.unwrap();
    let other = connect(url).await.unwrap();
    t.batch_execute("DROP TABLE IF EXISTS dk; CREATE TABLE dk (key integer PRIMARY KEY, value integer); INSERT INTO dk VALUES (5, 0)")
        .await
        .unwrap();
    t.batch_execute(&format!("BEGIN ISOLATION LEVEL {level}")).await.unwrap();
    t.query("SELECT value FROM dk WHERE key = 4", &[]).await.unwrap();
    other.execute("DELETE FROM dk WHERE key = 5", &[]).await.unwrap();
    t.execute("INSERT INTO dk VALUES (5, 1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", &[])
        .await
        .unwrap();
    let rows = t.query("SELECT value FROM dk WHERE key = 5", &[]).await.unwrap().len();
    let committed = t.batch_execute("COMMIT").await.is_ok();
    (rows, committed)
}

#[test]
fn insert_after_concurrent_delete_shows_two_versions_of_the_row() {
    if !crate::support::pg_available() {
        return;
    }
    let db = fresh_database("wl_pg_two_versions");
    let url = &db.url;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        assert_eq!(two_versions_at(url, "REPEATABLE READ").await, (2, true));
        assert_eq!(two_versions_at(url, "SERIALIZABLE").await, (2, true));
        assert_eq!(two_versions_at(url, "READ COMMITTED").await, (1, true));
    });
}
