//! Answers already given, for identical submissions: a client that retries, or a monitor
//! that submits the same history again, gets the same bytes without a second recovery.
//!
//! A key covers everything an answer depends on: the route (and level), the tenant, the
//! `schema` parameter, the history's bytes (SHA-256), and the table incarnations with the
//! commit position of the last change stored for them, so a change stored since (a foreign
//! writer's, say) makes a new key. Authorisation and the feed's wait happen before the
//! lookup, every time. Identical submissions arriving together take turns, so one recovers
//! and the others take its answer. Bounded by bytes, oldest out first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// The key of an answer.
pub type AnswerKey = [u8; 32];

/// Builds an [`AnswerKey`] from the parts an answer depends on.
#[derive(Debug, Default)]
pub struct KeyBuilder(Sha256);

impl KeyBuilder {
    /// Adds one part; parts are length-prefixed, so no two lists of parts collide.
    pub fn part(mut self, bytes: &[u8]) -> Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// The key.
    pub fn finish(self) -> AnswerKey {
        self.0.finalize().into()
    }
}

/// The answers kept, oldest first, and their total size.
#[derive(Debug, Default)]
struct Kept {
    answers: VecDeque<(AnswerKey, Arc<Vec<u8>>)>,
    bytes: usize,
}

/// The cache.
#[derive(Debug)]
pub struct AnswerCache {
    entries: Mutex<Kept>,
    max_bytes: usize,
    /// One turn per key being answered: identical submissions arriving together wait for
    /// the first one's answer instead of each recovering it.
    turns: Mutex<HashMap<AnswerKey, Arc<tokio::sync::Mutex<()>>>>,
}

/// The right to answer a key (see [`AnswerCache::turn`]); others asking for the same key
/// wait until it is dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    cache: &'a AnswerCache,
    key: AnswerKey,
    lock: Arc<tokio::sync::Mutex<()>>,
    _held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self._held = None;
        let mut turns = self.cache.turns.lock().expect("turns lock");
        // Ours and the map's: nobody else waits for this key any more.
        if Arc::strong_count(&self.lock) <= 2 {
            turns.remove(&self.key);
        }
    }
}

impl AnswerCache {
    /// A cache of at most `max_bytes` of answers.
    pub fn new(max_bytes: usize) -> Self {
        AnswerCache { entries: Mutex::default(), max_bytes, turns: Mutex::default() }
    }

    /// Waits for the turn to answer `key`: at once, unless an identical submission is being
    /// answered now; then after it (whose answer [`get`](Self::get) then finds).
    pub async fn turn(&self, key: AnswerKey) -> Turn<'_> {
        let lock = Arc::clone(self.turns.lock().expect("turns lock").entry(key).or_default());
        let held = Arc::clone(&lock).lock_owned().await;
        Turn { cache: self, key, lock, _held: Some(held) }
    }

    /// The answer stored under `key`.
    pub fn get(&self, key: &AnswerKey) -> Option<Arc<Vec<u8>>> {
        let entries = self.entries.lock().expect("answers lock");
        entries.answers.iter().find(|(k, _)| k == key).map(|(_, v)| Arc::clone(v))
    }

    /// Stores `answer` under `key`, dropping the oldest answers beyond the bound.
    pub fn put(&self, key: AnswerKey, answer: Arc<Vec<u8>>) {
        if answer.len() > self.max_bytes / 4 {
            return;
        }
        let mut entries = self.entries.lock().expect("answers lock");
        if entries.answers.iter().any(|(k, _)| *k == key) {
            return;
        }
        entries.bytes += answer.len();
        entries.answers.push_back((key, answer));
        while entries.bytes > self.max_bytes {
            match entries.answers.pop_front() {
                Some((_, old)) => entries.bytes -= old.len(),
                None => break,
            }
        }
    }
}

/// The last few values by key (parsed histories by the digest of their body), least
/// recently used out first.
#[derive(Debug)]
pub struct Recent<V> {
    kept: Mutex<VecDeque<(AnswerKey, Arc<V>)>>,
    max: usize,
}

impl<V> Recent<V> {
    /// Keeps at most `max` values.
    pub fn new(max: usize) -> Self {
        Recent { kept: Mutex::new(VecDeque::new()), max }
    }

    /// The value under `key`, now the most recently used.
    pub fn get(&self, key: &AnswerKey) -> Option<Arc<V>> {
        let mut kept = self.kept.lock().expect("recent lock");
        let at = kept.iter().position(|(k, _)| k == key)?;
        let entry = kept.remove(at)?;
        let value = Arc::clone(&entry.1);
        kept.push_back(entry);
        Some(value)
    }

    /// Keeps `value` under `key`.
    pub fn put(&self, key: AnswerKey, value: Arc<V>) {
        let mut kept = self.kept.lock().expect("recent lock");
        kept.retain(|(k, _)| *k != key);
        kept.push_back((key, value));
        while kept.len() > self.max {
            kept.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_by_every_part_and_old_answers_go_first() {
        let a = KeyBuilder::default().part(b"ab").part(b"c").finish();
        let b = KeyBuilder::default().part(b"a").part(b"bc").finish();
        assert_ne!(a, b, "parts are delimited");
        let cache = AnswerCache::new(100);
        cache.put(a, Arc::new(vec![1; 20]));
        cache.put(b, Arc::new(vec![2; 20]));
        assert_eq!(cache.get(&a).unwrap()[0], 1);
        for n in 0..4u8 {
            cache.put(KeyBuilder::default().part(&[n]).finish(), Arc::new(vec![n; 20]));
        }
        assert!(cache.get(&a).is_none(), "the oldest answer is dropped past 100 bytes");
        assert!(cache.get(&KeyBuilder::default().part(&[3]).finish()).is_some());
        cache.put(KeyBuilder::default().part(b"big").finish(), Arc::new(vec![0; 60]));
        assert!(cache.get(&KeyBuilder::default().part(b"big").finish()).is_none(), "too big to keep");
    }

    #[test]
    fn recent_values_keep_the_last_used() {
        let recent = Recent::new(2);
        let key = |n: u8| KeyBuilder::default().part(&[n]).finish();
        recent.put(key(1), Arc::new(1));
        recent.put(key(2), Arc::new(2));
        assert_eq!(recent.get(&key(1)).as_deref(), Some(&1));
        recent.put(key(3), Arc::new(3));
        assert!(recent.get(&key(2)).is_none(), "the least recently used goes");
        assert_eq!(recent.get(&key(1)).as_deref(), Some(&1));
    }

    #[tokio::test]
    async fn identical_submissions_take_turns_and_the_turns_are_forgotten() {
        let cache = Arc::new(AnswerCache::new(1000));
        let key = KeyBuilder::default().part(b"k").finish();
        let first = cache.turn(key).await;
        let waiter = {
            let cache = Arc::clone(&cache);
            tokio::spawn(async move {
                let _turn = cache.turn(key).await;
                cache.get(&key).map(|a| a[0])
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second waits for the first");
        cache.put(key, Arc::new(vec![9]));
        drop(first);
        assert_eq!(waiter.await.unwrap(), Some(9), "and finds its answer");
        assert!(cache.turns.lock().unwrap().is_empty());
    }
}
