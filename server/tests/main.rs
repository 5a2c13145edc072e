//! Tests of the server's parts that need no database server: the SQLite version store
//! (atomic batches, redelivery, table incarnations, garbage collection), and a live server
//! answering hostile requests (`live`).

mod live;

use std::sync::Arc;

use isocert_adapters::{FeedTxn, TableIncarnation};
use isocert_history::Scalar;
use isocert_recovery::{CommittedTxn, RowChange};
use isocert_server::store::VersionStore;

fn table(id: u64, schema: &str, name: &str) -> TableIncarnation {
    TableIncarnation { id, schema: schema.into(), name: name.into() }
}

fn txn(lsn: u64, changes: &[(&TableIncarnation, i64, Option<i64>)]) -> FeedTxn {
    let (tables, changes) = changes
        .iter()
        .map(|(t, key, value)| {
            let row = value
                .map(|v| vec![(Arc::from("key"), Scalar::Int(*key)), (Arc::from("value"), Scalar::Int(v))]);
            ((*t).clone(), RowChange { table: t.name.clone(), key: Scalar::Int(*key), row })
        })
        .unzip();
    FeedTxn {
        txn: CommittedTxn {
            xid: lsn,
            commit_lsn: lsn,
            end_lsn: lsn + 1,
            commit_time: 0,
            commit_ts: None,
            changes,
        },
        tables,
        truncated: Vec::new(),
    }
}

async fn store(dir: &tempfile::TempDir) -> VersionStore {
    VersionStore::open(&format!("sqlite://{}", dir.path().join("s.sqlite").display()))
        .await
        .expect("store opens")
}

#[tokio::test]
async fn batches_survive_a_reopen_and_redeliveries_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (table(1, "s", "kv"), table(2, "t", "kv"));
    {
        let s = store(&dir).await;
        assert_eq!(s.resume_position().await.unwrap(), None);
        s.store(&[txn(10, &[(&a, 1, Some(5)), (&b, 1, Some(6))]), txn(20, &[(&a, 1, None)])], 21)
            .await
            .unwrap();
    }
    // Reopened (a restart): the position is there, and a redelivered batch adds nothing.
    let s = store(&dir).await;
    assert_eq!(s.resume_position().await.unwrap(), Some(21));
    s.store(&[txn(20, &[(&a, 1, None)]), txn(30, &[(&a, 2, Some(7))])], 31).await.unwrap();
    let log = s.log_for(&[a.id]).await.unwrap();
    let lsns: Vec<u64> = log.txns().iter().map(|t| t.commit_lsn).collect();
    assert_eq!(lsns, [10, 20, 30]);
    // Only the asked table's changes: schema t's row of transaction 10 is not in a's log.
    assert_eq!(log.txns()[0].changes.len(), 1);
    assert_eq!(log.txns()[0].changes[0].row.as_ref().unwrap()[1].1, Scalar::Int(5));
    assert!(log.txns()[1].changes[0].row.is_none(), "a delete stays a delete");
    assert_eq!(s.log_for(&[b.id]).await.unwrap().len(), 1);
    let stats = s.stats().await.unwrap();
    assert_eq!((stats.transactions, stats.changes, stats.tables), (3, 4, 2));
    assert!(stats.bytes > 0, "{stats:?}");
}

#[tokio::test]
async fn incarnations_are_kept_apart_and_collection_marks_their_tables() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let (old, new) = (table(1, "s", "kv"), table(9, "s", "kv"));
    s.store(&[txn(10, &[(&old, 1, Some(1))]), txn(20, &[(&new, 1, Some(2))])], 21).await.unwrap();
    let found = s.incarnations("s", "kv").await.unwrap();
    assert_eq!(found.iter().map(|t| t.table.id).collect::<Vec<_>>(), [9, 1], "newest first");
    assert_eq!(s.schemas_of("kv").await.unwrap(), ["s"]);
    assert!(found.iter().all(|t| !t.collected && !t.truncated));
    // Everything stored before "now + 1 s" goes; both tables are marked.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert_eq!(s.collect_garbage(now + 1).await.unwrap(), 2);
    assert!(s.incarnations("s", "kv").await.unwrap().iter().all(|t| t.collected));
    assert!(s.log_for(&[1, 9]).await.unwrap().is_empty());
    // A truncate marks its table.
    let mut t = txn(30, &[]);
    t.truncated.push(table(5, "s", "items"));
    s.store(&[t], 31).await.unwrap();
    assert!(s.incarnations("s", "items").await.unwrap()[0].truncated);
}

#[tokio::test]
async fn kept_logs_are_extended_with_later_transactions_and_equal_a_fresh_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let (a, b) = (table(1, "s", "kv"), table(2, "s", "other"));
    let cache = isocert_server::logs::LogCache::default();
    s.store(&[txn(10, &[(&a, 1, Some(5)), (&b, 1, Some(6))]), txn(20, &[(&a, 2, Some(7))])], 21)
        .await
        .unwrap();
    let last = s.last_change(&[a.id]).await.unwrap();
    assert_eq!(last, Some(20));
    let first = cache.log(&s, &[a.id], last).await.unwrap();
    assert_eq!(*first, s.log_for(&[a.id]).await.unwrap());
    // Unchanged: the same log, not read again.
    let again = cache.log(&s, &[a.id], last).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    // Later transactions (one on another table only): extended, equal to a fresh read.
    s.store(&[txn(30, &[(&b, 2, Some(8))]), txn(40, &[(&a, 1, None), (&b, 1, None)])], 41).await.unwrap();
    let last = s.last_change(&[a.id]).await.unwrap();
    assert_eq!(last, Some(40));
    let extended = cache.log(&s, &[a.id], last).await.unwrap();
    assert_eq!(*extended, s.log_for(&[a.id]).await.unwrap());
    assert_eq!(extended.txns().iter().map(|t| t.commit_lsn).collect::<Vec<_>>(), [10, 20, 40]);
}
