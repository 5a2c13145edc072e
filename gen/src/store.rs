//! The simulated multi-version store: per object, its committed versions by commit timestamp.
//!
//! Versions older than every running transaction's snapshot are dropped as new ones are
//! installed, so memory stays proportional to the keys and the concurrency, not to the
//! history's length (list elements excepted: a list holds all its elements).

use crate::record::Val;

/// Writer id of the initial version (header `initial`).
pub(crate) const INITIAL: u32 = u32::MAX - 1;
/// Writer id meaning "no version": the object is unborn.
pub(crate) const UNBORN: u32 = u32::MAX;

/// One committed version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    /// Commit timestamp of its writer (0 for the initial version).
    pub(crate) ts: u64,
    /// The writer's record id, [`INITIAL`] or [`UNBORN`].
    pub(crate) writer: u32,
    pub(crate) val: Val,
}

const UNBORN_VERSION: Version = Version { ts: 0, writer: UNBORN, val: Val::Absent };

/// Versions below this many are never garbage-collected (amortizes the work).
const GC_SLACK: usize = 8;

#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    versions: Vec<Vec<Version>>,
    /// List elements per object, in commit order (list-append model only).
    elems: Vec<Vec<i64>>,
}

impl Store {
    pub(crate) fn new(objects: usize) -> Self {
        Store { versions: vec![Vec::new(); objects], elems: Vec::new() }
    }

    fn grow(&mut self, obj: u32) {
        if obj as usize >= self.versions.len() {
            self.versions.resize_with(obj as usize + 1, Vec::new);
        }
    }

    /// Installs the initial version of `obj`.
    pub(crate) fn set_initial(&mut self, obj: u32, val: Val) {
        self.grow(obj);
        self.versions[obj as usize] = vec![Version { ts: 0, writer: INITIAL, val }];
    }

    /// The newest version committed at or before `ts` (the snapshot of a transaction that
    /// started at `ts`; commit timestamps never equal another event's timestamp).
    pub(crate) fn visible(&self, obj: u32, ts: u64) -> Version {
        let Some(vs) = self.versions.get(obj as usize) else { return UNBORN_VERSION };
        vs.iter().rev().find(|v| v.ts <= ts).copied().unwrap_or(UNBORN_VERSION)
    }

    /// The newest committed version.
    pub(crate) fn latest(&self, obj: u32) -> Version {
        self.versions.get(obj as usize).and_then(|vs| vs.last().copied()).unwrap_or(UNBORN_VERSION)
    }

    /// The versions committed after `ts`, oldest first.
    pub(crate) fn committed_after(&self, obj: u32, ts: u64) -> &[Version] {
        let Some(vs) = self.versions.get(obj as usize) else { return &[] };
        let first = vs.iter().rposition(|v| v.ts <= ts).map_or(0, |i| i + 1);
        &vs[first..]
    }

    /// Installs a version at `ts`; versions that no snapshot at or after `horizon` can see
    /// are dropped.
    pub(crate) fn install(&mut self, obj: u32, version: Version, horizon: u64) {
        self.grow(obj);
        let vs = &mut self.versions[obj as usize];
        vs.push(version);
        if vs.len() > GC_SLACK {
            if let Some(keep_from) = vs.iter().rposition(|v| v.ts <= horizon) {
                vs.drain(..keep_from);
            }
        }
    }

    /// The first `len` elements of list `obj`.
    pub(crate) fn list_prefix(&self, obj: u32, len: u32) -> &[i64] {
        self.elems.get(obj as usize).map_or(&[], |e| &e[..len as usize])
    }

    /// Appends committed elements to list `obj` and returns its new length.
    pub(crate) fn extend_list(&mut self, obj: u32, elems: &[i64]) -> u32 {
        if obj as usize >= self.elems.len() {
            self.elems.resize_with(obj as usize + 1, Vec::new);
        }
        let list = &mut self.elems[obj as usize];
        list.extend_from_slice(elems);
        u32::try_from(list.len()).expect("list longer than u32::MAX")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_see_the_newest_version_at_or_before_their_start() {
        let mut s = Store::new(1);
        assert_eq!(s.visible(0, 5).writer, UNBORN);
        s.install(0, Version { ts: 3, writer: 1, val: Val::Int(10) }, 0);
        s.install(0, Version { ts: 7, writer: 2, val: Val::Int(20) }, 0);
        assert_eq!(s.visible(0, 2).writer, UNBORN);
        assert_eq!(s.visible(0, 3).val, Val::Int(10));
        assert_eq!(s.visible(0, 6).val, Val::Int(10));
        assert_eq!(s.latest(0).val, Val::Int(20));
        assert_eq!(s.committed_after(0, 3).len(), 1);
        assert_eq!(s.committed_after(0, 0).len(), 2);
    }

    #[test]
    fn gc_keeps_what_the_horizon_can_see() {
        let mut s = Store::new(1);
        for i in 1..=20u64 {
            s.install(0, Version { ts: i * 10, writer: i as u32, val: Val::Int(i as i64) }, 105);
        }
        assert_eq!(s.visible(0, 105).val, Val::Int(10));
        assert_eq!(s.latest(0).val, Val::Int(20));
        assert!(s.versions[0].len() <= 20 - 9);
    }
}
