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
use serde_json::{Map, Value as Json};

/// One partition's share of a transaction ([`Partitioning::split_line`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnPart {
    /// The partition it goes to.
    pub partition: u32,
    /// The numbers (0-based, in the whole transaction) of the operations it holds, in
    /// order: explanations cite these, as the offline check does.
    pub ops: Vec<u32>,
    /// A v1 transaction line: the transaction's fields with only those operations.
    pub line: Vec<u8>,
}

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

    /// The partition owning the object of each operation of transaction `t` of `kv`, in
    /// operation order.
    pub fn of_ops(self, kv: &KvHistory, t: TxnId) -> Vec<u32> {
        let dict = kv.dict();
        kv.ops(t)
            .iter()
            .map(|op| {
                let object = dict.object(op.obj());
                self.of_object(&dict.table(object.table).name, &object.key)
            })
            .collect()
    }

    /// Splits a v1 transaction line into the shares of the partitions that check it: the
    /// session's partition `session` gets the transaction's fields (id, session, status,
    /// timestamps: what the Session axiom needs) and the operations on its objects; every
    /// other partition in `op_partitions` (the partition of each operation's object, in
    /// operation order: [`Partitioning::of_ops`]) gets the same fields and the operations
    /// on its objects. Int, Ext and NoConflict look only at one object's operations, so
    /// each partition checks its share as it would check the whole transaction, and the
    /// parts keep the original operation numbers for the explanations. Parts come in
    /// increasing partition order; a transaction owned by one partition is one part, its
    /// line unchanged.
    ///
    /// # Errors
    /// A line that is not a JSON object with an `ops` array of `op_partitions.len()` entries.
    pub fn split_line(line: &[u8], session: u32, op_partitions: &[u32]) -> Result<Vec<TxnPart>, String> {
        let mut partitions: Vec<u32> = op_partitions.to_vec();
        partitions.push(session);
        partitions.sort_unstable();
        partitions.dedup();
        if let [only] = partitions[..] {
            let ops = (0..op_partitions.len() as u32).collect();
            return Ok(vec![TxnPart { partition: only, ops, line: line.to_vec() }]);
        }
        let mut txn: Map<String, Json> =
            serde_json::from_slice(line).map_err(|e| format!("a transaction line: {e}"))?;
        let ops = match txn.remove("ops") {
            Some(Json::Array(ops)) if ops.len() == op_partitions.len() => ops,
            Some(Json::Array(ops)) => {
                return Err(format!(
                    "a transaction line with {} operations, {} partitions given",
                    ops.len(),
                    op_partitions.len()
                ))
            }
            _ => return Err("a transaction line without an \"ops\" array".to_string()),
        };
        let mut shares: Vec<(Vec<u32>, Vec<Json>)> = vec![(Vec::new(), Vec::new()); partitions.len()];
        for (i, op) in ops.into_iter().enumerate() {
            let at =
                partitions.binary_search(&op_partitions[i]).expect("every operation's partition is listed");
            shares[at].0.push(i as u32);
            shares[at].1.push(op);
        }
        let mut parts = Vec::with_capacity(partitions.len());
        for (&partition, (numbers, ops)) in partitions.iter().zip(shares) {
            txn.insert("ops".to_string(), Json::Array(ops));
            let line = serde_json::to_vec(&txn).map_err(|e| e.to_string())?;
            parts.push(TxnPart { partition, ops: numbers, line });
        }
        Ok(parts)
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

    /// Each partition gets the transaction's fields and its own operations with their
    /// numbers; the session's partition gets the fields even without operations; a
    /// transaction owned by one partition goes unchanged; a line that does not match its
    /// operations' partitions is an error.
    #[test]
    fn a_line_splits_into_shares_with_the_original_operation_numbers() {
        let line = br#"{"id":7,"session":"s","start_ts":1,"commit_ts":2,"ops":[{"f":"r","key":1,"value":0},{"f":"w","key":2,"value":5},{"f":"r","key":1,"value":0}]}"#;
        let parts = Partitioning::split_line(line, 3, &[2, 0, 2]).unwrap();
        let shares: Vec<(u32, Vec<u32>, String)> =
            parts.into_iter().map(|p| (p.partition, p.ops, String::from_utf8(p.line).unwrap())).collect();
        let fields = r#"{"id":7,"session":"s","start_ts":1,"commit_ts":2,"ops":"#;
        assert_eq!(
            shares,
            [
                (0, vec![1], format!(r#"{fields}[{{"f":"w","key":2,"value":5}}]}}"#)),
                (
                    2,
                    vec![0, 2],
                    format!(r#"{fields}[{{"f":"r","key":1,"value":0}},{{"f":"r","key":1,"value":0}}]}}"#)
                ),
                (3, vec![], format!("{fields}[]}}")),
            ]
        );
        let whole = Partitioning::split_line(line, 2, &[2, 2, 2]).unwrap();
        assert_eq!(whole, [TxnPart { partition: 2, ops: vec![0, 1, 2], line: line.to_vec() }]);
        assert!(Partitioning::split_line(line, 0, &[1, 2]).unwrap_err().contains("3 operations"));
        assert!(Partitioning::split_line(b"{\"id\":1}", 0, &[1]).unwrap_err().contains("ops"));
        assert!(Partitioning::split_line(b"[", 0, &[1]).is_err());
    }
}
