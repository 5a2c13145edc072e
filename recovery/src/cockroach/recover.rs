//! CockroachDB's recovery: the facts its sessions recorded turned into the shared
//! timestamp-ordering rule's [`TimestampFacts`], the changefeed's log matched by commit
//! timestamp.

use isocert_history::{History, ObjId, Op, OpRef, Status, Timestamp, TxnId, ValueId};
use rustc_hash::{FxHashMap, FxHashSet};

use super::{parse_hlc, single_change_per_row, CrdbOpFacts, CrdbTxnFacts};
use crate::matching::{final_writes, logged_value};
use crate::meta::{op_facts, txn_facts};
use crate::timestamp_order::commit_order_if_serializable;
use crate::{
    recover_by_timestamps, LogMatch, RawLog, ReadWindow, Recovered, RecoveryError, RowMatcher,
    TimestampFacts, VersionSource,
};

/// Recovers the certificate of a CockroachDB history from its changefeed's log (a
/// [`RawLog`] whose transactions carry the HLC `commit_ts` of their changes' `updated`),
/// writing each committed transaction's timestamps into the history.
///
/// Timestamps per level (docs/COCKROACHDB.md):
/// - SERIALIZABLE: a transaction reads and writes at its commit timestamp (CockroachDB
///   refreshes its reads up to it), the `cluster_logical_timestamp()` the client recorded
///   before COMMIT, which the log's `updated` must equal; its snapshot is placed just below
///   it (before its own writes);
/// - REPEATABLE READ (snapshot) and READ COMMITTED: CockroachDB gives no read timestamp,
///   so each read gets a [`ReadWindow`] (the transaction's snapshot at REPEATABLE READ, each
///   statement's at READ COMMITTED): at or after the versions it returned
///   (`crdb_internal_mvcc_timestamp`), the earlier statements' and the session's previous
///   commit, before its rows' next versions and its own commit. A read whose window holds
///   another transaction's commit of a row it depends on gets no version set and is
///   marked `read-time-unknown` (an item read of a READ COMMITTED statement is matched by
///   its value instead); the check is then uncertified, naming it.
///
/// A writer without a recorded commit timestamp (below SERIALIZABLE, or a lost COMMIT
/// answer) is found in the log by the unique values it wrote; an unknown outcome found
/// there committed, one not found is settled as aborted (the capture covers the whole run).
///
/// # Errors
/// A [`RecoveryError`]: a predicate write whose rows the transaction also writes otherwise
/// ([`single_change_per_row`]), malformed facts, or history and log disagreeing.
pub fn recover_cockroach(
    history: &mut History,
    log: &RawLog,
    _matcher: RowMatcher<'_>,
) -> Result<Recovered, RecoveryError> {
    single_change_per_row(history)?;
    let h: &History = history;
    let n = h.txns.len();
    let mut facts = TimestampFacts::with_len(n);
    let mut txn: Vec<CrdbTxnFacts> = Vec::with_capacity(n);
    for t in h.txn_ids() {
        let f: CrdbTxnFacts = txn_facts(h, t)?;
        facts.commit[t.index()] = f.commit_timestamp().map_err(|e| bad(h, t, "meta.commit_ts", e))?;
        txn.push(f);
    }

    // Writers without a client timestamp, by the values they wrote.
    let mut by_write: FxHashMap<(ObjId, ValueId), TxnId> = FxHashMap::default();
    for t in h.txn_ids() {
        if facts.commit[t.index()].is_none() && h.txn(t).status != Status::Aborted {
            for (obj, value) in final_writes(h, t)? {
                by_write.insert((obj, value), t);
            }
        }
    }
    if !by_write.is_empty() {
        for logged in log.txns() {
            let Some(ts) = logged.commit_ts else { continue };
            let writer = logged.changes.iter().find_map(|c| {
                let table = h.table_by_name(&c.table)?;
                let obj = h.object_by_key(table, &c.key)?;
                let value = h.value_id(&logged_value(h, table, c)?)?;
                by_write.get(&(obj, value)).copied()
            });
            if let Some(t) = writer {
                facts.commit[t.index()].get_or_insert(ts);
            }
        }
    }
    let log_start = log.txns().iter().find_map(|t| t.commit_ts).map(|ts| Timestamp::hlc(ts.wall, 0));

    // An unknown outcome the log does not show committed never did: the capture waited
    // until the feed's resolved timestamp passed the end of the run.
    let mut settled_aborted = 0;
    for t in h.txn_ids() {
        if h.txn(t).status == Status::Unknown && facts.commit[t.index()].is_none() {
            settled_aborted += 1;
        }
    }
    if settled_aborted > 0 {
        let unknown: Vec<TxnId> = history
            .txn_ids()
            .filter(|&t| history.txn(t).status == Status::Unknown && facts.commit[t.index()].is_none())
            .collect();
        for t in unknown {
            history.txns[t.index()].status = Status::Aborted;
        }
    }
    let h: &History = history;
    facts.serial_order = commit_order_if_serializable(txn.iter().map(effective_level));

    // Snapshot and statement timestamps.
    let after = session_commits(h, &facts.commit);
    for t in h.txn_ids() {
        let level = effective_level(&txn[t.index()]);
        let commit = facts.commit[t.index()];
        if level == "serializable" {
            facts.start[t.index()] = commit.map(just_below);
            continue;
        }
        read_windows(h, t, level == "read-committed", after[t.index()], &mut facts)?;
        // The placeholder until the shared rule places the snapshot in its window (a
        // READ COMMITTED transaction has no snapshot: each statement reads at its own time).
        facts.start[t.index()] = commit.or(log_start).or(Some(Timestamp::new(0)));
    }
    let mut recovered =
        recover_by_timestamps(history, VersionSource::Log { log, by: LogMatch::CommitTimestamp }, &facts)?;
    recovered.stats.resolved_aborted += settled_aborted;
    Ok(recovered)
}

/// The read windows of a transaction below SERIALIZABLE (module doc of
/// [`crate::timestamp_order`]): CockroachDB gives no read timestamp there, so each read is
/// bounded from below by the versions returned (`crdb_internal_mvcc_timestamp`) and by
/// `after` (the commit of the session's previous transaction, which the gateway's HLC has
/// seen before this one begins), from above by the transaction's own commit timestamp.
/// `per_statement` (READ COMMITTED): each statement reads at a new time, no earlier than
/// the previous statement's; otherwise (REPEATABLE READ) the transaction reads one snapshot.
fn read_windows(
    h: &History,
    t: TxnId,
    per_statement: bool,
    after: Option<Timestamp>,
    facts: &mut TimestampFacts,
) -> Result<(), RecoveryError> {
    let until = facts.commit[t.index()];
    let mut written: FxHashSet<ObjId> = FxHashSet::default();
    let mut snapshot = ReadWindow { from: after, until, returned: Vec::new() };
    for (i, op) in h.txn(t).ops.iter().enumerate() {
        let of: CrdbOpFacts = op_facts(h, t, i)?;
        let mut seen: Vec<(ObjId, &str)> = Vec::new();
        match op {
            Op::Read { obj, .. } => seen.extend(of.mvcc_ts.as_deref().map(|m| (*obj, m))),
            Op::Select { rows, .. } => {
                let stamps = of.mvcc_ts_rows.as_deref().unwrap_or(&[]);
                if !stamps.is_empty() && stamps.len() != rows.len() {
                    return Err(bad(
                        h,
                        t,
                        &format!("ops[{i}].meta.mvcc_ts_rows"),
                        format!("{} timestamps for {} rows", stamps.len(), rows.len()),
                    ));
                }
                seen.extend(rows.iter().zip(stamps).map(|(r, m)| (r.obj, m.as_str())));
            }
            _ => {}
        }
        let mut returned = Vec::new();
        for (obj, m) in seen {
            if !written.contains(&obj) {
                // Not its own provisional version.
                let ts = parse_hlc(m).map_err(|e| bad(h, t, &format!("ops[{i}].meta"), e))?;
                returned.push((obj, ts));
            }
        }
        if per_statement && reads(op) {
            let from = snapshot.returned.iter().map(|r| r.1).max().max(snapshot.from);
            facts.read_window.insert(
                OpRef { txn: t, op: i as u32 },
                ReadWindow { from, until, returned: returned.clone() },
            );
        }
        snapshot.returned.extend(returned);
        written.extend(objects_written(op));
    }
    if !per_statement {
        facts.start_window[t.index()] = Some(snapshot);
    }
    Ok(())
}

/// Per transaction, the commit timestamp of the last committed transaction before it in
/// its session, if known: the session's connection (its gateway node) saw it before the
/// transaction began.
fn session_commits(h: &History, commit: &[Option<Timestamp>]) -> Vec<Option<Timestamp>> {
    let mut last: FxHashMap<isocert_history::SessionId, Option<Timestamp>> = FxHashMap::default();
    let mut out = Vec::with_capacity(h.txns.len());
    for t in h.txn_ids() {
        let session = h.txn(t).session;
        out.push(last.get(&session).copied().flatten());
        if h.txn(t).status == Status::Committed {
            last.insert(session, commit[t.index()]);
        }
    }
    out
}

/// Whether `op` reads (an item read or a predicate operation).
fn reads(op: &Op) -> bool {
    matches!(
        op,
        Op::Read { .. } | Op::Select { .. } | Op::Update { .. } | Op::Delete { .. } | Op::Aggregate { .. }
    )
}

/// The `(start, commit)` of a CockroachDB transaction at SERIALIZABLE as recovery writes
/// them, for a live run ([`crate::RecordedLiveTicks`]): the `cluster_logical_timestamp()`
/// the session read before COMMIT, and just below it (a serializable transaction reads at
/// its commit timestamp). The changefeed is matched by that timestamp, so recovery keeps it.
///
/// # Errors
/// Malformed facts, and a transaction below SERIALIZABLE (its timestamps are the feed's and
/// its statements'): live publishing stops and the rest is published after recovery.
pub fn cockroach_timestamps(
    txn: &isocert_history::Transaction,
) -> Result<(Option<Timestamp>, Option<Timestamp>), RecoveryError> {
    let f: CrdbTxnFacts = crate::meta::facts_of_txn(txn)?;
    let level = effective_level(&f);
    if level != "serializable" {
        return Err(crate::live::stop(format!(
            "T{} ran at {level}: recovery takes its timestamps from the changefeed and its statements",
            txn.name
        )));
    }
    let commit = f.commit_timestamp().map_err(|e| RecoveryError::Meta {
        txn: format!("T{}", txn.name),
        field: "meta.commit_ts".into(),
        message: e,
    })?;
    Ok((commit.map(just_below), commit))
}

/// The level CockroachDB ran a transaction at: the one it reported, else the one asked
/// for; a client that recorded neither ran at the default, SERIALIZABLE.
fn effective_level(f: &CrdbTxnFacts) -> &str {
    match f.effective_isolation.as_deref().unwrap_or(&f.isolation) {
        "" => "serializable",
        level => level,
    }
}

fn bad(h: &History, t: TxnId, field: &str, message: String) -> RecoveryError {
    RecoveryError::Meta { txn: h.txn_label(t), field: field.to_string(), message }
}

/// The HLC timestamp just below `ts`: a serializable transaction's reads are valid at its
/// commit timestamp but come before its own writes there, which the shared rule would
/// otherwise count as committed at the reads' timestamp.
fn just_below(ts: Timestamp) -> Timestamp {
    match (ts.wall, ts.logical) {
        (w, 0) if w > 0 => Timestamp::hlc(w - 1, u64::MAX),
        (w, l) => Timestamp::hlc(w, l.saturating_sub(1)),
    }
}

/// The objects `op` writes.
fn objects_written(op: &Op) -> Vec<ObjId> {
    match op {
        Op::Write { obj, .. } => vec![*obj],
        Op::Update { rows, .. } | Op::Delete { rows, .. } => rows.iter().map(|r| r.obj).collect(),
        _ => Vec::new(),
    }
}
