//! What a consumer of the logical replication stream keeps between reads, shared by a run's
//! stream consumer (`replication_stream.rs`) and the change feed of `isocert serve`
//! (`feed.rs`): the positions the received messages prove ([`Received`]) and when to send
//! the server a Standby Status Update ([`StatusSchedule`]).

use std::time::Duration;

use tokio::time::Instant;

use super::walsender::WalSender;
use crate::AdapterError;

/// How often a consumer reports its position when the server does not ask.
pub(super) const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// How often a consumer asks for a keepalive while a waited-for position is not covered.
pub(super) const PING_INTERVAL: Duration = Duration::from_millis(20);

/// What one read of the received messages proves. Transactions arrive in commit order,
/// so after a commit ending at `E` every commit before `E` has been received; a primary
/// keepalive carries the walsender's sent position `P`, up to which every record has been
/// decoded and its output sent, so every commit before `P` has been received too.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Received {
    /// Every commit before this position has been received (0: nothing proven).
    pub(super) covered: u64,
    /// Like `covered`, and a transaction boundary: where a restart may begin.
    pub(super) safe: u64,
    /// Whether the server asked for a status update at once (a stopping server waits).
    pub(super) reply: bool,
}

impl Received {
    /// A transaction whose commit ends at `end_lsn` was received.
    pub(super) fn commit(&mut self, end_lsn: u64) {
        self.covered = self.covered.max(end_lsn);
        self.safe = self.safe.max(end_lsn);
    }

    /// A primary keepalive at `wal_end`. Inside a transaction (`in_transaction`) its
    /// position precedes that transaction's commit, which a restart from there would not
    /// skip, so it is no restart point.
    pub(super) fn keepalive(&mut self, wal_end: u64, reply_requested: bool, in_transaction: bool) {
        self.covered = self.covered.max(wal_end);
        if !in_transaction {
            self.safe = self.safe.max(wal_end);
        }
        self.reply |= reply_requested;
    }
}

/// When a consumer sends Standby Status Updates: at once when the server asks, every
/// [`STATUS_INTERVAL`] otherwise, and every [`PING_INTERVAL`] asking for a keepalive while
/// someone waits for a position not yet covered.
#[derive(Debug)]
pub(super) struct StatusSchedule {
    next_status: Instant,
    next_ping: Instant,
}

impl StatusSchedule {
    /// A schedule whose first update is due now.
    pub(super) fn new() -> Self {
        let now = Instant::now();
        StatusSchedule { next_status: now, next_ping: now }
    }

    /// Sends `position` (flushed: the server may forget what precedes it) if an update is
    /// due; `behind` says whether someone waits for a position not yet covered. Returns
    /// when the consumer should wake next if nothing arrives.
    pub(super) async fn send_if_due(
        &mut self,
        conn: &mut WalSender,
        position: u64,
        reply: bool,
        behind: bool,
    ) -> Result<Instant, AdapterError> {
        let now = Instant::now();
        let ping = behind && now >= self.next_ping;
        if reply || ping || now >= self.next_status {
            conn.send_status(position, ping).await?;
            self.next_status = now + STATUS_INTERVAL;
            if ping {
                self.next_ping = now + PING_INTERVAL;
            }
        }
        Ok(if behind { self.next_status.min(self.next_ping) } else { self.next_status })
    }
}
