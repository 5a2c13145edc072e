//! Issue 16: the v1 reader interns a returned row by laying it out in a reused buffer and
//! looking it up from there by the row's own hash (`History::intern_row`), building the
//! owned row only when it is new. On random rows (repeated rows, repeated and out-of-order
//! columns, NULLs inside and at the end, floats including -0.0, text, wide rows) it must
//! give the ids and the value table of the simple reference: each row built whole and
//! interned as a `Value::Row` through `History::intern_value`.

use isocert_history::{v1, ColId, History, Op, Row, Scalar, Value};
use proptest::prelude::*;
use serde_json::Value as Json;

/// Column names: some rows are wide.
const NAMES: usize = 20;

/// One scalar, as JSON text.
fn scalar_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0i64..4).prop_map(|i| i.to_string()),
        1 => Just("null".to_string()),
        1 => prop::sample::select(vec!["0.0", "-0.0", "1.5", "true", "false"]).prop_map(str::to_string),
        1 => prop::sample::select(vec![r#""a""#, r#""b\nc""#, r#""\u0061""#]).prop_map(str::to_string),
    ]
}

/// One row: members named from `NAMES` (some repeated), mostly few, sometimes wide.
fn row_text() -> impl Strategy<Value = String> {
    let narrow = prop::collection::vec((0..6usize, scalar_text()), 0..5);
    let wide = prop::collection::vec((0..NAMES, scalar_text()), 0..24);
    prop_oneof![4 => narrow, 1 => wide].prop_map(|members| {
        let members: Vec<String> = members.iter().map(|(c, s)| format!("\"c{c}\":{s}")).collect();
        format!("{{{}}}", members.join(","))
    })
}

/// A history of select operations returning `rows`, a few per operation.
fn history_text(rows: &[String]) -> String {
    let mut text = String::new();
    for (t, chunk) in rows.chunks(3).enumerate() {
        let rows: Vec<String> =
            chunk.iter().enumerate().map(|(k, r)| format!(r#"{{"key":{k},"value":{r}}}"#)).collect();
        text.push_str(&format!(
            r#"{{"id":{t},"session":1,"ops":[{{"f":"select","table":"t","where":"c0 > 0","rows":[{}]}}]}}"#,
            rows.join(",")
        ));
        text.push('\n');
    }
    text
}

fn reference_scalar(json: &Json) -> Scalar {
    match json {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => n.as_i64().map_or_else(|| Scalar::Float(n.as_f64().unwrap()), Scalar::Int),
        Json::String(s) => Scalar::Text(s.as_str().into()),
        other => panic!("not a scalar: {other}"),
    }
}

/// The reference: each row parsed by `serde_json`, built whole in column order and
/// interned as a `Value::Row` into a fresh history, in reading order.
fn reference_ids(rows: &[String]) -> (History, Vec<isocert_history::ValueId>) {
    let mut h = History::new();
    let table = h.intern_table("t");
    let ids = rows
        .iter()
        .map(|text| {
            let Json::Object(members) = serde_json::from_str::<Json>(text).unwrap() else { panic!("{text}") };
            let cols: Vec<_> = members.iter().map(|(name, v)| (h.intern_column(table, name), v)).collect();
            let width = cols.iter().map(|(c, _)| c.index() + 1).max().unwrap_or(0);
            let mut row = vec![Scalar::Null; width];
            for (c, v) in cols {
                row[c.index()] = reference_scalar(v);
            }
            h.intern_value(Value::Row(Row::new(row)))
        })
        .collect();
    (h, ids)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rows_intern_like_the_reference(rows in prop::collection::vec(row_text(), 1..40)) {
        // Repeat the rows so that most lookups find a row already interned.
        let rows: Vec<String> = rows.iter().chain(rows.iter().rev()).cloned().collect();
        let text = history_text(&rows);
        let h = v1::read_history(text.as_bytes()).unwrap();
        let read: Vec<_> = h
            .txns
            .iter()
            .flat_map(|t| &t.ops)
            .flat_map(|op| match op {
                Op::Select { rows, .. } => rows.iter().map(|r| r.value),
                other => panic!("not a select: {other:?}"),
            })
            .collect();
        let (reference, ids) = reference_ids(&rows);
        prop_assert_eq!(&read, &ids);
        prop_assert_eq!(h.value_count(), reference.value_count());
        for i in 0..reference.value_count() {
            let id = isocert_history::ValueId::from_index(i);
            prop_assert_eq!(h.value(id), reference.value(id));
        }
        // Interning a row again (as column pairs in reverse order with a trailing NULL, or
        // as a built value) finds it, in a copy and in the reference built the other way.
        let mut again = h.clone();
        let mut other = reference.clone();
        for &id in &read {
            let Value::Row(row) = h.value(id).clone() else { panic!("not a row") };
            let mut pairs: Vec<(ColId, Scalar)> =
                row.columns().iter().enumerate().map(|(c, s)| (ColId::from_index(c), s.clone())).collect();
            pairs.push((ColId::from_index(pairs.len()), Scalar::Null));
            pairs.reverse();
            prop_assert_eq!(again.intern_row(&pairs), id);
            prop_assert_eq!(other.intern_row(&pairs), id);
            prop_assert_eq!(again.intern_value(Value::Row(row)), id);
        }
        prop_assert_eq!(again.value_count(), h.value_count());
        prop_assert_eq!(other.value_count(), h.value_count());
    }
}

/// Predicates are interned from the borrowed text: the same table and text give the same
/// id, in the order a plain map of owned (table, text) pairs gives them.
#[test]
fn predicates_intern_like_a_map() {
    let mut h = History::new();
    let tables = [h.intern_table("t"), h.intern_table("u")];
    let mut reference: std::collections::HashMap<(usize, String), usize> = std::collections::HashMap::new();
    let mut state = 11u64;
    for _ in 0..5000 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let table = (state >> 40) as usize % 2;
        let sql = format!("c0 > {}", (state >> 20) % 700);
        let next = reference.len();
        let want = *reference.entry((table, sql.clone())).or_insert(next);
        let id = h.intern_predicate(tables[table], &sql);
        assert_eq!(id.index(), want, "{sql}");
        assert_eq!(&*h.predicate(id).sql, sql.as_str());
        assert_eq!(h.predicate(id).table, tables[table]);
    }
    assert_eq!(h.predicates().len(), reference.len());
}
