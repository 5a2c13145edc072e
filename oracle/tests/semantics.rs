//! SQL semantics of the interpreter, one expectation per rule (PostgreSQL dialect unless named).

use isocert_history::Scalar;

use crate::common::{eval_kv, eval_row, s};

fn row(sql: &str) -> Option<bool> {
    let cols = [("a", s("5")), ("b", s("null")), ("f", s("2.5")), ("t", s("Hello")), ("flag", s("true"))];
    eval_row(&cols, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn comparisons_and_three_valued_logic() {
    assert_eq!(row("a = 5"), Some(true));
    assert_eq!(row("a <> 5"), Some(false));
    assert_eq!(row("a != 4"), Some(true));
    assert_eq!(row("a < f"), Some(false));
    assert_eq!(row("b = 1"), None);
    assert_eq!(row("b = 1 AND a = 6"), Some(false));
    assert_eq!(row("b = 1 AND a = 5"), None);
    assert_eq!(row("b = 1 OR a = 5"), Some(true));
    assert_eq!(row("b = 1 OR a = 6"), None);
    assert_eq!(row("NOT (b = 1)"), None);
    assert_eq!(row("NOT a = 6"), Some(true));
    assert_eq!(row("t > 'Z'"), Some(false), "C collation: 'H' < 'Z'");
    assert_eq!(row("t < 'hello'"), Some(true), "upper case sorts first in C collation");
}

#[test]
fn between_in_and_null_tests() {
    assert_eq!(row("a BETWEEN 1 AND 5"), Some(true));
    assert_eq!(row("a NOT BETWEEN 1 AND 5"), Some(false));
    assert_eq!(row("a BETWEEN 6 AND b"), Some(false));
    assert_eq!(row("a BETWEEN 1 AND b"), None);
    assert_eq!(row("a IN (1, 5)"), Some(true));
    assert_eq!(row("a IN (1, NULL)"), None);
    assert_eq!(row("a NOT IN (1, NULL)"), None);
    assert_eq!(row("a NOT IN (1, 2)"), Some(true));
    assert_eq!(row("b IN (1, 2)"), None);
    assert_eq!(row("b IS NULL"), Some(true));
    assert_eq!(row("a IS NOT NULL"), Some(true));
    assert_eq!(row("missing IS NULL"), Some(true), "a column no row has reads NULL");
}

#[test]
fn kv_columns() {
    assert_eq!(eval_kv(Scalar::Int(7), Scalar::Int(3), "value < 5 AND key = 7").unwrap(), Some(true));
    assert_eq!(eval_kv(Scalar::Int(7), Scalar::Null, "value < 5").unwrap(), None);
    assert_eq!(eval_kv("k".into(), "v".into(), "key = 'k' AND value LIKE 'v%'").unwrap(), Some(true));
}
