//! The isolation levels transactions run at through the seam: a subset of
//! [`IsolationLevel`] that each database declares ([`Database::RUN_LEVELS`](super::Database::RUN_LEVELS)),
//! how `run --isolation` names them, and their SQL spelling.

use isocert_history::{IsolationLevel, UnknownName};

use super::{DbError, ErrorClass};

/// The levels the SQL databases run transactions at, strongest first: every level
/// `run --isolation` accepts, and the default [`Database::RUN_LEVELS`](super::Database::RUN_LEVELS).
pub const SQL_RUN_LEVELS: [IsolationLevel; 3] =
    [IsolationLevel::Serializable, IsolationLevel::RepeatableRead, IsolationLevel::ReadCommitted];

/// Parses the level transactions run at as the command line names it: `serializable`
/// (`ser`), `repeatable-read` (`rr`) or `read-committed` (`rc`), exactly so spelled. Narrower
/// than [`IsolationLevel`]'s own parser, which also takes the levels a history is only
/// checked at (`snapshot-isolation`, `causal`, ...) and other cases and underscores.
///
/// # Errors
/// [`UnknownName`] naming the three choices.
pub fn parse_run_level(s: &str) -> Result<IsolationLevel, UnknownName> {
    Ok(match s {
        "serializable" | "ser" => IsolationLevel::Serializable,
        "repeatable-read" | "rr" => IsolationLevel::RepeatableRead,
        "read-committed" | "rc" => IsolationLevel::ReadCommitted,
        _ => {
            return Err(UnknownName {
                what: "isolation level",
                given: s.to_string(),
                choices: "serializable, repeatable-read or read-committed",
            })
        }
    })
}

/// The standard SQL spelling of a level of [`SQL_RUN_LEVELS`] after `ISOLATION LEVEL`
/// (`REPEATABLE READ`).
///
/// # Errors
/// [`unrunnable_level`] for any other level.
pub fn sql_level(level: IsolationLevel) -> Result<&'static str, DbError> {
    match level {
        IsolationLevel::Serializable => Ok("SERIALIZABLE"),
        IsolationLevel::RepeatableRead => Ok("REPEATABLE READ"),
        IsolationLevel::ReadCommitted => Ok("READ COMMITTED"),
        other => Err(unrunnable_level(other, &SQL_RUN_LEVELS)),
    }
}

/// The error [`Session::begin`](super::Session::begin) returns for a level its database does
/// not run, naming the levels it does (`runs`, its
/// [`Database::RUN_LEVELS`](super::Database::RUN_LEVELS)).
pub fn unrunnable_level(level: IsolationLevel, runs: &[IsolationLevel]) -> DbError {
    let choices: Vec<&str> = runs.iter().map(|l| l.as_str()).collect();
    DbError::new(
        ErrorClass::Fatal,
        None,
        "starting a transaction",
        format!("transactions do not run at {level} here: use {}", choices.join(", ")),
    )
}

/// Whether one snapshot serves the whole transaction at `level` (repeatable read,
/// serializable), rather than one per statement (read committed).
pub fn has_transaction_snapshot(level: IsolationLevel) -> bool {
    !matches!(level, IsolationLevel::ReadCommitted | IsolationLevel::ReadUncommitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_levels_parse_only_their_own_spellings_and_refusals_name_the_choices() {
        for level in SQL_RUN_LEVELS {
            assert_eq!(parse_run_level(level.as_str()), Ok(level));
            assert!(sql_level(level).is_ok());
        }
        assert_eq!(parse_run_level("rc"), Ok(IsolationLevel::ReadCommitted));
        assert_eq!(parse_run_level("rr"), Ok(IsolationLevel::RepeatableRead));
        assert_eq!(parse_run_level("ser"), Ok(IsolationLevel::Serializable));
        for refused in ["snapshot", "si", "SERIALIZABLE", "read_committed", "causal"] {
            let err = parse_run_level(refused).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("unknown isolation level {refused:?}: use serializable, repeatable-read or read-committed")
            );
        }
        let err = sql_level(IsolationLevel::SnapshotIsolation).unwrap_err().to_string();
        assert!(err.contains("snapshot-isolation") && err.contains("read-committed"), "{err}");
        assert_eq!(sql_level(IsolationLevel::RepeatableRead).ok(), Some("REPEATABLE READ"));
        assert!(has_transaction_snapshot(IsolationLevel::RepeatableRead));
        assert!(!has_transaction_snapshot(IsolationLevel::ReadCommitted));
    }
}
