//! The interpreter against a real PostgreSQL: random rows with NULLs, random predicates from
//! [`grammar`](crate::grammar), both oracles on every (predicate, row) pair.
//!
//! Needs `ISOCERT_TEST_PG` (skips visibly when unset, fails when `CI=true`; see
//! `isocert_testsupport`). Seeded: set
//! `ISOCERT_SEED` to replay a run; `ISOCERT_DIFF_PREDICATES` scales it. Every disagreement is
//! printed as a ready-to-paste SQL reproduction.

use std::fmt::Write as _;

use isocert_history::{History, ObjId, PredId, Scalar, ValueId, KV_TABLE};
use isocert_oracle::{Interpreter, OracleError, PostgresOracle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::grammar::{row, Grammar, COLUMNS};

/// The test database URL, or `None` (after printing why) when the test should skip.
pub(crate) fn test_database() -> Option<String> {
    isocert_testsupport::POSTGRES.url()
}

fn seed() -> u64 {
    let seed = std::env::var("ISOCERT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!("differential test seed: ISOCERT_SEED={seed}");
    seed
}

fn sql_literal(s: &Scalar, ty: &str) -> String {
    match s {
        Scalar::Null => "NULL".to_owned(),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => format!("'{f:e}'::{ty}"),
        Scalar::Text(t) => format!("'{}'", t.replace('\'', "''")),
    }
}

fn outcome(r: &Result<Option<bool>, OracleError>) -> String {
    match r {
        Ok(Some(b)) => b.to_string(),
        Ok(None) => "NULL".to_owned(),
        Err(e) => format!("ERROR ({e})"),
    }
}

fn agree(a: &Result<Option<bool>, OracleError>, b: &Result<Option<bool>, OracleError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

/// Whether the interpreter declined a case at its documented limit (a numeric beyond 38
/// digits): an honest error, never a wrong answer.
fn refused(ours: &Result<Option<bool>, OracleError>) -> bool {
    matches!(ours, Err(e) if e.to_string().contains("interpreter"))
}

/// A table of random rows and predicates over it, both in one history.
struct Case {
    h: History,
    objects: Vec<(ObjId, ValueId, Vec<Scalar>)>,
    predicates: Vec<PredId>,
}

fn build(table: &str, rows: usize, predicates: usize, rng: &mut ChaCha8Rng) -> Case {
    let mut h = History::new();
    let t = h.intern_table(table);
    let cols: Vec<_> = COLUMNS.iter().map(|(c, _)| h.intern_column(t, c)).collect();
    let mut objects = Vec::with_capacity(rows);
    for id in 0..rows as i64 {
        let values = row(rng, id);
        let pairs: Vec<_> = cols.iter().copied().zip(values.iter().cloned()).collect();
        let value = h.intern_row(&pairs);
        objects.push((h.intern_object(t, Scalar::Int(id)), value, values));
    }
    let mut preds = Vec::with_capacity(predicates);
    let mut g = Grammar { rng };
    for _ in 0..predicates {
        let depth = g.rng.random_range(1..4);
        let sql = g.cond(depth);
        preds.push(h.intern_predicate(t, &sql));
    }
    Case { h, objects, predicates: preds }
}

fn reproduction(table: &str, values: &[Scalar], sql: &str) -> String {
    let defs: Vec<String> = COLUMNS.iter().map(|(c, ty)| format!("{c} {ty}")).collect();
    let lits: Vec<String> =
        values.iter().zip(COLUMNS.iter()).map(|(v, (_, ty))| sql_literal(v, ty)).collect();
    format!(
        "CREATE TEMP TABLE {table} ({}); INSERT INTO {table} VALUES ({}); SELECT ({sql}) FROM {table};",
        defs.join(", "),
        lits.join(", ")
    )
}

/// Runs `predicates` random predicates over `rows` random rows through both oracles and
/// returns the printed disagreements.
fn run(url: &str, table: &str, seed: u64, rows: usize, predicates: usize) -> (usize, Vec<String>) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect to ISOCERT_TEST_PG");
    let defs: Vec<String> = COLUMNS.iter().map(|(c, ty)| format!("{c} {ty}")).collect();
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}; CREATE TABLE {table} ({})", defs.join(", ")))
        .expect("create the differential table");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let case = build(table, rows, predicates, &mut rng);
    let pg = PostgresOracle::from_client(client);
    let (interpreter, compile_errors) = Interpreter::new_lenient(&case.h);
    let mut failures = Vec::new();
    for e in &compile_errors {
        if matches!(e, OracleError::Unsupported { .. } | OracleError::Parse { .. }) {
            failures.push(format!("the interpreter cannot compile a grammar predicate: {e}"));
        }
    }
    let mut cases = 0;
    let mut refusals = 0;
    for &pred in &case.predicates {
        let sql = &case.h.predicate(pred).sql;
        let mut reported = false;
        for (obj, value, values) in &case.objects {
            cases += 1;
            let ours = interpreter.truth(&case.h, pred, *obj, *value);
            let theirs = pg.truth(&case.h, pred, *obj, *value);
            if refused(&ours) && theirs.is_ok() {
                refusals += 1;
                continue;
            }
            if !agree(&ours, &theirs) && !std::mem::replace(&mut reported, true) {
                let mut msg = String::new();
                let _ = writeln!(msg, "-- interpreter: {}", outcome(&ours));
                let _ = writeln!(msg, "-- postgres:    {}", outcome(&theirs));
                let _ = write!(msg, "{}", reproduction(table, values, sql));
                failures.push(msg);
            }
        }
    }
    eprintln!("{refusals} cases refused at documented interpreter limits");
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("reconnect");
    let _ = client.batch_execute(&format!("DROP TABLE IF EXISTS {table}"));
    (cases, failures)
}

fn report(cases: usize, failures: &[String], seed: u64) {
    eprintln!(
        "{cases} (predicate, row) cases, {} predicates disagree (first row of each shown)",
        failures.len()
    );
    for f in failures.iter().take(25) {
        eprintln!("{f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} disagreements with PostgreSQL (replay: ISOCERT_SEED={seed})",
        failures.len()
    );
}

#[test]
fn interpreter_agrees_with_postgres_on_random_predicates() {
    let Some(url) = test_database() else { return };
    let seed = seed();
    let predicates =
        std::env::var("ISOCERT_DIFF_PREDICATES").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    let table = format!("isocert_diff_{}", std::process::id());
    let (cases, failures) = run(&url, &table, seed, 16, predicates);
    report(cases, &failures, seed);
    assert!(cases >= 1000, "too few cases: {cases}");
}

#[test]
fn kv_predicates_agree_with_postgres() {
    let Some(url) = test_database() else { return };
    let seed = seed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut h = History::new();
    let t = h.intern_table(KV_TABLE);
    let mut objects = Vec::new();
    for k in 0..12i64 {
        let v = if rng.random_bool(0.2) { Scalar::Null } else { Scalar::Int(rng.random_range(-5..=5)) };
        let value = h.intern_value(isocert_history::Value::Scalar(v.clone()));
        objects.push((h.intern_object(t, Scalar::Int(k)), value, v, k));
    }
    let mut preds = Vec::new();
    for _ in 0..60 {
        let op = ["=", "<", ">=", "<>"][rng.random_range(0..4)];
        let sql = match rng.random_range(0..4) {
            0 => format!("value {op} {}", rng.random_range(-5..=5)),
            1 => format!(
                "value BETWEEN {} AND {} AND key % 2 = 0",
                rng.random_range(-5..=0),
                rng.random_range(0..=5)
            ),
            2 => format!(
                "value IN ({}, {}, NULL) OR key {op} 3",
                rng.random_range(-5..=5),
                rng.random_range(-5..=5)
            ),
            _ => format!("COALESCE(value, -1) * key {op} {}", rng.random_range(-10..=10)),
        };
        preds.push(h.intern_predicate(t, &sql));
    }
    // The probe types kv columns from the history (a database kv table, if any, is not ours).
    let pg = PostgresOracle::connect(&url).expect("connect");
    let interpreter = Interpreter::new(&h).expect("kv predicates compile");
    let mut failures = Vec::new();
    let mut cases = 0;
    for &pred in &preds {
        for (obj, value, v, k) in &objects {
            cases += 1;
            let ours = interpreter.truth(&h, pred, *obj, *value);
            let theirs = pg.truth(&h, pred, *obj, *value);
            if !agree(&ours, &theirs) {
                failures.push(format!(
                    "-- interpreter: {}\n-- postgres:    {}\nSELECT ({}) FROM (VALUES ({k}::bigint, {}::bigint)) AS kv(key, value);",
                    outcome(&ours),
                    outcome(&theirs),
                    h.predicate(pred).sql,
                    sql_literal(v, "bigint")
                ));
            }
        }
    }
    report(cases, &failures, seed);
}
