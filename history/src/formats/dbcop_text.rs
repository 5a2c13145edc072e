//! dbcop's `.hist` text DSL: one or more transactions per line, sessions separated by a line
//! of dashes, `//` comments.
//!
//! ```text
//! // Session 1
//! [x:=1 y:=2] [y==2 x:=3]
//! ---
//! [x==1 y:=4]!
//! ```
//!
//! `x:=1` writes version 1, `x==1` reads it, `x==?` reads the uninitialised variable, a
//! trailing `!` marks an uncommitted transaction. Variables are identifiers; isocert writes
//! an integer key `5` as `_5` and reads `_5` back as the integer 5.

use std::io::{BufRead, Write};

use super::dbcop::{build, to_sessions, DbcopEvent, DbcopTxn};
use super::Imported;
use crate::{FormatError, History, Scalar};

const FORMAT: &str = "dbcop-hist";

/// Reads a dbcop `.hist` history.
///
/// # Errors
/// A [`FormatError`] naming the line and the column of the malformed transaction or event.
pub fn read_dbcop_text<R: BufRead>(input: R) -> Result<Imported, FormatError> {
    let mut sessions: Vec<Vec<DbcopTxn>> = vec![Vec::new()];
    for (i, line) in input.lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(|e| FormatError::reading_line(e, line_no))?;
        let text = match line.find("//") {
            Some(c) => &line[..c],
            None => &line[..],
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if text.bytes().all(|b| b == b'-') {
            sessions.push(Vec::new());
            continue;
        }
        let txns =
            parse_line(text).map_err(|(col, m)| FormatError::invalid(line_no, format!("column {col}"), m))?;
        sessions.last_mut().expect("always one session").extend(txns);
    }
    sessions.retain(|s| !s.is_empty());
    Ok(Imported::plain(build(sessions)))
}

type ParseError = (usize, String);

fn parse_line(text: &str) -> Result<Vec<(Vec<DbcopEvent>, bool)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if bytes[i] != b'[' {
            return Err((
                i + 1,
                format!("expected '[' to start a transaction, found {:?}", char::from(bytes[i])),
            ));
        }
        let close =
            text[i..].find(']').ok_or_else(|| (i + 1, "transaction has no closing ']'".to_string()))? + i;
        let mut events = Vec::new();
        let mut col = i + 2;
        for word in text[i + 1..close].split(' ') {
            if !word.trim().is_empty() {
                events.push(parse_event(word.trim()).map_err(|m| (col, m))?);
            }
            col += word.len() + 1;
        }
        if events.is_empty() {
            return Err((i + 1, "empty transaction".into()));
        }
        i = close + 1;
        let committed = if bytes.get(i) == Some(&b'!') {
            i += 1;
            false
        } else {
            true
        };
        out.push((events, committed));
    }
    Ok(out)
}

fn parse_event(word: &str) -> Result<DbcopEvent, String> {
    let (variable, write, rest) = if let Some((v, r)) = word.split_once(":=") {
        (v, true, r)
    } else if let Some((v, r)) = word.split_once("==") {
        (v, false, r)
    } else {
        return Err(format!("event {word:?}: expected x:=N, x==N or x==?"));
    };
    let valid = variable.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && variable.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!("event {word:?}: variable {variable:?} is not an identifier"));
    }
    let version = if rest == "?" && !write {
        None
    } else {
        Some(
            rest.parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("event {word:?}: version {rest:?} is not a non-negative integer"))?,
        )
    };
    let variable = match variable.strip_prefix('_').and_then(|d| d.parse::<i64>().ok()) {
        Some(n) if variable[1..].bytes().all(|b| b.is_ascii_digit()) => Scalar::Int(n),
        _ => Scalar::Text(variable.into()),
    };
    Ok(DbcopEvent { write, variable, version })
}

/// Writes a history as dbcop `.hist` text, one transaction per line.
///
/// # Errors
/// [`FormatError::Unsupported`] as for dbcop JSON, and for text keys that are not identifiers
/// or negative integer keys and versions.
pub fn write_dbcop_text<W: Write>(h: &History, out: &mut W) -> Result<(), FormatError> {
    let sessions = to_sessions(h, FORMAT)?;
    for (s, session) in sessions.iter().enumerate() {
        if s > 0 {
            writeln!(out, "---")?;
        }
        for (events, committed) in session {
            let mut parts = Vec::with_capacity(events.len());
            for e in events {
                let var = match &e.variable {
                    Scalar::Int(n) if *n >= 0 => format!("_{n}"),
                    Scalar::Text(t)
                        if t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                            && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !(t.starts_with('_')
                                && t[1..].bytes().all(|b| b.is_ascii_digit())
                                && t.len() > 1) =>
                    {
                        t.to_string()
                    }
                    other => {
                        return Err(super::kvutil::unsupported(
                            FORMAT,
                            format!("variable {other} is not an identifier"),
                        ))
                    }
                };
                parts.push(match (e.write, e.version) {
                    (true, Some(v)) if v >= 0 => format!("{var}:={v}"),
                    (false, Some(v)) if v >= 0 => format!("{var}=={v}"),
                    (false, None) => format!("{var}==?"),
                    _ => {
                        return Err(super::kvutil::unsupported(FORMAT, format!("negative version of {var}")))
                    }
                });
            }
            writeln!(out, "[{}]{}", parts.join(" "), if *committed { "" } else { "!" })?;
        }
    }
    Ok(())
}
