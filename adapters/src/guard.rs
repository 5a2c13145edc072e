//! Throwaway servers that die with isocert, however isocert dies.
//!
//! A throwaway server (PostgreSQL's postmaster, MariaDB's mariadbd) is a separate process
//! in a temporary directory. Dropping its handle stops it, but a process killed by
//! SIGKILL, or by a signal whose default action ends it, runs no destructor: the server
//! would be re-parented to init and keep its port and tens of megabytes of files forever.
//!
//! Two mechanisms close that gap, for every adapter that starts a server:
//!
//! - [`ServerGuard`]: a watchdog process (`sh`, in a process group of its own and ignoring
//!   SIGINT/SIGTERM/SIGHUP, so a Ctrl-C sent to the terminal's group does not reach it) that
//!   blocks reading a pipe whose only writer is isocert. When isocert exits for any reason
//!   the kernel closes the pipe, the watchdog reads end-of-file, signals the server's pid
//!   (from its pid file), waits for it to exit and removes the directory. A normal shutdown
//!   [disarms](ServerGuard::disarm) the watchdog after stopping the server itself.
//! - [`OwnerFile`] and [`sweep_stale`]: each server directory records its owner (pid and
//!   the process's start time, so a recycled pid is not mistaken for the owner). Starting a
//!   new server removes the directories of owners that are gone, stopping what still runs
//!   there, for the case where the watchdog was killed too (a whole cgroup killed, a crash).
//!
//! A shell script rather than a helper binary: the watchdog must exist before anything
//! else can fail and must not depend on isocert's own binary being on disk or the same
//! version; `sh`, `kill`, `sleep` and `rm` are on every system that runs the servers.

use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::AdapterError;

/// Name of the file in a server directory that names the isocert process owning it.
const OWNER_FILE: &str = "isocert-owner";

/// What the watchdog runs: wait for end-of-file (isocert died) or `disarm` (isocert stopped
/// the server itself), then signal the pid in `$1` with `$2`, wait up to 20 s for it to
/// exit (then SIGKILL; a zombie counts as exited), and remove `$3`.
const WATCHDOG: &str = r#"trap '' INT TERM HUP
read -r line
[ "$line" = disarm ] && exit 0
pidfile=$1 sig=$2 dir=$3
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
if [ -f "$pidfile" ]; then
  pid=$(head -n 1 "$pidfile")
  case "$pid" in
    ''|*[!0-9]*) ;;
    *)
      kill -s "$sig" "$pid" 2>/dev/null
      i=0
      while alive "$pid" && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
      alive "$pid" && kill -s KILL "$pid" 2>/dev/null
      ;;
  esac
fi
rm -rf "$dir"
"#;

/// A watchdog that stops a throwaway server and removes its directory when isocert dies
/// without stopping it (see the module doc). Create it right after the directory exists,
/// before the server starts; call [`disarm`](Self::disarm) after a normal shutdown.
#[derive(Debug)]
pub struct ServerGuard {
    stdin: Option<ChildStdin>,
    child: Child,
}

impl ServerGuard {
    /// Starts the watchdog for the server whose pid will be on the first line of `pid_file`,
    /// to be stopped with `signal` (a name `kill -s` knows: `QUIT` is PostgreSQL's immediate
    /// shutdown, `TERM` MariaDB's), and the directory `dir` to remove afterwards.
    ///
    /// # Errors
    /// [`AdapterError::Io`] when `sh` cannot be started.
    pub fn spawn(pid_file: &Path, signal: &str, dir: &Path) -> Result<Self, AdapterError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("isocert-server-guard")
            .arg(pid_file)
            .arg(signal)
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| AdapterError::io("starting the server watchdog (sh)", e))?;
        let stdin = child.stdin.take();
        Ok(ServerGuard { stdin, child })
    }

    /// Tells the watchdog the server was stopped and removed normally, and waits for it to
    /// exit.
    pub fn disarm(mut self) {
        self.disarm_in_place();
    }

    fn disarm_in_place(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"disarm\n");
            drop(stdin);
            let _ = self.child.wait();
        }
    }

    /// The watchdog's process id (for tests that check it is gone).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerGuard {
    /// Dropping without disarming means the owner could not stop the server itself: the
    /// watchdog's pipe closes and it does the clean-up.
    fn drop(&mut self) {
        if let Some(stdin) = self.stdin.take() {
            drop(stdin);
            let _ = self.child.wait();
        }
    }
}

/// A throwaway server's temporary directory with the watchdog ([`ServerGuard`]) that
/// removes it, and stops the server, if isocert dies first. Both embedded servers keep one:
/// a normal stop removes the directory and disarms the watchdog; a failed stop keeps both,
/// so the watchdog finishes the job.
#[derive(Debug)]
pub(crate) struct GuardedDir {
    dir: Option<tempfile::TempDir>,
    guard: Option<ServerGuard>,
}

impl GuardedDir {
    /// Pairs a directory with its watchdog.
    pub(crate) fn new(dir: tempfile::TempDir, guard: ServerGuard) -> Self {
        GuardedDir { dir: Some(dir), guard: Some(guard) }
    }

    /// The directory (a path that does not exist once it is removed).
    pub(crate) fn path(&self) -> &Path {
        self.dir.as_ref().map(|d| d.path()).unwrap_or(Path::new("/nonexistent"))
    }

    /// The watchdog's process id, while armed.
    pub(crate) fn guard_pid(&self) -> Option<u32> {
        self.guard.as_ref().map(ServerGuard::pid)
    }

    /// After the server stopped: removes the directory, reporting a failure, and disarms
    /// the watchdog.
    pub(crate) fn remove(&mut self) -> Result<(), AdapterError> {
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            dir.close().map_err(|e| AdapterError::io(format!("removing {}", path.display()), e))?;
        }
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
        Ok(())
    }

    /// When a server is dropped: if it `stopped`, removes the directory silently and
    /// disarms the watchdog; otherwise keeps the directory (and the pid file in it) and
    /// drops the watchdog armed, so it kills the server and removes the directory.
    pub(crate) fn release(&mut self, stopped: Result<(), AdapterError>, server: &str) {
        match stopped {
            Ok(()) => {
                self.dir.take();
                if let Some(guard) = self.guard.take() {
                    guard.disarm();
                }
            }
            Err(e) => {
                tracing::warn!("stopping embedded {server}: {e}; its watchdog will kill it");
                if let Some(dir) = self.dir.take() {
                    let _ = dir.keep();
                }
            }
        }
    }
}

/// The owner of a server directory: the pid of the isocert process and its start time
/// (field 22 of `/proc/PID/stat`, clock ticks since boot), written as `PID START`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerFile {
    /// The owning process.
    pub pid: u32,
    /// Its start time, so that a recycled pid is not taken for the owner.
    pub start: u64,
}

impl OwnerFile {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        OwnerFile { pid, start: process_start(pid).unwrap_or(0) }
    }

    /// Writes this owner into `dir`.
    ///
    /// # Errors
    /// [`AdapterError::Io`] naming the file.
    pub fn write_into(&self, dir: &Path) -> Result<(), AdapterError> {
        let path = dir.join(OWNER_FILE);
        fs::write(&path, format!("{} {}\n", self.pid, self.start))
            .map_err(|e| AdapterError::io(format!("writing {}", path.display()), e))
    }

    /// The owner recorded in `dir`, if the file is there and well formed.
    pub fn read_from(dir: &Path) -> Option<Self> {
        let text = fs::read_to_string(dir.join(OWNER_FILE)).ok()?;
        let mut words = text.split_whitespace();
        Some(OwnerFile { pid: words.next()?.parse().ok()?, start: words.next()?.parse().ok()? })
    }

    /// Whether the owning process still runs (same pid, same start time, not a zombie).
    pub fn is_alive(&self) -> bool {
        process_start(self.pid).is_some_and(|start| self.start == 0 || start == self.start)
    }
}

/// The start time of process `pid`, from `/proc/PID/stat`; `None` when it does not exist
/// or has exited (a zombie waiting for its parent).
fn process_start(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The prefix of every server-side object name an isocert run creates (replication slots,
/// publications): [`run_name`] and [`RunName::parse`].
pub const RUN_PREFIX: &str = "isocert_run_";

/// A name for the server-side objects of this run, `isocert_run_PID_START_HOST`, saying
/// which process on which host owns them, so that a later run or `isocert cleanup` can tell
/// objects whose owner is gone (killed by SIGKILL) from those of a run still going. At most
/// 50 characters of `[a-z0-9_]`, so `_pub` and similar suffixes stay within PostgreSQL's
/// 63-character names.
pub fn run_name() -> String {
    let owner = OwnerFile::current();
    RunName { owner, host: host_tag() }.to_string()
}

/// The parts of a [`run_name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunName {
    /// The owning process.
    pub owner: OwnerFile,
    /// A hash of the owner's host name ([`host_tag`]).
    pub host: u32,
}

/// Whether the owner of a server-side object still runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Its isocert process runs on this host.
    Alive,
    /// Its isocert process was on this host and is gone: safe to drop.
    Gone,
    /// It belongs to a process on another host, which this host cannot see.
    OtherHost,
}

impl RunName {
    /// Parses an object name that starts with a run name (`isocert_run_PID_START_HOST`,
    /// possibly followed by `_pub` or another suffix); `None` for any other name.
    pub fn parse(name: &str) -> Option<RunName> {
        let mut parts = name.strip_prefix(RUN_PREFIX)?.split('_');
        let pid = parts.next()?.parse().ok()?;
        let start = parts.next()?.parse().ok()?;
        let host = u32::from_str_radix(parts.next()?, 16).ok()?;
        Some(RunName { owner: OwnerFile { pid, start }, host })
    }

    /// Whether its owner still runs, seen from this host.
    pub fn ownership(&self) -> Ownership {
        if self.host != host_tag() {
            Ownership::OtherHost
        } else if self.owner.is_alive() {
            Ownership::Alive
        } else {
            Ownership::Gone
        }
    }
}

impl std::fmt::Display for RunName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{RUN_PREFIX}{}_{}_{:08x}", self.owner.pid, self.owner.start, self.host)
    }
}

/// A 32-bit FNV-1a hash of this host's name (`/proc/sys/kernel/hostname`), to tell this
/// host's runs from other hosts' in names on a shared server.
pub fn host_tag() -> u32 {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name.trim().bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// A server directory removed by [`sweep_stale`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleServer {
    /// The directory that was removed.
    pub dir: PathBuf,
    /// The owner that was gone.
    pub owner: OwnerFile,
}

/// Removes the directories named `PREFIX*` in `base` whose [`OwnerFile`] names a process
/// that is gone, after stopping the server whose pid is in `pid_file` (a path relative to
/// the directory) with `signal`. Directories without an owner file (a server of another
/// program, or one being created right now) are left alone. Returns what was removed.
pub fn sweep_stale(base: &Path, prefix: &str, pid_file: &str, signal: &str) -> Vec<StaleServer> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(base) else { return removed };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(prefix) {
            continue;
        }
        let dir = entry.path();
        let Some(owner) = OwnerFile::read_from(&dir) else { continue };
        if owner.is_alive() {
            continue;
        }
        stop_by_pid_file(&dir.join(pid_file), signal);
        if fs::remove_dir_all(&dir).is_ok() {
            tracing::warn!(dir = %dir.display(), pid = owner.pid, "removed a throwaway server left by an isocert process that is gone");
            removed.push(StaleServer { dir, owner });
        }
    }
    removed
}

/// Signals the process named in `pid_file` and waits up to 20 s for it to exit.
fn stop_by_pid_file(pid_file: &Path, signal: &str) {
    let Some(pid) =
        fs::read_to_string(pid_file).ok().and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
    else {
        return;
    };
    let _ = Command::new("kill").args(["-s", signal, &pid.to_string()]).stderr(Stdio::null()).status();
    for _ in 0..200 {
        if process_start(pid).is_none() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-s", "KILL", &pid.to_string()]).stderr(Stdio::null()).status();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A stand-in server: a `sleep` that, like a postmaster started by pg_ctl, is not our
    /// child (init reaps it), with its pid in `dir/server.pid`.
    fn fake_server(dir: &Path) -> u32 {
        let pid_file = dir.join("server.pid");
        let status = Command::new("sh")
            .arg("-c")
            .arg("sleep 600 >/dev/null 2>&1 & echo $! > \"$1\"")
            .arg("sh")
            .arg(&pid_file)
            .status()
            .unwrap();
        assert!(status.success());
        fs::read_to_string(pid_file).unwrap().trim().parse().unwrap()
    }

    fn running(pid: u32) -> bool {
        process_start(pid).is_some()
    }

    fn wait_until(mut done: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    #[test]
    fn a_dropped_guard_stops_the_server_and_removes_its_directory() {
        let dir = tempfile::tempdir().unwrap().keep();
        let server = fake_server(&dir);
        let guard = ServerGuard::spawn(&dir.join("server.pid"), "TERM", &dir).unwrap();
        drop(guard);
        assert!(wait_until(|| !running(server)), "the server was not stopped");
        assert!(!dir.exists(), "{} was not removed", dir.display());
    }

    #[test]
    fn a_disarmed_guard_leaves_everything_alone() {
        let dir = tempfile::tempdir().unwrap();
        let server = fake_server(dir.path());
        let guard = ServerGuard::spawn(&dir.path().join("server.pid"), "TERM", dir.path()).unwrap();
        guard.disarm();
        std::thread::sleep(Duration::from_millis(200));
        assert!(running(server), "a disarmed guard stopped the server");
        assert!(dir.path().exists());
        stop_by_pid_file(&dir.path().join("server.pid"), "TERM");
        assert!(!running(server));
    }

    #[test]
    fn owner_files_tell_live_owners_from_gone_ones() {
        let dir = tempfile::tempdir().unwrap();
        let me = OwnerFile::current();
        me.write_into(dir.path()).unwrap();
        assert_eq!(OwnerFile::read_from(dir.path()), Some(me));
        assert!(me.is_alive());
        assert!(
            !OwnerFile { pid: me.pid, start: me.start + 1 }.is_alive(),
            "a recycled pid counts as the owner"
        );
        let mut gone = Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        assert!(!OwnerFile { pid, start: 1 }.is_alive());
    }

    #[test]
    fn run_names_say_whose_objects_they_are() {
        let name = run_name();
        assert!(
            name.len() <= 50
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        );
        let parsed = RunName::parse(&format!("{name}_pub")).unwrap();
        assert_eq!(parsed.owner, OwnerFile::current());
        assert_eq!(parsed.ownership(), Ownership::Alive);
        let gone =
            RunName { owner: OwnerFile { pid: parsed.owner.pid, start: parsed.owner.start + 1 }, ..parsed };
        assert_eq!(RunName::parse(&gone.to_string()).unwrap().ownership(), Ownership::Gone);
        let elsewhere = RunName { host: parsed.host ^ 1, ..gone };
        assert_eq!(elsewhere.ownership(), Ownership::OtherHost);
        assert_eq!(RunName::parse("isocert_run_123"), None, "an old-style name has no owner to check");
        assert_eq!(RunName::parse("my_slot"), None);
    }

    #[test]
    fn sweep_removes_only_directories_whose_owner_is_gone() {
        let base = tempfile::tempdir().unwrap();
        let stale = base.path().join("isocert-test-stale");
        let live = base.path().join("isocert-test-live");
        let foreign = base.path().join("isocert-test-foreign");
        let other = base.path().join("other-stale");
        for d in [&stale, &live, &foreign, &other] {
            fs::create_dir(d).unwrap();
        }
        let server = fake_server(&stale);
        let mut gone = Command::new("true").spawn().unwrap();
        let gone_owner = OwnerFile { pid: gone.id(), start: 1 };
        gone.wait().unwrap();
        gone_owner.write_into(&stale).unwrap();
        gone_owner.write_into(&other).unwrap();
        OwnerFile::current().write_into(&live).unwrap();

        let removed = sweep_stale(base.path(), "isocert-test-", "server.pid", "TERM");
        assert_eq!(removed, vec![StaleServer { dir: stale.clone(), owner: gone_owner }]);
        assert!(!stale.exists() && live.exists() && foreign.exists() && other.exists());
        assert!(!running(server), "the stale server was not stopped");
    }
}
