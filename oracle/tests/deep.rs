//! Long predicates (issue 10, item 8): a 3,000-term `c0 + 0 + ...` and AND/OR chains of
//! tens of thousands of terms overflowed the stack; PostgreSQL evaluates them, so the
//! interpreter must too, and an expression nested past the limit is refused by name.
//!
//! Each runs on a thread with the stack the `isocert` binary gives its worker
//! (cli/src/main.rs): the compiler flattens AND/OR chains, but sqlparser's tree of such a
//! chain is still left-deep (its drop recurses).

use isocert_oracle::OracleError;

use crate::common::{eval_row, s};

fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(512 << 20).spawn(f).unwrap().join().unwrap()
}

#[test]
fn a_long_arithmetic_chain_is_evaluated() {
    let sql = format!("c0{} = 7", " + 0".repeat(3000));
    let truth = on_big_stack(move || eval_row(&[("c0", s("7"))], &sql));
    assert_eq!(truth.unwrap(), Some(true));
    let sql = format!("c0{} = 7", " + 1".repeat(3000));
    let truth = on_big_stack(move || eval_row(&[("c0", s("7"))], &sql));
    assert_eq!(truth.unwrap(), Some(false));
}

#[test]
fn long_and_or_chains_are_evaluated() {
    on_big_stack(|| {
        let and = vec!["c0 > 0"; 35_000].join(" AND ");
        assert_eq!(eval_row(&[("c0", s("1"))], &and).unwrap(), Some(true));
        assert_eq!(eval_row(&[("c0", s("0"))], &and).unwrap(), Some(false));
        let or = format!("{} OR c0 = 5", vec!["c0 < 0"; 40_000].join(" OR "));
        assert_eq!(eval_row(&[("c0", s("5"))], &or).unwrap(), Some(true));
        assert_eq!(eval_row(&[("c0", s("4"))], &or).unwrap(), Some(false));
    });
}

#[test]
fn nesting_past_the_limit_is_refused_by_name_with_a_short_quote() {
    let sql = format!("c0{} = 7", " + 0".repeat(20_000));
    let err = on_big_stack(move || eval_row(&[("c0", s("7"))], &sql)).unwrap_err();
    assert!(matches!(err, OracleError::Unsupported { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("nested 20002 levels deep"), "{text}");
    assert!(text.len() < 1000, "the error quotes the whole predicate: {} bytes", text.len());
}
