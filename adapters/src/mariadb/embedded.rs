//! A throwaway MariaDB server: `mariadb-install-db` into a temporary directory, `mariadbd`
//! with a row-based binary log on a free loopback port, stopped and removed when dropped
//! and, through a [`ServerGuard`], also when isocert is killed (SIGKILL included).
//! Directories of servers whose isocert process is gone are removed by the next start.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::guard::{sweep_stale, GuardedDir, OwnerFile, ServerGuard};
use crate::server_process::{check, free_port, lookup_user, reachable_temp_dir, run, running_as_root};
use crate::AdapterError;

/// The prefix of every embedded server's temporary directory.
const DIR_PREFIX: &str = "isocert-mariadb-";

/// The server's pid file, relative to the server's directory.
const PID_FILE: &str = "mariadbd.pid";

/// The server's own temporary directory (`--tmpdir`), relative to the server's directory.
const TMP_DIR: &str = "tmp";

/// `mariadbd` shuts down cleanly on SIGTERM.
const STOP_SIGNAL: &str = "TERM";

/// The database the workload's tables live in.
pub const DATABASE: &str = "isocert";

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Server options every embedded server gets: the row-based binary log certificate recovery
/// reads (full row images, GTIDs), loopback only, and durability off because the data is
/// thrown away.
const BASE_OPTIONS: &[&str] = &[
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--server-id=1",
    "--max-connections=300",
    "--innodb-buffer-pool-size=128M",
    "--innodb-flush-log-at-trx-commit=0",
    "--sync-binlog=0",
    "--innodb-doublewrite=0",
    "--performance-schema=OFF",
];

/// A throwaway MariaDB server, reachable at [`EmbeddedMariaDb::url`] as `root` without a
/// password, with an empty database `isocert`.
#[derive(Debug)]
pub struct EmbeddedMariaDb {
    /// The temporary directory, with the watchdog that stops the server and removes it if
    /// isocert dies without doing it.
    dir: GuardedDir,
    port: u16,
    child: Option<Child>,
}

/// The folder holding `mariadbd` and `mariadb-install-db`, if installed.
fn programs() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    Some((find("mariadbd")?, find("mariadb-install-db")?))
}

impl EmbeddedMariaDb {
    /// Whether the server programs are installed (`apt-get install -y mariadb-server`).
    pub fn is_installed() -> bool {
        programs().is_some()
    }

    /// Creates the data directory and starts the server with `options` added to its
    /// command line (`--name=value`); blocks until it accepts connections.
    ///
    /// # Errors
    /// [`AdapterError::MariaDbNotInstalled`] when the programs are missing,
    /// [`AdapterError::ServerCommand`] when installing the data directory or starting fails.
    pub fn start(options: &[(String, String)]) -> Result<Self, AdapterError> {
        let (server, install) = programs().ok_or(AdapterError::MariaDbNotInstalled)?;
        let owner = if running_as_root() { Some(lookup_user("mysql")?) } else { None };
        let base = if owner.is_some() { reachable_temp_dir() } else { std::env::temp_dir() };
        for stale in sweep_stale(&base, DIR_PREFIX, PID_FILE, STOP_SIGNAL) {
            tracing::warn!(
                "removed {}: a throwaway MariaDB of isocert process {} that is gone",
                stale.dir.display(),
                stale.owner.pid
            );
        }
        let dir = tempfile::Builder::new().prefix(DIR_PREFIX).tempdir_in(&base).map_err(|e| {
            AdapterError::io(format!("creating a temporary directory in {}", base.display()), e)
        })?;
        OwnerFile::current().write_into(dir.path())?;
        let guard = ServerGuard::spawn(&dir.path().join(PID_FILE), STOP_SIGNAL, dir.path())?;
        // A private temporary directory: servers sharing /tmp collide on their internal
        // temporary tables (`#sql-temptable-…`), which made one concurrent
        // mariadb-install-db in three fail with "Unknown table 'mysql.tmp_user_…'".
        let tmp = dir.path().join(TMP_DIR);
        std::fs::create_dir(&tmp).map_err(|e| AdapterError::io(format!("creating {}", tmp.display()), e))?;
        if let Some((uid, gid)) = owner {
            for path in [dir.path(), tmp.as_path()] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(|e| AdapterError::io(format!("chown {}", path.display()), e))?;
            }
        }
        let tmpdir = format!("--tmpdir={}", tmp.display());
        let mut db = EmbeddedMariaDb { dir: GuardedDir::new(dir, guard), port: 0, child: None };
        let mut cmd = Command::new(&install);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", db.data_dir().display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg(&tmpdir);
        if owner.is_some() {
            cmd.arg("--user=mysql");
        }
        let out = run(&mut cmd, "mariadb-install-db")?;
        check(out, "mariadb-install-db", String::new)?;
        db.port = free_port()?;
        let root = db.root().to_path_buf();
        let log = std::fs::File::create(root.join("server.log"))
            .map_err(|e| AdapterError::io("creating the MariaDB server log", e))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(root.join("server.log"), Some(uid), Some(gid))
                .map_err(|e| AdapterError::io("chown the MariaDB server log", e))?;
        }
        let mut cmd = Command::new(&server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", db.data_dir().display()))
            .arg(format!("--port={}", db.port))
            .arg(format!("--socket={}", root.join("mariadbd.sock").display()))
            .arg(format!("--pid-file={}", root.join(PID_FILE).display()))
            .arg(format!("--log-bin={}", root.join("binlog").display()))
            .arg(format!("--log-error={}", root.join("server.log").display()))
            .arg(&tmpdir)
            .args(BASE_OPTIONS)
            .args(options.iter().map(|(name, value)| format!("--{name}={value}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Its own process group: a Ctrl-C meant for isocert must not reach the server
            // before isocert has saved the run (isocert stops it afterwards).
            .process_group(0);
        if owner.is_some() {
            cmd.arg("--user=mysql");
        }
        let child = cmd.spawn().map_err(|e| AdapterError::io(format!("starting {}", server.display()), e))?;
        db.child = Some(child);
        db.wait_ready()?;
        tracing::info!(port = db.port, "embedded MariaDB started");
        Ok(db)
    }

    /// [`start`](Self::start) on a blocking thread, for async callers.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_async(options: Vec<(String, String)>) -> Result<Self, AdapterError> {
        tokio::task::spawn_blocking(move || Self::start(&options))
            .await
            .map_err(|e| AdapterError::Protocol { message: format!("MariaDB start task failed: {e}") })?
    }

    /// `mysql://root@127.0.0.1:PORT/isocert`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root().join("data")
    }

    /// The process id of the watchdog that cleans up if isocert dies ([`ServerGuard`]).
    pub fn guard_pid(&self) -> Option<u32> {
        self.dir.guard_pid()
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until the server answers on its port, then creates the `isocert` database.
    fn wait_ready(&mut self) -> Result<(), AdapterError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let base = format!("mysql://root@127.0.0.1:{}", self.port);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AdapterError::io("starting a runtime", e))?;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(AdapterError::ServerCommand {
                    program: "mariadbd".into(),
                    status: status.to_string(),
                    output: format!("server log:\n{}", self.log_tail()),
                });
            }
            let created = rt.block_on(async {
                let mut conn = mysql_async::Conn::from_url(&base).await?;
                mysql_async::prelude::Queryable::query_drop(
                    &mut conn,
                    format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"),
                )
                .await?;
                conn.disconnect().await
            });
            match created {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(AdapterError::ServerCommand {
                        program: "mariadbd".into(),
                        status: format!("not ready after {}s: {e}", START_TIMEOUT.as_secs()),
                        output: format!("server log:\n{}", self.log_tail()),
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Stops the server and removes its directory, reporting failures (dropping does the
    /// same silently).
    ///
    /// # Errors
    /// [`AdapterError::Io`] when the server cannot be signalled or the directory removed.
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
            .map_err(|e| AdapterError::Protocol { message: format!("MariaDB stop task failed: {e}") })?
    }

    /// SIGTERM (clean shutdown), then waits; SIGKILL after 30 seconds.
    fn stop(&mut self) -> Result<(), AdapterError> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let pid = child.id().to_string();
        let out = run(Command::new("kill").args(["-s", STOP_SIGNAL, &pid]), "kill")?;
        check(out, "kill", String::new)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        tracing::info!(port = self.port, "embedded MariaDB stopped");
        Ok(())
    }

    /// The last lines of the server log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.root().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for EmbeddedMariaDb {
    /// Stops the server; the temporary directory is removed with it. If stopping fails the
    /// guard is dropped armed, so its watchdog stops the server by signal and removes the
    /// directory.
    fn drop(&mut self) {
        let stopped = self.stop();
        self.dir.release(stopped, "MariaDB");
    }
}
