//! [`ReplicationMode::Stream`](super::ReplicationMode::Stream): the slot read through the
//! streaming replication protocol.
//!
//! One walsender decodes the WAL once, as it is flushed, and pushes the pgoutput messages
//! as XLogData; the consumer feeds them to the same [`PgOutputDecoder`] as the poll mode,
//! records each completed transaction in the raw log, and only then acknowledges it
//! (Standby Status Update, flush position = end of the last recorded commit). A reconnect
//! restarts from the recorded position, and the log drops repeats by commit position.
//!
//! Coverage (what [`ReplicationConsumer::wait_for`](super::ReplicationConsumer::wait_for)
//! waits on) comes from two facts: transactions arrive in commit order, so after a Commit
//! ending at `E` every commit before `E` is recorded; and a primary keepalive carries the
//! walsender's sent position `P`, up to which every record has been decoded and its output
//! sent before the keepalive, so every commit before `P` is recorded. While someone waits
//! for a position not yet covered, the consumer asks the server for keepalives.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::replication::{stop_requested, ReplicationSlot, Shared};
use super::replication_decode::PgOutputDecoder;
use super::walsender::WalSender;
use super::walsender_wire::{lsn_text, StreamMessage};
use crate::AdapterError;

/// How often the consumer reports its recorded position when the server does not ask.
const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// How often the consumer asks for a keepalive while a waited-for position is not covered.
const PING_INTERVAL: Duration = Duration::from_millis(20);

/// Connects, streams from `*resume` until stopped, and keeps `*resume` at the position up
/// to which every transaction is recorded (where a reconnect starts). `connected` is set
/// once the stream has started.
pub(super) async fn stream(
    slot: &ReplicationSlot,
    decoder: &mut PgOutputDecoder,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
    resume: &mut u64,
    connected: &mut bool,
) -> Result<(), AdapterError> {
    let mut conn = WalSender::connect(&slot.url).await?;
    shared.backend_pid.store(conn.backend_pid(), Ordering::SeqCst);
    decoder.reset();
    conn.start_logical(&slot.slot, *resume, &slot.publication).await?;
    // Only now: a slot still held by another process (55006) is a failed attempt.
    *connected = true;
    shared.started.store(true, Ordering::SeqCst);
    tracing::debug!(slot = %slot.slot, from = %lsn_text(*resume), pid = conn.backend_pid(), "streaming");
    let mut next_status = Instant::now();
    let mut next_ping = Instant::now();
    let mut txns = Vec::new();
    loop {
        let mut reply = false;
        // Every commit before `covered` has been received; every commit before `safe`
        // too, and `safe` is a transaction boundary (a restart point).
        let mut covered = 0;
        let mut safe = 0;
        while let Some(message) = conn.next_message()? {
            match message {
                StreamMessage::XLogData { data, .. } => {
                    if let Some(txn) = decoder.feed(&data)? {
                        covered = covered.max(txn.end_lsn);
                        safe = safe.max(txn.end_lsn);
                        // PostgreSQL 15 skips empty transactions; an older server may send them.
                        if !txn.changes.is_empty() {
                            txns.push(txn);
                        }
                    }
                }
                StreamMessage::Keepalive { wal_end, reply_requested } => {
                    covered = covered.max(wal_end);
                    // Inside a transaction the keepalive position precedes its commit,
                    // which a restart from there would not skip; stay with the boundary.
                    if !decoder.in_transaction() {
                        safe = safe.max(wal_end);
                    }
                    reply |= reply_requested;
                }
            }
        }
        if !txns.is_empty() {
            let mut log = shared.log.lock().expect("log lock");
            for txn in txns.drain(..) {
                log.push(txn);
            }
        }
        // Recorded: the server may now forget them.
        *resume = (*resume).max(safe);
        if covered > 0 {
            shared.covered.fetch_max(covered, Ordering::SeqCst);
            shared.progress.notify_waiters();
        }
        let now = Instant::now();
        let behind = shared.wanted.load(Ordering::SeqCst) > shared.covered.load(Ordering::SeqCst);
        let ping = behind && now >= next_ping;
        if reply || ping || now >= next_status {
            conn.send_status(*resume, ping).await?;
            next_status = now + STATUS_INTERVAL;
            if ping {
                next_ping = now + PING_INTERVAL;
            }
        }
        if stop_requested(stop) {
            conn.close().await;
            return Ok(());
        }
        let wake_at = if behind { next_status.min(next_ping) } else { next_status };
        tokio::select! {
            received = conn.receive() => received?,
            _ = tokio::time::sleep_until(wake_at) => {}
            _ = stop.changed() => {}
            _ = shared.wake.notified() => {}
        }
    }
}
