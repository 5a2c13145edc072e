//! The decoded logs of table incarnations, kept between requests.
//!
//! Every certificate of a table needs that table's whole stored log, decoded from the
//! store's JSON rows into a [`RawLog`]; under load the same tables are asked for again and
//! again, and decoding them again each time is wasted. A log is kept per set of
//! incarnations together with the commit position of its last change: a request whose
//! tables have no later change takes it as it is, and one whose tables have changed since
//! reads only the transactions after it (transactions are stored whole and in commit
//! order, so nothing in between can be missing). Bounded by count, least recently used
//! out first; a log whose versions were collected is never asked for (410 before).

use std::sync::{Arc, Mutex};

use isocert_recovery::RawLog;

use crate::store::{StoreError, VersionStore};

/// How many logs are kept.
const KEPT: usize = 16;

/// One kept log.
#[derive(Debug)]
struct Kept {
    relations: Vec<u64>,
    last_change: Option<u64>,
    log: Arc<RawLog>,
}

/// The cache (see the module doc).
#[derive(Debug, Default)]
pub struct LogCache {
    kept: Mutex<Vec<Kept>>,
}

impl LogCache {
    /// The log of `relations` up to `last_change` (their last stored change, as the caller
    /// just read it).
    ///
    /// # Errors
    /// The store's.
    pub async fn log(
        &self,
        store: &VersionStore,
        relations: &[u64],
        last_change: Option<u64>,
    ) -> Result<Arc<RawLog>, StoreError> {
        let mut relations = relations.to_vec();
        relations.sort_unstable();
        relations.dedup();
        let known = {
            let mut kept = self.kept.lock().expect("log cache lock");
            let at = kept.iter().position(|k| k.relations == relations);
            at.map(|i| {
                let k = kept.remove(i);
                let found = (Arc::clone(&k.log), k.last_change);
                kept.push(k);
                found
            })
        };
        // A kept log through the caller's last change (or later: what the store holds now
        // is as good an answer) is taken as it is; an older one is extended.
        let (log, through) = match known {
            Some((log, through)) if through >= last_change => return Ok(log),
            Some((log, Some(through))) => {
                let mut log = Arc::unwrap_or_clone(log);
                store.extend_log(&mut log, &relations, Some(through)).await?;
                (log, last_change)
            }
            _ => (store.log_for(&relations).await?, last_change),
        };
        // The log read may hold changes stored after `last_change` was read: record the
        // position of its own last transaction, so that the next request extends it right.
        let through = log.txns().last().map(|t| t.commit_lsn).max(through);
        let log = Arc::new(log);
        let mut kept = self.kept.lock().expect("log cache lock");
        kept.retain(|k| k.relations != relations);
        kept.push(Kept { relations, last_change: through, log: Arc::clone(&log) });
        if kept.len() > KEPT {
            kept.remove(0);
        }
        Ok(log)
    }
}
