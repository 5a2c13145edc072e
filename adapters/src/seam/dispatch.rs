//! Picking the adapter: from a URL's scheme or a `--database` name, to a [`Database`] type.

use std::fmt;
use std::str::FromStr;

use super::{Database, UnknownName};
use crate::AdapterError;

/// The databases isocert knows, whether or not their adapter is built yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DatabaseKind {
    /// PostgreSQL (`postgres://`, `postgresql://`).
    Postgres,
    /// MariaDB (`mariadb://`, `mysql://`).
    MariaDb,
    /// TiDB (`tidb://`).
    TiDb,
    /// CockroachDB (`cockroachdb://`).
    CockroachDb,
    /// MongoDB (`mongodb://`).
    MongoDb,
    /// Dgraph (`dgraph://`).
    Dgraph,
}

impl DatabaseKind {
    /// The name as `--database` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseKind::Postgres => "postgres",
            DatabaseKind::MariaDb => "mariadb",
            DatabaseKind::TiDb => "tidb",
            DatabaseKind::CockroachDb => "cockroachdb",
            DatabaseKind::MongoDb => "mongodb",
            DatabaseKind::Dgraph => "dgraph",
        }
    }

    /// The database's own name, for people.
    pub fn display_name(self) -> &'static str {
        match self {
            DatabaseKind::Postgres => "PostgreSQL",
            DatabaseKind::MariaDb => "MariaDB",
            DatabaseKind::TiDb => "TiDB",
            DatabaseKind::CockroachDb => "CockroachDB",
            DatabaseKind::MongoDb => "MongoDB",
            DatabaseKind::Dgraph => "Dgraph",
        }
    }

    /// The database a URL names by its scheme.
    ///
    /// # Errors
    /// [`AdapterError::UnknownScheme`] for a URL without a known scheme.
    pub fn from_url(url: &str) -> Result<Self, AdapterError> {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        Ok(match scheme.as_deref() {
            Some("postgres" | "postgresql") => DatabaseKind::Postgres,
            Some("mariadb" | "mysql") => DatabaseKind::MariaDb,
            Some("tidb") => DatabaseKind::TiDb,
            Some("cockroachdb" | "cockroach") => DatabaseKind::CockroachDb,
            Some("mongodb" | "mongodb+srv") => DatabaseKind::MongoDb,
            Some("dgraph") => DatabaseKind::Dgraph,
            // Never echo the URL: it may hold a password.
            other => return Err(AdapterError::UnknownScheme { scheme: other.map(str::to_string) }),
        })
    }
}

impl fmt::Display for DatabaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DatabaseKind {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" | "pg" => DatabaseKind::Postgres,
            "mariadb" | "mysql" => DatabaseKind::MariaDb,
            "tidb" => DatabaseKind::TiDb,
            "cockroachdb" | "cockroach" => DatabaseKind::CockroachDb,
            "mongodb" | "mongo" => DatabaseKind::MongoDb,
            "dgraph" => DatabaseKind::Dgraph,
            _ => {
                return Err(UnknownName {
                    what: "database",
                    given: s.to_string(),
                    choices: "postgres, mariadb, tidb, cockroachdb, mongodb or dgraph",
                })
            }
        })
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

/// Calls `visitor` with the adapter of `kind`: the one place that lists the adapters.
///
/// # Errors
/// [`AdapterError::NotSupportedHere`] for MongoDB in a build without the `mongodb` feature.
pub fn dispatch<V: DatabaseVisitor>(kind: DatabaseKind, visitor: V) -> Result<V::Output, AdapterError> {
    match kind {
        DatabaseKind::Postgres => Ok(visitor.visit::<crate::postgres::Postgres>()),
        DatabaseKind::MariaDb => Ok(visitor.visit::<crate::mariadb::MariaDb>()),
        DatabaseKind::TiDb => Ok(visitor.visit::<crate::tidb::TiDb>()),
        DatabaseKind::Dgraph => Ok(visitor.visit::<crate::dgraph::Dgraph>()),
        DatabaseKind::CockroachDb => Ok(visitor.visit::<crate::cockroach::CockroachDb>()),
        #[cfg(feature = "mongodb")]
        DatabaseKind::MongoDb => Ok(visitor.visit::<crate::mongodb::MongoDb>()),
        #[cfg(not(feature = "mongodb"))]
        DatabaseKind::MongoDb => Err(AdapterError::NotSupportedHere {
            message: "MongoDB needs a binary built with the `mongodb` feature: \
                      cargo build --release -p isocert --features mongodb (docs/MONGODB.md)"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
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
}
