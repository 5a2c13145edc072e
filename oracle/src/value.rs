//! Run-time values of the interpreter and SQL comparison.

use std::borrow::Cow;
use std::cmp::Ordering;

use isocert_history::Scalar;

use crate::numeric::Decimal;

/// A value during evaluation: borrowed from the row or the compiled predicate where
/// possible, so evaluating a comparison allocates nothing.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V<'a> {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A bigint.
    Int(i64),
    /// A double precision float.
    Float(f64),
    /// An exact numeric (decimal literals and numeric arithmetic).
    Num(Decimal),
    /// Text.
    Text(Cow<'a, str>),
    /// A string literal whose type the context decides (PostgreSQL's `unknown`).
    Unknown(&'a str),
}

/// A SQL run-time error, in the database's words.
#[derive(Clone, Debug, PartialEq)]
// A thin pointer on purpose: `Result<Option<bool>, EvalError>` stays two words, returned in
// registers on the hot path.
#[allow(clippy::box_collection)]
pub(crate) struct EvalError(Box<String>);

impl EvalError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        EvalError(Box::new(message.into()))
    }

    /// The message. (Boxed so a `Result` of a condition stays two words wide.)
    pub(crate) fn into_message(self) -> String {
        *self.0
    }
}

/// The result of evaluating one node.
pub(crate) type EvalResult<'a> = Result<V<'a>, EvalError>;

impl<'a> V<'a> {
    /// Borrows a stored scalar.
    #[inline]
    pub(crate) fn from_scalar(s: &'a Scalar) -> Self {
        match s {
            Scalar::Null => V::Null,
            Scalar::Bool(b) => V::Bool(*b),
            Scalar::Int(i) => V::Int(*i),
            Scalar::Float(f) => V::Float(*f),
            Scalar::Text(t) => V::Text(Cow::Borrowed(t)),
        }
    }

    /// The SQL name of the value's type, for error messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            V::Null => "null",
            V::Bool(_) => "boolean",
            V::Int(_) => "bigint",
            V::Float(_) => "double precision",
            V::Num(_) => "numeric",
            V::Text(_) => "text",
            V::Unknown(_) => "unknown",
        }
    }

    /// Detaches the value from borrowed storage.
    pub(crate) fn into_owned(self) -> V<'static> {
        match self {
            V::Null => V::Null,
            V::Bool(b) => V::Bool(b),
            V::Int(i) => V::Int(i),
            V::Float(f) => V::Float(f),
            V::Num(n) => V::Num(n),
            V::Text(t) => V::Text(Cow::Owned(t.into_owned())),
            V::Unknown(t) => V::Text(Cow::Owned(t.to_owned())),
        }
    }
}

/// PostgreSQL's order of double precision values: NaN equals NaN and sorts above
/// every other value; `-0` equals `0`.
#[inline]
pub(crate) fn float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// The SQL order of two scalars in the PostgreSQL dialect: `None` when either is NULL or
/// when the types are not comparable (text against a number, a boolean against a number).
///
/// Integers and floats compare as double precision (PostgreSQL casts `bigint` to `float8`
/// for a mixed comparison), floats order NaN above everything, text compares by code point
/// (the C collation), `false < true`.
///
/// ```
/// use std::cmp::Ordering;
/// use isocert_history::Scalar;
/// use isocert_oracle::sql_cmp;
/// assert_eq!(sql_cmp(&Scalar::Int(2), &Scalar::Float(2.5)), Some(Ordering::Less));
/// assert_eq!(sql_cmp(&Scalar::Null, &Scalar::Int(1)), None);
/// assert_eq!(sql_cmp(&"B".into(), &"a".into()), Some(Ordering::Less));
/// ```
pub fn sql_cmp(a: &Scalar, b: &Scalar) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(y)),
        (Scalar::Int(x), Scalar::Float(y)) => Some(float_cmp(*x as f64, *y)),
        (Scalar::Float(x), Scalar::Int(y)) => Some(float_cmp(*x, *y as f64)),
        (Scalar::Float(x), Scalar::Float(y)) => Some(float_cmp(*x, *y)),
        (Scalar::Text(x), Scalar::Text(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}
