//! The one error for a name that is not recognised: an isolation level, a SQL dialect, a
//! checker, a generator knob's value or a database, each with the spellings it accepts.

/// A name that is not one of the accepted spellings. One type for every kind of name, so
/// that a level, a dialect, a checker or a database is refused in the same words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}: use {choices}")]
pub struct UnknownName {
    /// What was being named (`isolation level`, `dialect`, `database`).
    pub what: &'static str,
    /// What the user gave.
    pub given: String,
    /// The accepted spellings, in words.
    pub choices: &'static str,
}
