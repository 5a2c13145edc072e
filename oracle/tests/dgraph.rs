//! The `dgraph` dialect: predicates are DQL filters, evaluated with Dgraph's semantics. The
//! expectations follow Dgraph's DQL documentation ("Functions" and "Connecting filters"):
//! `eq`, `ge`, `gt`, `le`, `lt` compare a node's value of the predicate with the constant,
//! `eq` with a list matches any of its values, `between` includes both ends; a node without
//! the predicate matches none of them; `NOT` is set difference (so it matches such a node),
//! `AND`/`OR` intersect and unite.

use isocert_history::{Dialect, History, Scalar};
use isocert_oracle::{Interpreter, MatchesOracle, OracleError};

/// Table `t` (columns `id`, `c1`, `v`); the row evaluated has the given columns only.
fn matches(row: &[(&str, Option<i64>)], filter: &str) -> Result<bool, OracleError> {
    let mut h = History::new();
    h.dialect = Dialect::Dgraph;
    let t = h.intern_table("t");
    let all: Vec<_> = ["id", "c1", "v"].iter().map(|c| (h.intern_column(t, c), Scalar::Int(0))).collect();
    h.intern_row(&all);
    let cols: Vec<_> =
        row.iter().map(|(c, v)| (h.intern_column(t, c), v.map_or(Scalar::Null, Scalar::Int))).collect();
    let value = h.intern_row(&cols);
    let obj = h.intern_object(t, Scalar::Int(1));
    let pred = h.intern_predicate(t, filter);
    Interpreter::new(&h)?.matches(&h, pred, obj, value)
}

/// A row: each column present, with a value or NULL.
type Row = &'static [(&'static str, Option<i64>)];

const FULL: Row = &[("id", Some(1)), ("c1", Some(5)), ("v", Some(10))];
/// A node without `c1` (Dgraph: the predicate has no value for it).
const NO_C1: Row = &[("id", Some(2)), ("v", Some(20))];
/// `c1` present as NULL in the row: the same as absent.
const NULL_C1: Row = &[("id", Some(3)), ("c1", None), ("v", Some(30))];

#[test]
fn functions_connectives_and_missing_predicates_follow_dgraph() {
    let table: &[(&str, Row, bool)] = &[
        ("eq(c1, 5)", FULL, true),
        ("eq(c1, 4)", FULL, false),
        ("eq(c1, [1, 5, 9])", FULL, true),
        ("eq(c1, [1, 9])", FULL, false),
        ("eq(c1, [5])", FULL, true),
        ("ge(c1, 5)", FULL, true),
        ("ge(c1, 6)", FULL, false),
        ("gt(c1, 5)", FULL, false),
        ("gt(c1, 4)", FULL, true),
        ("le(c1, 5)", FULL, true),
        ("le(c1, 4)", FULL, false),
        ("lt(c1, 5)", FULL, false),
        ("lt(c1, 6)", FULL, true),
        ("between(c1, 5, 9)", FULL, true),
        ("between(c1, 1, 5)", FULL, true),
        ("between(c1, 6, 9)", FULL, false),
        ("between(c1, 9, 1)", FULL, false),
        ("ge(v, -3)", FULL, true),
        ("lt(v, -3)", FULL, false),
        ("eq(id, 1) AND ge(v, 10)", FULL, true),
        ("eq(id, 1) AND gt(v, 10)", FULL, false),
        ("eq(id, 2) OR gt(v, 9)", FULL, true),
        ("eq(id, 2) OR gt(v, 10)", FULL, false),
        ("NOT eq(c1, 5)", FULL, false),
        ("NOT eq(c1, 4)", FULL, true),
        ("not lt(v, 5) and (eq(c1, 1) or eq(c1, 5))", FULL, true),
        ("eq(id, 2) OR eq(id, 1) AND eq(v, 11)", FULL, false),
        ("(eq(id, 2) OR eq(id, 1)) AND eq(v, 10)", FULL, true),
        ("NOT NOT eq(id, 1)", FULL, true),
        // A node without the predicate matches no function of it...
        ("eq(c1, 5)", NO_C1, false),
        ("ge(c1, -1000)", NO_C1, false),
        ("lt(c1, 1000)", NO_C1, false),
        ("le(c1, 0)", NO_C1, false),
        ("gt(c1, 0)", NO_C1, false),
        ("between(c1, -1000, 1000)", NO_C1, false),
        ("eq(c1, [0, 5])", NO_C1, false),
        // ... and NOT, a set difference, matches it (SQL's NOT of NULL would not).
        ("NOT eq(c1, 5)", NO_C1, true),
        ("NOT ge(c1, 0)", NO_C1, true),
        ("NOT between(c1, 0, 9) AND eq(v, 20)", NO_C1, true),
        ("eq(v, 20) AND ge(c1, 0)", NO_C1, false),
        ("eq(v, 20) OR ge(c1, 0)", NO_C1, true),
        ("ge(c1, 0) OR lt(c1, 0)", NO_C1, false),
        ("NOT (ge(c1, 0) OR lt(c1, 0))", NO_C1, true),
        ("eq(c1, 5)", NULL_C1, false),
        ("NOT eq(c1, 5)", NULL_C1, true),
        ("NOT lt(c1, 0) AND NOT ge(c1, 0)", NULL_C1, true),
    ];
    for (filter, row, expected) in table {
        let got = matches(row, filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(got, *expected, "{filter} on {row:?}");
    }
}

#[test]
fn unsupported_functions_and_constants_are_refused_by_name() {
    let table = [
        ("has(c1)", "the DQL function has()"),
        ("uid(0x1)", "the DQL function uid()"),
        ("regexp(c1, 5)", "the DQL function regexp()"),
        ("anyofterms(c1, 5)", "the DQL function anyofterms()"),
        ("eq(val(x), 5)", "the DQL function val() as an argument"),
        ("eq(count(c1), 5)", "the DQL function count() as an argument"),
        ("ge(c1, 2.5)", "non-integer constant"),
        ("eq(c1, \"a\")", "string constants"),
        ("eq(<c1>, 5)", "IRIs"),
        ("c1 >= 5", "the SQL operator >="),
        ("c1 AND eq(v, 1)", "c1 outside a function"),
    ];
    for (filter, construct) in table {
        let e = matches(FULL, filter).expect_err(filter);
        assert!(matches!(e, OracleError::Unsupported { .. }), "{filter}: {e}");
        assert!(e.to_string().contains(construct), "{filter}: {e}");
    }
    let parse = ["eq(c1 5)", "eq(c1, 5", "ge(c1, 5) AND", "eq(c1, 5) eq(v, 1)", "ge(c1, 5) % 2", ""];
    for filter in parse {
        let e = matches(FULL, filter).expect_err(filter);
        assert!(matches!(e, OracleError::Parse { .. }), "{filter}: {e}");
    }
    let e = matches(FULL, "eq(c9, 5)").unwrap_err();
    assert!(matches!(e, OracleError::Invalid { .. }) && e.to_string().contains("column c9"), "{e}");
}

#[test]
fn bounds_cover_what_a_filter_can_match() {
    let mut h = History::new();
    h.dialect = Dialect::Dgraph;
    let t = h.intern_table("t");
    let (id, c1) = (h.intern_column(t, "id"), h.intern_column(t, "c1"));
    h.intern_row(&[(id, Scalar::Int(1)), (c1, Scalar::Int(2))]);
    let ranged = h.intern_predicate(t, "between(c1, 3, 5) AND ge(id, 10)");
    let either = h.intern_predicate(t, "eq(c1, [1, 4]) OR lt(c1, 0)");
    let negated = h.intern_predicate(t, "NOT eq(c1, 3)");
    let i = Interpreter::new(&h).unwrap();
    assert_eq!(i.bounds(ranged).constraints.len(), 2);
    assert_eq!(i.bounds(either).constraints.len(), 1);
    assert_eq!(i.bounds(either).constraints[0].intervals.len(), 3);
    // NOT matches nodes without the predicate: no constraint.
    assert!(i.bounds(negated).constraints.is_empty());
}
