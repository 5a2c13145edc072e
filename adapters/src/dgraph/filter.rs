//! Predicates as DQL filters: a step's predicate is the SQL `WHERE` subset of the workload
//! (integer comparisons, `BETWEEN`, `IN`, `AND`, `OR`, `NOT`, parentheses) or already a DQL
//! filter (`ge(v, 3) AND NOT eq(c1, [1, 2])`); [`parse_filter`] reads both into a
//! [`Filter`], which renders as the DQL filter over column names recorded in the history (the
//! `dgraph` dialect the oracle evaluates) and over predicate names sent to Dgraph.

use std::fmt::Write as _;

use crate::seam::TableSpec;

/// A DQL comparison function on an int predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// `eq`: equal to the value, or to any value of a list.
    Eq,
    /// `ge`.
    Ge,
    /// `gt`.
    Gt,
    /// `le`.
    Le,
    /// `lt`.
    Lt,
}

impl Func {
    fn name(self) -> &'static str {
        match self {
            Func::Eq => "eq",
            Func::Ge => "ge",
            Func::Gt => "gt",
            Func::Le => "le",
            Func::Lt => "lt",
        }
    }
}

/// A DQL filter over a table's columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// `func(column, value)`; `eq` with several values is `eq(column, [a, b])`.
    Func {
        /// The function.
        func: Func,
        /// The column.
        column: String,
        /// The values (one, except for `eq` of a list).
        values: Vec<i64>,
    },
    /// `between(column, low, high)`, both ends included.
    Between {
        /// The column.
        column: String,
        /// Lower end.
        low: i64,
        /// Upper end.
        high: i64,
    },
    /// `a AND b AND ...`.
    And(Vec<Filter>),
    /// `a OR b OR ...`.
    Or(Vec<Filter>),
    /// `NOT a` (Dgraph: the nodes the inner filter does not match).
    Not(Box<Filter>),
}

impl Filter {
    /// The filter as DQL text, each column named by `name`.
    pub fn render(&self, name: &dyn Fn(&str) -> String) -> String {
        let mut out = String::new();
        self.write(&mut out, name);
        out
    }

    fn write(&self, out: &mut String, name: &dyn Fn(&str) -> String) {
        let nested = |f: &Filter, out: &mut String| {
            if matches!(f, Filter::And(_) | Filter::Or(_)) {
                out.push('(');
                f.write(out, name);
                out.push(')');
            } else {
                f.write(out, name);
            }
        };
        match self {
            Filter::Func { func, column, values } => {
                let _ = write!(out, "{}({}, ", func.name(), name(column));
                match values.as_slice() {
                    [one] => {
                        let _ = write!(out, "{one})");
                    }
                    many => {
                        let list: Vec<String> = many.iter().map(i64::to_string).collect();
                        let _ = write!(out, "[{}])", list.join(", "));
                    }
                }
            }
            Filter::Between { column, low, high } => {
                let _ = write!(out, "between({}, {low}, {high})", name(column));
            }
            Filter::And(items) | Filter::Or(items) => {
                let joiner = if matches!(self, Filter::And(_)) { " AND " } else { " OR " };
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(joiner);
                    }
                    nested(item, out);
                }
            }
            Filter::Not(inner) => {
                out.push_str("NOT ");
                nested(inner, out);
            }
        }
    }

    /// Every column the filter names.
    pub fn columns(&self) -> Vec<&str> {
        match self {
            Filter::Func { column, .. } | Filter::Between { column, .. } => vec![column],
            Filter::And(items) | Filter::Or(items) => items.iter().flat_map(Filter::columns).collect(),
            Filter::Not(inner) => inner.columns(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Int(i64),
    Punct(&'static str),
    /// What the tokenizer could not read (it stops there), reported when the parser gets there.
    Bad(String),
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    if let Err(e) = tokenize_into(text, &mut tokens) {
        tokens.push(Token::Bad(e));
    }
    tokens
}

fn tokenize_into(text: &str, tokens: &mut Vec<Token>) -> Result<(), String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit()
            || (c == '-'
                && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                && !matches!(tokens.last(), Some(Token::Int(_) | Token::Word(_))))
        {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if chars.get(i).is_some_and(|&c| c == '.' || c == 'e' || c == 'E') {
                return Err(format!("only integer constants are supported (at character {})", start + 1));
            }
            let digits: String = chars[start..i].iter().collect();
            tokens.push(Token::Int(digits.parse().map_err(|_| format!("{digits} does not fit 64 bits"))?));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let punct = match two.as_str() {
                "<=" | ">=" | "<>" | "!=" => {
                    i += 2;
                    match two.as_str() {
                        "<=" => "<=",
                        ">=" => ">=",
                        "<>" => "<>",
                        _ => "!=",
                    }
                }
                _ => {
                    i += 1;
                    match c {
                        '(' => "(",
                        ')' => ")",
                        ',' => ",",
                        '[' => "[",
                        ']' => "]",
                        '=' => "=",
                        '<' => "<",
                        '>' => ">",
                        other => return Err(format!("unexpected {other:?} at character {i}")),
                    }
                }
            };
            tokens.push(Token::Punct(punct));
        }
    }
    Ok(())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn keyword(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Token::Punct(q)) if *q == p) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.punct(p) {
            Ok(())
        } else {
            Err(self.fail(&format!("{p:?}")))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Token::Word(w)) => format!("{w:?}"),
            Some(Token::Int(i)) => i.to_string(),
            Some(Token::Punct(p)) => format!("{p:?}"),
            Some(Token::Bad(e)) => e.clone(),
        }
    }

    /// The error at the current token: what the tokenizer could not read, or what was
    /// expected there.
    fn fail(&self, expected: &str) -> String {
        match self.peek() {
            Some(Token::Bad(e)) => e.clone(),
            _ => format!("expected {expected}, found {}", self.describe()),
        }
    }

    fn int(&mut self) -> Result<i64, String> {
        match self.next() {
            Some(Token::Int(i)) => Ok(i),
            _ => {
                self.at -= 1;
                Err(self.fail("an integer"))
            }
        }
    }

    fn ints_until(&mut self, close: &str) -> Result<Vec<i64>, String> {
        let mut items = vec![self.int()?];
        while self.punct(",") {
            items.push(self.int()?);
        }
        self.expect(close)?;
        Ok(items)
    }

    fn or(&mut self) -> Result<Filter, String> {
        let mut items = vec![self.and()?];
        while self.keyword("or") {
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Filter::Or(items) })
    }

    fn and(&mut self) -> Result<Filter, String> {
        let mut items = vec![self.unary()?];
        while self.keyword("and") {
            items.push(self.unary()?);
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Filter::And(items) })
    }

    fn unary(&mut self) -> Result<Filter, String> {
        if self.keyword("not") {
            return Ok(Filter::Not(Box::new(self.unary()?)));
        }
        if self.punct("(") {
            let inner = self.or()?;
            self.expect(")")?;
            return Ok(inner);
        }
        let column = match self.next() {
            Some(Token::Word(w)) => w,
            _ => {
                self.at -= 1;
                return Err(self.fail("a column or a DQL function"));
            }
        };
        if self.punct("(") {
            return self.function(&column);
        }
        let func =
            |func: Func, value: i64, column: String| Filter::Func { func, column, values: vec![value] };
        let negated = self.keyword("not");
        let filter = if self.keyword("between") {
            let low = self.int()?;
            if !self.keyword("and") {
                return Err(self.fail("AND in BETWEEN"));
            }
            Filter::Between { column, low, high: self.int()? }
        } else if self.keyword("in") {
            self.expect("(")?;
            Filter::Func { func: Func::Eq, column, values: self.ints_until(")")? }
        } else if negated {
            return Err(self.fail("BETWEEN or IN after NOT"));
        } else {
            let op = match self.next() {
                Some(Token::Punct(p)) => p,
                _ => {
                    self.at -= 1;
                    return Err(self.fail(&format!("a comparison after {column}")));
                }
            };
            let value = self.int()?;
            match op {
                "=" => func(Func::Eq, value, column),
                "<>" | "!=" => Filter::Not(Box::new(func(Func::Eq, value, column))),
                "<" => func(Func::Lt, value, column),
                "<=" => func(Func::Le, value, column),
                ">" => func(Func::Gt, value, column),
                ">=" => func(Func::Ge, value, column),
                other => return Err(format!("unexpected {other:?} after {column}")),
            }
        };
        Ok(if negated { Filter::Not(Box::new(filter)) } else { filter })
    }

    /// A DQL function call, after its name and `(`.
    fn function(&mut self, name: &str) -> Result<Filter, String> {
        let func = match name {
            "eq" => Func::Eq,
            "ge" => Func::Ge,
            "gt" => Func::Gt,
            "le" => Func::Le,
            "lt" => Func::Lt,
            "between" => {
                let column = self.column()?;
                self.expect(",")?;
                let low = self.int()?;
                self.expect(",")?;
                let high = self.int()?;
                self.expect(")")?;
                return Ok(Filter::Between { column, low, high });
            }
            other => {
                return Err(format!(
                    "the DQL function {other}() is not supported (eq, ge, gt, le, lt, between)"
                ))
            }
        };
        let column = self.column()?;
        self.expect(",")?;
        let values =
            if func == Func::Eq && self.punct("[") { self.ints_until("]")? } else { vec![self.int()?] };
        self.expect(")")?;
        Ok(Filter::Func { func, column, values })
    }

    fn column(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Word(w)) => Ok(w),
            _ => {
                self.at -= 1;
                Err(self.fail("a column name"))
            }
        }
    }
}

/// Reads a predicate, in the workload's SQL subset or as a DQL filter (module doc), and
/// checks that it names only `table`'s columns.
///
/// # Errors
/// What is wrong, naming the token or the unsupported function or column.
pub fn parse_filter(table: &TableSpec, text: &str) -> Result<Filter, String> {
    let tokens = tokenize(text);
    let mut p = Parser { tokens, at: 0 };
    let filter = p.or()?;
    if p.peek().is_some() {
        return Err(format!("unexpected {} after the filter", p.describe()));
    }
    for column in filter.columns() {
        if !table.columns.contains(&column) {
            return Err(format!("{column} is not a column of {} ({})", table.name, table.column_list()));
        }
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dgraph::dql::filter_query;

    const ITEMS: TableSpec = TableSpec::integers("items", &["id", "c1", "c2", "v"]);

    #[test]
    fn the_workloads_sql_becomes_dql_over_columns_and_over_predicates() {
        for (sql, dql) in [
            ("c1 BETWEEN 3 AND 5", "between(c1, 3, 5)"),
            ("c2 = 4", "eq(c2, 4)"),
            ("c1 >= 2 AND c2 < 7", "ge(c1, 2) AND lt(c2, 7)"),
            ("c2 IN (1, 4)", "eq(c2, [1, 4])"),
            ("id BETWEEN 10 AND 13", "between(id, 10, 13)"),
            ("c1 = 1 OR c2 = 2", "eq(c1, 1) OR eq(c2, 2)"),
            ("c1 = 0 AND c2 <= 3", "eq(c1, 0) AND le(c2, 3)"),
            ("(c1 > -1 OR c2 <> 2) AND NOT v < 5", "(gt(c1, -1) OR NOT eq(c2, 2)) AND NOT lt(v, 5)"),
            ("c1 NOT BETWEEN 1 AND 2", "NOT between(c1, 1, 2)"),
            ("c1 not in (1,2)", "NOT eq(c1, [1, 2])"),
            ("ge(v, 3) and not eq(c1, [1, 2])", "ge(v, 3) AND NOT eq(c1, [1, 2])"),
            (
                "between(c1, 1, 9) OR (lt(id, 3) AND gt(c2, 0))",
                "between(c1, 1, 9) OR (lt(id, 3) AND gt(c2, 0))",
            ),
        ] {
            let f = parse_filter(&ITEMS, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let text = f.render(&|c| c.to_string());
            assert_eq!(text, dql, "{sql}");
            // The recorded text reads back to the same filter.
            assert_eq!(parse_filter(&ITEMS, &text).unwrap(), f, "{dql}");
        }
        let f = parse_filter(&ITEMS, "c1 >= 2 AND c2 < 7").unwrap();
        assert_eq!(
            filter_query(&ITEMS, Some(&f)),
            "{ q(func: has(isocert.items.id)) @filter(ge(isocert.items.c1, 2) AND lt(isocert.items.c2, 7)) \
             { uid c0 : isocert.items.id c1 : isocert.items.c1 c2 : isocert.items.c2 c3 : isocert.items.v } }"
        );
    }

    #[test]
    fn unsupported_functions_columns_and_literals_are_refused_by_name() {
        for (text, says) in [
            ("regexp(c1, /a/)", "regexp() is not supported"),
            ("has(c1)", "has() is not supported"),
            ("anyofterms(c1, 3)", "anyofterms() is not supported"),
            ("c9 = 1", "c9 is not a column of items"),
            ("eq(c1, 1.5)", "only integer constants"),
            ("c1 = 'a'", "unexpected '\\''"),
            ("c1 = 1 c2", "unexpected \"c2\" after the filter"),
            ("c1 BETWEEN 1 2", "expected AND in BETWEEN"),
            ("(c1 = 1", "expected \")\""),
            ("c1 LIKE 3", "expected a comparison after c1"),
            ("", "expected a column or a DQL function"),
        ] {
            let e = parse_filter(&ITEMS, text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
