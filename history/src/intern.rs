//! The indexes behind interning: from a key (a value, a transaction name) to its dense id.
//!
//! Nearly every history keys by integers (gen's and the workload's values and transaction
//! ids are counters), so integer keys take a direct table when they are small and dense, and
//! a hash map of `i64` otherwise; other keys a hash map of the key. In `perf` of an item-only
//! Emme check of 100,000 transactions, hashing every value as a [`Value`] was 12% of the run,
//! an `i64` hash map 9% (a cache miss per probe in a table of half a million values), and the
//! transaction-name lookups of the certificate reader 3%.
//!
//! Other keys (rows, text) are stored once, in the vector the ids index: the hash table
//! holds ids only and compares through that vector (`hashbrown::HashTable`). Keeping a copy
//! of each key in a map doubled the memory of row-valued histories (gen's 100,000-transaction
//! predicate history interns about 600,000 distinct rows). Beside each id the table keeps 32
//! bits of the key's hash: a probe compares keys only when those bits agree, and growing the
//! table rehashes from them without reading a key (`reserve_rehash` had been 3% of that
//! history's check, most of it cache misses on the interned rows).
//!
//! A row is hashed by [`row_hash`] of its columns, so a caller holding the columns in a
//! buffer can look the row up ([`KeyIndex::get_hashed`]) before building a [`Value`].

use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::{Scalar, Value};

const NONE: u32 = u32::MAX;
/// Direct slots allowed beyond twice the number of keys held.
const DIRECT_SLACK: usize = 1024;

/// Keys that may be integers.
pub(crate) trait IntKey: Clone + Eq + Hash {
    /// The integer this key is, if it is one.
    fn as_int(&self) -> Option<i64>;

    /// The hash the index files a non-integer key under.
    fn index_hash(&self) -> u64 {
        hash_of(self)
    }
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

    fn index_hash(&self) -> u64 {
        match self {
            Value::Row(row) => row_hash(row.columns()),
            other => hash_of(other),
        }
    }
}

/// The hash a row with these columns (trailing NULLs already dropped, as
/// [`crate::Row::new`] drops them) is filed under in a [`KeyIndex<Value>`].
pub(crate) fn row_hash(columns: &[Scalar]) -> u64 {
    hash_of(columns)
}

/// Where the interned keys live: the key of each id.
pub(crate) trait Keys<K> {
    /// The key interned with `id`.
    fn key(&self, id: u32) -> &K;
}

impl<K> Keys<K> for [K] {
    fn key(&self, id: u32) -> &K {
        &self[id as usize]
    }
}

/// From keys to dense ids; integer keys in `0..direct.len()` by direct table, whose length
/// stays under twice the keys held (plus a little), so memory follows the keys; other keys
/// by a table of ids that compares through the interned keys ([`Keys`]).
#[derive(Clone, Debug)]
pub(crate) struct KeyIndex<K> {
    direct: Vec<u32>,
    ints: FxHashMap<i64, u32>,
    others: HashTable<Slot>,
    len: usize,
    key: PhantomData<K>,
}

impl<K> Default for KeyIndex<K> {
    fn default() -> Self {
        KeyIndex {
            direct: Vec::new(),
            ints: FxHashMap::default(),
            others: HashTable::new(),
            len: 0,
            key: PhantomData,
        }
    }
}

fn hash_of<K: Hash + ?Sized>(key: &K) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// An id in the hash table of non-integer keys, with 32 bits of its key's hash.
#[derive(Clone, Copy, Debug)]
struct Slot {
    id: u32,
    tag: u32,
}

/// The 32 bits of `hash` a [`Slot`] keeps (Fx mixes the high bits best).
#[inline]
fn tag_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// The hash the table places a slot by, from its tag alone: the tag in the low bits (the
/// bucket) and in the high bits (hashbrown's control byte), so rehashing reads no key.
#[inline]
fn spread(tag: u32) -> u64 {
    u64::from(tag) << 32 | u64::from(tag)
}

impl<K: IntKey> KeyIndex<K> {
    /// The id of `key`, if held; `keys` holds the interned keys.
    #[inline]
    pub(crate) fn get<S: Keys<K> + ?Sized>(&self, key: &K, keys: &S) -> Option<u32> {
        match key.as_int() {
            Some(i) => self.get_int(i),
            None => self.get_hashed(key.index_hash(), |id| keys.key(id) == key),
        }
    }

    /// The id of the non-integer key whose [`IntKey::index_hash`] is `hash` and for which
    /// `is_key` holds (it is given the id of each candidate, whose hash bits agree).
    #[inline]
    pub(crate) fn get_hashed(&self, hash: u64, mut is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let tag = tag_of(hash);
        self.others.find(spread(tag), |s| s.tag == tag && is_key(s.id)).map(|s| s.id)
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
    pub(crate) fn insert(&mut self, key: &K, id: u32) {
        match key.as_int() {
            Some(i) => self.insert_int(i, id),
            None => self.insert_hashed(key.index_hash(), id),
        }
    }

    /// Holds the non-integer key with id `id` whose [`IntKey::index_hash`] is `hash`; the
    /// key must not be held yet.
    pub(crate) fn insert_hashed(&mut self, hash: u64, id: u32) {
        self.len += 1;
        let tag = tag_of(hash);
        self.others.insert_unique(spread(tag), Slot { id, tag }, |s| spread(s.tag));
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

    /// Forgets every key, keeping the memory (a history emptied for a reader to fill again).
    pub(crate) fn clear(&mut self) {
        self.direct.clear();
        self.ints.clear();
        self.others.clear();
        self.len = 0;
    }

    /// About the bytes the index has allocated (the hash tables' slots and control bytes,
    /// from their capacities).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.direct.capacity() * std::mem::size_of::<u32>()
            + self.ints.capacity() * (std::mem::size_of::<(i64, u32)>() + 1)
            + self.others.capacity() * (std::mem::size_of::<Slot>() + 1)
    }

    /// Whether `key` is held.
    pub(crate) fn contains<S: Keys<K> + ?Sized>(&self, key: &K, keys: &S) -> bool {
        self.get(key, keys).is_some()
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
            let mut keys: Vec<Scalar> = Vec::new();
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
                assert_eq!(index.get(&probe, keys.as_slice()), reference.get(&probe).copied());
                if !reference.contains_key(&key) {
                    let id = reference.len() as u32;
                    reference.insert(key.clone(), id);
                    index.insert(&key, id);
                    keys.push(key.clone());
                }
                assert_eq!(index.get(&key, keys.as_slice()), reference.get(&key).copied(), "{key:?}");
            }
            for (key, id) in &reference {
                assert_eq!(index.get(key, keys.as_slice()), Some(*id));
            }
            assert!(index.direct.len() <= 2 * reference.len() + DIRECT_SLACK);
        }
    }
}
