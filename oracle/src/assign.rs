//! An update's assignments evaluated on the row version it replaced: `SET n = n + 3`,
//! an upsert's `SET n = items.n + excluded.n`, with the predicates' SQL semantics
//! (integer arithmetic with overflow errors, NULL in, NULL out) in the history's dialect.
//!
//! The expression is parsed with the predicates' parser and compiled by their compiler, so
//! it accepts what a `where` accepts as a value; `excluded.c` names the column of the row
//! the statement proposed, which the update records ([`SetExpr::excluded`]) and which is
//! put into the text as a literal before parsing.

use std::borrow::Cow;

use isocert_history::{Assign, Dialect, History, ObjId, Scalar, SetExpr, TableId, Value, ValueId};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::compile::{CompileError, Compiler};
use crate::eval::{Ctx, RowView};
use crate::schema::Schema;
use crate::value::V;
use crate::OracleError;

/// Evaluates update assignments on row versions of one history (its column kinds read once).
///
/// ```
/// use isocert_history::{v1, Op, Scalar};
/// use isocert_oracle::Assignments;
///
/// let text = concat!(
///     r#"{"format":"isocert-history","version":1,"initial":[{"table":"items","key":1,"value":{"id":1,"n":40}}]}"#, "\n",
///     r#"{"id":7,"session":0,"ops":[{"f":"update","table":"items","where":"id = 1","set":{"n":{"expr":"n + 3"}},"rows":[{"key":1,"value":{"id":1,"n":43}}]}]}"#,
/// );
/// let h = v1::read_history(text.as_bytes())?;
/// let (obj, replaced) = h.initial[0];
/// let Op::Update { set, .. } = &h.txns[0].ops[0] else { unreachable!() };
/// let table = h.object(obj).table;
/// let a = Assignments::new(&h);
/// assert_eq!(a.evaluate(&h, table, &set[0].1, obj, replaced)?, Scalar::Int(43));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Assignments {
    schema: Schema,
}

impl Assignments {
    /// An evaluator for the assignments of `h` (scans the column kinds of its values).
    pub fn new(h: &History) -> Self {
        let mut schema = Schema::default();
        schema.update(h);
        Assignments { schema }
    }

    /// Checks that `expr` compiles for `table` (the columns exist, the types fit), as the
    /// database would when planning the statement, without evaluating it.
    ///
    /// # Errors
    /// [`OracleError::Assignment`] naming the expression and what is wrong.
    pub fn compile(&self, h: &History, table: TableId, expr: &SetExpr) -> Result<(), OracleError> {
        self.node(h, table, expr).map(|_| ())
    }

    /// The value assignment `assign` gives a column of the row that replaces version
    /// `replaced` of `obj`: the constant, or the expression evaluated on that version.
    ///
    /// # Errors
    /// [`OracleError::Assignment`] when the expression does not compile, or fails on this
    /// row (overflow, a failed cast), or the replaced version is no row.
    pub fn evaluate(
        &self,
        h: &History,
        table: TableId,
        assign: &Assign,
        obj: ObjId,
        replaced: ValueId,
    ) -> Result<Scalar, OracleError> {
        let expr = match assign {
            Assign::Const(s) => return Ok(s.clone()),
            Assign::Expr(e) => e,
        };
        let node = self.node(h, table, expr)?;
        let key = &h.object(obj).key;
        let row = match h.value(replaced) {
            Value::Scalar(s) => RowView::Kv { key, value: s },
            Value::Row(r) => RowView::Row(r),
            Value::Absent | Value::List(_) => {
                return Err(assignment_error(
                    expr,
                    format!("{} holds no row to compute from", h.object_label(obj)),
                ))
            }
        };
        let ctx = Ctx { row, table: h.table(table), dialect: h.dialect };
        let v = node.eval(&ctx).map_err(|e| {
            assignment_error(
                expr,
                format!(
                    "on {} = {}: {}",
                    h.object_label(obj),
                    h.value_label(obj, replaced),
                    e.into_message()
                ),
            )
        })?;
        Ok(scalar_of(v))
    }

    /// The compiled expression, `excluded.c` replaced by the proposed row's values.
    fn node(&self, h: &History, table: TableId, expr: &SetExpr) -> Result<crate::ast::Node, OracleError> {
        if matches!(h.dialect, Dialect::Mongodb | Dialect::Dgraph) {
            return Err(assignment_error(
                expr,
                format!("a {} history has no SQL assignments", h.dialect.as_str()),
            ));
        }
        let sql = bind_excluded(h, table, expr)?;
        let parsed = crate::interpreter::parse_predicate(&sql, h.dialect)
            .map_err(|m| assignment_error(expr, format!("cannot parse: {m}")))?;
        let kinds = self.schema.table_kinds(h, table);
        let compiler = Compiler { table: h.table(table), dialect: h.dialect, kinds: &kinds };
        let (node, _) = compiler.expr(&parsed).map_err(|e| match e {
            CompileError::Unsupported(c) => assignment_error(expr, format!("unsupported construct: {c}")),
            CompileError::Invalid(m) => assignment_error(expr, m),
        })?;
        Ok(node)
    }
}

/// The expression's text with each `excluded.c` replaced by the literal of column `c` of
/// the proposed row.
fn bind_excluded<'e>(h: &History, table: TableId, expr: &'e SetExpr) -> Result<Cow<'e, str>, OracleError> {
    if !expr.sql.to_ascii_lowercase().contains("excluded") {
        return Ok(Cow::Borrowed(&expr.sql));
    }
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, &expr.sql)
        .tokenize()
        .map_err(|e| assignment_error(expr, format!("cannot parse: {e}")))?;
    let mut out = String::with_capacity(expr.sql.len());
    let mut i = 0;
    while i < tokens.len() {
        let excluded_column = match (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            (Token::Word(w), Some(Token::Period), Some(Token::Word(c)))
                if w.value.eq_ignore_ascii_case("excluded") =>
            {
                Some(c)
            }
            _ => None,
        };
        let Some(column) = excluded_column else {
            out.push_str(&tokens[i].to_string());
            i += 1;
            continue;
        };
        let Some(row) = expr.excluded else {
            return Err(assignment_error(
                expr,
                "names excluded, but the update records no proposed row".into(),
            ));
        };
        let name =
            if column.quote_style.is_none() { column.value.to_lowercase() } else { column.value.clone() };
        let value = match (h.value(row), h.table(table).column(&name)) {
            (Value::Row(r), Some(c)) => r.get(c).clone(),
            (Value::Scalar(s), _) if name == "value" => s.clone(),
            _ => return Err(assignment_error(expr, format!("the proposed row has no column {name}"))),
        };
        out.push_str(&literal(&value));
        i += 3;
    }
    Ok(Cow::Owned(out))
}

/// A SQL literal of `s`, parenthesized so that a negative number stays one operand.
fn literal(s: &Scalar) -> String {
    match s {
        Scalar::Null => "NULL".into(),
        Scalar::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Scalar::Int(i) => format!("({i})"),
        Scalar::Float(f) => format!("(CAST('{f:?}' AS double precision))"),
        Scalar::Text(t) => format!("'{}'", t.replace('\'', "''")),
    }
}

/// The stored scalar of an evaluated value (a numeric as the nearest double, unless integral).
fn scalar_of(v: V<'_>) -> Scalar {
    match v {
        V::Null => Scalar::Null,
        V::Bool(b) => Scalar::Bool(b),
        V::Int(i) => Scalar::Int(i),
        V::Float(f) => Scalar::Float(f),
        V::Num(n) => match n.round_to_i64() {
            Ok(i) if (i as f64) == n.to_f64() => Scalar::Int(i),
            _ => Scalar::Float(n.to_f64()),
        },
        V::Text(t) => Scalar::Text(t.into_owned().into()),
        V::Unknown(t) => Scalar::Text(t.into()),
    }
}

fn assignment_error(expr: &SetExpr, message: String) -> OracleError {
    OracleError::Assignment { sql: isocert_history::quote_capped(&expr.sql), message }
}

#[cfg(test)]
mod tests {
    use isocert_history::{v1, Assign, History, Op, Scalar};

    use super::Assignments;

    /// A history whose one update assigns `set` to items[1] = {id: 1, n: N, v: 1, t: 'a'}.
    fn evaluate(n: &str, set: &str, excluded: &str) -> Result<Scalar, String> {
        let text = format!(
            concat!(
                r#"{{"format":"isocert-history","version":1,"initial":[{{"table":"items","key":1,"value":{{"id":1,"n":{},"v":1,"t":"a"}}}}]}}"#,
                "\n",
                r#"{{"id":7,"session":0,"ops":[{{"f":"update","table":"items","where":"id = 1","set":{{"n":{}}}{},"rows":[]}}]}}"#
            ),
            n, set, excluded
        );
        let h: History = v1::read_history(text.as_bytes()).map_err(|e| e.to_string())?;
        let (obj, replaced) = h.initial[0];
        let Op::Update { set, .. } = &h.txns[0].ops[0] else { unreachable!() };
        Assignments::new(&h)
            .evaluate(&h, h.object(obj).table, &set[0].1, obj, replaced)
            .map_err(|e| e.to_string())
    }

    fn expr(sql: &str) -> String {
        format!(r#"{{"expr":"{sql}"}}"#)
    }

    #[test]
    fn arithmetic_on_the_replaced_row_follows_postgresql() {
        assert_eq!(evaluate("40", &expr("n + 3"), ""), Ok(Scalar::Int(43)));
        assert_eq!(evaluate("40", &expr("items.n * 2 - v"), ""), Ok(Scalar::Int(79)));
        assert_eq!(evaluate("40", &expr("-n + -2"), ""), Ok(Scalar::Int(-42)));
        assert_eq!(evaluate("null", &expr("n + 3"), ""), Ok(Scalar::Null), "NULL in, NULL out");
        assert_eq!(evaluate("40", "5", ""), Ok(Scalar::Int(5)), "a constant is itself");
        let overflow = evaluate("9223372036854775807", &expr("n + 1"), "").unwrap_err();
        assert!(overflow.contains("out of range") && overflow.contains("items[1]"), "{overflow}");
    }

    #[test]
    fn an_upsert_reads_the_proposed_row_as_excluded() {
        let proposed = r#","excluded":{"id":1,"n":5,"v":78}"#;
        assert_eq!(evaluate("40", &expr("items.n + EXCLUDED.n"), proposed), Ok(Scalar::Int(45)));
        assert_eq!(evaluate("40", &expr("excluded.n - n"), proposed), Ok(Scalar::Int(-35)));
        let negative = r#","excluded":{"id":1,"n":-5}"#;
        assert_eq!(evaluate("40", &expr("n - excluded.n"), negative), Ok(Scalar::Int(45)));
    }

    #[test]
    fn bad_expressions_are_errors_naming_the_expression() {
        let e = evaluate("40", &expr("n +"), "").unwrap_err();
        assert!(e.contains("\"n +\"") && e.contains("cannot parse"), "{e}");
        let e = evaluate("40", &expr("m + 1"), "").unwrap_err();
        assert!(e.contains("column m does not exist"), "{e}");
        let e = evaluate("40", &expr("t + 1"), "").unwrap_err();
        assert!(e.contains("operator does not exist") || e.contains("text"), "{e}");
        let e = evaluate("40", &expr("n + excluded.n"), "").unwrap_err();
        assert!(e.contains("no proposed row"), "{e}");
    }

    #[test]
    fn constants_need_no_row() {
        let h = History::new();
        let a = Assignments::new(&h);
        let mut h2 = h.clone();
        let t = h2.intern_table("items");
        let obj = h2.intern_object(t, Scalar::Int(1));
        let got = a.evaluate(&h2, t, &Assign::Const(Scalar::Int(3)), obj, isocert_history::ValueId::ABSENT);
        assert_eq!(got, Ok(Scalar::Int(3)));
    }
}
