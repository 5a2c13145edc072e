//! [`MongoDb`]: the seam's [`Database`] for a MongoDB replica set.

use std::io::BufRead;
use std::sync::{Arc, Mutex};

use isocert_history::{Dialect, History};
use isocert_recovery::{
    recover_mongodb, LiveTicks, MongoLiveTicks, RawLog, RawLogError, Recovered, RecoveryError, RowMatcher,
};
use mongodb::bson::{doc, Document};
use mongodb::options::{ChangeStreamPreAndPostImages, ClientOptions};
use mongodb::{Client, Database as MongoDatabase};
use rustc_hash::FxHashMap;

use super::capture::MongoCapture;
use super::session::{db_error, document_row, row_document, MongoSession};
use super::txn_numbers::TxnNumbers;
use crate::seam::{
    redact_url, CaptureOptions, Database, DatabaseKind, DbError, ErrorClass, IsolationLevel,
    NoThrowawayServer, TableSpec,
};
use crate::AdapterError;

/// The database used when the URL names none.
pub const DEFAULT_DATABASE: &str = "isocert";

/// A MongoDB replica set under test (`mongodb://host:27017/DB?replicaSet=rs0`).
#[derive(Clone, Debug)]
pub struct MongoDb {
    url: String,
    client: Arc<tokio::sync::OnceCell<Client>>,
    /// Driver session ids by [`crate::Session::server_id`], for `killSessions`.
    sessions: Arc<Mutex<FxHashMap<u64, Document>>>,
    /// The `txnNumber` each session's commands carried (command monitoring).
    txn_numbers: TxnNumbers,
}

impl MongoDb {
    /// The adapter for a `mongodb://` URL (no connection is made yet).
    ///
    /// # Errors
    /// A URL of another scheme.
    pub fn new(url: &str) -> Result<Self, AdapterError> {
        if !(url.starts_with("mongodb://") || url.starts_with("mongodb+srv://")) {
            return Err(AdapterError::NotSupportedHere {
                message: format!("{} is not a mongodb:// URL", redact_url(url)),
            });
        }
        Ok(MongoDb {
            url: url.to_string(),
            client: Arc::default(),
            sessions: Arc::default(),
            txn_numbers: TxnNumbers::default(),
        })
    }

    /// The connected client; the first call checks that the server is a replica set member
    /// (transactions need one).
    async fn client(&self) -> Result<&Client, DbError> {
        self.client
            .get_or_try_init(|| async {
                let context = format!("connecting to {}", redact_url(&self.url));
                let mut options = ClientOptions::parse(&self.url).await.map_err(|e| db_error(&context, e))?;
                options.command_event_handler = Some(self.txn_numbers.handler());
                let client = Client::with_options(options).map_err(|e| db_error(&context, e))?;
                let hello = client
                    .database("admin")
                    .run_command(doc! { "hello": 1 })
                    .await
                    .map_err(|e| db_error(&context, e))?;
                if hello.get_str("setName").is_err() && hello.get_str("msg") != Ok("isdbgrid") {
                    return Err(DbError::new(
                        ErrorClass::Fatal,
                        None,
                        context,
                        "this MongoDB is a standalone server: multi-document transactions and change streams need \
                         a replica set (start mongod with --replSet rs0, run rs.initiate(), and add \
                         ?replicaSet=rs0 to the URL; `docker compose up -d --wait mongodb` does all three)",
                    ));
                }
                Ok(client)
            })
            .await
    }

    async fn database(&self) -> Result<MongoDatabase, DbError> {
        let client = self.client().await?;
        Ok(client.default_database().unwrap_or_else(|| client.database(DEFAULT_DATABASE)))
    }
}

/// Reads a captured source for `isocert recover`: an oplog dump (lines with `op` and `ts`),
/// change events (lines with `operationType`), or a `raw-log.jsonl`.
///
/// # Errors
/// As the reader of the format found.
pub fn read_mongodb_source(mut input: impl BufRead) -> Result<RawLog, RawLogError> {
    let mut text = String::new();
    input.read_to_string(&mut text)?;
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let json: serde_json::Value = serde_json::from_str(first).unwrap_or(serde_json::Value::Null);
    if json.get("operationType").is_some() {
        isocert_recovery::read_change_stream(text.as_bytes(), None)
    } else if json.get("op").is_some() && json.get("ts").is_some() {
        isocert_recovery::read_oplog(text.as_bytes(), None)
    } else {
        RawLog::read_jsonl(text.as_bytes())
    }
}

impl Database for MongoDb {
    type Session = MongoSession;
    type Capture = MongoCapture;
    type Server = NoThrowawayServer<Self>;

    const KIND: DatabaseKind = DatabaseKind::MongoDb;
    const DIALECT: Dialect = Dialect::Mongodb;
    /// MongoDB transactions have one level, snapshot isolation (read concern snapshot), which
    /// `run` names repeatable read.
    const RUN_LEVELS: &'static [IsolationLevel] = &[IsolationLevel::RepeatableRead];

    fn from_url(url: &str) -> Result<Self, AdapterError> {
        MongoDb::new(url)
    }

    async fn start_server(_settings: &[(String, String)]) -> Result<(Self, Self::Server), AdapterError> {
        NoThrowawayServer::refused(
            "a replica set",
            "mongodb",
            "mongodb://127.0.0.1:27017/isocert?replicaSet=rs0",
        )
    }

    async fn connect(&self) -> Result<MongoSession, DbError> {
        let (session, lsid) = MongoSession::connect(self.database().await?, self.txn_numbers.clone()).await?;
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(crate::Session::server_id(&session), lsid);
        Ok(session)
    }

    async fn prepare_table(&self, table: &TableSpec, rows: &[Vec<i64>]) -> Result<(), DbError> {
        let db = self.database().await?;
        let context = format!("preparing collection {}", table.name);
        db.collection::<Document>(table.name).drop().await.map_err(|e| db_error(&context, e))?;
        // Post-images let update events carry the whole document (MongoDB 6.0+); older
        // servers refuse the option and the capture applies the update descriptions.
        let with_images = db
            .create_collection(table.name)
            .change_stream_pre_and_post_images(ChangeStreamPreAndPostImages::builder().enabled(true).build())
            .await;
        if let Err(e) = with_images {
            tracing::debug!("{context}: without post-images: {e}");
            db.create_collection(table.name).await.map_err(|e| db_error(&context, e))?;
        }
        if !rows.is_empty() {
            let docs: Vec<Document> = rows.iter().map(|r| row_document(table, r, 0)).collect();
            db.collection::<Document>(table.name)
                .insert_many(docs)
                .write_concern(mongodb::options::WriteConcern::majority())
                .await
                .map_err(|e| db_error(&context, e))?;
        }
        Ok(())
    }

    async fn table_exists(&self, table: &TableSpec) -> Result<bool, DbError> {
        let names = self
            .database()
            .await?
            .list_collection_names()
            .filter(doc! { "name": table.name })
            .await
            .map_err(|e| db_error("listing collections", e))?;
        Ok(!names.is_empty())
    }

    async fn drop_table(&self, table: &TableSpec) -> Result<(), DbError> {
        self.database()
            .await?
            .collection::<Document>(table.name)
            .drop()
            .await
            .map_err(|e| db_error(&format!("dropping collection {}", table.name), e))
    }

    async fn read_table(&self, table: &TableSpec) -> Result<Vec<Vec<isocert_history::Scalar>>, DbError> {
        crate::seam::integer_table(table)?;
        let rows: Result<Vec<Vec<i64>>, DbError> = async {
            let context = format!("reading collection {}", table.name);
            let mut cursor = self
                .database()
                .await?
                .collection::<Document>(table.name)
                .find(doc! {})
                .sort(doc! { "_id": 1 })
                .await
                .map_err(|e| db_error(&context, e))?;
            let mut rows = Vec::new();
            while cursor.advance().await.map_err(|e| db_error(&context, e))? {
                let d = cursor.deserialize_current().map_err(|e| db_error(&context, e))?;
                rows.push(document_row(table, &d)?);
            }
            Ok(rows)
        }
        .await;
        Ok(rows?.into_iter().map(crate::seam::int_row).collect())
    }

    async fn kill_session(&self, server_id: u64) -> Result<(), DbError> {
        let lsid = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&server_id).cloned();
        let Some(lsid) = lsid else {
            return Err(DbError::unexpected("killSessions", format!("no session {server_id}")));
        };
        self.client()
            .await?
            .database("admin")
            .run_command(doc! { "killSessions": [lsid] })
            .await
            .map(|_| ())
            .map_err(|e| db_error("killSessions", e))
    }

    async fn start_capture(
        &self,
        table: &TableSpec,
        options: &CaptureOptions,
    ) -> Result<MongoCapture, AdapterError> {
        if let Some(mode) = &options.mode {
            return Err(AdapterError::NotSupportedHere {
                message: format!(
                    "MongoDB's versions come from a change stream; --replication {mode} is PostgreSQL's"
                ),
            });
        }
        MongoCapture::start(self.database().await?, table.name, &options.run_name).await
    }

    fn read_source(input: &mut dyn BufRead) -> Result<RawLog, RawLogError> {
        read_mongodb_source(input)
    }

    /// Cluster times while the run goes: commits from the change stream up to each cut
    /// (a marker document written after the cut), snapshots placed in their brackets by
    /// recovery's rule (`MongoLiveTicks`).
    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        Some(Box::new(MongoLiveTicks::new()))
    }

    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError> {
        recover_mongodb(h, log, matcher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEMS: TableSpec = TableSpec::integers("items", &["id", "c1", "v"]);

    #[test]
    fn rows_and_documents_round_trip_with_the_writer_tag() {
        let d = row_document(&ITEMS, &[3, 4, 500], 77);
        assert_eq!(d, doc! { "_id": 3_i64, "c1": 4_i64, "v": 500_i64, "writer": 77_i64 });
        assert_eq!(document_row(&ITEMS, &d).unwrap(), vec![3, 4, 500]);
        let e = document_row(&ITEMS, &doc! { "_id": 3, "c1": "x", "v": 1 }).unwrap_err().to_string();
        assert!(e.contains("c1"), "{e}");
        assert!(MongoDb::from_url("postgres://h/db").is_err());
    }

    #[test]
    fn recover_sources_are_told_apart_by_their_first_line() {
        let oplog = r#"{"op":"i","ns":"isocert.kv","o":{"_id":1,"value":5,"writer":9},"ts":{"$timestamp":{"t":1700000000,"i":1}}}"#;
        let log = read_mongodb_source(oplog.as_bytes()).unwrap();
        assert_eq!(log.len(), 1);
        let events = r#"{"_id":{"_data":"82"},"operationType":"insert","clusterTime":{"$timestamp":{"t":1700000000,"i":1}},"ns":{"db":"isocert","coll":"kv"},"documentKey":{"_id":1},"fullDocument":{"_id":1,"value":5}}"#;
        assert_eq!(read_mongodb_source(events.as_bytes()).unwrap().len(), 1);
        let mut raw = Vec::new();
        log.write_jsonl(&mut raw).unwrap();
        assert_eq!(read_mongodb_source(raw.as_slice()).unwrap(), log);
    }
}
