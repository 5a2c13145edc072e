//! The indexes behind interning: from a key (a value, a transaction name) to its dense id.
//!
//! Nearly every history keys by integers (gen's and the workload's values and transaction
//! ids are counters), so integer keys take a direct table when they are small and dense, and
//! a hash map of `i64` otherwise; other keys a hash map of the key. In `perf` of an item-only
//! Emme check of 100,000 transactions, hashing every value as a [`Value`] was 12% of the run,
//! an `i64` hash map 9% (a cache miss per probe in a table of half a million values), and the
//! transaction-name lookups of the certificate reader 3%.

use std::hash::Hash;

use rustc_hash::FxHashMap;

use crate::{Scalar, Value};

const NONE: u32 = u32::MAX;
/// Direct slots allowed beyond twice the number of keys held.
const DIRECT_SLACK: usize = 1024;

/// Keys that may be integers.
pub(crate) trait IntKey: Clone + Eq + Hash {
    /// The integer this key is, if it is one.
    fn as_int(&self) -> Option<i64>;
}

impl IntKey for Scalar {
    fn as_int(&self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(*i),
            _ => None,
        }
    }
}

impl IntKey for Value {
    fn as_int(&self) -> Option<i64> {
        match self {
            Value::Scalar(s) => s.as_int(),
            _ => None,
        }
    }
}

/// From keys to dense ids; integer keys in `0..direct.len()` by direct table, whose length
/// stays under twice the keys held (plus a little), so memory follows the keys.
#[derive(Clone, Debug)]
pub(crate) struct KeyIndex<K> {
    direct: Vec<u32>,
    ints: FxHashMap<i64, u32>,
    others: FxHashMap<K, u32>,
    len: usize,
}

impl<K> Default for KeyIndex<K> {
    fn default() -> Self {
        KeyIndex { direct: Vec::new(), ints: FxHashMap::default(), others: FxHashMap::default(), len: 0 }
    }
}

impl<K: IntKey> KeyIndex<K> {
    /// The id of `key`, if held.
    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<u32> {
        match key.as_int() {
            Some(i) => self.get_int(i),
            None => self.others.get(key).copied(),
        }
    }

    /// The id of the integer key `i`, if held.
    #[inline]
    pub(crate) fn get_int(&self, i: i64) -> Option<u32> {
        if let Some(&id) = usize::try_from(i).ok().and_then(|slot| self.direct.get(slot)) {
            if id != NONE {
                return Some(id);
            }
        }
        // A key below the direct table's length may predate the table's growth.
        self.ints.get(&i).copied()
    }

    /// Holds `key` with `id`; `key` must not be held yet.
    pub(crate) fn insert(&mut self, key: K, id: u32) {
        match key.as_int() {
            Some(i) => self.insert_int(i, id),
            None => {
                self.len += 1;
                self.others.insert(key, id);
            }
        }
    }

    /// Holds the integer key `i` with `id`; `i` must not be held yet.
    pub(crate) fn insert_int(&mut self, i: i64, id: u32) {
        self.len += 1;
        if let Ok(slot) = usize::try_from(i) {
            let bound = 2 * self.len + DIRECT_SLACK;
            if slot >= self.direct.len() && slot < bound {
                self.direct.resize((slot + 1).next_power_of_two().min(bound), NONE);
            }
            if let Some(cell) = self.direct.get_mut(slot) {
                *cell = id;
                return;
            }
        }
        self.ints.insert(i, id);
    }

    /// Whether `key` is held.
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.get(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index answers like a plain hash map on keys mixing small, large, negative and
    /// non-integer keys in any order (the direct table grows while keys arrive).
    #[test]
    fn answers_like_a_hash_map() {
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 33
        };
        for round in 0..50 {
            let mut index: KeyIndex<Scalar> = KeyIndex::default();
            let mut reference: FxHashMap<Scalar, u32> = FxHashMap::default();
            for _ in 0..2000 {
                let key = match next() % 6 {
                    0 => Scalar::Int(-((next() % 100) as i64)),
                    1 => Scalar::Int((next() % 100_000) as i64 + round),
                    2 => Scalar::Int((next() % 64) as i64),
                    3 => Scalar::Int(i64::MAX - (next() % 3) as i64),
                    4 => Scalar::Text(format!("t{}", next() % 50).into()),
                    _ => Scalar::Int(reference.len() as i64),
                };
                let probe = Scalar::Int((next() % 200_000) as i64);
                assert_eq!(index.get(&probe), reference.get(&probe).copied());
                if !reference.contains_key(&key) {
                    let id = reference.len() as u32;
                    reference.insert(key.clone(), id);
                    index.insert(key.clone(), id);
                }
                assert_eq!(index.get(&key), reference.get(&key).copied(), "{key:?}");
            }
            for (key, id) in &reference {
                assert_eq!(index.get(key), Some(*id));
            }
            assert!(index.direct.len() <= 2 * reference.len() + DIRECT_SLACK);
        }
    }
}
