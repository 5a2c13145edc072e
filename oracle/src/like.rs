//! LIKE and ILIKE patterns, compiled once and matched without allocation.

use crate::value::EvalError;

/// How characters compare in a pattern match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Exactly (LIKE in the C collation).
    None,
    /// ASCII letters case-insensitively (ILIKE under PostgreSQL's C ctype).
    Ascii,
    /// Unicode simple lowercase (MySQL's case-insensitive collation).
    Unicode,
}

impl Fold {
    #[inline]
    pub(crate) fn eq(self, a: char, b: char) -> bool {
        match self {
            Fold::None => a == b,
            Fold::Ascii => a.eq_ignore_ascii_case(&b),
            Fold::Unicode => a == b || fold_char(a) == fold_char(b),
        }
    }
}

/// The first char of the simple lowercase of `c` (what a case-insensitive collation compares).
#[inline]
pub(crate) fn fold_char(c: char) -> char {
    if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        c.to_lowercase().next().unwrap_or(c)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// A character matched literally (subject to the fold).
    Char(char),
    /// `_`: exactly one character.
    One,
    /// `%`: any run of characters.
    Many,
}

/// A compiled LIKE pattern.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LikePattern {
    tokens: Box<[Token]>,
    fold: Fold,
    /// Exact matching of a wildcard-free text or of a literal prefix and `%`: a byte comparison.
    shape: Shape,
}

/// Patterns that need no matcher.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    /// `abc`: equality.
    Exact(Box<str>),
    /// `abc%`: a prefix test.
    Prefix(Box<str>),
    /// Anything else.
    General,
}

impl LikePattern {
    /// Compiles `pattern` with escape character `escape` (`None`: no escape).
    /// `strict_escape`: a trailing escape is an error (PostgreSQL) rather than a literal (MySQL).
    pub(crate) fn compile(
        pattern: &str,
        escape: Option<char>,
        fold: Fold,
        strict_escape: bool,
    ) -> Result<Self, EvalError> {
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            if Some(c) == escape {
                match chars.next() {
                    Some(next) => tokens.push(Token::Char(next)),
                    None if strict_escape => {
                        return Err(EvalError::new("LIKE pattern must not end with escape character"))
                    }
                    None => tokens.push(Token::Char(c)),
                }
            } else if c == '%' {
                if tokens.last() != Some(&Token::Many) {
                    tokens.push(Token::Many);
                }
            } else if c == '_' {
                tokens.push(Token::One);
            } else {
                tokens.push(Token::Char(c));
            }
        }
        let literal: String = tokens
            .iter()
            .map_while(|t| match t {
                Token::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        let n = literal.chars().count();
        let shape = match (fold, tokens.len() - n, tokens.last()) {
            (Fold::None, 0, _) => Shape::Exact(literal.into()),
            (Fold::None, 1, Some(Token::Many)) => Shape::Prefix(literal.into()),
            _ => Shape::General,
        };
        Ok(LikePattern { tokens: tokens.into_boxed_slice(), fold, shape })
    }

    /// The literal text every match starts with, when matching is exact (no case folding),
    /// with whether the pattern is only that text (no wildcard at all).
    pub(crate) fn literal_prefix(&self) -> Option<(String, bool)> {
        if self.fold != Fold::None {
            return None;
        }
        let prefix: String = self
            .tokens
            .iter()
            .map_while(|t| match t {
                Token::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        let exact = prefix.chars().count() == self.tokens.len();
        Some((prefix, exact))
    }

    /// Whether `text` matches the whole pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        match &self.shape {
            Shape::Exact(t) => return text == &**t,
            Shape::Prefix(p) => return text.starts_with(&**p),
            Shape::General => {}
        }
        let toks = &self.tokens;
        let (mut p, mut s) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        loop {
            if p < toks.len() {
                let next = text[s..].chars().next();
                match (&toks[p], next) {
                    (Token::Many, _) => {
                        star = Some((p, s));
                        p += 1;
                        continue;
                    }
                    (Token::One, Some(c)) => {
                        s += c.len_utf8();
                        p += 1;
                        continue;
                    }
                    (Token::Char(want), Some(c)) if self.fold.eq(*want, c) => {
                        s += c.len_utf8();
                        p += 1;
                        continue;
                    }
                    _ => {}
                }
            } else if s == text.len() {
                return true;
            }
            match star {
                Some((sp, ss)) => match text[ss..].chars().next() {
                    Some(c) => {
                        let ss = ss + c.len_utf8();
                        star = Some((sp, ss));
                        p = sp + 1;
                        s = ss;
                    }
                    None => return false,
                },
                None => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(text: &str, pattern: &str) -> bool {
        LikePattern::compile(pattern, Some('\\'), Fold::None, true).unwrap().matches(text)
    }

    #[test]
    fn wildcards() {
        assert!(like("abc", "a%"));
        assert!(like("abc", "%c"));
        assert!(like("abc", "a_c"));
        assert!(!like("abc", "a_"));
        assert!(like("", "%"));
        assert!(!like("", "_"));
        assert!(like("aXbXc", "%X%X%"));
        assert!(!like("aXbc", "%X%X%"));
        assert!(like("héllo", "h_llo"));
        assert!(!like("ABC", "abc"));
    }

    #[test]
    fn fast_shapes_agree_with_the_matcher() {
        assert!(like("abc", "abc") && !like("abcd", "abc"));
        assert!(like("abcd", "ab%") && !like("xab", "ab%") && like("ab", "ab%"));
        assert!(like("a%", "a\\%") && !like("ab", "a\\%"));
    }

    #[test]
    fn escapes() {
        assert!(like("50%", "50\\%"));
        assert!(!like("500", "50\\%"));
        assert!(like("a_b", "a\\_b"));
        assert!(!like("axb", "a\\_b"));
        assert!(LikePattern::compile("abc\\", Some('\\'), Fold::None, true).is_err());
        let no_escape = LikePattern::compile("a\\%", None, Fold::None, true).unwrap();
        assert!(no_escape.matches("a\\xyz"));
    }

    #[test]
    fn case_folding() {
        let p = LikePattern::compile("ab%", Some('\\'), Fold::Ascii, true).unwrap();
        assert!(p.matches("ABC"));
        let p = LikePattern::compile("é%", Some('\\'), Fold::Ascii, true).unwrap();
        assert!(!p.matches("É"));
        let p = LikePattern::compile("é%", Some('\\'), Fold::Unicode, true).unwrap();
        assert!(p.matches("É"));
    }
}
