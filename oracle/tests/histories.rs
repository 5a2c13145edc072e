//! The oracle over histories read from the v1 format: column types from the operations,
//! online compilation, and the database fallback.

use isocert_history::{v1, History, Op, Scalar};
use isocert_oracle::{FallbackOracle, Interpreter, MatchesOracle, OracleError, PostgresOracle};

use crate::differential::test_database;

fn read(text: &str) -> History {
    v1::read_history(text.as_bytes()).expect("valid v1")
}

/// The object and value of the first write of transaction `txn`.
fn first_write(h: &History, txn: usize) -> (isocert_history::ObjId, isocert_history::ValueId) {
    match h.txns[txn].ops[0] {
        Op::Write { obj, value } => (obj, value),
        _ => panic!("not a write"),
    }
}

#[test]
fn a_column_written_as_integers_and_floats_is_double_precision() {
    let h = read(concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"f":3}}]}"#,
        "\n",
        r#"{"id":2,"session":0,"ops":[{"f":"w","table":"t","key":2,"value":{"id":2,"f":0.5}},"#,
        r#"{"f":"select","table":"t","where":"f / 2 = 1.5","rows":[]}]}"#,
    ));
    let oracle = Interpreter::new(&h).expect("compiles");
    let pred = h.txns[1].ops[1].predicate().expect("a select");
    let (obj, value) = first_write(&h, 0);
    assert!(oracle.matches(&h, pred, obj, value).unwrap(), "3 / 2 divides as floats in a float column");
}

#[test]
fn type_errors_against_the_inferred_schema_are_load_time_errors() {
    let h = read(concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"name":"x"}},"#,
        r#"{"f":"select","table":"t","where":"name > 5","rows":[]}]}"#,
    ));
    let e = Interpreter::new(&h).expect_err("text > integer");
    assert!(matches!(e, OracleError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("name > 5") && e.to_string().contains("text"), "{e}");
}

/// `Interpreter::for_checking` compiles the predicates of transactions that did not abort
/// now and the others on first evaluation: every answer (truth, error, and bounds once
/// evaluated) is the eager interpreter's; a bad predicate of a committed transaction is
/// the eager interpreter's load-time error, one only an aborted transaction uses is
/// reported when evaluated.
#[test]
fn deferred_predicates_answer_like_the_eager_interpreter() {
    let text = concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"t","key":1,"value":{"id":1,"c0":3,"c1":7}},"#,
        r#"{"f":"w","table":"t","key":2,"value":{"id":2,"c0":9,"c1":null}},"#,
        r#"{"f":"select","table":"t","where":"c0 >= 2 AND c0 < 5","rows":[]}]}"#,
        "
",
        r#"{"id":2,"session":0,"status":"aborted","ops":[{"f":"select","table":"t","where":"c0 BETWEEN 8 AND 10 AND c1 <> 7","rows":[]},"#,
        r#"{"f":"select","table":"t","where":"c0 >= 2 AND c0 < 5","rows":[]}]}"#,
        "
",
        r#"{"id":3,"session":1,"status":"unknown","ops":[{"f":"select","table":"t","where":"c1 IS NULL OR c0 > 8","rows":[]}]}"#,
        "
",
        r#"{"id":4,"session":1,"status":"aborted","ops":[{"f":"select","table":"t","where":"c0 < 4","rows":[]}]}"#,
    );
    let h = read(text);
    let eager = Interpreter::new(&h).expect("compiles");
    let deferred = Interpreter::for_checking(&h).expect("compiles");
    let Op::Write { obj, value } = h.txns[0].ops[1] else { panic!("not a write") };
    let rows = [first_write(&h, 0), (obj, value)];
    let preds: Vec<_> = (0..h.predicates().len()).map(isocert_history::PredId::from_index).collect();
    assert_eq!(preds.len(), 4);
    assert!(deferred.is_compiled(preds[0]) && deferred.is_compiled(preds[2]), "committed and unknown: now");
    assert!(!deferred.is_compiled(preds[1]) && !deferred.is_compiled(preds[3]), "aborted only: deferred");
    assert_eq!(deferred.bounds(preds[1]), isocert_oracle::Bounds::everything());
    for &pred in &preds {
        for &(obj, value) in rows.iter().chain([(rows[0].0, isocert_history::ValueId::ABSENT)].iter()) {
            assert_eq!(
                deferred.truth(&h, pred, obj, value).unwrap(),
                eager.truth(&h, pred, obj, value).unwrap()
            );
        }
        assert!(deferred.is_compiled(pred));
        assert_eq!(deferred.bounds(pred), eager.bounds(pred));
    }

    let bad_committed = text.replacen("c0 >= 2 AND c0 < 5", "c0 >>= 2", 1);
    let h = read(&bad_committed);
    let e = Interpreter::for_checking(&h).expect_err("a committed transaction's bad predicate");
    assert_eq!(e.to_string(), Interpreter::new(&h).expect_err("eager").to_string());

    let bad_aborted = text.replace("c0 < 4", "c0 >>= 4");
    let h = read(&bad_aborted);
    let eager_error = Interpreter::new(&h).expect_err("eager compiles every predicate").to_string();
    let deferred = Interpreter::for_checking(&h).expect("only an aborted transaction uses it");
    let pred = h.txns[3].ops[0].predicate().expect("a select");
    let (obj, value) = first_write(&h, 0);
    let e = deferred.truth(&h, pred, obj, value).expect_err("reported when evaluated");
    assert_eq!(e.to_string(), eager_error);
    assert!(deferred.truth(&h, pred, obj, value).is_err(), "and every time after");
}

#[test]
fn compile_new_picks_up_predicates_interned_later() {
    let mut h = History::new();
    let t = h.intern_table("kv");
    let obj = h.intern_object(t, Scalar::Int(1));
    let value = h.intern_value(isocert_history::Value::Scalar(Scalar::Int(4)));
    let first = h.intern_predicate(t, "value > 3");
    let mut oracle = Interpreter::new(&h).expect("compiles");
    let second = h.intern_predicate(t, "value > 5");
    assert!(matches!(oracle.matches(&h, second, obj, value), Err(OracleError::NotCompiled { .. })));
    oracle.compile_new(&h).expect("compiles");
    assert!(oracle.matches(&h, first, obj, value).unwrap());
    assert!(!oracle.matches(&h, second, obj, value).unwrap());
    assert!(
        !oracle.matches(&h, first, obj, isocert_history::ValueId::ABSENT).unwrap(),
        "absent never matches"
    );
}

#[test]
fn the_database_answers_what_the_interpreter_refuses() {
    let Some(url) = test_database() else { return };
    let h = read(concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"fallback_t","key":1,"value":{"id":1,"name":"alpha"}},"#,
        r#"{"f":"select","table":"fallback_t","where":"substring(name from 1 for 2) = 'al'","rows":[]},"#,
        r#"{"f":"select","table":"fallback_t","where":"name LIKE 'a%'","rows":[]}]}"#,
    ));
    let refused = h.txns[0].ops[1].predicate().expect("select");
    let compiled = h.txns[0].ops[2].predicate().expect("select");
    assert!(matches!(Interpreter::new(&h), Err(OracleError::Unsupported { .. })));
    let oracle = FallbackOracle::new(&h, PostgresOracle::connect(&url).expect("connect"));
    assert_eq!(oracle.fallbacks().len(), 1, "one predicate goes to the database");
    let (obj, value) = first_write(&h, 0);
    assert!(oracle.matches(&h, refused, obj, value).unwrap(), "PostgreSQL evaluates substring");
    assert!(oracle.matches(&h, compiled, obj, value).unwrap());
    assert_eq!(oracle.bounds(compiled).constraints.len(), 1, "bounds still come from the interpreter");
}

#[test]
fn database_errors_are_eval_errors_naming_the_row() {
    let Some(url) = test_database() else { return };
    let h = read(concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","table":"kv","key":1,"value":0},"#,
        r#"{"f":"select","table":"kv","where":"10 / value = 1","rows":[]}]}"#,
    ));
    let pred = h.txns[0].ops[1].predicate().expect("select");
    let (obj, value) = first_write(&h, 0);
    let pg = PostgresOracle::connect(&url).expect("connect");
    let e = pg.matches(&h, pred, obj, value).expect_err("division by zero");
    assert!(matches!(e, OracleError::Eval { .. }) && e.to_string().contains("division by zero"), "{e}");
    let ours = Interpreter::new(&h).expect("compiles").matches(&h, pred, obj, value).expect_err("same error");
    assert!(ours.to_string().contains("kv[1]"), "{ours}");
}
