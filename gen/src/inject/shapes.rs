//! Injections that append a few transactions after everything generated.
//!
//! Appended transactions take timestamps after every generated event, run in sessions 0, 1
//! and 2 (after those sessions' last transactions), and touch keys 0, 1 and 2 (`x`, `y`,
//! `z`) or fresh keys past `keys`, so the anomaly they form is the only one in the history.

use rustc_hash::FxHashMap;

use super::edit::{describe, garbage_for};
use super::Injection;
use crate::record::{OpRec, Outcome, PredSpec, RowVal, Sink, TxnRecord, Val};
use crate::sim::Sim;
use crate::store::Version;
use crate::{DataModel, GenError};

const X: u32 = 0;
const Y: u32 = 1;
const Z: u32 = 2;

/// Emits one appended transaction, installing its writes at `commit` (in the store and the
/// certificate); returns its id.
fn emit(
    sim: &mut Sim<'_>,
    sink: &mut dyn Sink,
    session: u32,
    start: u64,
    commit: Option<u64>,
    ops: Vec<OpRec>,
) -> Result<u32, GenError> {
    let id = sim.next_id;
    sim.next_id += 1;
    let mut installed: Vec<(u32, Val)> = Vec::new();
    let mut put = |obj: u32, val: Val| match installed.iter_mut().find(|(o, _)| *o == obj) {
        Some(slot) => slot.1 = val,
        None => installed.push((obj, val)),
    };
    for op in &ops {
        match op {
            OpRec::Write { obj, val } => put(*obj, *val),
            OpRec::Update { rows, .. } => rows.iter().for_each(|&(o, r)| put(o, Val::Row(r))),
            OpRec::Delete { rows, .. } => rows.iter().for_each(|&o| put(o, Val::Absent)),
            _ => {}
        }
    }
    let outcome = if commit.is_some() { Outcome::Committed } else { Outcome::Aborted };
    if let Some(ts) = commit {
        for &(obj, val) in &installed {
            sim.store.install(obj, Version { ts, writer: id, val }, sim.clock);
        }
    }
    let objs: Vec<u32> = installed.iter().map(|(o, _)| *o).collect();
    let rec = TxnRecord { id, session, outcome, start_ts: start, commit_ts: commit, ops };
    sim.emit(&rec, &objs, sink)?;
    Ok(id)
}

fn fresh(sim: &mut Sim<'_>) -> Val {
    match sim.model {
        DataModel::SqlTable => Val::Row(sim.random_row()),
        _ => Val::Int(sim.next_stamp()),
    }
}

fn latest(sim: &Sim<'_>, obj: u32) -> Val {
    sim.store.latest(obj).val
}

fn read(obj: u32, val: Val) -> OpRec {
    OpRec::Read { obj, val }
}

fn write(obj: u32, val: Val) -> OpRec {
    OpRec::Write { obj, val }
}

/// Plants an appended shape.
pub(crate) fn append(sim: &mut Sim<'_>, sink: &mut dyn Sink, kind: Injection) -> Result<(), GenError> {
    let text = match kind {
        Injection::G0 => g0(sim, sink)?,
        Injection::G1a => {
            let a = fresh(sim);
            let s1 = sim.tick();
            let ta = emit(sim, sink, 0, s1, None, vec![write(X, a)])?;
            let s2 = sim.tick();
            let tb = emit(sim, sink, 1, s2, Some(s2), vec![read(X, a)])?;
            format!("T{tb} read key {X} = {} written by the aborted T{ta}", describe(a))
        }
        Injection::G1b => {
            let (a1, a2) = (fresh(sim), fresh(sim));
            let (s1, c1) = (sim.tick(), sim.tick());
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a1), write(X, a2)])?;
            let s2 = sim.tick();
            let tb = emit(sim, sink, 1, s2, Some(s2), vec![read(X, a1)])?;
            format!("T{tb} read key {X} = {}, which T{ta} overwrote before committing", describe(a1))
        }
        Injection::G1c => {
            let (a, b) = (fresh(sim), fresh(sim));
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a), read(Y, b)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![write(Y, b), read(X, a)])?;
            format!("T{ta} and T{tb} read each other's writes of keys {Y} and {X}")
        }
        Injection::G2Item => {
            let (vx, vy, vz) = (latest(sim, X), latest(sim, Y), latest(sim, Z));
            let (a, b, c) = (fresh(sim), fresh(sim), fresh(sim));
            let [s1, s2, s3, c1, c2, c3] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![read(X, vx), write(Y, a)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![read(Y, vy), write(Z, b)])?;
            let tc = emit(sim, sink, 2, s3, Some(c3), vec![read(Z, vz), write(X, c)])?;
            format!("concurrent T{ta}, T{tb}, T{tc} each read the key the next overwrites (rw cycle over keys {X}, {Y}, {Z})")
        }
        Injection::G2 => g2(sim, sink)?,
        Injection::GSi => {
            let a = fresh(sim);
            let b = fresh(sim);
            let fresh_key = sim.cfg.keys as u32 + sim.planted.extra_rows as u32;
            sim.planted.extra_rows += usize::from(sim.model == DataModel::SqlTable);
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![read(X, a), write(fresh_key, b)])?;
            format!("T{tb} started before T{ta} committed yet read its write of key {X}")
        }
        Injection::LostUpdate => {
            let v = latest(sim, X);
            let (a, b) = (fresh(sim), fresh(sim));
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![read(X, v), write(X, a)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![read(X, v), write(X, b)])?;
            format!("concurrent T{ta} and T{tb} both read key {X} = {} and both wrote it", describe(v))
        }
        Injection::WriteSkew => {
            let (vx, vy) = (latest(sim, X), latest(sim, Y));
            let (a, b) = (fresh(sim), fresh(sim));
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![read(X, vx), read(Y, vy), write(X, a)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![read(X, vx), read(Y, vy), write(Y, b)])?;
            format!("concurrent T{ta} and T{tb} read keys {X} and {Y}; T{ta} wrote {X}, T{tb} wrote {Y}")
        }
        Injection::Phantom => phantom(sim, sink)?,
        Injection::InternalInconsistency => {
            let (a1, a2) = (fresh(sim), fresh(sim));
            let (s1, c1) = (sim.tick(), sim.tick());
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a1), write(X, a2), read(X, a1)])?;
            format!(
                "T{ta} wrote key {X} = {} then {}, then read back {} instead of its latest write",
                describe(a1),
                describe(a2),
                describe(a1)
            )
        }
        Injection::Int => {
            let v = latest(sim, X);
            let a = fresh(sim);
            let (s1, c1) = (sim.tick(), sim.tick());
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a), read(X, v)])?;
            format!(
                "T{ta} wrote key {X} = {} then read {} instead of its own write",
                describe(a),
                describe(v)
            )
        }
        Injection::Ext => {
            let old = latest(sim, X);
            let p = fresh(sim);
            let (s0, c0) = (sim.tick(), sim.tick());
            let t0 = emit(sim, sink, 0, s0, Some(c0), vec![write(X, p)])?;
            let s1 = sim.tick();
            let ta = emit(sim, sink, 1, s1, Some(s1), vec![read(X, old)])?;
            format!(
                "T{ta} started after T{t0} committed key {X} = {} but read the older {}",
                describe(p),
                describe(old)
            )
        }
        Injection::DuplicateWrite => {
            let p = fresh(sim);
            let (s0, c0) = (sim.tick(), sim.tick());
            let t0 = emit(sim, sink, 0, s0, Some(c0), vec![write(X, p)])?;
            let (s1, c1) = (sim.tick(), sim.tick());
            let ta = emit(sim, sink, 1, s1, Some(c1), vec![write(X, p)])?;
            format!("T{t0} and T{ta} both installed key {X} = {}", describe(p))
        }
        Injection::Session => {
            let (a, b) = (fresh(sim), fresh(sim));
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a)])?;
            let tb = emit(sim, sink, 0, s2, Some(c2), vec![write(Y, b)])?;
            format!("T{tb} started before T{ta}, its predecessor in session 0, committed")
        }
        Injection::NoConflict => {
            let (a, b) = (fresh(sim), fresh(sim));
            let [s1, s2, c1, c2] = ticks(sim);
            let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a)])?;
            let tb = emit(sim, sink, 1, s2, Some(c2), vec![write(X, b)])?;
            format!("concurrent T{ta} and T{tb} both wrote key {X}")
        }
        Injection::GarbageRead | Injection::ResultSetMismatch | Injection::CertificateContradiction => {
            unreachable!("planted in place")
        }
    };
    sim.stats.injected = format!("{kind}: {text}");
    Ok(())
}

fn ticks<const N: usize>(sim: &mut Sim<'_>) -> [u64; N] {
    std::array::from_fn(|_| sim.tick())
}

fn g0(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<String, GenError> {
    let (a1, a2, b1, b2) = (fresh(sim), fresh(sim), fresh(sim), fresh(sim));
    let [s1, s2, c1, c2] = ticks(sim);
    let ta = emit(sim, sink, 0, s1, Some(c1), vec![write(X, a1), write(Y, a2)])?;
    let tb = emit(sim, sink, 1, s2, Some(c2), vec![write(X, b1), write(Y, b2)])?;
    if let Some(cert) = &mut sim.cert {
        let order = &mut cert.version_order[Y as usize];
        let n = order.len();
        order.swap(n - 2, n - 1);
    }
    let s3 = sim.tick();
    let tc = emit(sim, sink, 2, s3, Some(s3), vec![read(X, b1), read(Y, a2)])?;
    Ok(format!(
        "the certificate orders key {X} T{ta} before T{tb} and key {Y} T{tb} before T{ta}; T{tc} reads both newest versions"
    ))
}

/// A value of `c0` no generated row or predicate reaches.
fn outside_domain(sim: &Sim<'_>, k: i64) -> i64 {
    2 * sim.cfg.keys as i64 + 100 + k
}

/// A fresh row id (unborn until the injection inserts it).
fn fresh_row(sim: &mut Sim<'_>) -> u32 {
    let id = sim.table_rows();
    sim.planted.extra_rows += 1;
    id
}

fn select(sim: &Sim<'_>, pred: PredSpec, at: u64) -> OpRec {
    let (seen, rows) = sim.evaluate(pred, at, &FxHashMap::default());
    OpRec::Select { pred, rows, seen, seen_at: at }
}

fn g2(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<String, GenError> {
    let (v1, v2) = (outside_domain(sim, 0), outside_domain(sim, 1));
    let (r1, r2) = (PredSpec::Range { lo: v1, hi: v1 + 1 }, PredSpec::Range { lo: v2, hi: v2 + 1 });
    let (o1, o2) = (fresh_row(sim), fresh_row(sim));
    let row1 = Val::Row(RowVal { c0: v2, ..sim.random_row() });
    let row2 = Val::Row(RowVal { c0: v1, ..sim.random_row() });
    let [s1, s2, c1, c2] = ticks(sim);
    let (sel1, sel2) = (select(sim, r1, s1), select(sim, r2, s2));
    let ta = emit(sim, sink, 0, s1, Some(c1), vec![sel1, write(o1, row1)])?;
    let tb = emit(sim, sink, 1, s2, Some(c2), vec![sel2, write(o2, row2)])?;
    Ok(format!(
        "concurrent T{ta} and T{tb}: each selected an empty range ({} / {}) and inserted a row into the other's",
        r1.sql(),
        r2.sql()
    ))
}

fn phantom(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<String, GenError> {
    let v = outside_domain(sim, 2);
    let pred = PredSpec::Range { lo: v, hi: v + 1 };
    let o = fresh_row(sim);
    let row = Val::Row(RowVal { c0: v, ..sim.random_row() });
    let [s1, s2, c2, s3] = ticks(sim);
    let first = select(sim, pred, s1);
    let tb = emit(sim, sink, 1, s2, Some(c2), vec![write(o, row)])?;
    let second = select(sim, pred, c2);
    let ta = emit(sim, sink, 0, s1, Some(s3), vec![first, second])?;
    Ok(format!(
        "T{ta} selected {} twice; the second time it saw row {o}, inserted by T{tb} which committed after T{ta} started",
        pred.sql()
    ))
}

/// Fallback when no generated read was found: an appended read-only transaction reads garbage.
pub(crate) fn garbage_read(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<(), GenError> {
    let like = latest(sim, X);
    let garbage = garbage_for(sim, like);
    let s = sim.tick();
    let ta = emit(sim, sink, 0, s, Some(s), vec![read(X, garbage)])?;
    sim.stats.injected =
        format!("garbage-read: T{ta} reads key {X} = {} (a value nobody wrote)", describe(garbage));
    Ok(())
}

/// Fallback when no generated select returned a row: an appended select omits a live row.
pub(crate) fn result_set_mismatch(sim: &mut Sim<'_>, sink: &mut dyn Sink) -> Result<(), GenError> {
    let live = (0..sim.table_rows()).find_map(|o| match latest(sim, o) {
        Val::Row(r) => Some((o, r)),
        _ => None,
    });
    let Some((obj, row)) = live else {
        return Err(GenError::NoInjectionSite {
            kind: "result-set-mismatch",
            reason: "every row is deleted".into(),
        });
    };
    let pred = PredSpec::Between { lo: row.c0, hi: row.c0 };
    let s = sim.tick();
    let OpRec::Select { rows, seen, seen_at, .. } = select(sim, pred, s) else { unreachable!() };
    let kept = rows.into_iter().filter(|(o, _)| *o != obj).collect();
    let ta = emit(sim, sink, 0, s, Some(s), vec![OpRec::Select { pred, rows: kept, seen, seen_at }])?;
    sim.stats.injected =
        format!("result-set-mismatch: T{ta}'s select {} omits row {obj}, which matched", pred.sql());
    Ok(())
}
