//! SQL operators on run-time values: truth, comparison, arithmetic, functions, casts.
//!
//! Every function takes the history's [`Dialect`]: PostgreSQL is strict (a text operand of
//! `+` is an error, string literals take the type of the other operand), MySQL converts
//! implicitly (text to number for arithmetic and mixed comparisons, numbers as truth values).

use std::borrow::Cow;
use std::cmp::Ordering;

use isocert_history::Dialect;

use crate::ast::{ArithOp, CastTy, Func, Ty};
use crate::like::fold_char;
use crate::numeric::Decimal;
use crate::text::{format_float, mysql_number, parse_bool, parse_float, parse_int, parse_numeric};
use crate::value::{float_cmp, EvalError, EvalResult, V};

fn no_operator(op: &str, a: &V, b: &V) -> EvalError {
    EvalError::new(format!("operator does not exist: {} {op} {}", a.type_name(), b.type_name()))
}

/// The truth value of a condition: `None` is UNKNOWN.
pub(crate) fn truth(v: &V, d: Dialect, context: &str) -> Result<Option<bool>, EvalError> {
    match v {
        V::Null => Ok(None),
        V::Bool(b) => Ok(Some(*b)),
        V::Unknown(t) if d == Dialect::Postgres => parse_bool(t).map(Some),
        _ if d == Dialect::Mysql => match mysql_number(v) {
            MysqlNum::Int(i) => Ok(Some(i != 0)),
            MysqlNum::Num(n) => Ok(Some(!n.is_zero())),
            MysqlNum::Float(f) => Ok(Some(f != 0.0)),
        },
        _ => Err(EvalError::new(format!(
            "argument of {context} must be type boolean, not type {}",
            v.type_name()
        ))),
    }
}

/// A MySQL value seen as a number.
pub(crate) enum MysqlNum {
    Int(i64),
    Num(Decimal),
    Float(f64),
}

/// Coerces a PostgreSQL string literal to the type of `like`.
fn coerce_unknown<'a>(text: &'a str, like: &V) -> EvalResult<'a> {
    Ok(match like {
        V::Int(_) => V::Int(parse_int(text, "bigint")?),
        V::Float(_) => V::Float(parse_float(text)?),
        V::Num(_) => V::Num(parse_numeric(text)?),
        V::Bool(_) => V::Bool(parse_bool(text)?),
        _ => V::Text(Cow::Borrowed(text)),
    })
}

/// SQL comparison: `None` when either side is NULL.
pub(crate) fn compare(a: &V, b: &V, d: Dialect) -> Result<Option<Ordering>, EvalError> {
    if d == Dialect::Mysql {
        return compare_mysql(a, b);
    }
    Ok(Some(match (a, b) {
        (V::Null, _) | (_, V::Null) => return Ok(None),
        (V::Int(x), V::Int(y)) => x.cmp(y),
        (V::Text(x), V::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::Float(x), V::Float(y)) => float_cmp(*x, *y),
        (V::Int(x), V::Float(y)) => float_cmp(*x as f64, *y),
        (V::Float(x), V::Int(y)) => float_cmp(*x, *y as f64),
        (V::Num(x), V::Num(y)) => x.cmp(y),
        (V::Int(x), V::Num(y)) => Decimal::from_i64(*x).cmp(y),
        (V::Num(x), V::Int(y)) => x.cmp(&Decimal::from_i64(*y)),
        (V::Float(x), V::Num(y)) => float_cmp(*x, y.to_f64()),
        (V::Num(x), V::Float(y)) => float_cmp(x.to_f64(), *y),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        (V::Unknown(x), V::Unknown(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::Unknown(t), other) => return compare(&coerce_unknown(t, other)?, other, d),
        (other, V::Unknown(t)) => return compare(other, &coerce_unknown(t, other)?, d),
        _ => return Err(no_operator("=", a, b)),
    }))
}

/// Compares text case-insensitively (MySQL's default collation).
fn cmp_folded(a: &str, b: &str) -> Ordering {
    a.chars().map(fold_char).cmp(b.chars().map(fold_char))
}

fn compare_mysql(a: &V, b: &V) -> Result<Option<Ordering>, EvalError> {
    let text = |v: &V| match v {
        V::Text(t) => Some(t.as_ref().to_owned()),
        V::Unknown(t) => Some((*t).to_owned()),
        _ => None,
    };
    Ok(Some(match (a, b) {
        (V::Null, _) | (_, V::Null) => return Ok(None),
        (V::Text(_) | V::Unknown(_), V::Text(_) | V::Unknown(_)) => {
            let (x, y) = (text(a).unwrap_or_default(), text(b).unwrap_or_default());
            cmp_folded(&x, &y)
        }
        _ => match (mysql_number(a), mysql_number(b)) {
            (MysqlNum::Int(x), MysqlNum::Int(y)) => x.cmp(&y),
            (MysqlNum::Int(x), MysqlNum::Num(y)) => Decimal::from_i64(x).cmp(&y),
            (MysqlNum::Num(x), MysqlNum::Int(y)) => x.cmp(&Decimal::from_i64(y)),
            (MysqlNum::Num(x), MysqlNum::Num(y)) => x.cmp(&y),
            (x, y) => float_cmp(mysql_float(&x), mysql_float(&y)),
        },
    }))
}

fn mysql_float(n: &MysqlNum) -> f64 {
    match n {
        MysqlNum::Int(i) => *i as f64,
        MysqlNum::Num(d) => d.to_f64(),
        MysqlNum::Float(f) => *f,
    }
}

fn int_overflow(int4: bool) -> EvalError {
    EvalError::new(if int4 { "integer out of range" } else { "bigint out of range" })
}

fn check_int4(v: i64, int4: bool) -> Result<i64, EvalError> {
    if int4 && i32::try_from(v).is_err() {
        return Err(int_overflow(true));
    }
    Ok(v)
}

fn int_arith(op: ArithOp, x: i64, y: i64, int4: bool) -> Result<i64, EvalError> {
    let r = match op {
        ArithOp::Add => x.checked_add(y),
        ArithOp::Sub => x.checked_sub(y),
        ArithOp::Mul => x.checked_mul(y),
        ArithOp::Div | ArithOp::IntDiv => {
            if y == 0 {
                return Err(EvalError::new("division by zero"));
            }
            x.checked_div(y)
        }
        ArithOp::Mod => {
            if y == 0 {
                return Err(EvalError::new("division by zero"));
            }
            // PostgreSQL special-cases INT_MIN % -1 = 0.
            Some(x.checked_rem(y).unwrap_or(0))
        }
    };
    check_int4(r.ok_or_else(|| int_overflow(int4))?, int4)
}

fn float_arith(op: ArithOp, x: f64, y: f64) -> EvalResult<'static> {
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => {
            // PostgreSQL's float8div: NaN / 0 is NaN, anything else / 0 an error.
            if y == 0.0 && !x.is_nan() {
                return Err(EvalError::new("division by zero"));
            }
            x / y
        }
        ArithOp::Mod | ArithOp::IntDiv => {
            return Err(EvalError::new("operator does not exist: double precision % double precision"))
        }
    };
    if r.is_infinite() && !x.is_infinite() && !y.is_infinite() {
        return Err(EvalError::new("value out of range: overflow"));
    }
    let underflow = match op {
        ArithOp::Mul => r == 0.0 && x != 0.0 && y != 0.0,
        ArithOp::Div => r == 0.0 && x != 0.0 && !y.is_infinite(),
        _ => false,
    };
    if underflow {
        return Err(EvalError::new("value out of range: underflow"));
    }
    Ok(V::Float(r))
}

fn num_arith(op: ArithOp, x: Decimal, y: Decimal) -> EvalResult<'static> {
    Ok(V::Num(match op {
        ArithOp::Add => x.add(y)?,
        ArithOp::Sub => x.sub(y)?,
        ArithOp::Mul => x.mul(y)?,
        ArithOp::Div => x.div(y)?,
        ArithOp::Mod => x.rem(y)?,
        ArithOp::IntDiv => return Err(EvalError::new("DIV is not a PostgreSQL operator")),
    }))
}

/// Binary arithmetic; `int4` when both operands are statically 32-bit integers.
pub(crate) fn arith<'a>(op: ArithOp, a: V<'a>, b: V<'a>, int4: bool, d: Dialect) -> EvalResult<'a> {
    if d == Dialect::Mysql {
        return arith_mysql(op, &a, &b);
    }
    match (&a, &b) {
        (V::Null, _) | (_, V::Null) => Ok(V::Null),
        (V::Int(x), V::Int(y)) => Ok(V::Int(int_arith(op, *x, *y, int4)?)),
        (V::Float(x), V::Float(y)) => float_arith(op, *x, *y),
        (V::Int(x), V::Float(y)) => float_arith(op, *x as f64, *y),
        (V::Float(x), V::Int(y)) => float_arith(op, *x, *y as f64),
        (V::Num(x), V::Num(y)) => num_arith(op, *x, *y),
        (V::Int(x), V::Num(y)) => num_arith(op, Decimal::from_i64(*x), *y),
        (V::Num(x), V::Int(y)) => num_arith(op, *x, Decimal::from_i64(*y)),
        (V::Float(x), V::Num(y)) => float_arith(op, *x, y.to_f64()),
        (V::Num(x), V::Float(y)) => float_arith(op, x.to_f64(), *y),
        (V::Unknown(t), other @ (V::Int(_) | V::Float(_) | V::Num(_))) => {
            arith(op, coerce_unknown(t, other)?, b.clone(), false, d)
        }
        (other @ (V::Int(_) | V::Float(_) | V::Num(_)), V::Unknown(t)) => {
            let coerced = coerce_unknown(t, other)?;
            arith(op, a.clone(), coerced, false, d)
        }
        _ => Err(no_operator(op.symbol(), &a, &b)),
    }
}

fn arith_mysql<'a>(op: ArithOp, a: &V, b: &V) -> EvalResult<'a> {
    if matches!(a, V::Null) || matches!(b, V::Null) {
        return Ok(V::Null);
    }
    let overflow = || EvalError::new("BIGINT value is out of range");
    let (x, y) = (mysql_number(a), mysql_number(b));
    let zero = match &y {
        MysqlNum::Int(i) => *i == 0,
        MysqlNum::Num(n) => n.is_zero(),
        MysqlNum::Float(f) => *f == 0.0,
    };
    if zero && matches!(op, ArithOp::Div | ArithOp::Mod | ArithOp::IntDiv) {
        return Ok(V::Null);
    }
    let as_dec = |n: &MysqlNum| match n {
        MysqlNum::Int(i) => Some(Decimal::from_i64(*i)),
        MysqlNum::Num(d) => Some(*d),
        MysqlNum::Float(_) => None,
    };
    match (&x, &y) {
        (MysqlNum::Int(i), MysqlNum::Int(j)) if op != ArithOp::Div => Ok(V::Int(match op {
            ArithOp::Add => i.checked_add(*j).ok_or_else(overflow)?,
            ArithOp::Sub => i.checked_sub(*j).ok_or_else(overflow)?,
            ArithOp::Mul => i.checked_mul(*j).ok_or_else(overflow)?,
            ArithOp::IntDiv => i.checked_div(*j).ok_or_else(overflow)?,
            _ => i.checked_rem(*j).unwrap_or(0),
        })),
        (MysqlNum::Float(_), _) | (_, MysqlNum::Float(_)) => {
            let (f, g) = (mysql_float(&x), mysql_float(&y));
            Ok(match op {
                ArithOp::Add => V::Float(f + g),
                ArithOp::Sub => V::Float(f - g),
                ArithOp::Mul => V::Float(f * g),
                ArithOp::Div => V::Float(f / g),
                ArithOp::Mod => V::Float(f % g),
                ArithOp::IntDiv => V::Int((f / g).trunc() as i64),
            })
        }
        _ => {
            let (Some(p), Some(q)) = (as_dec(&x), as_dec(&y)) else { return Ok(V::Null) };
            Ok(match op {
                ArithOp::Add => V::Num(p.add(q)?),
                ArithOp::Sub => V::Num(p.sub(q)?),
                ArithOp::Mul => V::Num(p.mul(q)?),
                ArithOp::Div => V::Num(p.div_mysql(q)?),
                ArithOp::Mod => V::Num(p.rem(q)?),
                ArithOp::IntDiv => V::Int(p.div_trunc_i64(q)?),
            })
        }
    }
}

/// Unary minus.
pub(crate) fn neg<'a>(v: V<'a>, int4: bool, d: Dialect) -> EvalResult<'a> {
    match v {
        V::Null => Ok(V::Null),
        V::Int(i) => Ok(V::Int(check_int4(i.checked_neg().ok_or_else(|| int_overflow(int4))?, int4)?)),
        V::Float(f) => Ok(V::Float(-f)),
        V::Num(n) => Ok(V::Num(n.neg())),
        _ if d == Dialect::Mysql => arith_mysql(ArithOp::Sub, &V::Int(0), &v),
        _ => Err(EvalError::new(format!("operator does not exist: - {}", v.type_name()))),
    }
}

/// A one-argument function.
pub(crate) fn func<'a>(f: Func, v: V<'a>, int4: bool, d: Dialect) -> EvalResult<'a> {
    if matches!(v, V::Null) {
        return Ok(V::Null);
    }
    match f {
        Func::Abs => match v {
            V::Int(i) => Ok(V::Int(check_int4(i.checked_abs().ok_or_else(|| int_overflow(int4))?, int4)?)),
            V::Float(x) => Ok(V::Float(x.abs())),
            V::Num(n) => Ok(V::Num(n.abs())),
            _ if d == Dialect::Mysql => match mysql_number(&v) {
                MysqlNum::Int(i) => Ok(V::Int(i.checked_abs().ok_or_else(|| int_overflow(false))?)),
                MysqlNum::Num(n) => Ok(V::Num(n.abs())),
                MysqlNum::Float(x) => Ok(V::Float(x.abs())),
            },
            _ => Err(EvalError::new(format!("function abs({}) does not exist", v.type_name()))),
        },
        Func::Lower | Func::Upper | Func::CharLength | Func::OctetLength => {
            let text: Cow<'a, str> = match v {
                V::Text(t) => t,
                V::Unknown(t) => Cow::Borrowed(t),
                other if d == Dialect::Mysql => Cow::Owned(to_text(&other)),
                other => {
                    return Err(EvalError::new(format!(
                        "function {f:?}({}) does not exist",
                        other.type_name()
                    )))
                }
            };
            Ok(match (f, d) {
                (Func::Lower, Dialect::Postgres) => V::Text(Cow::Owned(text.to_ascii_lowercase())),
                (Func::Upper, Dialect::Postgres) => V::Text(Cow::Owned(text.to_ascii_uppercase())),
                (Func::Lower, _) => V::Text(Cow::Owned(text.to_lowercase())),
                (Func::Upper, _) => V::Text(Cow::Owned(text.to_uppercase())),
                (Func::CharLength, _) => V::Int(text.chars().count() as i64),
                (_, _) => V::Int(text.len() as i64),
            })
        }
    }
}

/// The text form of a value (the cast to text).
pub(crate) fn to_text(v: &V) -> String {
    match v {
        V::Null => String::new(),
        V::Bool(b) => if *b { "true" } else { "false" }.to_owned(),
        V::Int(i) => i.to_string(),
        V::Float(f) => format_float(*f),
        V::Num(n) => n.to_string(),
        V::Text(t) => t.to_string(),
        V::Unknown(t) => (*t).to_owned(),
    }
}

fn float_to_int(f: f64, int4: bool) -> Result<i64, EvalError> {
    let r = f.round_ties_even();
    let (lo, hi) =
        if int4 { (i32::MIN as f64, -(i32::MIN as f64)) } else { (i64::MIN as f64, -(i64::MIN as f64)) };
    if r.is_nan() || r < lo || r >= hi {
        return Err(int_overflow(int4));
    }
    Ok(r as i64)
}

fn cannot_cast(v: &V, to: &str) -> EvalError {
    EvalError::new(format!("cannot cast type {} to {to}", v.type_name()))
}

/// A cast; `from_int4` when the operand is statically a 32-bit integer.
pub(crate) fn cast<'a>(v: V<'a>, to: CastTy, from_int4: bool, d: Dialect) -> EvalResult<'a> {
    if d == Dialect::Mysql {
        return cast_mysql(v, to);
    }
    let int4 = to == CastTy::Int4;
    let type_name = if int4 { "integer" } else { "bigint" };
    Ok(match (to, v) {
        (_, V::Null) => V::Null,
        (CastTy::Int4 | CastTy::Int8, V::Int(i)) => V::Int(check_int4(i, int4)?),
        (CastTy::Int4 | CastTy::Int8, V::Float(f)) => V::Int(float_to_int(f, int4)?),
        (CastTy::Int4 | CastTy::Int8, V::Num(n)) => {
            V::Int(check_int4(n.round_to_i64().map_err(|_| int_overflow(int4))?, int4)?)
        }
        (CastTy::Int4 | CastTy::Int8, V::Text(t)) => V::Int(parse_int(&t, type_name)?),
        (CastTy::Int4 | CastTy::Int8, V::Unknown(t)) => V::Int(parse_int(t, type_name)?),
        (CastTy::Int4, V::Bool(b)) => V::Int(i64::from(b)),
        (CastTy::Float, V::Int(i)) => V::Float(i as f64),
        (CastTy::Float, V::Float(f)) => V::Float(f),
        (CastTy::Float, V::Num(n)) => V::Float(n.to_f64()),
        (CastTy::Float, V::Text(t)) => V::Float(parse_float(&t)?),
        (CastTy::Float, V::Unknown(t)) => V::Float(parse_float(t)?),
        (CastTy::Numeric, V::Int(i)) => V::Num(Decimal::from_i64(i)),
        (CastTy::Numeric, V::Float(f)) => V::Num(Decimal::from_f64(f).ok_or_else(|| {
            EvalError::new(format!("cannot convert {} to numeric in the interpreter", format_float(f)))
        })?),
        (CastTy::Numeric, V::Num(n)) => V::Num(n),
        (CastTy::Numeric, V::Text(t)) => V::Num(parse_numeric(&t)?),
        (CastTy::Numeric, V::Unknown(t)) => V::Num(parse_numeric(t)?),
        (CastTy::Bool, V::Bool(b)) => V::Bool(b),
        (CastTy::Bool, V::Int(i)) if from_int4 => V::Bool(i != 0),
        (CastTy::Bool, V::Text(t)) => V::Bool(parse_bool(&t)?),
        (CastTy::Bool, V::Unknown(t)) => V::Bool(parse_bool(t)?),
        (CastTy::Text, V::Text(t)) => V::Text(t),
        (CastTy::Text, V::Unknown(t)) => V::Text(Cow::Borrowed(t)),
        (CastTy::Text, other) => V::Text(Cow::Owned(to_text(&other))),
        (to, other) => {
            let name = match to {
                CastTy::Int4 => "integer",
                CastTy::Int8 => "bigint",
                CastTy::Bool => "boolean",
                CastTy::Float => "double precision",
                CastTy::Numeric => "numeric",
                CastTy::Text => "text",
            };
            return Err(cannot_cast(&other, name));
        }
    })
}

fn cast_mysql(v: V<'_>, to: CastTy) -> EvalResult<'_> {
    if matches!(v, V::Null) {
        return Ok(V::Null);
    }
    Ok(match to {
        CastTy::Text => V::Text(Cow::Owned(to_text(&v))),
        CastTy::Int4 | CastTy::Int8 | CastTy::Bool => match mysql_number(&v) {
            MysqlNum::Int(i) => V::Int(i),
            MysqlNum::Num(n) => V::Int(n.round_to_i64()?),
            MysqlNum::Float(f) => V::Int(float_to_int(f, false)?),
        },
        CastTy::Float => V::Float(match mysql_number(&v) {
            MysqlNum::Int(i) => i as f64,
            MysqlNum::Num(n) => n.to_f64(),
            MysqlNum::Float(f) => f,
        }),
        CastTy::Numeric => match mysql_number(&v) {
            MysqlNum::Int(i) => V::Num(Decimal::from_i64(i)),
            MysqlNum::Num(n) => V::Num(n),
            MysqlNum::Float(f) => V::Num(Decimal::from_f64(f).unwrap_or(Decimal::from_i64(0))),
        },
    })
}

/// Promotes a numeric result to the common type `ty` of a CASE or COALESCE.
pub(crate) fn promote(v: V<'_>, ty: Ty) -> V<'_> {
    match (v, ty) {
        (V::Int(i), Ty::Num) => V::Num(Decimal::from_i64(i)),
        (V::Int(i), Ty::Float) => V::Float(i as f64),
        (V::Num(n), Ty::Float) => V::Float(n.to_f64()),
        (v, _) => v,
    }
}
