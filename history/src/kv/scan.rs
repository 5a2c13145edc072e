//! A hand-rolled JSON scanner over a byte window, for the fast kv/list readers.
//!
//! The window may end in the middle of a record: every read past its end fails with
//! [`Fail::Incomplete`] (unless the window is the end of the input), and the caller
//! refills and retries the record. Nothing is allocated except for strings with escapes
//! and for error messages.

use std::borrow::Cow;

/// Why a scan stopped.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The window ended before the record did: refill and retry.
    Incomplete,
    /// The input is wrong: `field` (innermost first, joined by the caller) and a message.
    Bad { path: Vec<Cow<'static, str>>, message: String },
    /// The record uses a construct the fast reader does not handle (the general reader does).
    Unsupported(String),
}

impl Fail {
    /// A bad-input failure with no field yet.
    pub(crate) fn bad(message: impl Into<String>) -> Fail {
        Fail::Bad { path: Vec::new(), message: message.into() }
    }

    /// Adds an enclosing field name to a bad-input failure.
    pub(crate) fn at(self, field: impl Into<Cow<'static, str>>) -> Fail {
        match self {
            Fail::Bad { mut path, message } => {
                path.push(field.into());
                Fail::Bad { path, message }
            }
            other => other,
        }
    }

    /// The dotted field path of a bad-input failure, outermost first.
    pub(crate) fn field_path(path: &[Cow<'static, str>]) -> String {
        let mut out = String::new();
        for part in path.iter().rev() {
            if !out.is_empty() && !part.starts_with('[') {
                out.push('.');
            }
            out.push_str(part);
        }
        out
    }
}

/// Result of a scan step.
pub(crate) type Scanned<T> = Result<T, Fail>;

/// A JSON number as the scanner saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Number {
    /// An integer that fits `i64`.
    Int(i64),
    /// A non-negative integer above `i64::MAX`.
    BigUnsigned(u64),
    /// Anything with a fraction or exponent.
    Float(f64),
}

impl std::fmt::Display for Number {
    /// The number as the input wrote it (give or take float formatting).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::BigUnsigned(u) => write!(f, "{u}"),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A cursor over a window of input bytes.
#[derive(Debug)]
pub(crate) struct Scan<'a> {
    bytes: &'a [u8],
    /// Current position in `bytes`.
    pub(crate) pos: usize,
    /// Newlines skipped so far (whitespace is the only place JSON allows them).
    pub(crate) newlines: usize,
    at_eof: bool,
}

impl<'a> Scan<'a> {
    /// The bytes from `start` to the cursor (a value just skipped, read whole elsewhere).
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.pos]
    }

    /// A scanner over `bytes`; `at_eof` says the window is the end of the input.
    pub(crate) fn new(bytes: &'a [u8], at_eof: bool) -> Self {
        Scan { bytes, pos: 0, newlines: 0, at_eof }
    }

    fn end(&self) -> Fail {
        if self.at_eof {
            Fail::bad("unexpected end of input")
        } else {
            Fail::Incomplete
        }
    }

    /// Skips whitespace, counting newlines; returns the next byte without consuming it.
    #[inline]
    pub(crate) fn peek(&mut self) -> Scanned<u8> {
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.newlines += 1;
                    self.pos += 1;
                }
                _ => return Ok(b),
            }
        }
        Err(self.end())
    }

    /// Skips whitespace; `None` at the end of the window (whether or not it is the input's end).
    pub(crate) fn peek_or_end(&mut self) -> Option<u8> {
        self.peek().ok()
    }

    /// Consumes `byte` (after whitespace) or fails naming what was expected.
    #[inline]
    pub(crate) fn expect(&mut self, byte: u8) -> Scanned<()> {
        let b = self.peek()?;
        if b == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(Fail::bad(format!("expected '{}', found {}", byte as char, describe(b))))
        }
    }

    /// After a value inside `{}` or `[]`: consumes `,` (true) or the closing byte (false).
    #[inline]
    pub(crate) fn next_or_close(&mut self, close: u8) -> Scanned<bool> {
        let b = self.peek()?;
        self.pos += 1;
        if b == b',' {
            Ok(true)
        } else if b == close {
            Ok(false)
        } else {
            Err(Fail::bad(format!("expected ',' or '{}', found {}", close as char, describe(b))))
        }
    }

    /// Opens an object; false if it is empty (`{}` consumed whole).
    #[inline]
    pub(crate) fn open_object(&mut self) -> Scanned<bool> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// Opens an array; false if it is empty.
    #[inline]
    pub(crate) fn open_array(&mut self) -> Scanned<bool> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.pos += 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// Reads an object key and the `:` after it, as bytes: keys are only compared with
    /// field names, so plain keys (no escapes) skip UTF-8 validation and copying.
    #[inline]
    pub(crate) fn key(&mut self) -> Scanned<Cow<'a, [u8]>> {
        self.expect(b'"')?;
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = start;
        loop {
            match bytes.get(i) {
                None => return Err(self.end()),
                Some(b'"') => break,
                Some(b'\\') => {
                    self.pos = start - 1;
                    let k = self.string()?;
                    self.expect(b':')?;
                    return Ok(Cow::Owned(k.into_owned().into_bytes()));
                }
                Some(&b) if b < 0x20 => return Err(Fail::bad("control character in a string")),
                Some(_) => i += 1,
            }
        }
        self.pos = i + 1;
        self.expect(b':')?;
        Ok(Cow::Borrowed(&bytes[start..i]))
    }

    /// Reads a string (borrowed when it has no escapes).
    pub(crate) fn string(&mut self) -> Scanned<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.pos;
        let bytes = self.bytes;
        let mut i = start;
        loop {
            match bytes.get(i) {
                None => return Err(self.end()),
                Some(b'"') => {
                    self.pos = i + 1;
                    return std::str::from_utf8(&bytes[start..i])
                        .map(Cow::Borrowed)
                        .map_err(|_| Fail::bad("string is not valid UTF-8"));
                }
                Some(b'\\') => break,
                Some(&b) if b < 0x20 => return Err(Fail::bad("control character in a string")),
                Some(_) => i += 1,
            }
        }
        let mut out: Vec<u8> = bytes[start..i].to_vec();
        loop {
            let Some(&b) = bytes.get(i) else { return Err(self.end()) };
            i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = bytes.get(i) else { return Err(self.end()) };
                    i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let (c, used) = self.unicode_escape(i)?;
                            i += used;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        other => return Err(Fail::bad(format!("invalid escape \\{}", other as char))),
                    }
                }
                b if b < 0x20 => return Err(Fail::bad("control character in a string")),
                b => out.push(b),
            }
        }
        self.pos = i;
        String::from_utf8(out).map(Cow::Owned).map_err(|_| Fail::bad("string is not valid UTF-8"))
    }

    /// Decodes the hex digits of a `\u` escape starting at `i` (a surrogate pair included);
    /// returns the character and the bytes used.
    fn unicode_escape(&self, i: usize) -> Scanned<(char, usize)> {
        let hex = |at: usize| -> Scanned<u32> {
            let Some(digits) = self.bytes.get(at..at + 4) else { return Err(self.end()) };
            let text = std::str::from_utf8(digits).map_err(|_| Fail::bad("invalid \\u escape"))?;
            u32::from_str_radix(text, 16).map_err(|_| Fail::bad("invalid \\u escape"))
        };
        let first = hex(i)?;
        if (0xD800..0xDC00).contains(&first) {
            if self.bytes.get(i + 4..i + 6).is_none() {
                return Err(self.end());
            }
            if &self.bytes[i + 4..i + 6] != b"\\u" {
                return Err(Fail::bad("unpaired surrogate in \\u escape"));
            }
            let second = hex(i + 6)?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(Fail::bad("unpaired surrogate in \\u escape"));
            }
            let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            return char::from_u32(c).map(|c| (c, 10)).ok_or_else(|| Fail::bad("invalid \\u escape"));
        }
        char::from_u32(first).map(|c| (c, 4)).ok_or_else(|| Fail::bad("unpaired surrogate in \\u escape"))
    }

    /// Reads a number.
    pub(crate) fn number(&mut self) -> Scanned<Number> {
        self.peek()?;
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = start;
        let negative = bytes[i] == b'-';
        if negative {
            i += 1;
        }
        let digits_start = i;
        let mut acc: u64 = 0;
        let mut overflow = false;
        while let Some(&b) = bytes.get(i) {
            if !b.is_ascii_digit() {
                break;
            }
            match acc.checked_mul(10).and_then(|a| a.checked_add(u64::from(b - b'0'))) {
                Some(a) => acc = a,
                None => overflow = true,
            }
            i += 1;
        }
        if i == digits_start {
            return match bytes.get(i) {
                None => Err(self.end()),
                Some(&b) => Err(Fail::bad(format!("expected a value, found {}", describe(b)))),
            };
        }
        if i == bytes.len() && !self.at_eof {
            return Err(Fail::Incomplete);
        }
        if bytes[digits_start] == b'0' && i - digits_start > 1 {
            return Err(Fail::bad("number with a leading zero"));
        }
        let is_float = matches!(bytes.get(i), Some(b'.' | b'e' | b'E'));
        let beyond_i64 = overflow || (negative && acc > i64::MAX as u64 + 1);
        if !is_float && beyond_i64 {
            // As a float it would lose its exact value (two such integers could compare
            // equal): never convert silently.
            let text = String::from_utf8_lossy(&bytes[start..i.min(start + 40)]);
            return Err(Fail::bad(format!(
                "integer {text} is outside the 64-bit range and would lose its exact value; write it as a string"
            )));
        }
        if !is_float {
            self.pos = i;
            return Ok(if negative && acc == 0 {
                // serde_json, and so the general reader, reads `-0` as the float -0.0.
                Number::Float(-0.0)
            } else if negative {
                Number::Int((acc as i128).wrapping_neg() as i64)
            } else if acc <= i64::MAX as u64 {
                Number::Int(acc as i64)
            } else {
                Number::BigUnsigned(acc)
            });
        }
        // JSON's grammar, as the general reader's serde_json: a fraction and an exponent
        // each need a digit (Rust's float parser alone would take `1.` and `1.e5`).
        let digits = |mut i: usize| -> usize {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut well_formed = true;
        if bytes.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            well_formed = end > i + 1;
            i = end;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let end = digits(i);
            well_formed &= end > i;
            i = end;
        }
        if i == bytes.len() && !self.at_eof {
            return Err(Fail::Incomplete);
        }
        let text = std::str::from_utf8(&bytes[start..i]).map_err(|_| Fail::bad("invalid number"))?;
        if !well_formed {
            return Err(Fail::bad(format!("invalid number {text:?}")));
        }
        let value: f64 = text.parse().map_err(|_| Fail::bad(format!("invalid number {text:?}")))?;
        if !value.is_finite() {
            return Err(Fail::bad(crate::value::out_of_float_range(text)));
        }
        if let Some(message) = crate::value::inexact_float(text, value) {
            return Err(Fail::bad(message));
        }
        self.pos = i;
        Ok(Number::Float(value))
    }

    /// Consumes the literal `word` (`true`, `false`, `null`).
    pub(crate) fn literal(&mut self, word: &'static [u8]) -> Scanned<()> {
        self.peek()?;
        match self.bytes.get(self.pos..self.pos + word.len()) {
            Some(w) if w == word => {
                self.pos += word.len();
                Ok(())
            }
            Some(_) => {
                Err(Fail::bad(format!("invalid literal (expected {})", String::from_utf8_lossy(word))))
            }
            None => {
                let rest = &self.bytes[self.pos..];
                if word.starts_with(rest) {
                    Err(self.end())
                } else {
                    Err(Fail::bad("invalid literal"))
                }
            }
        }
    }

    /// Matches the canonical compact spelling of an item operation whose key and value are
    /// integers (or the value null): `{"<kf>":"<kind>","<kk>":KEY,"<kv>":VALUE}` with
    /// `fields = (kf, kk, kv)` already quoted and followed by `:`, e.g. `"f":"`.
    /// Returns the kind byte (`r` or `w`), key and value (`None` for null) and consumes the operation;
    /// any other spelling (or the end of the window) returns `None` and consumes nothing,
    /// and the caller parses the operation the general way.
    #[inline]
    pub(crate) fn canonical_op(
        &mut self,
        kind_field: &[u8],
        key_field: &[u8],
        value_field: &[u8],
    ) -> Option<(u8, i64, Option<i64>)> {
        let b = self.bytes;
        let mut i = self.pos;
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        i = lit(b, i, kind_field)?;
        let kind = *b.get(i)?;
        if kind != b'r' && kind != b'w' {
            return None;
        }
        i += 1;
        i = lit(b, i, key_field)?;
        let (key, after) = int_at(b, i)?;
        i = lit(b, after, value_field)?;
        let value = if b.get(i..i + 4) == Some(b"null") {
            i += 4;
            None
        } else {
            let (v, after) = int_at(b, i)?;
            i = after;
            Some(v)
        };
        if b.get(i) != Some(&b'}') {
            return None;
        }
        self.pos = i + 1;
        Some((kind, key, value))
    }

    /// Skips one value of any kind (validating it) inside the line's object, refusing the
    /// nesting serde_json refuses (the general reader's limit, [`MAX_NESTING`] opening
    /// brackets a line, counting the line's own), so a line of 20,000 `[` is an error naming
    /// its line, not a stack overflow.
    pub(crate) fn skip_value(&mut self) -> Scanned<()> {
        self.skip_nested(1)
    }

    fn skip_nested(&mut self, depth: usize) -> Scanned<()> {
        let open = self.peek()?;
        if matches!(open, b'{' | b'[') && depth + 1 >= MAX_NESTING {
            return Err(Fail::bad(format!(
                "arrays and objects nested more than {} deep, the line's own object included \
                 (recursion limit exceeded)",
                MAX_NESTING - 1
            )));
        }
        match open {
            b'{' => {
                if self.open_object()? {
                    loop {
                        self.key()?;
                        self.skip_nested(depth + 1)?;
                        if !self.next_or_close(b'}')? {
                            break;
                        }
                    }
                }
                Ok(())
            }
            b'[' => {
                if self.open_array()? {
                    loop {
                        self.skip_nested(depth + 1)?;
                        if !self.next_or_close(b']')? {
                            break;
                        }
                    }
                }
                Ok(())
            }
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }
}

/// serde_json's recursion limit: a line whose arrays and objects nest this deep (its own
/// object included) is refused, by the fast and the general reader alike.
pub(crate) const MAX_NESTING: usize = 128;

/// The position after `word` if the bytes at `at` spell it.
#[inline]
fn lit(b: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    (b.get(at..at + word.len())? == word).then_some(at + word.len())
}

/// An integer (no leading zero, fits `i64`) at `at` followed by a byte that ends it
/// (`,` or `}`); its value and the position after it.
#[inline]
fn int_at(b: &[u8], at: usize) -> Option<(i64, usize)> {
    let mut i = at;
    let negative = b.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let start = i;
    let mut acc: i64 = 0;
    while let Some(&d) = b.get(i) {
        if !d.is_ascii_digit() {
            break;
        }
        acc = acc.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
        i += 1;
    }
    let len = i - start;
    // `-0` is the float -0.0 to serde_json (the general reader): the general path reads it.
    if len == 0
        || len > 1 && b[start] == b'0'
        || negative && acc == 0
        || !matches!(b.get(i), Some(b',' | b'}'))
    {
        return None;
    }
    Some((if negative { -acc } else { acc }, i))
}

/// A byte, for messages.
pub(crate) fn describe(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_strings_and_incomplete_windows() {
        let mut s = Scan::new(br#" -12 "a\"\u00e9\ud83d\ude00" 1.5e3 18446744073709551615 "#, true);
        assert_eq!(s.number().unwrap(), Number::Int(-12));
        assert_eq!(s.string().unwrap(), "a\"é😀");
        assert_eq!(s.number().unwrap(), Number::Float(1500.0));
        assert_eq!(s.number().unwrap(), Number::BigUnsigned(u64::MAX));
        assert!(matches!(Scan::new(b"123", false).number(), Err(Fail::Incomplete)));
        assert!(matches!(Scan::new(b"\"abc", false).string(), Err(Fail::Incomplete)));
        assert!(matches!(Scan::new(b"\"abc", true).string(), Err(Fail::Bad { .. })));
        assert!(matches!(Scan::new(b"nul", false).literal(b"null"), Err(Fail::Incomplete)));
        assert!(matches!(Scan::new(b"nux", false).literal(b"null"), Err(Fail::Bad { .. })));
        assert!(matches!(Scan::new(b"012", true).number(), Err(Fail::Bad { .. })));
    }

    #[test]
    fn canonical_operations_take_the_short_path_and_others_do_not() {
        let fields = (&b"\"f\":\""[..], &b"\",\"key\":"[..], &b",\"value\":"[..]);
        let mut s = Scan::new(br#"{"f":"w","key":-12,"value":7},{"f":"r","key":3,"value":null}"#, false);
        assert_eq!(s.canonical_op(fields.0, fields.1, fields.2), Some((b'w', -12, Some(7))));
        s.pos += 1;
        assert_eq!(s.canonical_op(fields.0, fields.1, fields.2), Some((b'r', 3, None)));
        for other in [
            &br#"{"f":"r","key":"x","value":1}"#[..],
            br#"{"f":"r","key":1,"value":1.5}"#,
            br#"{"f":"r","key":01,"value":1}"#,
            br#"{"key":1,"f":"r","value":1}"#,
            br#"{"f":"r","key":1,"value":99999999999999999999}"#,
            br#"{"f":"r","key":1,"val"#,
        ] {
            let mut s = Scan::new(other, false);
            assert_eq!(s.canonical_op(fields.0, fields.1, fields.2), None);
            assert_eq!(s.pos, 0);
        }
    }

    #[test]
    fn skips_nested_values_and_counts_newlines() {
        let mut s = Scan::new(b"{\"a\":[1,{\"b\":null}],\n\"c\":true}\n x", true);
        s.skip_value().unwrap();
        assert_eq!(s.peek().unwrap(), b'x');
        assert_eq!(s.newlines, 2);
    }

    /// Issue 30, item 1: `1e400` parsed to infinity, which became `null` (a delete).
    #[test]
    fn floats_beyond_the_64_bit_range_are_refused() {
        for text in [&b"1e400 "[..], b"-1.5e309 ", b"123456789e999 "] {
            let err = Scan::new(text, true).number().unwrap_err();
            assert!(
                matches!(&err, Fail::Bad { message, .. } if message.contains("out of range for a 64-bit float")),
                "{err:?}"
            );
        }
        assert_eq!(Scan::new(b"1e308 ", true).number().unwrap(), Number::Float(1e308));
    }

    /// Issue 30, item 6: skipping 20,000 nested arrays overflowed the stack; the limit is
    /// serde_json's (127 levels below the line's object).
    #[test]
    fn skipping_stops_at_the_general_readers_nesting_limit() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
        Scan::new(&nested(MAX_NESTING - 2), true).skip_value().unwrap();
        for n in [MAX_NESTING - 1, 20_000] {
            let err = Scan::new(&nested(n), true).skip_value().unwrap_err();
            assert!(matches!(&err, Fail::Bad { message, .. } if message.contains("recursion limit")), "{n}");
        }
        let line = format!("{{\"meta\":{}}}", String::from_utf8(nested(MAX_NESTING - 2)).unwrap());
        assert!(serde_json::from_str::<serde_json::Value>(&line).is_ok());
        let line = format!("{{\"meta\":{}}}", String::from_utf8(nested(MAX_NESTING - 1)).unwrap());
        assert!(serde_json::from_str::<serde_json::Value>(&line).is_err());
    }

    #[test]
    fn field_paths_join_outermost_first() {
        let f = Fail::bad("boom").at("v").at("[3]").at("ops");
        let Fail::Bad { path, .. } = f else { panic!() };
        assert_eq!(Fail::field_path(&path), "ops[3].v");
    }
}
