//! The database's change-stream position, asked once for many concurrent requests.
//!
//! A certificate request must wait until the feed has stored every commit made before the
//! request arrived, so it needs the database's position *after* its arrival. Asking costs a
//! connection and a WAL flush on PostgreSQL; under load most requests arrive while a query
//! is running or queued. Requests therefore take turns: the one at the front asks, and every
//! request that arrived before that query started takes its answer too, which is correct
//! for each of them (the answer is at least the position at its arrival).

use std::sync::Mutex;

use tokio::time::Instant;

use crate::certify::{Backend, CertifyError};

/// The last answer and when its query started.
#[derive(Debug, Default)]
pub struct PositionCache {
    /// One query at a time.
    turn: tokio::sync::Mutex<()>,
    /// When the last query started, and its answer.
    last: Mutex<Option<(Instant, u64)>>,
}

impl PositionCache {
    /// The database's position, no older than the call.
    ///
    /// # Errors
    /// [`CertifyError::Unavailable`] when the database cannot be asked.
    pub async fn position(&self, backend: &dyn Backend) -> Result<u64, CertifyError> {
        let arrived = Instant::now();
        let _turn = self.turn.lock().await;
        if let Some((started, position)) = *self.last.lock().expect("position lock") {
            if started >= arrived {
                return Ok(position);
            }
        }
        let started = Instant::now();
        let position =
            backend.stream_position().await.map_err(|e| CertifyError::Unavailable(e.to_string()))?;
        *self.last.lock().expect("position lock") = Some((started, position));
        Ok(position)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::future::BoxFuture;
    use isocert_adapters::AdapterError;
    use isocert_history::History;
    use isocert_recovery::RawLog;

    use crate::certify::Recovery;

    use super::*;

    /// A database whose position query takes 50 ms and counts how often it is asked.
    #[derive(Default)]
    struct Slow {
        asked: AtomicU64,
    }

    impl Backend for Slow {
        fn stream_position(&self) -> BoxFuture<'_, Result<u64, AdapterError>> {
            Box::pin(async {
                let n = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(n * 100)
            })
        }
        fn recover(&self, _: &mut History, _: &RawLog, _: bool) -> Result<Recovery, CertifyError> {
            Err(CertifyError::NotReady)
        }
        fn recorded(&self, _: &History, _: &[(u64, u64)]) -> usize {
            0
        }
    }

    #[tokio::test]
    async fn concurrent_requests_share_a_query_that_started_after_they_arrived() {
        let backend = Arc::new(Slow::default());
        let cache = Arc::new(PositionCache::default());
        // The first request's query runs; 20 more arrive meanwhile and share the next one.
        let first = {
            let (b, c) = (Arc::clone(&backend), Arc::clone(&cache));
            tokio::spawn(async move { c.position(b.as_ref()).await.unwrap() })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let later: Vec<_> = (0..20)
            .map(|_| {
                let (b, c) = (Arc::clone(&backend), Arc::clone(&cache));
                tokio::spawn(async move { c.position(b.as_ref()).await.unwrap() })
            })
            .collect();
        assert_eq!(first.await.unwrap(), 100);
        for l in later {
            // Never the answer of a query that started before the request arrived.
            assert_eq!(l.await.unwrap(), 200);
        }
        assert_eq!(backend.asked.load(Ordering::SeqCst), 2);
        // A request after all that asks again.
        assert_eq!(cache.position(backend.as_ref()).await.unwrap(), 300);
    }
}
