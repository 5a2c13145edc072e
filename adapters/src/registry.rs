//! The databases isocert knows: one `databases!` line per database, from which
//! [`DatabaseKind`], its names ([`DatabaseKind::as_str`], [`FromStr`], the "choices" of an
//! unknown name), [`DatabaseKind::from_url`] (URL schemes, and the scheme list of
//! [`AdapterError::UnknownScheme`]) and [`dispatch`] (kind to adapter type) are generated.
//!
//! Adding a database is one line here plus its adapter module (docs/ADAPTERS.md, "Adding a
//! database"): nothing else in the workspace lists the databases.

use std::fmt;
use std::str::FromStr;

use crate::seam::{Database, UnknownName};
use crate::AdapterError;

/// `"a, b or c"` from string literals, at compile time (the registry's lists in words).
macro_rules! in_words {
    ($only:expr) => { $only };
    ($a:expr, $b:expr) => { concat!($a, " or ", $b) };
    ($a:expr, $($rest:expr),+) => { concat!($a, ", ", in_words!($($rest),+)) };
}

/// Visits adapter `$ty`, or, when it sits behind a cargo feature this build lacks, refuses
/// with [`AdapterError::NotSupportedHere`] naming the feature and the build command.
macro_rules! visit_adapter {
    ($visitor:ident, $ty:ty, $display:literal, $docs:literal) => {
        Ok($visitor.visit::<$ty>())
    };
    ($visitor:ident, $ty:ty, $display:literal, $docs:literal, $feature:literal) => {{
        #[cfg(feature = $feature)]
        let visited = Ok($visitor.visit::<$ty>());
        #[cfg(not(feature = $feature))]
        let visited = {
            let _ = $visitor;
            Err(AdapterError::NotSupportedHere {
                message: concat!(
                    $display,
                    " needs a binary built with the `",
                    $feature,
                    "` feature: ",
                    "cargo build --release -p isocert --features ",
                    $feature,
                    " (",
                    $docs,
                    ")"
                )
                .into(),
            })
        };
        visited
    }};
}

/// Generates [`DatabaseKind`] and everything derived from it from one line per database:
/// `Kind(adapter type) [feature "cargo feature"] names [...] schemes [...] display "..." docs "..."`.
/// The first name is the canonical one ([`DatabaseKind::as_str`], `--database`); names and
/// schemes are matched ignoring ASCII case.
macro_rules! databases {
    ($(
        $kind:ident($ty:ty) $(feature $feature:literal)?
            names [$name:literal $(, $alias:literal)*] schemes [$($scheme:literal),+]
            display $display:literal docs $docs:literal;
    )+) => {
        /// The databases isocert knows (the registry, `adapters/src/registry.rs`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DatabaseKind {
            $(
                #[doc = concat!($display, " (", $docs, ").")]
                $kind,
            )+
        }

        impl DatabaseKind {
            /// Every database, in the registry's order.
            pub const ALL: &'static [DatabaseKind] = &[$(DatabaseKind::$kind),+];

            /// Every name `--database` accepts for some database, aliases included.
            pub const NAMES: &'static [&'static str] = &[$($name, $($alias,)*)+];

            /// Every URL scheme (without `://`) that picks some database.
            pub const SCHEMES: &'static [&'static str] = &[$($($scheme,)+)+];

            /// The canonical names in words, for "unknown database" errors and help texts.
            pub const NAME_CHOICES: &'static str = in_words!($($name),+);

            /// The URL schemes in words (`postgres://, ... or dgraph://`), for the
            /// unknown-scheme error and help texts.
            pub const SCHEME_CHOICES: &'static str = in_words!($($(concat!($scheme, "://")),+),+);

            /// The name as `--database` spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(DatabaseKind::$kind => $name,)+
                }
            }

            /// The database's own name, for people.
            pub fn display_name(self) -> &'static str {
                match self {
                    $(DatabaseKind::$kind => $display,)+
                }
            }

            /// The repository's page about this database's adapter.
            pub fn docs_page(self) -> &'static str {
                match self {
                    $(DatabaseKind::$kind => $docs,)+
                }
            }

            /// The URL schemes (without `://`) that pick this database.
            pub fn schemes(self) -> &'static [&'static str] {
                match self {
                    $(DatabaseKind::$kind => &[$($scheme),+],)+
                }
            }

            /// The names `--database` accepts for this database, canonical first.
            pub fn names(self) -> &'static [&'static str] {
                match self {
                    $(DatabaseKind::$kind => &[$name $(, $alias)*],)+
                }
            }

            /// The database a URL names by its scheme.
            ///
            /// # Errors
            /// [`AdapterError::UnknownScheme`] for a URL without a known scheme.
            pub fn from_url(url: &str) -> Result<Self, AdapterError> {
                let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
                if let Some(scheme) = &scheme {
                    for &kind in Self::ALL {
                        if kind.schemes().contains(&scheme.as_str()) {
                            return Ok(kind);
                        }
                    }
                }
                // Never echo the URL: it may hold a password.
                Err(AdapterError::UnknownScheme { scheme })
            }
        }

        impl FromStr for DatabaseKind {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                let lower = s.to_ascii_lowercase();
                Self::ALL.iter().copied().find(|kind| kind.names().contains(&lower.as_str())).ok_or_else(|| {
                    UnknownName { what: "database", given: s.to_string(), choices: Self::NAME_CHOICES }
                })
            }
        }

        /// Calls `visitor` with the adapter of `kind`: the one place that lists the adapters.
        ///
        /// # Errors
        /// [`AdapterError::NotSupportedHere`] for a database whose adapter sits behind a cargo
        /// feature this build lacks (MongoDB without `mongodb`).
        pub fn dispatch<V: DatabaseVisitor>(kind: DatabaseKind, visitor: V) -> Result<V::Output, AdapterError> {
            match kind {
                $(DatabaseKind::$kind => visit_adapter!(visitor, $ty, $display, $docs $(, $feature)?),)+
            }
        }
    };
}

databases! {
    Postgres(crate::postgres::Postgres) names ["postgres", "postgresql", "pg"] schemes ["postgres", "postgresql"] display "PostgreSQL" docs "docs/POSTGRES.md";
    MariaDb(crate::mariadb::MariaDb) names ["mariadb", "mysql"] schemes ["mariadb", "mysql"] display "MariaDB" docs "docs/MARIADB.md";
    TiDb(crate::tidb::TiDb) names ["tidb"] schemes ["tidb"] display "TiDB" docs "docs/TIDB.md";
    CockroachDb(crate::cockroach::CockroachDb) names ["cockroachdb", "cockroach"] schemes ["cockroachdb", "cockroach"] display "CockroachDB" docs "docs/COCKROACHDB.md";
    MongoDb(crate::mongodb::MongoDb) feature "mongodb" names ["mongodb", "mongo"] schemes ["mongodb", "mongodb+srv"] display "MongoDB" docs "docs/MONGODB.md";
    Dgraph(crate::dgraph::Dgraph) names ["dgraph"] schemes ["dgraph"] display "Dgraph" docs "docs/DGRAPH.md";
}

impl fmt::Display for DatabaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Code that runs on any [`Database`]: [`dispatch`] calls [`DatabaseVisitor::visit`] with the
/// adapter type of a [`DatabaseKind`]. (A closure cannot be generic over the adapter type.)
pub trait DatabaseVisitor {
    /// What the visit returns.
    type Output;

    /// Runs on adapter `D`.
    fn visit<D: Database>(self) -> Self::Output;
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn schemes_pick_databases_and_unknown_ones_are_refused_without_the_url() {
        for (url, kind) in [
            ("postgres://u@h/db", DatabaseKind::Postgres),
            ("postgresql://h", DatabaseKind::Postgres),
            ("mysql://root@127.0.0.1:3306/test", DatabaseKind::MariaDb),
            ("MariaDB://h", DatabaseKind::MariaDb),
            ("tidb://h:4000/test", DatabaseKind::TiDb),
            ("cockroachdb://h", DatabaseKind::CockroachDb),
            ("mongodb://h", DatabaseKind::MongoDb),
            ("dgraph://h", DatabaseKind::Dgraph),
        ] {
            assert_eq!(DatabaseKind::from_url(url).unwrap(), kind, "{url}");
        }
        let e = DatabaseKind::from_url("oracle://scott:tiger@h").unwrap_err().to_string();
        assert!(e.contains("oracle://") && !e.contains("tiger"), "{e}");
        let e = DatabaseKind::from_url("h:5432").unwrap_err().to_string();
        assert!(e.contains("(none)"), "{e}");
        assert_eq!("MariaDB".parse::<DatabaseKind>().unwrap(), DatabaseKind::MariaDb);
        assert!("db2".parse::<DatabaseKind>().unwrap_err().to_string().contains("postgres, mariadb"));
    }

    #[test]
    fn every_name_and_scheme_round_trips_to_its_one_database() {
        for &kind in DatabaseKind::ALL {
            assert_eq!(kind.as_str().parse::<DatabaseKind>().unwrap(), kind);
            assert_eq!(kind.names()[0], kind.as_str());
            for name in kind.names() {
                assert_eq!(name.parse::<DatabaseKind>().unwrap(), kind, "{name}");
                assert_eq!(name.to_ascii_uppercase().parse::<DatabaseKind>().unwrap(), kind, "{name}");
            }
            for scheme in kind.schemes() {
                let url = format!("{scheme}://user:secret@host/db");
                assert_eq!(DatabaseKind::from_url(&url).unwrap(), kind, "{url}");
            }
            assert!(DatabaseKind::NAME_CHOICES.contains(kind.as_str()));
            assert!(kind.docs_page().starts_with("docs/") && kind.docs_page().ends_with(".md"));
        }
    }

    #[test]
    fn no_two_databases_share_a_name_or_a_scheme() {
        let names: HashSet<_> = DatabaseKind::NAMES.iter().collect();
        assert_eq!(names.len(), DatabaseKind::NAMES.len(), "{:?}", DatabaseKind::NAMES);
        let schemes: HashSet<_> = DatabaseKind::SCHEMES.iter().collect();
        assert_eq!(schemes.len(), DatabaseKind::SCHEMES.len(), "{:?}", DatabaseKind::SCHEMES);
        for scheme in DatabaseKind::SCHEMES {
            assert!(DatabaseKind::SCHEME_CHOICES.contains(&format!("{scheme}://")), "{scheme}");
        }
    }

    #[test]
    fn the_unknown_scheme_error_lists_every_scheme() {
        let e = DatabaseKind::from_url("db2://h").unwrap_err().to_string();
        for scheme in DatabaseKind::SCHEMES {
            assert!(e.contains(&format!(" {scheme}://")), "{scheme}: {e}");
        }
    }
}
