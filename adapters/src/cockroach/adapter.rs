//! [`CockroachDb`]: the seam's [`Database`] for CockroachDB.

use isocert_history::{Dialect, History};
use isocert_recovery::{
    cockroach_timestamps, recover_cockroach, LiveTicks, RawLog, RawLogError, RecordedLiveTicks, Recovered,
    RecoveryError, RowMatcher,
};
use tokio_postgres::Client;

use super::capture::{now, ChangefeedCapture};
use super::changefeed::read_capture;
use super::session::{classify, ident, CrdbSession};
use super::tls;
use super::url::CockroachUrl;
use crate::postgres::query_with;
use crate::seam::{CaptureOptions, Database, DatabaseKind, DbError, NoThrowawayServer, TableSpec};
use crate::AdapterError;

/// Rows per `INSERT` when loading the table.
const INSERT_BATCH: usize = 500;

/// A CockroachDB cluster under test, reached over pgwire.
#[derive(Clone, Debug)]
pub struct CockroachDb {
    url: CockroachUrl,
}

impl CockroachDb {
    /// The adapter for a `cockroachdb://` URL (docs/COCKROACHDB.md lists its parameters).
    ///
    /// # Errors
    /// A URL [`CockroachUrl::parse`] refuses.
    pub fn new(url: &str) -> Result<Self, AdapterError> {
        Ok(CockroachDb { url: CockroachUrl::parse(url)? })
    }

    /// The parsed URL.
    pub fn url(&self) -> &CockroachUrl {
        &self.url
    }

    async fn admin(&self) -> Result<Client, DbError> {
        tls::connect(&self.url, classify).await
    }
}

/// `CREATE TABLE` column definitions: every column `INT8 NOT NULL`, the first the key.
pub(crate) fn definition(table: &TableSpec) -> String {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                format!("{} INT8 NOT NULL PRIMARY KEY", ident(c))
            } else {
                format!("{} INT8 NOT NULL", ident(c))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl CockroachDb {
    /// Reads a captured changefeed file (docs/COCKROACHDB.md: one changefeed row per line)
    /// or a `raw-log.jsonl` that `isocert run` saved, telling them apart by the first line.
    ///
    /// # Errors
    /// A malformed line, naming it; a feed whose resolved timestamps never pass its last
    /// change (the capture stopped too early: the certificate would be incomplete).
    pub fn read_capture_file(input: &mut dyn std::io::BufRead) -> Result<RawLog, RawLogError> {
        let mut text = String::new();
        std::io::Read::read_to_string(input, &mut text)?;
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
        let is_raw_log = serde_json::from_str::<serde_json::Value>(first)
            .ok()
            .is_some_and(|v| v.get("commit_lsn").is_some());
        if is_raw_log {
            return RawLog::read_jsonl(text.as_bytes());
        }
        let feed = read_capture(text.as_bytes())?;
        if !feed.is_complete() {
            return Err(RawLogError::Line {
                line: text.lines().count(),
                field: "resolved".into(),
                message: format!(
                    "the captured changefeed's last change is at {} but its resolved timestamps reach only {}: \
                     capture until a resolved timestamp passes the last commit",
                    feed.last_commit().map_or("-".into(), |t| t.to_string()),
                    feed.watermark().map_or("none".into(), |t| t.to_string())
                ),
            });
        }
        Ok(feed.to_raw_log())
    }
}

impl Database for CockroachDb {
    type Session = CrdbSession;
    type Capture = ChangefeedCapture;
    type Server = NoThrowawayServer<Self>;

    const KIND: DatabaseKind = DatabaseKind::CockroachDb;
    const DIALECT: Dialect = Dialect::Postgres;
    const ONE_CHANGE_PER_ROW: bool = true;

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        CockroachDb::new(url)
    }

    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, Self::Server), AdapterError> {
        NoThrowawayServer::refused(
            "one",
            "cockroachdb",
            "'cockroachdb://root@127.0.0.1:26257/defaultdb?sslmode=disable'",
        )
    }

    async fn connect(&self) -> Result<CrdbSession, DbError> {
        CrdbSession::connect(&self.url).await
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let client = self.admin().await?;
        let t = ident(table.name);
        let create = format!("DROP TABLE IF EXISTS {t}; CREATE TABLE {t} ({})", definition(table));
        query_with(&client, &create, classify).await?;
        let cols: Vec<String> = table.columns.iter().map(|c| ident(c)).collect();
        for batch in rows.chunks(INSERT_BATCH) {
            let values: Vec<String> = batch
                .iter()
                .map(|r| format!("({})", r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))
                .collect();
            let sql = format!("INSERT INTO {t} ({}) VALUES {}", cols.join(", "), values.join(", "));
            query_with(&client, &sql, classify).await?;
        }
        Ok(())
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        let client = self.admin().await?;
        let sql = format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() \
             AND table_name = '{}'",
            table.name.replace('\'', "''")
        );
        let rows = query_with(&client, &sql, classify).await?;
        Ok(rows.first().and_then(|r| r.get(0)).is_some_and(|n| n != "0"))
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        let client = self.admin().await?;
        query_with(&client, &format!("DROP TABLE IF EXISTS {}", ident(table.name)), classify)
            .await
            .map(|_| ())
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<isocert_history::Scalar>>, DbError> {
        crate::seam::integer_table(table)?;
        let rows: Result<Vec<Vec<i64>>, DbError> = async {
            let client = self.admin().await?;
            let cols: Vec<String> = table.columns.iter().map(|c| ident(c)).collect();
            let sql = format!("SELECT {} FROM {} ORDER BY 1", cols.join(", "), ident(table.name));
            query_with(&client, &sql, classify)
                .await?
                .iter()
                .map(|r| {
                    (0..table.columns.len())
                        .map(|i| r.get(i).and_then(|t| t.parse().ok()))
                        .collect::<Option<Vec<i64>>>()
                        .ok_or_else(|| DbError::unexpected(&sql, "a row with a NULL or non-integer column"))
                })
                .collect()
        }
        .await;
        Ok(rows?.into_iter().map(crate::seam::int_row).collect())
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        let client = self.admin().await?;
        let sql = format!(
            "CANCEL SESSIONS IF EXISTS SELECT session_id FROM [SHOW CLUSTER SESSIONS] \
             WHERE right(session_id, 16) = '{server_id:016x}'"
        );
        query_with(&client, &sql, classify).await.map(|_| ())
    }

    async fn start_capture(
        &self,
        table: &TableSpec,
        options: &CaptureOptions,
    ) -> Result<ChangefeedCapture, AdapterError> {
        match options.mode.as_deref() {
            None | Some("sinkless") => {
                // Everything committed by now (the loaded table) is the initial state.
                let cursor = now(&self.url).await?;
                Ok(ChangefeedCapture::start(&self.url, table, cursor))
            }
            #[cfg(feature = "kafka")]
            Some(kafka) if kafka.starts_with("kafka://") => {
                let target = super::kafka::KafkaTarget::parse(kafka)?;
                let cursor = now(&self.url).await?;
                Ok(ChangefeedCapture::start_kafka(&self.url, table, cursor, target))
            }
            #[cfg(not(feature = "kafka"))]
            Some(kafka) if kafka.starts_with("kafka://") => Err(AdapterError::NotSupportedHere {
                message: "this isocert was built without the Kafka sink: build it with `--features kafka` \
                          (librdkafka is compiled from source; it needs make and a C compiler)"
                    .into(),
            }),
            Some(other) => Err(AdapterError::NotSupportedHere {
                message: format!(
                    "CockroachDB's versions come from a changefeed, sinkless or --changefeed kafka://BROKER/PREFIX; \
                     --replication {other} is PostgreSQL's"
                ),
            }),
        }
    }

    fn read_source(input: &mut dyn std::io::BufRead) -> Result<RawLog, RawLogError> {
        CockroachDb::read_capture_file(input)
    }

    /// At SERIALIZABLE, the commit timestamp each session read before COMMIT (the
    /// changefeed is matched by it, so recovery keeps it), the snapshot just below it. A
    /// transaction below SERIALIZABLE, or one starting below the watermark already sent
    /// (an HLC on another node, within the clock offset), stops live publishing; the rest
    /// is published after recovery.
    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(RecordedLiveTicks::commit_ordered(cockroach_timestamps)))
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_cockroach(h, log, matcher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_int8_with_the_key_first_and_captured_files_are_told_apart() {
        let items = TableSpec::integers("items", &["id", "c1", "v"]);
        assert_eq!(
            definition(&items),
            "\"id\" INT8 NOT NULL PRIMARY KEY, \"c1\" INT8 NOT NULL, \"v\" INT8 NOT NULL"
        );
        assert!(CockroachDb::from_url("postgres://h/db").is_err());
        let raw =
            r#"{"xid":0,"commit_lsn":1,"end_lsn":1,"commit_time":5,"commit_ts":"5.0000000001","changes":[]}"#;
        let log = CockroachDb::read_capture_file(&mut raw.as_bytes()).unwrap();
        assert_eq!(log.txns()[0].commit_ts, Some(isocert_history::Timestamp::hlc(5, 1)));
        let feed = "{\"table\":\"items\",\"key\":[1],\"value\":{\"after\":{\"id\":1,\"v\":3},\"updated\":\"9.0000000000\"}}\n";
        let e = CockroachDb::read_capture_file(&mut feed.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("resolved timestamps reach only none"), "{e}");
        let complete = format!("{feed}{{\"resolved\":\"9.0000000000\"}}\n");
        assert_eq!(CockroachDb::read_capture_file(&mut complete.as_bytes()).unwrap().len(), 1);
        let e = CockroachDb::read_capture_file(&mut &b"{\"table\":\"items\"}\n"[..]).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}
