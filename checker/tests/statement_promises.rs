//! The statement-level promises a history's header declares (`write-from-replaced`,
//! `write-to-qualifying`): each anomaly kind has a rejected history and a near twin that
//! passes, the bare level (no header) allows both, and the check agrees with a brute-force
//! reference on small generated histories.

use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel, Report};
use isocert_history::{v1, History};
use isocert_oracle::Interpreter;
use isocert_random::rand::Rng;

const PROMISES: &str =
    r#""promises":{"database":"PostgreSQL","statements":["write-to-qualifying","write-from-replaced"]}"#;

fn run(history: &str, cert: &str) -> Report {
    let mut h: History = v1::read_history(history.as_bytes()).expect("history");
    let c = v1::read_certificate(cert.as_bytes(), &mut h).expect("certificate");
    let oracle = Interpreter::new(&h).expect("predicates");
    check(&h, &c, IsolationLevel::ReadCommitted, CheckerKind::Emme, &oracle).expect("check")
}

fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

/// Two increments of items[1] (n = 40): T3's, then T9's, in the version order. `t9_n` is
/// the n T9 installed (42 computed from T3's version, 41 from the initial one).
fn increments(header: &str, t9_n: i64) -> (String, String) {
    let history = format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"items","key":1,"value":{{"id":1,"n":40,"v":0}}}}]{header}}}
{{"id":3,"session":1,"ops":[{{"f":"update","table":"items","where":"id = 1","set":{{"n":{{"expr":"n + 1"}},"v":3}},"rows":[{{"key":1,"value":{{"id":1,"n":41,"v":3}}}}]}}]}}
{{"id":9,"session":2,"ops":[{{"f":"update","table":"items","where":"id = 1","set":{{"n":{{"expr":"n + 1"}},"v":9}},"rows":[{{"key":1,"value":{{"id":1,"n":{t9_n},"v":9}}}}]}}]}}
"#
    );
    let cert = r#"{"version_order":[{"table":"items","key":1,"writers":[3,9]}],
        "version_sets":[{"txn":3,"op":0,"versions":[{"table":"items","key":1,"writer":null}]},
                        {"txn":9,"op":0,"versions":[{"table":"items","key":1,"writer":3}]}]}"#;
    (history, cert.to_string())
}

#[test]
fn an_increment_computed_from_an_older_version_is_a_lost_update_inside_one_statement() {
    let (h, c) = increments(&format!(",{PROMISES}"), 41);
    let r = run(&h, &c);
    assert_eq!(kinds(&r), [AnomalyKind::StatementLostUpdate], "{r:?}");
    let e = &r.anomalies[0].explanation;
    for needle in [
        "T9's UPDATE items SET n = n + 1, v = 9 WHERE id = 1 wrote n = 41 of items[1]",
        "computed from the initial version {id: 1, n: 40, v: 0}",
        "but it replaced T3's version {id: 1, n: 41, v: 3}, from which its SET gives n = 42",
    ] {
        assert!(e.contains(needle), "{e}\nshould say {needle:?}");
    }
    assert_eq!(r.level_checked(), "read-committed (as PostgreSQL documents it)");
    let text = isocert_checker::render_text(&r, &v1::read_history(h.as_bytes()).unwrap());
    assert!(text.contains("for read-committed (as PostgreSQL documents it)"), "{text}");
}

#[test]
fn the_near_twin_computed_from_the_version_it_replaced_passes() {
    let (h, c) = increments(&format!(",{PROMISES}"), 42);
    let r = run(&h, &c);
    assert!(r.is_valid(), "{r:?}");
    assert_eq!(r.level_checked(), "read-committed (as PostgreSQL documents it)");
}

#[test]
fn without_declared_promises_the_bare_level_allows_the_lost_update() {
    let (h, c) = increments("", 41);
    let r = run(&h, &c);
    assert!(r.is_valid(), "Adya's PL-2 allows it: {r:?}");
    assert_eq!(r.level_checked(), "read-committed");
}

/// items[1] = {id: 1, c: 2, n: 0}; T9 moves it to c = 5, then T7's `UPDATE ... WHERE
/// {t7_where}` writes it (after T9 in the version order).
fn moved_row(header: &str, t7_where: &str) -> (String, String) {
    let history = format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"items","key":1,"value":{{"id":1,"c":2,"n":0}}}}]{header}}}
{{"id":9,"session":1,"ops":[{{"f":"update","table":"items","where":"id = 1","set":{{"c":5}},"rows":[{{"key":1,"value":{{"id":1,"c":5,"n":0}}}}]}}]}}
{{"id":7,"session":2,"ops":[{{"f":"update","table":"items","where":"{t7_where}","set":{{"n":{{"expr":"n + 1"}}}},"rows":[{{"key":1,"value":{{"id":1,"c":5,"n":1}}}}]}}]}}
"#
    );
    let cert = r#"{"version_order":[{"table":"items","key":1,"writers":[9,7]}],
        "version_sets":[{"txn":9,"op":0,"versions":[{"table":"items","key":1,"writer":null}]},
                        {"txn":7,"op":0,"versions":[{"table":"items","key":1,"writer":null}]}]}"#;
    (history, cert.to_string())
}

#[test]
fn an_update_of_a_row_whose_newest_version_left_its_where_is_rejected() {
    let (h, c) = moved_row(&format!(",{PROMISES}"), "c = 2");
    let r = run(&h, &c);
    assert!(kinds(&r).contains(&AnomalyKind::NonQualifyingWrite), "{r:?}");
    let a = r.anomalies.iter().find(|a| a.kind == AnomalyKind::NonQualifyingWrite).unwrap();
    assert!(
        a.explanation.contains(
            "T7's UPDATE items SET n = n + 1 WHERE c = 2 replaced T9's version of items[1] {id: 1, c: 5, n: 0}, \
             which does not satisfy c = 2"
        ),
        "{}",
        a.explanation
    );
}

#[test]
fn the_near_twin_whose_where_still_matches_passes() {
    let (h, c) = moved_row(&format!(",{PROMISES}"), "c >= 2");
    let r = run(&h, &c);
    assert!(!kinds(&r).contains(&AnomalyKind::NonQualifyingWrite), "{r:?}");
    assert!(!kinds(&r).contains(&AnomalyKind::StatementLostUpdate), "{r:?}");
    let (h, c) = moved_row("", "c = 2");
    assert!(!kinds(&run(&h, &c)).contains(&AnomalyKind::NonQualifyingWrite), "no promise, no check");
}

#[test]
fn an_expression_that_does_not_compile_is_an_error_naming_it() {
    let (h, c) = increments(&format!(",{PROMISES}"), 42);
    let h = h.replace(r#""expr":"n + 1"},"v":9"#, r#""expr":"m + 1"},"v":9"#);
    let mut history: History = v1::read_history(h.as_bytes()).expect("history");
    let cert = v1::read_certificate(c.as_bytes(), &mut history).expect("certificate");
    let oracle = Interpreter::new(&history).expect("predicates");
    let e = check(&history, &cert, IsolationLevel::ReadCommitted, CheckerKind::Emme, &oracle).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("T9's operation 1, set.n") && e.contains("\"m + 1\""), "{e}");
    assert!(e.contains("column m does not exist"), "{e}");
}

/// One generated statement: `UPDATE items SET n = n + add, v = <txn> WHERE id = key [AND n >= floor]`.
struct Statement {
    key: i64,
    add: i64,
    floor: Option<i64>,
    /// The version (index into the object's versions so far) the installed n was computed from.
    computed_from: usize,
}

/// The anomalies the definitions give, computed directly: per object the versions in
/// transaction order; each statement replaced the newest; it must match `n >= floor` there
/// and install that version's n plus `add`. Returns (transaction index, kind) pairs.
fn reference(statements: &[Statement], installed: &[i64]) -> Vec<(usize, AnomalyKind)> {
    let mut versions: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    let mut out = Vec::new();
    for (i, s) in statements.iter().enumerate() {
        let history = versions.entry(s.key).or_insert_with(|| vec![0]);
        let replaced = *history.last().unwrap();
        if s.floor.is_some_and(|f| replaced < f) {
            out.push((i, AnomalyKind::NonQualifyingWrite));
        } else if installed[i] != replaced + s.add {
            out.push((i, AnomalyKind::StatementLostUpdate));
        }
        history.push(installed[i]);
    }
    out
}

#[test]
fn the_check_agrees_with_a_brute_force_reference_on_small_generated_histories() {
    for seed in 0..300u64 {
        let mut rng = isocert_random::seeded(seed);
        let count = rng.random_range(1..=6);
        let mut statements = Vec::new();
        let mut installed = Vec::new();
        let mut versions: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
        for _ in 0..count {
            let key = rng.random_range(1..=2);
            let history = versions.entry(key).or_insert_with(|| vec![0]);
            let stale = rng.random_bool(0.3);
            let computed_from = if stale { rng.random_range(0..history.len()) } else { history.len() - 1 };
            let s = Statement {
                key,
                add: rng.random_range(1..=3),
                floor: rng.random_bool(0.3).then(|| rng.random_range(0..=4)),
                computed_from,
            };
            let n = history[s.computed_from] + s.add;
            history.push(n);
            installed.push(n);
            statements.push(s);
        }
        let mut lines = vec![format!(
            r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"items","key":1,"value":{{"id":1,"n":0,"v":0}}}},{{"table":"items","key":2,"value":{{"id":2,"n":0,"v":0}}}}],{PROMISES}}}"#
        )];
        let mut writers: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
        let mut sets = Vec::new();
        for (i, s) in statements.iter().enumerate() {
            let id = i + 1;
            let predicate = match s.floor {
                Some(f) => format!("id = {} AND n >= {f}", s.key),
                None => format!("id = {}", s.key),
            };
            lines.push(format!(
                r#"{{"id":{id},"session":{id},"ops":[{{"f":"update","table":"items","where":"{predicate}","set":{{"n":{{"expr":"n + {}"}},"v":{id}}},"rows":[{{"key":{},"value":{{"id":{},"n":{},"v":{id}}}}}]}}]}}"#,
                s.add, s.key, s.key, installed[i]
            ));
            let list = writers.entry(s.key).or_default();
            let seen = list.last().map_or("null".to_string(), |w| w.to_string());
            sets.push(format!(
                r#"{{"txn":{id},"op":0,"versions":[{{"table":"items","key":{},"writer":{seen}}}]}}"#,
                s.key
            ));
            list.push(id);
        }
        let order: Vec<String> = writers
            .iter()
            .map(|(k, w)| format!(r#"{{"table":"items","key":{k},"writers":{w:?}}}"#))
            .collect();
        let cert =
            format!(r#"{{"version_order":[{}],"version_sets":[{}]}}"#, order.join(","), sets.join(","));
        let report = run(&lines.join("\n"), &cert);
        let mut got: Vec<(usize, AnomalyKind)> = report
            .anomalies
            .iter()
            .filter(|a| matches!(a.kind, AnomalyKind::StatementLostUpdate | AnomalyKind::NonQualifyingWrite))
            .map(|a| (a.ops[0].txn.index(), a.kind))
            .collect();
        got.sort();
        assert_eq!(got, reference(&statements, &installed), "seed {seed}:\n{}\n{cert}", lines.join("\n"));
    }
}
