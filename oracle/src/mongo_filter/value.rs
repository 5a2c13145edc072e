//! MongoDB values as a filter sees them, read from relaxed extended JSON, and MongoDB's
//! comparison order ("Comparison/Sort Order" in the MongoDB manual): MinKey < Null <
//! Numbers (int, long, double, decimal compared by value) < String < Object < Array <
//! BinData < ObjectId < Boolean < Date < Timestamp < Regex < MaxKey. Only the types the
//! history model and the filters need are represented; the others are refused by name.

use std::cmp::Ordering;

use isocert_history::Scalar;

/// An owned MongoDB value from a filter (or a test document).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MValue {
    /// BSON null.
    Null,
    /// BSON boolean.
    Bool(bool),
    /// A number of any BSON numeric type.
    Num(Num),
    /// A UTF-8 string (compared bytewise: the simple binary collation).
    Str(Box<str>),
    /// An embedded document, fields in order.
    Doc(Vec<(Box<str>, MValue)>),
    /// An array.
    Array(Vec<MValue>),
}

/// A BSON number. Comparison is by numeric value across the types.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Num {
    /// int32 or int64.
    Int(i64),
    /// double.
    Double(f64),
    /// decimal128, kept as its exact decimal value.
    Decimal(Dec),
}

/// An exact decimal: `NaN`, an infinity, or `±0.d1d2..dn × 10^exp` with no leading or
/// trailing zero digit (zero has no digits).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dec {
    /// Not a number.
    NaN,
    /// ±Infinity (`true`: negative).
    Inf(bool),
    /// A finite value.
    Finite {
        /// Sign (ignored for zero).
        negative: bool,
        /// Significant digits, 0..=9 each, no leading or trailing zero.
        digits: Vec<u8>,
        /// Decimal exponent of the point before the first digit.
        exp: i64,
    },
}

/// A borrowed view of a value, so that history scalars need no copy.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    Decimal(&'a Dec),
    Str(&'a str),
    Doc(&'a [(Box<str>, MValue)]),
    Array(&'a [MValue]),
}

impl MValue {
    /// The borrowed view.
    pub(crate) fn view(&self) -> Val<'_> {
        match self {
            MValue::Null => Val::Null,
            MValue::Bool(b) => Val::Bool(*b),
            MValue::Num(Num::Int(i)) => Val::Int(*i),
            MValue::Num(Num::Double(d)) => Val::Double(*d),
            MValue::Num(Num::Decimal(d)) => Val::Decimal(d),
            MValue::Str(s) => Val::Str(s),
            MValue::Doc(d) => Val::Doc(d),
            MValue::Array(a) => Val::Array(a),
        }
    }

    /// The history scalar this value is, if it is one (for bounds).
    pub(crate) fn to_scalar(&self) -> Option<Scalar> {
        match self {
            MValue::Null => Some(Scalar::Null),
            MValue::Bool(b) => Some(Scalar::Bool(*b)),
            MValue::Num(Num::Int(i)) => Some(Scalar::Int(*i)),
            MValue::Num(Num::Double(d)) if !d.is_nan() => Some(Scalar::Float(*d)),
            MValue::Str(s) => Some(Scalar::Text(s.clone())),
            _ => None,
        }
    }
}

impl<'a> Val<'a> {
    /// The view of a history scalar (`Null` for SQL NULL).
    pub(crate) fn of_scalar(s: &'a Scalar) -> Val<'a> {
        match s {
            Scalar::Null => Val::Null,
            Scalar::Bool(b) => Val::Bool(*b),
            Scalar::Int(i) => Val::Int(*i),
            Scalar::Float(f) => Val::Double(*f),
            Scalar::Text(t) => Val::Str(t),
        }
    }

    /// MongoDB's canonical type order (types in one bracket share a number).
    pub(crate) fn canonical(self) -> u8 {
        match self {
            Val::Null => 5,
            Val::Int(_) | Val::Double(_) | Val::Decimal(_) => 10,
            Val::Str(_) => 15,
            Val::Doc(_) => 20,
            Val::Array(_) => 25,
            Val::Bool(_) => 40,
        }
    }

    /// Whether this is a NaN of any numeric type.
    pub(crate) fn is_nan(self) -> bool {
        match self {
            Val::Double(d) => d.is_nan(),
            Val::Decimal(d) => matches!(d, Dec::NaN),
            _ => false,
        }
    }
}

/// MongoDB's total order on values (the sort order; equality is `Equal`): canonical type
/// first, then numbers by value (NaN below every other number, equal to itself), strings
/// bytewise, documents field by field (type, name, value), arrays element by element.
pub(crate) fn cmp_values(a: Val<'_>, b: Val<'_>) -> Ordering {
    let (ca, cb) = (a.canonical(), b.canonical());
    if ca != cb {
        return ca.cmp(&cb);
    }
    match (a, b) {
        (Val::Null, Val::Null) => Ordering::Equal,
        (Val::Bool(x), Val::Bool(y)) => x.cmp(&y),
        (Val::Str(x), Val::Str(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Val::Doc(x), Val::Doc(y)) => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                let o = vx
                    .view()
                    .canonical()
                    .cmp(&vy.view().canonical())
                    .then_with(|| kx.as_bytes().cmp(ky.as_bytes()))
                    .then_with(|| cmp_values(vx.view(), vy.view()));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Val::Array(x), Val::Array(y)) => {
            for (vx, vy) in x.iter().zip(y.iter()) {
                let o = cmp_values(vx.view(), vy.view());
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => cmp_numbers(a, b),
    }
}

/// Numeric comparison across int, double and decimal, exact; NaN sorts below all numbers.
fn cmp_numbers(a: Val<'_>, b: Val<'_>) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x.cmp(&y),
        (Val::Double(x), Val::Double(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Val::Int(x), Val::Double(y)) => cmp_int_double(x, y),
        (Val::Double(x), Val::Int(y)) => cmp_int_double(y, x).reverse(),
        _ => cmp_dec(&to_dec(a), &to_dec(b)),
    }
}

/// Exact comparison of an integer with a (non-NaN) double.
fn cmp_int_double(i: i64, d: f64) -> Ordering {
    // 2^63 is exactly representable; every double at or above it exceeds every i64.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        return Ordering::Less;
    }
    if d < -TWO_63 {
        return Ordering::Greater;
    }
    let t = d.trunc();
    // In range, so the truncated double converts exactly.
    let ti = t as i64;
    match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = d - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

fn to_dec(v: Val<'_>) -> Dec {
    match v {
        Val::Int(i) => parse_decimal(&i.to_string()).unwrap_or(Dec::NaN),
        Val::Double(d) if d.is_infinite() => Dec::Inf(d < 0.0),
        // Rust formats a double with a fixed precision exactly; 800 digits cover every double.
        Val::Double(d) => parse_decimal(&format!("{d:.800e}")).unwrap_or(Dec::NaN),
        Val::Decimal(d) => d.clone(),
        _ => Dec::NaN,
    }
}

/// Compares two non-NaN decimals by value.
fn cmp_dec(a: &Dec, b: &Dec) -> Ordering {
    // Rank: -inf < negative < zero < positive < +inf.
    fn rank(d: &Dec) -> i8 {
        match d {
            Dec::Inf(true) => -2,
            Dec::Inf(false) => 2,
            Dec::Finite { digits, .. } if digits.is_empty() => 0,
            Dec::Finite { negative: true, .. } => -1,
            Dec::Finite { .. } => 1,
            Dec::NaN => 0,
        }
    }
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb || ra.abs() != 1 {
        return ra.cmp(&rb);
    }
    let (Dec::Finite { digits: da, exp: ea, .. }, Dec::Finite { digits: db, exp: eb, .. }) = (a, b) else {
        return Ordering::Equal;
    };
    let magnitude = ea.cmp(eb).then_with(|| da.cmp(db));
    if ra < 0 {
        magnitude.reverse()
    } else {
        magnitude
    }
}

/// Parses a decimal string (`-12.5e3`, `Infinity`, `NaN`) into its exact value.
pub(crate) fn parse_decimal(s: &str) -> Option<Dec> {
    let t = s.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    match body {
        "Infinity" | "Inf" | "inf" | "infinity" => return Some(Dec::Inf(negative)),
        "NaN" | "nan" => return Some(Dec::NaN),
        _ => {}
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(p) => (&body[..p], body[p + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut digits = Vec::with_capacity(int_part.len() + frac_part.len());
    for c in int_part.bytes().chain(frac_part.bytes()) {
        if !c.is_ascii_digit() {
            return None;
        }
        digits.push(c - b'0');
    }
    let mut exp = int_part.len() as i64 + exponent;
    let lead = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..lead);
    exp -= lead as i64;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        exp = 0;
    }
    Some(Dec::Finite { negative, digits, exp })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> MValue {
        MValue::Num(Num::Decimal(parse_decimal(s).unwrap()))
    }

    #[test]
    fn numbers_compare_exactly_across_types() {
        let cases: Vec<(MValue, MValue, Ordering)> = vec![
            (MValue::Num(Num::Int(1)), MValue::Num(Num::Double(1.0)), Ordering::Equal),
            (MValue::Num(Num::Int(1)), dec("1.000"), Ordering::Equal),
            (MValue::Num(Num::Double(0.1)), dec("0.1"), Ordering::Greater),
            (MValue::Num(Num::Int(i64::MAX)), MValue::Num(Num::Double(2f64.powi(63))), Ordering::Less),
            (MValue::Num(Num::Int(-3)), MValue::Num(Num::Double(-2.5)), Ordering::Less),
            (dec("-0"), MValue::Num(Num::Int(0)), Ordering::Equal),
            (dec("1e3"), MValue::Num(Num::Int(1000)), Ordering::Equal),
            (dec("-Infinity"), MValue::Num(Num::Double(f64::MIN)), Ordering::Less),
            (MValue::Num(Num::Double(f64::NAN)), dec("-Infinity"), Ordering::Less),
            (dec("NaN"), MValue::Num(Num::Double(f64::NAN)), Ordering::Equal),
            (dec("-12.5"), dec("-12.25"), Ordering::Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(cmp_values(a.view(), b.view()), want, "{a:?} vs {b:?}");
            assert_eq!(cmp_values(b.view(), a.view()), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn decimal_strings_parse_or_are_refused() {
        assert_eq!(
            parse_decimal("0012.3400"),
            Some(Dec::Finite { negative: false, digits: vec![1, 2, 3, 4], exp: 2 })
        );
        assert_eq!(parse_decimal("1.2.3"), None);
        assert_eq!(parse_decimal("abc"), None);
        assert_eq!(parse_decimal("-Infinity"), Some(Dec::Inf(true)));
    }
}
