//! A small EDN reader and writer: the subset Jepsen histories use.
//!
//! Reads nil, booleans, integers (with an optional `N`), floats (with an optional `M`),
//! strings, characters, keywords, symbols, vectors, lists, maps, sets, tagged elements
//! (`#inst "..."`: the tag is kept) and discards (`#_ form`); commas are whitespace and `;`
//! starts a comment. Every form records the line it starts on, for error messages.

use std::fmt::Write as _;

use crate::FormatError;

/// One EDN value.
#[derive(Clone, Debug, PartialEq)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits 64 bits.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string (or a character literal).
    Str(String),
    /// A keyword, without its leading colon (`:isocert/txn` is `isocert/txn`).
    Keyword(String),
    /// A symbol.
    Symbol(String),
    /// A vector `[...]` or list `(...)`.
    Vector(Vec<Edn>),
    /// A map `{k v ...}`, in file order.
    Map(Vec<(Edn, Edn)>),
    /// A set `#{...}`.
    Set(Vec<Edn>),
    /// A tagged element `#tag form`.
    Tagged(String, Box<Edn>),
}

impl Edn {
    /// The value at keyword `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Edn> {
        match self {
            Edn::Map(entries) => {
                entries.iter().find(|(k, _)| matches!(k, Edn::Keyword(s) if s == key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// A short description of the value's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Edn::Nil => "nil",
            Edn::Bool(_) => "a boolean",
            Edn::Int(_) => "an integer",
            Edn::Float(_) => "a float",
            Edn::Str(_) => "a string",
            Edn::Keyword(_) => "a keyword",
            Edn::Symbol(_) => "a symbol",
            Edn::Vector(_) => "a vector",
            Edn::Map(_) => "a map",
            Edn::Set(_) => "a set",
            Edn::Tagged(..) => "a tagged element",
        }
    }

    /// Appends the EDN text of the value to `out`.
    pub fn write_to(&self, out: &mut String) {
        match self {
            Edn::Nil => out.push_str("nil"),
            Edn::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Edn::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Edn::Float(f) => {
                let _ = write!(out, "{f:?}");
            }
            Edn::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        '\r' => out.push_str("\\r"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Edn::Keyword(k) => {
                out.push(':');
                out.push_str(k);
            }
            Edn::Symbol(s) => out.push_str(s),
            Edn::Vector(items) => write_seq(out, "[", items, "]"),
            Edn::Set(items) => write_seq(out, "#{", items, "}"),
            Edn::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write_to(out);
                    out.push(' ');
                    v.write_to(out);
                }
                out.push('}');
            }
            Edn::Tagged(tag, form) => {
                out.push('#');
                out.push_str(tag);
                out.push(' ');
                form.write_to(out);
            }
        }
    }
}

fn write_seq(out: &mut String, open: &str, items: &[Edn], close: &str) {
    out.push_str(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        item.write_to(out);
    }
    out.push_str(close);
}

/// Reads top-level EDN forms one at a time from a text.
#[derive(Debug)]
pub struct EdnReader<'a> {
    source: &'a str,
    text: &'a [u8],
    pos: usize,
    line: usize,
    depth: usize,
}

/// Nesting deeper than this is refused (a Jepsen operation nests four or five levels).
const MAX_DEPTH: usize = 256;

impl<'a> EdnReader<'a> {
    /// A reader over `text`.
    pub fn new(text: &'a str) -> Self {
        EdnReader { source: text, text: text.as_bytes(), pos: 0, line: 1, depth: 0 }
    }

    /// The same reader, counting lines from `line` (for a text that is part of a file).
    pub fn starting_at_line(mut self, line: usize) -> Self {
        self.line = line;
        self
    }

    /// Whether the whole text has been consumed: after an error, the form was cut short by
    /// the end of the text rather than malformed.
    pub fn exhausted(&self) -> bool {
        self.pos >= self.text.len()
    }

    /// The next top-level form and the line it starts on, or `None` at the end.
    ///
    /// # Errors
    /// [`FormatError::Syntax`] naming the line of malformed EDN.
    pub fn next_form(&mut self) -> Result<Option<(usize, Edn)>, FormatError> {
        self.skip_space()?;
        if self.pos >= self.text.len() {
            return Ok(None);
        }
        let line = self.line;
        Ok(Some((line, self.form()?)))
    }

    fn error(&self, message: impl Into<String>) -> FormatError {
        FormatError::Syntax { line: self.line, message: message.into() }
    }

    fn skip_space(&mut self) -> Result<(), FormatError> {
        while let Some(&b) = self.text.get(self.pos) {
            match b {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b',' => self.pos += 1,
                b';' => {
                    while self.text.get(self.pos).is_some_and(|&b| b != b'\n') {
                        self.pos += 1;
                    }
                }
                b'#' if self.text.get(self.pos + 1) == Some(&b'_') => {
                    self.pos += 2;
                    self.nested(|r| r.form())?;
                }
                _ => break,
            }
        }
        Ok(())
    }

    fn form(&mut self) -> Result<Edn, FormatError> {
        self.skip_space()?;
        let Some(&b) = self.text.get(self.pos) else {
            return Err(self.error("input ends where a value was expected"));
        };
        match b {
            b'[' | b'(' => {
                self.pos += 1;
                Ok(Edn::Vector(self.seq(if b == b'[' { b']' } else { b')' })?))
            }
            b'{' => {
                self.pos += 1;
                self.map()
            }
            b'#' => {
                self.pos += 1;
                if self.text.get(self.pos) == Some(&b'{') {
                    self.pos += 1;
                    return Ok(Edn::Set(self.seq(b'}')?));
                }
                let tag = self.token();
                if tag.is_empty() {
                    return Err(self.error("'#' must start a set, a discard or a tag"));
                }
                let form = self.nested(|r| r.form())?;
                Ok(Edn::Tagged(tag.to_string(), Box::new(form)))
            }
            b'"' => self.string(),
            b'\\' => {
                self.pos += 1;
                let token = self.token();
                let c = match token {
                    "newline" => "\n".to_string(),
                    "space" => " ".to_string(),
                    "tab" => "\t".to_string(),
                    "return" => "\r".to_string(),
                    t if t.chars().count() == 1 => t.to_string(),
                    "" if self.pos < self.text.len() => {
                        let c = char::from(self.text[self.pos]);
                        self.pos += 1;
                        c.to_string()
                    }
                    t => return Err(self.error(format!("unknown character literal \\{t}"))),
                };
                Ok(Edn::Str(c))
            }
            b']' | b')' | b'}' => Err(self.error(format!("unexpected {:?}", char::from(b)))),
            b':' => {
                self.pos += 1;
                let name = self.token();
                if name.is_empty() {
                    return Err(self.error("empty keyword"));
                }
                Ok(Edn::Keyword(name.to_string()))
            }
            _ => {
                let token = self.token();
                if token.is_empty() {
                    return Err(self.error(format!("unexpected character {:?}", char::from(b))));
                }
                self.atom(token)
            }
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, FormatError>) -> Result<T, FormatError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    fn seq(&mut self, close: u8) -> Result<Vec<Edn>, FormatError> {
        self.nested(|r| {
            let mut items = Vec::new();
            loop {
                r.skip_space()?;
                match r.text.get(r.pos) {
                    None => {
                        return Err(r.error(format!("input ends before the closing {:?}", char::from(close))))
                    }
                    Some(&b) if b == close => {
                        r.pos += 1;
                        return Ok(items);
                    }
                    Some(_) => items.push(r.form()?),
                }
            }
        })
    }

    fn map(&mut self) -> Result<Edn, FormatError> {
        self.nested(|r| {
            let mut entries = Vec::new();
            loop {
                r.skip_space()?;
                match r.text.get(r.pos) {
                    None => return Err(r.error("input ends before the closing '}'")),
                    Some(b'}') => {
                        r.pos += 1;
                        return Ok(Edn::Map(entries));
                    }
                    Some(_) => {
                        let key = r.form()?;
                        r.skip_space()?;
                        if r.text.get(r.pos) == Some(&b'}') {
                            return Err(r.error("a map needs an even number of forms"));
                        }
                        entries.push((key, r.form()?));
                    }
                }
            }
        })
    }

    /// The bytes up to the next delimiter. The text is UTF-8 and delimiters are ASCII, so
    /// the slice is UTF-8 too; no allocation.
    fn token(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(&b) = self.text.get(self.pos) {
            if b.is_ascii_whitespace()
                || matches!(b, b',' | b'[' | b']' | b'(' | b')' | b'{' | b'}' | b'"' | b';')
            {
                break;
            }
            self.pos += 1;
        }
        self.source.get(start..self.pos).unwrap_or("")
    }

    fn atom(&self, token: &str) -> Result<Edn, FormatError> {
        match token {
            "nil" => return Ok(Edn::Nil),
            "true" => return Ok(Edn::Bool(true)),
            "false" => return Ok(Edn::Bool(false)),
            _ => {}
        }
        let first = token.as_bytes()[0];
        let numeric = first.is_ascii_digit()
            || ((first == b'-' || first == b'+') && token.as_bytes().get(1).is_some_and(u8::is_ascii_digit));
        if !numeric {
            return Ok(Edn::Symbol(token.to_string()));
        }
        let digits = token.strip_suffix('N').unwrap_or(token);
        if let Ok(i) = digits.parse::<i64>() {
            return Ok(Edn::Int(i));
        }
        if digits.bytes().skip(1).all(|b| b.is_ascii_digit()) {
            return Err(self.error(format!("integer {token} does not fit 64 bits")));
        }
        let float = token.strip_suffix('M').unwrap_or(token);
        match float.parse::<f64>() {
            Ok(f) if f.is_finite() => match crate::value::inexact_float(float, f) {
                None => Ok(Edn::Float(f)),
                Some(message) => Err(self.error(message)),
            },
            Ok(_) => Err(self.error(crate::value::out_of_float_range(token))),
            Err(_) => Err(self.error(format!("malformed number {token:?}"))),
        }
    }

    fn string(&mut self) -> Result<Edn, FormatError> {
        let start_line = self.line;
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            let Some(&b) = self.text.get(self.pos) else {
                return Err(FormatError::Syntax { line: start_line, message: "string is not closed".into() });
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\n' => {
                    self.line += 1;
                    bytes.push(b);
                }
                b'\\' => {
                    let Some(&e) = self.text.get(self.pos) else { continue };
                    self.pos += 1;
                    match e {
                        b'n' => bytes.push(b'\n'),
                        b't' => bytes.push(b'\t'),
                        b'r' => bytes.push(b'\r'),
                        b'"' | b'\\' => bytes.push(e),
                        b'u' => {
                            let hex = self
                                .text
                                .get(self.pos..self.pos + 4)
                                .and_then(|h| std::str::from_utf8(h).ok());
                            let c =
                                hex.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32);
                            let c = c.ok_or_else(|| self.error("malformed \\u escape"))?;
                            self.pos += 4;
                            let mut buf = [0; 4];
                            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        other => return Err(self.error(format!("unknown escape \\{}", char::from(other)))),
                    }
                }
                _ => bytes.push(b),
            }
        }
        String::from_utf8(bytes).map(Edn::Str).map_err(|_| self.error("string is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Vec<Edn> {
        let mut r = EdnReader::new(text);
        let mut out = Vec::new();
        while let Some((_, f)) = r.next_form().unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn reads_a_jepsen_operation() {
        let forms = read_all("{:type :ok, :f :txn, :value [[:append 5 1] [:r 5 [1 2]] [:r \"x\" nil]], :process 3, :index 7}\n");
        let op = &forms[0];
        assert_eq!(op.get("type"), Some(&Edn::Keyword("ok".into())));
        assert_eq!(op.get("process"), Some(&Edn::Int(3)));
        let Some(Edn::Vector(mops)) = op.get("value") else { panic!("value is not a vector") };
        assert_eq!(
            mops[1],
            Edn::Vector(vec![
                Edn::Keyword("r".into()),
                Edn::Int(5),
                Edn::Vector(vec![Edn::Int(1), Edn::Int(2)])
            ])
        );
        assert_eq!(mops[2], Edn::Vector(vec![Edn::Keyword("r".into()), Edn::Str("x".into()), Edn::Nil]));
    }

    #[test]
    fn skips_comments_discards_and_commas_and_counts_lines() {
        let mut r = EdnReader::new("; header\n#_ {:skip 1}\n\n{:a 1,, :b 2.5}\n#inst \"2020\" #{1 2}");
        let (line, form) = r.next_form().unwrap().unwrap();
        assert_eq!(line, 4);
        assert_eq!(form.get("b"), Some(&Edn::Float(2.5)));
        let (_, tagged) = r.next_form().unwrap().unwrap();
        assert_eq!(tagged, Edn::Tagged("inst".into(), Box::new(Edn::Str("2020".into()))));
        assert_eq!(r.next_form().unwrap().unwrap().1, Edn::Set(vec![Edn::Int(1), Edn::Int(2)]));
        assert!(r.next_form().unwrap().is_none());
    }

    #[test]
    fn malformed_input_names_the_line() {
        for (text, line) in
            [("{:a 1}\n{:b [1 2}", 2), ("\n\n\"open", 3), ("{:a}", 1), ("99999999999999999999", 1)]
        {
            let mut r = EdnReader::new(text);
            let err = loop {
                match r.next_form() {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("{text:?} was accepted"),
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, FormatError::Syntax { line: l, .. } if l == line), "{text:?}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for text in ["[".repeat(100_000), "#_".repeat(100_000), "#t ".repeat(100_000)] {
            let err = EdnReader::new(&text).next_form().unwrap_err();
            assert!(err.to_string().contains("nesting deeper"), "{err}");
        }
    }

    #[test]
    fn writes_what_it_reads() {
        let text = "{:type :invoke, :value [[:r \"a\\\"b\" nil] [:w 1 -2]], :isocert/txn 5}";
        let form = read_all(text).remove(0);
        let mut out = String::new();
        form.write_to(&mut out);
        assert_eq!(out, text);
    }
}
