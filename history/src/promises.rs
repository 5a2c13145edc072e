//! What a database documents beyond Adya's level for the statements of a history (the
//! header's `promises`): declared once per database beside its adapter, written by
//! `isocert run`, read by the checker as data.

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

/// One statement-level promise (shared/notes/documented-levels.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatementPromise {
    /// Every read of one statement comes from one committed state (`one-snapshot`).
    OneSnapshot,
    /// An `UPDATE`/`DELETE`/`MERGE`/upsert replaces the newest version of a row, and that
    /// version satisfies the statement's condition (`write-to-qualifying`).
    WriteToQualifying,
    /// The row an update installs is its `SET` evaluated on the version it replaced
    /// (`write-from-replaced`).
    WriteFromReplaced,
}

impl StatementPromise {
    /// Every promise, in the order headers list them.
    pub const ALL: [StatementPromise; 3] = [
        StatementPromise::OneSnapshot,
        StatementPromise::WriteToQualifying,
        StatementPromise::WriteFromReplaced,
    ];

    /// The header spelling (`write-from-replaced`).
    pub fn as_str(self) -> &'static str {
        match self {
            StatementPromise::OneSnapshot => "one-snapshot",
            StatementPromise::WriteToQualifying => "write-to-qualifying",
            StatementPromise::WriteFromReplaced => "write-from-replaced",
        }
    }
}

impl fmt::Display for StatementPromise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StatementPromise {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StatementPromise::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| UnknownName {
            what: "statement promise",
            given: s.to_string(),
            choices: "one-snapshot, write-to-qualifying or write-from-replaced",
        })
    }
}

/// The header's `promises`: the database whose documentation makes them, and the
/// statement-level promises it makes at the level the history ran at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promises {
    /// The database, as reports name it (`PostgreSQL`): "read-committed (as PostgreSQL documents it)".
    pub database: Box<str>,
    /// The promises, each once, in [`StatementPromise::ALL`]'s order.
    pub statements: Vec<StatementPromise>,
}

impl Promises {
    /// Whether `promise` is made.
    pub fn makes(&self, promise: StatementPromise) -> bool {
        self.statements.contains(&promise)
    }
}
