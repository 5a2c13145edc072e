//! How a workload's table is laid out and read, in database-neutral words: the table's
//! layout (plain, partitioned, inherited), a secondary index, the access path each session's
//! planner is pushed to, and the maintenance a session of its own runs beside the workload.
//! Each adapter renders these in its own SQL ([`crate::Database::prepare_designed_table`],
//! [`crate::Database::access_path_settings`], [`crate::Database::maintenance_statements`])
//! or ignores them with a note; nothing here names a database.

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

/// Generates `as_str`, `ALL`, `Display` and `FromStr` for a plain enum of named choices.
macro_rules! named_choices {
    ($ty:ident, $what:literal, $choices:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every choice, in the order a hunt sweeps them.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The command-line and `run.json` spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                $ty::ALL.iter().copied().find(|c| c.as_str() == s).ok_or_else(|| UnknownName {
                    what: $what,
                    given: s.to_string(),
                    choices: $choices,
                })
            }
        }
    };
}

/// The access path a session's planner is pushed to for the workload's reads and
/// predicate writes (PostgreSQL: `enable_*` and parallel cost settings per session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AccessPath {
    /// Whatever the planner picks.
    #[default]
    Any,
    /// Sequential scans.
    Seq,
    /// Index scans (fetching each row from the table).
    Index,
    /// Index-only scans (rows answered from the index where the visibility map allows).
    IndexOnly,
    /// Bitmap scans (an index builds a set of row addresses, the table is read in order).
    Bitmap,
    /// Parallel plans, made as cheap as possible to choose.
    Parallel,
}

named_choices!(AccessPath, "access path", "any, seq, index, index-only, bitmap or parallel", [
    Any => "any", Seq => "seq", Index => "index", IndexOnly => "index-only", Bitmap => "bitmap",
    Parallel => "parallel",
]);

/// How the workload's table is laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TableLayout {
    /// One table.
    #[default]
    Plain,
    /// Partitioned by a hash of the primary key.
    Hash,
    /// Partitioned by lists of primary-key values (and a default partition).
    List,
    /// Partitioned by ranges of the primary key.
    Range,
    /// A parent table whose rows live in child tables that inherit from it.
    Inheritance,
}

named_choices!(TableLayout, "table layout", "plain, hash, list, range or inheritance", [
    Plain => "plain", Hash => "hash", List => "list", Range => "range", Inheritance => "inheritance",
]);

impl TableLayout {
    /// Whether the layout is declarative partitioning.
    pub fn is_partitioned(self) -> bool {
        matches!(self, TableLayout::Hash | TableLayout::List | TableLayout::Range)
    }
}

/// A secondary index on the table's first non-key columns (`c1, c2` of the predicate
/// workload's table, the value of a key-value table), for the index, index-only and bitmap
/// paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SecondaryIndex {
    /// None: only the primary key's index.
    #[default]
    None,
    /// A B-tree.
    Btree,
    /// A hash index (equality only).
    Hash,
    /// A block-range index (BRIN), one range per page.
    Brin,
}

named_choices!(SecondaryIndex, "secondary index", "none, btree, hash or brin", [
    None => "none", Btree => "btree", Hash => "hash", Brin => "brin",
]);

/// The physical design of a workload's table: layout, secondary index, and how many
/// filler rows (keys the workload never touches) make its pages fill so that VACUUM and
/// the visibility map have work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PhysicalDesign {
    /// The layout.
    pub layout: TableLayout,
    /// The secondary index.
    pub index: SecondaryIndex,
    /// Rows beyond the workload's keys, inserted at setup and never touched.
    pub filler_rows: u32,
}

impl PhysicalDesign {
    /// Whether this is the default design (a plain table with its primary key only).
    pub fn is_default(&self) -> bool {
        *self == PhysicalDesign::default()
    }
}

impl fmt::Display for PhysicalDesign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} table, {} index", self.layout, self.index)?;
        if self.filler_rows > 0 {
            write!(f, ", {} filler rows", self.filler_rows)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for p in AccessPath::ALL {
            assert_eq!(p.as_str().parse::<AccessPath>().unwrap(), *p);
        }
        for l in TableLayout::ALL {
            assert_eq!(l.as_str().parse::<TableLayout>().unwrap(), *l);
        }
        for i in SecondaryIndex::ALL {
            assert_eq!(i.as_str().parse::<SecondaryIndex>().unwrap(), *i);
        }
        let err = "gist".parse::<SecondaryIndex>().unwrap_err().to_string();
        assert!(err.contains("gist") && err.contains("btree, hash or brin"), "{err}");
        assert!(TableLayout::Range.is_partitioned() && !TableLayout::Inheritance.is_partitioned());
        assert!(PhysicalDesign::default().is_default());
    }
}
