//! SQL scalars, rows and the interned [`Value`] an object version holds.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// One SQL scalar: what a kv value, a column of a row or a list element is.
///
/// Floats compare and hash by bit pattern (with `-0.0` folded into `0.0`) so that a
/// scalar can be interned; SQL comparison semantics live in the oracle, not here.
#[derive(Clone, Debug)]
pub enum Scalar {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// A double-precision float.
    Float(f64),
    /// Text.
    Text(Box<str>),
}

impl Scalar {
    /// Whether this is SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Scalar::Null)
    }

    fn float_bits(f: f64) -> u64 {
        if f == 0.0 {
            0
        } else {
            f.to_bits()
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Scalar::Null => 0,
            Scalar::Bool(_) => 1,
            Scalar::Int(_) => 2,
            Scalar::Float(_) => 3,
            Scalar::Text(_) => 4,
        }
    }

    /// The scalar as JSON, the way the v1 format writes it.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Scalar::Null => serde_json::Value::Null,
            Scalar::Bool(b) => (*b).into(),
            Scalar::Int(i) => (*i).into(),
            Scalar::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Scalar::Text(s) => serde_json::Value::String(s.to_string()),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Scalar::Null, Scalar::Null) => true,
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (Scalar::Float(a), Scalar::Float(b)) => Self::float_bits(*a) == Self::float_bits(*b),
            (Scalar::Text(a), Scalar::Text(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Scalar::Null => {}
            Scalar::Bool(b) => b.hash(state),
            Scalar::Int(i) => i.hash(state),
            Scalar::Float(f) => Self::float_bits(*f).hash(state),
            Scalar::Text(s) => s.hash(state),
        }
    }
}

impl PartialOrd for Scalar {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A total order for sorting and indexing (NULL first, then by type, then by value);
/// not SQL's comparison, which the oracle implements.
impl Ord for Scalar {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Scalar::Bool(a), Scalar::Bool(b)) => a.cmp(b),
            (Scalar::Int(a), Scalar::Int(b)) => a.cmp(b),
            (Scalar::Float(a), Scalar::Float(b)) => a.total_cmp(b),
            (Scalar::Text(a), Scalar::Text(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
            Scalar::Text(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Scalar {
    fn from(i: i64) -> Self {
        Scalar::Int(i)
    }
}

impl From<&str> for Scalar {
    fn from(s: &str) -> Self {
        Scalar::Text(s.into())
    }
}

/// A row of a SQL table: one scalar per column, indexed by the table's [`ColId`](crate::ColId).
///
/// Columns the row does not mention are NULL; trailing NULLs are trimmed so that equal
/// rows intern to the same [`ValueId`](crate::ValueId).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Row(Box<[Scalar]>);

impl Row {
    /// A row from its columns in [`ColId`](crate::ColId) order.
    pub fn new(mut columns: Vec<Scalar>) -> Self {
        while columns.last().is_some_and(Scalar::is_null) {
            columns.pop();
        }
        Row(columns.into_boxed_slice())
    }

    /// The value of column `col` (NULL when the row does not have it).
    #[inline]
    pub fn get(&self, col: crate::ColId) -> &Scalar {
        const NULL: Scalar = Scalar::Null;
        self.0.get(col.index()).unwrap_or(&NULL)
    }

    /// The stored columns in [`ColId`](crate::ColId) order (trailing NULLs trimmed).
    pub fn columns(&self) -> &[Scalar] {
        &self.0
    }
}

/// What one object version holds; interned into a [`ValueId`](crate::ValueId).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// No row: the object is unborn or deleted (JSON `null`).
    Absent,
    /// A key-value store's value (table `kv`).
    Scalar(Scalar),
    /// A SQL table's row, primary-key columns included.
    Row(Row),
    /// A list-append object's list, oldest element first.
    List(Box<[Scalar]>),
}

impl Value {
    /// Whether the object is absent (unborn or deleted).
    pub fn is_absent(&self) -> bool {
        matches!(self, Value::Absent)
    }
}

/// The message every reader gives for a number that overflows a 64-bit float (`1e400`):
/// serde_json's `Value` and `Number::from_f64` would turn it into `null`, which in a write is
/// a delete, so a reader refuses it instead, as it refuses an integer beyond 64 bits.
pub(crate) fn out_of_float_range(number: impl fmt::Display) -> String {
    format!("number {number} is out of range for a 64-bit float; write it as a string")
}

/// Why the JSON number `text`, which a float parser read as `value`, must be refused: it
/// does not round-trip (the value read differs from the value written, as
/// `0.1000000000000000001` reads as `0.1`, `9007199254740993.0` as `9007199254740992`, `1e-400`
/// as `0`), so two different values written would compare equal. `None` when `value` is the
/// number written: its shortest form (`0.1`) or its exact binary expansion.
pub(crate) fn inexact_float(text: &str, value: f64) -> Option<String> {
    let written = Decimal::parse(text)?;
    // At most 15 significant digits in the normal range: always the shortest form.
    if written.digits.len() <= 15 && (-307..=308).contains(&written.point) {
        return None;
    }
    let shortest = format!("{value:e}");
    if Decimal::parse(&shortest).is_some_and(|d| d == written) {
        return None;
    }
    // Every f64's exact expansion has fewer than 800 significant digits.
    if Decimal::parse(&format!("{value:.800e}")).is_some_and(|d| d == written) {
        return None;
    }
    Some(format!(
        "number {text} does not round-trip through a 64-bit float (it would read as {}); write it as a string",
        shortest_plain(value)
    ))
}

/// A float as a short decimal for messages (`0.1`, `9007199254740992.0`, `0.0`).
fn shortest_plain(value: f64) -> String {
    let text = format!("{value:?}");
    if text.len() > 24 {
        format!("{value:e}")
    } else {
        text
    }
}

/// A decimal number's value as sign, significant digits (no leading or trailing zero) and
/// the position of the decimal point relative to the first of them.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    point: i64,
}

impl Decimal {
    /// Parses JSON's number grammar (`-12.5e-3`); `None` when `text` is not one.
    fn parse(text: &str) -> Option<Decimal> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, "0"),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
        let (exp_negative, exp_digits) = match exponent.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, exponent),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty()
            || exp_digits.is_empty()
            || !all_digits(int)
            || !all_digits(frac)
            || !all_digits(exp_digits)
        {
            return None;
        }
        let exp = exp_digits
            .bytes()
            .fold(0i64, |acc, b| acc.saturating_mul(10).saturating_add(i64::from(b - b'0')));
        let exp = if exp_negative { -exp } else { exp };
        let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
        let mut point = (int.len() as i64).saturating_add(exp);
        let leading = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..leading);
        point = point.saturating_sub(leading as i64);
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        if digits.is_empty() {
            // Zero: where its point is says nothing.
            point = 0;
        }
        Some(Decimal { negative, digits, point })
    }
}

#[cfg(test)]
mod float_tests {
    use super::inexact_float;

    fn check(text: &str) -> Option<String> {
        inexact_float(text, text.parse::<f64>().unwrap())
    }

    #[test]
    fn floats_that_round_trip_are_kept() {
        for text in [
            "0.1",
            "1.5",
            "-2.25e-3",
            "0.0",
            "-0.0",
            "1e22",
            "1.7976931348623157e308",
            "5e-324",
            "0.30000000000000004",
            "9007199254740992.0",
            "0.1000000000000000055511151231257827021181583404541015625",
            "100000000000000000000000000000.0",
        ] {
            assert_eq!(check(text), None, "{text}");
        }
    }

    #[test]
    fn floats_that_do_not_round_trip_are_refused() {
        for (text, read) in [
            ("0.1000000000000000001", "0.1"),
            ("9007199254740993.0", "9007199254740992.0"),
            ("1e-400", "0.0"),
            ("-1e-400", "-0.0"),
            ("123456789012345678.5", "1.2345678901234568e17"),
        ] {
            let message = check(text).unwrap_or_else(|| panic!("{text} was accepted"));
            assert!(message.contains(&format!("it would read as {read})")), "{message}");
            assert!(message.contains("write it as a string"), "{message}");
        }
    }
}

/// A number in JSON text that does not round-trip through a 64-bit float
/// ([`inexact_float`]): where it starts, the object field it is the value of (or is in,
/// for an array; `""` at the top level), and the message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InexactNumber {
    /// Byte offset of the number in the text.
    pub(crate) at: usize,
    /// The innermost object key the number is under.
    pub(crate) field: String,
    /// Why it is refused.
    pub(crate) message: String,
}

/// The first number with a fraction or an exponent in the JSON `text` that does not
/// round-trip through a 64-bit float. The readers parse JSON with serde_json, which keeps
/// only the float, so they look at the text first. Malformed text is left to the parser.
pub(crate) fn inexact_number_in_json(text: &[u8]) -> Option<InexactNumber> {
    // Each open object's last key, as a byte range of `text`: only the field of an inexact
    // number is ever made a string (a certificate has a key every few bytes).
    let mut keys: Vec<Option<(usize, usize)>> = Vec::new();
    let mut last_string: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                last_string = Some((start, i.min(text.len())));
                i += 1;
                continue;
            }
            b':' => {
                if let (Some(top), Some(range)) = (keys.last_mut(), last_string) {
                    *top = Some(range);
                }
            }
            b'{' => keys.push(None),
            b'}' => {
                keys.pop();
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len() && matches!(text[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    i += 1;
                }
                let token = std::str::from_utf8(&text[start..i]).unwrap_or("");
                if token.contains(['.', 'e', 'E']) {
                    if let Some(message) = token.parse::<f64>().ok().and_then(|v| {
                        if v.is_finite() {
                            inexact_float(token, v)
                        } else {
                            None
                        }
                    }) {
                        let field = keys
                            .iter()
                            .rev()
                            .find_map(|k| *k)
                            .map(|(s, e)| String::from_utf8_lossy(&text[s..e]).into_owned())
                            .unwrap_or_default();
                        return Some(InexactNumber { at: start, field, message });
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// [`inexact_number_in_json`] of a whole JSON document, as the error naming the number's
/// line and field.
pub(crate) fn refuse_inexact_numbers(text: &[u8]) -> Result<(), crate::FormatError> {
    match inexact_number_in_json(text) {
        Some(inexact) => {
            let line = 1 + text[..inexact.at].iter().filter(|&&b| b == b'\n').count();
            Err(crate::FormatError::invalid(line, inexact.field, inexact.message))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod scan_tests {
    use super::inexact_number_in_json;

    #[test]
    fn the_first_inexact_number_is_found_with_its_field() {
        let text = br#"{"id":1,"s":"0.1000000000000000001","ops":[{"f":"w","key":1,"value":0.5},{"f":"r","key":2,"value":0.1000000000000000001}]}"#;
        let found = inexact_number_in_json(text).expect("found");
        assert_eq!(found.field, "value");
        assert!(found.message.contains("0.1000000000000000001"), "{}", found.message);
        let row = br#"{"ops":[{"f":"w","table":"t","key":1,"value":{"v":[1e-400]}}]}"#;
        assert_eq!(inexact_number_in_json(row).expect("found").field, "v");
        for fine in [
            &br#"{"a":"1e-400","b":[0.1,2.5e3,-0.0,9007199254740993],"c\"":1}"#[..],
            b"{\"a\":\"\\\"1e-400\"}",
        ] {
            assert_eq!(inexact_number_in_json(fine), None, "{}", String::from_utf8_lossy(fine));
        }
    }
}
