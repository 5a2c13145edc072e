//! The DQL front end: a Dgraph history's predicates (dialect `dgraph`) are DQL filters over
//! the row's columns, such as `ge(v, 3) AND NOT eq(c1, [1, 2])`.
//!
//! Supported: the comparison functions `eq` (one value or a list), `ge`, `gt`, `le`, `lt`,
//! `between(column, low, high)` (both ends included) on integer constants, combined with
//! `AND`, `OR`, `NOT` (any case; `NOT` binds tighter than `AND`, `AND` tighter than `OR`) and
//! parentheses. Any other function (`has`, `uid`, `regexp`, `anyofterms`, `val`, ...) is
//! refused by name.
//!
//! Dgraph's semantics differ from SQL's in one place: a node without a value for the
//! predicate matches no function of it, and `NOT f` matches every node `f` does not match
//! (a set difference), including nodes without the predicate. So the filter is compiled to
//! the SQL tree with each function wrapped in `IS TRUE` (a missing column, NULL, makes it
//! FALSE, never UNKNOWN), after which `AND`, `OR` and `NOT` are two-valued as in Dgraph.

use isocert_history::{ColId, History, PredId};

use crate::ast::{CmpOp, Column, Node};
use crate::bounds::extract_bounds;
use crate::fold::{fold, specialize};
use crate::value::V;
use crate::OracleError;

/// A compiled DQL filter: the node to evaluate and the bounds of what it matches.
pub(crate) struct CompiledDql {
    pub(crate) node: Node,
    pub(crate) bounds: crate::Bounds,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Int(i64),
    Punct(char),
}

/// Why a filter does not compile, before the predicate is named.
enum Failure {
    Parse(String),
    Unsupported(String),
    Invalid(String),
}

fn tokenize(text: &str) -> Result<Vec<Token>, Failure> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.' | '~')) {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let digits: String = chars[start..i].iter().collect();
            if chars.get(i).is_some_and(|&c| matches!(c, '.' | 'e' | 'E')) {
                return Err(Failure::Unsupported(format!(
                    "the non-integer constant starting {digits}{}",
                    chars[i]
                )));
            }
            let n = digits.parse().map_err(|_| Failure::Invalid(format!("{digits} does not fit 64 bits")))?;
            tokens.push(Token::Int(n));
        } else if matches!(c, '(' | ')' | ',' | '[' | ']') {
            tokens.push(Token::Punct(c));
            i += 1;
        } else if c == '"' {
            return Err(Failure::Unsupported(
                "string constants (the dgraph dialect compares integers)".into(),
            ));
        } else if c == '<' && chars.get(i + 1).is_some_and(|c| c.is_alphabetic()) {
            return Err(Failure::Unsupported("<predicate> IRIs (name the column)".into()));
        } else if matches!(c, '=' | '<' | '>' | '!') {
            let op: String = chars[i..].iter().take_while(|c| matches!(c, '=' | '<' | '>' | '!')).collect();
            return Err(Failure::Unsupported(format!(
                "the SQL operator {op} (the dgraph dialect's predicates are DQL functions: eq, ge, gt, le, lt, between)"
            )));
        } else {
            return Err(Failure::Parse(format!("unexpected {c:?} at character {}", i + 1)));
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    h: &'a History,
    table: isocert_history::TableId,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Token::Word(w)) => format!("{w:?}"),
            Some(Token::Int(i)) => i.to_string(),
            Some(Token::Punct(p)) => format!("{p:?}"),
        }
    }

    fn expected(&self, what: &str) -> Failure {
        Failure::Parse(format!("expected {what}, found {}", self.found()))
    }

    fn keyword(&mut self, word: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word));
        self.at += usize::from(hit);
        hit
    }

    fn punct(&mut self, p: char) -> bool {
        let hit = self.peek() == Some(&Token::Punct(p));
        self.at += usize::from(hit);
        hit
    }

    fn expect(&mut self, p: char) -> Result<(), Failure> {
        if self.punct(p) {
            Ok(())
        } else {
            Err(self.expected(&format!("{p:?}")))
        }
    }

    fn int(&mut self) -> Result<i64, Failure> {
        match self.peek() {
            Some(Token::Int(i)) => {
                let i = *i;
                self.at += 1;
                Ok(i)
            }
            Some(Token::Word(w)) if self.tokens.get(self.at + 1) == Some(&Token::Punct('(')) => {
                Err(Failure::Unsupported(format!("the DQL function {w}() as an argument")))
            }
            _ => Err(self.expected("an integer")),
        }
    }

    fn or(&mut self) -> Result<Node, Failure> {
        let mut items = vec![self.and()?];
        while self.keyword("or") {
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Node::Or(items.into()) })
    }

    fn and(&mut self) -> Result<Node, Failure> {
        let mut items = vec![self.unary()?];
        while self.keyword("and") {
            items.push(self.unary()?);
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Node::And(items.into()) })
    }

    fn unary(&mut self) -> Result<Node, Failure> {
        if self.keyword("not") {
            return Ok(Node::Not(Box::new(self.unary()?)));
        }
        if self.punct('(') {
            let inner = self.or()?;
            self.expect(')')?;
            return Ok(inner);
        }
        let name = match self.peek() {
            Some(Token::Word(w)) => w.clone(),
            _ => return Err(self.expected("a DQL function")),
        };
        self.at += 1;
        if !self.punct('(') {
            return Err(Failure::Unsupported(format!(
                "{name} outside a function (the dgraph dialect's filters are functions such as ge({name}, 3))"
            )));
        }
        let op = match name.as_str() {
            "eq" => CmpOp::Eq,
            "ge" => CmpOp::Ge,
            "gt" => CmpOp::Gt,
            "le" => CmpOp::Le,
            "lt" => CmpOp::Lt,
            "between" => {
                let column = self.column()?;
                self.expect(',')?;
                let low = self.int()?;
                self.expect(',')?;
                let high = self.int()?;
                self.expect(')')?;
                let both =
                    Node::And(vec![cmp(CmpOp::Ge, column.clone(), low), cmp(CmpOp::Le, column, high)].into());
                return Ok(is_true(both));
            }
            other => return Err(Failure::Unsupported(format!("the DQL function {other}()"))),
        };
        let column = self.column()?;
        self.expect(',')?;
        let node = if op == CmpOp::Eq && self.punct('[') {
            let mut items = vec![cmp(CmpOp::Eq, column.clone(), self.int()?)];
            while self.punct(',') {
                items.push(cmp(CmpOp::Eq, column.clone(), self.int()?));
            }
            self.expect(']')?;
            if items.len() == 1 {
                items.remove(0)
            } else {
                Node::Or(items.into())
            }
        } else {
            cmp(op, column, self.int()?)
        };
        self.expect(')')?;
        Ok(is_true(node))
    }

    /// A function's first argument: a column of the predicate's table.
    fn column(&mut self) -> Result<Column, Failure> {
        let name = match self.peek() {
            Some(Token::Word(w)) => w.clone(),
            _ => return Err(self.expected("a column name")),
        };
        self.at += 1;
        if self.peek() == Some(&Token::Punct('(')) {
            return Err(Failure::Unsupported(format!("the DQL function {name}() as an argument")));
        }
        let table = self.h.table(self.table);
        // Dgraph's predicate names are case-sensitive.
        let Some(id) = table.column(&name) else {
            if table.columns.is_empty() {
                return Ok(Column::Unresolved(name.into()));
            }
            return Err(Failure::Invalid(format!(
                "column {name} does not exist in table {} (its rows have {})",
                table.name,
                table.columns.join(", ")
            )));
        };
        Ok(match (table.is_kv(), id) {
            (true, ColId(0)) => Column::KvKey,
            (true, _) => Column::KvValue,
            (false, id) => Column::Row(id),
        })
    }
}

fn cmp(op: CmpOp, column: Column, value: i64) -> Node {
    Node::Cmp(op, Box::new(Node::Column(column)), Box::new(Node::Const(V::Int(value))))
}

/// `f IS TRUE`: FALSE where the column is missing (NULL), as Dgraph's functions are.
fn is_true(node: Node) -> Node {
    Node::IsTruth { expr: Box::new(node), truth: Some(true), negated: false }
}

/// Compiles predicate `pred` of `h` as a DQL filter.
///
/// # Errors
/// [`OracleError::Parse`] for text that is not a filter, [`OracleError::Unsupported`]
/// naming an unsupported function or constant, [`OracleError::Invalid`] for an unknown
/// column.
pub(crate) fn compile(h: &History, pred: PredId) -> Result<CompiledDql, OracleError> {
    let p = h.predicate(pred);
    let sql = isocert_history::quote_capped(&p.sql);
    let fail = |f: Failure| match f {
        Failure::Parse(message) => OracleError::Parse { pred, sql: sql.clone(), message },
        Failure::Unsupported(construct) => OracleError::Unsupported { pred, sql: sql.clone(), construct },
        Failure::Invalid(message) => OracleError::Invalid { pred, sql: sql.clone(), message },
    };
    let tokens = tokenize(&p.sql).map_err(fail)?;
    let mut parser = Parser { tokens, at: 0, h, table: p.table };
    let node = parser.or().map_err(fail)?;
    if parser.peek().is_some() {
        let message = format!("unexpected {} after the filter", parser.found());
        return Err(fail(Failure::Parse(message)));
    }
    // Postgres folding and bounds: integer comparisons behave the same, and the IS TRUE
    // wrappers already give Dgraph's two-valued logic.
    let node = fold(node, isocert_history::Dialect::Postgres)
        .map_err(|e| fail(Failure::Invalid(e.into_message())))?;
    let bounds = extract_bounds(&node, h.table(p.table), isocert_history::Dialect::Postgres);
    Ok(CompiledDql { node: specialize(node), bounds })
}
