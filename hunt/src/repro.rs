//! The reproducer: a shrunk history as a PostgreSQL isolationtester spec (`repro.spec`),
//! and running it again with the scenario runner to see how often the anomaly comes back.
//!
//! The spec's setup creates the workload's table with the run's initial rows; each kept
//! transaction is one session (`BEGIN ISOLATION LEVEL ...` in its setup), one step per
//! operation and a last step `COMMIT` (`ROLLBACK` for an aborted one); a transaction whose
//! first operation is a write gets a first step `SELECT 1`, which takes its snapshot at its
//! start (PostgreSQL takes it at the first statement). The permutation
//! follows the order the database gave the transactions: each transaction's operations up
//! to its first write run at its start (the snapshot it read from: its recovered
//! `start_ts`, or when the certificate gives none its invocation time), its writes and
//! everything after them just before its commit (`commit_ts`, or the time its outcome
//! came back), then its commit. A write is the statement that installs exactly that
//! version: `INSERT` when the version it follows (by the certificate's version order) is
//! absent, `UPDATE` otherwise, `DELETE` for a deletion; an append is the workload's own
//! upsert (`INSERT ... ON CONFLICT (id) DO UPDATE SET val = CONCAT(...)`), or, for the
//! scenario runner that does not record such upserts yet, a blind write of the list it
//! produced ([`AppendStatements::Recordable`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use isocert_adapters::{sql_level, CaptureOptions, Database, PhysicalDesign, TableSpec};
use isocert_checker::{AnomalyKind, IsolationLevel};
use isocert_history::{
    Certificate, History, ObjId, Op, Scalar, Status, Timestamp, TxnId, Value, ValueId, Writer,
};
use isocert_scenario::{run_permutation, survey_tables, RunOptions};
use serde::Serialize;

use crate::HuntError;

/// A PostgreSQL literal of a scalar.
fn literal(v: &Scalar) -> String {
    isocert_adapters::sql_literal(v, false)
}

/// The SQL of one assignment: its constant as a literal, or its expression as recorded.
fn assignment(a: &isocert_history::Assign) -> String {
    match a {
        isocert_history::Assign::Const(v) => literal(v),
        isocert_history::Assign::Expr(e) => e.sql.to_string(),
    }
}

/// The column values of a version of `table`'s row `key`, in the spec's column order.
fn row_values(h: &History, table: &TableSpec, obj: ObjId, value: ValueId) -> Option<Vec<Scalar>> {
    let t = h.table(h.object(obj).table);
    match h.value(value) {
        Value::Absent => None,
        Value::Scalar(v) => Some(vec![h.object(obj).key.clone(), v.clone()]),
        Value::Row(row) => Some(
            table
                .columns
                .iter()
                .map(|c| t.column(c).map_or(Scalar::Null, |id| row.get(id).clone()))
                .collect(),
        ),
        Value::List(items) => {
            let text: Vec<String> = items.iter().map(|e| e.to_string()).collect();
            let key = h.object(obj).key.clone();
            Some(vec![key.clone(), key, Scalar::Text(text.join(",").into())])
        }
    }
}

/// The row an upsert proposed (its `EXCLUDED`), in the spec's column order, when one of the
/// update's expressions was recorded with it; `None` for a plain `UPDATE`.
fn proposed_row(
    h: &History,
    table: &TableSpec,
    of: isocert_history::TableId,
    set: &[(isocert_history::ColId, isocert_history::Assign)],
) -> Option<Vec<Scalar>> {
    let excluded = set.iter().find_map(|(_, a)| match a {
        isocert_history::Assign::Expr(e) => e.excluded,
        isocert_history::Assign::Const(_) => None,
    })?;
    let Value::Row(row) = h.value(excluded) else { return None };
    let t = h.table(of);
    Some(table.columns.iter().map(|c| t.column(c).map_or(Scalar::Null, |id| row.get(id).clone())).collect())
}

/// Whether the version `t`'s write of `obj` follows is absent (so its statement inserts).
fn follows_absent(h: &History, cert: &Certificate, t: TxnId, obj: ObjId) -> bool {
    let order = cert.version_order.as_ref().and_then(|o| o.get(&obj));
    let previous = match order.and_then(|o| o.iter().position(|&w| w == t)) {
        Some(0) | None => Writer::Initial,
        Some(i) => Writer::Txn(order.expect("found")[i - 1]),
    };
    match previous {
        Writer::Initial => !h.initial.iter().any(|(o, v)| *o == obj && *v != ValueId::ABSENT),
        Writer::Txn(w) => crate::shrink::leaves_absent(h, w, obj),
    }
}

/// How a reproducer writes a list append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendStatements {
    /// As the workload ran it: `INSERT ... ON CONFLICT (id) DO UPDATE SET val =
    /// CONCAT(...)`, a read-modify-write inside the database.
    Upsert,
    /// As statements the scenario runner records today: `INSERT` of the one-element list
    /// when the version it follows is absent, else `UPDATE ... SET val = '<the whole list>'`
    /// (a blind write of the list the upsert produced, by the certificate's version order).
    Recordable,
}

/// The list `t`'s append at op `upto` leaves on `obj`: the elements its predecessors in
/// the version order appended, then its own up to that op, comma-separated.
fn list_after(h: &History, cert: &Certificate, t: TxnId, obj: ObjId, upto: usize) -> String {
    let order = cert.version_order.as_ref().and_then(|o| o.get(&obj)).cloned().unwrap_or_default();
    let mut items: Vec<String> = Vec::new();
    for w in order.iter().copied().take_while(|&w| w != t) {
        for op in &h.txn(w).ops {
            if let Op::Append { obj: o, element } = op {
                if *o == obj {
                    items.push(element.to_string());
                }
            }
        }
    }
    for op in &h.txn(t).ops[..=upto] {
        if let Op::Append { obj: o, element } = op {
            if *o == obj {
                items.push(element.to_string());
            }
        }
    }
    items.join(",")
}

/// The SQL statement of operation `i` of `t`.
fn statement(
    h: &History,
    cert: &Certificate,
    table: &TableSpec,
    t: TxnId,
    i: usize,
    appends: AppendStatements,
) -> String {
    let op = &h.txn(t).ops[i];
    let name = table.name;
    let pk = table.pk();
    let key = |obj: ObjId| literal(&h.object(obj).key);
    match op {
        Op::Read { obj, .. } => format!("SELECT * FROM {name} WHERE {pk} = {};", key(*obj)),
        Op::Write { obj, value } => match row_values(h, table, *obj, *value) {
            None => format!("DELETE FROM {name} WHERE {pk} = {};", key(*obj)),
            Some(row) if follows_absent(h, cert, t, *obj) => format!(
                "INSERT INTO {name} ({}) VALUES ({});",
                table.column_list(),
                row.iter().map(literal).collect::<Vec<_>>().join(", ")
            ),
            Some(row) => {
                let set: Vec<String> = table.columns[1..]
                    .iter()
                    .zip(&row[1..])
                    .map(|(c, v)| format!("{c} = {}", literal(v)))
                    .collect();
                format!("UPDATE {name} SET {} WHERE {pk} = {};", set.join(", "), key(*obj))
            }
        },
        Op::Append { obj, .. } if appends == AppendStatements::Recordable => {
            let [id, sk, val] = table.columns else { return format!("-- append to {}", key(*obj)) };
            let list = literal(&Scalar::Text(list_after(h, cert, t, *obj, i).into()));
            let k = key(*obj);
            let earlier_own =
                h.txn(t).ops[..i].iter().any(|o| matches!(o, Op::Append { obj: o2, .. } if o2 == obj));
            if follows_absent(h, cert, t, *obj) && !earlier_own {
                format!("INSERT INTO {name} ({id}, {sk}, {val}) VALUES ({k}, {k}, {list});")
            } else {
                format!("UPDATE {name} SET {val} = {list} WHERE {id} = {k};")
            }
        }
        Op::Append { obj, element } => {
            let [id, sk, val] = table.columns else { return format!("-- append to {}", key(*obj)) };
            let e = literal(&Scalar::Text(element.to_string().into()));
            format!(
                "INSERT INTO {name} AS t ({id}, {sk}, {val}) VALUES ({k}, {k}, {e}) \
                 ON CONFLICT ({id}) DO UPDATE SET {val} = CONCAT(t.{val}, ',', {e});",
                k = key(*obj)
            )
        }
        Op::Select { predicate, .. } => {
            format!("SELECT * FROM {name} WHERE {};", h.predicate(*predicate).sql)
        }
        Op::Update { predicate, set, .. } => {
            let cols = &h.table(h.predicate(*predicate).table).columns;
            let assignments: Vec<String> =
                set.iter().map(|(c, a)| format!("{} = {}", cols[c.index()], assignment(a))).collect();
            match proposed_row(h, table, h.predicate(*predicate).table, set) {
                // An upsert: its expressions name `excluded`, which only `ON CONFLICT` has.
                Some(row) => format!(
                    "INSERT INTO {name} ({}) VALUES ({}) ON CONFLICT ({pk}) DO UPDATE SET {};",
                    table.column_list(),
                    row.iter().map(literal).collect::<Vec<_>>().join(", "),
                    assignments.join(", ")
                ),
                None => {
                    format!(
                        "UPDATE {name} SET {} WHERE {};",
                        assignments.join(", "),
                        h.predicate(*predicate).sql
                    )
                }
            }
        }
        Op::Delete { predicate, .. } => format!("DELETE FROM {name} WHERE {};", h.predicate(*predicate).sql),
        Op::Aggregate { predicate, function, column, .. } => {
            let cols = &h.table(h.predicate(*predicate).table).columns;
            let c = column.map_or_else(|| "*".to_string(), |c| cols[c.index()].to_string());
            format!("SELECT {}({c}) FROM {name} WHERE {};", function.as_str(), h.predicate(*predicate).sql)
        }
    }
}

/// Where a transaction's events fall: its start and its commit, on one scale.
fn times(h: &History, use_ts: bool, t: TxnId) -> (Timestamp, Timestamp) {
    let txn = h.txn(t);
    let real = |at: i64| Timestamp::new(at.max(0) as u64);
    if use_ts {
        let start = txn.start_ts().expect("checked");
        (start, txn.commit_ts().unwrap_or(start))
    } else {
        let rt = txn.real_time().map_or((0, i64::MAX), |r| (r.invoked_at, r.completed_at));
        (real(rt.0), real(rt.1))
    }
}

/// The isolationtester spec of `h` (a shrunk history of the workload table `table`, whose
/// transactions ran at `isolation`), under the certificate `cert`, its list appends written
/// as `appends` says. `title` heads it.
///
/// # Errors
/// [`HuntError::Database`] when `isolation` is not a level SQL transactions run at.
pub fn write_spec(
    h: &History,
    cert: &Certificate,
    table: &TableSpec,
    isolation: IsolationLevel,
    appends: AppendStatements,
    title: &str,
    physical: &SpecPhysical,
) -> Result<String, HuntError> {
    let begin = sql_level(isolation)?;
    let mut out = String::new();
    for line in title.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str("\nsetup\n{\n");
    let keys: Vec<i64> = h.initial.iter().filter_map(|(o, _)| int_of(&h.object(*o).key)).collect();
    let design = physical.design.unwrap_or_default();
    match isocert_adapters::postgres::design_statements(table, &design, &keys) {
        Ok(ddl) => {
            for sql in ddl {
                out.push_str(&format!("  {sql};\n"));
            }
        }
        Err(_) => out.push_str(&format!("  {}\n", isocert_adapters::postgres::create_table_statement(table))),
    }
    if design.filler_rows > 0 {
        // The filler rows as the workload made them: keys from FILLER_KEYS, -1 elsewhere.
        let middle = ", -1".repeat(table.columns.len().saturating_sub(2));
        out.push_str(&format!(
            "  INSERT INTO {t} ({cols}) SELECT k{middle}, 0 FROM generate_series({from}, {to}) k;\n",
            t = table.name,
            cols = table.column_list(),
            from = isocert_workload::FILLER_KEYS,
            to = isocert_workload::FILLER_KEYS + i64::from(design.filler_rows) - 1,
        ));
    }
    for (obj, value) in &h.initial {
        if int_of(&h.object(*obj).key).is_some_and(|k| k >= isocert_workload::FILLER_KEYS) {
            continue;
        }
        if let Some(row) = row_values(h, table, *obj, *value) {
            out.push_str(&format!(
                "  INSERT INTO {} ({}) VALUES ({});\n",
                table.name,
                table.column_list(),
                row.iter().map(literal).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    out.push_str(&format!("}}\n\nteardown {{ DROP TABLE {}; }}\n", table.name));
    let use_ts =
        h.txns.iter().all(|t| t.start_ts().is_some() && (t.commit_ts().is_some() || !t.is_committed()));
    // (time, phase, txn, steps): phase 0 = at the start, 1 = the writes, 2 = the commit.
    let mut events: Vec<(Timestamp, u8, TxnId, Vec<String>)> = Vec::new();
    for t in h.txn_ids() {
        let txn = h.txn(t);
        let session = format!("t{}", txn.name).replace(['"', ' '], "");
        let settings: String = physical
            .session_settings
            .get(session_index(h, txn.session).unwrap_or(usize::MAX))
            .map(|sql| sql.iter().map(|s| format!("{s}; ")).collect())
            .unwrap_or_default();
        out.push_str(&format!("\nsession {session}\nsetup {{ {settings}BEGIN ISOLATION LEVEL {begin}; }}\n"));
        let first_write = txn
            .ops
            .iter()
            .position(|op| !matches!(op, Op::Read { .. } | Op::Select { .. } | Op::Aggregate { .. }));
        let (start, commit) = times(h, use_ts, t);
        let mut at_start = Vec::new();
        let mut at_commit = Vec::new();
        if first_write == Some(0) {
            // The snapshot is taken by the first statement: a transaction that starts with a
            // write takes it at its start with a statement that reads no table.
            let step = format!("{session}_snapshot");
            out.push_str(&format!("step {step} {{ SELECT 1; }}\n"));
            at_start.push(step);
        }
        for i in 0..txn.ops.len() {
            let step = format!("{session}_{}", i + 1);
            out.push_str(&format!("step {step} {{ {} }}\n", statement(h, cert, table, t, i, appends)));
            if first_write.is_some_and(|w| i >= w) {
                at_commit.push(step);
            } else {
                at_start.push(step);
            }
        }
        let end = if txn.status == Status::Aborted { "ROLLBACK" } else { "COMMIT" };
        let last = format!("{session}_{}", end.to_lowercase());
        out.push_str(&format!("step {last} {{ {end}; }}\n"));
        events.push((start, 0, t, at_start));
        events.push((commit, 1, t, at_commit));
        events.push((commit, 2, t, vec![last]));
    }
    events.sort_by_key(|e| (e.0, e.1, e.2));
    let mut steps: Vec<String> = Vec::new();
    let mut after_commit = 0;
    if !physical.maintenance.is_empty() {
        out.push_str("\nsession maintenance\n");
        for (i, sql) in physical.maintenance.iter().enumerate() {
            out.push_str(&format!("step maintenance_{} {{ {sql}; }}\n", i + 1));
        }
    }
    for (_, phase, _, e) in events {
        steps.extend(e);
        // The maintenance session's statements in turn, one after each commit or rollback.
        if phase == 2 && !physical.maintenance.is_empty() {
            steps.push(format!("maintenance_{}", after_commit % physical.maintenance.len() + 1));
            after_commit += 1;
        }
    }
    out.push_str(&format!("\npermutation {}\n", steps.join(" ")));
    Ok(out)
}

/// What a reproducer carries of the run's physical design: the table's layout, each
/// session's planner settings (by session index) and the maintenance statements run
/// between the transactions.
#[derive(Clone, Debug, Default)]
pub struct SpecPhysical {
    /// The table's design (`None`: plain).
    pub design: Option<PhysicalDesign>,
    /// The statements each session runs before its transaction, by session index.
    pub session_settings: Vec<Vec<String>>,
    /// Maintenance statements that need no other transaction to end (`VACUUM`, `ANALYZE`):
    /// the spec runs them in turn after each commit.
    pub maintenance: Vec<String>,
}

impl SpecPhysical {
    /// `statements` without those that wait for other transactions to end (a concurrent
    /// index build would wait for the reproducer's open transactions, forever).
    pub fn not_waiting(statements: Vec<String>) -> Vec<String> {
        statements.into_iter().filter(|s| !s.contains("CONCURRENTLY")).collect()
    }
}

/// An integer key or session name.
fn int_of(s: &Scalar) -> Option<i64> {
    match s {
        Scalar::Int(i) => Some(*i),
        _ => None,
    }
}

/// The index of a recorded session (the workload names its sessions 0, 1, ...).
fn session_index(h: &History, session: isocert_history::SessionId) -> Option<usize> {
    int_of(h.session_name(session)).and_then(|i| usize::try_from(i).ok())
}

/// How running the reproducer went.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Reproduction {
    /// Runs made.
    pub runs: u32,
    /// Runs whose recorded history showed the anomaly class again.
    pub reproduced: u32,
    /// Runs that could not be certified (a statement the runner does not record wrote the
    /// table, or recovery refused): counted neither way.
    pub uncertified: u32,
    /// Why the first uncertified run was so.
    pub why_uncertified: Option<String>,
    /// The anomaly classes the runs showed, each once.
    pub kinds_seen: Vec<String>,
}

/// What a reproducer is run for.
#[derive(Clone, Debug)]
pub struct ReproTarget {
    /// The level the runs are checked at.
    pub level: IsolationLevel,
    /// The level of a transaction whose `BEGIN` names none.
    pub isolation: IsolationLevel,
    /// The anomaly class that counts as reproduced.
    pub kind: AnomalyKind,
    /// How many runs.
    pub runs: u32,
}

/// Runs `spec` `target.runs` times on `db` with the scenario runner, checks each run at
/// `target.level` and counts how often it shows `target.kind`.
///
/// # Errors
/// [`HuntError::Reproducer`] when the spec does not parse or a permutation cannot run.
pub async fn reproduce<D: Database>(
    db: &D,
    spec: &str,
    target: &ReproTarget,
    capture: &CaptureOptions,
    interrupt: &Arc<AtomicBool>,
) -> Result<Reproduction, HuntError> {
    let ReproTarget { level, isolation, kind, runs } = target.clone();
    let parsed = isocert_scenario::parse(spec).map_err(|e| HuntError::Reproducer(e.to_string()))?;
    let setup: Vec<String> = parsed.setup.iter().map(|b| b.sql.clone()).collect();
    let (tables, _) = survey_tables(&setup, D::DIALECT);
    let perm = parsed
        .permutations()
        .next()
        .ok_or_else(|| HuntError::Reproducer("the spec has no permutation".into()))?;
    let options = RunOptions {
        isolation,
        capture: capture.clone(),
        step_timeout: Duration::from_secs(30),
        block_check: Duration::from_millis(150),
        setup_timeout: Duration::from_secs(30),
        stop: None,
    };
    let mut out = Reproduction::default();
    for _ in 0..runs {
        if interrupt.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let mut run = run_permutation(db, &parsed, &tables, &perm, &options)
            .await
            .map_err(|e| HuntError::Reproducer(e.to_string()))?;
        out.runs += 1;
        let why = if let Some(u) = run.unrecorded.iter().find(|u| u.writes_table) {
            Some(format!("{}: {} ({})", u.step, u.sql, u.why))
        } else if let Some(invalid) = &run.invalid {
            Some(format!("the permutation could not run as written: {invalid}"))
        } else {
            match &run.log {
                None => Some("nothing was recorded".to_string()),
                Some(log) => match crate::recover_and_check::<D>(&mut run.history, log, level) {
                    Err(e) => Some(e.to_string()),
                    Ok((_, report)) => {
                        for a in &report.anomalies {
                            let k = a.kind.as_str().to_string();
                            if !out.kinds_seen.contains(&k) {
                                out.kinds_seen.push(k);
                            }
                        }
                        if report.anomalies.iter().any(|a| a.kind == kind) {
                            out.reproduced += 1;
                        }
                        None
                    }
                },
            }
        };
        if let Some(why) = why {
            out.uncertified += 1;
            out.why_uncertified.get_or_insert(why);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use isocert_history::v1;

    fn read(lines: &[&str], cert: &str) -> (History, Certificate) {
        let mut h = v1::read_history(lines.join("\n").as_bytes()).unwrap();
        let c = v1::read_certificate(cert.as_bytes(), &mut h).unwrap();
        (h, c)
    }

    #[test]
    fn writes_are_the_statements_that_install_each_version_in_timestamp_order() {
        // T2 deletes k0 and commits after T3's snapshot; T3 then writes k0 (an insert) and
        // k1 (an update of the initial row).
        let (h, c) = read(
            &[
                r#"{"format":"isocert-history","version":1,"initial":[{"key":0,"value":0},{"key":1,"value":0}]}"#,
                r#"{"id":2,"session":0,"start_ts":1,"commit_ts":4,"ops":[{"f":"w","key":0,"value":null}]}"#,
                r#"{"id":3,"session":1,"start_ts":3,"commit_ts":6,"ops":[{"f":"r","key":0,"value":0},{"f":"w","key":0,"value":9},{"f":"w","key":1,"value":8}]}"#,
            ],
            r#"{"format":"isocert-certificate","version":1,"version_order":[{"key":0,"writers":[2,3]},{"key":1,"writers":[3]}]}"#,
        );
        let table = TableSpec::integers("kv", &["key", "value"]);
        let spec = write_spec(
            &h,
            &c,
            &table,
            IsolationLevel::RepeatableRead,
            AppendStatements::Upsert,
            "t",
            &SpecPhysical::default(),
        )
        .unwrap();
        assert!(spec.contains("step t2_1 { DELETE FROM kv WHERE key = 0; }"), "{spec}");
        assert!(spec.contains("step t3_2 { INSERT INTO kv (key, value) VALUES (0, 9); }"), "{spec}");
        assert!(spec.contains("step t3_3 { UPDATE kv SET value = 8 WHERE key = 1; }"), "{spec}");
        assert!(spec.contains("INSERT INTO kv (key, value) VALUES (0, 0);"), "initial rows: {spec}");
        // T2 takes its snapshot first (ts 1), T3 reads (ts 3), T2 deletes and commits (4),
        // then T3 writes and commits (6).
        assert!(spec.contains("permutation t2_snapshot t3_1 t2_1 t2_commit t3_2 t3_3 t3_commit"), "{spec}");
        assert!(isocert_scenario::parse(&spec).is_ok(), "{spec}");
    }

    #[test]
    fn a_spec_carries_the_layout_the_session_settings_and_the_maintenance() {
        let (h, c) = read(
            &[
                r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":0},{"key":1000000000,"value":0}]}"#,
                r#"{"id":1,"session":0,"start_ts":1,"commit_ts":3,"ops":[{"f":"r","key":1,"value":0},{"f":"w","key":1,"value":5}]}"#,
                r#"{"id":2,"session":1,"start_ts":2,"commit_ts":4,"ops":[{"f":"r","key":1,"value":0}]}"#,
            ],
            r#"{"format":"isocert-certificate","version":1,"version_order":[{"key":1,"writers":[1]}]}"#,
        );
        let table = TableSpec { partitioned: true, ..TableSpec::integers("kv", &["key", "value"]) };
        let physical = SpecPhysical {
            design: Some(PhysicalDesign {
                layout: isocert_adapters::TableLayout::Hash,
                index: isocert_adapters::SecondaryIndex::Btree,
                filler_rows: 3,
            }),
            session_settings: vec![vec!["SET enable_seqscan = off".into()], Vec::new()],
            maintenance: SpecPhysical::not_waiting(vec![
                "VACUUM kv".into(),
                "REINDEX TABLE CONCURRENTLY kv".into(),
                "ANALYZE kv".into(),
            ]),
        };
        let spec = write_spec(
            &h,
            &c,
            &table,
            IsolationLevel::ReadCommitted,
            AppendStatements::Upsert,
            "t",
            &physical,
        )
        .unwrap();
        assert!(spec.contains("PARTITION BY HASH (key);"), "{spec}");
        assert!(spec.contains("CREATE INDEX kv_secondary ON kv (value);"), "{spec}");
        assert!(spec.contains("SELECT k, 0 FROM generate_series(1000000000, 1000000002) k;"), "{spec}");
        assert!(!spec.contains("VALUES (1000000000"), "filler rows once, as a series: {spec}");
        assert!(
            spec.contains("setup { SET enable_seqscan = off; BEGIN ISOLATION LEVEL READ COMMITTED; }"),
            "{spec}"
        );
        assert!(
            spec.contains("step maintenance_1 { VACUUM kv; }")
                && spec.contains("step maintenance_2 { ANALYZE kv; }")
        );
        assert!(!spec.contains("CONCURRENTLY"), "{spec}");
        let permutation = spec.lines().find(|l| l.starts_with("permutation")).unwrap();
        assert!(
            permutation.contains("t1_commit maintenance_1")
                && permutation.contains("t2_commit maintenance_2"),
            "{permutation}"
        );
    }

    #[test]
    fn appends_are_upserts_or_blind_writes_of_the_list_they_made() {
        let (h, c) = read(
            &[
                r#"{"id":1,"session":0,"start_ts":1,"commit_ts":2,"ops":[{"f":"append","table":"append","key":7,"value":1}]}"#,
                r#"{"id":2,"session":1,"start_ts":3,"commit_ts":4,"ops":[{"f":"r","table":"append","key":7,"value":[1]},{"f":"append","table":"append","key":7,"value":2},{"f":"append","table":"append","key":7,"value":3}]}"#,
            ],
            r#"{"format":"isocert-certificate","version":1,"version_order":[{"table":"append","key":7,"writers":[1,2]}]}"#,
        );
        let table = TableSpec {
            name: "append",
            columns: &["id", "sk", "val"],
            types: &[
                isocert_adapters::ColumnType::Integer,
                isocert_adapters::ColumnType::Integer,
                isocert_adapters::ColumnType::Text,
            ],
            partitioned: false,
        };
        let upsert = write_spec(
            &h,
            &c,
            &table,
            IsolationLevel::Serializable,
            AppendStatements::Upsert,
            "t",
            &SpecPhysical::default(),
        )
        .unwrap();
        assert!(upsert.contains("ON CONFLICT (id) DO UPDATE SET val = CONCAT(t.val, ',', '2');"), "{upsert}");
        let blind = write_spec(
            &h,
            &c,
            &table,
            IsolationLevel::Serializable,
            AppendStatements::Recordable,
            "t",
            &SpecPhysical::default(),
        )
        .unwrap();
        assert!(
            blind.contains("step t1_1 { INSERT INTO append (id, sk, val) VALUES (7, 7, '1'); }"),
            "{blind}"
        );
        assert!(blind.contains("step t2_2 { UPDATE append SET val = '1,2' WHERE id = 7; }"), "{blind}");
        assert!(blind.contains("step t2_3 { UPDATE append SET val = '1,2,3' WHERE id = 7; }"), "{blind}");
        assert!(blind.contains(
            "CREATE TABLE append (id integer PRIMARY KEY, sk integer NOT NULL, val text NOT NULL);"
        ));
    }
}
