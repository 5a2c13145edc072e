//! The timestamp-ordering rule, written once for every database that orders versions by
//! commit timestamp and lets a transaction read a snapshot at a timestamp: TiDB (Percolator
//! `start_ts`/`commit_ts`), CockroachDB (HLC), MongoDB (cluster time), Dgraph
//! (`start_ts`/`commit_ts`).
//!
//! Given, per transaction, the timestamp its snapshot reads at and its commit timestamp
//! ([`TimestampFacts`]), the certificate follows:
//!
//! - version order: per row, its writers by commit timestamp. The writers come either from a
//!   captured log ([`VersionSource::Log`]: changefeed, oplog, MVCC API; each logged
//!   transaction matched to the history's by an id the client recorded, or by its commit
//!   timestamp) or, for a database without any per-row version source, from the history's own
//!   committed writes ([`VersionSource::CommitTimestamps`]);
//! - what each read saw: the newest version committed at or before its read timestamp (the
//!   transaction's snapshot timestamp, or the statement's own where [`TimestampFacts::read_ts`]
//!   gives one, as for read committed); a transaction sees its own writes first;
//! - read times the database did not give ([`ReadWindow`]: CockroachDB below SERIALIZABLE,
//!   MongoDB's bracketed snapshots): a read gets its versions only where every time inside
//!   its bounds gives the same; otherwise it is marked `read-time-unknown` in the
//!   certificate's `hidden_reads` (uncertified), never placed at a guess;
//! - timestamps: each committed transaction's start and commit timestamps are written into
//!   the history, so that the snapshot isolation checks (Chronos, Aion, Emme's SI) judge
//!   exactly what the database promises.
//!
//! Ties: two writers of one row with the same commit timestamp cannot both be right; the
//! rule refuses them, naming both. Only the last write of a row per transaction reaches a
//! log (every source this crate reads); [`crate::matching`] compares it with the history's
//! final write of the row.

use isocert_history::{
    Certificate, HiddenRead, HiddenReason, History, IsolationLevel, ObjId, Op, OpRef, SeenVersion,
    SerialOrder, Status, Timestamp, TxnId, ValueId, Writer,
};
use rustc_hash::FxHashMap;

mod live;

pub use live::{RecordedLiveTicks, RecordedTimestamps};

use crate::matching::{final_writes, match_log, record_own_writes, Matched};
use crate::{CommittedTxn, RawLog, Recovered, RecoveryError, RecoveryStats};

/// What the client recorded about each history transaction's timestamps, indexed by
/// [`TxnId::index`].
#[derive(Clone, Debug)]
pub struct TimestampFacts {
    /// The timestamp the transaction's snapshot reads at (TiDB and Dgraph `start_ts`,
    /// CockroachDB's read timestamp, MongoDB's `atClusterTime`). Required for every
    /// committed transaction.
    pub start: Vec<Option<Timestamp>>,
    /// The commit timestamp the client learned (`@@tidb_last_txn_info`,
    /// `cluster_logical_timestamp()`, `operationTime`, Dgraph's `commit_ts`). A logged commit
    /// timestamp wins over it (with a warning when they differ); without a log it is the
    /// version order.
    pub commit: Vec<Option<Timestamp>>,
    /// Statements that read at their own timestamp rather than the transaction's snapshot
    /// (read committed statements, pessimistic locking reads).
    pub read_ts: FxHashMap<OpRef, Timestamp>,
    /// Whether the commit timestamps are the order the transactions serialized in, recorded
    /// as the history's `serial_order`: [`SerialOrder::CommitTs`] only where the database's
    /// level promises it (CockroachDB's SERIALIZABLE, [`commit_order_if_serializable`]);
    /// [`SerialOrder::Unknown`] otherwise (snapshot isolation: TiDB, MongoDB, Dgraph).
    pub serial_order: SerialOrder,
    /// Transactions whose snapshot the database did not give, only bounded
    /// ([`ReadWindow`]; CockroachDB's REPEATABLE READ): the rule places the snapshot where
    /// every time the window allows sees the same versions, or marks what it cannot place.
    /// Where set, it replaces [`Self::start`] for the transaction's reads.
    pub start_window: Vec<Option<ReadWindow>>,
    /// Statements whose read time the database did not give, only bounded (CockroachDB's
    /// READ COMMITTED); where set, it replaces [`Self::read_ts`] and the snapshot.
    pub read_window: FxHashMap<OpRef, ReadWindow>,
}

/// What is known of a read time the database did not give: bounds the client measured or
/// the database promises, and the versions the reads returned (each says the read time is
/// at or after that version's commit and before the row's next version).
///
/// A read with a window gets a version only where every time in the window gives the same
/// one: a predicate operation (or, for a transaction's snapshot, any read and any write
/// whose concurrency matters) over a row that another transaction wrote inside the window
/// is marked [`HiddenReason::ReadTimeUnknown`] (uncertified); an item read there is left to
/// be matched by its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadWindow {
    /// The read time is at or after this (`None`: no lower bound but the initial versions).
    pub from: Option<Timestamp>,
    /// The read time is strictly before this (`None`: no upper bound): the transaction's
    /// own commit timestamp, when known.
    pub until: Option<Timestamp>,
    /// The versions the reads returned, as (row, the commit timestamp of the version read:
    /// CockroachDB's `crdb_internal_mvcc_timestamp`).
    pub returned: Vec<(ObjId, Timestamp)>,
}

impl TimestampFacts {
    /// Facts for `txns` transactions with nothing known yet (and no promise of a serial order).
    pub fn with_len(txns: usize) -> Self {
        TimestampFacts {
            start: vec![None; txns],
            commit: vec![None; txns],
            read_ts: FxHashMap::default(),
            serial_order: SerialOrder::Unknown,
            start_window: vec![None; txns],
            read_window: FxHashMap::default(),
        }
    }
}

impl Default for TimestampFacts {
    fn default() -> Self {
        TimestampFacts::with_len(0)
    }
}

/// The serial order of a history whose transactions ran at `levels` (as isocert spells
/// them), on a database whose SERIALIZABLE serializes in commit order (CockroachDB's
/// timestamp ordering, InnoDB's locks held until commit): commit order when every
/// transaction ran at `serializable`, unknown when any ran at a weaker level (its reads
/// need not fit its commit point).
pub(crate) fn commit_order_if_serializable<'a>(levels: impl IntoIterator<Item = &'a str>) -> SerialOrder {
    if levels.into_iter().all(|l| l == IsolationLevel::Serializable.as_str()) {
        SerialOrder::CommitTs
    } else {
        SerialOrder::Unknown
    }
}

/// Where the rule learns who wrote each row.
#[derive(Clone, Copy, Debug)]
pub enum VersionSource<'a> {
    /// A captured log whose transactions carry [`CommittedTxn::commit_ts`], in commit order.
    Log {
        /// The log.
        log: &'a RawLog,
        /// How its transactions are matched to the history's.
        by: LogMatch<'a>,
    },
    /// No log: every committed transaction of the history is a writer at its
    /// [`TimestampFacts::commit`] timestamp (Dgraph, whose HTTP API gives commit timestamps
    /// but no per-row versions).
    CommitTimestamps,
}

/// How a logged transaction is matched to a history transaction.
#[derive(Clone, Copy, Debug)]
pub enum LogMatch<'a> {
    /// By id: the log's `xid` equals the id the client recorded (`ids[t]`; TiDB: `start_ts`).
    Xid(&'a [Option<u64>]),
    /// By commit timestamp: the log's `commit_ts` equals [`TimestampFacts::commit`]
    /// (CockroachDB's changefeed `updated` and `cluster_logical_timestamp()`).
    CommitTimestamp,
}

/// One version of a row: its writer's commit timestamp (`None` for the initial version),
/// writer and value.
#[derive(Clone, Copy, Debug)]
struct Version {
    commit_ts: Option<Timestamp>,
    writer: Writer,
    value: ValueId,
}

/// Recovers the certificate of a history by timestamp ordering (module doc), writing each
/// committed transaction's `start_ts`/`commit_ts` into the history; unknown outcomes a log
/// settles become committed or aborted.
///
/// # Errors
/// A [`RecoveryError`] when a committed transaction has no snapshot or commit timestamp,
/// two writers of a row share a commit timestamp, or history and log disagree.
pub fn recover_by_timestamps(
    history: &mut History,
    source: VersionSource<'_>,
    facts: &TimestampFacts,
) -> Result<Recovered, RecoveryError> {
    let (matched, logged_commit, mut stats) = match source {
        VersionSource::Log { log, by } => {
            let matched = match by {
                LogMatch::Xid(ids) => match_log(history, ids, log, |x| x)?,
                LogMatch::CommitTimestamp => match_by_commit_ts(history, log, &facts.commit)?,
            };
            let logged: Vec<Option<Timestamp>> =
                matched.stream_pos.iter().map(|p| p.and_then(|p| log.txns()[p as usize].commit_ts)).collect();
            let stats = RecoveryStats {
                logged_txns: log.len(),
                logged_changes: log.change_count(),
                resolved_committed: matched.resolved_committed,
                resolved_aborted: matched.resolved_aborted,
                ..RecoveryStats::default()
            };
            (matched, logged, stats)
        }
        VersionSource::CommitTimestamps => {
            let matched = writers_by_commit_ts(history, facts)?;
            let n = history.txns.len();
            (matched, vec![None; n], RecoveryStats::default())
        }
    };
    let h: &History = history;
    let mut warnings = Vec::new();

    // Each committed transaction's (snapshot, commit) timestamps; the log's commit
    // timestamp wins, and a transaction that wrote nothing commits at its snapshot.
    let mut times: Vec<Option<(Timestamp, Timestamp)>> = vec![None; h.txns.len()];
    for t in h.txn_ids() {
        if h.txn(t).status != Status::Committed {
            continue;
        }
        let start = facts.start[t.index()].ok_or_else(|| RecoveryError::Meta {
            txn: h.txn_label(t),
            field: "meta.start_ts".into(),
            message: "a committed transaction needs the timestamp its snapshot reads at".into(),
        })?;
        let client = facts.commit[t.index()];
        let logged = logged_commit[t.index()];
        if let (Some(logged), Some(client)) = (logged, client) {
            if logged != client {
                warnings.push(format!(
                    "{}: the client recorded commit timestamp {client}, the log {logged}; the log's is used",
                    h.txn_label(t)
                ));
            }
        }
        match (logged, client) {
            (Some(_), _) => stats.sources.commits_from_log += 1,
            (None, Some(_)) => stats.sources.commits_returned += 1,
            (None, None) => {}
        }
        let commit = match (logged, client) {
            (Some(c), _) => c,
            (None, Some(c)) if matches!(source, VersionSource::CommitTimestamps) => c,
            // A transaction the log does not show wrote nothing there; it commits at no
            // timestamp of its own and is equivalent to one committing at its snapshot.
            (None, c) => c.unwrap_or(start),
        };
        times[t.index()] = Some((start, commit));
    }

    // Per row, its versions: the initial one, then each writer's, by commit timestamp.
    let initial: FxHashMap<ObjId, ValueId> = h.initial.iter().copied().collect();
    let mut versions: FxHashMap<ObjId, Vec<Version>> = FxHashMap::default();
    for obj in initial.keys().chain(matched.version_order.keys()).copied() {
        if versions.contains_key(&obj) {
            continue;
        }
        let mut list = vec![Version {
            commit_ts: None,
            writer: Writer::Initial,
            value: initial.get(&obj).copied().unwrap_or(ValueId::ABSENT),
        }];
        for &w in matched.version_order.get(&obj).map(Vec::as_slice).unwrap_or(&[]) {
            let commit_ts = times[w.index()].map(|(_, c)| c);
            if let (Some(prev), Some(ts)) = (list.last(), commit_ts) {
                if let (Writer::Txn(p), Some(pts)) = (prev.writer, prev.commit_ts) {
                    if pts == ts {
                        return Err(RecoveryError::Meta {
                            txn: h.txn_label(w),
                            field: "commit_ts".into(),
                            message: format!(
                                "commits {} at {ts}, the same timestamp as {}, which wrote it too",
                                h.object_label(obj),
                                h.txn_label(p)
                            ),
                        });
                    }
                }
            }
            list.push(Version {
                commit_ts,
                writer: Writer::Txn(w),
                value: matched.final_value.get(&(w, obj)).copied().unwrap_or(ValueId::ABSENT),
            });
        }
        versions.insert(obj, list);
    }
    let mut objects_of: Vec<Vec<ObjId>> = vec![Vec::new(); h.tables().len()];
    for obj in versions.keys() {
        objects_of[h.object(*obj).table.index()].push(*obj);
    }
    objects_of.iter_mut().for_each(|v| v.sort_unstable());

    let mut placing = Placing { h, facts, versions: &versions, objects_of: &objects_of, stats: &mut stats };
    let (sets, hidden_reads) = placing.version_sets(&mut times, &mut warnings);
    let certificate = Certificate {
        version_order: Some(matched.version_order),
        version_sets: Some(sets),
        snapshot_sets: None,
        serialization_order: None,
        writer_identity: false,
        hidden_reads,
    };
    for (txn, time) in history.txns.iter_mut().zip(&times) {
        if let Some((start, commit)) = time {
            txn.set_start_ts(Some(*start));
            txn.set_commit_ts(Some(*commit));
        }
    }
    history.serial_order = facts.serial_order;
    Ok(Recovered { certificate, stats, warnings })
}

/// What [`recover_by_timestamps`] needs to give each read its versions.
struct Placing<'a> {
    h: &'a History,
    facts: &'a TimestampFacts,
    /// Per row, its versions by commit timestamp (the initial one first).
    versions: &'a FxHashMap<ObjId, Vec<Version>>,
    /// Per table, its rows.
    objects_of: &'a [Vec<ObjId>],
    stats: &'a mut RecoveryStats,
}

/// Where a read reads: at a time the database gave, or within a [`ReadWindow`] (the
/// bounds it sets, and the rows whose version a read returned).
#[derive(Clone, Copy)]
enum ReadAt<'w> {
    Known(Timestamp),
    Window { from: Option<Timestamp>, until: Option<Timestamp>, returned: &'w [(ObjId, Timestamp)] },
}

/// The earliest timestamp: before every commit (the initial versions only).
const BEFORE_ALL: Timestamp = Timestamp::new(0);

impl Placing<'_> {
    /// The newest version of `obj` committed at or before `ts`.
    fn newest_at(&self, obj: ObjId, ts: Timestamp) -> Option<Version> {
        let list = self.versions.get(&obj)?;
        list.iter().rev().find(|v| v.commit_ts.is_none_or(|c| c <= ts)).copied()
    }

    /// The window's bounds, narrowed by the versions it returned: at or after each one's
    /// commit, before its row's next version.
    fn bounds<'w>(&self, w: &'w ReadWindow) -> ReadAt<'w> {
        let (mut from, mut until) = (w.from, w.until);
        for &(obj, ts) in &w.returned {
            from = from.max(Some(ts));
            let next =
                self.versions.get(&obj).and_then(|l| l.iter().find_map(|v| v.commit_ts.filter(|c| *c > ts)));
            if let Some(next) = next {
                until = Some(until.map_or(next, |u| u.min(next)));
            }
        }
        ReadAt::Window { from, until, returned: &w.returned }
    }

    /// Whether a transaction other than `reader` committed a version of `obj` strictly
    /// inside the window: then where the read falls in it decides what it saw.
    fn changes_within(&self, obj: ObjId, reader: TxnId, at: ReadAt<'_>) -> bool {
        let ReadAt::Window { from, until, returned } = at else { return false };
        if returned.iter().any(|&(o, _)| o == obj) {
            return false; // the database returned the version it saw
        }
        self.versions.get(&obj).is_some_and(|list| {
            list.iter().any(|v| {
                v.writer != Writer::Txn(reader)
                    && v.commit_ts.is_some_and(|c| from.is_none_or(|f| c > f) && until.is_none_or(|u| c < u))
            })
        })
    }

    /// Counts where the read time of a read given its versions came from.
    fn count_source(&mut self, at: ReadAt<'_>) {
        match at {
            ReadAt::Known(_) => self.stats.sources.reads_at_returned_time += 1,
            ReadAt::Window { .. } => self.stats.sources.reads_within_bounds += 1,
        }
    }

    /// The time a read is placed at: the known one, or the window's start (where nothing
    /// that matters to it changes within the window, every time in it gives the same).
    fn time(at: ReadAt<'_>) -> Timestamp {
        match at {
            ReadAt::Known(ts) => ts,
            ReadAt::Window { from, .. } => from.unwrap_or(BEFORE_ALL),
        }
    }

    /// Each read's versions (module doc), and the operations the windows leave undecided;
    /// a transaction whose snapshot is only bounded gets its start placed in `times`.
    fn version_sets(
        &mut self,
        times: &mut [Option<(Timestamp, Timestamp)>],
        warnings: &mut Vec<String>,
    ) -> (FxHashMap<OpRef, Vec<SeenVersion>>, Vec<HiddenRead>) {
        let h = self.h;
        let mut sets: FxHashMap<OpRef, Vec<SeenVersion>> = FxHashMap::default();
        let mut hidden: Vec<HiddenRead> = Vec::new();
        for t in h.txn_ids() {
            let Some((start, commit)) = times[t.index()] else { continue };
            let snapshot = self.facts.start_window[t.index()].as_ref().map(|w| self.bounds(w));
            if let Some(bounds) = snapshot {
                // A transaction that committed no write of its own commits at its snapshot.
                let placed = Self::time(bounds).min(commit);
                times[t.index()] = Some((placed, if commit == start { placed } else { commit }));
            }
            let mut own: FxHashMap<ObjId, ValueId> = FxHashMap::default();
            for (i, op) in h.txn(t).ops.iter().enumerate() {
                let opref = OpRef { txn: t, op: i as u32 };
                let statement = self.facts.read_window.get(&opref).map(|w| self.bounds(w));
                let at = statement.or(snapshot).unwrap_or_else(|| {
                    ReadAt::Known(self.facts.read_ts.get(&opref).copied().unwrap_or(start))
                });
                let undecided = self.op_versions(t, opref, op, (at, statement.is_none()), &own, &mut sets);
                if let Some(why) = undecided {
                    // An item read in a statement of its own is matched by its value; a
                    // snapshot's start is what the timestamp checkers judge it by.
                    if !(matches!(op, Op::Read { .. }) && statement.is_some()) {
                        hidden.push(HiddenRead { at: opref, why: HiddenReason::ReadTimeUnknown });
                        self.stats.unknown_read_times += 1;
                        warnings.push(format!("{} op {i}: uncertified: {why}", h.txn_label(t)));
                    }
                }
                record_own_writes(op, &mut own);
            }
        }
        (sets, hidden)
    }

    /// Gives operation `opref` (of `t`, after its writes `own`) its versions at `at`, or
    /// says why the window leaves them undecided; `snapshot`: `at` is the transaction's
    /// snapshot, whose position also decides which writers of its rows were concurrent.
    fn op_versions(
        &mut self,
        t: TxnId,
        opref: OpRef,
        op: &Op,
        (at, snapshot): (ReadAt<'_>, bool),
        own: &FxHashMap<ObjId, ValueId>,
        sets: &mut FxHashMap<OpRef, Vec<SeenVersion>>,
    ) -> Option<String> {
        let h = self.h;
        let ts = Self::time(at);
        let undecided = |obj: ObjId| {
            let ReadAt::Window { from, until, .. } = at else { return String::new() };
            let show = |b: Option<Timestamp>| b.map_or_else(|| "-".to_string(), |b| b.to_string());
            format!(
                "the database gave no read time for it; the versions returned and the bounds known place it \
                 in [{}, {}), where another transaction committed a version of {}",
                show(from),
                show(until),
                h.object_label(obj)
            )
        };
        match op {
            Op::Read { obj, .. } if !own.contains_key(obj) => {
                if self.changes_within(*obj, t, at) {
                    return Some(undecided(*obj));
                }
                if let Some(v) = self.newest_at(*obj, ts) {
                    sets.insert(opref, vec![SeenVersion { obj: *obj, writer: v.writer }]);
                    self.stats.item_read_versions += 1;
                    self.count_source(at);
                }
            }
            Op::Select { predicate, .. }
            | Op::Update { predicate, .. }
            | Op::Delete { predicate, .. }
            | Op::Aggregate { predicate, .. } => {
                let table = h.predicate(*predicate).table;
                let objects = &self.objects_of[table.index()];
                if let Some(&obj) =
                    objects.iter().find(|o| !own.contains_key(o) && self.changes_within(**o, t, at))
                {
                    return Some(undecided(obj));
                }
                let mut set = Vec::new();
                for &obj in objects {
                    if own.contains_key(&obj) {
                        set.push(SeenVersion { obj, writer: Writer::Txn(t) });
                    } else if let Some(v) = self.newest_at(obj, ts) {
                        if !(v.writer == Writer::Initial && v.value == ValueId::ABSENT) {
                            set.push(SeenVersion { obj, writer: v.writer });
                        }
                    }
                }
                sets.insert(opref, set);
                self.stats.version_sets += 1;
                self.count_source(at);
            }
            _ => {}
        }
        // A snapshot's writes: whether another writer of the row was concurrent decides
        // a lost update, so a version inside the window leaves it undecided too.
        if snapshot && matches!(at, ReadAt::Window { .. }) {
            for obj in written_by(op) {
                if self.changes_within(obj, t, at) {
                    return Some(undecided(obj));
                }
            }
        }
        None
    }
}

/// The rows `op` writes.
fn written_by(op: &Op) -> Vec<ObjId> {
    match op {
        Op::Write { obj, .. } | Op::Append { obj, .. } => vec![*obj],
        Op::Update { rows, .. } | Op::Delete { rows, .. } => rows.iter().map(|r| r.obj).collect(),
        _ => Vec::new(),
    }
}

/// Matches a log to the history by commit timestamp: both sides' timestamps are numbered
/// densely and the numbers matched as ids, so the matching (and its checks that history and
/// log agree) is [`match_log`]'s.
fn match_by_commit_ts(
    history: &mut History,
    log: &RawLog,
    commit: &[Option<Timestamp>],
) -> Result<Matched, RecoveryError> {
    let mut number: FxHashMap<Timestamp, u64> = FxHashMap::default();
    let mut id = |ts: Timestamp| {
        let next = number.len() as u64;
        *number.entry(ts).or_insert(next)
    };
    let mut numbered = RawLog::new();
    for (pos, txn) in log.txns().iter().enumerate() {
        let ts = txn.commit_ts.ok_or_else(|| RecoveryError::Meta {
            txn: format!("logged transaction {}", pos + 1),
            field: "commit_ts".into(),
            message: "a log matched by commit timestamp needs every transaction's commit_ts".into(),
        })?;
        numbered.push(CommittedTxn { xid: id(ts), ..txn.clone() });
    }
    let ids: Vec<Option<u64>> = commit.iter().map(|c| c.map(&mut id)).collect();
    match_log(history, &ids, &numbered, |x| x)
}

/// The version order when there is no log: each committed writer at its commit timestamp,
/// its final write of each row as the version. An unknown-outcome transaction cannot be
/// placed: it is left out (as if aborted) when no read could rest on its writes, and
/// refused otherwise ([`reader_of`]).
fn writers_by_commit_ts(h: &mut History, facts: &TimestampFacts) -> Result<Matched, RecoveryError> {
    let commit = &facts.commit;
    let n = h.txns.len();
    let mut m = Matched { stream_pos: vec![None; n], xid: vec![None; n], ..Matched::default() };
    let mut writers: Vec<(Timestamp, TxnId)> = Vec::new();
    let ids: Vec<TxnId> = h.txn_ids().collect();
    for t in ids {
        match h.txn(t).status {
            Status::Committed => {
                let ts = commit[t.index()].ok_or_else(|| RecoveryError::Meta {
                    txn: h.txn_label(t),
                    field: "meta.commit_ts".into(),
                    message: "a committed transaction needs its commit timestamp".into(),
                })?;
                writers.push((ts, t));
            }
            Status::Unknown => {
                let writes = final_writes(h, t)?;
                if let Some(reader) = reader_of(h, t, &writes, &facts.start) {
                    return Err(RecoveryError::Meta {
                        txn: h.txn_label(t),
                        field: "status".into(),
                        message: format!(
                            "uncertified: its outcome is unknown and there is no log to settle it, but {reader}"
                        ),
                    });
                }
                h.txns[t.index()].status = Status::Aborted;
                m.resolved_aborted += 1;
            }
            Status::Aborted => {}
        }
    }
    writers.sort_unstable();
    for (_, t) in writers {
        for (obj, value) in final_writes(h, t)? {
            m.version_order.entry(obj).or_default().push(t);
            m.final_value.insert((t, obj), value);
        }
    }
    Ok(m)
}

/// The first read of another transaction whose outcome could rest on `writer`'s writes
/// (`writes`, its final value of each row), said as a clause naming it: an item read or a
/// returned row holding a value `writer` wrote; and, from a reader whose snapshot (`start`)
/// is not known to precede `writer`'s (so that `writer`'s commit could be in it), an item
/// read of a row `writer` wrote that returned `writer`'s value (a delete's "no row"
/// included), or a select, aggregate, predicate update or delete over a table `writer`
/// wrote in: whether the row it added, changed or removed was visible decides its result.
fn reader_of(
    h: &History,
    writer: TxnId,
    writes: &[(ObjId, ValueId)],
    start: &[Option<Timestamp>],
) -> Option<String> {
    let wrote = |obj: ObjId, value: ValueId| writes.iter().any(|&(o, v)| o == obj && v == value);
    let tables: Vec<_> = writes.iter().map(|&(o, _)| h.object(o).table).collect();
    let readers = h.txn_ids().filter(|&t| t != writer && h.txn(t).status != Status::Aborted);
    for t in readers {
        let could_see = match (start[t.index()], start[writer.index()]) {
            (Some(reader), Some(writer)) => reader > writer,
            _ => true,
        };
        for (i, op) in h.txn(t).ops.iter().enumerate() {
            let at = format!("{} op {i}", h.txn_label(t));
            match op {
                Op::Read { obj, value }
                    if wrote(*obj, *value) && (*value != ValueId::ABSENT || could_see) =>
                {
                    return Some(format!("{at} read the value it wrote of {}", h.object_label(*obj)));
                }
                Op::Select { rows, .. } if rows.iter().any(|r| wrote(r.obj, r.value)) => {
                    return Some(format!("{at} returned a row holding a value it wrote"));
                }
                Op::Select { predicate, .. }
                | Op::Aggregate { predicate, .. }
                | Op::Update { predicate, .. }
                | Op::Delete { predicate, .. }
                    if could_see && tables.contains(&h.predicate(*predicate).table) =>
                {
                    return Some(format!(
                        "{at} evaluated its predicate over a table it wrote in, at a snapshot its commit could \
                         precede (the result may rest on its rows)"
                    ));
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
