//! The process exit codes every subcommand shares.

use std::process::ExitCode;

/// The history satisfies the level (or the command succeeded): exit 0.
pub(crate) fn valid() -> ExitCode {
    ExitCode::SUCCESS
}

/// Anomalies were found: exit 1.
#[allow(dead_code)]
pub(crate) fn anomalies() -> ExitCode {
    ExitCode::from(1)
}

/// The input could not be used, or something failed: exit 2.
pub(crate) fn error() -> ExitCode {
    ExitCode::from(2)
}

/// The run was interrupted (SIGINT/SIGTERM) and saved what completed: exit 130, as a shell
/// reports a process ended by Ctrl-C.
pub(crate) fn interrupted() -> ExitCode {
    ExitCode::from(130)
}
