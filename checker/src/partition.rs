//! How the timestamp checks split across partitions (online checking, docs/ONLINE.md).
//!
//! Chronos's axioms decompose: Ext, Int and NoConflict for an object read or written only
//! look at that object's operations (its versions, its readers, the writers whose spans
//! overlap, the transaction's own earlier operations on it), and Session only at the
//! transactions of one session. So the objects and the sessions are dealt out to `N`
//! partitions by a hash, each partition's checker ([`crate::Aion`] with an
//! [`AionScope`](crate::AionScope)) checks the objects and sessions it owns, and the union
//! of the partitions' anomalies is the whole history's: each one is found by exactly one
//! partition (the one owning its object, or its session for Session).
//!
//! The hash must give the same partition on every machine, in every process, for every
//! build: it is FNV-1a (64 bit) over a tagged encoding of the table name and key (or the
//! session), mixed by MurmurHash3's finalizer, written out here because the standard
//! library's hashers are seeded per process and these twenty lines are the whole
//! specification (a crate would add a dependency for less).

use isocert_history::{KvHistory, Scalar, TxnId};

/// Deals objects and sessions out to a fixed number of partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partitioning {
    partitions: u32,
}

impl Partitioning {
    /// `partitions` partitions (at least one).
    pub fn new(partitions: u32) -> Partitioning {
        Partitioning { partitions: partitions.max(1) }
    }

    /// How many partitions there are.
    pub fn partitions(self) -> u32 {
        self.partitions
    }

    /// The partition owning the object with this table name and key.
    pub fn of_object(self, table: &str, key: &Scalar) -> u32 {
        let mut h = Fnv::default();
        h.bytes(b"o");
        h.bytes(table.as_bytes());
        h.bytes(&[0]);
        h.scalar(key);
        self.bucket(h.0)
    }

    /// The partition owning the session with this name (its Session checks).
    pub fn of_session(self, session: &Scalar) -> u32 {
        let mut h = Fnv::default();
        h.bytes(b"s");
        h.scalar(session);
        self.bucket(h.0)
    }

    /// The partitions transaction `t` of `kv` must reach: those owning its session and the
    /// objects it reads or writes, each once, in increasing order.
    pub fn of_txn(self, kv: &KvHistory, t: TxnId) -> Vec<u32> {
        let dict = kv.dict();
        let mut parts = vec![self.of_session(dict.session_name(kv.session(t)))];
        for op in kv.ops(t) {
            let object = dict.object(op.obj());
            parts.push(self.of_object(&dict.table(object.table).name, &object.key));
        }
        parts.sort_unstable();
        parts.dedup();
        parts
    }

    /// FNV-1a's low bits depend only on the low bits of each byte (keys 4 apart would
    /// share a partition of 4), so the hash is mixed (MurmurHash3's `fmix64`) first.
    fn bucket(self, hash: u64) -> u32 {
        let mut h = hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        (h % u64::from(self.partitions)) as u32
    }
}

/// FNV-1a, 64 bit.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// A scalar, tagged by kind so that `17` and `"17"` (different keys) hash apart.
    fn scalar(&mut self, s: &Scalar) {
        match s {
            Scalar::Null => self.bytes(b"n"),
            Scalar::Bool(b) => self.bytes(if *b { b"t" } else { b"f" }),
            Scalar::Int(i) => {
                self.bytes(b"i");
                self.bytes(&i.to_le_bytes());
            }
            Scalar::Float(f) => {
                self.bytes(b"d");
                self.bytes(&f.to_bits().to_le_bytes());
            }
            Scalar::Text(t) => {
                self.bytes(b"x");
                self.bytes(t.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_of_a_key_is_fixed_and_spread() {
        let p = Partitioning::new(4);
        // Fixed values: a change of the hash would split a running deployment's keys anew.
        let fixed: Vec<u32> = (0..8).map(|k| p.of_object("kv", &Scalar::Int(k))).collect();
        assert_eq!(fixed, [0, 0, 1, 1, 3, 0, 2, 0]);
        let mut counts = [0u32; 4];
        for k in 0..4000 {
            counts[p.of_object("kv", &Scalar::Int(k)) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        let mut even = [0u32; 4];
        for k in (0..4000).step_by(4) {
            even[p.of_object("kv", &Scalar::Int(k)) as usize] += 1;
        }
        assert!(even.iter().all(|&c| c > 150), "keys 4 apart spread too: {even:?}");
        assert_ne!(
            (0..64).map(|k| p.of_object("kv", &Scalar::Int(k))).collect::<Vec<_>>(),
            (0..64).map(|k| p.of_object("kv", &Scalar::Text(k.to_string().into()))).collect::<Vec<_>>(),
            "17 and \"17\" are different keys"
        );
        assert_eq!(Partitioning::new(0).partitions(), 1);
        assert!((0..100).all(|s| Partitioning::new(1).of_session(&Scalar::Int(s)) == 0));
    }
}
