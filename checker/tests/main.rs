//! Checker behaviour beyond the anomaly corpus (tests/corpus): cycle choice, predicate
//! updates and own writes, aggregates, list appends, Enne's divergence reporting.

use isocert_checker::{
    check, render_dot, render_html, render_json, render_text, render_text_verbose, AnomalyKind, CheckerKind,
    EdgeKind, GraphLayout, HtmlOptions, IsolationLevel, Report,
};
use isocert_history::{v1, History};
use isocert_oracle::Interpreter;

fn load(history: &str, cert: &str) -> (History, isocert_history::Certificate) {
    let mut h = v1::read_history(history.as_bytes()).expect("history");
    let c = v1::read_certificate(cert.as_bytes(), &mut h).expect("certificate");
    (h, c)
}

fn run(history: &str, cert: &str, level: IsolationLevel, checker: CheckerKind) -> Report {
    let (h, c) = load(history, cert);
    let oracle = Interpreter::new(&h).expect("predicates");
    check(&h, &c, level, checker, &oracle).expect("check")
}

fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn the_shortest_cycle_through_an_anti_dependency_is_reported() {
    // T1 -> T2 -> T3 -> T4 -> T1 via wr edges on a..d, and a direct rw T4 -> T1 on z,
    // plus T1 -rw-> T4 on w: the short cycle is T1 <-> T4.
    let h = r#"{"format":"isocert-history","version":1,"initial":[{"key":"z","value":0},{"key":"w","value":0}]}
{"id":1,"session":1,"ops":[{"f":"w","key":"a","value":1},{"f":"r","key":"d","value":4},{"f":"r","key":"w","value":0},{"f":"w","key":"z","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"a","value":1},{"f":"w","key":"b","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"b","value":2},{"f":"w","key":"c","value":3}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"c","value":3},{"f":"w","key":"d","value":4},{"f":"r","key":"z","value":0},{"f":"w","key":"w","value":1}]}"#;
    let c = r#"{"version_order":[{"key":"a","writers":[1]},{"key":"b","writers":[2]},{"key":"c","writers":[3]},{"key":"d","writers":[4]},{"key":"z","writers":[1]},{"key":"w","writers":[4]}]}"#;
    let r = run(h, c, IsolationLevel::Serializable, CheckerKind::Emme);
    let g1c = r.anomalies.iter().find(|a| a.kind == AnomalyKind::G1c).expect("the wr cycle is G1c");
    assert_eq!(g1c.cycle.len(), 4);
    let g2 = r.anomalies.iter().find(|a| a.kind == AnomalyKind::G2Item).expect("an rw cycle");
    assert_eq!(g2.cycle.len(), 2, "{:?}", g2.cycle);
    let rw = g2.cycle.iter().find(|e| e.kind == EdgeKind::Rw).expect("the cycle goes through an rw edge");
    assert!(rw.explanation.contains("= 1, the next version, which"), "{}", rw.explanation);
    assert!(render_dot(&r, &load(h, c).0).contains("style=dashed"));
}

const TABLE: &str = r#"{"format":"isocert-history","version":1,"initial":[{"table":"t","key":1,"value":{"id":1,"c0":1,"c1":0}},{"table":"t","key":2,"value":{"id":2,"c0":7,"c1":0}}]}
{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"update","table":"t","where":"c0 < 5","set":{"c1":9},"rows":[{"key":1,"value":{"id":1,"c0":1,"c1":9}}]},{"f":"select","table":"t","where":"c1 = 9","rows":[{"key":1,"value":{"id":1,"c0":1,"c1":9}}]},{"f":"aggregate","table":"t","where":"c0 > 0","function":"count","result":2}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":4,"ops":[{"f":"select","table":"t","where":"c1 = 9","rows":[{"key":1,"value":{"id":1,"c0":1,"c1":9}}]},{"f":"aggregate","table":"t","where":"c0 > 0","function":"sum","column":"c0","result":8}]}"#;

fn table_cert(t1_select_own: bool) -> String {
    let own = if t1_select_own { "1" } else { "null" };
    format!(
        r#"{{"version_order":[{{"table":"t","key":1,"writers":[1]}}],
  "version_sets":[
   {{"txn":1,"op":0,"versions":[{{"table":"t","key":1,"writer":null}},{{"table":"t","key":2,"writer":null}}]}},
   {{"txn":1,"op":1,"versions":[{{"table":"t","key":1,"writer":{own}}},{{"table":"t","key":2,"writer":null}}]}},
   {{"txn":1,"op":2,"versions":[{{"table":"t","key":1,"writer":1}},{{"table":"t","key":2,"writer":null}}]}},
   {{"txn":2,"op":0,"versions":[{{"table":"t","key":1,"writer":1}},{{"table":"t","key":2,"writer":null}}]}},
   {{"txn":2,"op":1,"versions":[{{"table":"t","key":1,"writer":1}},{{"table":"t","key":2,"writer":null}}]}}],
  "serialization_order":[1,2]}}"#
    )
}

#[test]
fn predicate_updates_own_writes_and_aggregates_are_checked_against_version_sets() {
    for level in IsolationLevel::CERTIFIED {
        let r = run(TABLE, &table_cert(true), level, CheckerKind::Emme);
        assert!(r.is_valid(), "{level}: {:?}", r.anomalies);
    }
    // Read atomic, causal and strict serializability are black-box levels: Emme and Enne
    // refuse them, naming the level and the checker to use.
    let (h, c) = load(TABLE, &table_cert(true));
    let oracle = Interpreter::new(&h).expect("predicates");
    for level in IsolationLevel::ALL.into_iter().filter(|l| l.black_box_only()) {
        for checker in [CheckerKind::Emme, CheckerKind::Enne] {
            let err = check(&h, &c, level, checker, &oracle).expect_err("refused").to_string();
            let to_use =
                if level == IsolationLevel::StrictSerializable { "--checker mtc" } else { "--checker weak" };
            assert!(err.contains(level.as_str()) && err.contains(to_use), "{err}");
        }
    }
    let r = run(TABLE, &table_cert(true), IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(
        r.notes.iter().any(|n| n.contains("serial order of the item dependencies")),
        "the witness certifies it: {:?}",
        r.notes
    );
    let r = run(TABLE, &table_cert(true), IsolationLevel::Serializable, CheckerKind::Enne);
    assert!(r.is_valid(), "{:?}", r.anomalies);
    // The version set says T1's select saw the initial row although T1 had updated it.
    let r = run(TABLE, &table_cert(false), IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(kinds(&r).contains(&AnomalyKind::InternalInconsistency), "{:?}", r.anomalies);
    // A wrong aggregate.
    let wrong = TABLE.replace(
        r#""function":"sum","column":"c0","result":8"#,
        r#""function":"sum","column":"c0","result":7"#,
    );
    let r = run(&wrong, &table_cert(true), IsolationLevel::ReadCommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::ResultSetMismatch]);
    assert!(r.anomalies[0].explanation.contains("sum(c0) = 7") && r.anomalies[0].explanation.contains('8'));
    let r = run(&wrong, &table_cert(true), IsolationLevel::Serializable, CheckerKind::Enne);
    assert_eq!(kinds(&r), vec![AnomalyKind::ReplayDivergence]);
}

#[test]
fn list_appends_build_versions_and_reads_must_be_prefixes() {
    let h = r#"{"id":1,"session":1,"ops":[{"f":"append","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"append","key":"x","value":2},{"f":"r","key":"x","value":[1,2]}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":[1,2]}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"x","value":[]}]}"#;
    let c = r#"{"version_order":[{"key":"x","writers":[1,2]}],"serialization_order":[4,1,2,3]}"#;
    for level in IsolationLevel::CERTIFIED.into_iter().filter(|l| *l != IsolationLevel::SnapshotIsolation) {
        let r = run(h, c, level, CheckerKind::Emme);
        assert!(r.is_valid(), "{level}: {:?}", r.anomalies);
    }
    assert!(run(h, c, IsolationLevel::Serializable, CheckerKind::Enne).is_valid());
    let bad = h.replace(
        r#""value":[1,2]}]}
{"id":4"#,
        r#""value":[2,1]}]}
{"id":4"#,
    );
    let r = run(&bad, c, IsolationLevel::ReadCommitted, CheckerKind::Emme);
    // The misordered read is reported once, as incompatible-order, not again as a garbage read.
    assert_eq!(kinds(&r), vec![AnomalyKind::IncompatibleOrder]);
    let own = h.replace(
        r#"{"f":"r","key":"x","value":[1,2]}]}
{"id":3"#,
        r#"{"f":"r","key":"x","value":[1]}]}
{"id":3"#,
    );
    let r = run(&own, c, IsolationLevel::ReadCommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::InternalInconsistency], "a read that lacks the txn's own append");
}

#[test]
fn list_reads_name_aborted_appenders_and_disagreeing_reads() {
    let h = r#"{"id":1,"session":1,"status":"aborted","ops":[{"f":"append","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"append","key":"x","value":2}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":[2,1]}]}
{"id":4,"session":4,"ops":[{"f":"r","key":"x","value":[1,1]}]}"#;
    let c = r#"{"version_order":[{"key":"x","writers":[2]}]}"#;
    let r = run(h, c, IsolationLevel::ReadUncommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::DuplicateElements, AnomalyKind::IncompatibleOrder]);
    assert!(
        r.anomalies[0].explanation.contains("T4 read kv[\"x\"]=[1, 1]"),
        "{}",
        r.anomalies[0].explanation
    );
    let order = &r.anomalies[1].explanation;
    assert!(
        order.contains("T3 read") && order.contains("T4 read") && order.contains("position 0"),
        "{order}"
    );
    let r = run(h, c, IsolationLevel::ReadCommitted, CheckerKind::Emme);
    let g1a: Vec<_> = r.anomalies.iter().filter(|a| a.kind == AnomalyKind::G1a).collect();
    assert_eq!(g1a.len(), 2, "{:?}", r.anomalies);
    assert!(g1a[0].explanation.contains("appended by T1, which aborted"), "{}", g1a[0].explanation);
}

#[test]
fn enne_reports_every_divergence_in_replay_order() {
    let h = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1},{"f":"w","key":"y","value":1}]}
{"id":2,"session":2,"ops":[{"f":"r","key":"x","value":null}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"y","value":null}]}"#;
    let c = r#"{"serialization_order":[1,3,2]}"#;
    let r = run(h, c, IsolationLevel::Serializable, CheckerKind::Enne);
    assert_eq!(kinds(&r), vec![AnomalyKind::ReplayDivergence, AnomalyKind::ReplayDivergence]);
    assert!(
        r.anomalies[0].explanation.starts_with("T3 read kv[\"y\"]=absent"),
        "{}",
        r.anomalies[0].explanation
    );
    assert!(r.anomalies[0].explanation.contains("written by T1"));
    let json = render_json(&r, &load(h, c).0);
    assert_eq!(json["anomalies"][1]["txns"][0], 2);
    assert_eq!(json["checker"], "enne");
}

#[test]
fn absent_reads_with_several_absent_versions_are_noted_not_guessed() {
    let h = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":null}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":null}]}"#;
    let c = r#"{"version_order":[{"key":"x","writers":[1,2]}]}"#;
    let r = run(h, c, IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(r.is_valid());
    assert!(r.notes.iter().any(|n| n.contains("1 item read")), "{:?}", r.notes);
    assert_eq!((r.stats.ambiguous_reads, r.stats.reads_resolved_by_certificate), (1, 0));
    assert_eq!(r.stats.edges, 1, "only T1 -ww-> T2: the ambiguous read adds none");
}

/// The history of `absent_reads_with_several_absent_versions_are_noted_not_guessed`, T3
/// also writing y, which T1 read before it existed (T1 -rw-> T3).
const NAMED: &str = r#"{"id":1,"session":1,"ops":[{"f":"r","key":"y","value":null},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":null}]}
{"id":3,"session":3,"ops":[{"f":"r","key":"x","value":null},{"f":"w","key":"y","value":3}]}"#;

fn named_cert(writer: &str) -> String {
    format!(
        r#"{{"version_order":[{{"key":"x","writers":[1,2]}},{{"key":"y","writers":[3]}}],
        "version_sets":[{{"txn":3,"op":0,"versions":[{{"key":"x","writer":{writer}}}]}}]}}"#
    )
}

#[test]
fn an_item_read_version_named_by_the_certificate_gives_its_edges() {
    // T3 saw the unborn x: T3 -rw-> T1 (next version), and T1 -rw-> T3 on y: G2-item.
    let r = run(NAMED, &named_cert("null"), IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::G2Item]);
    assert_eq!((r.stats.ambiguous_reads, r.stats.reads_resolved_by_certificate), (0, 1));
    let rw = &r.anomalies[0].cycle;
    assert!(rw.iter().any(|e| e.kind == EdgeKind::Rw
        && e.explanation.starts_with("T3 saw no row for kv[\"x\"] (it did not exist yet)")));
    let json = render_json(&r, &load(NAMED, &named_cert("null")).0);
    assert_eq!(json["stats"]["reads_resolved_by_certificate"], 1);
    assert_eq!(json["stats"]["ambiguous_reads"], 0);
    // T3 saw T2's delete: T2 -wr-> T3, T1 -rw-> T3, T1 -ww-> T2: no cycle.
    let r = run(NAMED, &named_cert("2"), IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(r.is_valid(), "{:?}", r.anomalies);
    assert_eq!(r.stats.reads_resolved_by_certificate, 1);
    assert!(r.notes.iter().any(|n| n.contains("the certificate named the version")), "{:?}", r.notes);
}

#[test]
fn a_named_version_the_read_contradicts_is_a_certificate_contradiction_naming_both() {
    let r = run(NAMED, &named_cert("1"), IsolationLevel::ReadUncommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::CertificateContradiction]);
    let a = &r.anomalies[0];
    assert_eq!(
        a.explanation,
        "T3 found no row for kv[\"x\"], but the certificate says it saw T1's version, kv[\"x\"]=1"
    );
    assert_eq!(a.txns.len(), 2);
    // T3 wrote no version of x, so the certificate names a version that does not exist.
    let r = run(NAMED, &named_cert("3"), IsolationLevel::ReadUncommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::CertificateContradiction]);
    assert!(
        r.anomalies[0].explanation.contains("which the version order does not have"),
        "{}",
        r.anomalies[0].explanation
    );
    // A read after the reader's own write sees that write, whatever the certificate says.
    let h = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"w","key":"x","value":2},{"f":"r","key":"x","value":2}]}"#;
    let c = r#"{"version_order":[{"key":"x","writers":[1,2]}],"version_sets":[{"txn":2,"op":1,"versions":[{"key":"x","writer":1}]}]}"#;
    let r = run(h, c, IsolationLevel::ReadUncommitted, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::CertificateContradiction]);
    assert!(r.anomalies[0].explanation.contains("after writing it"), "{}", r.anomalies[0].explanation);
    let own = c.replace(r#""writer":1"#, r#""writer":2"#);
    assert!(run(h, &own, IsolationLevel::Serializable, CheckerKind::Emme).is_valid());
}

#[test]
fn auto_prefers_emme_and_falls_back_to_enne_at_serializable() {
    let h = r#"{"id":1,"session":1,"ops":[{"f":"w","key":"x","value":1}]}"#;
    assert_eq!(
        run(
            h,
            r#"{"version_order":[{"key":"x","writers":[1]}],"serialization_order":[1]}"#,
            IsolationLevel::Serializable,
            CheckerKind::Auto
        )
        .checker,
        CheckerKind::Emme
    );
    assert_eq!(
        run(h, r#"{"serialization_order":[1]}"#, IsolationLevel::Serializable, CheckerKind::Auto).checker,
        CheckerKind::Enne
    );
}

#[test]
fn a_backward_predicate_edge_falls_back_to_materialised_edges_and_an_explained_cycle() {
    // Predicate write skew: each transaction's select misses the row the other inserts.
    let h = r#"{"id":1,"session":1,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[]},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"ops":[{"f":"select","table":"kv","where":"value > 0","rows":[]},{"f":"w","key":"y","value":1}]}"#;
    let c = r#"{"version_order":[{"key":"x","writers":[1]},{"key":"y","writers":[2]}],
  "version_sets":[{"txn":1,"op":0,"versions":[]},{"txn":2,"op":0,"versions":[]}]}"#;
    let r = run(h, c, IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::G2]);
    assert!(r.notes.iter().all(|n| !n.contains("certified")));
    assert!(r.anomalies[0].cycle.iter().all(|e| e.kind == EdgeKind::PredicateRw));
    assert!(
        r.anomalies[0].cycle[0].explanation.contains("changes its matches"),
        "{}",
        r.anomalies[0].cycle[0].explanation
    );
    assert!(run(h, c, IsolationLevel::RepeatableRead, CheckerKind::Emme).is_valid());
}

/// A lost update through a deleted row: T1 writes x, T2 deletes it, T3 found no row (the
/// unborn version the certificate names) and writes x.
const LOST_THROUGH_DELETE: &str = r#"{"format":"isocert-history","version":1}
{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":4,"ops":[{"f":"w","key":"x","value":null}]}
{"id":3,"session":3,"start_ts":0,"commit_ts":5,"ops":[{"f":"r","key":"x","value":null},{"f":"w","key":"x","value":3}]}"#;
const LOST_THROUGH_DELETE_CERT: &str = r#"{"version_order":[{"key":"x","writers":[1,2,3]}],
"version_sets":[{"txn":3,"op":0,"versions":[{"key":"x","writer":null}]}]}"#;

#[test]
fn the_text_report_has_a_class_table_plain_words_and_detail_under_verbose() {
    let (h, c) = load(LOST_THROUGH_DELETE, LOST_THROUGH_DELETE_CERT);
    let r =
        run(LOST_THROUGH_DELETE, LOST_THROUGH_DELETE_CERT, IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::G2Item]);
    let text = render_text(&r, &h);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[2].trim_start().starts_with("class") && lines[3].trim_start().starts_with("g2-item"),
        "{text}"
    );
    assert!(lines[3].contains(" 1  a cycle with an item anti-dependency"), "{text}");
    assert!(
        text.contains(
            "T3 -> T1 (anti-dependency, derived): T3 saw no row for kv[\"x\"] (it did not exist yet); T1 then wrote"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "T2 -> T3 (write-dependency, derived): T2 deleted kv[\"x\"]; T3 then wrote kv[\"x\"] = 3"
        ),
        "{text}"
    );
    assert!(!text.contains("[edge") && !text.contains("(op "), "internal detail only under -v: {text}");
    let verbose = render_text_verbose(&r, &h);
    assert!(verbose.contains("[edge rw, object kv[\"x\"], operation T3#1]"), "{verbose}");
    // The HTML shows the version order behind each edge, the involved entries in bold.
    let html =
        render_html(&r, &h, &c, &HtmlOptions { layout: GraphLayout::Builtin, ..HtmlOptions::default() });
    assert!(
        html.contains("version order of kv[&quot;x&quot;]: <b>initial</b> → <b>T1</b> → T2 → T3</td>"),
        "{html}"
    );
    assert!(
        html.contains("version order of kv[&quot;x&quot;]: initial → T1 → <b>T2</b> → <b>T3</b></td>"),
        "{html}"
    );
    assert!(html.contains(
        "version set of T3 operation 1: it saw the version of kv[&quot;x&quot;] by the initial state"
    ));
}

/// Two concurrent transactions, each reading `aggregate` over `where_{1,2}` (result
/// `result`) and then writing one row; rows 1 and 2 start as `{c1: 0|1, c2: 5}`.
fn aggregate_skew(
    aggregate: &str,
    where_1: &str,
    where_2: &str,
    result: &str,
    write_1: &str,
    write_2: &str,
) -> String {
    format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"t","key":1,"value":{{"id":1,"c1":0,"c2":5}}}},{{"table":"t","key":2,"value":{{"id":2,"c1":1,"c2":5}}}}]}}
{{"id":1,"session":1,"start_ts":1,"commit_ts":3,"ops":[{{"f":"aggregate","table":"t","where":"{where_1}",{aggregate},"result":{result}}},{write_1}]}}
{{"id":2,"session":2,"start_ts":2,"commit_ts":4,"ops":[{{"f":"aggregate","table":"t","where":"{where_2}",{aggregate},"result":{result}}},{write_2}]}}"#
    )
}

/// Each aggregate saw the initial rows 1 and 2; T1 wrote `key_1`, T2 `key_2`.
fn aggregate_skew_cert(key_1: u32, key_2: u32) -> String {
    let set = r#"[{"table":"t","key":1,"writer":null},{"table":"t","key":2,"writer":null}]"#;
    format!(
        r#"{{"version_order":[{{"table":"t","key":{key_1},"writers":[1]}},{{"table":"t","key":{key_2},"writers":[2]}}],
  "version_sets":[{{"txn":1,"op":0,"versions":{set}}},{{"txn":2,"op":0,"versions":{set}}}],
  "serialization_order":[1,2]}}"#
    )
}

#[test]
fn an_aggregate_depends_on_what_decides_its_result_not_on_every_match() {
    let insert = |key: u32, c2: i64| {
        format!(r#"{{"f":"w","table":"t","key":{key},"value":{{"id":{key},"c1":0,"c2":{c2}}}}}"#)
    };
    let min = r#""function":"min","column":"c2""#;
    let verdicts = |h: &str, cert: &str| {
        let emme = run(h, cert, IsolationLevel::Serializable, CheckerKind::Emme);
        let enne = run(h, cert, IsolationLevel::Serializable, CheckerKind::Enne);
        let si = run(h, cert, IsolationLevel::SnapshotIsolation, CheckerKind::Emme);
        assert!(si.is_valid(), "write skew is allowed at SI: {:?}", si.anomalies);
        (kinds(&emme), enne.is_valid())
    };
    // Both insert another row with c2 = 5: min(c2) = 5 in every serial order, as
    // PostgreSQL's SSI (which locks only the index entries min visits) lets it commit.
    let h = aggregate_skew(min, "c2 <= 5", "c2 <= 5", "5", &insert(3, 5), &insert(4, 5));
    assert_eq!(verdicts(&h, &aggregate_skew_cert(3, 4)), (vec![], true));
    // The near twin: each inserts c2 = 4, which the other's min would have returned.
    let h = aggregate_skew(min, "c2 <= 5", "c2 <= 5", "5", &insert(3, 4), &insert(4, 4));
    assert_eq!(verdicts(&h, &aggregate_skew_cert(3, 4)), (vec![AnomalyKind::G2], false));
    // max: a row equal to the maximum is silent, a greater one is not.
    let max = r#""function":"max","column":"c2""#;
    let h = aggregate_skew(max, "c2 >= 5", "c2 >= 5", "5", &insert(3, 5), &insert(4, 5));
    assert_eq!(verdicts(&h, &aggregate_skew_cert(3, 4)), (vec![], true));
    let h = aggregate_skew(max, "c2 >= 5", "c2 >= 5", "5", &insert(3, 6), &insert(4, 6));
    assert_eq!(verdicts(&h, &aggregate_skew_cert(3, 4)), (vec![AnomalyKind::G2], false));
    // count counts every match.
    let count = r#""function":"count""#;
    let h = aggregate_skew(count, "c2 <= 5", "c2 <= 5", "2", &insert(3, 5), &insert(4, 5));
    assert_eq!(verdicts(&h, &aggregate_skew_cert(3, 4)), (vec![AnomalyKind::G2], false));
}

#[test]
fn a_sum_depends_on_matched_values_even_when_the_matches_stay() {
    // T1 sums row 1 (c1 = 0) and raises row 2's c2; T2 sums row 2 (c1 = 1) and raises row
    // 1's: no row enters or leaves either predicate, yet each sum misses the other's write.
    let update = |key: u32, c1: i64, c2: i64| {
        format!(r#"{{"f":"w","table":"t","key":{key},"value":{{"id":{key},"c1":{c1},"c2":{c2}}}}}"#)
    };
    let sum = r#""function":"sum","column":"c2""#;
    let h = aggregate_skew(sum, "c1 = 0", "c1 = 1", "5", &update(2, 1, 6), &update(1, 0, 6));
    let r = run(&h, &aggregate_skew_cert(2, 1), IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::G2], "{:?}", r.anomalies);
    assert!(!run(&h, &aggregate_skew_cert(2, 1), IsolationLevel::Serializable, CheckerKind::Enne).is_valid());
    // The twin changes another column only: nothing either sum depends on changes.
    let touch = |key: u32, c1: i64| {
        format!(r#"{{"f":"w","table":"t","key":{key},"value":{{"id":{key},"c1":{c1},"c2":5,"c3":1}}}}"#)
    };
    let h = aggregate_skew(sum, "c1 = 0", "c1 = 1", "5", &touch(2, 1), &touch(1, 0));
    let r = run(&h, &aggregate_skew_cert(2, 1), IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(r.is_valid(), "{:?}", r.anomalies);
}

#[test]
fn a_select_reads_the_rows_it_returns_so_their_new_values_are_dependencies() {
    // Write skew through selects: each returns one row the other then changes, and no row
    // enters or leaves either predicate. Adya models a query as a predicate read plus item
    // reads of the rows returned: item anti-dependencies both ways, G2-item.
    let select = |c1: i64, key: i64| {
        format!(
            r#"{{"f":"select","table":"t","where":"c1 = {c1}","rows":[{{"key":{key},"value":{{"id":{key},"c1":{c1},"c2":5}}}}]}}"#
        )
    };
    let write = |key: i64, c1: i64| {
        format!(r#"{{"f":"w","table":"t","key":{key},"value":{{"id":{key},"c1":{c1},"c2":6}}}}"#)
    };
    let history = |w1: &str, w2: &str| {
        format!(
            r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"t","key":1,"value":{{"id":1,"c1":0,"c2":5}}}},{{"table":"t","key":2,"value":{{"id":2,"c1":1,"c2":5}}}}]}}
{{"id":1,"session":1,"start_ts":1,"commit_ts":3,"ops":[{},{w1}]}}
{{"id":2,"session":2,"start_ts":2,"commit_ts":4,"ops":[{},{w2}]}}"#,
            select(0, 1),
            select(1, 2)
        )
    };
    let set = r#"[{"table":"t","key":1,"writer":null},{"table":"t","key":2,"writer":null}]"#;
    let cert = |k1: i64, k2: i64| {
        format!(
            r#"{{"version_order":[{{"table":"t","key":{k1},"writers":[1]}},{{"table":"t","key":{k2},"writers":[2]}}],
  "version_sets":[{{"txn":1,"op":0,"versions":{set}}},{{"txn":2,"op":0,"versions":{set}}}]}}"#
        )
    };
    let skew = history(&write(2, 1), &write(1, 0));
    for level in [IsolationLevel::RepeatableRead, IsolationLevel::Serializable] {
        let r = run(&skew, &cert(2, 1), level, CheckerKind::Emme);
        assert_eq!(kinds(&r), vec![AnomalyKind::G2Item], "{level}: {:?}", r.anomalies);
    }
    assert!(run(&skew, &cert(2, 1), IsolationLevel::SnapshotIsolation, CheckerKind::Emme).is_valid());
    // The twin writes rows neither select returned or matches.
    let apart = history(&write(3, 7), &write(4, 7));
    let r = run(&apart, &cert(3, 4), IsolationLevel::Serializable, CheckerKind::Emme);
    assert!(r.is_valid(), "{:?}", r.anomalies);
}

/// A session's transaction without operations (a shrunk finding, a client that began and
/// committed nothing) has no timestamps: it takes no part in session order. It used to be
/// read as starting at 0, so the session edge into it was a G-SIa that was not there (a
/// false positive `isocert hunt` reported on PostgreSQL). Its near twin, a session
/// successor that reads and really started before its predecessor committed, is G-SIa.
#[test]
fn a_transaction_without_operations_takes_no_part_in_session_order() {
    let head = r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0}]}
{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":1}]}
"#;
    let cert = r#"{"version_order":[{"key":"x","writers":[1]}]}"#;
    let empty = format!(r#"{head}{{"id":2,"session":1,"ops":[]}}"#);
    let r = run(&empty, cert, IsolationLevel::SnapshotIsolation, CheckerKind::Emme);
    assert!(r.is_valid(), "{:?}", r.anomalies);
    let early = format!(
        r#"{head}{{"id":2,"session":1,"start_ts":0,"commit_ts":3,"ops":[{{"f":"r","key":"x","value":0}}]}}"#
    );
    let r = run(&early, cert, IsolationLevel::SnapshotIsolation, CheckerKind::Emme);
    assert!(kinds(&r).contains(&AnomalyKind::GSi), "{:?}", r.anomalies);
}

/// A session predecessor that wrote nothing has no observable commit: a recovery's
/// commit_ts for it (PostgreSQL's gives read-only transactions a position) is not a fact,
/// so a successor that started before it is valid, as long as the successor's snapshot
/// is not older than the predecessor's (the near twin, G-SIa).
#[test]
fn a_read_only_session_predecessor_requires_only_a_snapshot_no_older() {
    let head = r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0}]}
{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"w","key":"x","value":1}]}
"#;
    let cert = r#"{"version_order":[{"key":"x","writers":[1,3]}]}"#;
    let history = |start_3: u64| {
        format!(
            r#"{head}{{"id":2,"session":2,"start_ts":3,"commit_ts":5,"ops":[{{"f":"r","key":"x","value":1}}]}}
{{"id":3,"session":2,"start_ts":{start_3},"commit_ts":6,"ops":[{{"f":"r","key":"x","value":1}},{{"f":"w","key":"x","value":2}}]}}"#
        )
    };
    let r = run(&history(4), cert, IsolationLevel::SnapshotIsolation, CheckerKind::Emme);
    assert!(r.is_valid(), "{:?}", r.anomalies);
    let r = run(&history(2), cert, IsolationLevel::SnapshotIsolation, CheckerKind::Emme);
    assert!(kinds(&r).contains(&AnomalyKind::GSi), "{:?}", r.anomalies);
}

/// Issue 32: a read of a value written outside the submitted history, whose writer's value
/// the certificate hides, is a garbage read without the mark and uncertified with it: the
/// verdict never rests on the hidden value.
#[test]
fn a_read_the_certificate_marks_hidden_is_uncertified_not_a_garbage_read() {
    let history = "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"r\",\"key\":5,\"value\":-3}]}\n";
    let plain = r#"{"foreign_writers":[{"id":"~1","writes":[{"key":5}]}],"version_order":[{"key":5,"writers":["~1"]}]}"#;
    let r = run(history, plain, IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::GarbageRead]);
    let marked = r#"{"foreign_writers":[{"id":"~1","writes":[{"key":5}]}],"version_order":[{"key":5,"writers":["~1"]}],"hidden_reads":[{"txn":1,"op":0,"why":"value-written-outside"}]}"#;
    let (h, c) = load(history, marked);
    let oracle = Interpreter::new(&h).expect("predicates");
    let e = check(&h, &c, IsolationLevel::Serializable, CheckerKind::Emme, &oracle).unwrap_err();
    assert!(matches!(e, isocert_checker::CheckError::HiddenValues { .. }), "{e}");
    assert!(e.to_string().contains("op 0: its value was written outside the submitted history"), "{e}");
}

/// Issue 47 item 7: identifiers were embedded raw in the report's
/// `<script type="application/json">`; one holding `<!--<script>` changes how the HTML
/// parser ends that element (the rest of the page becomes script text), one holding
/// `</script>` ends it early. Now `<`, `>`, `&`, U+2028 and U+2029 are `\u` escapes there:
/// the element ends at its own `</script>` and its text parses to the identifiers unchanged.
#[test]
fn issue_47_identifiers_in_the_html_reports_json_are_escaped() {
    let x = "<!--<script>&";
    let y = "</script><b>";
    let xj = serde_json::to_string(x).unwrap();
    let yj = serde_json::to_string(y).unwrap();
    // A write skew of transactions named x and y: a G2-item cycle naming both.
    let h = format!(
        r#"{{"format":"isocert-history","version":1,"initial":[{{"key":"a","value":0}},{{"key":"b","value":0}}]}}
{{"id":{xj},"session":1,"ops":[{{"f":"r","key":"a","value":0}},{{"f":"r","key":"b","value":0}},{{"f":"w","key":"a","value":1}}]}}
{{"id":{yj},"session":2,"ops":[{{"f":"r","key":"a","value":0}},{{"f":"r","key":"b","value":0}},{{"f":"w","key":"b","value":2}}]}}"#
    );
    let c = format!(r#"{{"version_order":[{{"key":"a","writers":[{xj}]}},{{"key":"b","writers":[{yj}]}}]}}"#);
    let r = run(&h, &c, IsolationLevel::Serializable, CheckerKind::Emme);
    assert_eq!(kinds(&r), vec![AnomalyKind::G2Item]);
    let (hist, cert) = load(&h, &c);
    let html = render_html(
        &r,
        &hist,
        &cert,
        &HtmlOptions { layout: GraphLayout::Builtin, ..HtmlOptions::default() },
    );
    let open = html.find("<script type=\"application/json\" id=\"all-data\"").expect("the list's data");
    let start = open + html[open..].find('>').unwrap() + 1;
    let text = &html[start..start + html[start..].find("</script>").expect("the element ends")];
    for raw in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
        assert!(!text.contains(raw), "{raw:?} unescaped in {text}");
    }
    let rows: serde_json::Value = serde_json::from_str(text).expect("the element's text is the whole JSON");
    let (txns, explanation) = (rows[0][1].as_str().unwrap(), rows[0][2].as_str().unwrap());
    assert!(txns.contains(x) && txns.contains(y), "{txns}");
    assert!(explanation.contains(x) && explanation.contains(y), "{explanation}");
    assert_eq!(explanation, r.anomalies[0].explanation);
}

/// Issue 47 item 6: with a certificate recovered for another history, Emme and Enne report
/// contradictions, but Chronos and Aion (and MTC, the weak checker) decided without
/// reading it and said VALID with no note. Now every checker has the certificate checked
/// against the history as Emme checks it: the same contradictions, as anomalies; the
/// history's own certificate adds none.
#[test]
fn issue_47_every_checker_refuses_another_historys_certificate() {
    let h = r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}
{"id":1,"session":1,"start_ts":1,"commit_ts":2,"ops":[{"f":"r","key":"x","value":0},{"f":"w","key":"x","value":1}]}
{"id":2,"session":2,"start_ts":3,"commit_ts":4,"ops":[{"f":"r","key":"x","value":1},{"f":"w","key":"y","value":2}]}"#;
    let own = r#"{"version_order":[{"key":"x","writers":[1]},{"key":"y","writers":[2]}]}"#;
    let foreign = r#"{"version_order":[{"key":"x","writers":[2]},{"key":"y","writers":[1]}]}"#;
    let reference = run(h, foreign, IsolationLevel::Serializable, CheckerKind::Emme);
    let contradictions =
        reference.anomalies.iter().filter(|a| a.kind == AnomalyKind::CertificateContradiction);
    let expected: Vec<String> = contradictions.map(|a| a.explanation.clone()).collect();
    assert!(!expected.is_empty(), "{:?}", reference.anomalies);
    for (checker, level) in [
        (CheckerKind::Chronos, IsolationLevel::SnapshotIsolation),
        (CheckerKind::Chronos, IsolationLevel::Serializable),
        (CheckerKind::Aion, IsolationLevel::SnapshotIsolation),
        (CheckerKind::Weak, IsolationLevel::ReadCommitted),
    ] {
        let r = run(h, own, level, checker);
        assert!(r.is_valid(), "{checker} at {level} with the history's certificate: {:?}", r.anomalies);
        let r = run(h, foreign, level, checker);
        assert!(!r.is_valid(), "{checker} at {level} accepted another history's certificate");
        let found: Vec<String> = r.anomalies.iter().map(|a| a.explanation.clone()).collect();
        assert_eq!(found, expected, "{checker} at {level}");
        assert!(r.anomalies.iter().all(|a| a.kind == AnomalyKind::CertificateContradiction));
        assert!(r.notes.iter().any(|n| n.contains("checked against the history as emme")), "{:?}", r.notes);
    }
    // A serialization order alone is checked as Enne checks it (one listing a
    // transaction twice and leaving a committed one out).
    let enne_foreign = r#"{"serialization_order":[1,1]}"#;
    let reference = run(h, enne_foreign, IsolationLevel::Serializable, CheckerKind::Enne);
    assert_eq!(kinds(&reference), vec![AnomalyKind::CertificateContradiction; 2]);
    let r = run(h, enne_foreign, IsolationLevel::SnapshotIsolation, CheckerKind::Chronos);
    assert_eq!(kinds(&r), vec![AnomalyKind::CertificateContradiction; 2], "{:?}", r.notes);
    assert!(run(
        h,
        r#"{"serialization_order":[1,2]}"#,
        IsolationLevel::SnapshotIsolation,
        CheckerKind::Chronos
    )
    .is_valid());
}
