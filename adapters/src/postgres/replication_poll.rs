//! [`ReplicationMode::Poll`](super::ReplicationMode::Poll): the slot read through SQL.
//!
//! Each read *peeks* the slot's changes up to the flushed WAL position with
//! `pg_logical_slot_peek_binary_changes`, records the completed transactions, and only then
//! advances the slot with `pg_replication_slot_advance`. Every peek starts a decoding pass
//! over the WAL the slot retains, and the advance decodes again, so fewer, larger reads
//! cost the server less.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::Client;

use super::replication::{stop_requested, ReplicationSlot, Shared};
use super::replication_decode::PgOutputDecoder;
use super::session::connect;
use super::walsender_wire::lsn_text;
use crate::AdapterError;

/// How long the consumer sleeps when the slot had nothing new.
const IDLE_POLL: Duration = Duration::from_millis(20);

/// The WAL position up to which logical decoding can read (WAL flushed to disk).
async fn flushed_wal_lsn(client: &Client) -> Result<u64, AdapterError> {
    let row = client
        .query_one("SELECT (pg_current_wal_flush_lsn() - '0/0')::bigint", &[])
        .await
        .map_err(|e| AdapterError::db("reading the WAL position", e))?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Connects and polls until stopped; `connected` is set once the connection is up.
pub(super) async fn poll(
    slot: &ReplicationSlot,
    decoder: &mut PgOutputDecoder,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
    connected: &mut bool,
) -> Result<(), AdapterError> {
    let client = connect(&slot.url).await?;
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .map_err(|e| AdapterError::db("reading the backend pid", e))?
        .get(0);
    shared.backend_pid.store(pid, Ordering::SeqCst);
    *connected = true;
    shared.started.store(true, Ordering::SeqCst);
    decoder.reset();
    poll_until_stopped(slot, &client, decoder, shared, stop).await
}

async fn poll_until_stopped(
    slot: &ReplicationSlot,
    client: &Client,
    decoder: &mut PgOutputDecoder,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), AdapterError> {
    let peek = client
        .prepare(
            "SELECT data FROM pg_logical_slot_peek_binary_changes($1, $2::text::pg_lsn, NULL, \
             'proto_version', '1', 'publication_names', $3)",
        )
        .await
        .map_err(|e| AdapterError::db("preparing the slot peek", e))?;
    loop {
        let started = Instant::now();
        let stopping = stop_requested(stop);
        let upto = flushed_wal_lsn(client).await?;
        let upto_text = lsn_text(upto);
        let rows = client
            .query(&peek, &[&slot.slot, &upto_text, &slot.publication])
            .await
            .map_err(|e| AdapterError::db(format!("reading replication slot {}", slot.slot), e))?;
        let mut txns = Vec::new();
        let mut acknowledge = None;
        for row in &rows {
            if let Some(txn) = decoder.feed(row.get::<_, &[u8]>(0))? {
                acknowledge = Some(txn.end_lsn);
                // PostgreSQL 15 skips empty transactions; an older server may send them.
                if !txn.changes.is_empty() {
                    txns.push(txn);
                }
            }
        }
        if !txns.is_empty() {
            let mut log = shared.log.lock().expect("log lock");
            for txn in txns {
                log.push(txn);
            }
        }
        // Recorded: now the server may forget them. Acknowledge the end of the last
        // commit, not `upto`: a commit record that straddles the flushed position was not
        // decoded yet, and acknowledging past its start would make the slot skip it.
        if let Some(end) = acknowledge {
            client
                .execute(
                    "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)",
                    &[&slot.slot, &lsn_text(end)],
                )
                .await
                .map_err(|e| AdapterError::db(format!("advancing replication slot {}", slot.slot), e))?;
        }
        // Every commit record that ends at or before `upto` has been decoded and recorded.
        shared.covered.fetch_max(upto, Ordering::SeqCst);
        tracing::debug!(upto = %upto_text, rows = rows.len(), acknowledged = ?acknowledge.map(lsn_text), "polled the slot");
        shared.progress.notify_waiters();
        if stopping {
            return Ok(());
        }
        let pause =
            if rows.is_empty() { IDLE_POLL } else { slot.poll_interval.saturating_sub(started.elapsed()) };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
            _ = shared.wake.notified() => {}
        }
    }
}
