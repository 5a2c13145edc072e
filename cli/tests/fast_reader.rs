//! Issue 16: `isocert check` reads item-only v1 histories through the fast key-value reader
//! (`v1::read_history_bytes`). It must give the general reader's `History`, id for id, on
//! every generated shape and injected anomaly, and the general reader's errors on malformed
//! input.

use std::process::Command;

use isocert_checker::{check, render_text, CheckerKind, IsolationLevel};
use isocert_gen::{generate, DataModel, GenConfig, Injection};
use isocert_history::{read_kv_v1_bytes, v1, History, ObjId, SessionId, ValueId};
use isocert_oracle::Interpreter;

/// Asserts that two histories are the same: transactions, initial versions, dialect and
/// every interning table in id order.
pub(super) fn assert_same(fast: &History, general: &History, what: &str) {
    assert_eq!(fast.dialect, general.dialect, "{what}: dialect");
    assert_eq!(fast.tables(), general.tables(), "{what}: tables");
    assert_eq!(fast.predicates(), general.predicates(), "{what}: predicates");
    assert_eq!(fast.object_count(), general.object_count(), "{what}: objects");
    for o in 0..general.object_count() {
        assert_eq!(
            fast.object(ObjId::from_index(o)),
            general.object(ObjId::from_index(o)),
            "{what}: object {o}"
        );
    }
    assert_eq!(fast.value_count(), general.value_count(), "{what}: values");
    for v in 0..general.value_count() {
        assert_eq!(
            fast.value(ValueId::from_index(v)),
            general.value(ValueId::from_index(v)),
            "{what}: value {v}"
        );
    }
    assert_eq!(fast.session_count(), general.session_count(), "{what}: sessions");
    for s in 0..general.session_count() {
        let id = SessionId::from_index(s);
        assert_eq!(fast.session_name(id), general.session_name(id), "{what}: session {s}");
    }
    assert_eq!(fast.initial, general.initial, "{what}: initial versions");
    assert_eq!(fast.txns.len(), general.txns.len(), "{what}: transactions");
    for (i, (a, b)) in fast.txns.iter().zip(&general.txns).enumerate() {
        assert_eq!(a, b, "{what}: transaction {i}");
    }
}

/// The generated history and certificate as v1 bytes.
fn v1_bytes(cfg: &GenConfig) -> Option<(Vec<u8>, Vec<u8>)> {
    let g = generate(cfg).ok()?;
    let mut history = Vec::new();
    v1::write_history(&g.history, &mut history).unwrap();
    let mut cert = Vec::new();
    v1::write_certificate(&g.history, &g.certificate, &mut cert).unwrap();
    Some((history, cert))
}

/// The text reports of Emme (and Enne at serializable) on the history read from `bytes`.
fn reports(h: &History, cert_bytes: &[u8], level: IsolationLevel) -> Vec<String> {
    let mut h = h.clone();
    let cert = v1::read_certificate(cert_bytes, &mut h).unwrap();
    let oracle = Interpreter::new(&h).unwrap();
    let mut checkers = vec![CheckerKind::Emme];
    if level == IsolationLevel::Serializable {
        checkers.push(CheckerKind::Enne);
    }
    checkers
        .into_iter()
        .map(|c| match check(&h, &cert, level, c, &oracle) {
            Ok(report) => render_text(&report, &h),
            Err(e) => format!("error: {e}"),
        })
        .collect()
}

#[test]
fn the_fast_path_gives_the_general_readers_history_for_every_injection() {
    let mut fast_path_taken = 0;
    let models = [DataModel::KeyValue, DataModel::ListAppend];
    let kinds = std::iter::once(None).chain(Injection::ALL.into_iter().map(Some));
    for (n, inject) in kinds.enumerate() {
        let model = models[n % models.len()];
        let item_only =
            GenConfig { txns: 300, keys: 20, model, inject, seed: n as u64, ..GenConfig::default() };
        // Kinds the generator injects only into key-value histories, or only with predicates
        // (over the SQL table, which the fast reader hands to the general reader), get those.
        let with_predicates =
            GenConfig { predicate_ratio: 0.3, model: DataModel::SqlTable, ..item_only.clone() };
        let key_value = GenConfig { model: DataModel::KeyValue, ..item_only.clone() };
        let Some((bytes, cert)) =
            v1_bytes(&item_only).or_else(|| v1_bytes(&key_value)).or_else(|| v1_bytes(&with_predicates))
        else {
            panic!("{inject:?}: the generator refused both shapes")
        };
        let what = format!("{inject:?} ({} bytes)", bytes.len());
        match read_kv_v1_bytes(&bytes) {
            Ok(_) => fast_path_taken += 1,
            Err(e) => eprintln!("{what}: the general reader's ({e})"),
        }
        let general = v1::read_history(bytes.as_slice()).unwrap();
        for facts in [v1::AdapterFacts::Skip, v1::AdapterFacts::Keep] {
            let fast = v1::read_history_bytes(&bytes, facts).unwrap();
            assert_same(&fast, &general, &what);
        }
        let level = inject
            .and_then(|k| k.rejected_at().first())
            .map_or(IsolationLevel::Serializable, |l| l.parse().unwrap());
        let fast = v1::read_history_bytes(&bytes, v1::AdapterFacts::Skip).unwrap();
        assert_eq!(reports(&fast, &cert, level), reports(&general, &cert, level), "{what}");
    }
    assert!(fast_path_taken >= 15, "only {fast_path_taken} histories took the fast path");
    // A predicate history goes to the general reader, transparently.
    let sql =
        GenConfig { txns: 200, predicate_ratio: 0.3, model: DataModel::SqlTable, ..GenConfig::default() };
    let (bytes, _) = v1_bytes(&sql).unwrap();
    assert!(read_kv_v1_bytes(&bytes).is_err());
    let fast = v1::read_history_bytes(&bytes, v1::AdapterFacts::Skip).unwrap();
    assert_same(&fast, &v1::read_history(bytes.as_slice()).unwrap(), "predicate history");
}

#[test]
fn minus_zero_is_the_general_readers_float() {
    let text = "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":-0},{\"f\":\"r\",\"key\":1,\"value\":0}]}\n";
    let general = v1::read_history(text.as_bytes()).unwrap();
    assert_same(&v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap(), &general, "-0");
}

#[test]
fn adapter_facts_are_kept_or_skipped_as_asked() {
    let text = "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":2,\"meta\":{\"row\":5}}],\"meta\":{\"xid\":7}}\n";
    let general = v1::read_history(text.as_bytes()).unwrap();
    let kept = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Keep).unwrap();
    assert_same(&kept, &general, "kept");
    assert!(kept.txns[0].meta().is_some() && kept.txns[0].op_metas().len() == 1);
    let skipped = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap();
    assert!(skipped.txns[0].meta().is_none() && skipped.txns[0].op_metas().is_empty());
    assert_eq!(skipped.txns[0].ops, general.txns[0].ops);
}

/// Malformed lines: both paths refuse them with the general reader's message, naming the line.
#[test]
fn malformed_input_gives_the_general_readers_error() {
    let good = "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":2}]}\n\n";
    let bad_lines = [
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1.5,\"value\":2}]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"x\",\"key\":1,\"value\":2}]}",
        "{\"id\":2,\"session\":1,\"ops\":[],\"bogus\":1}",
        "{\"id\":2,\"id\":3,\"session\":1,\"ops\":[]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1,\"key\":2,\"value\":2}]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1.}]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":1e30}]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":[1]}]}",
        "{\"id\":2,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":-0,\"value\":1}]}",
        "{\"id\":1,\"session\":1,\"ops\":[]}",
        "{\"id\":2,\"session\":1,\"ops\":[",
        "[1,2]",
    ];
    for line in bad_lines {
        let text = format!("{good}{line}\n");
        let general = v1::read_history(text.as_bytes()).unwrap_err().to_string();
        let fast = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap_err().to_string();
        assert_eq!(fast, general, "{line}");
        assert!(fast.contains("line 3"), "{line}: {fast}");
    }
    // A header listing a scalar initial value of a SQL table is the general reader's error.
    let header = "{\"format\":\"isocert-history\",\"version\":1,\"initial\":[{\"table\":\"t\",\"key\":1,\"value\":5}]}\n";
    let text = format!("{header}{good}");
    let general = v1::read_history(text.as_bytes()).unwrap_err().to_string();
    assert_eq!(
        v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Skip).unwrap_err().to_string(),
        general
    );
}

#[test]
fn isocert_check_names_the_line_of_malformed_item_histories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":2}]}\n\
         {\"id\":2,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":2}]}\n\
         {\"id\":3,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":2,\"value\":3}]}\n",
    )
    .unwrap();
    for checker in ["emme", "enne"] {
        let out = Command::new(env!("CARGO_BIN_EXE_isocert"))
            .args(["check", path.to_str().unwrap(), "--isolation", "rc", "--checker", checker])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{checker}: {stderr}");
        assert!(stderr.contains("line 3") && stderr.contains("duplicate field"), "{checker}: {stderr}");
    }
}
