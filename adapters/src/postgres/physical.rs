//! PostgreSQL's rendering of a workload table's physical design ([`PhysicalDesign`]):
//! partitioned tables (hash, list, range on the primary key), secondary indexes (B-tree,
//! hash, BRIN), the per-session planner settings that force an access path, and the
//! maintenance statements a session of its own runs beside the workload.

use crate::seam::{AccessPath, PhysicalDesign, SecondaryIndex, TableLayout, TableSpec};

/// Partitions of a partitioned layout (list and range add a default partition).
const PARTITIONS: i64 = 4;

/// The statements that create `table` with `design` (after any `DROP`), given the keys its
/// initial rows have: the table, its partitions (a plain table gets `REPLICA IDENTITY
/// FULL`, as before designs existed), the secondary index.
///
/// # Errors
/// A note when the layout is not supported: an inheritance parent's rows are published by
/// logical decoding under the child tables' names, which the change capture does not map
/// back yet.
pub fn design_statements(
    table: &TableSpec,
    design: &PhysicalDesign,
    keys: &[i64],
) -> Result<Vec<String>, String> {
    let t = table.name;
    let definition = super::adapter::definition(table);
    let pk = table.pk();
    let mut sql = Vec::new();
    let partitions: Vec<(String, String)> = match design.layout {
        TableLayout::Plain => {
            sql.push(format!("CREATE TABLE {t} ({definition})"));
            sql.push(format!("ALTER TABLE {t} REPLICA IDENTITY FULL"));
            Vec::new()
        }
        TableLayout::Inheritance => {
            return Err(format!(
                "the inheritance layout is not supported on PostgreSQL yet: logical decoding publishes the \
                 rows of {t}'s children under the children's names; {t} is created plain"
            ))
        }
        TableLayout::Hash => (0..PARTITIONS)
            .map(|i| (format!("{t}_p{i}"), format!("FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {i})")))
            .collect(),
        TableLayout::List => {
            let mut parts: Vec<(String, String)> = (0..PARTITIONS)
                .filter_map(|i| {
                    let values: Vec<String> =
                        keys.iter().filter(|k| k.rem_euclid(PARTITIONS) == i).map(i64::to_string).collect();
                    (!values.is_empty())
                        .then(|| (format!("{t}_p{i}"), format!("FOR VALUES IN ({})", values.join(", "))))
                })
                .collect();
            parts.push((format!("{t}_default"), "DEFAULT".to_string()));
            parts
        }
        TableLayout::Range => {
            let max = keys.iter().copied().max().unwrap_or(15).max(PARTITIONS - 1) + 1;
            let bounds: Vec<String> = (1..PARTITIONS).map(|i| (max * i / PARTITIONS).to_string()).collect();
            let mut parts = Vec::new();
            let mut from = "MINVALUE".to_string();
            for (i, to) in bounds.iter().chain(std::iter::once(&"MAXVALUE".to_string())).enumerate() {
                parts.push((format!("{t}_p{i}"), format!("FOR VALUES FROM ({from}) TO ({to})")));
                from.clone_from(to);
            }
            parts
        }
    };
    if design.layout.is_partitioned() {
        let by = match design.layout {
            TableLayout::Hash => "HASH",
            TableLayout::List => "LIST",
            _ => "RANGE",
        };
        sql.push(format!("CREATE TABLE {t} ({definition}) PARTITION BY {by} ({pk})"));
        // No REPLICA IDENTITY FULL here: with it, pgoutput names the partitions instead
        // of the root (publish_via_partition_root); the key identifies a row.
        for (name, bound) in &partitions {
            sql.push(format!("CREATE TABLE {name} PARTITION OF {t} {bound}"));
        }
    }
    if let Some(index) = index_statement(table, t, design.index, &format!("{t}_secondary"), false) {
        sql.push(index);
    }
    Ok(sql)
}

/// The indexed columns: the first two non-key columns of a table that has them besides its
/// value column (`c1, c2`), else the value column; a hash index takes the first only.
fn indexed_columns(table: &TableSpec, kind: SecondaryIndex) -> String {
    let middle = &table.columns[1..table.columns.len() - 1];
    let columns: Vec<&str> =
        if middle.is_empty() { vec![table.value_column()] } else { middle.iter().take(2).copied().collect() };
    match kind {
        SecondaryIndex::Hash => columns[0].to_string(),
        _ => columns.join(", "),
    }
}

/// `CREATE INDEX [CONCURRENTLY] name ON t ...` for `kind` on `table`'s columns (`t`: the
/// table itself or one of its partitions); `None` for no index.
fn index_statement(
    table: &TableSpec,
    t: &str,
    kind: SecondaryIndex,
    name: &str,
    concurrently: bool,
) -> Option<String> {
    let on = if concurrently { format!("CONCURRENTLY {name}") } else { name.to_string() };
    let columns = indexed_columns(table, kind);
    match kind {
        SecondaryIndex::None => None,
        SecondaryIndex::Btree => Some(format!("CREATE INDEX {on} ON {t} ({columns})")),
        SecondaryIndex::Hash => Some(format!("CREATE INDEX {on} ON {t} USING hash ({columns})")),
        SecondaryIndex::Brin => {
            Some(format!("CREATE INDEX {on} ON {t} USING brin ({columns}) WITH (pages_per_range = 1)"))
        }
    }
}

/// The `SET` statements that push a session's planner to `path`.
pub fn access_path_settings(path: AccessPath) -> Vec<String> {
    let off = |names: &[&str]| names.iter().map(|n| format!("SET enable_{n} = off")).collect::<Vec<_>>();
    match path {
        AccessPath::Any => Vec::new(),
        AccessPath::Seq => off(&["indexscan", "indexonlyscan", "bitmapscan", "tidscan"]),
        AccessPath::Index => off(&["seqscan", "indexonlyscan", "bitmapscan"]),
        AccessPath::IndexOnly => off(&["seqscan", "indexscan", "bitmapscan"]),
        AccessPath::Bitmap => off(&["seqscan", "indexscan", "indexonlyscan"]),
        AccessPath::Parallel => [
            "SET parallel_setup_cost = 0",
            "SET parallel_tuple_cost = 0",
            "SET min_parallel_table_scan_size = 0",
            "SET min_parallel_index_scan_size = 0",
            "SET max_parallel_workers_per_gather = 2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    }
}

/// One round of maintenance on `table` and the indexes isocert made on it: `VACUUM`,
/// `ANALYZE`, `CHECKPOINT`, `REINDEX TABLE CONCURRENTLY`, and a B-tree built with `CREATE
/// INDEX CONCURRENTLY` (on the first partition of a partitioned table, where PostgreSQL
/// allows it) and dropped again.
pub fn maintenance_statements(table: &TableSpec, design: &PhysicalDesign) -> Vec<String> {
    let t = table.name;
    let built = format!("{t}_maintenance");
    let target = if design.layout.is_partitioned() && design.layout != TableLayout::List {
        format!("{t}_p0")
    } else if design.layout == TableLayout::List {
        format!("{t}_default")
    } else {
        t.to_string()
    };
    // VACUUM most often: the concurrent index builds wait for every transaction in flight
    // at each of their phases, so they are slow under load.
    let vacuum = format!("VACUUM {t}");
    let mut sql = vec![vacuum.clone(), format!("ANALYZE {t}"), vacuum.clone(), "CHECKPOINT".to_string()];
    sql.push(vacuum.clone());
    if !design.layout.is_partitioned() {
        // Not on a partitioned table: PostgreSQL 15.18 fails concurrent `INSERT ... ON
        // CONFLICT` statements with "invalid arbiter index list" while a partition's index
        // is rebuilt (docs/FINDINGS.md), which would end the run instead of testing it.
        sql.push(format!("REINDEX TABLE CONCURRENTLY {t}"));
    }
    sql.push(vacuum);
    if let Some(create) = index_statement(table, &target, SecondaryIndex::Btree, &built, true) {
        sql.push(format!("DROP INDEX CONCURRENTLY IF EXISTS {built}"));
        sql.push(create);
        sql.push(format!("DROP INDEX CONCURRENTLY IF EXISTS {built}"));
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEMS: TableSpec = TableSpec::integers("items", &["id", "c1", "c2", "v"]);
    const KV: TableSpec = TableSpec::integers("kv", &["key", "value"]);

    fn design(layout: TableLayout, index: SecondaryIndex) -> PhysicalDesign {
        PhysicalDesign { layout, index, filler_rows: 0 }
    }

    #[test]
    fn layouts_render_partitions_identity_and_indexes() {
        let keys: Vec<i64> = (0..8).collect();
        let plain = design_statements(&KV, &PhysicalDesign::default(), &keys).unwrap();
        assert_eq!(
            plain,
            vec![
                "CREATE TABLE kv (key integer PRIMARY KEY, value bigint NOT NULL)".to_string(),
                "ALTER TABLE kv REPLICA IDENTITY FULL".to_string()
            ]
        );
        let hash =
            design_statements(&ITEMS, &design(TableLayout::Hash, SecondaryIndex::Btree), &keys).unwrap();
        assert!(hash[0].ends_with("PARTITION BY HASH (id)"), "{hash:?}");
        assert!(hash.contains(
            &"CREATE TABLE items_p3 PARTITION OF items FOR VALUES WITH (MODULUS 4, REMAINDER 3)".into()
        ));
        assert!(!hash.iter().any(|s| s.contains("REPLICA IDENTITY")), "{hash:?}");
        assert_eq!(hash.last().unwrap(), "CREATE INDEX items_secondary ON items (c1, c2)");
        let list =
            design_statements(&ITEMS, &design(TableLayout::List, SecondaryIndex::Hash), &keys).unwrap();
        assert!(
            list.contains(&"CREATE TABLE items_p1 PARTITION OF items FOR VALUES IN (1, 5)".into()),
            "{list:?}"
        );
        assert!(list.contains(&"CREATE TABLE items_default PARTITION OF items DEFAULT".into()));
        assert_eq!(list.last().unwrap(), "CREATE INDEX items_secondary ON items USING hash (c1)");
        let range = design_statements(&KV, &design(TableLayout::Range, SecondaryIndex::Brin), &keys).unwrap();
        assert!(
            range.contains(&"CREATE TABLE kv_p0 PARTITION OF kv FOR VALUES FROM (MINVALUE) TO (2)".into()),
            "{range:?}"
        );
        assert!(
            range.contains(&"CREATE TABLE kv_p3 PARTITION OF kv FOR VALUES FROM (6) TO (MAXVALUE)".into())
        );
        assert!(range.last().unwrap().contains("USING brin (value) WITH (pages_per_range = 1)"));
        let err = design_statements(&KV, &design(TableLayout::Inheritance, SecondaryIndex::None), &keys)
            .unwrap_err();
        assert!(err.contains("inheritance") && err.contains("children"), "{err}");
    }

    #[test]
    fn access_paths_and_maintenance_name_only_isocerts_objects() {
        assert!(access_path_settings(AccessPath::Any).is_empty());
        let bitmap = access_path_settings(AccessPath::Bitmap);
        assert!(
            bitmap.contains(&"SET enable_seqscan = off".into())
                && !bitmap.iter().any(|s| s.contains("bitmapscan"))
        );
        assert!(access_path_settings(AccessPath::Parallel).contains(&"SET parallel_setup_cost = 0".into()));
        let m = maintenance_statements(&ITEMS, &design(TableLayout::Hash, SecondaryIndex::None));
        assert!(m.contains(&"VACUUM items".into()) && !m.iter().any(|s| s.starts_with("REINDEX")), "{m:?}");
        let plain = maintenance_statements(&ITEMS, &PhysicalDesign::default());
        assert!(plain.contains(&"REINDEX TABLE CONCURRENTLY items".into()), "{plain:?}");
        assert!(
            m.contains(&"CREATE INDEX CONCURRENTLY items_maintenance ON items_p0 (c1, c2)".into()),
            "{m:?}"
        );
        for s in &m {
            assert!(s == "CHECKPOINT" || s.contains("items"), "{s}");
        }
    }
}
