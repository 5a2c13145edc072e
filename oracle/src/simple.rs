//! A hand-written parser for the commonest `where` shape, before sqlparser.
//!
//! Generated and workload predicates are mostly conjunctions of column-versus-integer
//! comparisons: `c0 >= 12 AND c0 < 40 AND c2 <> 7`, `c0 BETWEEN 3 AND 9`. Compiling them,
//! sqlparser (tokenizer, dialect hooks, a `String` per token) included, was 21% of
//! `isocert check` on gen's history of 100,000 mostly distinct predicates
//! (docs/PERFORMANCE.md, "Compact version sets"). [`parse_simple`] reads exactly that
//! shape and builds the [`Expr`] sqlparser builds for it, so the rest of compilation is
//! unchanged; anything else (another operator, a float, a quoted identifier, a keyword as a
//! column name, a comment, any character it does not expect) returns `None` and sqlparser
//! parses the text as before, errors included. A unit test compares both parsers on every
//! text the fast one accepts.
//!
//! Grammar (ASCII whitespace between tokens; keywords in any case):
//!
//! ```text
//! expr    := cond ( AND cond )*
//! cond    := column ( cmp integer | BETWEEN integer AND integer )
//! cmp     := = | <> | != | < | <= | > | >=
//! column  := [A-Za-z_][A-Za-z0-9_]*, not a SQL keyword
//! integer := -? [0-9]+
//! ```

use sqlparser::ast::{BinaryOperator, Expr, Ident, UnaryOperator, Value};
use sqlparser::keywords::ALL_KEYWORDS;

/// One token of the simple shape.
#[derive(Clone, Debug, PartialEq)]
enum Tok<'a> {
    /// A word: a column name or a keyword.
    Word(&'a str),
    /// Unsigned digits.
    Int(&'a str),
    /// A comparison operator.
    Cmp(BinaryOperator),
    /// `-`.
    Minus,
}

/// The tokens of `sql`, or `None` at the first character outside the simple shape.
fn tokens(sql: &str) -> Option<Vec<Tok<'_>>> {
    let b = sql.as_bytes();
    let mut out = Vec::with_capacity(8);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Tok::Word(&sql[start..i]));
            }
            b'0'..=b'9' => {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                // `1.5`, `1e3`, `12abc`, `0x1f`: not an integer token here.
                if i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                    return None;
                }
                out.push(Tok::Int(&sql[start..i]));
            }
            b'-' => {
                // `--` starts a comment.
                if b.get(i + 1) == Some(&b'-') {
                    return None;
                }
                i += 1;
                if b.get(i).copied().is_some_and(operator_char) {
                    return None;
                }
                out.push(Tok::Minus);
            }
            b'=' => {
                i += 1;
                out.push(Tok::Cmp(BinaryOperator::Eq));
            }
            b'<' | b'>' | b'!' => {
                let next = b.get(i + 1).copied();
                let (op, len) = match (c, next) {
                    (b'<', Some(b'=')) => (BinaryOperator::LtEq, 2),
                    (b'<', Some(b'>')) => (BinaryOperator::NotEq, 2),
                    (b'>', Some(b'=')) => (BinaryOperator::GtEq, 2),
                    (b'!', Some(b'=')) => (BinaryOperator::NotEq, 2),
                    (b'<', _) => (BinaryOperator::Lt, 1),
                    (b'>', _) => (BinaryOperator::Gt, 1),
                    _ => return None,
                };
                i += len;
                // `<=>`, `<<`, `<@`, `>=-` (a PostgreSQL custom operator) are other operators.
                if b.get(i).copied().is_some_and(operator_char) {
                    return None;
                }
                out.push(Tok::Cmp(op));
            }
            _ => return None,
        }
        if c == b'=' && b.get(i).copied().is_some_and(operator_char) {
            return None;
        }
    }
    Some(out)
}

/// A character PostgreSQL operators are made of: one right after a comparison or a minus
/// sign makes a longer operator, which the simple shape leaves to sqlparser.
fn operator_char(c: u8) -> bool {
    matches!(
        c,
        b'+' | b'-'
            | b'*'
            | b'/'
            | b'<'
            | b'>'
            | b'='
            | b'~'
            | b'!'
            | b'@'
            | b'#'
            | b'%'
            | b'^'
            | b'&'
            | b'|'
            | b'`'
            | b'?'
    )
}

/// Parses `sql` when it has the simple shape, into the expression sqlparser gives it;
/// `None` otherwise (the caller then uses sqlparser).
pub(crate) fn parse_simple(sql: &str) -> Option<Expr> {
    let toks = tokens(sql)?;
    let mut p = Parser { toks: &toks, at: 0 };
    let mut expr = p.cond()?;
    while p.at < toks.len() {
        if !p.keyword("AND") {
            return None;
        }
        let right = p.cond()?;
        expr = Expr::BinaryOp { left: Box::new(expr), op: BinaryOperator::And, right: Box::new(right) };
    }
    Some(expr)
}

/// A cursor over the tokens.
struct Parser<'t, 'a> {
    toks: &'t [Tok<'a>],
    at: usize,
}

impl Parser<'_, '_> {
    fn next(&mut self) -> Option<Tok<'_>> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    /// Consumes the keyword `kw` (upper case) if it comes next.
    fn keyword(&mut self, kw: &str) -> bool {
        match self.toks.get(self.at) {
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn cond(&mut self) -> Option<Expr> {
        let Some(Tok::Word(name)) = self.next() else { return None };
        if is_keyword(name) {
            return None;
        }
        let column = Expr::Identifier(Ident::new(name));
        if self.keyword("BETWEEN") {
            let low = self.integer()?;
            if !self.keyword("AND") {
                return None;
            }
            let high = self.integer()?;
            return Some(Expr::Between {
                expr: Box::new(column),
                negated: false,
                low: Box::new(low),
                high: Box::new(high),
            });
        }
        let Some(Tok::Cmp(op)) = self.next() else { return None };
        let right = self.integer()?;
        Some(Expr::BinaryOp { left: Box::new(column), op, right: Box::new(right) })
    }

    fn integer(&mut self) -> Option<Expr> {
        match self.next()? {
            Tok::Int(digits) => Some(number(digits)),
            Tok::Minus => match self.next()? {
                Tok::Int(digits) => {
                    Some(Expr::UnaryOp { op: UnaryOperator::Minus, expr: Box::new(number(digits)) })
                }
                _ => None,
            },
            _ => None,
        }
    }
}

fn number(digits: &str) -> Expr {
    Expr::value(Value::Number(digits.to_string(), false))
}

/// Whether `word` is one of sqlparser's keywords (any of them may parse specially).
fn is_keyword(word: &str) -> bool {
    let upper = word.to_ascii_uppercase();
    ALL_KEYWORDS.binary_search(&upper.as_str()).is_ok()
}

#[cfg(test)]
mod tests {
    use isocert_history::Dialect;

    use super::parse_simple;
    use crate::interpreter::parse_predicate;

    /// Whenever the simple parser accepts a text, sqlparser gives the same expression in
    /// both SQL dialects.
    fn agrees(sql: &str) -> bool {
        let Some(simple) = parse_simple(sql) else { return false };
        for dialect in [Dialect::Postgres, Dialect::Mysql] {
            let full = parse_predicate(sql, dialect).unwrap_or_else(|e| panic!("{sql:?} ({dialect:?}): {e}"));
            assert_eq!(simple, full, "{sql:?} ({dialect:?})");
        }
        true
    }

    #[test]
    fn the_generators_shapes_take_the_simple_path() {
        for sql in [
            "c0 >= 12 AND c0 < 40",
            "c0 BETWEEN 3 AND 9",
            "c0 >= 0 AND c0 < 1000 AND c2 <> 7",
            "c0>= -5 and C0<=+5",
            "c0>=-5",
            "c0 = 1",
            "c0 != 1",
            "c0 > - 1",
            "c0 between -3 and 9 AND c1 > 0",
            "x_1 >= 007\n\tAND\r\nc0 < 2",
        ] {
            if sql.contains('+') || sql.contains(">=-") {
                assert!(parse_simple(sql).is_none(), "{sql}");
            } else {
                assert!(agrees(sql), "{sql} should take the simple path");
            }
        }
    }

    #[test]
    fn other_shapes_are_left_to_sqlparser() {
        for sql in [
            "c0 > 1.5",
            "c0 > 1e3",
            "value > 3",
            "id = 1",
            "\"c0\" > 1",
            "c0 > 1 OR c0 < 0",
            "c0 > 1 -- comment",
            "c0 <=> 1",
            "c0 >> 1",
            "c0 => 1",
            "c0 > 1;",
            "c0 > 0x1f",
            "c0 > 12abc",
            "c0 BETWEEN SYMMETRIC 1 AND 2",
            "NOT c0 > 1",
            "c0 > 1 AND",
            "c0 BETWEEN 1",
            "c0 > c1",
            "c0 >",
            "",
            "c$0 > 1",
            "c0 IS NULL",
        ] {
            assert!(parse_simple(sql).is_none(), "{sql:?} took the simple path");
        }
    }

    /// Random texts over the simple shape's tokens and their neighbours: wherever the simple
    /// parser accepts one, sqlparser agrees.
    #[test]
    fn random_texts_agree_with_sqlparser() {
        const PIECES: [&str; 24] = [
            "c0", "c2", "C1", "and", "AND", "between", "BETWEEN", "or", ">=", "<", "<=", ">", "=", "<>",
            "!=", "-", "0", "17", "-4", " ", "  ", "\n", "value", "1.5",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = 0;
        for _ in 0..20_000 {
            let len = 1 + next() % 12;
            let mut sql = String::new();
            for _ in 0..len {
                sql.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
                if next().is_multiple_of(2) {
                    sql.push(' ');
                }
            }
            if agrees(&sql) {
                accepted += 1;
            }
        }
        // Also build well-formed texts, so that many reach the comparison.
        for _ in 0..5_000 {
            let mut sql = String::new();
            for c in 0..1 + next() % 4 {
                if c > 0 {
                    sql.push_str(if next().is_multiple_of(2) { " AND " } else { " and\n" });
                }
                let col = ["c0", "c1", "c2", "Col_9"][(next() % 4) as usize];
                let int = |n: u64| {
                    if n.is_multiple_of(3) {
                        format!("-{}", n % 1000)
                    } else {
                        (n % 100_000).to_string()
                    }
                };
                if next().is_multiple_of(3) {
                    sql.push_str(&format!("{col} BETWEEN {} AND {}", int(next()), int(next())));
                } else {
                    let op = ["=", "<>", "!=", "<", "<=", ">", ">="][(next() % 7) as usize];
                    sql.push_str(&format!("{col}{op} {}", int(next())));
                }
            }
            assert!(agrees(&sql), "{sql} should take the simple path");
            accepted += 1;
        }
        assert!(accepted > 5_010, "only {accepted} random texts took the simple path");
    }
}
