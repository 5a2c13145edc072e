//! A throwaway PostgreSQL server: initdb into a temporary directory, start on a free
//! loopback port, stop and remove everything when dropped, and, through a
//! [`ServerGuard`], also when isocert is killed (SIGKILL included). Directories of servers
//! whose isocert process is gone are removed by the next start ([`sweep_stale`]).

use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::guard::{sweep_stale, GuardedDir, OwnerFile, ServerGuard};
use crate::server_process::{check, free_port, lookup_user, reachable_temp_dir, run, running_as_root};
use crate::AdapterError;

/// Where Debian and Ubuntu install the server programs, one folder per major version.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// Where `scripts/install-deps --postgres-versions` puts the major versions it fetches
/// (`MAJOR/bin`), as root and otherwise (under `$HOME`); `$ISOCERT_PG_VERSIONS` overrides both.
const VERSIONS_ROOT: &str = "/usr/local/lib/isocert/postgres";
const USER_VERSIONS_ROOT: &str = ".local/share/isocert/postgres";

/// The prefix of every embedded server's temporary directory.
const DIR_PREFIX: &str = "isocert-pg-";

/// The postmaster's pid file, relative to the server's directory.
const PID_FILE: &str = "data/postmaster.pid";

/// The signal for PostgreSQL's immediate shutdown (what a watchdog sends an orphan).
const STOP_SIGNAL: &str = "QUIT";

/// How many free ports to try when another process grabs the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// Server settings every embedded server gets: logical decoding for certificate recovery,
/// and durability off because the data is thrown away.
const BASE_SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "'127.0.0.1'"),
    ("wal_level", "logical"),
    ("max_replication_slots", "16"),
    ("max_wal_senders", "16"),
    ("track_commit_timestamp", "on"),
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_locks_per_transaction", "256"),
    ("max_pred_locks_per_transaction", "256"),
    ("log_min_messages", "warning"),
];

/// Options for [`EmbeddedPostgres`]: extra settings, connection limit, where the programs are.
#[derive(Clone, Debug)]
pub struct EmbeddedPostgresBuilder {
    bin_dir: Option<PathBuf>,
    max_connections: u32,
    server_user: String,
    settings: Vec<(String, String)>,
}

impl Default for EmbeddedPostgresBuilder {
    fn default() -> Self {
        EmbeddedPostgresBuilder {
            bin_dir: std::env::var_os("ISOCERT_PG_BIN").map(PathBuf::from),
            max_connections: 200,
            server_user: "postgres".to_string(),
            settings: Vec::new(),
        }
    }
}

impl EmbeddedPostgresBuilder {
    /// The defaults: programs found automatically (`$ISOCERT_PG_BIN` first), 200 connections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs PostgreSQL `version`, a major (`13`, `18`) or an exact release (`17.6`): the
    /// programs `scripts/install-deps --postgres-versions` installed
    /// (`$ISOCERT_PG_VERSIONS/VERSION/bin`, else `/usr/local/lib/isocert/postgres/VERSION/bin`
    /// or `~/.local/share/isocert/postgres/VERSION/bin`), else Debian's
    /// `/usr/lib/postgresql/VERSION/bin`. For a release, a major's folder whose `postgres
    /// --version` is that release serves too.
    ///
    /// # Errors
    /// [`AdapterError::PostgresVersionNotInstalled`] naming where it looked and the command
    /// that installs it.
    pub fn version(mut self, version: &str) -> Result<Self, AdapterError> {
        self.bin_dir = Some(version_bin_dir(version)?);
        Ok(self)
    }

    /// Uses the server programs in `dir` instead of searching for them.
    pub fn bin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.bin_dir = Some(dir.into());
        self
    }

    /// Sets `max_connections` (each workload session and each replication stream uses one).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// The operating-system user the server runs as when isocert runs as root (default `postgres`).
    pub fn server_user(mut self, user: impl Into<String>) -> Self {
        self.server_user = user.into();
        self
    }

    /// Adds one `postgresql.conf` setting, written as `name = value` (quote strings yourself).
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Creates the cluster and starts the server; blocks until it accepts connections.
    ///
    /// # Errors
    /// [`AdapterError::PostgresNotInstalled`] when the programs are missing (the message
    /// says how to install them), [`AdapterError::NoServerUser`] as root without the server
    /// user, [`AdapterError::ServerCommand`] when initdb or the server fails to start.
    pub fn start(self) -> Result<EmbeddedPostgres, AdapterError> {
        let bin = match &self.bin_dir {
            Some(dir) => checked_bin_dir(dir)?,
            None => find_bin_dir()?,
        };
        let owner = if running_as_root() { Some(lookup_user(&self.server_user)?) } else { None };
        let base = if owner.is_some() { reachable_temp_dir() } else { std::env::temp_dir() };
        for stale in sweep_stale(&base, DIR_PREFIX, PID_FILE, STOP_SIGNAL) {
            tracing::warn!(
                "removed {}: a throwaway PostgreSQL of isocert process {} that is gone",
                stale.dir.display(),
                stale.owner.pid
            );
        }
        let dir = tempfile::Builder::new().prefix(DIR_PREFIX).tempdir_in(&base).map_err(|e| {
            AdapterError::io(format!("creating a temporary directory in {}", base.display()), e)
        })?;
        OwnerFile::current().write_into(dir.path())?;
        let guard = ServerGuard::spawn(&dir.path().join(PID_FILE), STOP_SIGNAL, dir.path())?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| AdapterError::io(format!("chown {}", dir.path().display()), e))?;
        }
        let mut server =
            EmbeddedPostgres { dir: GuardedDir::new(dir, guard), bin, owner, port: 0, running: false };
        server.initdb()?;
        server.write_settings(&self)?;
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port()?;
            match server.pg_ctl_start() {
                Ok(()) => {
                    server.running = true;
                    tracing::info!(url = %server.url(), "embedded PostgreSQL started");
                    return Ok(server);
                }
                Err(e) if server.log_tail().contains("Address already in use") => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| AdapterError::Protocol { message: "no free port".into() }))
    }

    /// [`start`](Self::start) on a blocking thread, for async callers.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_async(self) -> Result<EmbeddedPostgres, AdapterError> {
        tokio::task::spawn_blocking(move || self.start())
            .await
            .map_err(|e| AdapterError::Protocol { message: format!("PostgreSQL start task failed: {e}") })?
    }
}

/// A private PostgreSQL server in a temporary directory, removed when dropped.
///
/// It runs with `wal_level=logical` (certificate recovery reads a logical replication
/// slot), the C locale, UTF8, trust authentication, fsync off, and listens on a free
/// loopback port. As root it runs the server as the unprivileged `postgres` user, because
/// PostgreSQL refuses to run as root. [`EmbeddedPostgres::url`] gives a connection URL for
/// the superuser `postgres` and the database `postgres`.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    /// The temporary directory, with the watchdog that stops the server and removes it if
    /// isocert dies without doing it.
    dir: GuardedDir,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    port: u16,
    running: bool,
}

impl EmbeddedPostgres {
    /// Starts a server with the default options (see [`EmbeddedPostgresBuilder`]).
    ///
    /// # Errors
    /// As [`EmbeddedPostgresBuilder::start`].
    pub fn start() -> Result<Self, AdapterError> {
        EmbeddedPostgresBuilder::new().start()
    }

    /// Starts a server with the default options without blocking the async runtime.
    ///
    /// # Errors
    /// As [`EmbeddedPostgresBuilder::start`].
    pub async fn start_async() -> Result<Self, AdapterError> {
        EmbeddedPostgresBuilder::new().start_async().await
    }

    /// Whether the server programs can be found (`$ISOCERT_PG_BIN`, the newest
    /// `/usr/lib/postgresql/*/bin`, or PATH), i.e. whether [`start`](Self::start) can work.
    pub fn is_installed() -> bool {
        match std::env::var_os("ISOCERT_PG_BIN") {
            Some(dir) => has_server_programs(Path::new(&dir)),
            None => find_bin_dir().is_ok(),
        }
    }

    /// Options for a server.
    pub fn builder() -> EmbeddedPostgresBuilder {
        EmbeddedPostgresBuilder::new()
    }

    /// The connection URL: `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder holding the server programs that run this server.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The cluster's data directory (inside the temporary directory).
    pub fn data_dir(&self) -> PathBuf {
        self.root().join("data")
    }

    /// The process id of the watchdog that cleans up if isocert dies ([`ServerGuard`]).
    pub fn guard_pid(&self) -> Option<u32> {
        self.dir.guard_pid()
    }

    /// The server log file.
    pub fn log_file(&self) -> PathBuf {
        self.root().join("server.log")
    }

    /// Stops the server and removes its directory, reporting failures (dropping does the
    /// same silently).
    ///
    /// # Errors
    /// [`AdapterError::ServerCommand`] when `pg_ctl stop` fails, [`AdapterError::Io`] when
    /// the directory cannot be removed.
    pub fn shutdown(mut self) -> Result<(), AdapterError> {
        self.stop()?;
        self.dir.remove()
    }

    /// [`shutdown`](Self::shutdown) on a blocking thread, for async callers.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown).
    pub async fn shutdown_async(self) -> Result<(), AdapterError> {
        tokio::task::spawn_blocking(move || self.shutdown())
            .await
            .map_err(|e| AdapterError::Protocol { message: format!("PostgreSQL stop task failed: {e}") })?
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.env("LC_ALL", "C").env_remove("PGDATA").current_dir(self.root());
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn initdb(&self) -> Result<(), AdapterError> {
        let out = run(
            self.command("initdb").arg("-D").arg(self.data_dir()).args([
                "-U",
                "postgres",
                "--auth=trust",
                "--locale=C",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        )?;
        check(out, "initdb", String::new)
    }

    fn write_settings(&self, options: &EmbeddedPostgresBuilder) -> Result<(), AdapterError> {
        let conf = self.data_dir().join("postgresql.conf");
        let mut text = String::from("\n# isocert embedded server\n");
        for (name, value) in BASE_SETTINGS {
            text.push_str(&format!("{name} = {value}\n"));
        }
        text.push_str(&format!("max_connections = {}\n", options.max_connections));
        text.push_str(&format!("unix_socket_directories = '{}'\n", self.root().display()));
        for (name, value) in &options.settings {
            text.push_str(&format!("{name} = {value}\n"));
        }
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .map_err(|e| AdapterError::io(format!("opening {}", conf.display()), e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| AdapterError::io(format!("writing {}", conf.display()), e))
    }

    fn pg_ctl_start(&self) -> Result<(), AdapterError> {
        let out = run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.log_file())
                .args(["-w", "-t", "60", "-o"])
                .arg(format!("-c port={}", self.port))
                .arg("start"),
            "pg_ctl start",
        )?;
        check(out, "pg_ctl start", || self.log_tail())
    }

    fn stop(&mut self) -> Result<(), AdapterError> {
        if !self.running {
            return Ok(());
        }
        let fast = self.pg_ctl_stop("fast");
        if fast.is_err() {
            self.pg_ctl_stop("immediate")?;
        }
        self.running = false;
        tracing::info!(port = self.port, "embedded PostgreSQL stopped");
        Ok(())
    }

    fn pg_ctl_stop(&self, mode: &str) -> Result<(), AdapterError> {
        let out = run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-m", mode, "-w", "-t", "30", "stop"]),
            "pg_ctl stop",
        )?;
        check(out, "pg_ctl stop", || self.log_tail())
    }

    /// The last lines of the server log, for error messages.
    fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.log_file()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for EmbeddedPostgres {
    /// Stops the server; the temporary directory is removed with it. If stopping fails the
    /// guard is dropped armed, so its watchdog stops the server by signal and removes the
    /// directory.
    fn drop(&mut self) {
        let stopped = self.stop();
        self.dir.release(stopped, "PostgreSQL");
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin`, else the folder of `initdb` on PATH.
fn find_bin_dir() -> Result<PathBuf, AdapterError> {
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(DEBIAN_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version =
                entry.file_name().to_str()?.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
            let bin = entry.path().join("bin");
            has_server_programs(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        if has_server_programs(&dir) {
            return Ok(dir);
        }
    }
    Err(AdapterError::PostgresNotInstalled { searched: format!("{DEBIAN_ROOT}/*/bin and PATH") })
}

/// The folders that may hold PostgreSQL `version` (a major, `17`, or a release, `17.6`), in
/// the order they are tried: `ROOT/VERSION/bin` under each root.
fn version_candidates(version: &str) -> Vec<PathBuf> {
    version_roots().into_iter().map(|r| r.join(version).join("bin")).collect()
}

/// Where installed versions live, in the order they are tried.
fn version_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(root) = std::env::var_os("ISOCERT_PG_VERSIONS") {
        roots.push(root.into());
    }
    roots.push(VERSIONS_ROOT.into());
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(Path::new(&home).join(USER_VERSIONS_ROOT));
    }
    roots.push(DEBIAN_ROOT.into());
    roots
}

/// A server version as `--server-version` takes it: a major (`17`) or an exact release
/// (`17.6`, `10.20`), digits with at most one dot.
fn parse_server_version(version: &str) -> Option<(&str, Option<&str>)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match version.split_once('.') {
        None if digits(version) => Some((version, None)),
        Some((major, minor)) if digits(major) && digits(minor) => Some((major, Some(minor))),
        _ => None,
    }
}

/// Whether the `postgres` in `dir` says it is exactly release `release`
/// (`postgres (PostgreSQL) 17.6`, possibly followed by a distribution's suffix).
fn reports_release(dir: &Path, release: &str) -> bool {
    let Ok(out) = Command::new(dir.join("postgres")).arg("--version").output() else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().any(|word| {
        word.strip_prefix(release)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
    })
}

fn version_bin_dir(version: &str) -> Result<PathBuf, AdapterError> {
    let Some((major, minor)) = parse_server_version(version) else {
        return Err(AdapterError::PostgresVersionNotInstalled {
            version: version.to_string(),
            searched: "nothing: a server version is a major version number such as 13 or 18, \
                       or an exact release such as 17.6"
                .into(),
        });
    };
    let mut candidates = version_candidates(version);
    if minor.is_some() {
        // A major's folder holds the release asked for when its server says so.
        let of_major = version_candidates(major);
        if let Some(dir) =
            candidates.iter().chain(&of_major).find(|d| has_server_programs(d) && reports_release(d, version))
        {
            return Ok(dir.clone());
        }
        candidates.extend(of_major.into_iter().map(|d| d.join(format!("postgres --version = {version}"))));
    } else if let Some(dir) = candidates.iter().find(|d| has_server_programs(d)) {
        return Ok(dir.clone());
    }
    Err(AdapterError::PostgresVersionNotInstalled {
        version: version.to_string(),
        searched: candidates.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
    })
}

fn checked_bin_dir(dir: &Path) -> Result<PathBuf, AdapterError> {
    if has_server_programs(dir) {
        Ok(dir.to_path_buf())
    } else {
        Err(AdapterError::PostgresNotInstalled { searched: dir.display().to_string() })
    }
}

fn has_server_programs(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"].iter().all(|p| dir.join(p).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_say_how_to_install() {
        let err = EmbeddedPostgres::builder().bin_dir("/nonexistent/bin").start().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("apt-get install -y postgresql"), "{text}");
        assert!(text.contains("/nonexistent/bin"), "{text}");
    }

    #[test]
    fn a_missing_server_version_says_how_to_install_it() {
        let err = EmbeddedPostgres::builder().version("7").unwrap_err().to_string();
        assert!(err.contains("scripts/install-deps --postgres-versions \"7\""), "{err}");
        assert!(err.contains("/usr/local/lib/isocert/postgres/7/bin"), "{err}");
        let err = EmbeddedPostgres::builder().version("18; rm").unwrap_err().to_string();
        assert!(err.contains("major version number"), "{err}");
        for bad in ["17.", ".6", "17.6.1", "17.x", ""] {
            let err = EmbeddedPostgres::builder().version(bad).unwrap_err().to_string();
            assert!(err.contains("exact release such as 17.6"), "{bad}: {err}");
        }
    }

    #[test]
    fn an_exact_release_is_looked_for_by_its_own_name_and_in_its_major() {
        let err = EmbeddedPostgres::builder().version("7.4").unwrap_err().to_string();
        assert!(err.contains("scripts/install-deps --postgres-versions \"7.4\""), "{err}");
        assert!(err.contains("/usr/local/lib/isocert/postgres/7.4/bin"), "{err}");
        assert!(err.contains("/usr/local/lib/isocert/postgres/7/bin/postgres --version = 7.4"), "{err}");
    }

    #[test]
    fn a_release_is_read_from_postgres_version() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("postgres");
        fs::write(&script, "#!/bin/sh\necho 'postgres (PostgreSQL) 17.6 (Debian 17.6-1)'\n").unwrap();
        fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert!(reports_release(dir.path(), "17.6"));
        assert!(!reports_release(dir.path(), "17.60"));
        assert!(!reports_release(dir.path(), "17"));
        assert!(!reports_release(dir.path(), "7.6"));
    }

    #[test]
    fn unknown_server_user_is_reported() {
        let err = lookup_user("no-such-user-isocert").unwrap_err();
        assert!(matches!(err, AdapterError::NoServerUser { .. }), "{err}");
    }
}
