//! The workload's table in Dgraph: a table `T` with columns `id, c1, v` is a set of nodes,
//! one per row, each with the int predicates `isocert.T.id` (`@index(int) @upsert`: the key,
//! looked up like an `xid`, with conflict detection on its index), `isocert.T.c1` and
//! `isocert.T.v` (`@index(int)`). Only those predicates are created, and only they are
//! dropped. The queries and mutations of the session, and the nodes of their answers.

use std::fmt::Write as _;

use serde_json::{json, Map, Value as Json};

use super::filter::Filter;
use crate::seam::TableSpec;

/// The Dgraph predicate holding `column` of `table`.
pub(crate) fn predicate_name(table: &TableSpec, column: &str) -> String {
    format!("isocert.{}.{column}", table.name)
}

/// Every predicate of `table`, key first.
pub(crate) fn predicates(table: &TableSpec) -> Vec<String> {
    table.columns.iter().map(|c| predicate_name(table, c)).collect()
}

/// The schema `/alter` sets for `table`: the key indexed with `@upsert` (Dgraph then detects
/// conflicts on its index, so two transactions creating the same key conflict), the other
/// columns indexed for filters.
pub(crate) fn schema(table: &TableSpec) -> String {
    let mut out = String::new();
    for (i, p) in predicates(table).iter().enumerate() {
        let upsert = if i == 0 { " @upsert" } else { "" };
        let _ = writeln!(out, "{p}: int @index(int){upsert} .");
    }
    out
}

/// The query block's selection: `uid` and each column aliased `c0, c1, ...`.
fn selection(table: &TableSpec) -> String {
    let mut out = String::from("uid");
    for (i, p) in predicates(table).iter().enumerate() {
        let _ = write!(out, " c{i} : {p}");
    }
    out
}

/// The query for the node of `key`.
pub(crate) fn key_query(table: &TableSpec, key: i64) -> String {
    format!("{{ q(func: eq({}, {key})) {{ {} }} }}", predicate_name(table, table.pk()), selection(table))
}

/// The query for the nodes of `table` matching `filter` (every node with `None`).
pub(crate) fn filter_query(table: &TableSpec, filter: Option<&Filter>) -> String {
    let filter =
        filter.map(|f| format!(" @filter({})", f.render(&|c| predicate_name(table, c)))).unwrap_or_default();
    format!("{{ q(func: has({})){filter} {{ {} }} }}", predicate_name(table, table.pk()), selection(table))
}

/// The query asking whether any predicate of `table` exists in the schema.
pub(crate) fn schema_query(table: &TableSpec) -> String {
    format!("schema(pred: [{}]) {{ type }}", predicates(table).join(", "))
}

/// One node of the table: its uid and its row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// Dgraph's uid (`0x2a`).
    pub(crate) uid: String,
    /// The row, key first.
    pub(crate) row: Vec<i64>,
}

/// The nodes of a [`key_query`] or [`filter_query`] answer's `data`, ordered by key.
///
/// # Errors
/// A node without a uid, without one of the table's predicates, or with a non-integer value.
pub(crate) fn parse_nodes(table: &TableSpec, data: &Json) -> Result<Vec<Node>, String> {
    let list = match data.get("q") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(list)) => list,
        Some(other) => return Err(format!("data.q is not a list: {other}")),
    };
    let mut nodes = Vec::with_capacity(list.len());
    for (n, item) in list.iter().enumerate() {
        let uid = item
            .get("uid")
            .and_then(Json::as_str)
            .ok_or_else(|| format!("data.q[{n}] has no uid"))?
            .to_string();
        let mut row = Vec::with_capacity(table.columns.len());
        for (i, column) in table.columns.iter().enumerate() {
            let v = item.get(format!("c{i}")).ok_or_else(|| {
                format!("data.q[{n}] (node {uid}) has no {} (column {column})", predicate_name(table, column))
            })?;
            row.push(
                v.as_i64().ok_or_else(|| format!("data.q[{n}].c{i} (node {uid}) is not an integer: {v}"))?,
            );
        }
        nodes.push(Node { uid, row });
    }
    nodes.sort_by_key(|n| n.row[0]);
    Ok(nodes)
}

/// A `set` mutation writing `row` to node `uid` (a new node `_:row` when `None`).
pub(crate) fn set_row(table: &TableSpec, uid: Option<&str>, row: &[i64]) -> Json {
    let mut node = Map::new();
    node.insert("uid".into(), uid.unwrap_or("_:row").into());
    for (p, v) in predicates(table).into_iter().zip(row) {
        node.insert(p, (*v).into());
    }
    Json::Object(node)
}

/// A `delete` mutation removing every predicate of `table` from node `uid` (JSON `null`:
/// every value of the predicate).
pub(crate) fn delete_node(table: &TableSpec, uid: &str) -> Json {
    let mut node = Map::new();
    node.insert("uid".into(), uid.into());
    for p in predicates(table) {
        node.insert(p, Json::Null);
    }
    Json::Object(node)
}

/// `{"set": [...]}`.
pub(crate) fn set_mutation(nodes: Vec<Json>) -> Json {
    json!({ "set": nodes })
}

/// `{"delete": [...]}`.
pub(crate) fn delete_mutation(nodes: Vec<Json>) -> Json {
    json!({ "delete": nodes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_queries_mutations_and_answers_use_the_tables_predicates_only() {
        let kv = TableSpec::integers("kv", &["key", "value"]);
        assert_eq!(
            schema(&kv),
            "isocert.kv.key: int @index(int) @upsert .\nisocert.kv.value: int @index(int) .\n"
        );
        assert_eq!(
            key_query(&kv, 7),
            "{ q(func: eq(isocert.kv.key, 7)) { uid c0 : isocert.kv.key c1 : isocert.kv.value } }"
        );
        assert_eq!(schema_query(&kv), "schema(pred: [isocert.kv.key, isocert.kv.value]) { type }");
        assert_eq!(
            set_mutation(vec![set_row(&kv, None, &[7, 70]), set_row(&kv, Some("0x2"), &[8, 80])]).to_string(),
            r#"{"set":[{"uid":"_:row","isocert.kv.key":7,"isocert.kv.value":70},{"uid":"0x2","isocert.kv.key":8,"isocert.kv.value":80}]}"#
        );
        assert_eq!(
            delete_mutation(vec![delete_node(&kv, "0x2")]).to_string(),
            r#"{"delete":[{"uid":"0x2","isocert.kv.key":null,"isocert.kv.value":null}]}"#
        );
        // The `data` of a /query answer (dgraph/cmd/alpha/http.go queryHandler), aliases as asked.
        let data: Json =
            serde_json::from_str(r#"{"q":[{"uid":"0x5","c0":9,"c1":90},{"uid":"0x3","c0":2,"c1":20}]}"#)
                .unwrap();
        let nodes = parse_nodes(&kv, &data).unwrap();
        assert_eq!(nodes.iter().map(|n| n.row[0]).collect::<Vec<_>>(), [2, 9]);
        assert_eq!(nodes[1].uid, "0x5");
        assert!(parse_nodes(&kv, &serde_json::json!({"q": []})).unwrap().is_empty());
        let e = parse_nodes(&kv, &serde_json::json!({"q": [{"uid": "0x5", "c0": 9}]})).unwrap_err();
        assert!(e.contains("0x5") && e.contains("isocert.kv.value"), "{e}");
        let e =
            parse_nodes(&kv, &serde_json::json!({"q": [{"uid": "0x5", "c0": 9, "c1": "x"}]})).unwrap_err();
        assert!(e.contains("not an integer"), "{e}");
    }
}
