//! The change capture: a change stream on the database under test, opened before the
//! workload, whose events on the workload's collection are kept as extended JSON lines and
//! read by `isocert_recovery::read_change_stream` when the run ends, or batch by batch
//! (`isocert_recovery::ChangeStreamReader`) at each cut of a live run.

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
    /// The `_id` of the last marker document whose event arrived, and how many lines had
    /// arrived before it (every commit before the marker's write).
    marker_seen: Option<(String, usize)>,
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
    /// Markers written for cuts so far ([`ChangeCapture::take_committed`]).
    cuts: u64,
    /// Lines handed out by earlier cuts, and the reader that read them.
    taken: usize,
    reader: isocert_recovery::ChangeStreamReader,
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
        let database = db.name().to_string();
        Ok(MongoCapture {
            reader: isocert_recovery::ChangeStreamReader::new(Some(&database)),
            database,
            db,
            shared,
            task,
            run_name: run_name.to_string(),
            cuts: 0,
            taken: 0,
        })
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
                } else if let Some(id) =
                    event.get_document("fullDocument").ok().and_then(|d| d.get_str("_id").ok())
                {
                    s.marker_seen = Some((id.to_string(), s.lines.len()));
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

    async fn take_committed(&mut self) -> Result<Vec<isocert_recovery::CommittedTxn>, AdapterError> {
        self.cuts += 1;
        let id = format!("{}#{}", self.run_name, self.cuts);
        let upto = self.marker_passed(&id).await?;
        let text = {
            let s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            s.lines[self.taken..upto].join("\n")
        };
        self.taken = upto;
        self.reader.read_batch(text.as_bytes()).map_err(|e| AdapterError::Protocol {
            message: format!("reading the captured change events: {e}"),
        })
    }

    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        let outcome = self.marker_passed(&self.run_name.clone()).await;
        self.task.abort();
        let name = format!("{MARKER_PREFIX}{}", self.run_name);
        if let Err(e) = self.db.collection::<Document>(&name).drop().await {
            tracing::warn!("dropping {name}: {e}");
        }
        let upto = outcome?;
        let text = self.shared.lock().unwrap_or_else(|p| p.into_inner()).lines[..upto].join("\n");
        isocert_recovery::read_change_stream(text.as_bytes(), Some(&self.database)).map_err(|e| {
            AdapterError::Protocol { message: format!("reading the captured change events: {e}") }
        })
    }
}

impl MongoCapture {
    /// Writes marker document `id` and waits (60 s at most) until its change event has
    /// arrived; returns how many events of the workload's collection arrived before it:
    /// every commit before the write.
    async fn marker_passed(&self, id: &str) -> Result<usize, AdapterError> {
        let name = format!("{MARKER_PREFIX}{}", self.run_name);
        self.db.collection::<Document>(&name).insert_one(doc! { "_id": id }).await.map_err(|e| {
            AdapterError::Protocol { message: db_error("writing the capture's marker", e).to_string() }
        })?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            {
                let s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(e) = &s.error {
                    return Err(AdapterError::Protocol { message: format!("the change stream failed: {e}") });
                }
                if let Some((seen, upto)) = &s.marker_seen {
                    if seen == id {
                        return Ok(*upto);
                    }
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(AdapterError::Protocol {
                    message: "the change stream did not deliver the capture's marker within 60 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
