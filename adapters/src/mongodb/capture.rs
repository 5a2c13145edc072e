//! The change capture: a change stream on the database under test, opened before the
//! workload, whose events on the workload's collection are kept as extended JSON lines and
//! read by `isocert_recovery::read_change_stream` when the run ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use isocert_history::History;
use isocert_recovery::RawLog;
use mongodb::bson::{doc, Bson, Document};
use mongodb::change_stream::event::ResumeToken;
use mongodb::change_stream::ChangeStream;
use mongodb::options::FullDocumentType;
use mongodb::Database as MongoDatabase;

use super::session::db_error;
use crate::seam::ChangeCapture;
use crate::AdapterError;

/// The prefix of the collection a capture writes one marker document into when it finishes
/// (`isocert_capture_marker_<run name>`): its change event proves that every earlier commit
/// has been delivered. Created and dropped by the capture (a collection isocert made, so
/// isocert may drop it).
pub const MARKER_PREFIX: &str = "isocert_capture_marker_";

#[derive(Debug, Default)]
struct Shared {
    lines: Vec<String>,
    /// The marker's token once its event arrived.
    marker_seen: Option<String>,
    error: Option<String>,
}

/// A running change stream on one database, keeping the events of one collection.
#[derive(Debug)]
pub struct MongoCapture {
    db: MongoDatabase,
    database: String,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
    run_name: String,
}

impl MongoCapture {
    /// Opens the change stream (events carry the post-image when the collection records
    /// them, `fullDocument: whenAvailable`) and starts consuming it.
    pub(crate) async fn start(
        db: MongoDatabase,
        collection: &str,
        run_name: &str,
    ) -> Result<Self, AdapterError> {
        let marker = format!("{MARKER_PREFIX}{run_name}");
        let stream = open(&db, collection, &marker, None).await?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let task = tokio::spawn(consume(
            db.clone(),
            stream,
            collection.to_string(),
            run_name.to_string(),
            shared.clone(),
        ));
        Ok(MongoCapture { database: db.name().to_string(), db, shared, task, run_name: run_name.to_string() })
    }
}

/// Opens the change stream on `collection` and the marker collection, after `resume` when
/// given (a reconnect: events already kept may come again; the reader drops them by token).
async fn open(
    db: &MongoDatabase,
    collection: &str,
    marker: &str,
    resume: Option<ResumeToken>,
) -> Result<ChangeStream<Document>, AdapterError> {
    let pipeline = [doc! { "$match": { "ns.coll": { "$in": [collection, marker] } } }];
    Ok(db
        .watch()
        .pipeline(pipeline)
        .full_document(FullDocumentType::WhenAvailable)
        .resume_after(resume)
        .await
        .map_err(|e| AdapterError::from(db_error("opening a change stream", e)))?
        .with_type::<Document>())
}

/// How many times a failed stream is reopened from its last resume token (the driver
/// already resumes once by itself on a resumable error).
const REOPENS: u32 = 5;

async fn consume(
    db: MongoDatabase,
    mut stream: ChangeStream<Document>,
    collection: String,
    run_name: String,
    shared: Arc<Mutex<Shared>>,
) {
    let marker = format!("{MARKER_PREFIX}{run_name}");
    let mut reopens = 0;
    loop {
        let next = stream.next_if_any().await;
        match next {
            Ok(Some(event)) => {
                let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                let coll = event.get_document("ns").ok().and_then(|ns| ns.get_str("coll").ok()).unwrap_or("");
                if coll == collection {
                    s.lines.push(Bson::Document(event).into_relaxed_extjson().to_string());
                } else if event.get_document("fullDocument").ok().and_then(|d| d.get_str("_id").ok())
                    == Some(&run_name)
                {
                    s.marker_seen = Some(run_name.clone());
                }
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) if reopens < REOPENS => {
                reopens += 1;
                tracing::warn!("the change stream failed ({e}); reopening it from its last resume token");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(reopens))).await;
                match open(&db, &collection, &marker, stream.resume_token()).await {
                    Ok(s) => stream = s,
                    Err(e) => tracing::warn!("reopening the change stream: {e}"),
                }
            }
            Err(e) => {
                shared.lock().unwrap_or_else(|p| p.into_inner()).error = Some(e.to_string());
                return;
            }
        }
    }
}

impl ChangeCapture for MongoCapture {
    async fn wait_started(&mut self, _timeout: Duration) -> Result<(), AdapterError> {
        // The stream was opened before `start` returned: every later commit is in it.
        Ok(())
    }

    fn recorded(&self) -> usize {
        self.shared.lock().map(|s| s.lines.len()).unwrap_or(0)
    }

    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        let name = format!("{MARKER_PREFIX}{}", self.run_name);
        let marker = self.db.collection::<Document>(&name);
        let written = marker
            .insert_one(doc! { "_id": &self.run_name })
            .await
            .map_err(|e| AdapterError::from(db_error("writing the capture's marker", e)));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let outcome = loop {
            if let Err(e) = &written {
                break Err(AdapterError::Protocol { message: e.to_string() });
            }
            {
                let s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(e) = &s.error {
                    break Err(AdapterError::Protocol { message: format!("the change stream failed: {e}") });
                }
                if s.marker_seen.is_some() {
                    break Ok(s.lines.join("\n"));
                }
            }
            if tokio::time::Instant::now() > deadline {
                break Err(AdapterError::Protocol {
                    message: "the change stream did not deliver the capture's marker within 60 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        self.task.abort();
        if let Err(e) = marker.drop().await {
            tracing::warn!("dropping {name}: {e}");
        }
        let text = outcome?;
        isocert_recovery::read_change_stream(text.as_bytes(), Some(&self.database)).map_err(|e| {
            AdapterError::Protocol { message: format!("reading the captured change events: {e}") }
        })
    }
}
