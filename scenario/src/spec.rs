//! The isolationtester `.spec` format, as PostgreSQL's `src/test/isolation/specparse.y` and
//! `specscanner.l` define it (PostgreSQL 14 and later, which still read the older files):
//!
//! ```text
//! setup { SQL }                  zero or more, run once per permutation before it
//! teardown { SQL }               optional, run after it
//! session NAME                   one or more; NAME bare (s1) or quoted ("s1")
//!   setup { SQL }                optional, on the session's connection
//!   step NAME { SQL }            one or more
//!   teardown { SQL }             optional
//! permutation STEP STEP(BLOCKER, *) ...   zero or more; none means every interleaving
//! ```
//!
//! `#` starts a comment to the end of the line; an SQL block may hold nested braces. One
//! comment is read: `# isocert-check: LEVEL` names the level to check the permutations at
//! (what `--check` says on the command line, which wins), so that a reproducer `isocert
//! hunt` writes reproduces by itself.
//! A permutation step may carry blocker markers in parentheses: another step's name (this
//! step waits until that one completes), `*` (this step is expected to block on a lock)
//! or `NAME notices N`. isocert's runner detects lock waits itself, so the markers are read
//! and kept but do not drive the run.

use std::fmt;

use isocert_history::IsolationLevel;

use crate::interleave::{interleavings, Interleavings};

/// A parsed scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    /// The global setup blocks, in order.
    pub setup: Vec<SqlBlock>,
    /// The global teardown block.
    pub teardown: Option<SqlBlock>,
    /// The sessions, in order.
    pub sessions: Vec<SessionSpec>,
    /// The permutations the file lists (empty: every interleaving of the sessions' steps).
    pub permutations: Vec<Permutation>,
    /// The level to check at, from a `# isocert-check: LEVEL` comment.
    pub check: Option<IsolationLevel>,
}

/// The comment that names the level to check at ([`Spec::check`]).
pub const CHECK_DIRECTIVE: &str = "isocert-check:";

/// SQL text from a `{ ... }` block, with the line it starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlBlock {
    /// The text between the braces, trimmed.
    pub sql: String,
    /// Its first line in the file (from 1).
    pub line: usize,
}

/// One session: a connection running its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSpec {
    /// Its name.
    pub name: String,
    /// SQL run when it connects.
    pub setup: Option<SqlBlock>,
    /// Its steps.
    pub steps: Vec<StepSpec>,
    /// SQL run when the permutation is over.
    pub teardown: Option<SqlBlock>,
}

/// A named step of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSpec {
    /// Its name (unique in the file).
    pub name: String,
    /// Its SQL.
    pub sql: SqlBlock,
}

/// One permutation: the order in which steps are started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    /// The steps, with their blocker markers.
    pub steps: Vec<PermutationStep>,
    /// The line of the `permutation` keyword (0 for a generated permutation).
    pub line: usize,
}

/// A step in a permutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermutationStep {
    /// The step's name.
    pub name: String,
    /// The markers in parentheses after it (`s2c`, `*`, `s1 notices 1`), as written.
    pub blockers: Vec<String>,
}

/// Why a spec file could not be read: the line and what was wrong there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SpecError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong, naming the construct.
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Sql(String),
    Open,
    Close,
    Comma,
    Star,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w}"),
            Token::Quoted(q) => write!(f, "\"{q}\""),
            Token::Sql(_) => f.write_str("an SQL block"),
            Token::Open => f.write_str("("),
            Token::Close => f.write_str(")"),
            Token::Comma => f.write_str(","),
            Token::Star => f.write_str("*"),
        }
    }
}

/// The tokens of `text` with their lines; `comments` receives each comment's text (after
/// the `#`) with its line.
fn lex(text: &str, comments: &mut Vec<(String, usize)>) -> Result<Vec<(Token, usize)>, SpecError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '#' => {
                let start = i + 1;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                comments.push((chars[start..i].iter().collect(), line));
            }
            '"' => {
                let start = line;
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(SpecError { line: start, message: "unterminated quoted name".into() })
                        }
                        Some('\n') => {
                            return Err(SpecError {
                                line,
                                message: "unexpected newline in a quoted name".into(),
                            })
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            s.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            s.push(c);
                            i += 1;
                        }
                    }
                }
                out.push((Token::Quoted(s), start));
            }
            '{' => {
                let start = line;
                let mut depth = 1;
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(SpecError {
                                line: start,
                                message: "unterminated SQL block ({ without })".into(),
                            })
                        }
                        Some('{') => depth += 1,
                        Some('}') => {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                        Some('\n') => line += 1,
                        Some(_) => {}
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                out.push((Token::Sql(s.trim().to_string()), start));
            }
            '(' => {
                out.push((Token::Open, line));
                i += 1;
            }
            ')' => {
                out.push((Token::Close, line));
                i += 1;
            }
            ',' => {
                out.push((Token::Comma, line));
                i += 1;
            }
            '*' => {
                out.push((Token::Star, line));
                i += 1;
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut s = String::new();
                while let Some(&c) = chars.get(i).filter(|c| c.is_alphanumeric() || **c == '_') {
                    s.push(c);
                    i += 1;
                }
                out.push((Token::Word(s), line));
            }
            other => return Err(SpecError { line, message: format!("unexpected character {other:?}") }),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.tokens.get(self.at).or(self.tokens.last()).map_or(1, |(_, l)| *l)
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, SpecError> {
        Err(SpecError { line: self.line(), message: message.into() })
    }

    fn name(&mut self, what: &str) -> Result<String, SpecError> {
        match self.tokens.get(self.at) {
            Some((Token::Word(w) | Token::Quoted(w), _)) => {
                let w = w.clone();
                self.at += 1;
                Ok(w)
            }
            Some((t, _)) => self.error(format!("expected {what}, found {t}")),
            None => self.error(format!("expected {what}, found the end of the file")),
        }
    }

    fn sql(&mut self, after: &str) -> Result<SqlBlock, SpecError> {
        match self.tokens.get(self.at) {
            Some((Token::Sql(s), line)) => {
                let block = SqlBlock { sql: s.clone(), line: *line };
                self.at += 1;
                Ok(block)
            }
            Some((t, _)) => self.error(format!("expected {{ SQL }} after {after}, found {t}")),
            None => self.error(format!("expected {{ SQL }} after {after}, found the end of the file")),
        }
    }

    fn permutation_step(&mut self) -> Result<PermutationStep, SpecError> {
        let name = self.name("a step name")?;
        let mut blockers = Vec::new();
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            loop {
                let marker = match self.peek() {
                    Some(Token::Star) => {
                        self.at += 1;
                        "*".to_string()
                    }
                    _ => {
                        let mut m = self.name("a blocker (a step name or *)")?;
                        if self.keyword("notices") {
                            self.at += 1;
                            m.push_str(" notices ");
                            m.push_str(&self.name("a notice count")?);
                        }
                        m
                    }
                };
                blockers.push(marker);
                match self.peek() {
                    Some(Token::Comma) => self.at += 1,
                    Some(Token::Close) => {
                        self.at += 1;
                        break;
                    }
                    _ => return self.error(format!("expected , or ) in the markers of step {name}")),
                }
            }
        }
        Ok(PermutationStep { name, blockers })
    }
}

/// The level a `# isocert-check: LEVEL` comment names (the first such comment; a second
/// one naming another level is refused).
fn check_directive(comments: &[(String, usize)]) -> Result<Option<IsolationLevel>, SpecError> {
    let mut found: Option<(IsolationLevel, usize)> = None;
    for (text, line) in comments {
        let Some(name) = text.trim().strip_prefix(CHECK_DIRECTIVE) else { continue };
        let level: IsolationLevel = name.trim().parse().map_err(|e: isocert_history::UnknownName| {
            SpecError { line: *line, message: format!("# {CHECK_DIRECTIVE} {e}") }
        })?;
        match found {
            Some((earlier, at)) if earlier != level => {
                return Err(SpecError {
                    line: *line,
                    message: format!("# {CHECK_DIRECTIVE} {level}, but line {at} names {earlier}"),
                })
            }
            Some(_) => {}
            None => found = Some((level, *line)),
        }
    }
    Ok(found.map(|(level, _)| level))
}

/// Parses a spec file.
///
/// # Errors
/// A [`SpecError`] naming the line and the construct: an unknown keyword, a missing SQL
/// block, a permutation naming a step no session has, two steps with one name, no session,
/// a `# isocert-check:` comment naming no level.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let mut comments = Vec::new();
    let mut p = Parser { tokens: lex(text, &mut comments)?, at: 0 };
    let mut spec = Spec { check: check_directive(&comments)?, ..Spec::default() };
    while p.keyword("setup") {
        p.at += 1;
        spec.setup.push(p.sql("setup")?);
    }
    if p.keyword("teardown") {
        p.at += 1;
        spec.teardown = Some(p.sql("teardown")?);
    }
    while p.keyword("session") {
        p.at += 1;
        let name = p.name("a session name")?;
        let mut session = SessionSpec { name, setup: None, steps: Vec::new(), teardown: None };
        if p.keyword("setup") {
            p.at += 1;
            session.setup = Some(p.sql("setup")?);
        }
        while p.keyword("step") {
            p.at += 1;
            let name = p.name("a step name")?;
            let sql = p.sql(&format!("step {name}"))?;
            session.steps.push(StepSpec { name, sql });
        }
        if session.steps.is_empty() {
            return p.error(format!("session {} has no step", session.name));
        }
        if p.keyword("teardown") {
            p.at += 1;
            session.teardown = Some(p.sql("teardown")?);
        }
        spec.sessions.push(session);
    }
    if spec.sessions.is_empty() {
        return match p.peek() {
            Some(t) => {
                p.error(format!("unexpected {t} (expected setup, teardown or session, in that order)"))
            }
            None => p.error("expected a session"),
        };
    }
    while p.keyword("permutation") {
        let line = p.line();
        p.at += 1;
        let mut steps = Vec::new();
        while matches!(p.peek(), Some(Token::Word(w)) if w != "permutation")
            || matches!(p.peek(), Some(Token::Quoted(_)))
        {
            steps.push(p.permutation_step()?);
        }
        if steps.is_empty() {
            return p.error("a permutation names no step");
        }
        spec.permutations.push(Permutation { steps, line });
    }
    if let Some((t, line)) = p.tokens.get(p.at) {
        return Err(SpecError {
            line: *line,
            message: format!(
                "unexpected {t} (expected setup, teardown, session, step or permutation in that order)"
            ),
        });
    }
    let mut names = std::collections::HashSet::new();
    for s in &spec.sessions {
        for step in &s.steps {
            if !names.insert(step.name.as_str()) {
                return Err(SpecError {
                    line: step.sql.line,
                    message: format!("step {} is defined twice", step.name),
                });
            }
        }
    }
    for perm in &spec.permutations {
        for step in &perm.steps {
            if !names.contains(step.name.as_str()) {
                return Err(SpecError {
                    line: perm.line,
                    message: format!("permutation names step {}, which no session has", step.name),
                });
            }
            // As isolationtester: a marker names a step (`a(b)`, or `a(b notices 1)`, b's
            // notices), or is `*`.
            for marker in &step.blockers {
                let name = marker.split_once(" notices ").map_or(marker.as_str(), |(step, _)| step);
                if name != "*" && !names.contains(name) {
                    return Err(SpecError {
                        line: perm.line,
                        message: format!(
                            "permutation step {} waits for step {name}, which no session has",
                            step.name
                        ),
                    });
                }
            }
        }
    }
    Ok(spec)
}

impl Spec {
    /// The session running step `name`.
    pub fn session_of(&self, name: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.steps.iter().any(|st| st.name == name))
    }

    /// The step called `name`.
    pub fn step(&self, name: &str) -> Option<&StepSpec> {
        self.sessions.iter().flat_map(|s| &s.steps).find(|st| st.name == name)
    }

    /// How many permutations run: those listed, or the number of interleavings of the
    /// sessions' steps that keep each session's order (the multinomial coefficient
    /// `(n1 + n2 + ...)! / (n1! n2! ...)`); `None` when it does not fit 64 bits.
    pub fn permutation_count(&self) -> Option<u64> {
        if !self.permutations.is_empty() {
            return Some(self.permutations.len() as u64);
        }
        let counts: Vec<usize> = self.sessions.iter().map(|s| s.steps.len()).collect();
        interleavings(&counts)
    }

    /// Permutation `n` (from 0) of those [`Spec::permutation_count`] counts, built on its
    /// own: the listed one, or the `n`-th interleaving in isolationtester's order (the
    /// first session's next step first), found by counting the interleavings each choice
    /// leaves instead of listing them. `None` when there is no such permutation.
    pub fn permutation(&self, n: u64) -> Option<Permutation> {
        if !self.permutations.is_empty() {
            return self.permutations.get(usize::try_from(n).ok()?).cloned();
        }
        let mut left: Vec<usize> = self.sessions.iter().map(|s| s.steps.len()).collect();
        let total: usize = left.iter().sum();
        let mut rest = n;
        let mut steps = Vec::with_capacity(total);
        for _ in 0..total {
            let mut chosen = None;
            for s in 0..left.len() {
                if left[s] == 0 {
                    continue;
                }
                left[s] -= 1;
                // Saturating: a count beyond 64 bits is more than any `rest` can reach.
                let after = interleavings(&left).unwrap_or(u64::MAX);
                if rest < after {
                    chosen = Some(s);
                    break;
                }
                left[s] += 1;
                rest -= after;
            }
            let s = chosen?;
            let session = &self.sessions[s];
            let name = session.steps[session.steps.len() - left[s] - 1].name.clone();
            steps.push(PermutationStep { name, blockers: Vec::new() });
        }
        (rest == 0).then_some(Permutation { steps, line: 0 })
    }

    /// Every permutation in order, built one at a time (a spec without `permutation`
    /// lines can have more interleavings than memory holds).
    pub fn permutations(&self) -> impl Iterator<Item = Permutation> + '_ {
        Interleavings::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE_SKEW: &str = r#"# Write skew (a comment)
setup
{
  CREATE TABLE t (id int PRIMARY KEY, v int);
  INSERT INTO t VALUES (1, 10), (2, 20);
}
teardown { DROP TABLE t; }

session s1
setup { BEGIN ISOLATION LEVEL SERIALIZABLE; }
step r1 { SELECT * FROM t WHERE id = 2; }
step w1 { UPDATE t SET v = 11 WHERE id = 1; }
step c1 { COMMIT; }

session "s 2"
setup { BEGIN ISOLATION LEVEL SERIALIZABLE; }
step r2 { SELECT * FROM t WHERE id = 1; }
step w2 { UPDATE t SET v = 21 WHERE id = 2; DO $$ BEGIN PERFORM 1; END $$; }
step c2 { COMMIT; }

permutation r1 r2 w1 w2 c1 c2
permutation r1 w1(*) r2 "w2"(r1, * , c1 notices 1) c1 c2
"#;

    #[test]
    fn sessions_steps_permutations_and_markers() {
        let spec = parse(WRITE_SKEW).unwrap();
        assert_eq!(spec.setup.len(), 1);
        assert_eq!(spec.setup[0].line, 3);
        assert!(spec.setup[0].sql.starts_with("CREATE TABLE t"));
        assert_eq!(spec.teardown.as_ref().unwrap().sql, "DROP TABLE t;");
        assert_eq!(spec.sessions.len(), 2);
        assert_eq!(spec.sessions[1].name, "s 2");
        assert_eq!(
            spec.sessions[1].steps[1].sql.sql,
            "UPDATE t SET v = 21 WHERE id = 2; DO $$ BEGIN PERFORM 1; END $$;"
        );
        assert_eq!(spec.permutations.len(), 2);
        let p = &spec.permutations[1];
        assert_eq!(p.steps[1].blockers, vec!["*"]);
        assert_eq!(p.steps[3].name, "w2");
        assert_eq!(p.steps[3].blockers, vec!["r1", "*", "c1 notices 1"]);
        assert_eq!(spec.session_of("w2"), Some(1));
    }

    #[test]
    fn a_check_comment_names_the_level_to_check_and_other_comments_name_none() {
        assert_eq!(parse(WRITE_SKEW).unwrap().check, None);
        let with = format!("# isocert-check: snapshot-isolation\n{WRITE_SKEW}");
        assert_eq!(parse(&with).unwrap().check, Some(IsolationLevel::SnapshotIsolation));
        let alias = format!("#isocert-check:ser\n{WRITE_SKEW}# isocert-check: serializable\n");
        assert_eq!(parse(&alias).unwrap().check, Some(IsolationLevel::Serializable));
        // In an SQL block it is SQL, not a comment.
        let in_sql = WRITE_SKEW.replace("DROP TABLE t;", "DROP TABLE t; -- # isocert-check: si");
        assert_eq!(parse(&in_sql).unwrap().check, None);

        let e = parse(&format!("{WRITE_SKEW}# isocert-check: sometimes\n")).unwrap_err();
        assert_eq!(e.line, WRITE_SKEW.lines().count() + 1, "{e}");
        assert!(e.message.contains("isocert-check") && e.message.contains("sometimes"), "{e}");
        let e = parse(&format!("# isocert-check: si\n{WRITE_SKEW}# isocert-check: ser\n")).unwrap_err();
        assert!(e.message.contains("line 1 names snapshot-isolation"), "{e}");
    }

    #[test]
    fn without_permutations_every_interleaving_runs() {
        let text: String =
            WRITE_SKEW.lines().filter(|l| !l.starts_with("permutation")).collect::<Vec<_>>().join("\n");
        let spec = parse(&text).unwrap();
        // 6 steps, 3 per session: C(6, 3) = 20 interleavings keeping each session's order.
        let all: Vec<Permutation> = spec.permutations().collect();
        assert_eq!(all.len(), 20);
        assert_eq!(spec.permutation_count(), Some(20));
        assert!(all.iter().all(|p| p.steps.len() == 6));
        // isolationtester's order: the first session's steps first, the reverse last.
        let names = |p: &Permutation| p.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(" ");
        assert_eq!(names(&all[0]), "r1 w1 c1 r2 w2 c2");
        assert_eq!(names(&all[19]), "r2 w2 c2 r1 w1 c1");
        // Each built on its own is the one the walk gives.
        for (n, p) in all.iter().enumerate() {
            assert_eq!(spec.permutation(n as u64).as_ref(), Some(p), "permutation {n}");
        }
        assert_eq!(spec.permutation(20), None);
    }

    /// The walk against a brute-force reference: every sequence of session numbers with
    /// the right counts, in lexicographic order, for several shapes.
    #[test]
    fn interleavings_match_a_brute_force_listing() {
        for counts in [vec![1], vec![2, 1], vec![1, 2, 2], vec![3, 0, 2], vec![2, 2, 2]] {
            let mut text = String::new();
            for (s, n) in counts.iter().enumerate() {
                if *n == 0 {
                    continue;
                }
                text.push_str(&format!("session s{s}\n"));
                for i in 0..*n {
                    text.push_str(&format!("step s{s}_{i} {{ SELECT 1; }}\n"));
                }
            }
            let spec = parse(&text).unwrap();
            let sessions: Vec<usize> = counts.iter().copied().filter(|n| *n > 0).collect();
            let total: usize = sessions.iter().sum();
            let mut want = Vec::new();
            let mut seq = vec![0usize; total];
            'all: loop {
                let ok = (0..sessions.len()).all(|s| seq.iter().filter(|&&x| x == s).count() == sessions[s]);
                if ok {
                    want.push(seq.clone());
                }
                for i in (0..total).rev() {
                    seq[i] += 1;
                    if seq[i] < sessions.len() {
                        continue 'all;
                    }
                    seq[i] = 0;
                }
                break;
            }
            let got: Vec<Vec<usize>> = spec
                .permutations()
                .map(|p| p.steps.iter().map(|s| spec.session_of(&s.name).unwrap()).collect())
                .collect();
            assert_eq!(got, want, "{counts:?}");
            assert_eq!(spec.permutation_count(), Some(want.len() as u64), "{counts:?}");
        }
    }

    #[test]
    fn many_interleavings_are_counted_without_being_built() {
        // 2 sessions of 16 steps: C(32, 16) interleavings; 4 of 40: beyond 64 bits.
        let mut text = String::new();
        for s in 0..4 {
            text.push_str(&format!("session s{s}\n"));
            for i in 0..40 {
                text.push_str(&format!("step s{s}_{i} {{ SELECT 1; }}\n"));
            }
        }
        assert_eq!(parse(&text).unwrap().permutation_count(), None);
        let mut text = String::new();
        for s in 0..2 {
            text.push_str(&format!("session s{s}\n"));
            for i in 0..16 {
                text.push_str(&format!("step s{s}_{i} {{ SELECT 1; }}\n"));
            }
        }
        let spec = parse(&text).unwrap();
        assert_eq!(spec.permutation_count(), Some(601_080_390));
        let last = spec.permutation(601_080_389).unwrap();
        assert_eq!(last.steps[0].name, "s1_0");
        assert_eq!(last.steps[31].name, "s0_15");
        assert!(spec.permutation(601_080_390).is_none());
        assert_eq!(spec.permutations().take(3).count(), 3);
    }

    #[test]
    fn errors_name_the_line_and_construct() {
        let e = parse("session s1\nstep a { SELECT 1; }\npermutation a b\n").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (3, "permutation names step b, which no session has"));
        let e = parse("setup { SELECT 1;\n").unwrap_err();
        assert!(e.message.contains("unterminated SQL block"), "{e}");
        let e = parse("session s1\nstep a\n").unwrap_err();
        assert!(e.message.contains("expected { SQL } after step a"), "{e}");
        let e = parse("session s1\nstep a { x }\nstep a { y }\n").unwrap_err();
        assert!(e.message.contains("defined twice"), "{e}");
        let e = parse("sesion s1\n").unwrap_err();
        assert!(e.message.contains("unexpected sesion"), "{e}");
        let e = parse("session s1\nstep a { x }\npermutation a(b\n").unwrap_err();
        assert!(e.message.contains("markers of step a"), "{e}");
        let e = parse("session s1\nstep a { x }\npermutation a(b)\n").unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (3, "permutation step a waits for step b, which no session has")
        );
        let e = parse("session s1\nstep a { x }\npermutation a(s2 notices 1)\n").unwrap_err();
        assert!(e.message.contains("waits for step s2"), "{e}");
        assert!(parse("session s1\nstep a { x }\npermutation a(a notices 1, *)\n").is_ok());
        let e = parse("setup { x }\n").unwrap_err();
        assert!(e.message.contains("expected a session"), "{e}");
    }
}
