//! [`NoThrowawayServer`]: the [`Database::Server`] of a database isocert cannot start itself
//! (TiDB, CockroachDB, MongoDB, Dgraph: no package to install here), whose `start_server`
//! refuses, saying how to bring one up and which `--db` to pass.

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;

use super::{Database, ThrowawayServer};
use crate::AdapterError;

/// The throwaway server of a database that has none: no value of it exists, so
/// [`Database::start_server`] can only return [`NoThrowawayServer::refused`].
pub struct NoThrowawayServer<D> {
    never: Infallible,
    database: PhantomData<fn() -> D>,
}

impl<D: Database> NoThrowawayServer<D> {
    /// The error `start_server` returns: isocert cannot start a throwaway `D`; bring
    /// `what` (`one`, `a replica set`) up with compose `service` and pass `--db db`.
    ///
    /// # Errors
    /// Always [`AdapterError::NotSupportedHere`] (exit 2).
    pub fn refused(what: &str, service: &str, db: &str) -> Result<(D, Self), AdapterError> {
        Err(AdapterError::NotSupportedHere {
            message: format!(
                "isocert cannot start a throwaway {}: bring {what} up (`docker compose up -d --wait {service}`) \
                 and pass --db {db}",
                D::KIND.display_name()
            ),
        })
    }
}

impl<D> fmt::Debug for NoThrowawayServer<D> {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.never {}
    }
}

impl<D: Database> ThrowawayServer for NoThrowawayServer<D> {
    fn url(&self) -> String {
        match self.never {}
    }

    async fn shutdown(self) -> Result<(), AdapterError> {
        let _ = self.database;
        match self.never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal of each database without a throwaway server, word for word as it was
    /// when each adapter wrote its own.
    #[tokio::test]
    async fn each_refusal_says_how_to_bring_the_database_up() {
        fn refusal<T>(started: Result<T, AdapterError>) -> String {
            started.map(|_| ()).unwrap_err().to_string()
        }
        assert_eq!(
            refusal(crate::TiDb::start_server(&[]).await),
            "isocert cannot start a throwaway TiDB: bring one up (`docker compose up -d --wait tidb`) \
             and pass --db tidb://root@127.0.0.1:4000/test"
        );
        assert_eq!(
            refusal(crate::CockroachDb::start_server(&[]).await),
            "isocert cannot start a throwaway CockroachDB: bring one up (`docker compose up -d --wait \
             cockroachdb`) and pass --db 'cockroachdb://root@127.0.0.1:26257/defaultdb?sslmode=disable'"
        );
        assert_eq!(
            refusal(crate::Dgraph::start_server(&[]).await),
            "isocert cannot start a throwaway Dgraph: bring one up (`docker compose up -d --wait dgraph`) \
             and pass --db dgraph://127.0.0.1:8080"
        );
        #[cfg(feature = "mongodb")]
        assert_eq!(
            refusal(crate::MongoDb::start_server(&[]).await),
            "isocert cannot start a throwaway MongoDB: bring a replica set up (`docker compose up -d --wait \
             mongodb`) and pass --db mongodb://127.0.0.1:27017/isocert?replicaSet=rs0"
        );
    }
}
