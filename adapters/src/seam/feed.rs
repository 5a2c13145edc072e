//! The durable change feed that `isocert serve` consumes: unlike a run's capture, which
//! lives for one workload and is dropped after it, a feed is named, outlives the process,
//! covers every table, and hands each committed transaction to a [`FeedSink`] that stores
//! it durably before the database is told it may forget it. A restart resumes from the
//! last stored position with no gap (nothing is acknowledged before it is stored) and no
//! duplicate (the sink drops transactions at or before what it already holds).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use isocert_recovery::CommittedTxn;
use tokio::sync::Notify;

/// One incarnation of a table: dropping a table and creating it again gives a new one, whose
/// rows' versions have nothing to do with the old one's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableIncarnation {
    /// The database's id of this incarnation (PostgreSQL: the table's OID).
    pub id: u64,
    /// The schema (or database) the table is in.
    pub schema: Arc<str>,
    /// The table's name, as histories name it.
    pub name: Arc<str>,
}

/// A committed transaction of a feed, with the table of each of its row changes.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedTxn {
    /// The transaction as a run's capture would log it.
    pub txn: CommittedTxn,
    /// `tables[i]` is the table of `txn.changes[i]`.
    pub tables: Vec<TableIncarnation>,
    /// Tables the transaction emptied at once (PostgreSQL: TRUNCATE), which have no
    /// row-level versions: certificates over them cannot be given.
    pub truncated: Vec<TableIncarnation>,
}

/// Where a feed hands its transactions: a durable store.
pub trait FeedSink: Send {
    /// Stores `txns` (in commit order; possibly empty) together with `resume`, the
    /// position from which a restarted feed must continue, in one durable step. The feed
    /// acknowledges `resume` to the database only after this returns `Ok`.
    ///
    /// # Errors
    /// Why the store failed; the feed then stops without acknowledging anything more.
    fn store(&mut self, txns: Vec<FeedTxn>, resume: u64) -> impl Future<Output = Result<(), String>> + Send;
}

/// What a running feed tells the rest of the server, and how the server asks it to hurry.
#[derive(Debug, Default)]
pub struct FeedProgress {
    /// Every transaction committed before this position is stored.
    covered: AtomicU64,
    /// The highest position someone waits for.
    wanted: AtomicU64,
    connected: AtomicBool,
    connects: AtomicU64,
    changed: Notify,
}

impl FeedProgress {
    /// A shared progress record for a new feed.
    pub fn new() -> Arc<Self> {
        Arc::new(FeedProgress::default())
    }

    /// Every transaction committed before this position is stored.
    pub fn covered(&self) -> u64 {
        self.covered.load(Ordering::SeqCst)
    }

    /// Whether the feed is connected to the database now.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// How many times the feed lost its connection and reconnected.
    pub fn reconnects(&self) -> u64 {
        self.connects.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// The highest position someone is waiting for (the feed asks the database for its
    /// position until it is covered).
    pub fn wanted(&self) -> u64 {
        self.wanted.load(Ordering::SeqCst)
    }

    /// Waits until every transaction committed before `position` is stored, at most
    /// `timeout`; returns whether it is.
    pub async fn wait_for(&self, position: u64, timeout: Duration) -> bool {
        self.wanted.fetch_max(position, Ordering::SeqCst);
        self.changed.notify_waiters();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if self.covered() >= position {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.covered() >= position;
            }
        }
    }

    /// Records that everything committed before `position` is stored.
    pub fn advance(&self, position: u64) {
        if self.covered.fetch_max(position, Ordering::SeqCst) < position {
            self.changed.notify_waiters();
        }
    }

    /// Records whether the feed is connected (every connection after the first counts
    /// as a reconnect).
    pub fn set_connected(&self, connected: bool) {
        if connected && !self.connected.swap(true, Ordering::SeqCst) {
            self.connects.fetch_add(1, Ordering::SeqCst);
        }
        if !connected {
            self.connected.store(false, Ordering::SeqCst);
        }
    }

    /// Resolves when someone asks for a position not yet covered (or the feed moved).
    pub async fn asked(&self) {
        self.changed.notified().await
    }
}
