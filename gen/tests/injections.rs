//! Each injection changes a valid history minimally and in the expected place; the
//! reference replay sees exactly the anomalies its shape implies. (The checkers' own
//! rejection tests live with the checker.)

use isocert_gen::{generate, GenConfig, Generated, Injection};
use isocert_history::{v1, History, IsolationLevel, Op, TxnId};

use crate::reference::{violations, Rule};

fn config(kind: Option<Injection>, isolation: IsolationLevel) -> GenConfig {
    let predicate_ratio = if kind.is_some_and(Injection::needs_predicates) { 0.3 } else { 0.0 };
    GenConfig {
        txns: 120,
        sessions: 4,
        keys: 6,
        seed: 9,
        isolation,
        predicate_ratio,
        inject: kind,
        ..GenConfig::default()
    }
}

fn lines(h: &History) -> Vec<String> {
    h.txn_ids()
        .map(|t| {
            let mut out = Vec::new();
            v1::write_txn(h, t, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        })
        .collect()
}

/// (violates the snapshot replay on an SI base, violates the commit-time replay on a SER base)
fn expected(kind: Injection) -> (bool, bool) {
    match kind {
        Injection::G2Item | Injection::G2 | Injection::WriteSkew => (false, true),
        Injection::GSi | Injection::NoConflict => (true, false),
        Injection::DuplicateWrite => (false, false),
        _ => (true, true),
    }
}

/// How many transactions the kind appends (0: it edits in place).
fn appended(kind: Injection) -> usize {
    match kind {
        Injection::G0 | Injection::G2Item => 3,
        Injection::GarbageRead | Injection::ResultSetMismatch | Injection::CertificateContradiction => 0,
        Injection::Int | Injection::InternalInconsistency => 1,
        _ => 2,
    }
}

fn run(kind: Injection, isolation: IsolationLevel) -> (Generated, Generated) {
    let base = generate(&config(None, isolation)).unwrap();
    let base = if kind.needs_predicates() {
        generate(&config(Some(kind), isolation).clone_without()).unwrap()
    } else {
        base
    };
    let injected = generate(&config(Some(kind), isolation)).unwrap();
    (base, injected)
}

trait WithoutInjection {
    fn clone_without(&self) -> GenConfig;
}

impl WithoutInjection for GenConfig {
    fn clone_without(&self) -> GenConfig {
        GenConfig { inject: None, ..self.clone() }
    }
}

#[test]
fn every_kind_round_trips_its_name_and_lists_levels() {
    for kind in Injection::ALL {
        assert_eq!(kind.as_str().parse::<Injection>().unwrap(), kind);
        assert!(!kind.rejected_at().is_empty());
    }
    assert!("g3".parse::<Injection>().is_err());
}

#[test]
fn injections_are_minimal_edits_of_the_valid_history() {
    for kind in Injection::ALL {
        let (base, injected) = run(kind, IsolationLevel::SnapshotIsolation);
        assert!(injected.stats.injected.starts_with(kind.as_str()), "{kind}: {}", injected.stats.injected);
        let (before, after) = (lines(&base.history), lines(&injected.history));
        assert_eq!(after.len(), before.len() + appended(kind), "{kind}");
        let differing = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        let edited = usize::from(matches!(kind, Injection::GarbageRead | Injection::ResultSetMismatch));
        assert_eq!(differing, edited, "{kind}: generated transactions changed");
        let base_order = base.certificate.version_order.as_ref().unwrap();
        let order = injected.certificate.version_order.as_ref().unwrap();
        if kind == Injection::CertificateContradiction {
            let changed: Vec<_> = order.iter().filter(|(o, w)| base_order.get(o) != Some(w)).collect();
            assert_eq!(changed.len(), 1);
            let (obj, writers) = changed[0];
            let intruder = *writers.last().unwrap();
            let wrote = injected
                .history
                .txn(intruder)
                .ops
                .iter()
                .any(|op| matches!(op, Op::Write { obj: o, .. } if o == obj));
            assert!(!wrote, "the intruder must not have written the object");
        }
    }
}

#[test]
fn the_reference_replay_sees_exactly_what_each_shape_implies() {
    for kind in Injection::ALL {
        let (want_si, want_ser) = expected(kind);
        let (base, si) = run(kind, IsolationLevel::SnapshotIsolation);
        assert!(violations(&base.history, &base.certificate, Rule::Snapshot).is_empty(), "{kind}: base");
        let found = violations(&si.history, &si.certificate, Rule::Snapshot);
        assert_eq!(!found.is_empty(), want_si, "{kind} under the snapshot replay: {found:?}");
        let (base, ser) = run(kind, IsolationLevel::Serializable);
        assert!(violations(&base.history, &base.certificate, Rule::CommitTime).is_empty(), "{kind}: base");
        let found = violations(&ser.history, &ser.certificate, Rule::CommitTime);
        assert_eq!(!found.is_empty(), want_ser, "{kind} under the commit-time replay: {found:?}");
    }
}

#[test]
fn duplicate_write_installs_one_value_twice() {
    let (_, g) = run(Injection::DuplicateWrite, IsolationLevel::Serializable);
    let h = &g.history;
    let n = h.txns.len();
    let value = |t: usize| match h.txns[t].ops[..] {
        [Op::Write { obj, value }] => (obj, value),
        _ => panic!("expected a single write"),
    };
    assert_eq!(value(n - 1), value(n - 2));
    assert!(h.txns[n - 1].is_committed() && h.txns[n - 2].is_committed());
}

#[test]
fn g1a_reads_from_an_aborted_transaction() {
    let (_, g) = run(Injection::G1a, IsolationLevel::Serializable);
    let h = &g.history;
    let n = h.txns.len();
    let (writer, reader) = (&h.txns[n - 2], &h.txns[n - 1]);
    assert!(!writer.is_committed() && reader.is_committed());
    let (Op::Write { obj: w, value: a }, Op::Read { obj: r, value: b }) = (&writer.ops[0], &reader.ops[0])
    else {
        panic!("unexpected shape")
    };
    assert_eq!((w, a), (r, b));
}

#[test]
fn concurrent_shapes_overlap_in_time() {
    for kind in
        [Injection::G1c, Injection::LostUpdate, Injection::WriteSkew, Injection::NoConflict, Injection::GSi]
    {
        let (_, g) = run(kind, IsolationLevel::SnapshotIsolation);
        let h = &g.history;
        let n = h.txns.len();
        let (a, b) = (h.txn(TxnId::from_index(n - 2)), h.txn(TxnId::from_index(n - 1)));
        assert!(
            a.start_ts() < b.start_ts() && b.start_ts() < a.commit_ts() && a.commit_ts() < b.commit_ts(),
            "{kind}"
        );
    }
}

#[test]
fn predicate_kinds_need_predicates() {
    for kind in [Injection::G2, Injection::Phantom, Injection::ResultSetMismatch] {
        let cfg = GenConfig { inject: Some(kind), ..GenConfig::default() };
        assert!(generate(&cfg).is_err());
    }
}
