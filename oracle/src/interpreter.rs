//! The interpreter oracle: every predicate of a history compiled once, evaluated per row.

use std::sync::OnceLock;

use isocert_history::{Dialect, History, ObjId, PredId, Status, TableId, Value, ValueId};
use sqlparser::dialect::{MySqlDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use crate::ast::Node;
use crate::bounds::extract_bounds;
use crate::compile::{CompileError, Compiler};
use crate::eval::{Ctx, RowView};
use crate::fold::{fold, specialize};
use crate::schema::Schema;
use crate::{Bounds, MatchesOracle, OracleError};

/// One compiled predicate.
#[derive(Clone, Debug)]
struct CompiledPredicate {
    table: TableId,
    /// `Err`: the predicate could not be compiled (kept only by [`Interpreter::new_lenient`]).
    node: Result<Program, OracleError>,
    bounds: Bounds,
}

/// A compiled predicate in its query language.
#[derive(Clone, Debug)]
enum Program {
    /// A SQL expression.
    Sql(Node),
    /// A MongoDB query filter.
    Mongo(crate::mongo_filter::Filter),
}

/// The SQL interpreter oracle: compiles each distinct predicate of a history once (parse
/// with sqlparser, resolve columns to [`ColId`](isocert_history::ColId)s, fold constants,
/// precompile LIKE patterns) and evaluates it with SQL three-valued logic in the history's
/// [`Dialect`].
///
/// ```
/// use isocert_history::{v1, ObjId, Op};
/// use isocert_oracle::{Interpreter, MatchesOracle};
///
/// let text = concat!(
///     r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":3},"#,
///     r#"{"f":"select","table":"kv","where":"value BETWEEN 2 AND 4 AND key IN (1, 2)","rows":[{"key":1,"value":3}]}]}"#
/// );
/// let h = v1::read_history(text.as_bytes())?;
/// let oracle = Interpreter::new(&h)?;
/// let Op::Write { obj, value } = h.txns[0].ops[0] else { unreachable!() };
/// let pred = h.txns[0].ops[1].predicate().unwrap();
/// assert!(oracle.matches(&h, pred, obj, value)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Interpreter {
    dialect: Dialect,
    /// One cell per predicate of the history, set when it is compiled: at once, or for the
    /// predicates [`Interpreter::for_checking`] defers, on first evaluation.
    predicates: Vec<OnceLock<CompiledPredicate>>,
    lenient: bool,
    schema: Schema,
    /// The history's value and table counts when it was built: with the column kinds,
    /// what the compiled predicates depend on ([`Interpreter::refresh`]).
    built_on: (usize, usize),
}

impl Interpreter {
    /// Compiles every predicate of `h`.
    ///
    /// # Errors
    /// The first predicate that does not parse, uses an unsupported construct
    /// ([`OracleError::Unsupported`], naming it) or is invalid in the dialect (a type error
    /// or a constant that fails, as the database would report when planning).
    pub fn new(h: &History) -> Result<Self, OracleError> {
        let mut i = Interpreter {
            dialect: h.dialect,
            predicates: Vec::new(),
            lenient: false,
            schema: Schema::default(),
            built_on: (h.value_count(), h.tables().len()),
        };
        i.compile_new(h)?;
        Ok(i)
    }

    /// Compiles the predicates of the transactions that did not abort, which checkers
    /// evaluate; a predicate only aborted transactions use is compiled when first evaluated
    /// (no checker evaluates one today), and [`MatchesOracle::bounds`] of such a predicate
    /// is [`Bounds::everything`] until then. More than half of a generated history's
    /// transactions abort, and compiling their predicates was about 8% of `isocert check`
    /// on one (docs/CHECKING.md, "Predicates of aborted transactions").
    ///
    /// # Errors
    /// As [`Interpreter::new`], for the predicates compiled now. A deferred predicate that
    /// does not compile gives its error when it is evaluated.
    pub fn for_checking(h: &History) -> Result<Self, OracleError> {
        let mut used = vec![false; h.predicates().len()];
        for txn in h.txns.iter().filter(|t| t.status != Status::Aborted) {
            for pred in txn.ops.iter().filter_map(|op| op.predicate()) {
                used[pred.index()] = true;
            }
        }
        let mut i = Interpreter {
            dialect: h.dialect,
            predicates: Vec::with_capacity(used.len()),
            lenient: false,
            schema: Schema::default(),
            built_on: (h.value_count(), h.tables().len()),
        };
        // As `new`: the schema is only read to compile predicates, so a history without any
        // is not scanned (every value of an item-only history: 3.6% of an Emme check, issue 34).
        if !used.is_empty() {
            i.schema.update(h);
        }
        for (index, used) in used.into_iter().enumerate() {
            let id = PredId::from_index(index);
            let cell = if used { OnceLock::from(i.compile(h, id)?) } else { OnceLock::new() };
            i.predicates.push(cell);
        }
        Ok(i)
    }

    /// Compiles predicate `id` of `h` (the schema must be up to date).
    fn compile(&self, h: &History, id: PredId) -> Result<CompiledPredicate, OracleError> {
        let kinds = self.schema.table_kinds(h, h.predicate(id).table);
        compile_predicate(h, id, self.dialect, &kinds)
    }

    /// The compiled predicate in `cell`, compiling predicate `id` of `h` into it if it was
    /// deferred; a compile error is kept, and answers every evaluation.
    #[cold]
    fn compile_deferred<'c>(
        &self,
        h: &History,
        id: PredId,
        cell: &'c OnceLock<CompiledPredicate>,
    ) -> &'c CompiledPredicate {
        cell.get_or_init(|| {
            self.compile(h, id).unwrap_or_else(|e| CompiledPredicate {
                table: h.predicate(id).table,
                node: Err(e),
                bounds: Bounds::everything(),
            })
        })
    }

    /// Compiles every predicate of `h` it can; the others answer every question with their
    /// compile error, which a fallback (the database oracle) can take over. Returns the
    /// errors too, so a caller can report what falls back.
    pub fn new_lenient(h: &History) -> (Self, Vec<OracleError>) {
        let mut i = Interpreter {
            dialect: h.dialect,
            predicates: Vec::new(),
            lenient: true,
            schema: Schema::default(),
            built_on: (h.value_count(), h.tables().len()),
        };
        // A lenient interpreter keeps compile errors per predicate instead of failing.
        if let Err(e) = i.compile_new(h) {
            return (i, vec![e]);
        }
        let errors = i.predicates.iter().filter_map(|p| p.get()?.node.as_ref().err().cloned()).collect();
        (i, errors)
    }

    /// Compiles the predicates interned into `h` since the last call (online checking).
    ///
    /// # Errors
    /// As [`Interpreter::new`]; predicates compiled before the failing one stay compiled.
    pub fn compile_new(&mut self, h: &History) -> Result<(), OracleError> {
        if self.predicates.len() < h.predicates().len() {
            self.schema.update(h);
        }
        while self.predicates.len() < h.predicates().len() {
            let id = PredId::from_index(self.predicates.len());
            match self.compile(h, id) {
                Ok(c) => self.predicates.push(OnceLock::from(c)),
                Err(e) if self.lenient => {
                    let table = h.predicate(id).table;
                    self.predicates.push(OnceLock::from(CompiledPredicate {
                        table,
                        node: Err(e),
                        bounds: Bounds::everything(),
                    }));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Brings the interpreter up to date with `h` after `h` changed in place, as a recovery
    /// changes it (outcomes settled, a foreign writer's rows interned), so that it answers
    /// as [`Interpreter::new`] on `h` would. Predicates are compiled against the column
    /// kinds the history holds; only when those changed (a foreign writer put text in an
    /// integer column, ...) is every predicate compiled again, so recovery and the check
    /// of a history share one compilation.
    ///
    /// # Errors
    /// As [`Interpreter::new`].
    pub fn refresh(&mut self, h: &History) -> Result<(), OracleError> {
        let mut now = Schema::default();
        now.update(h);
        let unchanged = self.dialect == h.dialect
            && self.built_on == (h.value_count(), h.tables().len())
            && self.schema.same_kinds(&now);
        if unchanged {
            return self.compile_new(h);
        }
        *self = if self.lenient { Interpreter::new_lenient(h).0 } else { Interpreter::new(h)? };
        Ok(())
    }

    /// Whether predicate `pred` compiled (false for predicates a lenient interpreter skipped,
    /// and for those [`Interpreter::for_checking`] deferred, until first evaluated).
    pub fn is_compiled(&self, pred: PredId) -> bool {
        self.predicates.get(pred.index()).and_then(OnceLock::get).is_some_and(|p| p.node.is_ok())
    }

    /// The three-valued result of predicate `pred` on version `value` of `obj`:
    /// `Some(true)` TRUE, `Some(false)` FALSE, `None` UNKNOWN (NULL) or no row.
    ///
    /// # Errors
    /// As [`MatchesOracle::matches`].
    pub fn truth(
        &self,
        h: &History,
        pred: PredId,
        obj: ObjId,
        value: ValueId,
    ) -> Result<Option<bool>, OracleError> {
        // Not `ok_or`: that builds (and drops) the error on every call of this hot path.
        let Some(cell) = self.predicates.get(pred.index()) else {
            return Err(OracleError::NotCompiled { pred });
        };
        let c = match cell.get() {
            Some(c) => c,
            None => self.compile_deferred(h, pred, cell),
        };
        let node = match c.node.as_ref().map_err(Clone::clone)? {
            Program::Sql(node) => node,
            Program::Mongo(filter) => return self.mongo_truth(h, filter, c.table, (pred, obj, value)),
        };
        let o = h.object(obj);
        if o.table != c.table {
            return Ok(None);
        }
        let row = match h.value(value) {
            Value::Absent => return Ok(None),
            Value::Scalar(s) => RowView::Kv { key: &o.key, value: s },
            Value::Row(r) => RowView::Row(r),
            Value::List(_) => {
                return Err(eval_error(
                    h,
                    pred,
                    obj,
                    value,
                    "a predicate cannot be evaluated on a list".into(),
                ))
            }
        };
        let ctx = Ctx { row, table: h.table(c.table), dialect: self.dialect };
        node.truth(&ctx, "WHERE").map_err(|e| eval_error(h, pred, obj, value, e.into_message()))
    }
}

impl Interpreter {
    /// A MongoDB filter on one version: `Some(true)` matches, `Some(false)` does not,
    /// `None` no document (absent version or another collection).
    fn mongo_truth(
        &self,
        h: &History,
        filter: &crate::mongo_filter::Filter,
        table: TableId,
        (pred, obj, value): (PredId, ObjId, ValueId),
    ) -> Result<Option<bool>, OracleError> {
        use crate::mongo_filter::{evaluate, HistoryDoc};
        let o = h.object(obj);
        if o.table != table {
            return Ok(None);
        }
        let doc = match h.value(value) {
            Value::Absent => return Ok(None),
            Value::Scalar(s) => HistoryDoc::Kv { key: &o.key, value: s },
            Value::Row(r) => HistoryDoc::Row { key: &o.key, row: r, table: h.table(table) },
            Value::List(_) => {
                return Err(eval_error(h, pred, obj, value, "a filter cannot be evaluated on a list".into()))
            }
        };
        evaluate(filter, &doc).map(Some).map_err(|m| eval_error(h, pred, obj, value, m))
    }
}

fn eval_error(h: &History, pred: PredId, obj: ObjId, value: ValueId, message: String) -> OracleError {
    OracleError::Eval {
        pred,
        sql: h.predicate(pred).sql.to_string(),
        row: format!("{} = {}", h.object_label(obj), h.value_label(obj, value)),
        message,
    }
}

impl MatchesOracle for Interpreter {
    #[inline]
    fn matches(&self, h: &History, pred: PredId, obj: ObjId, value: ValueId) -> Result<bool, OracleError> {
        Ok(self.truth(h, pred, obj, value)? == Some(true))
    }

    fn bounds(&self, pred: PredId) -> Bounds {
        self.predicates
            .get(pred.index())
            .and_then(OnceLock::get)
            .map(|p| p.bounds.clone())
            .unwrap_or_default()
    }
}

/// Parses one `where` text as a single SQL expression in `dialect`.
pub(crate) fn parse_predicate(sql: &str, dialect: Dialect) -> Result<sqlparser::ast::Expr, String> {
    let pg = PostgreSqlDialect {};
    let my = MySqlDialect {};
    let d: &dyn sqlparser::dialect::Dialect = match dialect {
        Dialect::Postgres => &pg,
        Dialect::Mysql => &my,
        Dialect::Mongodb => return Err("a MongoDB query filter is not a SQL expression".into()),
        // Dgraph's predicates are DQL filters (crate::dql); SQL text in them reads as PostgreSQL.
        Dialect::Dgraph => &pg,
    };
    let mut parser = Parser::new(d).try_with_sql(sql).map_err(|e| e.to_string())?;
    let parsed = parser.parse_expr().map_err(|e| e.to_string());
    let next = parser.peek_token();
    let result = match parsed {
        Ok(_) if next.token != Token::EOF => Err(format!("unexpected {} after the expression", next.token)),
        other => other,
    };
    result.map_err(|message| {
        // sqlparser gives up at its recursion limit, sometimes with a message about a later
        // token ("unexpected c after the expression" for 49 nested NOTs): name the limit.
        let depth = sqlparser::tokenizer::Tokenizer::new(d, sql).tokenize().map_or(0, |t| nesting_depth(&t));
        if depth + 2 >= SQLPARSER_DEPTH {
            format!(
                "the expression nests {depth} levels deep (parentheses and NOT, - or + prefixes); the SQL parser \
                 reads at most {} (its recursion limit)",
                SQLPARSER_DEPTH - 2
            )
        } else {
            message
        }
    })
}

/// sqlparser's recursion limit (its default, kept: a deeper parse could overflow the stack
/// of a server's worker thread): one level per parenthesis and per prefix operator.
const SQLPARSER_DEPTH: usize = 50;

/// How deep `tokens` nest: open parentheses plus the runs of prefix operators (`NOT`, `-`,
/// `+`) around the deepest point, the levels sqlparser recurses through.
fn nesting_depth(tokens: &[Token]) -> usize {
    use sqlparser::keywords::Keyword;
    let (mut outer, mut outer_sum, mut run, mut deepest) = (Vec::new(), 0usize, 0usize, 0usize);
    let mut after_operand = false;
    for token in tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_))) {
        let operand = match token {
            Token::Word(w) => !matches!(w.keyword, Keyword::NOT | Keyword::AND | Keyword::OR),
            Token::Number(..) | Token::SingleQuotedString(_) | Token::RParen => true,
            _ => false,
        };
        match token {
            Token::LParen => {
                outer.push(run + 1);
                outer_sum += run + 1;
                run = 0;
            }
            Token::RParen => {
                run = 0;
                outer_sum -= outer.pop().unwrap_or(0);
            }
            Token::Word(w) if w.keyword == Keyword::NOT => run += 1,
            Token::Minus | Token::Plus if !after_operand => run += 1,
            _ => run = 0,
        }
        after_operand = operand;
        deepest = deepest.max(outer_sum + run);
    }
    deepest
}

/// Constructs PostgreSQL accepts that sqlparser cannot parse, named so that the error says
/// what is not supported instead of reporting a parse error at a later token:
/// `BETWEEN SYMMETRIC` / `BETWEEN ASYMMETRIC`.
fn unsupported_keyword_construct(sql: &str) -> Option<String> {
    // Both constructs contain the word "symmetric" (spelled out unless through a `U&`
    // escape): without it there is nothing to tokenize for, and tokenizing was a quarter of
    // compiling gen's short range predicates (docs/PERFORMANCE.md, issue 16).
    if !sql.contains('&') && !sql.as_bytes().windows(9).any(|w| w.eq_ignore_ascii_case(b"symmetric")) {
        return None;
    }
    let tokens = sqlparser::tokenizer::Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut words = tokens.iter().filter_map(|t| match t {
        Token::Whitespace(_) => None,
        Token::Word(w) => Some(Some(w.value.to_ascii_uppercase())),
        _ => Some(None),
    });
    let mut previous: Option<String> = None;
    for word in &mut words {
        if let (Some(p), Some(w)) = (previous.as_deref(), word.as_deref()) {
            if p == "BETWEEN" && (w == "SYMMETRIC" || w == "ASYMMETRIC") {
                return Some(format!("BETWEEN {w}"));
            }
        }
        previous = word;
    }
    None
}

fn compile_predicate(
    h: &History,
    pred: PredId,
    dialect: Dialect,
    kinds: &[u8],
) -> Result<CompiledPredicate, OracleError> {
    let p = h.predicate(pred);
    if dialect == Dialect::Dgraph {
        let c = crate::dql::compile(h, pred)?;
        return Ok(CompiledPredicate { table: p.table, node: Ok(Program::Sql(c.node)), bounds: c.bounds });
    }
    // Quoted in error messages: a pathological predicate can be megabytes long.
    let sql = isocert_history::quote_capped(&p.sql);
    if dialect == Dialect::Mongodb {
        return compile_mongo(h, pred, sql);
    }
    if let Some(construct) = unsupported_keyword_construct(&p.sql) {
        return Err(OracleError::Unsupported { pred, sql, construct });
    }
    // The commonest shape (integer comparisons joined by AND) without sqlparser; the
    // same expression either way (crate::simple).
    let expr = match crate::simple::parse_simple(&p.sql) {
        Some(expr) => expr,
        None => parse_predicate(&p.sql, dialect).map_err(|message| OracleError::Parse {
            pred,
            sql: sql.clone(),
            message,
        })?,
    };
    let table = h.table(p.table);
    let compiler = Compiler { table, dialect, kinds };
    let node = compiler.predicate(&expr).map_err(|e| match e {
        CompileError::Unsupported(construct) => OracleError::Unsupported {
            pred,
            sql: sql.clone(),
            construct: isocert_history::quote_capped(&construct),
        },
        CompileError::Invalid(message) => {
            OracleError::Invalid { pred, sql: sql.clone(), message: isocert_history::quote_capped(&message) }
        }
    })?;
    let node = fold(node, dialect).map_err(|e| OracleError::Invalid {
        pred,
        sql: sql.clone(),
        message: e.into_message(),
    })?;
    let bounds = extract_bounds(&node, table, dialect);
    let node = specialize(node);
    Ok(CompiledPredicate { table: p.table, node: Ok(Program::Sql(node)), bounds })
}

/// Compiles a MongoDB query filter (the `mongodb` dialect).
fn compile_mongo(h: &History, pred: PredId, sql: String) -> Result<CompiledPredicate, OracleError> {
    use crate::mongo_filter::{compile_filter, filter_bounds, FilterError};
    let p = h.predicate(pred);
    let table = h.table(p.table);
    let filter = compile_filter(&p.sql, table).map_err(|e| match e {
        FilterError::Parse(message) => OracleError::Parse { pred, sql: sql.clone(), message },
        FilterError::Unsupported(construct) => OracleError::Unsupported { pred, sql: sql.clone(), construct },
        FilterError::Invalid(message) => OracleError::Invalid { pred, sql: sql.clone(), message },
    })?;
    let bounds = filter_bounds(&filter, table);
    Ok(CompiledPredicate { table: p.table, node: Ok(Program::Mongo(filter)), bounds })
}

#[cfg(test)]
mod tests {
    use isocert_history::{v1, History, ObjId, PredId, ValueId};

    use super::Interpreter;
    use crate::MatchesOracle;

    /// A kv history whose `value` column held only integers, read by a predicate.
    const INTEGERS: &str = concat!(
        r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":3},"#,
        r#"{"f":"select","table":"kv","where":"value > 2","rows":[{"key":1,"value":3}]}]}"#
    );

    fn read(lines: &[&str]) -> History {
        v1::read_history(lines.join("\n").as_bytes()).expect("a valid history")
    }

    /// Every answer of `i` on `h`, for comparing two interpreters.
    fn answers(i: &Interpreter, h: &History) -> Vec<Option<bool>> {
        let mut out = Vec::new();
        for o in 0..h.object_count() {
            for v in 0..h.value_count() {
                let (obj, value) = (ObjId::from_index(o), ValueId::from_index(v));
                out.push(i.matches(h, PredId::from_index(0), obj, value).ok());
            }
        }
        out
    }

    #[test]
    fn refresh_recompiles_when_a_column_gains_a_kind() {
        let before = read(&[INTEGERS]);
        let after = read(&[INTEGERS, r#"{"id":2,"session":1,"ops":[{"f":"w","key":2,"value":"abc"}]}"#]);
        let mut refreshed = Interpreter::new(&before).expect("compiles");
        refreshed.refresh(&after).expect("compiles");
        let fresh = Interpreter::new(&after).expect("compiles");
        assert_eq!(format!("{refreshed:?}"), format!("{fresh:?}"));
    }

    #[test]
    fn refresh_keeps_the_compilation_when_the_kinds_stay() {
        let before = read(&[INTEGERS]);
        let after = read(&[INTEGERS, r#"{"id":2,"session":1,"ops":[{"f":"w","key":1,"value":3}]}"#]);
        let mut refreshed = Interpreter::new(&before).expect("compiles");
        let compiled = format!("{:?}", refreshed.predicates);
        refreshed.refresh(&after).expect("compiles");
        assert_eq!(format!("{:?}", refreshed.predicates), compiled);
        let fresh = Interpreter::new(&after).expect("compiles");
        assert_eq!(answers(&refreshed, &after), answers(&fresh, &after));
    }
}
