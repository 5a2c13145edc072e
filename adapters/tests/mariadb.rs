//! MariaDB's binary-log capture records every committed transaction of the workload's table
//! exactly once and in commit order, also when its dump connection is killed mid-run
//! (`KILL` of the dump thread), and the embedded server goes away with its directory.

use std::collections::BTreeMap;
use std::time::Duration;

use isocert_adapters::{CaptureOptions, ChangeCapture, Database, EmbeddedMariaDb, MariaDb, TableSpec};
use isocert_history::Scalar;
use mysql_async::prelude::Queryable;

const ITEMS: TableSpec = TableSpec::integers("items", &["id", "v"]);

/// `sessions` writers of `txns` transactions each, every one updating two rows with fresh
/// values; returns the final value written per row.
async fn run_writers(url: &str, sessions: i64, txns: i64) -> BTreeMap<i64, i64> {
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let url = url.to_string();
        tasks.push(tokio::spawn(async move {
            let mut conn = mysql_async::Conn::from_url(url.as_str()).await.unwrap();
            for i in 0..txns {
                let v = s * 1_000_000 + i + 1;
                conn.query_drop("START TRANSACTION").await.unwrap();
                conn.query_drop(format!("UPDATE items SET v = {v} WHERE id = {s}")).await.unwrap();
                conn.query_drop(format!(
                    "INSERT INTO items VALUES ({}, {v}) ON DUPLICATE KEY UPDATE v = {v}",
                    100 + s
                ))
                .await
                .unwrap();
                conn.query_drop("COMMIT").await.unwrap();
            }
            (s, s * 1_000_000 + txns)
        }));
    }
    let mut last = BTreeMap::new();
    for t in tasks {
        let (s, v) = t.await.unwrap();
        last.insert(s, v);
    }
    last
}

#[test]
fn killing_the_dump_connection_loses_and_doubles_nothing() {
    if !isocert_testsupport::MARIADB.embedded(EmbeddedMariaDb::is_installed()) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (db, server) = MariaDb::start_server(&[]).await.expect("embedded MariaDB starts");
        let dir = server.data_dir();
        let rows: Vec<Vec<i64>> = (0..4).map(|s| vec![s, 0]).collect();
        db.prepare_table(&ITEMS, &rows).await.unwrap();
        let options =
            CaptureOptions { run_name: "test".into(), mode: None, poll_interval: Duration::from_millis(100) };
        let mut capture = db.start_capture(&ITEMS, &options).await.unwrap();
        capture.wait_started(Duration::from_secs(30)).await.unwrap();

        let writers = tokio::spawn({
            let url = db.url().to_string();
            async move { run_writers(&url, 4, 150).await }
        });
        let mut admin = mysql_async::Conn::from_url(db.url()).await.unwrap();
        let mut kills = 0;
        while !writers.is_finished() || kills == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if kills < 3 {
                if let Some(thread) = capture.dump_thread() {
                    if admin.query_drop(format!("KILL {thread}")).await.is_ok() {
                        kills += 1;
                    }
                }
            }
        }
        let last = writers.await.unwrap();
        let log = capture.finish(None).await.unwrap();
        assert!(kills >= 1, "the dump connection was never killed");
        assert_eq!(log.len(), 4 * 150, "every transaction once (killed {kills} times)");
        let seqs: Vec<u64> = log.txns().iter().map(|t| t.xid).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "commit order, no repeats");
        for (s, v) in last {
            let final_row = log
                .txns()
                .iter()
                .flat_map(|t| &t.changes)
                .rfind(|c| c.key == Scalar::Int(s))
                .and_then(|c| c.row.clone())
                .expect("row changes logged");
            assert!(final_row.contains(&("v".into(), Scalar::Int(v))), "{final_row:?}");
        }
        admin.disconnect().await.unwrap();
        drop(db);
        server.shutdown_async().await.unwrap();
        assert!(!dir.exists(), "the server's directory is removed");
    });
}

/// Regression: throwaway servers sharing `/tmp` collided on MariaDB's internal temporary
/// tables while installing their system tables (about one `mariadb-install-db` in three
/// failed with "Unknown table 'mysql.tmp_user_…'" when six ran at once). Each server now has
/// its own `--tmpdir`, so six started at once all come up and all go away.
#[test]
fn six_servers_started_at_once_all_start() {
    if !isocert_testsupport::MARIADB.embedded(EmbeddedMariaDb::is_installed()) {
        return;
    }
    let starts: Vec<_> = (0..6).map(|_| std::thread::spawn(|| EmbeddedMariaDb::start(&[]))).collect();
    let servers: Vec<EmbeddedMariaDb> = starts
        .into_iter()
        .map(|start| {
            start.join().expect("start thread").unwrap_or_else(|e| panic!("a server did not start: {e}"))
        })
        .collect();
    let roots: Vec<_> = servers.iter().map(|s| s.data_dir().parent().unwrap().to_path_buf()).collect();
    for server in servers {
        server.shutdown().expect("clean shutdown");
    }
    for root in roots {
        assert!(!root.exists(), "{} left behind", root.display());
    }
}
