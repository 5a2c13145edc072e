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
