//! The fast reader of v1 histories of item operations, straight into a [`KvHistory`].
//!
//! It reads what `v1::read_history` reads for key-value and list histories (header with
//! scalar initial versions, `r`/`w`/`append` operations, timestamps, statuses; `meta` is
//! skipped) and fails with [`FormatError::Unsupported`] on predicate operations and SQL
//! rows, so that a caller can fall back to the general reader.

use std::borrow::Cow;
use std::io::Read;

use super::build::{RecordError, RecordReader};
use super::scan::{Fail, Number, Scan, Scanned};
use super::{HistoryBuilder, KvHistory, KvOp, KvOpKind, KvTxnFields, KvValue};
use crate::model::KV_TABLE;
use crate::{FormatError, History, ObjId, RealTime, Scalar, Status, Timestamp, TxnId, UnknownName, Value};

/// The format name in [`FormatError::Unsupported`] errors of this reader.
const FAST: &str = "the fast key-value reader (use the general v1 reader)";

/// Reads a whole v1 kv/list history from `input`.
///
/// # Errors
/// [`FormatError::Syntax`]/[`FormatError::Invalid`] naming line and field of malformed
/// input; [`FormatError::Unsupported`] for constructs only the general reader handles.
pub fn read_kv_v1<R: Read>(input: R) -> Result<KvHistory, FormatError> {
    let mut reader = KvV1Reader::new(input);
    while reader.next_txn()?.is_some() {}
    Ok(reader.into_history())
}

/// Reads a whole v1 kv/list history from memory. The reading window is sized to the
/// input (up to the usual 4 MB), so parsing many small batches (online checking parses
/// each partition's messages in batches) does not zero 4 MB per batch.
///
/// # Errors
/// As [`read_kv_v1`].
pub fn read_kv_v1_bytes(bytes: &[u8]) -> Result<KvHistory, FormatError> {
    let window = (bytes.len() + 1).next_power_of_two().clamp(1 << 12, super::build::WINDOW);
    let mut reader = KvV1Reader {
        records: RecordReader::with_window(bytes, window),
        history: KvHistory::new(),
        ops: Vec::new(),
        seen_content: false,
        last_line: 0,
    };
    while reader.next_txn()?.is_some() {}
    Ok(reader.into_history())
}

/// Reads a v1 kv/list history one transaction at a time (online checkers).
#[derive(Debug)]
pub struct KvV1Reader<R> {
    records: RecordReader<R>,
    history: KvHistory,
    ops: Vec<KvOp>,
    seen_content: bool,
    last_line: usize,
}

impl<R: Read> KvV1Reader<R> {
    /// A reader over `input` (a file or standard input).
    pub fn new(input: R) -> Self {
        KvV1Reader {
            records: RecordReader::new(input),
            history: KvHistory::new(),
            ops: Vec::new(),
            seen_content: false,
            last_line: 0,
        }
    }

    /// A reader over input that continues a v1 file after its first line: its first line is
    /// a transaction, never the header (a part of a file read on several threads).
    /// Its transaction names are not indexed: [`KvHistory::append`] indexes them.
    pub(crate) fn continuing(input: R) -> Self {
        let mut reader = KvV1Reader { seen_content: true, ..KvV1Reader::new(input) };
        reader.history.unindexed = true;
        reader
    }

    /// A reader over one part of a v1 file: the first part (`first`, which may start with
    /// the header) or a later one ([`KvV1Reader::continuing`]), reading through the window
    /// `buf` that [`KvV1Reader::into_part`] gave back from the previous part, into the
    /// memory of `into` (an emptied history, [`KvHistory::clear_for_reuse`]) if given.
    pub(crate) fn part(input: R, buf: Vec<u8>, first: bool, into: Option<KvHistory>) -> Self {
        // Not `unwrap_or_default`: a new history interns the absent value first.
        let history = match into {
            Some(history) => history,
            None => KvHistory::new(),
        };
        let mut reader = KvV1Reader {
            records: RecordReader::with_buffer(input, buf),
            history,
            ops: Vec::new(),
            seen_content: !first,
            last_line: 0,
        };
        reader.history.unindexed = !first;
        reader
    }

    /// The history read and the window, for [`KvV1Reader::part`] on the next part.
    pub(crate) fn into_part(self) -> (KvHistory, Vec<u8>) {
        (self.history, self.records.into_buffer())
    }

    /// The history read so far.
    pub fn history(&self) -> &KvHistory {
        &self.history
    }

    /// The history read so far, mutably (an online checker frees blocks it is done with).
    pub fn history_mut(&mut self) -> &mut KvHistory {
        &mut self.history
    }

    /// Hands over the transactions read so far (with the header's initial versions) and
    /// reads on into a fresh history whose ids restart at zero and whose names are not
    /// indexed: the parts, appended in order with [`KvHistory::append`], give what one
    /// reader gives. A reader thread feeding a streaming checker sends such parts.
    pub fn take_part(&mut self) -> KvHistory {
        let mut fresh = KvHistory::new();
        fresh.unindexed = true;
        std::mem::replace(&mut self.history, fresh)
    }

    /// Finishes reading and returns the history.
    pub fn into_history(self) -> KvHistory {
        self.history
    }

    /// The line of the last transaction read (0 before the first).
    pub fn last_line(&self) -> usize {
        self.last_line
    }

    /// Whether the next line is already in memory, so that [`KvV1Reader::next_txn`] will
    /// not wait for input (true at the end of input too).
    pub fn line_buffered(&self) -> bool {
        self.records.line_buffered()
    }

    /// Reads the next transaction (after the header, if any). Returns as soon as the
    /// transaction's line has arrived, so it suits standard input.
    ///
    /// # Errors
    /// As [`read_kv_v1`].
    pub fn next_txn(&mut self) -> Result<Option<TxnId>, FormatError> {
        let Some((line, fields)) = self.next_fields()? else { return Ok(None) };
        match self.history.push_txn(fields, &self.ops) {
            Ok(id) => Ok(Some(id)),
            Err(name) => Err(repeated_id(line, &name)),
        }
    }

    /// Parses the next transaction (after the header, if any) into its fields and the
    /// operations left in `self.ops`, without storing it; returns its line too.
    fn next_fields(&mut self) -> Result<Option<(usize, KvTxnFields)>, FormatError> {
        loop {
            let Some(b) = self.records.peek_byte()? else { return Ok(None) };
            let line = self.records.line();
            if line == self.last_line {
                return Err(FormatError::Syntax {
                    line,
                    message: "a line holds more than one transaction".into(),
                });
            }
            if b != b'{' {
                return Err(FormatError::Syntax {
                    line,
                    message: format!("expected a transaction object, found {}", super::scan::describe(b)),
                });
            }
            let first = !self.seen_content;
            self.seen_content = true;
            let history = &mut self.history;
            let ops = &mut self.ops;
            let fail = |e: RecordError| e.into_format_error(FAST);
            if first && self.records.record(peek_is_header).map_err(fail)? {
                self.records.record(|s| parse_header(s, history)).map_err(fail)?;
                self.one_line(line)?;
                continue;
            }
            let fields = self.records.record(|s| parse_txn(s, history, ops)).map_err(fail)?;
            self.one_line(line)?;
            return Ok(Some((line, fields)));
        }
    }

    /// Checks that the record that started on `line` ended on it.
    fn one_line(&mut self, line: usize) -> Result<(), FormatError> {
        if self.records.line() != line {
            return Err(FormatError::Syntax { line, message: "a transaction must be on one line".into() });
        }
        self.last_line = line;
        Ok(())
    }
}

/// The error for a transaction id that an earlier line already used.
fn repeated_id(line: usize, name: &Scalar) -> FormatError {
    FormatError::invalid(line, "id", format!("transaction id {name} appears twice"))
}

/// Reads a whole v1 kv/list history from `input` through a window of `window` bytes
/// straight into a [`History`], as [`KvHistory::into_history`] of [`read_kv_v1`]'s history
/// would give it, but without storing the operations in a [`KvHistory`] first: each
/// transaction is converted as soon as it is parsed ([`HistoryBuilder`]), so the 16-byte
/// operations, the transactions' columns and their name index are never built (issue 34:
/// filling the key-value history's blocks was a sixth of an Emme check's page faults).
/// Also returns whether adapter facts (`meta`) were skipped.
///
/// # Errors
/// As [`read_kv_v1`].
pub(crate) fn read_history_through<R: Read>(input: R, window: usize) -> Result<(History, bool), FormatError> {
    let mut reader = KvV1Reader {
        records: RecordReader::with_window(input, window),
        history: KvHistory::new(),
        ops: Vec::new(),
        seen_content: false,
        last_line: 0,
    };
    let mut built = HistoryBuilder::default();
    while let Some((line, fields)) = reader.next_fields()? {
        built.push(reader.history.dict(), fields, &reader.ops).map_err(|name| repeated_id(line, &name))?;
    }
    let skipped_meta = reader.history.skipped_meta();
    Ok((built.finish(reader.history), skipped_meta))
}

/// Whether the object at the cursor has a top-level `format` key (the header); consumes nothing.
fn peek_is_header(s: &mut Scan<'_>) -> Scanned<bool> {
    let (start, newlines) = (s.pos, s.newlines);
    let mut found = false;
    if s.open_object()? {
        loop {
            if *s.key()? == *b"format" {
                found = true;
            }
            s.skip_value()?;
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    s.pos = start;
    s.newlines = newlines;
    Ok(found)
}

fn parse_header(s: &mut Scan<'_>, h: &mut KvHistory) -> Scanned<()> {
    let mut format = None;
    let mut version = None;
    let mut initial: Vec<(ObjId, KvValue)> = Vec::new();
    // The objects listed so far: a set keeps the duplicate check linear (issue 28).
    let mut listed: rustc_hash::FxHashSet<ObjId> = rustc_hash::FxHashSet::default();
    if s.open_object()? {
        loop {
            let key = s.key()?;
            match &*key {
                b"format" => format = Some(s.string().map_err(|f| f.at("format"))?.into_owned()),
                b"version" => version = Some(s.number().map_err(|f| f.at("version"))?),
                b"dialect" => {
                    let d = s.string().map_err(|f| f.at("dialect"))?;
                    h.dict_mut().dialect = String::from_utf8_lossy(d.as_bytes())
                        .parse()
                        .map_err(|e: UnknownName| Fail::bad(e.to_string()).at("dialect"))?;
                }
                b"serial_order" => {
                    let o = s.string().map_err(|f| f.at("serial_order"))?;
                    h.dict_mut().serial_order = String::from_utf8_lossy(o.as_bytes())
                        .parse()
                        .map_err(|e: UnknownName| Fail::bad(e.to_string()).at("serial_order"))?;
                }
                b"isolation" => {
                    let level = s.string().map_err(|f| f.at("isolation"))?;
                    h.dict_mut().isolation = Some(
                        String::from_utf8_lossy(level.as_bytes())
                            .parse()
                            .map_err(|e: UnknownName| Fail::bad(e.to_string()).at("isolation"))?,
                    );
                }
                // Adapter facts about the whole history (PostgreSQL's `initial_xids`):
                // recovery reads them, checkers ignore them.
                b"meta" => s.skip_value().map_err(|f| f.at("meta"))?,
                // The statement-level promises, read as the general reader reads them.
                b"promises" => {
                    let start = s.pos;
                    s.skip_value().map_err(|f| f.at("promises"))?;
                    let json: serde_json::Value = serde_json::from_slice(s.since(start))
                        .map_err(|e| Fail::bad(e.to_string()).at("promises"))?;
                    if !json.is_null() {
                        let p = crate::v1::header_promises(&json)
                            .map_err(|(_, m)| Fail::bad(m).at("promises"))?;
                        h.dict_mut().promises = Some(p);
                    }
                }
                b"initial" => {
                    if s.open_array()? {
                        let mut i = 0;
                        loop {
                            let entry =
                                parse_initial(s, h).map_err(|f| f.at(format!("[{i}]")).at("initial"))?;
                            if !listed.insert(entry.0) {
                                return Err(Fail::bad("object listed twice in initial")
                                    .at("key")
                                    .at(format!("[{i}]"))
                                    .at("initial"));
                            }
                            initial.push(entry);
                            i += 1;
                            if !s.next_or_close(b']')? {
                                break;
                            }
                        }
                    }
                }
                other => {
                    return Err(Fail::bad(format!("unknown field {:?}", String::from_utf8_lossy(other))))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    match format.as_deref() {
        Some("isocert-history") => {}
        Some(f) => return Err(Fail::bad(format!("expected \"isocert-history\", found {f:?}")).at("format")),
        None => return Err(Fail::bad("missing field `format`")),
    }
    match version {
        Some(Number::Int(1)) => {}
        Some(v) => return Err(Fail::bad(format!("this isocert reads version 1, found {v}")).at("version")),
        None => return Err(Fail::bad("missing field `version`")),
    }
    for (obj, value) in initial {
        h.set_initial(obj, value);
    }
    Ok(())
}

fn parse_initial(s: &mut Scan<'_>, h: &mut KvHistory) -> Scanned<(ObjId, KvValue)> {
    let mut table: Option<Cow<'_, str>> = None;
    let mut key = None;
    let mut value = None;
    if s.open_object()? {
        loop {
            let k = s.key()?;
            match &*k {
                b"table" => table = Some(s.string().map_err(|f| f.at("table"))?),
                b"key" => key = Some(parse_key(s).map_err(|f| f.at("key"))?),
                b"value" => value = Some(parse_value(s, h).map_err(|f| f.at("value"))?),
                other => {
                    return Err(Fail::bad(format!("unknown field {:?}", String::from_utf8_lossy(other))))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    if table.as_deref().is_some_and(|t| t != KV_TABLE) {
        return Err(Fail::Unsupported("an initial row of a SQL table".into()));
    }
    let key = key.ok_or_else(|| Fail::bad("missing").at("key"))?;
    let value = value.ok_or_else(|| Fail::bad("missing").at("value"))?;
    Ok((object(h, table.as_deref(), key), value))
}

/// Interns the object `key` of `table` (default `kv`).
#[inline]
pub(crate) fn object(h: &mut KvHistory, table: Option<&str>, key: Scalar) -> ObjId {
    match (table, key) {
        (None | Some(KV_TABLE), Scalar::Int(i)) => h.kv_object(i),
        (table, key) => {
            let dict = h.dict_mut();
            let t = dict.intern_table(table.unwrap_or(KV_TABLE));
            dict.intern_object(t, key)
        }
    }
}

/// A key or id: an integer or a string.
#[inline]
pub(crate) fn parse_key(s: &mut Scan<'_>) -> Scanned<Scalar> {
    match s.peek()? {
        b'"' => Ok(Scalar::Text(s.string()?.into())),
        b'-' | b'0'..=b'9' => match s.number()? {
            Number::Int(i) => Ok(Scalar::Int(i)),
            Number::BigUnsigned(u) => {
                Err(Fail::bad(format!("integer {u} does not fit a signed 64-bit integer")))
            }
            Number::Float(_) => Err(Fail::bad("expected an integer or a string, found a float")),
        },
        b'n' => Err(Fail::bad("expected an integer or a string, found null")),
        b't' | b'f' => Err(Fail::bad("expected an integer or a string, found a boolean")),
        b'[' => Err(Fail::bad("expected an integer or a string, found an array")),
        b'{' => Err(Fail::bad("expected an integer or a string, found an object")),
        b => Err(Fail::bad(format!("expected a value, found {}", super::scan::describe(b)))),
    }
}

/// A JSON scalar.
#[inline]
pub(crate) fn parse_scalar(s: &mut Scan<'_>) -> Scanned<Scalar> {
    match s.peek()? {
        b'"' => Ok(Scalar::Text(s.string()?.into())),
        b'n' => s.literal(b"null").map(|_| Scalar::Null),
        b't' => s.literal(b"true").map(|_| Scalar::Bool(true)),
        b'f' => s.literal(b"false").map(|_| Scalar::Bool(false)),
        b'[' => Err(Fail::bad("expected a scalar, found an array")),
        b'{' => Err(Fail::Unsupported("a row value (SQL tables need the general reader)".into())),
        _ => match s.number()? {
            Number::Int(i) => Ok(Scalar::Int(i)),
            Number::BigUnsigned(u) => {
                Err(Fail::bad(format!("integer {u} does not fit a signed 64-bit integer")))
            }
            Number::Float(f) => float(f).map(Scalar::Float),
        },
    }
}

/// A float scalar, refused where the general reader refuses it: an integral value beyond
/// the 64-bit integer range, which would lose its exact value.
#[inline]
fn float(f: f64) -> Scanned<f64> {
    if f.fract() == 0.0 && f.abs() >= 2f64.powi(63) {
        return Err(Fail::bad(format!(
            "number {f} is outside the 64-bit integer range and would lose its exact value; write it as a string"
        )));
    }
    Ok(f)
}

/// An item value: `null` is absent, an array is a list, anything else a scalar.
#[inline]
pub(crate) fn parse_value(s: &mut Scan<'_>, h: &mut KvHistory) -> Scanned<KvValue> {
    match s.peek()? {
        b'-' | b'0'..=b'9' => match s.number()? {
            Number::Int(i) => Ok(KvValue::Int(i)),
            Number::BigUnsigned(u) => {
                Err(Fail::bad(format!("integer {u} does not fit a signed 64-bit integer")))
            }
            Number::Float(f) => Ok(h.intern_scalar(&Scalar::Float(float(f)?))),
        },
        b'n' => s.literal(b"null").map(|_| KvValue::Absent),
        b'[' => {
            let mut items = Vec::new();
            if s.open_array()? {
                loop {
                    items.push(parse_scalar(s)?);
                    if !s.next_or_close(b']')? {
                        break;
                    }
                }
            }
            Ok(h.intern_value(Value::List(items.into_boxed_slice())))
        }
        _ => {
            let sc = parse_scalar(s)?;
            Ok(h.intern_scalar(&sc))
        }
    }
}

/// A timestamp: integer, `"WALL.LOGICAL"`, `{"p":..,"l":..}` (parts integers or digit strings), or null.
pub(crate) fn parse_timestamp(s: &mut Scan<'_>) -> Scanned<Option<Timestamp>> {
    match s.peek()? {
        b'n' => s.literal(b"null").map(|_| None),
        b'"' => Timestamp::parse_str(&s.string()?).map(Some).map_err(Fail::bad),
        b'{' => {
            let (mut p, mut l) = (None, None);
            if s.open_object()? {
                loop {
                    let k = s.key()?;
                    match &*k {
                        b"p" => p = Some(ts_part(s).map_err(|f| f.at("p"))?),
                        b"l" => l = Some(ts_part(s).map_err(|f| f.at("l"))?),
                        other => {
                            return Err(Fail::bad(format!(
                                "unknown field {:?} (expected p and l)",
                                String::from_utf8_lossy(other)
                            )))
                        }
                    }
                    if !s.next_or_close(b'}')? {
                        break;
                    }
                }
            }
            let p = p.ok_or_else(|| Fail::bad("missing \"p\""))?;
            let l = l.ok_or_else(|| Fail::bad("missing \"l\""))?;
            Ok(Some(Timestamp::hlc(p, l)))
        }
        _ => ts_part(s).map(|w| Some(Timestamp::new(w))),
    }
}

/// A non-negative integer, or a string of digits.
fn ts_part(s: &mut Scan<'_>) -> Scanned<u64> {
    if s.peek()? == b'"' {
        let text = s.string()?;
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Fail::bad(format!("{text:?} is not a non-negative integer")));
        }
        return text.parse().map_err(|_| Fail::bad(format!("{text:?} does not fit 64 bits")));
    }
    match s.number()? {
        Number::Int(i) if i >= 0 => Ok(i as u64),
        Number::BigUnsigned(u) => Ok(u),
        n => Err(Fail::bad(format!("timestamp {n} is not a non-negative integer"))),
    }
}

/// The `ops` array of a fast reader's transaction, appended to `ops`.
///
/// An operation in the canonical compact spelling
/// `{"<kind>":"r|w","<key>":INT,"<value>":INT|null}` (`canonical` holds the three field
/// prefixes as [`Scan::canonical_op`] takes them, e.g. `"f":"`) takes the short path; any
/// other spelling goes through the format's `parse_op`, whose failures are reported at
/// `ops[i]`. This is the hot loop of both fast readers ([`read_kv_v1`] and
/// [`crate::chronos`]): inlined into each, so the prefixes stay constants and `parse_op` a
/// direct call.
#[inline(always)]
pub(crate) fn parse_ops<P>(
    s: &mut Scan<'_>,
    h: &mut KvHistory,
    ops: &mut Vec<KvOp>,
    canonical: [&[u8]; 3],
    mut parse_op: P,
) -> Scanned<()>
where
    P: FnMut(&mut Scan<'_>, &mut KvHistory) -> Scanned<KvOp>,
{
    let [kind_field, key_field, value_field] = canonical;
    if s.open_array()? {
        loop {
            let i = ops.len();
            let op = match s.canonical_op(kind_field, key_field, value_field) {
                Some((kind @ (b'r' | b'w'), key, value)) => {
                    let kind = if kind == b'r' { KvOpKind::Read } else { KvOpKind::Write };
                    let value = value.map_or(KvValue::Absent, KvValue::Int);
                    KvOp::new(kind, h.kv_object(key), value)
                }
                _ => parse_op(s, h).map_err(|f| f.at(format!("[{i}]")).at("ops"))?,
            };
            ops.push(op);
            if !s.next_or_close(b']')? {
                break;
            }
        }
    }
    Ok(())
}

/// Marks the field `bit` of an object as read: a field given twice is an error, as in the
/// general reader.
#[inline]
fn once(seen: &mut u16, bit: u16, name: &str) -> Scanned<()> {
    if *seen & bit != 0 {
        return Err(Fail::bad(format!("duplicate field `{name}`")));
    }
    *seen |= bit;
    Ok(())
}

fn parse_txn(s: &mut Scan<'_>, h: &mut KvHistory, ops: &mut Vec<KvOp>) -> Scanned<KvTxnFields> {
    ops.clear();
    let mut name = None;
    let mut session = None;
    let mut status = Status::Committed;
    let mut start = None;
    let mut commit = None;
    let mut saw_ops = false;
    let (mut invoked, mut completed) = (None, None);
    let mut seen = 0u16;
    if s.open_object()? {
        loop {
            let key = s.key()?;
            match &*key {
                b"id" => {
                    once(&mut seen, 1, "id")?;
                    name = Some(parse_key(s).map_err(|f| f.at("id"))?);
                }
                b"session" => {
                    once(&mut seen, 2, "session")?;
                    session = Some(parse_key(s).map_err(|f| f.at("session"))?);
                }
                b"status" => {
                    once(&mut seen, 4, "status")?;
                    let text = s.string().map_err(|f| f.at("status"))?;
                    status = match text.as_bytes() {
                        b"committed" => Status::Committed,
                        b"aborted" => Status::Aborted,
                        b"unknown" => Status::Unknown,
                        other => {
                            return Err(Fail::bad(format!(
                                "expected committed, aborted or unknown, found {:?}",
                                String::from_utf8_lossy(other)
                            ))
                            .at("status"))
                        }
                    };
                }
                b"start_ts" => {
                    once(&mut seen, 8, "start_ts")?;
                    start = parse_timestamp(s).map_err(|f| f.at("start_ts"))?;
                }
                b"commit_ts" => {
                    once(&mut seen, 16, "commit_ts")?;
                    commit = parse_timestamp(s).map_err(|f| f.at("commit_ts"))?;
                }
                b"meta" => {
                    once(&mut seen, 32, "meta")?;
                    s.skip_value()?;
                    h.note_skipped_meta();
                }
                b"invoked_at" => {
                    once(&mut seen, 128, "invoked_at")?;
                    invoked = Some(parse_time(s).map_err(|f| f.at("invoked_at"))?);
                }
                b"completed_at" => {
                    once(&mut seen, 256, "completed_at")?;
                    completed = Some(parse_time(s).map_err(|f| f.at("completed_at"))?);
                }
                b"ops" => {
                    once(&mut seen, 64, "ops")?;
                    saw_ops = true;
                    parse_ops(s, h, ops, [b"\"f\":\"", b"\",\"key\":", b",\"value\":"], parse_op)?;
                }
                b"format" => return Err(Fail::bad(crate::v1::HEADER_NOT_FIRST)),
                other => {
                    return Err(Fail::bad(format!("unknown field `{}`", String::from_utf8_lossy(other))))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    let name = name.ok_or_else(|| Fail::bad("missing field `id`"))?;
    let session = session.ok_or_else(|| Fail::bad("missing field `session`"))?;
    if !saw_ops {
        return Err(Fail::bad("missing field `ops`"));
    }
    let session = h.dict_mut().intern_session(session);
    let real_time = match (invoked.flatten(), completed.flatten()) {
        (None, None) => None,
        (Some(_), None) => return Err(Fail::bad("missing: invoked_at needs completed_at").at("completed_at")),
        (None, Some(_)) => return Err(Fail::bad("missing: completed_at needs invoked_at").at("invoked_at")),
        (Some(invoked_at), Some(completed_at)) if completed_at < invoked_at => {
            return Err(Fail::bad(format!(
                "{completed_at} is before invoked_at {invoked_at}: a transaction completes after it is invoked"
            ))
            .at("completed_at"))
        }
        (Some(invoked_at), Some(completed_at)) => Some(RealTime { invoked_at, completed_at }),
    };
    Ok(KvTxnFields { name, session, status, start, commit, real_time })
}

/// A client time (`invoked_at`, `completed_at`): an integer, or null for none.
fn parse_time(s: &mut Scan<'_>) -> Scanned<Option<i64>> {
    if s.peek()? == b'n' {
        return s.literal(b"null").map(|_| None);
    }
    match s.number()? {
        Number::Int(i) => Ok(Some(i)),
        _ => Err(Fail::bad("expected an integer (a time on the clients' clock)")),
    }
}

fn parse_op(s: &mut Scan<'_>, h: &mut KvHistory) -> Scanned<KvOp> {
    let mut kind = None;
    let mut table: Option<Cow<'_, str>> = None;
    let mut key = None;
    let mut value = None;
    let mut value_is_array = false;
    let mut seen = 0u16;
    if s.open_object()? {
        loop {
            let k = s.key()?;
            match &*k {
                b"f" => {
                    once(&mut seen, 1, "f")?;
                    let f = s.string().map_err(|f| f.at("f"))?;
                    kind = Some(match f.as_bytes() {
                        b"r" => KvOpKind::Read,
                        b"w" => KvOpKind::Write,
                        b"append" => KvOpKind::Append,
                        b"select" | b"update" | b"delete" | b"aggregate" => {
                            return Err(Fail::Unsupported(format!("a {f} operation")));
                        }
                        other => {
                            return Err(Fail::bad(format!(
                                "unknown operation {:?} (r, w, append, select, update, delete, aggregate)",
                                String::from_utf8_lossy(other)
                            ))
                            .at("f"))
                        }
                    });
                }
                b"table" => {
                    once(&mut seen, 2, "table")?;
                    table = Some(s.string().map_err(|f| f.at("table"))?);
                }
                b"key" => {
                    once(&mut seen, 4, "key")?;
                    key = Some(parse_key(s).map_err(|f| f.at("key"))?);
                }
                b"value" => {
                    once(&mut seen, 8, "value")?;
                    value_is_array = s.peek()? == b'[';
                    value = Some(parse_value(s, h).map_err(|f| f.at("value"))?);
                }
                b"meta" => {
                    once(&mut seen, 16, "meta")?;
                    s.skip_value()?;
                    h.note_skipped_meta();
                }
                b"where" | b"rows" | b"set" | b"function" | b"column" | b"result" => {
                    return Err(Fail::Unsupported(format!("field {k:?} of a predicate operation")))
                }
                other => {
                    return Err(Fail::bad(format!("unknown field `{}`", String::from_utf8_lossy(other))))
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    let kind = kind.ok_or_else(|| Fail::bad("missing field `f`"))?;
    if table.as_deref().is_some_and(|t| t != KV_TABLE) {
        return Err(Fail::Unsupported("an operation on a SQL table".into()));
    }
    let key = key.ok_or_else(|| Fail::bad("missing").at("key"))?;
    let value = value.ok_or_else(|| Fail::bad("missing").at("value"))?;
    match kind {
        KvOpKind::Write if value_is_array => {
            return Err(
                Fail::bad("a write installs a scalar or a row, found an array (use append)").at("value")
            )
        }
        KvOpKind::Append if value_is_array => {
            return Err(Fail::bad("expected a scalar, found an array").at("value"))
        }
        KvOpKind::Append if value == KvValue::Absent => {
            return Err(Fail::bad("cannot append null").at("value"))
        }
        _ => {}
    }
    let obj = object(h, table.as_deref(), key);
    Ok(KvOp::new(kind, obj, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window sized to the input still grows for a line longer than it, and an error
    /// names the same line as the streaming reader's.
    #[test]
    fn reading_from_memory_with_a_small_window_reads_what_a_stream_reads() {
        let ops: Vec<String> =
            (0..400).map(|k| format!("{{\"f\":\"w\",\"key\":{k},\"value\":{k}}}")).collect();
        let text = format!(
            "{{\"id\":1,\"session\":1,\"ops\":[{{\"f\":\"r\",\"key\":1,\"value\":null}}]}}\n\
             {{\"id\":2,\"session\":1,\"ops\":[{}]}}\n",
            ops.join(",")
        );
        assert!(text.len() > 4096 * 2);
        let streamed = read_kv_v1(text.as_bytes()).unwrap().into_history();
        let from_memory = read_kv_v1_bytes(text.as_bytes()).unwrap().into_history();
        assert_eq!(from_memory.txns, streamed.txns);
        let bad = format!("{text}{{\"id\":3,\"session\":1,\"ops\":[{{\"f\":\"q\"}}]}}\n");
        assert_eq!(
            read_kv_v1_bytes(bad.as_bytes()).unwrap_err().to_string(),
            read_kv_v1(bad.as_bytes()).unwrap_err().to_string()
        );
    }

    fn general(text: &str) -> String {
        let h = crate::v1::read_history(text.as_bytes()).unwrap();
        let mut out = Vec::new();
        crate::v1::write_history(&h, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn fast(text: &str) -> String {
        let h = read_kv_v1(text.as_bytes()).unwrap().into_history();
        let mut out = Vec::new();
        crate::v1::write_history(&h, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn agrees_with_the_general_reader() {
        let text = r#"{"format":"isocert-history","version":1,"initial":[{"key":1,"value":0},{"key":"s","value":"a"}]}

{"id":1,"session":"a","start_ts":{"p":"10","l":2},"commit_ts":"11.0000000003","ops":[{"f":"r","key":1,"value":0},{"f":"w","key":"s","value":"b\n\u00e9"},{"f":"append","key":7,"value":1.5}],"meta":{"xid":5}}
{"id":"1","session":2,"status":"aborted","ops":[{"f":"r","key":7,"value":[1.5,"x",true,null]},{"f":"w","key":1,"value":null}]}
{"id":3,"session":2,"status":"unknown","start_ts":null,"commit_ts":12,"ops":[]}"#;
        // `meta` is adapter data that checkers ignore: the fast reader skips it.
        assert_eq!(fast(text), general(&text.replace(r#","meta":{"xid":5}"#, "")));
    }

    #[test]
    fn errors_name_line_and_field() {
        let cases = [
            (
                "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1,\"value\":2}]}\n{\"id\":1,\"session\":1,\"ops\":[]}",
                "line 2: id: transaction id 1 appears twice",
            ),
            (
                "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"r\",\"key\":1.5,\"value\":2}]}",
                "line 1: ops[0].key: expected an integer or a string, found a float",
            ),
            ("\n{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"x\",\"key\":1,\"value\":2}]}", "line 2: ops[0].f: unknown operation"),
            ("{\"id\":1,\"session\":1,\"ops\":[], \"bogus\":1}", "line 1: unknown field `bogus`"),
            (
                "{\"id\":1,\"session\":1,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":[1]}]}",
                "line 1: ops[0].value: a write installs",
            ),
            ("{\"id\":1,\"session\":1,\"start_ts\":-1,\"ops\":[]}", "line 1: start_ts: timestamp"),
            ("{\"id\":1,\"session\":1,\"ops\":[]} {\"id\":2,\"session\":1,\"ops\":[]}", "line 1: a line holds more than one"),
            ("{\"id\":1,\"session\":1,\n\"ops\":[]}", "line 1: a transaction must be on one line"),
            ("{\"id\":1,\"session\":1,\"ops\":[", "line 1: unexpected end of input"),
        ];
        for (text, want) in cases {
            let err = read_kv_v1(text.as_bytes()).err().unwrap().to_string();
            assert!(err.starts_with(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn predicate_operations_ask_for_the_general_reader() {
        let text = r#"{"id":1,"session":1,"ops":[{"f":"select","table":"t","where":"x > 1","rows":[]}]}"#;
        let err = read_kv_v1(text.as_bytes()).err().unwrap();
        assert!(matches!(err, FormatError::Unsupported { .. }), "{err}");
    }
}
