//! The MongoDB filter table: filter / document pairs with the result the MongoDB manual
//! documents. Sources, cited per group:
//! - [sort] "Comparison/Sort Order" (reference/bson-type-comparison-order): type order,
//!   numeric types compared by value, simple binary string comparison, type bracketing;
//! - [null] "Query for Null or Missing Fields" (tutorial/query-for-null-fields);
//! - [eq] [ne] [gt] [gte] [lt] [lte] [in] [nin] [exists] [not] [and] [or] [nor]: the
//!   operator pages (reference/operator/query/<op>), including their array sections;
//! - [arrays] "Query an Array" (tutorial/query-arrays): a condition on an array field
//!   matches when one element does; an array operand matches the whole array exactly;
//! - [nan] the server's ComparisonMatchExpression (src/mongo/db/matcher/expression_leaf.cpp):
//!   NaN equals NaN and otherwise compares false with $lt/$gt/$lte/$gte.

use isocert_history::Table;
use serde_json::Value as Json;

use super::compile::{compile_filter, value, FilterError};
use super::eval::{evaluate, Document, FieldState};
use super::value::MValue;
use super::FieldRef;

/// A test document parsed from extended JSON (it can hold arrays, documents, decimals).
struct JsonDoc(Vec<(String, MValue)>);

impl Document for JsonDoc {
    fn field(&self, field: &FieldRef) -> FieldState<'_> {
        let name = match field {
            FieldRef::Key => "_id",
            FieldRef::KvValue => "value",
            FieldRef::Name(n) => n,
            FieldRef::Column(_) => unreachable!("the test table has no columns"),
        };
        match self.0.iter().find(|(k, _)| k == name) {
            Some((_, v)) => FieldState::Present(v.view()),
            None => FieldState::Missing,
        }
    }
}

fn doc(text: &str) -> JsonDoc {
    let Json::Object(map) = serde_json::from_str::<Json>(text).expect("test doc is JSON") else {
        panic!("test doc {text} is not an object")
    };
    JsonDoc(map.iter().map(|(k, v)| (k.clone(), value(v).expect("test doc value"))).collect())
}

fn table() -> Table {
    Table { name: "docs".into(), columns: Vec::new() }
}

fn run(filter: &str, document: &str) -> Result<bool, String> {
    let f = compile_filter(filter, &table()).map_err(|e| format!("{e:?}"))?;
    evaluate(&f, &doc(document))
}

/// (filter, document, documented result).
const TABLE: &[(&str, &str, bool)] = &[
    // [null] { item: null } matches a null or a missing field; $exists tells them apart.
    (r#"{"item": null}"#, r#"{"_id": 1, "item": null}"#, true),
    (r#"{"item": null}"#, r#"{"_id": 2}"#, true),
    (r#"{"item": null}"#, r#"{"_id": 3, "item": 0}"#, false),
    (r#"{"item": null}"#, r#"{"_id": 3, "item": ""}"#, false),
    (r#"{"item": {"$eq": null}}"#, r#"{"_id": 2}"#, true),
    (r#"{"item": {"$exists": false}}"#, r#"{"_id": 2}"#, true),
    (r#"{"item": {"$exists": false}}"#, r#"{"_id": 1, "item": null}"#, false),
    (r#"{"item": {"$exists": true}}"#, r#"{"_id": 1, "item": null}"#, true),
    (r#"{"item": {"$ne": null}}"#, r#"{"_id": 1, "item": null}"#, false),
    (r#"{"item": {"$ne": null}}"#, r#"{"_id": 2}"#, false),
    (r#"{"item": {"$ne": null}}"#, r#"{"_id": 3, "item": 5}"#, true),
    (r#"{"item": {"$in": [null]}}"#, r#"{"_id": 2}"#, true),
    (r#"{"item": {"$nin": [null]}}"#, r#"{"_id": 2}"#, false),
    (r#"{"item": {"$gte": null}}"#, r#"{"_id": 2}"#, true),
    (r#"{"item": {"$lte": null}}"#, r#"{"_id": 1, "item": null}"#, true),
    (r#"{"item": {"$gt": null}}"#, r#"{"_id": 1, "item": null}"#, false),
    (r#"{"item": {"$lt": null}}"#, r#"{"_id": 2}"#, false),
    (r#"{"item": {"$gte": null}}"#, r#"{"_id": 3, "item": 1}"#, false),
    // [ne] $ne selects documents whose field is not equal, including those without it.
    (r#"{"qty": {"$ne": 20}}"#, r#"{"qty": 20}"#, false),
    (r#"{"qty": {"$ne": 20}}"#, r#"{"qty": 15}"#, true),
    (r#"{"qty": {"$ne": 20}}"#, r#"{"item": "x"}"#, true),
    (r#"{"qty": {"$ne": 20}}"#, r#"{"qty": 20.0}"#, false),
    (r#"{"qty": {"$ne": 20}}"#, r#"{"qty": "20"}"#, true),
    // [nin] $nin: not in the list, or the field does not exist.
    (r#"{"qty": {"$nin": [5, 15]}}"#, r#"{"qty": 5}"#, false),
    (r#"{"qty": {"$nin": [5, 15]}}"#, r#"{"qty": 20}"#, true),
    (r#"{"qty": {"$nin": [5, 15]}}"#, r#"{"item": 1}"#, true),
    (r#"{"qty": {"$nin": []}}"#, r#"{"qty": 1}"#, true),
    // [in] $in: equal to any value in the list.
    (r#"{"qty": {"$in": [5, 15]}}"#, r#"{"qty": 15}"#, true),
    (r#"{"qty": {"$in": [5, 15]}}"#, r#"{"qty": 16}"#, false),
    (r#"{"qty": {"$in": [5, 15]}}"#, r#"{"item": 1}"#, false),
    (r#"{"qty": {"$in": []}}"#, r#"{"qty": 1}"#, false),
    (r#"{"qty": {"$in": ["5", 15.0]}}"#, r#"{"qty": 15}"#, true),
    (r#"{"qty": {"$in": ["5"]}}"#, r#"{"qty": 5}"#, false),
    // [eq] implicit and explicit equality; numbers equal across types [sort].
    (r#"{"qty": 20}"#, r#"{"qty": 20}"#, true),
    (r#"{"qty": 20}"#, r#"{"qty": 20.0}"#, true),
    (r#"{"qty": 20}"#, r#"{"qty": {"$numberLong": "20"}}"#, true),
    (r#"{"qty": 20}"#, r#"{"qty": {"$numberDecimal": "20.000"}}"#, true),
    (r#"{"qty": {"$numberDecimal": "0.1"}}"#, r#"{"qty": 0.1}"#, false),
    (r#"{"qty": {"$eq": 20}}"#, r#"{"qty": "20"}"#, false),
    (r#"{"qty": {"$eq": 20}}"#, r#"{"qty": true}"#, false),
    (r#"{"flag": true}"#, r#"{"flag": 1}"#, false),
    (r#"{"flag": true}"#, r#"{"flag": true}"#, true),
    (r#"{"name": "abc"}"#, r#"{"name": "abc"}"#, true),
    (r#"{"name": "abc"}"#, r#"{"name": "ABC"}"#, false),
    (r#"{"name": "abc"}"#, r#"{"name": "abc "}"#, false),
    (r#"{"qty": -0.0}"#, r#"{"qty": 0}"#, true),
    (r#"{"size": {"h": 14, "w": 21}}"#, r#"{"size": {"h": 14, "w": 21}}"#, true),
    (r#"{"size": {"h": 14, "w": 21}}"#, r#"{"size": {"w": 21, "h": 14}}"#, false),
    (r#"{"size": {"h": 14}}"#, r#"{"size": {"h": 14, "w": 21}}"#, false),
    // [gt] [gte] [lt] [lte] with type bracketing [sort]: only the operand's type matches.
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": 6}"#, true),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": 5}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": 5.5}"#, true),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": "6"}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": "abc"}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": true}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": null}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"other": 9}"#, false),
    (r#"{"qty": {"$gt": 5}}"#, r#"{"qty": {"a": 9}}"#, false),
    (r#"{"qty": {"$gte": 5}}"#, r#"{"qty": 5}"#, true),
    (r#"{"qty": {"$gte": 5}}"#, r#"{"qty": {"$numberDecimal": "4.9999999999999999999"}}"#, false),
    (r#"{"qty": {"$gte": 5}}"#, r#"{"qty": {"$numberLong": "5"}}"#, true),
    (r#"{"qty": {"$lt": 20}}"#, r#"{"qty": 19.999}"#, true),
    (r#"{"qty": {"$lt": 20}}"#, r#"{"qty": 20}"#, false),
    (r#"{"qty": {"$lt": 20}}"#, r#"{"qty": "1"}"#, false),
    (r#"{"qty": {"$lt": 20}}"#, r#"{"qty": null}"#, false),
    (r#"{"qty": {"$lt": 20}}"#, r#"{"x": 1}"#, false),
    (r#"{"qty": {"$lte": 20}}"#, r#"{"qty": 20.0}"#, true),
    (r#"{"qty": {"$lte": 20}}"#, r#"{"qty": {"$numberDouble": "-Infinity"}}"#, true),
    (r#"{"qty": {"$gt": 20}}"#, r#"{"qty": {"$numberDouble": "Infinity"}}"#, true),
    (r#"{"qty": {"$gt": {"$numberLong": "9007199254740992"}}}"#, r#"{"qty": 9007199254740993}"#, true),
    (r#"{"qty": {"$gt": 9007199254740992.0}}"#, r#"{"qty": 9007199254740993}"#, true),
    (r#"{"qty": {"$gte": 2, "$lt": 5}}"#, r#"{"qty": 2}"#, true),
    (r#"{"qty": {"$gte": 2, "$lt": 5}}"#, r#"{"qty": 5}"#, false),
    (r#"{"qty": {"$gte": 2, "$lt": 5}}"#, r#"{"qty": 4.99}"#, true),
    (r#"{"qty": {"$gte": 2, "$lt": 5}}"#, r#"{"qty": "3"}"#, false),
    // Strings compare bytewise (simple binary comparison) [sort].
    (r#"{"s": {"$gt": "a"}}"#, r#"{"s": "b"}"#, true),
    (r#"{"s": {"$gt": "a"}}"#, r#"{"s": "B"}"#, false),
    (r#"{"s": {"$gt": "a"}}"#, r#"{"s": "ab"}"#, true),
    (r#"{"s": {"$lt": "a"}}"#, r#"{"s": ""}"#, true),
    (r#"{"s": {"$gt": "z"}}"#, r#"{"s": "é"}"#, true),
    (r#"{"s": {"$lt": "a"}}"#, r#"{"s": 5}"#, false),
    (r#"{"s": {"$gt": "a"}}"#, r#"{"s": {"x": 1}}"#, false),
    (r#"{"b": {"$gt": false}}"#, r#"{"b": true}"#, true),
    (r#"{"b": {"$lt": true}}"#, r#"{"b": 0}"#, false),
    // [nan] NaN equals NaN, never compares greater or less.
    (r#"{"v": {"$numberDouble": "NaN"}}"#, r#"{"v": {"$numberDouble": "NaN"}}"#, true),
    (r#"{"v": {"$numberDouble": "NaN"}}"#, r#"{"v": {"$numberDecimal": "NaN"}}"#, true),
    (r#"{"v": {"$lt": 5}}"#, r#"{"v": {"$numberDouble": "NaN"}}"#, false),
    (r#"{"v": {"$gt": 5}}"#, r#"{"v": {"$numberDouble": "NaN"}}"#, false),
    (r#"{"v": {"$gte": {"$numberDouble": "NaN"}}}"#, r#"{"v": {"$numberDouble": "NaN"}}"#, true),
    (r#"{"v": {"$lte": {"$numberDouble": "NaN"}}}"#, r#"{"v": 1}"#, false),
    (r#"{"v": {"$ne": {"$numberDouble": "NaN"}}}"#, r#"{"v": 1}"#, true),
    // [arrays] an element match or the whole array.
    (r#"{"tags": "red"}"#, r#"{"tags": ["blank", "red"]}"#, true),
    (r#"{"tags": "red"}"#, r#"{"tags": ["blank", "blue"]}"#, false),
    (r#"{"tags": ["red", "blank"]}"#, r#"{"tags": ["red", "blank"]}"#, true),
    (r#"{"tags": ["red", "blank"]}"#, r#"{"tags": ["blank", "red"]}"#, false),
    (r#"{"tags": ["red"]}"#, r#"{"tags": [["red"], "x"]}"#, true),
    (r#"{"dim": {"$gt": 25}}"#, r#"{"dim": [14, 21]}"#, false),
    (r#"{"dim": {"$gt": 25}}"#, r#"{"dim": [14, 30]}"#, true),
    (r#"{"dim": {"$gt": 15, "$lt": 20}}"#, r#"{"dim": [10, 22]}"#, true),
    (r#"{"dim": {"$lt": 5}}"#, r#"{"dim": []}"#, false),
    (r#"{"dim": null}"#, r#"{"dim": [1, null]}"#, true),
    (r#"{"dim": null}"#, r#"{"dim": [1, 2]}"#, false),
    (r#"{"dim": {"$ne": 1}}"#, r#"{"dim": [1, 2]}"#, false),
    (r#"{"dim": {"$ne": 3}}"#, r#"{"dim": [1, 2]}"#, true),
    (r#"{"dim": {"$in": [2, 9]}}"#, r#"{"dim": [1, 2]}"#, true),
    (r#"{"dim": {"$nin": [2, 9]}}"#, r#"{"dim": [1, 2]}"#, false),
    (r#"{"dim": {"$exists": true}}"#, r#"{"dim": []}"#, true),
    (r#"{"dim": {"$gt": "a"}}"#, r#"{"dim": [1, "b"]}"#, true),
    // [not] $not matches documents where the condition fails, missing fields included.
    (r#"{"price": {"$not": {"$gt": 1.99}}}"#, r#"{"price": 1.99}"#, true),
    (r#"{"price": {"$not": {"$gt": 1.99}}}"#, r#"{"price": 2.5}"#, false),
    (r#"{"price": {"$not": {"$gt": 1.99}}}"#, r#"{"item": "x"}"#, true),
    (r#"{"price": {"$not": {"$gt": 1.99}}}"#, r#"{"price": "3"}"#, true),
    (r#"{"price": {"$not": {"$gte": 1, "$lte": 2}}}"#, r#"{"price": 3}"#, true),
    (r#"{"price": {"$not": {"$gte": 1, "$lte": 2}}}"#, r#"{"price": 1.5}"#, false),
    // [exists] with a condition: present and not in the list.
    (r#"{"qty": {"$exists": true, "$nin": [5, 15]}}"#, r#"{"qty": 5}"#, false),
    (r#"{"qty": {"$exists": true, "$nin": [5, 15]}}"#, r#"{"qty": 6}"#, true),
    (r#"{"qty": {"$exists": true, "$nin": [5, 15]}}"#, r#"{"x": 6}"#, false),
    (r#"{"qty": {"$exists": 0}}"#, r#"{"x": 6}"#, true),
    // [and] [or] [nor] and the implicit conjunction of fields.
    (r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "b": 2}"#, true),
    (r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "b": 3}"#, false),
    (r#"{"$and": [{"a": {"$ne": 1.99}}, {"a": {"$exists": true}}]}"#, r#"{"a": 2}"#, true),
    (r#"{"$and": [{"a": {"$ne": 1.99}}, {"a": {"$exists": true}}]}"#, r#"{"b": 2}"#, false),
    (r#"{"$or": [{"qty": {"$lt": 20}}, {"price": 10}]}"#, r#"{"qty": 30, "price": 10}"#, true),
    (r#"{"$or": [{"qty": {"$lt": 20}}, {"price": 10}]}"#, r#"{"qty": 30, "price": 11}"#, false),
    (r#"{"$or": [{"qty": {"$lt": 20}}, {"price": 10}]}"#, r#"{"qty": 3}"#, true),
    (r#"{"$nor": [{"price": 1.99}, {"sale": true}]}"#, r#"{"price": 1.99, "sale": false}"#, false),
    (r#"{"$nor": [{"price": 1.99}, {"sale": true}]}"#, r#"{"price": 2, "sale": false}"#, true),
    (r#"{"$nor": [{"price": 1.99}, {"sale": true}]}"#, r#"{"item": "x"}"#, true),
    (r#"{"$nor": [{"price": 1.99}, {"sale": true}]}"#, r#"{"sale": true}"#, false),
    (r#"{}"#, r#"{"anything": 1}"#, true),
    (r#"{"_id": 7}"#, r#"{"_id": 7, "value": 1}"#, true),
];

#[test]
fn documented_filter_results() {
    assert!(TABLE.len() >= 100, "the table has {} pairs", TABLE.len());
    let mut failures = Vec::new();
    for (filter, document, want) in TABLE {
        match run(filter, document) {
            Ok(got) if got == *want => {}
            other => failures.push(format!("{filter} on {document}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), TABLE.len(), failures.join("\n"));
}

#[test]
fn unsupported_operators_are_refused_by_name() {
    let cases = [
        (r#"{"a": {"$regex": "^x"}}"#, "$regex"),
        (r#"{"$where": "this.a > 1"}"#, "$where"),
        (r#"{"$expr": {"$gt": ["$a", "$b"]}}"#, "$expr"),
        (r#"{"$text": {"$search": "x"}}"#, "$text"),
        (r#"{"a": {"$type": "string"}}"#, "$type"),
        (r#"{"a": {"$elemMatch": {"$gt": 1}}}"#, "$elemMatch"),
        (r#"{"a": {"$size": 2}}"#, "$size"),
        (r#"{"a": {"$all": [1, 2]}}"#, "$all"),
        (r#"{"a": {"$mod": [4, 0]}}"#, "$mod"),
        (r#"{"a": {"$eq": {"$oid": "5f1d7f3e1c9d440000a1b2c3"}}}"#, "$oid"),
        (r#"{"a": {"$gt": {"$date": "2024-01-01T00:00:00Z"}}}"#, "$date"),
        (r#"{"a.b": 1}"#, "dotted field path"),
        (
            r#"{"a": {"$not": {"$regularExpression": {"pattern": "x", "options": ""}}}}"#,
            "$not with a regular expression",
        ),
    ];
    for (filter, name) in cases {
        match compile_filter(filter, &table()) {
            Err(FilterError::Unsupported(construct)) => {
                assert!(construct.contains(name), "{filter}: {construct:?} should name {name}")
            }
            other => panic!("{filter}: expected Unsupported({name}), got {other:?}"),
        }
    }
}

#[test]
fn invalid_filters_are_errors_not_panics() {
    for filter in [
        "not json",
        "[1, 2]",
        r#"{"$and": []}"#,
        r#"{"$or": {"a": 1}}"#,
        r#"{"a": {"$in": 5}}"#,
        r#"{"a": {"$not": 5}}"#,
        r#"{"a": {"$gt": 1, "b": 2}}"#,
        r#"{"a": {"$exists": "yes"}}"#,
        r#"{"a": {"$numberInt": "x"}}"#,
        r#"{"": 1}"#,
    ] {
        assert!(compile_filter(filter, &table()).is_err(), "{filter} should not compile");
    }
}

/// Through the [`crate::Interpreter`] on a history in the `mongodb` dialect, read from v1.
#[test]
fn interpreter_answers_mongodb_histories() {
    use crate::{Interpreter, MatchesOracle};
    use isocert_history::{v1, Op, Scalar};
    use std::ops::Bound;
    let text = concat!(
        r#"{"format":"isocert-history","version":1,"dialect":"mongodb"}"#,
        "\n",
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":3},{"f":"w","key":2,"value":"3"},"#,
        r#"{"f":"select","table":"kv","where":"{\"value\": {\"$gte\": 2, \"$lt\": 5}}","rows":[{"key":1,"value":3}]}]}"#,
        "\n"
    );
    let h = v1::read_history(text.as_bytes()).expect("history reads");
    assert_eq!(h.dialect, isocert_history::Dialect::Mongodb);
    let oracle = Interpreter::new(&h).expect("filters compile");
    let Op::Write { obj: o1, value: v1 } = h.txns[0].ops[0] else { panic!() };
    let Op::Write { obj: o2, value: v2 } = h.txns[0].ops[1] else { panic!() };
    let pred = h.txns[0].ops[2].predicate().expect("a predicate read");
    assert!(oracle.matches(&h, pred, o1, v1).unwrap());
    // Type bracketing: the string "3" is not in a numeric range.
    assert!(!oracle.matches(&h, pred, o2, v2).unwrap());
    let b = oracle.bounds(pred);
    assert_eq!(b.constraints.len(), 1);
    assert_eq!(b.constraints[0].column, isocert_history::ColId(1));
    assert_eq!(b.constraints[0].intervals[0].low, Bound::Included(Scalar::Int(2)));
    assert_eq!(b.constraints[0].intervals[0].high, Bound::Excluded(Scalar::Int(5)));
    // Written back, the header keeps the dialect.
    let mut out = Vec::new();
    v1::write_history(&h, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains(r#""dialect":"mongodb""#));
}

#[test]
fn interpreter_refuses_bad_filters_and_ambiguous_exists() {
    use crate::{Interpreter, MatchesOracle, OracleError};
    use isocert_history::{Dialect, History, Scalar};
    let mut h = History::new();
    h.dialect = Dialect::Mongodb;
    let t = h.intern_table("people");
    let (id, name) = (h.intern_column(t, "_id"), h.intern_column(t, "name"));
    let row = h.intern_row(&[(id, Scalar::Int(1)), (name, Scalar::Null)]);
    let obj = h.intern_object(t, Scalar::Int(1));
    let exists = h.intern_predicate(t, r#"{"name": {"$exists": true}}"#);
    let null = h.intern_predicate(t, r#"{"name": null}"#);
    let oracle = Interpreter::new(&h).unwrap();
    assert!(oracle.matches(&h, null, obj, row).unwrap());
    let e = oracle.matches(&h, exists, obj, row).unwrap_err();
    assert!(matches!(e, OracleError::Eval { .. }), "{e}");
    assert!(e.to_string().contains("null or a missing field"), "{e}");

    let mut bad = History::new();
    bad.dialect = Dialect::Mongodb;
    let t = bad.intern_table("kv");
    bad.intern_predicate(t, r#"{"value": {"$regex": "^a"}}"#);
    let e = Interpreter::new(&bad).unwrap_err();
    assert!(matches!(&e, OracleError::Unsupported { construct, .. } if construct.contains("$regex")), "{e}");
}
