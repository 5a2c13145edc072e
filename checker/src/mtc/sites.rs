//! Where each (object, value) was written, for resolving reads by value.
//!
//! A table indexed by the value's dense id holds the first object each value was written
//! to; the rare value written to a second object goes to a hash map. In the histories the
//! black-box checkers read, values are unique per object and nearly always unique
//! overall, so a lookup is one array read. A hash map keyed by (object, value) for every
//! write took 22 MB of the 150 MB peak on a 100,000-transaction history (46 bytes a write
//! with its growth; this is about 20: docs/PERFORMANCE.md, "Where the bytes go").

use isocert_history::{History, ObjId, Op, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

/// Where a written value came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    /// The writing transaction.
    pub(crate) txn: isocert_history::TxnId,
    /// The write's op index in it.
    pub(crate) op: u32,
    /// Whether it is the transaction's last write of the object (an installed version).
    pub(crate) is_final: bool,
}

/// No site for this value yet.
const NONE: u32 = u32::MAX;

/// The write behind every (object, value) written in a history; a later write of the same
/// (object, value) replaces the earlier one.
#[derive(Debug)]
pub(crate) struct WriteSites {
    /// Per value id, the index in `sites` of the value's write to its first object.
    by_value: Vec<u32>,
    /// The sites, each with its object.
    sites: Vec<(ObjId, Site)>,
    /// Sites of values written to more than one object, other than the first.
    others: FxHashMap<(ObjId, ValueId), u32>,
}

impl WriteSites {
    /// The site of `value` written to `obj`, if any transaction wrote it.
    #[inline]
    pub(crate) fn get(&self, obj: ObjId, value: ValueId) -> Option<&Site> {
        let &i = self.by_value.get(value.index())?;
        if i == NONE {
            return None;
        }
        let (first, site) = &self.sites[i as usize];
        if *first == obj {
            return Some(site);
        }
        self.others.get(&(obj, value)).map(|&i| &self.sites[i as usize].1)
    }

    /// The number of distinct (object, value) pairs written.
    pub(crate) fn len(&self) -> usize {
        self.sites.len()
    }

    fn insert(&mut self, obj: ObjId, value: ValueId, site: Site) {
        let v = value.index();
        if v >= self.by_value.len() {
            self.by_value.resize(v + 1, NONE);
        }
        let slot = match self.by_value[v] {
            NONE => {
                self.by_value[v] = self.sites.len() as u32;
                None
            }
            i if self.sites[i as usize].0 == obj => Some(i),
            _ => self.others.get(&(obj, value)).copied(),
        };
        match slot {
            Some(i) => self.sites[i as usize].1 = site,
            None => {
                if self.by_value[v] != self.sites.len() as u32 {
                    self.others.insert((obj, value), self.sites.len() as u32);
                }
                self.sites.push((obj, site));
            }
        }
    }
}

/// The write behind every (object, value) written in `h` (values are unique per object in
/// the histories the black-box checkers accept).
pub(crate) fn write_sites(h: &History) -> WriteSites {
    let writes = h.txns.iter().flat_map(|t| &t.ops).filter(|op| matches!(op, Op::Write { .. })).count();
    let mut sites = WriteSites {
        by_value: vec![NONE; h.value_count()],
        sites: Vec::with_capacity(writes),
        others: FxHashMap::default(),
    };
    // Objects written later in the transaction (walking backwards): a list for short
    // transactions, a set for long ones (a plume file's aborted writes are one transaction).
    let mut later: Vec<ObjId> = Vec::new();
    for t in h.txn_ids() {
        let ops = &h.txn(t).ops;
        let mut later_set: Option<FxHashSet<ObjId>> = (ops.len() > 32).then(FxHashSet::default);
        later.clear();
        for (i, op) in ops.iter().enumerate().rev() {
            if let Op::Write { obj, value } = op {
                let is_final = match &mut later_set {
                    Some(set) => set.insert(*obj),
                    None if later.contains(obj) => false,
                    None => {
                        later.push(*obj);
                        true
                    }
                };
                sites.insert(*obj, *value, Site { txn: t, op: i as u32, is_final });
            }
        }
    }
    sites
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_history::TxnId;

    /// The table against a hash map keyed by (object, value), the structure it replaced:
    /// values shared by several objects, the same (object, value) written twice, values
    /// never written.
    #[test]
    fn agrees_with_a_map_keyed_by_object_and_value() {
        let (objects, values) = (7u32, 40u32);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |bound: u32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % u64::from(bound)) as u32
        };
        for _ in 0..200 {
            let mut sites = WriteSites {
                by_value: vec![NONE; values as usize],
                sites: Vec::new(),
                others: FxHashMap::default(),
            };
            let mut reference: FxHashMap<(ObjId, ValueId), (TxnId, u32, bool)> = FxHashMap::default();
            for i in 0..next(60) {
                let (obj, value) = (ObjId(next(objects)), ValueId(next(values)));
                let site = Site { txn: TxnId(i), op: next(5), is_final: next(2) == 0 };
                sites.insert(obj, value, site);
                reference.insert((obj, value), (site.txn, site.op, site.is_final));
            }
            assert_eq!(sites.len(), reference.len());
            for obj in (0..objects).map(ObjId) {
                for value in (0..values).map(ValueId) {
                    let got = sites.get(obj, value).map(|s| (s.txn, s.op, s.is_final));
                    assert_eq!(got, reference.get(&(obj, value)).copied(), "{obj:?} {value:?}");
                }
            }
        }
    }
}
