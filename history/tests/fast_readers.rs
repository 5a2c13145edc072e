//! The hand-written fast readers (`read_kv_v1`, `chronos::read_chronos`) against the
//! general v1 reader, on generated histories: ids and keys as integers or strings with
//! escapes and non-ASCII text, values at the edges of 64 bits, odd whitespace, shuffled
//! fields, and now and then a number beyond 64 bits that every reader must refuse. Both
//! readers must give the same model, or both refuse.

use isocert_history::{chronos, read_kv_v1, v1, KvHistory, Scalar};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Id {
    Int(i64),
    Text(String),
}

#[derive(Clone, Debug)]
struct Op {
    write: bool,
    key: Id,
    value: Option<i64>,
}

#[derive(Clone, Debug)]
struct Txn {
    session: Id,
    status: u8,
    start: u64,
    commit: u64,
    ops: Vec<Op>,
}

/// How a generated history is written: whitespace, escapes, field order, a poisoned number.
#[derive(Clone, Debug)]
struct Style {
    spaces: Vec<u8>,
    escape_unicode: bool,
    reverse_fields: bool,
    /// Replace one value by 2^64 (beyond every integer type): both readers must refuse.
    poison: Option<usize>,
}

fn text_id() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![Just('a'), Just('"'), Just('\\'), Just('é'), Just('😀'), Just(' '), Just('/')],
        0..5,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), -5i64..5, any::<i64>()].prop_map(Id::Int),
        text_id().prop_map(Id::Text),
    ]
}

fn value() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        1 => Just(None),
        4 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), 0i64..100, any::<i64>()].prop_map(Some),
    ]
}

fn txn() -> impl Strategy<Value = Txn> {
    let op = (any::<bool>(), id(), value()).prop_map(|(write, key, value)| Op { write, key, value });
    (id(), 0u8..3, 0u64..1_000, 0u64..1_000, proptest::collection::vec(op, 0..4)).prop_map(
        |(session, status, a, b, ops)| Txn { session, status, start: a.min(b), commit: a.max(b), ops },
    )
}

fn style() -> impl Strategy<Value = Style> {
    (
        proptest::collection::vec(0u8..4, 64),
        any::<bool>(),
        any::<bool>(),
        proptest::option::weighted(0.1, 0usize..40),
    )
        .prop_map(|(spaces, escape_unicode, reverse_fields, poison)| Style {
            spaces,
            escape_unicode,
            reverse_fields,
            poison,
        })
}

/// One field of an object: its name and what writes its value.
type Field<'a, 's> = (&'a str, Box<dyn Fn(&mut Writer<'s>) + 'a>);

/// Writes JSON text with the style's whitespace, escapes and field order.
struct Writer<'s> {
    out: String,
    style: &'s Style,
    n: usize,
    values: usize,
}

impl<'s> Writer<'s> {
    fn ws(&mut self) {
        self.n += 1;
        match self.style.spaces[self.n % self.style.spaces.len()] {
            0 => {}
            1 => self.out.push(' '),
            2 => self.out.push('\t'),
            _ => self.out.push_str(" \t "),
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '/' if self.style.escape_unicode => self.out.push_str("\\/"),
                c if !c.is_ascii() && self.style.escape_unicode => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn id(&mut self, id: &Id) {
        match id {
            Id::Int(i) => self.out.push_str(&i.to_string()),
            Id::Text(s) => self.string(s),
        }
    }

    fn value(&mut self, v: Option<i64>) {
        self.values += 1;
        if self.style.poison == Some(self.values) {
            self.out.push_str("18446744073709551616");
            return;
        }
        match v {
            Some(v) => self.out.push_str(&v.to_string()),
            None => self.out.push_str("null"),
        }
    }

    /// `{"k1": v1, ...}` with fields in order or reversed.
    fn object(&mut self, fields: Vec<Field<'_, 's>>) {
        let mut fields = fields;
        if self.style.reverse_fields {
            fields.reverse();
        }
        self.out.push('{');
        for (i, (name, write)) in fields.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.ws();
            self.string(name);
            self.ws();
            self.out.push(':');
            self.ws();
            write(self);
        }
        self.ws();
        self.out.push('}');
    }
}

/// The history as v1 JSON lines (the transaction's id is its index, so ids are unique).
fn v1_text(txns: &[Txn], style: &Style) -> String {
    let mut w = Writer { out: String::new(), style, n: 0, values: 0 };
    for (i, t) in txns.iter().enumerate() {
        let status = ["committed", "aborted", "unknown"][usize::from(t.status)];
        w.object(vec![
            ("id", Box::new(move |w: &mut Writer<'_>| w.out.push_str(&i.to_string()))),
            ("session", Box::new(|w: &mut Writer<'_>| w.id(&t.session))),
            ("status", Box::new(move |w: &mut Writer<'_>| w.string(status))),
            ("start_ts", Box::new(|w: &mut Writer<'_>| w.out.push_str(&t.start.to_string()))),
            ("commit_ts", Box::new(|w: &mut Writer<'_>| w.out.push_str(&t.commit.to_string()))),
            (
                "ops",
                Box::new(|w: &mut Writer<'_>| {
                    w.out.push('[');
                    for (j, op) in t.ops.iter().enumerate() {
                        if j > 0 {
                            w.out.push(',');
                        }
                        w.ws();
                        let f = if op.write { "w" } else { "r" };
                        w.object(vec![
                            ("f", Box::new(move |w: &mut Writer<'_>| w.string(f))),
                            ("key", Box::new(|w: &mut Writer<'_>| w.id(&op.key))),
                            ("value", Box::new(|w: &mut Writer<'_>| w.value(op.value))),
                        ]);
                    }
                    w.out.push(']');
                }),
            ),
        ]);
        w.out.push('\n');
    }
    w.out
}

/// The same history in the Chronos format (committed transactions only: it has no status).
fn chronos_text(txns: &[Txn], style: &Style) -> String {
    let mut w = Writer { out: String::from("["), style, n: 0, values: 0 };
    for (i, t) in txns.iter().enumerate() {
        if i > 0 {
            w.out.push(',');
        }
        w.ws();
        w.object(vec![
            ("tid", Box::new(move |w: &mut Writer<'_>| w.out.push_str(&i.to_string()))),
            ("sid", Box::new(|w: &mut Writer<'_>| w.id(&t.session))),
            ("sts", Box::new(|w: &mut Writer<'_>| w.out.push_str(&format!("{{\"p\":{},\"l\":0}}", t.start)))),
            (
                "cts",
                Box::new(|w: &mut Writer<'_>| w.out.push_str(&format!("{{\"p\":\"{}\",\"l\":0}}", t.commit))),
            ),
            (
                "ops",
                Box::new(|w: &mut Writer<'_>| {
                    w.out.push('[');
                    for (j, op) in t.ops.iter().enumerate() {
                        if j > 0 {
                            w.out.push(',');
                        }
                        let kind = if op.write { "w" } else { "r" };
                        w.object(vec![
                            ("t", Box::new(move |w: &mut Writer<'_>| w.string(kind))),
                            ("k", Box::new(|w: &mut Writer<'_>| w.id(&op.key))),
                            ("v", Box::new(|w: &mut Writer<'_>| w.value(op.value))),
                        ]);
                    }
                    w.out.push(']');
                }),
            ),
        ]);
    }
    w.out.push(']');
    w.out
}

/// A model as canonical v1 text, for comparison.
fn canon(kv: KvHistory) -> String {
    let mut out = Vec::new();
    v1::write_history(&kv.into_history(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// A history's interned objects, values and sessions, in id order.
fn tables(h: &isocert_history::History) -> String {
    use isocert_history::{ObjId, SessionId, ValueId};
    let objects: Vec<_> = (0..h.object_count()).map(|o| h.object(ObjId::from_index(o)).clone()).collect();
    let values: Vec<_> = (0..h.value_count()).map(|v| h.value(ValueId::from_index(v)).clone()).collect();
    let sessions: Vec<_> =
        (0..h.session_count()).map(|s| h.session_name(SessionId::from_index(s)).clone()).collect();
    format!("{objects:?}\n{values:?}\n{sessions:?}\n{:?}", h.initial)
}

/// A history of more than two of the key-value reader's operation blocks (which
/// `into_history` frees as it converts them), read from owned bytes by
/// `v1::read_history_vec`, is the general reader's history: the same transactions, ids
/// and interning tables.
#[test]
fn read_history_vec_over_several_blocks_gives_the_general_readers_history() {
    use std::fmt::Write as _;
    let n = 2 * KvHistory::BLOCK + 100;
    let mut text = String::new();
    for t in 0..n {
        let value = if t % 5 == 0 { format!("\"v{t}\"") } else { (t * 3).to_string() };
        let read = if t % 11 == 0 { "null".to_string() } else { (t % 97).to_string() };
        writeln!(
            text,
            r#"{{"id":{t},"session":{},"ops":[{{"f":"r","key":{},"value":{read}}},{{"f":"w","key":{},"value":{value}}}]}}"#,
            t % 7,
            t % 13,
            t % 17
        )
        .unwrap();
    }
    let general = v1::read_history(text.as_bytes()).unwrap();
    let owned = v1::read_history_vec(text.into_bytes(), v1::AdapterFacts::Keep).unwrap();
    assert_eq!(owned.txns, general.txns);
    assert_eq!(tables(&owned), tables(&general));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_v1_reader_agrees_with_the_general_one(txns in proptest::collection::vec(txn(), 1..8), style in style()) {
        let text = v1_text(&txns, &style);
        let fast = read_kv_v1(text.as_bytes());
        let general = v1::read_history(text.as_bytes()).and_then(|h| KvHistory::from_history(&h));
        match (fast, general) {
            (Ok(a), Ok(b)) => prop_assert_eq!(canon(a), canon(b), "{}", text),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "fast {:?} vs general {:?} on\n{}", a.err(), b.err(), text),
        }
        if style.poison.is_some_and(|p| (1..=txns.iter().map(|t| t.ops.len()).sum::<usize>()).contains(&p)) {
            prop_assert!(read_kv_v1(text.as_bytes()).is_err(), "a number beyond 64 bits was accepted:\n{}", text);
        }
    }

    #[test]
    fn read_history_bytes_gives_the_general_readers_history_and_errors(txns in proptest::collection::vec(txn(), 1..8), style in style()) {
        let text = v1_text(&txns, &style);
        let general = v1::read_history(text.as_bytes());
        let fast = v1::read_history_bytes(text.as_bytes(), v1::AdapterFacts::Keep);
        match (fast, general) {
            (Ok(a), Ok(b)) => {
                // Same transactions with the same ids, so the same interning tables.
                prop_assert_eq!(&a.txns, &b.txns);
                prop_assert_eq!(tables(&a), tables(&b));
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "fast path {:?} vs general {:?} on\n{}", a.err(), b.err(), text),
        }
    }

    #[test]
    fn the_chronos_reader_agrees_with_the_general_v1_reader(txns in proptest::collection::vec(txn(), 1..8), style in style()) {
        let committed: Vec<Txn> = txns.into_iter().map(|t| Txn { status: 0, ..t }).collect();
        let chronos = chronos::read_chronos(chronos_text(&committed, &style).as_bytes(), None);
        let general = v1::read_history(v1_text(&committed, &style).as_bytes()).and_then(|h| KvHistory::from_history(&h));
        match (chronos, general) {
            (Ok(a), Ok(b)) => prop_assert_eq!(canon(a), canon(b)),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "chronos {:?} vs general {:?}", a.err(), b.err()),
        }
    }
}

#[test]
fn a_scalar_sanity_check_of_the_generators() {
    // The generators' text parses: one hand-picked case with every kind of escape.
    let txns = vec![Txn {
        session: Id::Text("a\"\\é😀/".into()),
        status: 0,
        start: 1,
        commit: 2,
        ops: vec![Op { write: true, key: Id::Int(i64::MIN), value: Some(i64::MAX) }],
    }];
    for escape_unicode in [false, true] {
        let style = Style { spaces: vec![1, 2, 3, 0], escape_unicode, reverse_fields: true, poison: None };
        let kv = read_kv_v1(v1_text(&txns, &style).as_bytes()).expect("the fast reader reads it");
        let h = kv.into_history();
        assert_eq!(
            h.session_name(h.txn(isocert_history::TxnId(0)).session),
            &Scalar::Text("a\"\\é😀/".into())
        );
    }
}
