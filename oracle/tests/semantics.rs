//! SQL semantics of the interpreter, one expectation per rule (PostgreSQL dialect unless named).

use isocert_history::{Dialect, Scalar};
use isocert_oracle::OracleError;

use crate::common::{eval_kv, eval_row, eval_row_in, s};

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
    // A column the table does not have is an error, as in PostgreSQL (it used to read NULL).
    let cols = [("a", s("5")), ("b", s("null"))];
    let e = eval_row(&cols, "missing IS NULL").expect_err("an unknown column is refused");
    assert!(matches!(e, OracleError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("column missing does not exist in table"), "{e}");
}

#[test]
fn kv_columns() {
    assert_eq!(eval_kv(Scalar::Int(7), Scalar::Int(3), "value < 5 AND key = 7").unwrap(), Some(true));
    assert_eq!(eval_kv(Scalar::Int(7), Scalar::Null, "value < 5").unwrap(), None);
    assert_eq!(eval_kv("k".into(), "v".into(), "key = 'k' AND value LIKE 'v%'").unwrap(), Some(true));
}

#[test]
fn arithmetic_follows_postgres() {
    assert_eq!(row("a / 2 = 2"), Some(true), "integer division truncates");
    assert_eq!(row("-a / 2 = -2"), Some(true), "toward zero");
    assert_eq!(row("-7 % 3 = -1"), Some(true), "modulo takes the dividend's sign");
    assert_eq!(row("a * 0.1 = 0.5"), Some(true), "decimal literals are exact numerics");
    assert_eq!(row("f / 2 = 1.25"), Some(true));
    assert_eq!(row("abs(-a) = 5 AND -(a) = -5"), Some(true));
    assert_eq!(row("(a + b) IS NULL"), Some(true));
    let cols = [("a", s("9223372036854775807"))];
    assert!(eval_row(&cols, "a + 1 > 0").is_err(), "bigint overflow is an error");
    assert!(eval_row(&[("a", s("0"))], "1 / a = 1").is_err(), "division by zero is an error");
    assert!(eval_row(&[("a", s("1"))], "2147483647 + 1 > a").is_err(), "integer literals overflow as int4");
}

#[test]
fn case_coalesce_nullif_functions_and_casts() {
    assert_eq!(row("CASE WHEN a > 3 THEN 'big' ELSE 'small' END = 'big'"), Some(true));
    assert_eq!(row("CASE a WHEN 1 THEN false WHEN 5 THEN true END"), Some(true));
    assert_eq!(row("COALESCE(b, a, 0) = 5"), Some(true));
    assert_eq!(row("NULLIF(a, 5) IS NULL"), Some(true));
    assert_eq!(row("lower(t) = 'hello' AND upper(t) = 'HELLO' AND length(t) = 5"), Some(true));
    assert_eq!(row("CAST(a AS text) = '5' AND a::float8 = 5.0 AND '7'::int = 7"), Some(true));
    assert_eq!(row("f::int = 2"), Some(true), "2.5 rounds half to even when cast to integer");
    assert_eq!(row("2.5::int = 3"), Some(true), "numeric rounds half away from zero");
    assert_eq!(row("flag AND flag IS TRUE AND NOT flag IS FALSE"), Some(true));
    assert_eq!(row("b::boolean IS UNKNOWN"), Some(true));
}

#[test]
fn like_ilike_and_escapes() {
    assert_eq!(row("t LIKE 'H%o'"), Some(true));
    assert_eq!(row("t LIKE 'h%'"), Some(false));
    assert_eq!(row("t ILIKE 'h%'"), Some(true));
    assert_eq!(row("t NOT LIKE '_ello'"), Some(false));
    assert_eq!(row("'50%' LIKE '50\\%'"), Some(true));
    assert_eq!(row("'50%' LIKE '50#%' ESCAPE '#'"), Some(true));
    assert_eq!(row("'a\\b' LIKE 'a\\b' ESCAPE ''"), Some(true));
    assert_eq!(row("b LIKE 'x'"), None);
}

#[test]
fn type_errors_are_load_time_errors_naming_the_predicate() {
    let cols = [("a", s("5")), ("t", s("x"))];
    for sql in ["t + 1 > 0", "a = 'abc'", "t LIKE 1", "a AND true", "lower(a) = 'x'", "1/0 = 1 OR a = 5"] {
        let e = eval_row(&cols, sql).expect_err(sql).to_string();
        assert!(e.contains(sql), "error names the predicate: {e}");
    }
    assert_eq!(eval_row(&cols, "false AND 1/0 = 1").unwrap(), Some(false), "AND stops at a constant FALSE");
}

#[test]
fn unsupported_constructs_are_named() {
    let cols = [("a", s("5")), ("t", s("x"))];
    for (sql, construct) in [
        ("a IN (SELECT 1)", "subquery"),
        ("t SIMILAR TO 'x'", "SIMILAR TO"),
        ("substring(t from 1 for 1) = 'x'", "SUBSTRING"),
        ("now() > a", "function now"),
        ("a::smallint = 5", "cast to SMALLINT"),
        ("t ~ 'x'", "operator ~"),
    ] {
        let e = eval_row(&cols, sql).expect_err(sql);
        let text = e.to_string();
        assert!(matches!(e, OracleError::Unsupported { .. }), "{sql}: {text}");
        assert!(text.contains(construct), "{sql}: {text} should name {construct}");
    }
    let e = eval_row(&cols, "a = = 1").expect_err("syntax error");
    assert!(matches!(e, OracleError::Parse { .. }), "{e}");
}

#[test]
fn mysql_dialect_collation_and_conversions() {
    let cols = [("a", s("5")), ("t", s("Hello")), ("n", s("12abc"))];
    let my = |sql: &str| eval_row_in(Dialect::Mysql, &cols, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(my("t = 'HELLO'"), Some(true), "case-insensitive default collation");
    assert_eq!(my("t LIKE 'h%'"), Some(true));
    assert_eq!(my("a = '5'"), Some(true), "text converts to a number against a number");
    assert_eq!(my("n = 12"), Some(true), "by its numeric prefix");
    assert_eq!(my("a / 2 = 2.5"), Some(true), "division is exact, not integer");
    assert_eq!(my("a DIV 2 = 2"), Some(true));
    assert_eq!(my("(a / 0) IS NULL"), Some(true), "division by zero is NULL");
    assert_eq!(my("a AND 1"), Some(true), "numbers are truth values");
    assert_eq!(my("LENGTH('é') = 2 AND CHAR_LENGTH('é') = 1"), Some(true), "LENGTH counts bytes");
    // sqlparser gives MySQL's `||` (OR) the precedence of concatenation: refused, not misread.
    let e = eval_row_in(Dialect::Mysql, &cols, "a = 5 || a = 6").expect_err("|| is refused");
    assert!(matches!(e, OracleError::Unsupported { .. }), "{e}");
}
