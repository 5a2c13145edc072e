//! Running a throwaway server's programs: output checks, the unprivileged user a server
//! runs as when isocert is root, a directory that user can reach, a free loopback port.
//! Shared by every embedded server (PostgreSQL, MariaDB).

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::AdapterError;

/// Runs `cmd` to completion, naming `program` when it cannot be started.
pub(crate) fn run(cmd: &mut Command, program: &str) -> Result<Output, AdapterError> {
    cmd.output().map_err(|e| AdapterError::io(format!("running {program}"), e))
}

/// `Ok` when the program succeeded; else its output and the tail of the server log.
pub(crate) fn check(out: Output, program: &str, log: impl FnOnce() -> String) -> Result<(), AdapterError> {
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.trim().is_empty() {
        output = format!("{}\n{output}", stdout.trim());
    }
    let log = log();
    if !log.is_empty() {
        output = format!("{output}\nserver log:\n{log}");
    }
    Err(AdapterError::ServerCommand { program: program.to_string(), status: out.status.to_string(), output })
}

/// The temporary directory, if every folder on its path lets other users through (the
/// server runs as another user); else `/tmp`.
pub(crate) fn reachable_temp_dir() -> PathBuf {
    let dir = std::env::temp_dir();
    let traversable = dir.ancestors().all(|a| fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0));
    if traversable {
        dir
    } else {
        PathBuf::from("/tmp")
    }
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective user).
pub(crate) fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// The uid and gid of `user` from `/etc/passwd`.
pub(crate) fn lookup_user(user: &str) -> Result<(u32, u32), AdapterError> {
    let passwd = fs::read_to_string("/etc/passwd").map_err(|e| AdapterError::io("reading /etc/passwd", e))?;
    passwd
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 4 && fields[0] == user)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
        })
        .flatten()
        .next()
        .ok_or_else(|| AdapterError::NoServerUser { user: user.to_string() })
}

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> Result<u16, AdapterError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| AdapterError::io("finding a free loopback port", e))?;
    let port = listener.local_addr().map_err(|e| AdapterError::io("finding a free loopback port", e))?.port();
    Ok(port)
}
