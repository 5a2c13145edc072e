//! Test-only helpers shared by every isocert test crate (a dev-dependency, never linked
//! into isocert itself).
//!
//! One place decides whether a test may use a database server, so every database test
//! follows the same rules:
//!
//! - the server named by the server's environment variable (`ISOCERT_TEST_PG` for
//!   PostgreSQL) is used when it is set and not empty;
//! - otherwise a test that can start a private embedded server does so when the server
//!   programs are installed (the caller says whether they are, e.g. with
//!   `EmbeddedPostgres::is_installed()`, so this crate depends on no adapter);
//! - otherwise the test is skipped, and says so on stderr with a line starting
//!   `SKIPPED:` naming the test and what was missing: it never passes silently;
//! - under `CI=true` a missing server is a failure (a panic naming what is missing), since
//!   CI's `scripts/test` always starts one.
//!
//! Another server kind is one more [`TestServer`] constant ([`MARIADB`] reads
//! `ISOCERT_TEST_MARIADB`).

use std::io::Write as _;

mod kafka;

pub use kafka::{tansu_program, KafkaBroker, KAFKA, TANSU_ENV};

/// A database server tests may need, and how a test finds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestServer {
    /// The product's name, for messages ("PostgreSQL").
    pub name: &'static str,
    /// The environment variable holding the URL of a running server for tests.
    pub env: &'static str,
    /// How to get one, for skip messages.
    pub hint: &'static str,
}

/// PostgreSQL: `ISOCERT_TEST_PG`, or an embedded server when its programs are installed.
pub const POSTGRES: TestServer = TestServer {
    name: "PostgreSQL",
    env: "ISOCERT_TEST_PG",
    hint: "run the tests with scripts/test, start a server with `eval \"$(scripts/pg-cluster start)\"`, \
           or install the server programs (scripts/install-deps)",
};

/// MariaDB: `ISOCERT_TEST_MARIADB`, or an embedded server when its programs are installed.
pub const MARIADB: TestServer = TestServer {
    name: "MariaDB",
    env: "ISOCERT_TEST_MARIADB",
    hint: "install the server programs with scripts/install-deps (Debian's mariadb-server)",
};

/// TiDB: `ISOCERT_TIDB_URL` (a `tidb://` URL; `ISOCERT_TIDB_STATUS_URL` names the status
/// port when it is not the SQL host's 10080). It cannot run on isocert's machines, so its
/// live tests use [`TestServer::live_url`].
pub const TIDB: TestServer = TestServer {
    name: "TiDB",
    env: "ISOCERT_TIDB_URL",
    hint: "bring one up with `docker compose up -d --wait tidb` and set ISOCERT_TIDB_URL=tidb://root@127.0.0.1:4000/test",
};

/// CockroachDB: `ISOCERT_COCKROACH_URL` (a `cockroachdb://` URL). It cannot run on
/// isocert's machines, so its live tests use [`TestServer::live_url`].
pub const COCKROACH: TestServer = TestServer {
    name: "CockroachDB",
    env: "ISOCERT_COCKROACH_URL",
    hint: "bring one up with `docker compose up -d --wait cockroachdb` and set \
           ISOCERT_COCKROACH_URL='cockroachdb://root@127.0.0.1:26257/defaultdb?sslmode=disable'",
};

/// MongoDB: `ISOCERT_MONGODB_URL` (a `mongodb://` URL of a replica set). It cannot run on
/// isocert's machines, so its live tests use [`TestServer::live_url`].
pub const MONGODB: TestServer = TestServer {
    name: "MongoDB",
    env: "ISOCERT_MONGODB_URL",
    hint: "bring one up with `docker compose up -d --wait mongodb` and set \
           ISOCERT_MONGODB_URL=mongodb://127.0.0.1:27017/isocert?replicaSet=rs0 (tests built with --features mongodb)",
};

/// Dgraph: `ISOCERT_DGRAPH_URL` (a `dgraph://` URL naming Alpha's HTTP port). It cannot run
/// on isocert's machines, so its live tests use [`TestServer::live_url`].
pub const DGRAPH: TestServer = TestServer {
    name: "Dgraph",
    env: "ISOCERT_DGRAPH_URL",
    hint: "bring one up with `docker compose up -d --wait dgraph` and set ISOCERT_DGRAPH_URL=dgraph://127.0.0.1:8080",
};

/// Where a test gets its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The running server named by the environment variable (its URL).
    Url(String),
    /// A private embedded server the test starts itself.
    Embedded,
}

impl TestServer {
    /// The URL in the server's environment variable, when set and not empty.
    pub fn env_url(&self) -> Option<String> {
        std::env::var(self.env).ok().filter(|url| !url.is_empty())
    }

    /// The server a test should use: the environment's URL, else an embedded server when
    /// `embedded_installed`; otherwise the test is skipped (see [`skip`]) and this returns
    /// `None`.
    pub fn source(&self, embedded_installed: bool) -> Option<Source> {
        if let Some(url) = self.env_url() {
            return Some(Source::Url(url));
        }
        if embedded_installed {
            return Some(Source::Embedded);
        }
        skip(&format!(
            "{} is not set and the {} server programs are not installed; {}",
            self.env, self.name, self.hint
        ));
        None
    }

    /// For tests that need a running server and cannot start one: the environment's URL,
    /// or `None` after [`skip`].
    pub fn url(&self) -> Option<String> {
        let url = self.env_url();
        if url.is_none() {
            skip(&format!(
                "{} is not set (this test needs a running {}); {}",
                self.env, self.name, self.hint
            ));
        }
        url
    }

    /// For live tests of a server that cannot run on isocert's machines (TiDB, CockroachDB,
    /// MongoDB, Dgraph): the environment's URL, or `None` after a `SKIPPED:` line. Unlike
    /// [`TestServer::url`] this never fails under `CI=true`: CI has no such server, and the
    /// same code paths are tested there on payloads shaped like the server's.
    pub fn live_url(&self) -> Option<String> {
        let url = self.env_url();
        if url.is_none() {
            skip_visibly(&format!(
                "{} is not set (a live test of {}, which cannot run here); {}",
                self.env, self.name, self.hint
            ));
        }
        url
    }

    /// For tests that must start a private embedded server (they change its configuration):
    /// `embedded_installed`, after [`skip`] when it is false.
    pub fn embedded(&self, embedded_installed: bool) -> bool {
        if !embedded_installed {
            skip(&format!(
                "the {} server programs are not installed (this test starts a private server); {}",
                self.name, self.hint
            ));
        }
        embedded_installed
    }
}

/// Whether the tests run in CI (`CI=true`), where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips the current test visibly: prints `SKIPPED: <test>: <why>` on stderr (uncaptured,
/// so it shows even when the test passes), or, under
/// `CI=true`, fails it with the same words.
///
/// The test's name is its thread's name (the test harness names each test's thread).
pub fn skip(why: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    if in_ci() {
        panic!("{test} cannot run under CI=true: {why}");
    }
    skip_visibly(why);
}

/// Prints `SKIPPED: <test>: <why>` on stderr, uncaptured (also under `CI=true`): for what
/// a test leaves out by design (a command that runs for minutes), not for a missing server.
pub fn skip_visibly(why: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    let line = format!("SKIPPED: {test}: {why}\n");
    #[cfg(test)]
    if tests::SKIPS.with(|skips| skips.borrow_mut().as_mut().map(|skips| skips.push(line.clone()))).is_some()
    {
        return;
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing
    // tests, and a skip must show in a plain `cargo test` run.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    thread_local! {
        /// When set, [`skip`] appends its line here instead of printing it.
        pub(super) static SKIPS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Runs `f` and returns what it returned with the skip lines it wrote.
    fn skips<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
        SKIPS.with(|s| *s.borrow_mut() = Some(Vec::new()));
        let out = f();
        (out, SKIPS.with(|s| s.borrow_mut().take().unwrap_or_default()))
    }

    /// A server kind whose variable no environment sets, so the decisions below do not
    /// depend on the machine.
    const NOWHERE: TestServer =
        TestServer { name: "Nowhere", env: "ISOCERT_TEST_NOWHERE_UNSET", hint: "there is none" };

    #[test]
    fn a_missing_server_skips_outside_ci_and_fails_in_ci() {
        if in_ci() {
            let outcome = std::panic::catch_unwind(|| NOWHERE.source(false));
            assert!(outcome.is_err(), "CI=true must fail a test whose server is missing");
            assert!(std::panic::catch_unwind(|| NOWHERE.url()).is_err());
            assert!(std::panic::catch_unwind(|| NOWHERE.embedded(false)).is_err());
        } else {
            let ((source, url, embedded), lines) =
                skips(|| (NOWHERE.source(false), NOWHERE.url(), NOWHERE.embedded(false)));
            assert_eq!((source, url, embedded), (None, None, false));
            assert_eq!(lines.len(), 3, "{lines:?}");
            for line in &lines {
                assert!(
                    line.starts_with("SKIPPED: tests::a_missing_server_skips_outside_ci_and_fails_in_ci: "),
                    "{line}"
                );
            }
            assert!(lines[0].contains("ISOCERT_TEST_NOWHERE_UNSET is not set"), "{}", lines[0]);
            assert!(lines[2].contains("server programs are not installed"), "{}", lines[2]);
        }
    }

    #[test]
    fn a_missing_live_server_skips_visibly_even_in_ci() {
        let (url, lines) = skips(|| NOWHERE.live_url());
        assert_eq!(url, None);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("cannot run here"), "{}", lines[0]);
    }

    #[test]
    fn installed_programs_mean_an_embedded_server() {
        let ((source, embedded), lines) = skips(|| (NOWHERE.source(true), NOWHERE.embedded(true)));
        assert_eq!(source, Some(Source::Embedded));
        assert!(embedded);
        assert!(lines.is_empty(), "no skip when the server can run: {lines:?}");
    }

    #[test]
    fn postgres_reads_isocert_test_pg() {
        assert_eq!(POSTGRES.env, "ISOCERT_TEST_PG");
        assert_eq!(POSTGRES.env_url(), std::env::var("ISOCERT_TEST_PG").ok().filter(|u| !u.is_empty()));
        if let Some(url) = POSTGRES.env_url() {
            assert_eq!(POSTGRES.source(false), Some(Source::Url(url)));
        }
    }
}
