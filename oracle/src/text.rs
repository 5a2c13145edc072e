//! Text conversions with the database's input and output rules: PostgreSQL's `int8in`,
//! `float8in`, `numeric_in`, `boolin`, `float8out`, and MySQL's string-to-number conversion.

use crate::numeric::Decimal;
use crate::ops::MysqlNum;
use crate::value::{EvalError, V};

fn invalid(type_name: &str, text: &str) -> EvalError {
    EvalError::new(format!("invalid input syntax for type {type_name}: \"{text}\""))
}

/// PostgreSQL integer input: optional whitespace and sign, decimal digits.
pub(crate) fn parse_int(text: &str, type_name: &str) -> Result<i64, EvalError> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(type_name, text));
    }
    let out_of_range = || EvalError::new(format!("value \"{text}\" is out of range for type {type_name}"));
    let v = t.parse::<i64>().map_err(|_| out_of_range())?;
    if type_name == "integer" && i32::try_from(v).is_err() {
        return Err(out_of_range());
    }
    Ok(v)
}

/// PostgreSQL double precision input (`NaN`, `Infinity`, decimal and exponent forms).
pub(crate) fn parse_float(text: &str) -> Result<f64, EvalError> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let v: f64 = t.parse().map_err(|_| invalid("double precision", text))?;
    let lower = t.to_ascii_lowercase();
    let out_of_range = v.is_infinite() && !lower.contains("inf")
        || v == 0.0
            && lower.split(['e']).next().is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
    if out_of_range {
        return Err(EvalError::new(format!("\"{text}\" is out of range for type double precision")));
    }
    Ok(v)
}

/// PostgreSQL numeric input (decimal and exponent forms, `NaN`, `Infinity`).
pub(crate) fn parse_numeric(text: &str) -> Result<Decimal, EvalError> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    Decimal::parse(t).ok_or_else(|| invalid("numeric", text))
}

/// PostgreSQL boolean input: unique prefixes of true/false/yes/no, on/off, 1/0.
pub(crate) fn parse_bool(text: &str) -> Result<bool, EvalError> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace()).to_ascii_lowercase();
    let prefix_of = |word: &str| !t.is_empty() && word.starts_with(t.as_str());
    if prefix_of("true") || prefix_of("yes") || t == "1" || (t.len() >= 2 && prefix_of("on")) {
        return Ok(true);
    }
    if prefix_of("false") || prefix_of("no") || t == "0" || (t.len() >= 2 && prefix_of("off")) {
        return Ok(false);
    }
    Err(invalid("boolean", text))
}

/// PostgreSQL's `float8out`: the shortest text that reads back exactly, fixed notation for
/// decimal exponents in [-4, 15), otherwise `d.ddde+XX`.
pub(crate) fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..15).contains(&exp) {
        let n = digits.len() as i32;
        if exp < 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= n {
            format!("{sign}{digits}{}", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{sign}{int}.{frac}")
        }
    } else {
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", exp.abs())
    }
}

/// MySQL's view of a value as a number: booleans are 0/1, text converts by its longest
/// numeric prefix (0 when there is none) as a double.
pub(crate) fn mysql_number(v: &V) -> MysqlNum {
    match v {
        V::Null => MysqlNum::Int(0),
        V::Bool(b) => MysqlNum::Int(i64::from(*b)),
        V::Int(i) => MysqlNum::Int(*i),
        V::Float(f) => MysqlNum::Float(*f),
        V::Num(n) => MysqlNum::Num(*n),
        V::Text(t) => MysqlNum::Float(mysql_text_to_f64(t)),
        V::Unknown(t) => MysqlNum::Float(mysql_text_to_f64(t)),
    }
}

fn mysql_text_to_f64(text: &str) -> f64 {
    let t = text.trim_start();
    let b = t.as_bytes();
    let mut end = 0;
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    if end < b.len() && (b[end] == b'+' || b[end] == b'-') {
        end += 1;
    }
    let int_end = digits(end);
    let mut stop = int_end;
    if stop < b.len() && b[stop] == b'.' {
        stop = digits(stop + 1);
    }
    if stop == end || (stop == end + 1 && int_end == end) {
        return 0.0;
    }
    end = stop;
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut e = end + 1;
        if e < b.len() && (b[e] == b'+' || b[e] == b'-') {
            e += 1;
        }
        let e_end = digits(e);
        if e_end > e {
            end = e_end;
        }
    }
    t[..end].parse().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_output_matches_postgres() {
        assert_eq!(format_float(1.5), "1.5");
        assert_eq!(format_float(1e15), "1e+15");
        assert_eq!(format_float(1e14), "100000000000000");
        assert_eq!(format_float(0.0001), "0.0001");
        assert_eq!(format_float(0.00001), "1e-05");
        assert_eq!(format_float(-2.5e-10), "-2.5e-10");
        assert_eq!(format_float(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(format_float(123.0), "123");
    }

    #[test]
    fn input_rules() {
        assert_eq!(parse_int(" 42 ", "bigint").unwrap(), 42);
        assert!(parse_int("4.2", "bigint").is_err());
        assert!(parse_int("3000000000", "integer").is_err());
        assert!(parse_bool("tr").unwrap());
        assert!(!parse_bool("OFF").unwrap());
        assert!(parse_bool("o").is_err());
        assert!(parse_float("1e400").is_err());
        assert!(parse_float("-Infinity").unwrap().is_infinite());
        assert_eq!(mysql_text_to_f64("12abc"), 12.0);
        assert_eq!(mysql_text_to_f64("abc"), 0.0);
        assert_eq!(mysql_text_to_f64(" -1.5e2x"), -150.0);
    }
}
