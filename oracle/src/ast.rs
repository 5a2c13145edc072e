//! The compiled form of a predicate: a small expression tree over column slots.
//!
//! Compilation resolves column names to [`ColId`]s, literals to typed constants, LIKE
//! patterns to matchers and operator typing to flags, so evaluation does no string lookup
//! and (outside text-producing functions) no allocation.

use isocert_history::ColId;

use crate::like::LikePattern;
use crate::value::V;

/// Where a column reference reads from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Column {
    /// A column of a SQL table's row.
    Row(ColId),
    /// The kv table's `key` column: the object's key.
    KvKey,
    /// The kv table's `value` column: the version's scalar.
    KvValue,
    /// A column no row of the table had when the predicate was compiled: resolved by name
    /// at evaluation (NULL while the table still lacks it).
    Unresolved(Box<str>),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// MySQL's `DIV`: integer division.
    IntDiv,
}

impl ArithOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
            ArithOp::IntDiv => "DIV",
        }
    }
}

/// A one-argument scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    Abs,
    Lower,
    Upper,
    /// Characters (PostgreSQL `length`, MySQL `char_length`).
    CharLength,
    /// Bytes (MySQL `length`, PostgreSQL `octet_length`).
    OctetLength,
}

/// A cast target type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CastTy {
    Int4,
    Int8,
    Float,
    Numeric,
    Text,
    Bool,
}

/// The static type of a compiled node, where the compiler can know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    /// Decided by the row (a column) or by the branch taken.
    Any,
    /// The NULL literal.
    Null,
    Bool,
    /// A 32-bit integer (PostgreSQL types small integer literals as `integer`).
    Int4,
    Int8,
    Float,
    Num,
    Text,
    /// A string literal whose type the context decides.
    Unknown,
}

impl Ty {
    /// Whether the type is a number.
    pub(crate) fn is_numeric(self) -> bool {
        matches!(self, Ty::Int4 | Ty::Int8 | Ty::Float | Ty::Num)
    }

    /// The rank of a numeric type in PostgreSQL's implicit promotion (int4 < int8 < numeric < float8).
    pub(crate) fn numeric_rank(self) -> Option<u8> {
        match self {
            Ty::Int4 => Some(0),
            Ty::Int8 => Some(1),
            Ty::Num => Some(2),
            Ty::Float => Some(3),
            _ => None,
        }
    }
}

impl Node {
    /// Whether the expression reads a column.
    pub(crate) fn reads_columns(&self) -> bool {
        match self {
            Node::Column(_) | Node::CmpColumn { .. } | Node::InColumn { .. } => true,
            Node::Const(_) | Node::Unknown(_) => false,
            Node::Not(e)
            | Node::IsNull { expr: e, .. }
            | Node::IsTruth { expr: e, .. }
            | Node::Like { expr: e, .. }
            | Node::Neg { expr: e, .. }
            | Node::Func { arg: e, .. }
            | Node::Cast { expr: e, .. } => e.reads_columns(),
            Node::And(args) | Node::Or(args) | Node::Coalesce { args, .. } => {
                args.iter().any(Node::reads_columns)
            }
            Node::Cmp(_, a, b) | Node::NullIf { left: a, right: b, .. } => {
                a.reads_columns() || b.reads_columns()
            }
            Node::Distinct { left: a, right: b, .. }
            | Node::Arith { left: a, right: b, .. }
            | Node::LikeDynamic { expr: a, pattern: b, .. } => a.reads_columns() || b.reads_columns(),
            Node::In { expr, array, chain, .. } => {
                expr.reads_columns() || array.iter().chain(chain.iter()).any(Node::reads_columns)
            }
            Node::Case { operand, arms, otherwise, .. } => {
                operand.as_ref().is_some_and(|o| o.reads_columns())
                    || arms.iter().any(|(w, t)| w.reads_columns() || t.reads_columns())
                    || otherwise.reads_columns()
            }
        }
    }
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    /// A typed constant.
    Const(V<'static>),
    /// A string literal whose type the context decides.
    Unknown(Box<str>),
    /// A column reference.
    Column(Column),
    /// NOT.
    Not(Box<Node>),
    /// AND over two or more arguments, left to right, short-circuiting on FALSE.
    And(Box<[Node]>),
    /// OR over two or more arguments, left to right, short-circuiting on TRUE.
    Or(Box<[Node]>),
    /// A comparison.
    Cmp(CmpOp, Box<Node>, Box<Node>),
    /// `IS [NOT] DISTINCT FROM`.
    Distinct { left: Box<Node>, right: Box<Node>, negated: bool },
    /// `column op constant` (either side order, normalized to the column on the left), made
    /// after folding so the common comparison reads the stored scalar without building a value.
    CmpColumn { op: CmpOp, column: Column, constant: V<'static> },
    /// `column [NOT] IN (constants)`: NULL items only make a miss UNKNOWN; `ints` holds the
    /// items again as plain integers when they all are, for a tight scan.
    InColumn {
        column: Column,
        items: Box<[V<'static>]>,
        ints: Option<Box<[i64]>>,
        has_null: bool,
        negated: bool,
    },
    /// `[NOT] IN (list)`, split the way PostgreSQL plans it: the items without column
    /// references (when there are two or more) form one array test (`= ANY`), evaluated
    /// first and whole; the other items follow as a short-circuiting chain of `=`
    /// (`<>` for NOT IN) comparisons, in list order.
    In { expr: Box<Node>, array: Box<[Node]>, chain: Box<[Node]>, negated: bool },
    /// `IS [NOT] NULL`.
    IsNull { expr: Box<Node>, negated: bool },
    /// `IS [NOT] TRUE | FALSE | UNKNOWN` (`truth` None is UNKNOWN).
    IsTruth { expr: Box<Node>, truth: Option<bool>, negated: bool },
    /// `[NOT] LIKE | ILIKE` with a constant pattern, compiled once.
    Like { expr: Box<Node>, pattern: LikePattern, negated: bool },
    /// `[NOT] LIKE | ILIKE` with a pattern computed per row.
    LikeDynamic {
        expr: Box<Node>,
        pattern: Box<Node>,
        escape: Option<char>,
        case_insensitive: bool,
        negated: bool,
    },
    /// Binary arithmetic; `int4` when both operands are 32-bit integers (overflow at 2^31).
    Arith { op: ArithOp, left: Box<Node>, right: Box<Node>, int4: bool },
    /// Unary minus.
    Neg { expr: Box<Node>, int4: bool },
    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`; `promote` is the numeric type every
    /// branch's result is promoted to (PostgreSQL resolves one result type for all branches).
    Case { operand: Option<Box<Node>>, arms: Box<[(Node, Node)]>, otherwise: Box<Node>, promote: Option<Ty> },
    /// `COALESCE(...)`, with the common numeric type of its arguments.
    Coalesce { args: Box<[Node]>, promote: Option<Ty> },
    /// `NULLIF(a, b)`.
    /// The result is the first argument promoted to the comparison's common numeric type.
    NullIf { left: Box<Node>, right: Box<Node>, promote: Option<Ty> },
    /// A one-argument function; `int4` for ABS of a 32-bit integer.
    Func { func: Func, arg: Box<Node>, int4: bool },
    /// A cast; `from_int4` when the operand is statically a 32-bit integer.
    Cast { expr: Box<Node>, to: CastTy, from_int4: bool },
}
