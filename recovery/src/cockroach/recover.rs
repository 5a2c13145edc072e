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
    recover_by_timestamps, LogMatch, RawLog, Recovered, RecoveryError, RowMatcher, TimestampFacts,
    VersionSource,
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
/// - REPEATABLE READ (snapshot): its snapshot is placed at the newest version its reads
///   returned (`crdb_internal_mvcc_timestamp`), its commit timestamp is the log's;
/// - READ COMMITTED: each statement reads at the newest version it returned;
///   a transaction that returned no stored version reads at its commit timestamp, or, if
///   it wrote nothing either, at the start of the log.
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
    for t in h.txn_ids() {
        let f = &txn[t.index()];
        let level = effective_level(f);
        let commit = facts.commit[t.index()];
        if level == "serializable" {
            facts.start[t.index()] = commit.map(just_below);
            continue;
        }
        let per_statement = level == "read-committed";
        let mut written: FxHashSet<ObjId> = FxHashSet::default();
        let mut newest: Option<Timestamp> = None;
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
            let mut op_newest: Option<Timestamp> = None;
            for (obj, m) in seen {
                if written.contains(&obj) {
                    continue; // its own provisional version
                }
                let ts = parse_hlc(m).map_err(|e| bad(h, t, &format!("ops[{i}].meta"), e))?;
                op_newest = op_newest.max(Some(ts));
            }
            if per_statement {
                if let Some(ts) = op_newest {
                    facts.read_ts.insert(OpRef { txn: t, op: i as u32 }, ts);
                }
            }
            newest = newest.max(op_newest);
            written.extend(objects_written(op));
        }
        facts.start[t.index()] = match (per_statement, newest, commit) {
            (false, Some(ts), _) => Some(ts),
            (_, _, Some(c)) => Some(c),
            (_, Some(ts), None) => Some(ts),
            (_, None, None) => log_start.or(Some(Timestamp::new(0))),
        };
    }
    let mut recovered =
        recover_by_timestamps(history, VersionSource::Log { log, by: LogMatch::CommitTimestamp }, &facts)?;
    recovered.stats.resolved_aborted += settled_aborted;
    Ok(recovered)
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
