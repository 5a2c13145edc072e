//! The Chronos/TimeKiller JSON format: import (fast, into a [`KvHistory`]) and export.
//!
//! A history is a JSON array of transactions (or, for streaming, one transaction object
//! per line):
//!
//! ```text
//! [{"tid":1,"sid":0,"sts":{"p":"5","l":0},"cts":{"p":7,"l":0},
//!   "ops":[{"t":"r","k":3,"v":0},{"t":"w","k":4,"v":9},{"t":"append","k":5,"v":1}]}]
//! ```
//!
//! Ids may be integers or strings; `p`/`l` integers or digit strings; op kinds `r`/`read`,
//! `w`/`write`, `a`/`append`; `v` may be missing or null (absent, for reads and writes).
//! Session order is file order within a session, as in our v1 format. Every transaction
//! is committed (the format has no status). The format has no initial versions: the
//! Chronos tools take an initial value for every key on the command line, which
//! [`KvHistory::set_default_initial`] models.
//!
//! ```
//! use isocert_history::{chronos, KvOpKind, Scalar, TxnId};
//!
//! let text = r#"[{"tid":"a","sid":1,"sts":{"p":"5","l":0},"cts":{"p":6,"l":0},"ops":[{"t":"r","k":3}]}]"#;
//! let h = chronos::read_chronos(text.as_bytes(), Some(&Scalar::Int(0)))?;
//! assert_eq!(h.ops(TxnId(0))[0].kind(), KvOpKind::Read);
//! assert_eq!(h.txn_label(TxnId(0)), "T\"a\"");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::io::{Read, Write};

use crate::kv::scan::{Fail, Scan, Scanned};
use crate::kv::v1_fast::{object, parse_key, parse_ops, parse_timestamp, parse_value};
use crate::kv::{RecordError, RecordReader};
use crate::{
    FormatError, History, KvHistory, KvOp, KvOpKind, KvTxnFields, KvValue, Op, Scalar, Status, Timestamp,
    TxnId, Value,
};

const FORMAT: &str = "the Chronos format";

/// Reads a whole Chronos history; `initial` is the value every key holds before the first
/// transaction (the tools' `--initial-value`), `None` for absent.
///
/// # Errors
/// [`FormatError`] naming the line and field (`ops[3].v`) of malformed input.
pub fn read_chronos<R: Read>(input: R, initial: Option<&Scalar>) -> Result<KvHistory, FormatError> {
    let mut reader = ChronosReader::new(input);
    reader.history_mut().set_default_initial(initial);
    while reader.next_txn()?.is_some() {}
    Ok(reader.into_history())
}

/// Reads a Chronos history one transaction at a time: a JSON array, or one object per line.
#[derive(Debug)]
pub struct ChronosReader<R> {
    records: RecordReader<R>,
    history: KvHistory,
    ops: Vec<KvOp>,
    state: Layout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Unknown,
    ArrayFirst,
    ArrayNext,
    Lines,
    Done,
}

impl<R: Read> ChronosReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> Self {
        ChronosReader {
            records: RecordReader::new(input),
            history: KvHistory::new(),
            ops: Vec::new(),
            state: Layout::Unknown,
        }
    }

    /// The history read so far.
    pub fn history(&self) -> &KvHistory {
        &self.history
    }

    /// The history read so far, mutably.
    pub fn history_mut(&mut self) -> &mut KvHistory {
        &mut self.history
    }

    /// Finishes reading and returns the history.
    pub fn into_history(self) -> KvHistory {
        self.history
    }

    /// Reads the next transaction.
    ///
    /// # Errors
    /// As [`read_chronos`].
    pub fn next_txn(&mut self) -> Result<Option<TxnId>, FormatError> {
        let syntax = |line, message: String| FormatError::Syntax { line, message };
        loop {
            let next = self.records.peek_byte()?;
            let line = self.records.line();
            match (self.state, next) {
                (Layout::Unknown, None) => return Ok(None),
                (Layout::Unknown, Some(b'[')) => {
                    self.records.consume_byte();
                    self.state = Layout::ArrayFirst;
                }
                (Layout::Unknown, Some(b'{')) => self.state = Layout::Lines,
                (Layout::ArrayFirst, Some(b']')) | (Layout::ArrayNext, Some(b']')) => {
                    self.records.consume_byte();
                    self.state = Layout::Done;
                }
                (Layout::ArrayNext, Some(b',')) => {
                    self.records.consume_byte();
                    self.state = Layout::ArrayFirst;
                }
                (Layout::ArrayFirst, Some(b'{')) => {
                    self.state = Layout::ArrayNext;
                    return self.txn(line).map(Some);
                }
                (Layout::Lines, Some(b'{')) => return self.txn(line).map(Some),
                (Layout::Lines, None) => return Ok(None),
                (Layout::Done, None) => return Ok(None),
                (Layout::Done, Some(b)) => {
                    return Err(syntax(
                        line,
                        format!("trailing {} after the array", crate::kv::scan::describe(b)),
                    ))
                }
                (_, None) => return Err(syntax(line, "unexpected end of input inside the array".into())),
                (Layout::ArrayNext, Some(b)) => {
                    return Err(syntax(
                        line,
                        format!("expected ',' or ']', found {}", crate::kv::scan::describe(b)),
                    ))
                }
                (_, Some(b)) => {
                    return Err(syntax(
                        line,
                        format!("expected a transaction object, found {}", crate::kv::scan::describe(b)),
                    ))
                }
            }
        }
    }

    fn txn(&mut self, line: usize) -> Result<TxnId, FormatError> {
        let history = &mut self.history;
        let ops = &mut self.ops;
        let fields = self
            .records
            .record(|s| parse_txn(s, history, ops))
            .map_err(|e: RecordError| e.into_format_error(FORMAT))?;
        self.history
            .push_txn(fields, &self.ops)
            .map_err(|name| FormatError::invalid(line, "tid", format!("transaction id {name} appears twice")))
    }
}

fn parse_txn(s: &mut Scan<'_>, h: &mut KvHistory, ops: &mut Vec<KvOp>) -> Scanned<KvTxnFields> {
    ops.clear();
    let (mut name, mut session, mut start, mut commit, mut saw_ops) = (None, None, None, None, false);
    if s.open_object()? {
        loop {
            let key = s.key()?;
            match &*key {
                b"tid" => name = Some(parse_key(s).map_err(|f| f.at("tid"))?),
                b"sid" => session = Some(parse_key(s).map_err(|f| f.at("sid"))?),
                b"sts" => start = parse_timestamp(s).map_err(|f| f.at("sts"))?,
                b"cts" => commit = parse_timestamp(s).map_err(|f| f.at("cts"))?,
                b"ops" => {
                    saw_ops = true;
                    parse_ops(s, h, ops, [b"\"t\":\"", b"\",\"k\":", b",\"v\":"], parse_op)?;
                }
                other => {
                    return Err(Fail::bad(format!(
                        "unknown field `{}` (tid, sid, sts, cts, ops)",
                        String::from_utf8_lossy(other)
                    )))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    let name = name.ok_or_else(|| Fail::bad("missing field `tid`"))?;
    let session = session.ok_or_else(|| Fail::bad("missing field `sid`"))?;
    let start = start.ok_or_else(|| Fail::bad("missing field `sts`"))?;
    let commit = commit.ok_or_else(|| Fail::bad("missing field `cts`"))?;
    if !saw_ops {
        return Err(Fail::bad("missing field `ops`"));
    }
    let session = h.dict_mut().intern_session(session);
    Ok(KvTxnFields {
        name,
        session,
        status: Status::Committed,
        start: Some(start),
        commit: Some(commit),
        real_time: None,
    })
}

fn parse_op(s: &mut Scan<'_>, h: &mut KvHistory) -> Scanned<KvOp> {
    let (mut kind, mut key, mut value) = (None, None, KvValue::Absent);
    let mut is_array = false;
    if s.open_object()? {
        loop {
            let k: Cow<'_, [u8]> = s.key()?;
            match &*k {
                b"t" => {
                    let t = s.string().map_err(|f| f.at("t"))?;
                    kind = Some(match t.as_bytes() {
                        b"r" | b"read" | b"R" => KvOpKind::Read,
                        b"w" | b"write" | b"W" => KvOpKind::Write,
                        b"a" | b"append" | b"A" => KvOpKind::Append,
                        other => {
                            return Err(Fail::bad(format!(
                                "unknown operation {:?} (r, w, append)",
                                String::from_utf8_lossy(other)
                            ))
                            .at("t"))
                        }
                    });
                }
                b"k" => key = Some(parse_key(s).map_err(|f| f.at("k"))?),
                b"v" => {
                    is_array = s.peek()? == b'[';
                    value = parse_value(s, h).map_err(|f| f.at("v"))?;
                }
                other => {
                    return Err(Fail::bad(format!(
                        "unknown field `{}` (t, k, v)",
                        String::from_utf8_lossy(other)
                    )))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    let kind = kind.ok_or_else(|| Fail::bad("missing field `t`"))?;
    let key = key.ok_or_else(|| Fail::bad("missing field `k`"))?;
    match kind {
        KvOpKind::Write if is_array => {
            return Err(Fail::bad("a write installs a scalar, found an array (use append)").at("v"))
        }
        KvOpKind::Append if is_array => return Err(Fail::bad("expected a scalar, found an array").at("v")),
        KvOpKind::Append if value == KvValue::Absent => {
            return Err(Fail::bad("an append needs a non-null value").at("v"))
        }
        _ => {}
    }
    Ok(KvOp::new(kind, object(h, None, key), value))
}

/// What [`write_chronos`] left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChronosExport {
    /// Transactions written.
    pub written: usize,
    /// Aborted (and unknown-outcome) transactions left out: the format has committed ones only.
    pub skipped_uncommitted: usize,
}

/// Writes `h` in the Chronos format: a JSON array, one transaction per line, `p` as a digit
/// string like TimeKiller. Aborted and unknown-outcome transactions are left out (and counted).
///
/// # Errors
/// [`FormatError::Unsupported`] for a committed transaction without both timestamps, an
/// operation that is not an item read, write or append, a table other than `kv`, or initial
/// versions that differ between keys (the format cannot carry them); I/O errors.
pub fn write_chronos<W: Write>(h: &History, out: &mut W) -> Result<ChronosExport, FormatError> {
    let unsupported = |message: String| FormatError::Unsupported { format: "Chronos", message };
    let mut initial = h.initial.iter().map(|(_, v)| *v);
    if let Some(first) = initial.next() {
        if initial.any(|v| v != first) {
            return Err(unsupported(
                "the keys have different initial values; the format has one --initial-value for all".into(),
            ));
        }
    }
    let mut report = ChronosExport::default();
    let mut line = String::new();
    out.write_all(b"[")?;
    for t in h.txn_ids() {
        let txn = h.txn(t);
        if !txn.is_committed() {
            report.skipped_uncommitted += 1;
            continue;
        }
        let (Some(sts), Some(cts)) = (txn.start_ts(), txn.commit_ts()) else {
            return Err(unsupported(format!("{} has no start_ts and commit_ts", h.txn_label(t))));
        };
        line.clear();
        if report.written > 0 {
            line.push(',');
        }
        line.push_str("\n{\"tid\":");
        line.push_str(&txn.name.to_json().to_string());
        line.push_str(",\"sid\":");
        line.push_str(&h.session_name(txn.session).to_json().to_string());
        push_ts(&mut line, "sts", sts);
        push_ts(&mut line, "cts", cts);
        line.push_str(",\"ops\":[");
        for (i, op) in txn.ops.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            let (t_name, obj, value) = match op {
                Op::Read { obj, value } => ("r", *obj, h.value(*value).clone()),
                Op::Write { obj, value } => ("w", *obj, h.value(*value).clone()),
                Op::Append { obj, element } => ("append", *obj, Value::Scalar(element.clone())),
                _ => {
                    return Err(unsupported(format!(
                        "{} ops[{i}] is a predicate operation; the format has item operations only",
                        h.txn_label(t)
                    )))
                }
            };
            let o = h.object(obj);
            if !h.table(o.table).is_kv() {
                return Err(unsupported(format!("{} ops[{i}] is on a SQL table", h.txn_label(t))));
            }
            line.push_str("{\"t\":\"");
            line.push_str(t_name);
            line.push_str("\",\"k\":");
            line.push_str(&o.key.to_json().to_string());
            let v = match &value {
                Value::Absent => serde_json::Value::Null,
                Value::Scalar(s) => s.to_json(),
                Value::List(items) => serde_json::Value::Array(items.iter().map(Scalar::to_json).collect()),
                Value::Row(_) => return Err(unsupported(format!("{} ops[{i}] holds a row", h.txn_label(t)))),
            };
            line.push_str(",\"v\":");
            line.push_str(&v.to_string());
            line.push('}');
        }
        line.push_str("]}");
        out.write_all(line.as_bytes())?;
        report.written += 1;
    }
    out.write_all(b"\n]\n")?;
    Ok(report)
}

fn push_ts(line: &mut String, name: &str, ts: Timestamp) {
    use std::fmt::Write as _;
    let _ = write!(line, ",\"{name}\":{{\"p\":\"{}\",\"l\":{}}}", ts.wall, ts.logical);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strings_digit_strings_missing_values_and_aliases() {
        let text = r#"[
  {"tid": "t1", "sid": "s", "sts": {"p": "10", "l": 0}, "cts": {"p": 12, "l": "3"},
   "ops": [{"t": "read", "k": 1}, {"t": "write", "k": 1, "v": null}, {"t": "a", "k": "L", "v": 4}]},
  {"tid": 2, "sid": "s", "sts": {"p": 20, "l": 0}, "cts": {"p": 20, "l": 0}, "ops": []}
]"#;
        let h = read_chronos(text.as_bytes(), None).unwrap();
        assert_eq!(h.len(), 2);
        let ops = h.ops(TxnId(0));
        assert_eq!((ops[0].kind(), ops[0].value()), (KvOpKind::Read, KvValue::Absent));
        assert_eq!((ops[1].kind(), ops[1].value()), (KvOpKind::Write, KvValue::Absent));
        assert_eq!((ops[2].kind(), ops[2].value()), (KvOpKind::Append, KvValue::Int(4)));
        assert_eq!(h.commit_ts(TxnId(0)), Some(Timestamp::hlc(12, 3)));
        assert_eq!(h.session(TxnId(0)), h.session(TxnId(1)));
        assert_eq!(h.txn_by_name(&Scalar::Int(2)), Some(TxnId(1)));
    }

    #[test]
    fn one_object_per_line_is_accepted() {
        let text = "{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":2,\"l\":0},\"ops\":[]}\n\
                    {\"tid\":2,\"sid\":1,\"sts\":{\"p\":3,\"l\":0},\"cts\":{\"p\":4,\"l\":0},\"ops\":[]}\n";
        assert_eq!(read_chronos(text.as_bytes(), None).unwrap().len(), 2);
    }

    #[test]
    fn errors_name_line_and_field() {
        let cases = [
            ("[\n{\"tid\":1,\"sid\":1,\"sts\":{\"p\":\"x1\",\"l\":0},\"cts\":{\"p\":2,\"l\":0},\"ops\":[]}]", "line 2: sts.p: \"x1\" is not"),
            ("[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":2,\"l\":0},\n\"ops\":[{\"t\":\"q\",\"k\":1}]}]", "line 2: ops[0].t: unknown operation"),
            ("[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"ops\":[]}]", "line 1: missing field `cts`"),
            ("[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":1,\"l\":0},\"ops\":[]},\n{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":1,\"l\":0},\"ops\":[]}]", "line 2: tid: transaction id 1 appears twice"),
            ("[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":1,\"l\":0},\"ops\":[]}", "line 1: unexpected end of input"),
            ("[{\"tid\":1,\"sid\":1,\"sts\":{\"p\":1,\"l\":0},\"cts\":{\"p\":1,\"l\":0},\"ops\":[],\"x\":2}]", "line 1: unknown field `x`"),
        ];
        for (text, want) in cases {
            let err = read_chronos(text.as_bytes(), None).err().unwrap().to_string();
            assert!(err.starts_with(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn export_then_import_round_trips() {
        let text = r#"{"id":1,"session":"a","start_ts":"5.0000000001","commit_ts":6,"ops":[{"f":"r","key":1,"value":null},{"f":"w","key":1,"value":"x"},{"f":"append","key":2,"value":3}]}
{"id":2,"session":"a","status":"aborted","ops":[]}
{"id":"3","session":"b","start_ts":7,"commit_ts":7,"ops":[{"f":"r","key":2,"value":[3]}]}"#;
        let h = crate::v1::read_history(text.as_bytes()).unwrap();
        let mut out = Vec::new();
        let report = write_chronos(&h, &mut out).unwrap();
        assert_eq!(report, ChronosExport { written: 2, skipped_uncommitted: 1 });
        let back = read_chronos(out.as_slice(), None).unwrap().into_history();
        let mut a = Vec::new();
        crate::v1::write_history(&back, &mut a).unwrap();
        let a = String::from_utf8(a).unwrap();
        assert!(a.contains(r#""start_ts":"5.0000000001","commit_ts":6"#), "{a}");
        assert!(a.contains(r#"{"f":"r","key":2,"value":[3]}"#), "{a}");
        assert_eq!(a.lines().count(), 2);
    }
}
