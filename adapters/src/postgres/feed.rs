//! The durable change feed of `isocert serve` on PostgreSQL: a publication `FOR ALL TABLES`
//! and a pgoutput slot of the same name that outlive the process, consumed over the
//! streaming replication protocol into a [`FeedSink`].
//!
//! Each batch of committed transactions is handed to the sink together with the position a
//! restart must continue from, and only after the sink has stored it is that position
//! acknowledged to the server (Standby Status Update). A consumer killed at any moment
//! therefore loses nothing (the slot still holds what was not acknowledged) and a restart
//! may receive again what was stored but not yet acknowledged, which the sink drops by
//! commit position. Coverage for waiters comes from commits and keepalives, and status
//! updates follow the same schedule, as in a run's stream consumer (`standby.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::replication::{is_transient, quote_ident, stop_requested};
use super::replication_decode::PgOutputDecoder;
use super::session::connect;
use super::standby::{Received, StatusSchedule, STATUS_INTERVAL};
use super::walsender::WalSender;
use super::walsender_wire::{lsn_text, StreamMessage};
use crate::seam::{FeedProgress, FeedSink, FeedTxn};
use crate::AdapterError;

/// How often the stored restart position is refreshed when only keepalives arrive.
const STORE_INTERVAL: Duration = STATUS_INTERVAL;
/// Pause between reconnect attempts.
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);

/// Creates publication and slot `name` if missing; returns the slot's confirmed position.
///
/// # Errors
/// [`AdapterError::Db`] when the server refuses (no `wal_level=logical`, a role that may
/// not replicate or create a publication for all tables).
pub(super) async fn open(url: &str, name: &str) -> Result<u64, AdapterError> {
    let client = connect(url).await?;
    let has_publication = client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&name])
        .await
        .map_err(|e| AdapterError::db(format!("looking up publication {name}"), e))?
        .is_some();
    if !has_publication {
        client
            .batch_execute(&format!("CREATE PUBLICATION {} FOR ALL TABLES", quote_ident(name)))
            .await
            .map_err(|e| AdapterError::db(format!("creating publication {name} for all tables"), e))?;
    }
    let confirmed = client
        .query_opt(
            "SELECT (coalesce(confirmed_flush_lsn, restart_lsn) - '0/0')::bigint FROM pg_replication_slots \
             WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| AdapterError::db(format!("looking up replication slot {name}"), e))?;
    if let Some(row) = confirmed {
        return Ok(row.get::<_, Option<i64>>(0).unwrap_or(0) as u64);
    }
    let row = client
        .query_one(
            "SELECT (lsn - '0/0')::bigint FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&name],
        )
        .await
        .map_err(|e| AdapterError::db(format!("creating replication slot {name}"), e))?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Consumes the feed until `stop`, reconnecting after lost connections.
///
/// # Errors
/// The sink's failure, or a refusal a reconnect cannot cure (slot missing, no privilege).
pub(super) async fn run<S: FeedSink>(
    url: &str,
    name: &str,
    mut resume: u64,
    mut sink: S,
    progress: Arc<FeedProgress>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), AdapterError> {
    progress.advance(resume);
    while !stop_requested(&stop) {
        let result = stream(url, name, &mut resume, &mut sink, &progress, &mut stop).await;
        progress.set_connected(false);
        match result {
            Ok(()) => return Ok(()),
            Err(e) if is_transient(&e) => {
                tracing::warn!(feed = name, "change feed connection lost ({e}); reconnecting");
                tokio::select! {
                    _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
                    _ = stop.changed() => {}
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One connection's worth of streaming.
async fn stream<S: FeedSink>(
    url: &str,
    name: &str,
    resume: &mut u64,
    sink: &mut S,
    progress: &FeedProgress,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), AdapterError> {
    let mut conn = WalSender::connect(url).await?;
    let catalog = connect(url).await?;
    let mut decoder = PgOutputDecoder::for_feed();
    conn.start_logical(name, *resume, name).await?;
    progress.set_connected(true);
    tracing::info!(feed = name, from = %lsn_text(*resume), "change feed streaming");
    let mut stored_resume = *resume;
    let mut schedule = StatusSchedule::new();
    let mut next_store = Instant::now();
    let mut batch: Vec<FeedTxn> = Vec::new();
    loop {
        let mut received = Received::default();
        while let Some(message) = conn.next_message()? {
            match message {
                StreamMessage::XLogData { data, .. } => {
                    if let Some((relid, name)) = relation_message(&data) {
                        if let Some(column) = primary_key(&catalog, relid, &name).await? {
                            decoder.set_key_column(relid, column);
                        }
                    }
                    if let Some(txn) = decoder.feed(&data)? {
                        received.commit(txn.end_lsn);
                        let (tables, truncated) = decoder.take_feed_tables();
                        if !txn.changes.is_empty() || !truncated.is_empty() {
                            batch.push(FeedTxn { txn, tables, truncated });
                        }
                    }
                }
                StreamMessage::Keepalive { wal_end, reply_requested } => {
                    received.keepalive(wal_end, reply_requested, decoder.in_transaction());
                }
            }
        }
        let now = Instant::now();
        let target = (*resume).max(received.safe);
        // A position with no transaction to store is stored at most once a second, or at
        // once when the server asks for a reply (a stopping server waits for it).
        if !batch.is_empty() || (target > stored_resume && (received.reply || now >= next_store)) {
            sink.store(std::mem::take(&mut batch), target).await.map_err(|message| {
                AdapterError::Protocol { message: format!("storing the change feed: {message}") }
            })?;
            stored_resume = target;
            next_store = now + STORE_INTERVAL;
        }
        *resume = target;
        // Every transaction received is stored now, so everything committed before the
        // received position is.
        if received.covered > 0 {
            progress.advance(received.covered);
        }
        let behind = progress.wanted() > progress.covered();
        let wake_at = schedule.send_if_due(&mut conn, stored_resume, received.reply, behind).await?;
        if stop_requested(stop) {
            conn.close().await;
            return Ok(());
        }
        tokio::select! {
            received = conn.receive() => received?,
            _ = tokio::time::sleep_until(wake_at) => {}
            _ = stop.changed() => {}
            _ = progress.asked() => {}
        }
    }
}

/// The relation id and `schema.table` of a pgoutput Relation message.
fn relation_message(data: &[u8]) -> Option<(u32, String)> {
    let [b'R', a, b, c, d, rest @ ..] = data else { return None };
    let mut names = rest.splitn(3, |byte| *byte == 0).map(String::from_utf8_lossy);
    let name = format!("{}.{}", names.next()?, names.next()?);
    Some((u32::from_be_bytes([*a, *b, *c, *d]), name))
}

/// The one-column primary key of relation `relid`, from the catalog. `None` when it has
/// none, or the table is already gone (a feed far behind): the decoder then takes the one
/// column the Relation message flags, or the first column of a `REPLICA IDENTITY FULL`
/// table (isocert's workload tables), and skips the table's changes otherwise.
async fn primary_key(
    catalog: &tokio_postgres::Client,
    relid: u32,
    name: &str,
) -> Result<Option<String>, AdapterError> {
    let rows = catalog
        .query(
            "SELECT a.attname::text FROM pg_index i JOIN pg_attribute a \
             ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = $1 AND i.indisprimary",
            &[&relid],
        )
        .await
        .map_err(|e| AdapterError::db(format!("reading the primary key of relation {relid}"), e))?;
    if rows.is_empty() {
        tracing::warn!(
            relid,
            table = name,
            "a changed table is not in the catalog now (dropped already?): its key is taken from the Relation message"
        );
    }
    Ok(match rows.as_slice() {
        [one] => Some(one.get(0)),
        _ => None,
    })
}
