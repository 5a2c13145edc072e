//! Constant folding, the way PostgreSQL's planner does it.
//!
//! PostgreSQL evaluates constant subexpressions when it plans a query, so `c > 0 OR 1/0 = 1`
//! fails on every row even where `c > 0` holds, while `false AND 1/0 = 1` is simply false
//! (AND/OR stop at a constant that decides them, CASE drops arms whose condition is a
//! constant false, COALESCE stops at its first constant non-NULL argument). Folding the same
//! way makes the interpreter fail where the database fails, at compile time, and makes
//! constant parts free at evaluation time.

use isocert_history::{Dialect, Row, Table};

use crate::ast::{CmpOp, Node};
use crate::eval::{Ctx, RowView};
use crate::ops::truth;
use crate::value::{EvalError, V};

fn is_const(n: &Node) -> bool {
    matches!(n, Node::Const(_) | Node::Unknown(_))
}

fn eval_const(n: &Node, dialect: Dialect) -> Result<Node, EvalError> {
    if is_const(n) {
        return Ok(n.clone());
    }
    let table = Table { name: "".into(), columns: Vec::new() };
    let row = Row::default();
    let ctx = Ctx { row: RowView::Row(&row), table: &table, dialect };
    Ok(match n.eval(&ctx)? {
        V::Unknown(t) => Node::Unknown(t.into()),
        v => Node::Const(v.into_owned()),
    })
}

fn const_truth(n: &Node, d: Dialect, context: &str) -> Result<Option<bool>, EvalError> {
    match n {
        Node::Const(v) => truth(v, d, context),
        Node::Unknown(t) => truth(&V::Unknown(t), d, context),
        _ => Ok(None),
    }
}

fn fold_box(n: &mut Box<Node>, d: Dialect) -> Result<bool, EvalError> {
    fold_in_place(n, d)?;
    Ok(is_const(n))
}

fn fold_in_place(n: &mut Node, d: Dialect) -> Result<(), EvalError> {
    let taken = std::mem::replace(n, Node::Const(V::Null));
    *n = fold(taken, d)?;
    Ok(())
}

fn fold_connective(args: Box<[Node]>, is_and: bool, d: Dialect) -> Result<Node, EvalError> {
    let context = if is_and { "AND" } else { "OR" };
    let mut kept = Vec::with_capacity(args.len());
    let mut had_null = false;
    for a in args.into_vec() {
        let f = fold(a, d)?;
        // Nested connectives of the same kind flatten (as PostgreSQL's planner does), so
        // `x BETWEEN a AND b AND y` is one loop of three tests.
        match f {
            Node::And(inner) if is_and => {
                kept.extend(inner.into_vec());
                continue;
            }
            Node::Or(inner) if !is_and => {
                kept.extend(inner.into_vec());
                continue;
            }
            _ => {}
        }
        if !is_const(&f) {
            kept.push(f);
            continue;
        }
        match const_truth(&f, d, context)? {
            Some(b) if b != is_and => return Ok(Node::Const(V::Bool(b))),
            Some(_) => {}
            None => had_null = true,
        }
    }
    if kept.is_empty() {
        return Ok(Node::Const(if had_null { V::Null } else { V::Bool(is_and) }));
    }
    if had_null {
        kept.push(Node::Const(V::Null));
    }
    Ok(if is_and { Node::And(kept.into()) } else { Node::Or(kept.into()) })
}

/// Folds the constant parts of `n`; an error is the error the database raises when planning.
pub(crate) fn fold(n: Node, d: Dialect) -> Result<Node, EvalError> {
    let mut n = match n {
        Node::Const(_)
        | Node::Unknown(_)
        | Node::Column(_)
        | Node::CmpColumn { .. }
        | Node::InColumn { .. } => return Ok(n),
        Node::And(args) => return fold_connective(args, true, d),
        Node::Or(args) => return fold_connective(args, false, d),
        Node::Case { operand: None, arms, otherwise, promote } => {
            let mut kept = Vec::with_capacity(arms.len());
            let mut otherwise = *otherwise;
            for (when, then) in arms.into_vec() {
                let w = fold(when, d)?;
                if is_const(&w) {
                    if const_truth(&w, d, "CASE/WHEN")? == Some(true) {
                        otherwise = then;
                        break;
                    }
                    continue;
                }
                kept.push((w, fold(then, d)?));
            }
            let otherwise = Box::new(fold(otherwise, d)?);
            Node::Case { operand: None, arms: kept.into(), otherwise, promote }
        }
        Node::Coalesce { args, promote } => {
            let mut kept = Vec::with_capacity(args.len());
            for a in args.into_vec() {
                let f = fold(a, d)?;
                match &f {
                    Node::Const(V::Null) => {}
                    _ if is_const(&f) => {
                        kept.push(f);
                        break;
                    }
                    _ => kept.push(f),
                }
            }
            Node::Coalesce { args: kept.into(), promote }
        }
        other => other,
    };
    let all_const = match &mut n {
        Node::Not(e) => fold_box(e, d)?,
        Node::Cmp(_, l, r) | Node::NullIf { left: l, right: r, .. } => fold_box(l, d)? & fold_box(r, d)?,
        Node::Distinct { left, right, .. } => fold_box(left, d)? & fold_box(right, d)?,
        Node::In { expr, array, chain, .. } => {
            let mut c = fold_box(expr, d)?;
            for item in array.iter_mut().chain(chain.iter_mut()) {
                fold_in_place(item, d)?;
                c &= is_const(item);
            }
            c
        }
        Node::IsNull { expr, .. } | Node::IsTruth { expr, .. } | Node::Like { expr, .. } => {
            fold_box(expr, d)?
        }
        Node::LikeDynamic { expr, pattern, .. } => fold_box(expr, d)? & fold_box(pattern, d)?,
        Node::Arith { left, right, .. } => fold_box(left, d)? & fold_box(right, d)?,
        Node::Neg { expr, .. } | Node::Func { arg: expr, .. } | Node::Cast { expr, .. } => fold_box(expr, d)?,
        Node::Case { operand, arms, otherwise, .. } => {
            let mut c = match operand {
                Some(o) => fold_box(o, d)?,
                None => true,
            };
            for (w, t) in arms.iter_mut() {
                fold_in_place(w, d)?;
                fold_in_place(t, d)?;
                c &= is_const(w) && is_const(t);
            }
            c & fold_box(otherwise, d)?
        }
        Node::Coalesce { args, .. } => args.iter().all(is_const),
        Node::Const(_)
        | Node::Unknown(_)
        | Node::Column(_)
        | Node::And(_)
        | Node::Or(_)
        | Node::CmpColumn { .. }
        | Node::InColumn { .. } => false,
    };
    if all_const {
        return eval_const(&n, d);
    }
    if strict_with_null_argument(&n) {
        return Ok(Node::Const(V::Null));
    }
    Ok(n)
}

/// A strict operator or function with a constant NULL argument is NULL, and PostgreSQL folds
/// it so without evaluating its other arguments.
fn strict_with_null_argument(n: &Node) -> bool {
    let null = |n: &Node| matches!(n, Node::Const(V::Null));
    match n {
        Node::Cmp(_, a, b) | Node::Arith { left: a, right: b, .. } => null(a) || null(b),
        Node::LikeDynamic { expr: a, pattern: b, .. } => null(a) || null(b),
        Node::Neg { expr, .. }
        | Node::Func { arg: expr, .. }
        | Node::Cast { expr, .. }
        | Node::Like { expr, .. } => null(expr),
        _ => false,
    }
}

/// Replaces the common comparisons of a column with constants by the fast forms
/// ([`Node::CmpColumn`], [`Node::InColumn`]); run after folding, with the same meaning.
pub(crate) fn specialize(n: Node) -> Node {
    let constant = |n: &Node| match n {
        Node::Const(v) if !matches!(v, V::Null) => Some(v.clone()),
        _ => None,
    };
    let flip = |op: CmpOp| match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    };
    match n {
        Node::Cmp(op, l, r) => match (*l, *r) {
            (Node::Column(column), k) if constant(&k).is_some() => {
                Node::CmpColumn { op, column, constant: constant(&k).unwrap_or(V::Null) }
            }
            (k, Node::Column(column)) if constant(&k).is_some() => {
                Node::CmpColumn { op: flip(op), column, constant: constant(&k).unwrap_or(V::Null) }
            }
            (l, r) => Node::Cmp(op, Box::new(specialize(l)), Box::new(specialize(r))),
        },
        Node::In { expr, array, chain, negated } => {
            let all_const = array.iter().chain(chain.iter()).all(|i| matches!(i, Node::Const(_)));
            match *expr {
                Node::Column(column) if all_const => {
                    let has_null =
                        array.iter().chain(chain.iter()).any(|i| matches!(i, Node::Const(V::Null)));
                    let items: Box<[V<'static>]> =
                        array.iter().chain(chain.iter()).filter_map(constant).collect();
                    let ints = items
                        .iter()
                        .map(|v| match v {
                            V::Int(i) => Some(*i),
                            _ => None,
                        })
                        .collect::<Option<Box<[i64]>>>();
                    Node::InColumn { column, items, ints, has_null, negated }
                }
                expr => Node::In {
                    expr: Box::new(specialize(expr)),
                    array: array.into_vec().into_iter().map(specialize).collect(),
                    chain: chain.into_vec().into_iter().map(specialize).collect(),
                    negated,
                },
            }
        }
        Node::And(args) => Node::And(args.into_vec().into_iter().map(specialize).collect()),
        Node::Or(args) => Node::Or(args.into_vec().into_iter().map(specialize).collect()),
        Node::Not(e) => Node::Not(Box::new(specialize(*e))),
        Node::IsTruth { expr, truth, negated } => {
            Node::IsTruth { expr: Box::new(specialize(*expr)), truth, negated }
        }
        Node::Case { operand: None, arms, otherwise, promote } => Node::Case {
            operand: None,
            arms: arms.into_vec().into_iter().map(|(w, t)| (specialize(w), t)).collect(),
            otherwise,
            promote,
        },
        other => other,
    }
}
