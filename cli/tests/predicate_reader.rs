//! Issue 16: the general v1 reader, which reads every history with predicate operations,
//! parses each line into a JSON tree borrowed from the line (`history/src/v1/raw.rs`)
//! instead of a `serde_json::Value`. It must give the same `History` on generated predicate
//! histories (every injected anomaly) and the same errors, naming the line, on malformed
//! predicate lines (the messages below are the ones the `serde_json::Value` reader gave).

use std::io::BufReader;

use isocert_checker::{check, render_text, CheckerKind, IsolationLevel};
use isocert_gen::{generate, DataModel, GenConfig, Injection};
use isocert_history::{v1, History, Op, Scalar};
use isocert_oracle::Interpreter;

use super::fast_reader::assert_same;

/// The v1 bytes of `h`.
fn written(h: &History) -> Vec<u8> {
    let mut out = Vec::new();
    v1::write_history(h, &mut out).unwrap();
    out
}

/// Emme's text report on `h` under `cert`.
fn report(h: &History, cert: &isocert_history::Certificate, level: IsolationLevel) -> String {
    let oracle = Interpreter::new(h).unwrap();
    match check(h, cert, level, CheckerKind::Emme, &oracle) {
        Ok(r) => render_text(&r, h),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn generated_predicate_histories_read_back_id_for_id() {
    let mut read_back = 0;
    let kinds = std::iter::once(None).chain(Injection::ALL.into_iter().map(Some));
    for (n, inject) in kinds.enumerate() {
        let cfg = GenConfig {
            txns: 300,
            keys: 20,
            predicate_ratio: 0.5,
            model: DataModel::SqlTable,
            inject,
            seed: 100 + n as u64,
            ..GenConfig::default()
        };
        let Ok(g) = generate(&cfg) else {
            eprintln!("{inject:?}: not generated with predicates over the SQL table");
            continue;
        };
        let bytes = written(&g.history);
        let what = format!("{inject:?} ({} bytes)", bytes.len());
        assert!(
            g.history.txns.iter().flat_map(|t| &t.ops).any(|op| op.predicate().is_some()),
            "{what}: no predicate operation"
        );
        let read = v1::read_history_bytes(&bytes, v1::AdapterFacts::Skip).unwrap();
        // The generator interns in file order: the history read is the one generated.
        assert_same(&read, &g.history, &what);
        // Line by line from a small buffer (online checkers) gives the same.
        let streamed = v1::read_history(BufReader::with_capacity(64, bytes.as_slice())).unwrap();
        assert_same(&streamed, &g.history, &what);
        assert_eq!(written(&read), bytes, "{what}: written back");
        let level = inject
            .and_then(|k| k.rejected_at().first())
            .map_or(IsolationLevel::Serializable, |l| l.parse().unwrap());
        let mut with_cert = read.clone();
        let mut cert_bytes = Vec::new();
        v1::write_certificate(&g.history, &g.certificate, &mut cert_bytes).unwrap();
        let cert = v1::read_certificate(cert_bytes.as_slice(), &mut with_cert).unwrap();
        assert_eq!(report(&with_cert, &cert, level), report(&g.history, &g.certificate, level), "{what}");
        read_back += 1;
    }
    assert!(read_back >= 15, "only {read_back} predicate histories generated");
}

/// Escapes, repeated keys and adapter facts on predicate operations read as the owned
/// `serde_json::Value` reader read them.
#[test]
fn escapes_repeated_keys_and_facts() {
    let text = concat!(
        r#"{"id":1,"session":"s\u0031","ops":[{"f":"sel\u0065ct","table":"t\"x","where":"c0 \u003e 1","#,
        r#""rows":[{"key":1,"value":{"id":1,"c0":2,"c1":"a\nb","c0":3}}],"meta":{"x":[1,{"y":null}]}},"#,
        r#"{"f":"update","table":"t\"x","where":"c0 > 1","set":{"c1":5,"c2":null,"c1":6},"#,
        r#""rows":[{"key":1,"value":{"id":1,"c0":3,"c1":6}}]}]}"#,
        "\n"
    );
    let h = v1::read_history(text.as_bytes()).unwrap();
    let t = &h.txns[0];
    assert_eq!(h.session_name(t.session), &Scalar::Text("s1".into()));
    let Op::Select { predicate, rows } = &t.ops[0] else { panic!("not a select: {:?}", t.ops[0]) };
    assert_eq!(&*h.predicate(*predicate).sql, "c0 > 1");
    assert_eq!(h.table(h.predicate(*predicate).table).name.as_ref(), "t\"x");
    // A repeated column keeps its first place and takes its last value.
    assert_eq!(
        h.table(h.predicate(*predicate).table).columns.iter().map(|c| c.as_ref()).collect::<Vec<_>>(),
        ["id", "c0", "c1", "c2"]
    );
    assert_eq!(h.value_label(rows[0].obj, rows[0].value), r#"{id: 1, c0: 3, c1: "a\nb"}"#);
    assert_eq!(t.op_metas().len(), 1);
    assert_eq!(t.op_metas()[0].1, serde_json::json!({"x":[1,{"y":null}]}));
    let Op::Update { set, .. } = &t.ops[1] else { panic!("not an update: {:?}", t.ops[1]) };
    let constants: Vec<Scalar> = set.iter().filter_map(|(_, a)| a.constant().cloned()).collect();
    assert_eq!(constants, [Scalar::Int(6), Scalar::Null]);
}

/// Malformed predicate lines: the error names line 4 and says what the `serde_json::Value`
/// reader said.
#[test]
fn malformed_predicate_lines_give_the_same_errors() {
    let good = concat!(
        r#"{"format":"isocert-history","version":1,"initial":[{"table":"t","key":1,"value":{"id":1,"c0":5}}]}"#,
        "\n",
        r#"{"id":1,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1,"c0":5}}]}]}"#,
        "\n\n"
    );
    for (line, expected) in MALFORMED {
        let text = format!("{good}{line}\n");
        let err = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap_err().to_string();
        assert_eq!(err, *expected, "{line}");
        let streamed =
            v1::read_history(BufReader::with_capacity(64, text.as_bytes())).unwrap_err().to_string();
        assert_eq!(streamed, *expected, "{line}");
    }
}

/// Lines and the errors the `serde_json::Value` reader gave for them (at be7bdae).
const MALFORMED: &[(&str, &str)] = &[
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1}]}]}"#,
        r#"line 4: ops[0].rows: a row needs its value"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":5,"rows":[]}]}"#,
        r#"line 4: invalid type: integer `5`, expected a string (column 62)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"  ","rows":[]}]}"#,
        r#"line 4: ops[0].where: empty predicate"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1"}]}"#,
        r#"line 4: ops[0].rows: missing"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"t","where":"c0 > 1","set":{"c1":[1]},"rows":[]}]}"#,
        r#"line 4: ops[0].set: column c1: expected a scalar, found an array"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"update","table":"t","where":"c0 > 1","set":[1],"rows":[]}]}"#,
        r#"line 4: invalid type: sequence, expected a map (column 76)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"delete","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1}}]}]}"#,
        r#"line 4: ops[0].rows: a deleted row has only a key"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1},"x":1}]}]}"#,
        r#"line 4: unknown field `x`, expected `key` or `value` (column 107)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1}},{"key":1,"value":{"id":1}}]}]}"#,
        r#"line 4: ops[0].rows: key 1 appears twice"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":5}]}]}"#,
        r#"line 4: ops[0].rows: a row of table t must be an object of columns, found a number"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":[1]}}]}]}"#,
        r#"line 4: ops[0].rows: column id: expected a scalar, found an array"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1.5,"value":{"id":1}}]}]}"#,
        r#"line 4: ops[0].rows: expected an integer or a string, found a float"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":null}]}]}"#,
        r#"line 4: ops[0].rows: a returned row cannot be null"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"aggregate","table":"t","where":"c0 > 1","function":"avg","result":1}]}"#,
        r#"line 4: ops[0].function: unknown aggregate "avg" (min, max, count, sum)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"aggregate","table":"t","where":"c0 > 1","function":"sum","result":1}]}"#,
        r#"line 4: ops[0].column: sum needs a column"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[],"key":1}]}"#,
        r#"line 4: ops[0].key: not allowed on a "select" operation"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","where":"c0 > 2","rows":[]}]}"#,
        r#"line 4: duplicate field `where` (column 77)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1,"c0":1e400}}]}]}"#,
        r#"line 4: number out of range (column 113)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1,"c0":18446744073709551615}}]}]}"#,
        r#"line 4: ops[0].rows: column c0: integer 18446744073709551615 does not fit a signed 64-bit integer"#,
    ),
    (
        r#"{"id":2,"session":1,"start_ts":true,"ops":[]}"#,
        r#"line 4: start_ts: expected a timestamp, found a boolean"#,
    ),
    (
        r#"{"id":2,"session":1,"invoked_at":5,"ops":[]}"#,
        r#"line 4: completed_at: missing: invoked_at needs completed_at"#,
    ),
    (
        r#"{"id":2,"session":1,"invoked_at":5,"completed_at":"x","ops":[]}"#,
        r#"line 4: completed_at: expected an integer (a time on the clients' clock), found "x""#,
    ),
    (
        r#"{"id":2,"session":1,"invoked_at":5,"completed_at":4,"ops":[]}"#,
        r#"line 4: completed_at: 4 is before invoked_at 5: a transaction completes after it is invoked"#,
    ),
    (
        r#"{"id":2,"session":1,"status":"weird","ops":[]}"#,
        r#"line 4: status: expected committed, aborted or unknown, found "weird""#,
    ),
    (
        r#"{"id":2,"session":{"a":1},"ops":[]}"#,
        r#"line 4: session: expected an integer or a string, found an object"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1,"c0":"\ud800"}}]}]}"#,
        r#"line 4: unexpected end of hex escape (column 116)"#,
    ),
    (
        r#"{"id":2,"session":1,"ops":[{"f":"select","table":"t","where":"c0 > 1","rows":[{"key":1,"value":{"id":1,"c0":2,"c0":3}}]}]} trailing"#,
        r#"line 4: trailing characters (column 124)"#,
    ),
];
