//! The InnoDB rule (MariaDB): history + row-based binary log -> certificate.
//!
//! - Version order: per row, binary-log order. InnoDB holds a row's exclusive lock until
//!   commit and MariaDB writes the binary log in commit order, so per row the log order is
//!   the order in which versions were installed.
//! - What each read saw, by InnoDB's rules (docs/MARIADB.md):
//!   - a plain SELECT at REPEATABLE READ reads the consistent snapshot: a prefix of the
//!     binary log, placed by [`placement`];
//!   - a locking read (every read at SERIALIZABLE; UPDATE and DELETE at REPEATABLE READ)
//!     keeps its row and gap locks until commit, so it saw the versions that were the
//!     newest when its transaction committed: before its own position in the log, or, for
//!     a transaction that wrote nothing, before `before_commit_gtid` (read while the locks
//!     were held: a writer of a locked row cannot commit before it);
//!   - a READ COMMITTED statement saw a version that was the newest at some point
//!     between the transaction's consistent-snapshot position (what the engine had
//!     committed when it began) and its commit (`before_commit_gtid`);
//!   - a transaction sees its own writes first.
//!
//!   A returned row names its version by its unique value; a row UPDATE or DELETE wrote was
//!   read at the version just before the transaction's own (the row lock); a row a
//!   predicate did not return saw one of the window's versions that does not match. When
//!   several remain, the earliest is taken and the read is counted as ambiguous (reported).
//! - Timestamps: position-derived `start_ts`/`commit_ts` (commit = binary-log order; start =
//!   the snapshot's position, or the start position at other levels), so that the snapshot
//!   isolation checks can judge REPEATABLE READ. At REPEATABLE READ the position MariaDB
//!   reported is only a hint: [`placement`] puts the snapshot where the transaction's reads
//!   and the commits acknowledged before it began put it.

mod facts;
mod live;
mod placement;
mod starts;

use isocert_history::{
    Certificate, History, ObjId, Op, OpRef, SeenVersion, SerialOrder, Status, Timestamp, TxnId, ValueId,
    Writer,
};
use rustc_hash::FxHashMap;

pub use facts::{binlog_key, binlog_key_text, gtid_seq, InnoDbOpFacts, InnoDbTxnFacts};
pub use live::InnoDbLiveTicks;
use starts::{AcknowledgedCommits, Committed, Positions, Starts};

use crate::matching::{match_log, record_own_writes, Matched};
use crate::timestamp_order::commit_order_if_serializable;
use crate::{RawLog, Recovered, RecoveryError, RecoveryStats, RowMatcher};

/// One version of an object: its position in the log (`None`: the initial version), writer
/// and value.
#[derive(Clone, Copy, Debug)]
struct Version {
    pos: Option<usize>,
    writer: Writer,
    value: ValueId,
}

/// The window of log positions a read may have seen: every version that was the newest
/// at some position `p` with `lo <= p <= hi`, where position `p` means "the first `p` logged
/// transactions have committed".
#[derive(Clone, Copy, Debug)]
struct Window {
    lo: usize,
    hi: usize,
}

/// Recovers the certificate of a MariaDB (InnoDB) history from the binary log of the same
/// run, and writes position-derived `start_ts`/`commit_ts` into the history; unknown
/// outcomes the log settles become committed or aborted.
///
/// `matcher` decides whether a row version matches a predicate (the oracle); it is asked
/// for rows a predicate operation did not return, to tell which versions it may have seen.
///
/// # Errors
/// A [`RecoveryError`] when the `meta` facts are malformed, or history and log disagree.
pub fn recover_innodb(
    history: &mut History,
    log: &RawLog,
    matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    let facts = facts::read_facts(history)?;
    let ids: Vec<Option<u64>> = facts.iter().map(|f| f.gtid.as_deref().and_then(gtid_seq)).collect();
    let matched = match_log(history, &ids, log, |seq| seq)?;
    let h: &History = history;
    let positions = Positions::new(log.txns());
    let versions = versions_by_object(h, &matched);
    let mut objects_of: Vec<Vec<ObjId>> = vec![Vec::new(); h.tables().len()];
    for obj in versions.keys() {
        objects_of[h.object(*obj).table.index()].push(*obj);
    }
    objects_of.iter_mut().for_each(|v| v.sort_unstable());

    let mut sets: FxHashMap<OpRef, Vec<SeenVersion>> = FxHashMap::default();
    let mut stats = RecoveryStats {
        logged_txns: log.len(),
        logged_changes: log.change_count(),
        resolved_committed: matched.resolved_committed,
        resolved_aborted: matched.resolved_aborted,
        ..RecoveryStats::default()
    };
    let mut times: Vec<(Option<u64>, Option<u64>)> = vec![(None, None); h.txns.len()];
    let mut starts = Starts::default();
    let mut acknowledged = AcknowledgedCommits::default();
    acknowledged.add(
        h.txn_ids().filter_map(|t| {
            Some((h.txn(t).real_time()?.completed_at, matched.stream_pos[t.index()]? as usize))
        }),
    );
    for t in h.txn_ids() {
        if h.txn(t).status != Status::Committed {
            continue;
        }
        let own_pos = matched.stream_pos[t.index()].map(|p| p as usize);
        let cx = TxnContext { h, t, versions: &versions, matched: &matched, matcher };
        let placed = starts.place(
            &positions,
            Some(log.len()),
            Committed {
                facts: &facts[t.index()],
                session: h.txn(t).session,
                own_pos,
                acknowledged: acknowledged.floor(h.txn(t).real_time()),
            },
            |reported, floor, end| snapshot_placement(&cx, &objects_of, reported, floor, end),
        )?;
        let end = placed.end;
        let current = Window { lo: placed.start.min(end), hi: end };
        let snapshot = placed.snapshot.map(|p| Window { lo: p, hi: p });
        // A locking read holds its row locks until commit, so in a transaction the log
        // ordered it saw the newest versions at its own position.
        let locked = if placed.commit_point_known { Window { lo: end, hi: end } } else { current };
        let (plain, current_read) = match facts[t.index()].isolation.as_str() {
            "serializable" => (locked, locked),
            "repeatable-read" => (snapshot.unwrap_or(current), locked),
            _ => (current, current),
        };
        times[t.index()] = (Some(placed.ticks.0), Some(placed.ticks.1));
        let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let at = OpRef { txn: t, op: i as u32 };
            match op {
                Op::Read { obj, value } if !own.contains_key(obj) => {
                    let locking = h.txn(t).op_meta(i).is_some() && facts::read_op(h, t, i)?.locking;
                    let window = if locking { current_read } else { plain };
                    if let Some(seen) = cx.item_read(*obj, *value, window, &mut stats) {
                        sets.insert(at, vec![seen]);
                        stats.item_read_versions += 1;
                    }
                }
                Op::Select { predicate, rows }
                | Op::Update { predicate, rows, .. }
                | Op::Delete { predicate, rows } => {
                    let plain_select = matches!(op, Op::Select { .. });
                    let window = if plain_select { plain } else { current_read };
                    let table = h.predicate(*predicate).table;
                    let mut set = Vec::new();
                    for &obj in &objects_of[table.index()] {
                        let returned = rows.iter().find(|r| r.obj == obj).map(|r| r.value);
                        let writer = match (own.get(&obj), returned) {
                            (Some(_), _) => Writer::Txn(t),
                            (None, Some(_)) if !plain_select => cx.overwritten(obj),
                            (None, Some(value)) => cx.by_value(obj, value, window, &mut stats),
                            (None, None) => cx.not_matching(obj, at, *predicate, window, &mut stats)?,
                        };
                        if !(writer == Writer::Initial && cx.initial_is_absent(obj)) {
                            set.push(SeenVersion { obj, writer });
                        }
                    }
                    sets.insert(at, set);
                    stats.version_sets += 1;
                }
                Op::Aggregate { predicate, .. } => {
                    let window = plain;
                    let table = h.predicate(*predicate).table;
                    let op_facts = facts::read_op(h, t, i)?;
                    let ranged = aggregated_rows(h, table, &op_facts);
                    let mut set = Vec::new();
                    for &obj in &objects_of[table.index()] {
                        let writer = match (own.get(&obj), &ranged) {
                            (Some(_), _) => Writer::Txn(t),
                            (None, Some((column, rows))) => match rows.iter().find(|(o, _)| *o == obj) {
                                Some((_, v)) => cx.by_column(obj, *column, *v, window, &mut stats),
                                None => cx.not_matching(obj, at, *predicate, window, &mut stats)?,
                            },
                            (None, None) => cx.earliest(obj, window, &mut stats),
                        };
                        if !(writer == Writer::Initial && cx.initial_is_absent(obj)) {
                            set.push(SeenVersion { obj, writer });
                        }
                    }
                    sets.insert(at, set);
                    stats.version_sets += 1;
                }
                _ => {}
            }
            record_own_writes(op, &mut own);
        }
    }
    let mut warnings = Vec::new();
    if stats.ambiguous_reads > 0 {
        warnings.push(format!(
            "{} row version(s) seen by reads outside a REPEATABLE READ snapshot could not be pinned down \
             (several versions were the newest while the statement could run and none was returned); \
             the earliest was taken (docs/MARIADB.md)",
            stats.ambiguous_reads
        ));
    }
    if stats.outside_window > 0 {
        warnings.push(format!(
            "{} returned row version(s) were not the newest while their transaction ran, by the binary \
             log's positions; the version was taken from the row's value",
            stats.outside_window
        ));
    }
    let (contradicted, unprovable) = (starts.contradicted, starts.unprovable);
    if contradicted > 0 {
        warnings.push(format!(
            "{contradicted} REPEATABLE READ snapshot position(s) MariaDB reported are ruled out by what the \
             transaction read or by commits acknowledged before it began; each start was placed where \
             those facts put it (binlog_snapshot_position is not exactly the read view: docs/MARIADB.md)"
        ));
    }
    if unprovable > 0 {
        warnings.push(format!(
            "{unprovable} transaction(s) would violate snapshot isolation at the position MariaDB reported \
             but not at another its reads allow; that position is not exactly the read view, so no \
             anomaly is claimed for them (docs/MARIADB.md)"
        ));
    }
    let certificate = Certificate {
        version_order: Some(matched.version_order.clone()),
        version_sets: Some(sets),
        snapshot_sets: None,
        serialization_order: None,
        // The binary log names each version's writer (its GTID).
        writer_identity: true,
        hidden_reads: Vec::new(),
    };
    for (txn, (start, commit)) in history.txns.iter_mut().zip(times) {
        if let (Some(start), Some(commit)) = (start, commit) {
            txn.set_start_ts(Some(Timestamp::new(start)));
            txn.set_commit_ts(Some(Timestamp::new(commit)));
        }
    }
    history.serial_order = serial_order(&facts);
    Ok(Recovered { certificate, stats, warnings })
}

/// The serial order of the ticks: at SERIALIZABLE every read locks until commit, so the
/// binary-log (commit) order is the order the transactions serialized in; at weaker levels
/// it need not be.
fn serial_order(facts: &[InnoDbTxnFacts]) -> SerialOrder {
    commit_order_if_serializable(facts.iter().map(|f| f.isolation.as_str()))
}

/// Where REPEATABLE READ transaction `t`'s snapshot lies ([`placement`]), and the positions
/// the facts allow: what its plain reads saw (item reads, and the rows plain SELECTs
/// returned and did not return, before its own writes), at or after `floor` (commits
/// acknowledged before it began, its session's earlier transactions), at most `end` (its
/// own commit). Snapshot isolation further requires every version its writes overwrote to
/// be visible. The predicate oracle is asked only when the reported position does not
/// already satisfy both. A transaction with an aggregate (whose rows name no versions) is
/// moved only when its other reads rule the reported position out.
fn snapshot_placement(
    cx: &TxnContext<'_>,
    objects_of: &[Vec<ObjId>],
    reported: usize,
    floor: usize,
    end: usize,
) -> Result<(usize, placement::PositionSet), RecoveryError> {
    let (h, t) = (cx.h, cx.t);
    let evidence = read_evidence(
        h.txn(t),
        t,
        |obj| cx.versions(obj),
        |predicate| objects_of[h.predicate(predicate).table.index()].as_slice(),
        floor,
        end,
    )?;
    let ReadEvidence { mut read, unreturned, aggregates, lowest } = evidence;
    let required = placement::PositionSet::between(lowest, end);
    if read.intersect(&required).contains(reported) {
        return Ok((reported, read));
    }
    for (op, predicate, missing) in unreturned {
        for obj in missing {
            let versions = cx.others(obj);
            let mut unmatched = Vec::new();
            for v in &versions {
                let matches = v.value != ValueId::ABSENT
                    && (cx.matcher)(h, predicate, obj, v.value).map_err(|message| RecoveryError::Oracle {
                        txn: h.txn_label(t),
                        op: op as usize,
                        object: h.object_label(obj),
                        message,
                    })?;
                unmatched.push(!matches);
            }
            read.narrow(placement::admitted_where(&versions, &unmatched));
        }
    }
    let required = if aggregates { read.clone() } else { required };
    Ok((placement::place(reported, &read, &required), read))
}

/// What a REPEATABLE READ transaction's plain reads allow before the predicate oracle is
/// asked (the part of [`snapshot_placement`] offline recovery and the live rule share).
struct ReadEvidence {
    /// The positions between the floor and the commit point where every item read and
    /// every row a plain SELECT returned was the newest version.
    read: placement::PositionSet,
    /// Plain selects with what each did not return: `(op, predicate, objects)`.
    unreturned: Vec<(u32, isocert_history::PredId, Vec<ObjId>)>,
    /// Whether the transaction has an aggregate (whose rows name no versions).
    aggregates: bool,
    /// The least position where every version its writes overwrote is visible.
    lowest: usize,
}

/// [`ReadEvidence`] of transaction `t` (`txn`), with `versions(obj)` the object's versions
/// (oldest first, `t`'s own included) and `objects_of(predicate)` the objects of the
/// predicate's table.
fn read_evidence<'v>(
    txn: &isocert_history::Transaction,
    t: TxnId,
    versions: impl Fn(ObjId) -> &'v [Version],
    objects_of: impl Fn(isocert_history::PredId) -> &'v [ObjId],
    floor: usize,
    end: usize,
) -> Result<ReadEvidence, RecoveryError> {
    let others = |obj: ObjId| -> Vec<Version> {
        versions(obj).iter().copied().filter(|v| v.writer != Writer::Txn(t)).collect()
    };
    let mut read = placement::PositionSet::between(floor, end);
    let mut unreturned = Vec::new();
    let mut aggregates = false;
    let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
    for (i, op) in txn.ops.iter().enumerate() {
        match op {
            Op::Read { obj, value } if !own.contains_key(obj) => {
                let locking = txn.op_meta(i).is_some() && facts::read_op_of(txn, i)?.locking;
                if !locking {
                    read.narrow(placement::read_admits(&others(*obj), *value));
                }
            }
            Op::Select { predicate, rows } => {
                for r in rows.iter().filter(|r| !own.contains_key(&r.obj)) {
                    read.narrow(placement::read_admits(&others(r.obj), r.value));
                }
                let missing = objects_of(*predicate)
                    .iter()
                    .copied()
                    .filter(|o| !own.contains_key(o) && !rows.iter().any(|r| r.obj == *o))
                    .collect();
                unreturned.push((i as u32, *predicate, missing));
            }
            Op::Aggregate { .. } => aggregates = true,
            _ => {}
        }
        record_own_writes(op, &mut own);
    }
    let lowest = own
        .keys()
        .filter_map(|obj| placement::overwritten_pos(versions(*obj), Writer::Txn(t)))
        .map(|p| p + 1)
        .max()
        .unwrap_or(0);
    Ok(ReadEvidence { read, unreturned, aggregates, lowest })
}

/// Per object, its versions: the initial one (if the history has one, else "unborn"), then
/// one per logged writer, in log order.
fn versions_by_object(h: &History, m: &Matched) -> FxHashMap<ObjId, Vec<Version>> {
    let mut out: FxHashMap<ObjId, Vec<Version>> = FxHashMap::default();
    let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let objects = initial.keys().chain(m.version_order.keys()).copied().collect::<Vec<_>>();
    for obj in objects {
        if out.contains_key(&obj) {
            continue;
        }
        let mut list = vec![Version {
            pos: None,
            writer: Writer::Initial,
            value: initial.get(&obj).copied().unwrap_or(ValueId::ABSENT),
        }];
        for &w in m.version_order.get(&obj).map(Vec::as_slice).unwrap_or(&[]) {
            list.push(Version {
                pos: m.stream_pos[w.index()].map(|p| p as usize),
                writer: Writer::Txn(w),
                value: m.final_value.get(&(w, obj)).copied().unwrap_or(ValueId::ABSENT),
            });
        }
        out.insert(obj, list);
    }
    out
}

/// The rows an aggregate ranged over (its op facts), as objects with their value-column
/// value, and that column; `None` without such facts.
fn aggregated_rows(
    h: &History,
    table: isocert_history::TableId,
    facts: &InnoDbOpFacts,
) -> Option<(isocert_history::ColId, Vec<(ObjId, i64)>)> {
    let column = h.table(table).column(facts.value_column.as_deref()?)?;
    let rows = facts.aggregated_rows.as_ref()?;
    let objects = rows
        .iter()
        .filter_map(|[key, v]| Some((h.object_by_key(table, &isocert_history::Scalar::Int(*key))?, *v)))
        .collect();
    Some((column, objects))
}

/// What deciding one transaction's reads needs.
struct TxnContext<'a> {
    h: &'a History,
    t: TxnId,
    versions: &'a FxHashMap<ObjId, Vec<Version>>,
    matched: &'a Matched,
    matcher: RowMatcher<'a>,
}

impl TxnContext<'_> {
    fn versions(&self, obj: ObjId) -> &[Version] {
        self.versions.get(&obj).map(Vec::as_slice).unwrap_or(&[])
    }

    fn initial_is_absent(&self, obj: ObjId) -> bool {
        self.versions(obj).first().is_none_or(|v| v.value == ValueId::ABSENT)
    }

    /// The versions of `obj`, oldest first, but the reader's own (it reads its own writes
    /// through its own map, not through the log).
    fn others(&self, obj: ObjId) -> Vec<Version> {
        self.versions(obj).iter().copied().filter(|v| v.writer != Writer::Txn(self.t)).collect()
    }

    /// The versions of `obj` that were the newest at some position of `window`, oldest
    /// first, leaving out the reader's own (it reads its own writes through `own`).
    fn candidates(&self, obj: ObjId, window: Window) -> Vec<Version> {
        let all = self.others(obj);
        // The newest version committed before `lo`: the last with pos < lo (initial: always).
        let first = all.iter().rposition(|v| v.pos.is_none_or(|p| p < window.lo)).unwrap_or(0);
        all[first..].iter().copied().filter(|v| v.pos.is_none_or(|p| p < window.hi.max(window.lo))).collect()
    }

    /// The version a row UPDATE or DELETE overwrote: the one before the transaction's own.
    fn overwritten(&self, obj: ObjId) -> Writer {
        let order = self.matched.version_order.get(&obj).map(Vec::as_slice).unwrap_or(&[]);
        match order.iter().position(|w| *w == self.t) {
            Some(0) | None => Writer::Initial,
            Some(k) => Writer::Txn(order[k - 1]),
        }
    }

    /// The version holding `value` (values are unique per object, absent aside).
    fn by_value(&self, obj: ObjId, value: ValueId, window: Window, stats: &mut RecoveryStats) -> Writer {
        let candidates = self.candidates(obj, window);
        if let Some(v) = candidates.iter().find(|v| v.value == value) {
            return v.writer;
        }
        match self.versions(obj).iter().find(|v| v.value == value && v.writer != Writer::Txn(self.t)) {
            Some(v) => {
                stats.outside_window += 1;
                v.writer
            }
            None => candidates.first().map_or(Writer::Initial, |v| v.writer),
        }
    }

    /// The version whose `column` holds `v` (the unique value column names its version).
    fn by_column(
        &self,
        obj: ObjId,
        column: isocert_history::ColId,
        v: i64,
        window: Window,
        stats: &mut RecoveryStats,
    ) -> Writer {
        let wanted = isocert_history::Scalar::Int(v);
        let holds = |value: ValueId| match self.h.value(value) {
            isocert_history::Value::Row(row) => *row.get(column) == wanted,
            _ => false,
        };
        match self.versions(obj).iter().find(|ver| ver.writer != Writer::Txn(self.t) && holds(ver.value)) {
            Some(ver) => self.by_value(obj, ver.value, window, stats),
            None => self.earliest(obj, window, stats),
        }
    }

    /// The version an item read saw, when its value does not name one version (absent
    /// values: unborn and every delete); `None` when the value names it.
    fn item_read(
        &self,
        obj: ObjId,
        value: ValueId,
        window: Window,
        stats: &mut RecoveryStats,
    ) -> Option<SeenVersion> {
        if value != ValueId::ABSENT {
            return None;
        }
        let holders = self.versions(obj).iter().filter(|v| v.value == ValueId::ABSENT).count();
        if holders < 2 {
            return None;
        }
        Some(SeenVersion { obj, writer: self.by_value(obj, value, window, stats) })
    }

    /// The version a predicate saw of a row it did not return: a candidate that does not
    /// match (absent ones never do).
    fn not_matching(
        &self,
        obj: ObjId,
        at: OpRef,
        predicate: isocert_history::PredId,
        window: Window,
        stats: &mut RecoveryStats,
    ) -> Result<Writer, RecoveryError> {
        let candidates = self.candidates(obj, window);
        let mut fitting = Vec::new();
        for v in &candidates {
            let matches = v.value != ValueId::ABSENT
                && (self.matcher)(self.h, predicate, obj, v.value).map_err(|message| {
                    RecoveryError::Oracle {
                        txn: self.h.txn_label(self.t),
                        op: at.op as usize,
                        object: self.h.object_label(obj),
                        message,
                    }
                })?;
            if !matches {
                fitting.push(*v);
            }
        }
        let chosen = fitting.first().or(candidates.first()).map_or(Writer::Initial, |v| v.writer);
        if fitting.len() > 1 && fitting.iter().any(|v| v.writer != fitting[0].writer) {
            stats.ambiguous_reads += 1;
        }
        Ok(chosen)
    }

    /// The earliest candidate (aggregates return no rows to pin versions down).
    fn earliest(&self, obj: ObjId, window: Window, stats: &mut RecoveryStats) -> Writer {
        let candidates = self.candidates(obj, window);
        if candidates.len() > 1 {
            stats.ambiguous_reads += 1;
        }
        candidates.first().map_or(Writer::Initial, |v| v.writer)
    }
}

#[cfg(test)]
mod tests;
