//! Splitting an SQL block into statements as the server's lexer reads it (PostgreSQL's
//! `scan.l`, MySQL's lexer): hand-written because sqlparser's tokenizer stops at the first
//! construct it does not know (a `DO` body, a dialect's syntax it lacks) and the runner must
//! still send each statement as written; one pass, linear in the block's length.

use isocert_history::Dialect;

/// Splits an SQL block into statements at `;` outside quotes, dollar quotes and comments,
/// as the server's lexer reads them, in one pass (linear in the block's length).
///
/// PostgreSQL (`scan.l`): `'...'` with `''` for a quote (backslashes are plain characters:
/// `standard_conforming_strings` is on), `E'...'` where a backslash escapes the next
/// character, `"..."` identifiers, `$tag$...$tag$` dollar quotes (a tag is an identifier
/// without `$`, or empty; a `$` inside an identifier or before a digit, `a$b`, `$1`, starts
/// none), `--` comments to the end of the line and nested `/* ... */` comments. An
/// unterminated quote or comment runs to the end of the block, as the server reads it.
/// MySQL: backslashes escape in `'...'` and `"..."` strings, `` `...` `` identifiers,
/// `#` and `-- ` comments, `/* ... */` comments that do not nest. Comments are left out of
/// the statements.
pub fn split_statements(block: &str, dialect: Dialect) -> Vec<String> {
    let mysql = dialect == Dialect::Mysql;
    let bytes = block.as_bytes();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    // Where the text not yet copied into `current` starts.
    let mut copied = 0;
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' | b'`' => {
                let escapes = mysql && b != b'`'
                    || b == b'\''
                        && i > 0
                        && matches!(bytes[i - 1], b'E' | b'e')
                        && (i < 2 || !ident(bytes[i - 2]) && bytes[i - 2] != b'$');
                i += 1;
                while i < bytes.len() {
                    if escapes && bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == b {
                        // A doubled quote is one quote character inside the literal.
                        if bytes.get(i + 1) == Some(&b) {
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'$' if !mysql && (i == 0 || !ident(bytes[i - 1]) && bytes[i - 1] != b'$') => {
                // A tag: an identifier start and identifier characters, or nothing.
                let mut end = i + 1;
                if end < bytes.len() && !bytes[end].is_ascii_digit() {
                    while end < bytes.len() && ident(bytes[end]) {
                        end += 1;
                    }
                }
                if bytes.get(end) == Some(&b'$') && !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    let tag = &block[i..=end];
                    i = match block[end + 1..].find(tag) {
                        Some(close) => end + 1 + close + tag.len(),
                        None => bytes.len(),
                    };
                    continue;
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && (!mysql || bytes.get(i + 2).is_none_or(|c| c.is_ascii_whitespace())) =>
            {
                current.push_str(&block[copied..i]);
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                copied = i;
                continue;
            }
            b'#' if mysql => {
                current.push_str(&block[copied..i]);
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                copied = i;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                current.push_str(&block[copied..i]);
                let mut depth = 1;
                i += 2;
                while i < bytes.len() && depth > 0 {
                    if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                    } else if !mysql && bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                // A comment separates tokens like a space.
                current.push(' ');
                copied = i.min(bytes.len());
                continue;
            }
            b';' => {
                current.push_str(&block[copied..i]);
                if !current.trim().is_empty() {
                    out.push(current.trim().to_string());
                }
                current.clear();
                i += 1;
                copied = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    current.push_str(&block[copied.min(bytes.len())..]);
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes_and_comments() {
        let pg = |sql: &str| split_statements(sql, Dialect::Postgres);
        assert_eq!(
            pg("SELECT ';'; -- a; comment\nDO $f$ BEGIN NULL; END $f$; /* x; */ COMMIT"),
            vec!["SELECT ';'", "DO $f$ BEGIN NULL; END $f$", "COMMIT"]
        );
        // Escape strings, doubled quotes, nested comments (issue 30, item 13).
        assert_eq!(pg(r"SELECT E'it\'s; fine'; SELECT 1"), vec![r"SELECT E'it\'s; fine'", "SELECT 1"]);
        assert_eq!(pg("SELECT 'a\\'; SELECT 2"), vec!["SELECT 'a\\'", "SELECT 2"]);
        assert_eq!(
            pg("SELECT 'it''s; x'; SELECT \"a;\"\"b\""),
            vec!["SELECT 'it''s; x'", "SELECT \"a;\"\"b\""]
        );
        assert_eq!(pg("SELECT 1 /* /* */ ; */; SELECT 2"), vec!["SELECT 1", "SELECT 2"]);
        // `$` inside an identifier or before a digit opens no dollar quote.
        assert_eq!(pg("SELECT a$b; SELECT $1; SELECT 3"), vec!["SELECT a$b", "SELECT $1", "SELECT 3"]);
        assert_eq!(pg("SELECT $$a;b$$; SELECT $q$ $$ ; $q$"), vec!["SELECT $$a;b$$", "SELECT $q$ $$ ; $q$"]);
        // An unterminated quote runs to the end, as the server reads it.
        assert_eq!(pg("SELECT 'a; SELECT 2"), vec!["SELECT 'a; SELECT 2"]);
        let my = |sql: &str| split_statements(sql, Dialect::Mysql);
        assert_eq!(
            my(r"SELECT 'it\'s; x'; # a; comment
SELECT `a;b`"),
            vec![r"SELECT 'it\'s; x'", "SELECT `a;b`"]
        );
    }

    /// A block of 60,000 `$1a` tokens splits in linear time (it took 22 s when each `$`
    /// copied the rest of the block).
    #[test]
    fn splitting_is_linear_in_dollar_signs() {
        let block = "SELECT $1a ".repeat(60_000);
        let started = std::time::Instant::now();
        assert_eq!(split_statements(&block, Dialect::Postgres).len(), 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }
}
