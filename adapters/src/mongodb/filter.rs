//! The workload's SQL `WHERE` subset (integer comparisons, `AND`, `OR`, `NOT`, `BETWEEN`,
//! `IN`) as a MongoDB query filter, the text the history records in the `mongodb` dialect.
//!
//! Workload columns are `NOT NULL` integers, so SQL's three-valued logic never applies and
//! the translation is exact: `c1 BETWEEN 2 AND 4` is `{"c1": {"$gte": 2, "$lte": 4}}`. The
//! primary key column is the document's `_id`.

use serde_json::{json, Map, Value as Json};
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::seam::TableSpec;

/// The MongoDB filter of SQL predicate `sql` over `table`.
///
/// # Errors
/// A message naming the construct outside the subset.
pub fn sql_to_filter(sql: &str, table: &TableSpec) -> Result<Json, String> {
    let expr = Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| format!("predicate {sql:?}: {e}"))?;
    translate(&expr, table).map_err(|m| format!("predicate {sql:?}: {m}"))
}

fn field(e: &Expr, table: &TableSpec) -> Option<String> {
    let name = match e {
        Expr::Identifier(id) => id.value.to_ascii_lowercase(),
        Expr::CompoundIdentifier(parts) => parts.last()?.value.to_ascii_lowercase(),
        Expr::Nested(inner) => return field(inner, table),
        _ => return None,
    };
    if !table.columns.contains(&name.as_str()) {
        return None;
    }
    Some(if name == table.pk() { "_id".to_string() } else { name })
}

fn integer(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => integer(expr)?.checked_neg(),
        Expr::UnaryOp { op: UnaryOperator::Plus, expr } => integer(expr),
        Expr::Nested(inner) => integer(inner),
        _ => None,
    }
}

fn one(field: String, cond: Json) -> Json {
    let mut m = Map::new();
    m.insert(field, cond);
    Json::Object(m)
}

/// `$and`/`$or` of the parts, flattening nested ones of the same kind.
fn combine(op: &str, parts: Vec<Json>) -> Json {
    let mut flat = Vec::with_capacity(parts.len());
    for p in parts {
        match p.get(op).and_then(Json::as_array) {
            Some(inner) if p.as_object().is_some_and(|o| o.len() == 1) => flat.extend(inner.iter().cloned()),
            _ => flat.push(p),
        }
    }
    json!({ op: flat })
}

fn translate(e: &Expr, table: &TableSpec) -> Result<Json, String> {
    match e {
        Expr::Nested(inner) => translate(inner, table),
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            Ok(combine("$and", vec![translate(left, table)?, translate(right, table)?]))
        }
        Expr::BinaryOp { left, op: BinaryOperator::Or, right } => {
            Ok(combine("$or", vec![translate(left, table)?, translate(right, table)?]))
        }
        Expr::UnaryOp { op: UnaryOperator::Not, expr } => Ok(json!({ "$nor": [translate(expr, table)?] })),
        Expr::BinaryOp { left, op, right } => {
            let (f, n, flipped) =
                match (field(left, table), integer(right), field(right, table), integer(left)) {
                    (Some(f), Some(n), _, _) => (f, n, false),
                    (_, _, Some(f), Some(n)) => (f, n, true),
                    _ => return Err(format!("{e} is not a column compared with an integer")),
                };
            let name = match (op, flipped) {
                (BinaryOperator::Eq, _) => "$eq",
                (BinaryOperator::NotEq, _) => "$ne",
                (BinaryOperator::Lt, false) | (BinaryOperator::Gt, true) => "$lt",
                (BinaryOperator::LtEq, false) | (BinaryOperator::GtEq, true) => "$lte",
                (BinaryOperator::Gt, false) | (BinaryOperator::Lt, true) => "$gt",
                (BinaryOperator::GtEq, false) | (BinaryOperator::LtEq, true) => "$gte",
                _ => return Err(format!("operator {op}")),
            };
            Ok(one(f, json!({ name: n })))
        }
        Expr::Between { expr, negated, low, high } => {
            let f = field(expr, table).ok_or_else(|| format!("{expr} is not a column"))?;
            let (lo, hi) = match (integer(low), integer(high)) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => return Err(format!("BETWEEN {low} AND {high} needs integer bounds")),
            };
            Ok(if *negated {
                json!({ "$or": [one(f.clone(), json!({ "$lt": lo })), one(f, json!({ "$gt": hi }))] })
            } else {
                one(f, json!({ "$gte": lo, "$lte": hi }))
            })
        }
        Expr::InList { expr, list, negated } => {
            let f = field(expr, table).ok_or_else(|| format!("{expr} is not a column"))?;
            let values: Vec<i64> =
                list.iter().map(integer).collect::<Option<_>>().ok_or("IN needs a list of integers")?;
            Ok(one(f, json!({ if *negated { "$nin" } else { "$in" }: values })))
        }
        other => Err(format!("{other} is outside the workload's predicate subset")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEMS: TableSpec = TableSpec::integers("items", &["id", "c1", "c2", "v"]);

    #[test]
    fn the_workload_predicates_translate_exactly() {
        let cases = [
            ("c1 BETWEEN 2 AND 4", r#"{"c1":{"$gte":2,"$lte":4}}"#),
            ("c2 = 3", r#"{"c2":{"$eq":3}}"#),
            ("c1 >= 1 AND c2 < 5", r#"{"$and":[{"c1":{"$gte":1}},{"c2":{"$lt":5}}]}"#),
            ("c2 IN (1, 4)", r#"{"c2":{"$in":[1,4]}}"#),
            ("id BETWEEN 3 AND 6", r#"{"_id":{"$gte":3,"$lte":6}}"#),
            ("c1 = 1 OR c2 = 2 OR v > -3", r#"{"$or":[{"c1":{"$eq":1}},{"c2":{"$eq":2}},{"v":{"$gt":-3}}]}"#),
            ("5 > c1", r#"{"c1":{"$lt":5}}"#),
            ("NOT (c1 <> 2)", r#"{"$nor":[{"c1":{"$ne":2}}]}"#),
            ("c1 NOT BETWEEN 1 AND 2", r#"{"$or":[{"c1":{"$lt":1}},{"c1":{"$gt":2}}]}"#),
            ("c2 NOT IN (7)", r#"{"c2":{"$nin":[7]}}"#),
        ];
        for (sql, want) in cases {
            assert_eq!(sql_to_filter(sql, &ITEMS).unwrap().to_string(), want, "{sql}");
        }
    }

    #[test]
    fn constructs_outside_the_subset_are_named() {
        for (sql, named) in
            [("c1 LIKE 'a%'", "LIKE"), ("c1 + 1 > 2", "integer"), ("nope = 1", "column"), ("c1 =", "")]
        {
            let e = sql_to_filter(sql, &ITEMS).unwrap_err();
            assert!(e.contains(named), "{sql}: {e}");
        }
    }
}
