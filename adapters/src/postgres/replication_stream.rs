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
//! waits on) comes from commits and keepalives ([`Received`]); while someone waits for a
//! position not yet covered, the consumer asks the server for keepalives
//! ([`StatusSchedule`]).

use std::sync::atomic::Ordering;

use tokio::sync::watch;

use super::replication::{stop_requested, ReplicationSlot, Shared};
use super::replication_decode::PgOutputDecoder;
use super::standby::{Received, StatusSchedule};
use super::walsender::WalSender;
use super::walsender_wire::{lsn_text, StreamMessage};
use crate::AdapterError;

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
    let mut schedule = StatusSchedule::new();
    let mut txns = Vec::new();
    loop {
        let mut received = Received::default();
        while let Some(message) = conn.next_message()? {
            match message {
                StreamMessage::XLogData { data, .. } => {
                    if let Some(txn) = decoder.feed(&data)? {
                        received.commit(txn.end_lsn);
                        // PostgreSQL 15 skips empty transactions; an older server may send them.
                        if !txn.changes.is_empty() {
                            txns.push(txn);
                        }
                    }
                }
                StreamMessage::Keepalive { wal_end, reply_requested } => {
                    received.keepalive(wal_end, reply_requested, decoder.in_transaction());
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
        *resume = (*resume).max(received.safe);
        if received.covered > 0 {
            shared.covered.fetch_max(received.covered, Ordering::SeqCst);
            shared.progress.notify_waiters();
        }
        let behind = shared.wanted.load(Ordering::SeqCst) > shared.covered.load(Ordering::SeqCst);
        let wake_at = schedule.send_if_due(&mut conn, *resume, received.reply, behind).await?;
        if stop_requested(stop) {
            conn.close().await;
            return Ok(());
        }
        tokio::select! {
            received = conn.receive() => received?,
            _ = tokio::time::sleep_until(wake_at) => {}
            _ = stop.changed() => {}
            _ = shared.wake.notified() => {}
        }
    }
}
