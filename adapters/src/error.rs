//! The one error type of the adapters.

use std::path::PathBuf;

/// Why an adapter operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// The PostgreSQL server programs (`initdb`, `pg_ctl`, `postgres`) are not installed.
    #[error(
        "PostgreSQL server binaries not found (looked in {searched}); install them with \
         `apt-get install -y postgresql` or put initdb and pg_ctl on PATH"
    )]
    PostgresNotInstalled {
        /// Where the search looked.
        searched: String,
    },
    /// The PostgreSQL version asked for (`--server-version`, a major or an exact release) is not installed.
    #[error(
        "PostgreSQL {version} is not installed (looked in {searched}); install it with \
         scripts/install-deps --postgres-versions \"{version}\""
    )]
    PostgresVersionNotInstalled {
        /// The version asked for (`17` or `17.6`).
        version: String,
        /// Where the search looked.
        searched: String,
    },
    /// The MariaDB server programs (`mariadbd`, `mariadb-install-db`) are not installed.
    #[error(
        "MariaDB server programs not found (mariadbd and mariadb-install-db on PATH or in /usr/sbin); \
         install them with `apt-get install -y mariadb-server`"
    )]
    MariaDbNotInstalled,
    /// A MariaDB/MySQL request outside a workload session failed (the change capture,
    /// setup).
    #[error("{context}: {source}")]
    Mysql {
        /// What was being done.
        context: String,
        /// The driver error.
        #[source]
        source: mysql_async::Error,
    },
    /// A database request outside a workload session failed, as its adapter classified it.
    #[error(transparent)]
    Database(#[from] crate::seam::DbError),
    /// Running as root, but there is no unprivileged user to run the server as.
    #[error("running as root and user `{user}` does not exist: the database server refuses to run as root; create it with `useradd --system {user}`")]
    NoServerUser {
        /// The user name looked up in /etc/passwd.
        user: String,
    },
    /// A server program ran but failed.
    #[error("{program} failed ({status}): {output}")]
    ServerCommand {
        /// The program that failed (`initdb`, `pg_ctl start`, ...).
        program: String,
        /// Its exit status.
        status: String,
        /// Its output, or the tail of the server log.
        output: String,
    },
    /// A file-system or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path or program.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A database request failed.
    #[error("{context}: {source}")]
    Db {
        /// What was being done.
        context: String,
        /// The driver error (SQLSTATE available through `code()`).
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server reported an error on the streaming replication connection (which
    /// tokio-postgres does not drive, hence no [`tokio_postgres::Error`]).
    #[error("{context}: {severity} {code}: {message}")]
    Server {
        /// What was being done.
        context: String,
        /// `ERROR`, `FATAL` or `PANIC`.
        severity: String,
        /// The SQLSTATE code (`57P01`: terminated by an administrator, `28P01`: bad password).
        code: String,
        /// The server's message.
        message: String,
    },
    /// A `pg_current_snapshot()` text that does not have the `xmin:xmax:xip,...` shape.
    /// (Its text already names the snapshot; it is not repeated as a source.)
    #[error("bad PostgreSQL {0}")]
    BadSnapshot(isocert_recovery::SnapshotParseError),
    /// The server answered something the adapter did not expect.
    #[error("unexpected answer from the database: {message}")]
    Protocol {
        /// What was unexpected.
        message: String,
    },
    /// An adapter error with what was being done and how to get around it.
    #[error("{context}")]
    Context {
        /// What was being done, and a hint.
        context: String,
        /// The error.
        #[source]
        source: Box<AdapterError>,
    },
    /// A database URL whose scheme names no database isocert knows.
    #[error(
        "unknown database URL scheme {}: use {}",
        scheme.as_deref().map_or("(none)".to_string(), |s| format!("{s}://")),
        crate::DatabaseKind::SCHEME_CHOICES
    )]
    UnknownScheme {
        /// The scheme, if the URL has one (never the whole URL: it may hold a password).
        scheme: Option<String>,
    },
    /// An option the chosen database does not have.
    #[error("{message}")]
    NotSupportedHere {
        /// What is not supported, and what to do instead.
        message: String,
    },
    /// The database changed a recorded table in a way its change stream cannot express row
    /// by row (PostgreSQL: a TRUNCATE), so the run's record of versions is incomplete.
    #[error("{message}")]
    Unrecordable {
        /// What happened, naming the statement and the table.
        message: String,
    },
    /// The data directory of an embedded server could not be prepared.
    #[error("cannot prepare data directory {path}: {message}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl From<isocert_recovery::SnapshotParseError> for AdapterError {
    fn from(e: isocert_recovery::SnapshotParseError) -> Self {
        AdapterError::BadSnapshot(e)
    }
}

impl AdapterError {
    /// An [`AdapterError::Io`] with its context.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        AdapterError::Io { context: context.into(), source }
    }

    /// Whether this is (or wraps) an [`AdapterError::Unrecordable`]: the capture ended
    /// because the database changed a recorded table beyond what it can record, not
    /// because it failed; the run's history is still worth keeping.
    pub fn is_unrecordable(&self) -> bool {
        match self {
            AdapterError::Unrecordable { .. } => true,
            AdapterError::Context { source, .. } => source.is_unrecordable(),
            _ => false,
        }
    }

    /// An [`AdapterError::Db`] with its context.
    pub fn db(context: impl Into<String>, source: tokio_postgres::Error) -> Self {
        AdapterError::Db { context: context.into(), source }
    }
}
