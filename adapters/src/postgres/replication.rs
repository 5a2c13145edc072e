//! Logical replication consumed while the workload runs: a pgoutput slot turned into the
//! raw version log that certificate recovery needs.
//!
//! A [`ReplicationSlot`] creates a publication for the workload's tables and a logical slot
//! (create it after the tables are set up and before the first workload transaction). Its
//! [`ReplicationSlot::start`] spawns a consumer in one of two [`ReplicationMode`]s:
//! [`ReplicationMode::Stream`] (the default) receives the changes over the streaming
//! replication protocol as the server decodes them (`replication_stream.rs`);
//! [`ReplicationMode::Poll`] reads the slot through SQL functions every poll interval
//! (`replication_poll.rs`). Either way a transaction is acknowledged to the server only
//! after it is recorded in a [`RawLog`]: a consumer whose connection is killed reconnects
//! and receives again what it had not acknowledged, and the log drops the repeats by commit
//! position, so nothing is lost or doubled. [`ReplicationConsumer::finish`] waits until
//! everything committed so far is recorded, then drops the slot and the publication.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isocert_recovery::{CommittedTxn, RawLog};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::replication_decode::PgOutputDecoder;
use super::replication_poll::poll;
use super::replication_stream::stream;
use super::session::connect;
use super::walsender_wire::lsn_text;
use crate::guard;
use crate::seam::StaleObjects;
use crate::AdapterError;

/// The default shortest time between the starts of two polls while changes keep coming:
/// each poll starts a decoding pass over the slot's retained WAL, so fewer, larger polls
/// cost the server less (docs/PERFORMANCE.md). `finish` cuts the wait short. Only
/// [`ReplicationMode::Poll`] polls.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How many consecutive failed reconnects end the consumer.
const MAX_RECONNECTS: u32 = 50;
/// Pause before a reconnect.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long dropping a slot waits for a walsender that is going away to release it.
const SLOT_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// How the consumer receives the slot's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicationMode {
    /// The streaming replication protocol (`START_REPLICATION ... LOGICAL`): one walsender
    /// decodes each change once, as the WAL is flushed, and pushes it; the consumer
    /// acknowledges with standby status updates. Cheaper for the server.
    #[default]
    Stream,
    /// SQL polling: `pg_logical_slot_peek_binary_changes` every poll interval, then
    /// `pg_replication_slot_advance`. Each poll decodes the retained WAL again; kept for
    /// servers or poolers that refuse replication connections.
    Poll,
}

impl ReplicationMode {
    /// The mode's name as `--replication` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicationMode::Stream => "stream",
            ReplicationMode::Poll => "poll",
        }
    }
}

impl std::str::FromStr for ReplicationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stream" => Ok(ReplicationMode::Stream),
            "poll" => Ok(ReplicationMode::Poll),
            other => Err(format!("unknown replication mode `{other}` (expected stream or poll)")),
        }
    }
}

impl std::fmt::Display for ReplicationMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The column that identifies `table`'s rows: its single-column primary key or, without a
/// primary key, the first column (by position) with a one-column unique index that has no
/// predicate and no expression. Without a primary key, the statement that makes the
/// table's replica identity `FULL` when it is the default (which, without a primary key,
/// would refuse every UPDATE and DELETE on a published table).
async fn key_column(client: &Client, table: &str) -> Result<(String, Option<String>), AdapterError> {
    let rows = client
        .query(
            // The key columns only: a covering index's INCLUDE columns follow them in indkey.
            "SELECT a.attname::text, i.indisprimary, c.relreplident::text FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indrelid \
             JOIN pg_attribute a ON a.attrelid = i.indrelid \
             AND a.attnum = ANY((i.indkey::int2[])[0:i.indnkeyatts - 1]) \
             WHERE i.indrelid = $1::text::regclass AND (i.indisprimary \
               OR (i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL)) \
             ORDER BY i.indisprimary DESC, a.attnum",
            &[&table],
        )
        .await
        .map_err(|e| AdapterError::db(format!("reading the primary key of {table}"), e))?;
    let primary: Vec<&tokio_postgres::Row> = rows.iter().filter(|r| r.get::<_, bool>(1)).collect();
    match (primary.as_slice(), rows.first()) {
        ([pk], _) => Ok((pk.get(0), None)),
        ([], Some(unique)) => {
            let identity: String = unique.get(2);
            let alter = (identity == "d")
                .then(|| format!("ALTER TABLE {} REPLICA IDENTITY FULL", quote_ident(table)));
            Ok((unique.get(0), alter))
        }
        (keys, _) => Err(AdapterError::Protocol {
            message: format!(
                "table {table} needs a single-column primary key or unique index, it has a key of {} columns",
                keys.len()
            ),
        }),
    }
}

/// A publication plus a logical replication slot for a set of tables.
#[derive(Debug, Clone)]
pub struct ReplicationSlot {
    pub(super) url: String,
    pub(super) slot: String,
    pub(super) publication: String,
    primary_keys: Vec<(String, String)>,
    /// Tables whose replica identity the slot set to `FULL` (it was `DEFAULT`), restored
    /// when the slot is dropped: a run never leaves a user's table altered.
    identity_changed: Vec<String>,
    pub(super) poll_interval: Duration,
    mode: ReplicationMode,
}

impl ReplicationSlot {
    /// Creates publication `{name}_pub` for `tables` and the pgoutput slot `name`
    /// (replacing leftovers of an earlier run with the same name).
    ///
    /// # Errors
    /// [`AdapterError::Db`] when the server refuses (e.g. `wal_level` is not `logical`),
    /// [`AdapterError::Protocol`] when a table has no single-column primary key nor, without
    /// one, a single-column unique index (see `key_column`; a table without a primary key
    /// gets `REPLICA IDENTITY FULL`). A partitioned table is published through its root.
    pub async fn create(url: &str, name: &str, tables: &[&str]) -> Result<Self, AdapterError> {
        let client = connect(url).await?;
        let publication = format!("{name}_pub");
        let mut primary_keys = Vec::new();
        let mut partitioned = false;
        let mut identity_changed = Vec::new();
        for table in tables {
            let (key, identity_full) = key_column(&client, table).await?;
            if let Some(alter) = identity_full {
                if let Err(e) = client.batch_execute(&alter).await {
                    restore_identity(&client, &identity_changed).await;
                    return Err(AdapterError::db(alter.clone(), e));
                }
                identity_changed.push(table.to_string());
            }
            let kind = client
                .query_one("SELECT relkind::text FROM pg_class WHERE oid = $1::text::regclass", &[table])
                .await
                .map_err(|e| AdapterError::db(format!("reading the kind of {table}"), e))?;
            partitioned |= kind.get::<_, String>(0) == "p";
            primary_keys.push((table.to_string(), key));
        }
        drop_slot(&client, name, &publication).await?;
        let list = tables.iter().map(|t| quote_ident(t)).collect::<Vec<_>>().join(", ");
        client
            .batch_execute(&format!(
                "CREATE PUBLICATION {} FOR TABLE {list}{}",
                quote_ident(&publication),
                // A partitioned table's changes under its own name, not its partitions'.
                if partitioned { " WITH (publish_via_partition_root = true)" } else { "" }
            ))
            .await
            .map_err(|e| AdapterError::db(format!("creating publication {publication}"), e))?;
        let created =
            client.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&name]).await;
        if let Err(e) = created {
            // No wal_level=logical, or a role without REPLICATION: leave nothing behind.
            let _ = client
                .batch_execute(&format!("DROP PUBLICATION IF EXISTS {}", quote_ident(&publication)))
                .await;
            restore_identity(&client, &identity_changed).await;
            return Err(AdapterError::db(format!("creating replication slot {name}"), e));
        }
        Ok(ReplicationSlot {
            url: url.to_string(),
            slot: name.to_string(),
            publication,
            primary_keys,
            identity_changed,
            poll_interval: DEFAULT_POLL_INTERVAL,
            mode: ReplicationMode::default(),
        })
    }

    /// Chooses how the consumer receives the changes (default [`ReplicationMode::Stream`]).
    pub fn mode(mut self, mode: ReplicationMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the shortest time between two polls while changes keep coming in
    /// [`ReplicationMode::Poll`] (default [`DEFAULT_POLL_INTERVAL`]); longer means less
    /// server work and more lag.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The slot's name.
    pub fn name(&self) -> &str {
        &self.slot
    }

    /// Starts consuming the slot on a tokio task.
    pub fn start(self) -> ReplicationConsumer {
        let shared = Arc::new(Shared::default());
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(consume(self.clone(), shared.clone(), stop_rx));
        ReplicationConsumer { slot: self, shared, stop: stop_tx, task, cleaned: false, position_client: None }
    }

    /// Drops the slot and the publication.
    ///
    /// # Errors
    /// [`AdapterError::Db`] when the server refuses.
    pub async fn drop(&self) -> Result<(), AdapterError> {
        let client = connect(&self.url).await?;
        let dropped = drop_slot(&client, &self.slot, &self.publication).await;
        restore_identity(&client, &self.identity_changed).await;
        dropped
    }
}

/// Sets the replica identity of `tables` back to `DEFAULT` where it is still the `FULL` a
/// slot set (a table dropped since, or altered again by someone else, is left alone). A
/// table another session holds locked is not waited for beyond a few seconds: the failure
/// is logged, naming the statement to run by hand.
async fn restore_identity(client: &Client, tables: &[String]) {
    for table in tables {
        let sql = format!(
            "SET lock_timeout = '5s'; DO $isocert$ BEGIN IF (SELECT relreplident FROM pg_class \
             WHERE oid = to_regclass({lit})) = 'f' THEN ALTER TABLE {ident} REPLICA IDENTITY DEFAULT; END IF; \
             END $isocert$; RESET lock_timeout",
            lit = quote_literal(table),
            ident = quote_ident(table)
        );
        if let Err(e) = client.batch_execute(&sql).await {
            tracing::warn!(
                "could not restore the replica identity of table {table}: {e}; run `ALTER TABLE {} REPLICA \
                 IDENTITY DEFAULT`",
                quote_ident(table)
            );
        }
    }
}

/// A string as an SQL literal (single quotes doubled).
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

async fn drop_slot(client: &Client, slot: &str, publication: &str) -> Result<(), AdapterError> {
    let deadline = Instant::now() + SLOT_RELEASE_WAIT;
    loop {
        let active: Option<i32> = client
            .query_opt("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", &[&slot])
            .await
            .map_err(|e| AdapterError::db(format!("looking up replication slot {slot}"), e))?
            .and_then(|row| row.get(0));
        if let Some(pid) = active {
            let _ = client.execute("SELECT pg_terminate_backend($1)", &[&pid]).await;
        }
        let dropped = client
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await;
        match dropped {
            Ok(_) => break,
            // A walsender that was just told to stop may hold the slot a little longer.
            Err(e) if e.code() == Some(&SqlState::OBJECT_IN_USE) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(AdapterError::db(format!("dropping replication slot {slot}"), e)),
        }
    }
    if publication.is_empty() {
        return Ok(());
    }
    client
        .batch_execute(&format!("DROP PUBLICATION IF EXISTS {}", quote_ident(publication)))
        .await
        .map_err(|e| AdapterError::db(format!("dropping publication {publication}"), e))
}

/// A SQL identifier, double-quoted (slot, publication and table names).
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What the consumer task shares with its handle.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) log: Mutex<RawLog>,
    /// Every transaction committing before this WAL position is in `log`.
    pub(super) covered: AtomicU64,
    /// The position someone waits for (`wait_for`); the stream consumer asks the server
    /// for its position until `covered` reaches it.
    pub(super) wanted: AtomicU64,
    /// Backend pid of the consumer's current connection (0: none).
    pub(super) backend_pid: AtomicI32,
    /// Whether a connection has been fully set up once (streaming started, or the first
    /// poll connection made).
    pub(super) started: AtomicBool,
    reconnects: AtomicU64,
    pub(super) progress: Notify,
    /// Wakes the consumer to read or ask now.
    pub(super) wake: Notify,
}

/// A running consumer of a [`ReplicationSlot`].
#[derive(Debug)]
pub struct ReplicationConsumer {
    slot: ReplicationSlot,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), AdapterError>>,
    /// Whether [`finish`](Self::finish) dropped (or tried to drop) the slot; if not, dropping
    /// the consumer does it.
    cleaned: bool,
    /// The connection [`flushed_position`](Self::flushed_position) keeps.
    position_client: Option<Client>,
}

impl ReplicationConsumer {
    /// How many committed transactions are recorded so far.
    pub fn recorded(&self) -> usize {
        self.shared.log.lock().expect("log lock").len()
    }

    /// The WAL position every transaction that committed before this call ends before
    /// ([`flush_wal`]), read on a connection kept for it: a live run asks at every cut,
    /// and a new connection each time cost 50 to 75 ms (docs/PERFORMANCE.md).
    ///
    /// # Errors
    /// The server's, connecting or reading the position.
    pub async fn flushed_position(&mut self) -> Result<u64, AdapterError> {
        if self.position_client.as_ref().is_none_or(Client::is_closed) {
            self.position_client = Some(connect(&self.slot.url).await?);
        }
        flush_wal(self.position_client.as_ref().expect("connected")).await
    }

    /// The committed transactions recorded from the `from`-th on (a live run's share).
    pub fn committed_since(&self, from: usize) -> Vec<CommittedTxn> {
        self.shared.log.lock().expect("log lock").txns().get(from..).unwrap_or_default().to_vec()
    }

    /// The server pid of the consumer's current connection, if connected (for tests that
    /// kill it with `pg_terminate_backend`).
    pub fn backend_pid(&self) -> Option<i32> {
        Some(self.shared.backend_pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// How many times the consumer had to reconnect.
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::SeqCst)
    }

    /// Waits until the consumer has connected and started reading the slot, so that a
    /// server refusing replication connections (or the slot) is reported before a workload
    /// runs rather than when it is finished.
    ///
    /// # Errors
    /// The consumer's error if it gave up, or [`AdapterError::Protocol`] after `timeout`.
    pub async fn wait_started(&mut self, timeout: Duration) -> Result<(), AdapterError> {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.shared.started.load(Ordering::SeqCst) {
            if self.task.is_finished() {
                return Err(stopped_early(&mut self.task).await);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(AdapterError::Protocol {
                    message: format!("the replication consumer did not connect within {timeout:?}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Waits until every transaction that committed before WAL position `lsn` is recorded.
    ///
    /// # Errors
    /// The consumer's error if it stopped.
    pub async fn wait_for(&mut self, lsn: u64) -> Result<(), AdapterError> {
        self.shared.wanted.fetch_max(lsn, Ordering::SeqCst);
        self.shared.wake.notify_one();
        loop {
            let notified = self.shared.progress.notified();
            if self.shared.covered.load(Ordering::SeqCst) >= lsn {
                return Ok(());
            }
            if self.task.is_finished() {
                return Err(stopped_early(&mut self.task).await);
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
        }
    }

    /// Waits until everything committed so far is recorded, stops the consumer, drops the
    /// slot and the publication, and returns the log.
    ///
    /// # Errors
    /// The consumer's error, or the server's when reading the WAL position or dropping.
    pub async fn finish(mut self) -> Result<RawLog, AdapterError> {
        let client = connect(&self.slot.url).await?;
        let lsn = flush_wal(&client).await?;
        tracing::debug!(lsn = %lsn_text(lsn), "waiting for the replication stream to reach the flushed WAL");
        let waited = self.wait_for(lsn).await;
        let _ = self.stop.send(true);
        // A consumer that stopped early was awaited by `wait_for` already (its error is in
        // `waited`): a join handle must not be polled again after it completed.
        let stopped =
            if waited.is_err() && self.task.is_finished() { Ok(Ok(())) } else { (&mut self.task).await };
        let dropped = drop_slot(&client, &self.slot.slot, &self.slot.publication).await;
        restore_identity(&client, &self.slot.identity_changed).await;
        self.cleaned = true;
        waited?;
        match stopped {
            Ok(result) => result?,
            Err(e) => {
                return Err(AdapterError::Protocol { message: format!("replication consumer panicked: {e}") })
            }
        }
        // The log is complete: failing to drop the slot must not cost the run.
        if let Err(e) = dropped {
            tracing::warn!(
                "could not drop replication slot {} and publication {}: {e}; \
                 `isocert cleanup --db URL` drops them once this process has exited",
                self.slot.slot,
                self.slot.publication
            );
        }
        Ok(std::mem::take(&mut *self.shared.log.lock().expect("log lock")))
    }
}

impl Drop for ReplicationConsumer {
    /// A consumer dropped without [`finish`](ReplicationConsumer::finish) (an error or an
    /// interruption ended the run) still drops its slot and publication, so that no slot
    /// keeps WAL on the user's server: on a thread of its own, since a destructor cannot
    /// await, and waited for, so the process does not exit first.
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let _ = self.stop.send(true);
        self.task.abort();
        let slot = self.slot.clone();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async {
                let client = connect(&slot.url).await.ok()?;
                let dropped = drop_slot(&client, &slot.slot, &slot.publication).await.ok();
                restore_identity(&client, &slot.identity_changed).await;
                dropped
            })
        });
        if cleanup.join().ok().flatten().is_none() {
            tracing::warn!(
                "could not drop replication slot {} and publication {}; `isocert cleanup --db URL` drops them",
                self.slot.slot,
                self.slot.publication
            );
        }
    }
}

/// Replication slots and publications named by isocert runs ([`guard::run_name`]) whose
/// owner is gone, found on the server `url` and dropped; with `other_hosts`, also inactive
/// ones whose owner ran on another host (which this host cannot see). Slots in use (an
/// active walsender) are never dropped. Returns what was dropped, and what was left alone
/// with the reason.
///
/// # Errors
/// [`AdapterError::Db`] when the server refuses to list or drop.
pub async fn drop_stale(url: &str, other_hosts: bool) -> Result<StaleObjects, AdapterError> {
    let client = connect(url).await?;
    let mut found = StaleObjects::default();
    let slots = client
        .query(
            "SELECT slot_name::text, active_pid FROM pg_replication_slots WHERE slot_name LIKE 'isocert\\_run\\_%'",
            &[],
        )
        .await
        .map_err(|e| AdapterError::db("listing replication slots", e))?;
    let publications = client
        .query("SELECT pubname::text FROM pg_publication WHERE pubname LIKE 'isocert\\_run\\_%'", &[])
        .await
        .map_err(|e| AdapterError::db("listing publications", e))?;
    let droppable = |name: &str, found: &mut StaleObjects| -> bool {
        let why_not = match guard::RunName::parse(name).map(|n| n.ownership()) {
            Some(guard::Ownership::Gone) => None,
            Some(guard::Ownership::Alive) => Some("its isocert process is still running"),
            Some(guard::Ownership::OtherHost) | None if other_hosts => None,
            Some(guard::Ownership::OtherHost) => {
                Some("made by isocert on another host (--other-hosts drops it)")
            }
            None => Some("its name does not say which process made it (--other-hosts drops it)"),
        };
        if let Some(reason) = why_not {
            found.left.push(format!("{name}: {reason}"));
        }
        why_not.is_none()
    };
    for row in &slots {
        let name: String = row.get(0);
        if let Some(pid) = row.get::<_, Option<i32>>(1) {
            found.left.push(format!("replication slot {name}: in use by server process {pid}"));
            continue;
        }
        if droppable(&name, &mut found) {
            drop_slot(&client, &name, "").await?;
            found.dropped.push(format!("replication slot {name}"));
        }
    }
    for row in &publications {
        let name: String = row.get(0);
        if droppable(&name, &mut found) {
            client
                .batch_execute(&format!("DROP PUBLICATION IF EXISTS {}", quote_ident(&name)))
                .await
                .map_err(|e| AdapterError::db(format!("dropping publication {name}"), e))?;
            found.dropped.push(format!("publication {name}"));
        }
    }
    Ok(found)
}

/// Why a finished consumer task stopped before it was asked to.
async fn stopped_early(task: &mut JoinHandle<Result<(), AdapterError>>) -> AdapterError {
    match task.await {
        Ok(Ok(())) => AdapterError::Protocol { message: "replication consumer stopped early".into() },
        Ok(Err(e)) => e,
        Err(e) => AdapterError::Protocol { message: format!("replication consumer panicked: {e}") },
    }
}

/// Forces every commit made so far to disk (a synchronous commit flushes all WAL before
/// it, even when the workload commits asynchronously) and returns a WAL position that
/// every transaction committed before the call ends before, and that is flushed.
///
/// The position is the insert position read inside the flushing transaction: a record
/// boundary below that transaction's own commit, so the whole WAL up to it is on disk once
/// the commit returns. (The flushed position itself may lie inside a record a concurrent
/// process is still writing; a walsender cannot decode past such a record, so a stream
/// waiting for that position could wait until the next flush.)
///
/// The transaction must write WAL besides its commit record (here a transactional logical
/// message, which pgoutput does not forward): PostgreSQL commits a transaction that only
/// took an xid asynchronously whatever `synchronous_commit` says.
pub async fn flush_wal(client: &Client) -> Result<u64, AdapterError> {
    let messages = client
        .simple_query(
            "BEGIN; SET LOCAL synchronous_commit = on; \
             SELECT pg_logical_emit_message(true, 'isocert', 'flush'); \
             SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint; COMMIT;",
        )
        .await
        .map_err(|e| AdapterError::db("flushing the WAL", e))?;
    let position = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).and_then(|v| v.parse::<u64>().ok()),
            _ => None,
        })
        .next_back();
    position.ok_or_else(|| AdapterError::Protocol { message: "flushing the WAL: no insert position".into() })
}

async fn consume(
    slot: ReplicationSlot,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), AdapterError> {
    let mut decoder = PgOutputDecoder::new(slot.primary_keys.iter().cloned());
    let mut failures = 0u32;
    // Stream mode: every transaction committing before it is recorded (0: the slot's own
    // confirmed position).
    let mut resume = 0u64;
    while !stop_requested(&stop) {
        let mut connected = false;
        let result = match slot.mode {
            ReplicationMode::Stream => {
                stream(&slot, &mut decoder, &shared, &mut stop, &mut resume, &mut connected).await
            }
            ReplicationMode::Poll => poll(&slot, &mut decoder, &shared, &mut stop, &mut connected).await,
        };
        shared.backend_pid.store(0, Ordering::SeqCst);
        match result {
            Ok(()) => return Ok(()),
            Err(e) if is_transient(&e) => {
                if connected {
                    shared.reconnects.fetch_add(1, Ordering::SeqCst);
                    failures = 0;
                    tracing::warn!("replication connection lost ({e}); reconnecting");
                }
                failures += 1;
                if failures > MAX_RECONNECTS {
                    return Err(e);
                }
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether the consumer was told to stop (or its handle is gone).
pub(super) fn stop_requested(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// Whether an error is a lost or refused connection that a reconnect may cure.
pub(super) fn is_transient(e: &AdapterError) -> bool {
    match e {
        AdapterError::Db { source, .. } => {
            source.is_closed()
                || source.code().is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"))
                || source.as_db_error().is_none()
        }
        AdapterError::Io { .. } => true,
        // 55006: the slot is still held by the walsender of a killed connection.
        AdapterError::Server { code, .. } => {
            code.starts_with("57P") || code.starts_with("08") || code == "55006"
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_names() {
        for mode in [ReplicationMode::Stream, ReplicationMode::Poll] {
            assert_eq!(mode.as_str().parse::<ReplicationMode>(), Ok(mode));
        }
        assert_eq!(ReplicationMode::default(), ReplicationMode::Stream);
        assert!("sql".parse::<ReplicationMode>().unwrap_err().contains("stream or poll"));
    }

    #[test]
    fn lost_connections_are_retried_and_refusals_are_not() {
        let server = |code: &str| AdapterError::Server {
            context: "streaming".into(),
            severity: "FATAL".into(),
            code: code.into(),
            message: String::new(),
        };
        // Terminated by an administrator, connection failure, slot still held by the
        // walsender of a killed connection: reconnect.
        for code in ["57P01", "08006", "55006"] {
            assert!(is_transient(&server(code)), "{code}");
        }
        // Bad password, missing slot, no privilege: report.
        for code in ["28P01", "42704", "42501"] {
            assert!(!is_transient(&server(code)), "{code}");
        }
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(is_transient(&AdapterError::io("reading", reset)));
        assert!(!is_transient(&AdapterError::Protocol { message: "bad message".into() }));
    }
}
