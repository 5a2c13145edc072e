//! Exact decimals with PostgreSQL `numeric` semantics, within 38 significant digits.
//!
//! PostgreSQL types a literal such as `1.5` as `numeric` and does exact arithmetic on it;
//! doing that in floating point would give wrong answers (`3 * 0.1 = 0.3` is true in SQL).
//! A [`Decimal`] is an `i128` mantissa and a display scale (digits after the point), which
//! covers every value a predicate in a test history realistically holds; a result that does
//! not fit is a run-time error naming the limit, never a rounded answer. PostgreSQL's special
//! values `NaN`, `Infinity` and `-Infinity` are kept beside, with its rules (NaN equals NaN
//! and sorts above Infinity; `Infinity - Infinity` is NaN; `Infinity / 0` is an error).

use std::cmp::Ordering;
use std::fmt;

use crate::value::EvalError;

/// The largest display scale a [`Decimal`] keeps (10^38 still fits in an `i128`).
const MAX_SCALE: u32 = 38;

/// An exact decimal: `mantissa / 10^scale`, where `scale` is PostgreSQL's display scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    mantissa: i128,
    scale: u32,
    kind: Kind,
}

/// Whether a decimal is a finite number or one of PostgreSQL's special values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    NegInf,
    Finite,
    PosInf,
    NaN,
}

const fn special(kind: Kind) -> Decimal {
    Decimal { mantissa: 0, scale: 0, kind }
}

const NAN: Decimal = special(Kind::NaN);
const POS_INF: Decimal = special(Kind::PosInf);
const NEG_INF: Decimal = special(Kind::NegInf);

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn too_big() -> EvalError {
    EvalError::new("numeric value exceeds the interpreter's 38-digit range")
}

impl Decimal {
    /// The integer `i` with scale 0.
    pub(crate) fn from_i64(i: i64) -> Self {
        Decimal { mantissa: i128::from(i), scale: 0, kind: Kind::Finite }
    }

    /// Parses a SQL numeric literal (`12`, `1.50`, `.5`, `1e3`, `-2.5E-2`).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "nan" => return Some(NAN),
            "infinity" | "inf" | "+infinity" | "+inf" => return Some(POS_INF),
            "-infinity" | "-inf" => return Some(NEG_INF),
            _ => {}
        }
        let (neg, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (digits, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
            None => (t, 0),
        };
        let (int, frac) = match digits.find('.') {
            Some(i) => (&digits[..i], &digits[i + 1..]),
            None => (digits, ""),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut mantissa: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        let mut scale = i64::try_from(frac.len()).ok()? - i64::from(exp);
        if scale < 0 {
            mantissa = mantissa.checked_mul(pow10(u32::try_from(-scale).ok()?)?)?;
            scale = 0;
        }
        let scale = u32::try_from(scale).ok().filter(|s| *s <= MAX_SCALE)?;
        Some(Decimal { mantissa: if neg { -mantissa } else { mantissa }, scale, kind: Kind::Finite })
    }

    /// Whether the value is zero.
    pub(crate) fn is_zero(&self) -> bool {
        self.kind == Kind::Finite && self.mantissa == 0
    }

    fn is_finite(&self) -> bool {
        self.kind == Kind::Finite
    }

    /// -1, 0 or 1; infinities are ±1 (NaN is not asked).
    fn sign(&self) -> i128 {
        match self.kind {
            Kind::NegInf => -1,
            Kind::PosInf => 1,
            _ => self.mantissa.signum(),
        }
    }

    fn infinity(sign: i128) -> Self {
        if sign < 0 {
            NEG_INF
        } else {
            POS_INF
        }
    }

    /// The value scaled to `scale` digits (which must not be below the current scale).
    fn rescaled(self, scale: u32) -> Result<i128, EvalError> {
        pow10(scale - self.scale).and_then(|p| self.mantissa.checked_mul(p)).ok_or_else(too_big)
    }

    fn check(mantissa: i128, scale: u32) -> Result<Self, EvalError> {
        if scale > MAX_SCALE {
            return Err(too_big());
        }
        Ok(Decimal { mantissa, scale, kind: Kind::Finite })
    }

    /// Exact sum; the scale is the larger of the two.
    pub(crate) fn add(self, other: Self) -> Result<Self, EvalError> {
        match (self.kind, other.kind) {
            (Kind::NaN, _) | (_, Kind::NaN) => return Ok(NAN),
            (Kind::PosInf, Kind::NegInf) | (Kind::NegInf, Kind::PosInf) => return Ok(NAN),
            (Kind::PosInf | Kind::NegInf, _) => return Ok(self),
            (_, Kind::PosInf | Kind::NegInf) => return Ok(other),
            _ => {}
        }
        let s = self.scale.max(other.scale);
        let m = self.rescaled(s)?.checked_add(other.rescaled(s)?).ok_or_else(too_big)?;
        Self::check(m, s)
    }

    /// Exact difference; the scale is the larger of the two.
    pub(crate) fn sub(self, other: Self) -> Result<Self, EvalError> {
        self.add(other.neg())
    }

    /// Exact product; the scale is the sum of the two.
    pub(crate) fn mul(self, other: Self) -> Result<Self, EvalError> {
        if self.kind == Kind::NaN || other.kind == Kind::NaN {
            return Ok(NAN);
        }
        if !self.is_finite() || !other.is_finite() {
            let sign = self.sign() * other.sign();
            return Ok(if sign == 0 { NAN } else { Self::infinity(sign) });
        }
        let m = self.mantissa.checked_mul(other.mantissa).ok_or_else(too_big)?;
        Self::check(m, self.scale + other.scale)
    }

    /// Negation.
    pub(crate) fn neg(self) -> Self {
        match self.kind {
            Kind::PosInf => NEG_INF,
            Kind::NegInf => POS_INF,
            _ => Decimal { mantissa: -self.mantissa, ..self },
        }
    }

    /// Absolute value.
    pub(crate) fn abs(self) -> Self {
        match self.kind {
            Kind::NegInf => POS_INF,
            _ => Decimal { mantissa: self.mantissa.abs(), ..self },
        }
    }

    /// PostgreSQL's rules for `/` and `%` when an operand is special; `None` when both are finite.
    fn special_quotient(self, other: Self, remainder: bool) -> Option<Result<Self, EvalError>> {
        if self.is_finite() && other.is_finite() {
            return None;
        }
        if self.kind == Kind::NaN || other.kind == Kind::NaN {
            return Some(Ok(NAN));
        }
        if !self.is_finite() {
            if other.is_zero() {
                return Some(Err(EvalError::new("division by zero")));
            }
            if remainder || !other.is_finite() {
                return Some(Ok(NAN));
            }
            return Some(Ok(Self::infinity(self.sign() * other.sign())));
        }
        // A finite dividend over an infinite divisor.
        Some(Ok(if remainder { self } else { Decimal::from_i64(0) }))
    }

    /// PostgreSQL's normalized weight (base-10000 exponent) and first base-10000 digit.
    fn weight_and_first_digit(self) -> (i64, i128) {
        let m = self.mantissa.abs();
        if m == 0 {
            return (0, 0);
        }
        let ndigits = i64::from(m.ilog10()) + 1;
        let exp10 = ndigits - 1 - i64::from(self.scale);
        let weight = exp10.div_euclid(4);
        let shift = i64::from(self.scale) + 4 * weight;
        let first = if shift >= 0 {
            m / pow10(shift as u32).unwrap_or(i128::MAX)
        } else {
            m * pow10((-shift) as u32).unwrap_or(0)
        };
        (weight, first)
    }

    /// Quotient with PostgreSQL's result scale (at least 16 significant digits) and
    /// rounding (half away from zero).
    pub(crate) fn div(self, other: Self) -> Result<Self, EvalError> {
        if let Some(r) = self.special_quotient(other, false) {
            return r;
        }
        if other.is_zero() {
            return Err(EvalError::new("division by zero"));
        }
        let (w1, f1) = self.weight_and_first_digit();
        let (w2, f2) = other.weight_and_first_digit();
        let mut qweight = w1 - w2;
        if f1 <= f2 {
            qweight -= 1;
        }
        let rscale = (16 - qweight * 4).max(i64::from(self.scale)).max(i64::from(other.scale)).max(0);
        let rscale = u32::try_from(rscale).map_err(|_| too_big())?;
        self.div_rounded(other, rscale)
    }

    /// MySQL's decimal quotient: the dividend's scale plus `div_precision_increment` (4),
    /// rounded half away from zero.
    pub(crate) fn div_mysql(self, other: Self) -> Result<Self, EvalError> {
        if other.is_zero() {
            return Err(EvalError::new("division by zero"));
        }
        self.div_rounded(other, self.scale + 4)
    }

    /// The quotient truncated to an integer (MySQL `DIV`).
    pub(crate) fn div_trunc_i64(self, other: Self) -> Result<i64, EvalError> {
        if other.is_zero() {
            return Err(EvalError::new("division by zero"));
        }
        let s = self.scale.max(other.scale);
        let q = self.rescaled(s)? / other.rescaled(s)?;
        i64::try_from(q).map_err(|_| EvalError::new("BIGINT value is out of range"))
    }

    /// The quotient at `rscale` digits, rounded half away from zero.
    fn div_rounded(self, other: Self, rscale: u32) -> Result<Self, EvalError> {
        if rscale > MAX_SCALE {
            return Err(too_big());
        }
        // q = m1 * 10^(s2 + rscale - s1) / m2, rounded.
        let up = i64::from(other.scale) + i64::from(rscale) - i64::from(self.scale);
        let (num, den) = if up >= 0 {
            let p = pow10(up as u32).ok_or_else(too_big)?;
            (self.mantissa.checked_mul(p).ok_or_else(too_big)?, other.mantissa)
        } else {
            let p = pow10((-up) as u32).ok_or_else(too_big)?;
            (self.mantissa, other.mantissa.checked_mul(p).ok_or_else(too_big)?)
        };
        let mut q = num / den;
        let r = num % den;
        if r != 0 && r.unsigned_abs() >= den.unsigned_abs() - r.unsigned_abs() {
            q += if (num < 0) == (den < 0) { 1 } else { -1 };
        }
        Self::check(q, rscale)
    }

    /// Remainder of truncated division, with the sign of the dividend; the scale is the
    /// larger of the two.
    pub(crate) fn rem(self, other: Self) -> Result<Self, EvalError> {
        if let Some(r) = self.special_quotient(other, true) {
            return r;
        }
        if other.is_zero() {
            return Err(EvalError::new("division by zero"));
        }
        let s = self.scale.max(other.scale);
        let m = self.rescaled(s)? % other.rescaled(s)?;
        Self::check(m, s)
    }

    /// Rounds to an integer, half away from zero (the numeric-to-integer cast).
    pub(crate) fn round_to_i64(self) -> Result<i64, EvalError> {
        match self.kind {
            Kind::NaN => return Err(EvalError::new("cannot convert NaN to bigint")),
            Kind::PosInf | Kind::NegInf => return Err(EvalError::new("cannot convert infinity to bigint")),
            Kind::Finite => {}
        }
        let p = pow10(self.scale).ok_or_else(too_big)?;
        let mut q = self.mantissa / p;
        let r = self.mantissa % p;
        if r.unsigned_abs() * 2 >= p.unsigned_abs() && r != 0 {
            q += self.mantissa.signum();
        }
        i64::try_from(q).map_err(|_| EvalError::new("bigint out of range"))
    }

    /// The nearest double (correctly rounded).
    pub(crate) fn to_f64(self) -> f64 {
        match self.kind {
            Kind::NaN => return f64::NAN,
            Kind::PosInf => return f64::INFINITY,
            Kind::NegInf => return f64::NEG_INFINITY,
            Kind::Finite => {}
        }
        const EXACT: i128 = 1 << 53;
        if self.mantissa.abs() <= EXACT && self.scale <= 22 {
            return self.mantissa as f64 / 10f64.powi(self.scale as i32);
        }
        self.to_string().parse().unwrap_or(f64::NAN)
    }

    /// The decimal of a double, rounded to 15 significant digits like PostgreSQL's
    /// `float8::numeric` cast (NaN and infinities map to their numeric counterparts);
    /// `None` beyond the interpreter's range.
    pub(crate) fn from_f64(f: f64) -> Option<Self> {
        if f.is_nan() {
            return Some(NAN);
        }
        if f.is_infinite() {
            return Some(Self::infinity(if f > 0.0 { 1 } else { -1 }));
        }
        Decimal::parse(&format!("{f:.14e}")).map(Decimal::trim_trailing_zeros)
    }

    fn trim_trailing_zeros(mut self) -> Self {
        while self.scale > 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.scale -= 1;
        }
        self
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        if !self.is_finite() || !other.is_finite() {
            return self.kind.cmp(&other.kind);
        }
        let s = self.scale.max(other.scale);
        match (self.rescaled(s), other.rescaled(s)) {
            (Ok(a), Ok(b)) => a.cmp(&b),
            _ => {
                // Compare integer parts, then the fractions at the common scale (< 10^38).
                let (pa, pb) = (pow10(self.scale).unwrap_or(1), pow10(other.scale).unwrap_or(1));
                let (ia, ib) = (self.mantissa / pa, other.mantissa / pb);
                ia.cmp(&ib).then_with(|| {
                    let fa = (self.mantissa % pa) * pow10(s - self.scale).unwrap_or(1);
                    let fb = (other.mantissa % pb) * pow10(s - other.scale).unwrap_or(1);
                    fa.cmp(&fb)
                })
            }
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::NaN => return f.write_str("NaN"),
            Kind::PosInf => return f.write_str("Infinity"),
            Kind::NegInf => return f.write_str("-Infinity"),
            Kind::Finite => {}
        }
        let digits = self.mantissa.unsigned_abs().to_string();
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let scale = self.scale as usize;
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints_with_display_scale() {
        assert_eq!(d("1.50").to_string(), "1.50");
        assert_eq!(d(".5").to_string(), "0.5");
        assert_eq!(d("-2.5e-2").to_string(), "-0.025");
        assert_eq!(d("1e3").to_string(), "1000");
        assert!(Decimal::parse("1.2.3").is_none());
        assert!(Decimal::parse("abc").is_none());
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(d("0.1").mul(Decimal::from_i64(3)).unwrap(), d("0.3"));
        assert_eq!(d("0.1").add(d("0.2")).unwrap().cmp(&d("0.3")), Ordering::Equal);
        assert_eq!(d("-7.5").rem(d("2")).unwrap().to_string(), "-1.5");
    }

    #[test]
    fn division_follows_postgres_scale() {
        // SELECT 1::numeric / 3 = 0.33333333333333333333 (20 digits).
        assert_eq!(
            Decimal::from_i64(1).div(Decimal::from_i64(3)).unwrap().to_string(),
            "0.33333333333333333333"
        );
        // SELECT 10::numeric / 4 = 2.5000000000000000.
        assert_eq!(
            Decimal::from_i64(10).div(Decimal::from_i64(4)).unwrap().to_string(),
            "2.5000000000000000"
        );
        // SELECT 2::numeric / 3 rounds half away from zero.
        assert_eq!(
            Decimal::from_i64(-2).div(Decimal::from_i64(3)).unwrap().to_string(),
            "-0.66666666666666666667"
        );
        assert!(d("1").div(d("0")).is_err());
    }

    #[test]
    fn special_values_follow_postgres() {
        let (nan, inf) = (d("NaN"), d("Infinity"));
        assert_eq!(inf.sub(inf).unwrap(), nan);
        assert_eq!(inf.mul(d("-2")).unwrap().to_string(), "-Infinity");
        assert_eq!(inf.mul(d("0")).unwrap(), nan);
        assert_eq!(d("5").div(inf).unwrap().to_string(), "0");
        assert!(inf.div(d("0")).is_err());
        assert_eq!(d("5").rem(inf).unwrap().to_string(), "5");
        assert_eq!(nan.cmp(&inf), Ordering::Greater);
        assert_eq!(d("-Infinity").cmp(&d("-1e30")), Ordering::Less);
        assert!(nan.round_to_i64().is_err());
    }

    #[test]
    fn converts_to_float_and_integer() {
        assert_eq!(d("0.1").to_f64(), 0.1);
        assert_eq!(d("2.5").round_to_i64().unwrap(), 3);
        assert_eq!(d("-2.5").round_to_i64().unwrap(), -3);
    }
}
