//! Range extraction: exact shapes for simple predicates, and soundness on random ones
//! (every row a predicate matches lies within its bounds).

use std::ops::Bound;

use isocert_history::{History, Scalar, Value};
use isocert_oracle::{sql_cmp, Bounds, Interpreter, Interval, MatchesOracle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::grammar::{row, Grammar, COLUMNS};

fn bounds_of(sql: &str) -> Bounds {
    let mut h = History::new();
    let t = h.intern_table("t");
    for (c, _) in COLUMNS {
        h.intern_column(t, c);
    }
    let pred = h.intern_predicate(t, sql);
    Interpreter::new(&h).unwrap_or_else(|e| panic!("{sql}: {e}")).bounds(pred)
}

fn iv(low: Bound<Scalar>, high: Bound<Scalar>) -> Interval {
    Interval { low, high }
}

#[test]
fn ranges_in_lists_and_like_prefixes() {
    let b = bounds_of("i BETWEEN 2 AND 5 AND j > 3");
    assert_eq!(b.constraints.len(), 2);
    assert_eq!(b.constraints[0].intervals, vec![iv(Bound::Included(2.into()), Bound::Included(5.into()))]);
    assert_eq!(b.constraints[1].intervals, vec![iv(Bound::Excluded(3.into()), Bound::Unbounded)]);

    let b = bounds_of("i IN (3, 1, NULL, 3)");
    let points: Vec<_> =
        [1, 3].iter().map(|v| iv(Bound::Included((*v).into()), Bound::Included((*v).into()))).collect();
    assert_eq!(b.constraints[0].intervals, points);

    let b = bounds_of("s LIKE 'ab%'");
    assert_eq!(
        b.constraints[0].intervals,
        vec![iv(Bound::Included("ab".into()), Bound::Excluded("ac".into()))]
    );
}

#[test]
fn and_intersects_or_unions_else_everything() {
    let b = bounds_of("i > 1 AND i < 4");
    assert_eq!(b.constraints[0].intervals, vec![iv(Bound::Excluded(1.into()), Bound::Excluded(4.into()))]);
    let b = bounds_of("i < 1 OR i > 4");
    assert_eq!(b.constraints[0].intervals.len(), 2);
    let b = bounds_of("i < 1 OR j > 4");
    assert!(b.constraints.is_empty(), "different columns: no constraint");
    assert!(bounds_of("NOT (i = 1)").constraints.is_empty());
    assert!(bounds_of("i + 1 = 2").constraints.is_empty());
    assert!(bounds_of("i = 1.5").constraints.is_empty(), "numeric literals are not bounded");
    let b = bounds_of("i > 5 AND i < 2");
    assert!(b.constraints[0].intervals.is_empty(), "contradiction: no row can match");
}

fn within(v: &Scalar, intervals: &[Interval]) -> bool {
    use std::cmp::Ordering::*;
    if v.is_null() {
        return false;
    }
    intervals.iter().any(|i| {
        let low = match &i.low {
            Bound::Unbounded => true,
            Bound::Included(x) => matches!(sql_cmp(v, x), Some(Greater | Equal)),
            Bound::Excluded(x) => sql_cmp(v, x) == Some(Greater),
        };
        let high = match &i.high {
            Bound::Unbounded => true,
            Bound::Included(x) => matches!(sql_cmp(v, x), Some(Less | Equal)),
            Bound::Excluded(x) => sql_cmp(v, x) == Some(Less),
        };
        low && high
    })
}

#[test]
fn bounds_hold_for_every_matching_row_of_random_predicates() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut h = History::new();
    let t = h.intern_table("t");
    let cols: Vec<_> = COLUMNS.iter().map(|(c, _)| h.intern_column(t, c)).collect();
    let mut objects = Vec::new();
    for id in 0..40 {
        let values = row(&mut rng, id);
        let pairs: Vec<_> = cols.iter().copied().zip(values).collect();
        let value = h.intern_row(&pairs);
        objects.push((h.intern_object(t, Scalar::Int(id)), value));
    }
    let mut g = Grammar { rng: &mut rng };
    let preds: Vec<_> = (0..1500).map(|_| g.cond(3)).map(|sql| h.intern_predicate(t, &sql)).collect();
    let (oracle, _) = Interpreter::new_lenient(&h);
    let (mut checked, mut constrained) = (0, 0);
    for &p in &preds {
        let bounds = oracle.bounds(p);
        constrained += usize::from(!bounds.constraints.is_empty());
        for &(obj, value) in &objects {
            if !oracle.matches(&h, p, obj, value).unwrap_or(false) {
                continue;
            }
            let Value::Row(r) = h.value(value) else { unreachable!() };
            for c in &bounds.constraints {
                checked += 1;
                assert!(
                    within(r.get(c.column), &c.intervals),
                    "{} matches {} but violates {c:?}",
                    h.predicate(p).sql,
                    h.value_label(obj, value)
                );
            }
        }
    }
    assert!(
        constrained > 100 && checked > 500,
        "too little exercised: {constrained} predicates, {checked} checks"
    );
}
