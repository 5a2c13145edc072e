//! `isocert`: prove or refute a database's isolation level.
//!
//! Each subcommand lives in its own module with its clap arguments and a `run` function
//! returning the process exit code: 0 valid, 1 anomalies found, 2 unusable input or error.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

use clap::{Parser, Subcommand};

mod allowed;
mod answer;
mod certificate;
mod check;
mod cleanup;
mod convert;
mod exit;
mod gen;
mod hunt;
mod levels;
#[cfg(feature = "kafka")]
mod live_emit;
mod memory;
mod online;
mod output;
mod physical;
mod recover;
mod run;
mod scenario;
mod serve;
mod verdict;

/// Prove or refute a database's isolation level with version certificates.
#[derive(Debug, Parser)]
#[command(name = "isocert", version, about, long_about = None)]
struct Cli {
    /// Log more (repeat for more detail); logs go to standard error.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands. Each one's arguments are built only when it is the one given (clap's
/// `defer`): building every subcommand's arguments touched code and memory a check of a
/// small history paid for at every start (docs/PERFORMANCE.md, "Session 17"). The line
/// `isocert --help` shows for each is its variant's doc, the first paragraph of its
/// arguments' doc (which `isocert SUBCOMMAND --help` shows).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Check a recorded history against an isolation level.
    Check(check::CheckArgs),
    /// Check a history at every isolation level it can be checked at: which hold, which fail,
    /// and the anomaly classes between them.
    Levels(levels::LevelsArgs),
    /// Run a workload on a database, recover its version certificate concurrently, and check it.
    Run(run::RunArgs),
    /// Hunt for an isolation anomaly: sweep workloads, key counts, sessions, distributions,
    /// transaction lengths, delete and abort mixes and seeds within a budget, spending more
    /// where the server aborts most; shrink a finding and write a reproducer.
    Hunt(hunt::HuntArgs),
    /// Recover a version certificate from a history and the change stream captured with it.
    Recover(recover::RecoverArgs),
    /// Drop replication slots and publications left by isocert runs that are gone.
    Cleanup(cleanup::CleanupArgs),
    /// Generate a history (JSON lines) and its version certificate by simulating sessions
    /// against a multi-version store, valid by construction at the chosen isolation level.
    Gen(gen::GenArgs),
    /// Convert a history from one format to another.
    Convert(convert::ConvertArgs),
    /// Run an isolationtester `.spec` scenario: every permutation recorded, recovered and checked.
    Scenario(scenario::ScenarioArgs),
    /// Serve version certificates over HTTP to the tenants of a database.
    Serve(serve::ServeArgs),
    /// Fetch a history's version certificate from a certificate API.
    Certificate(certificate::CertificateArgs),
    /// Publish a recorded v1 history to a Kafka topic of transactions, for `isocert check
    /// --online` (tests and replays; a live test client publishes with `isocert_online::LiveEmitter`).
    Emit(online::EmitArgs),
}

/// The stack of the thread that runs the command: the predicate compiler and evaluator
/// recurse once per level of an expression, and a predicate may nest up to 10,000 levels
/// (a long `a + b + c ...`); reserved, not committed, so it costs only what is used.
const STACK_BYTES: usize = 512 << 20;

fn main() -> ExitCode {
    match std::thread::Builder::new().name("isocert".into()).stack_size(STACK_BYTES).spawn(run_command) {
        Ok(worker) => worker.join().unwrap_or_else(|_| exit::error()),
        Err(e) => {
            eprintln!("isocert: error: cannot start the main thread: {e}");
            exit::error()
        }
    }
}

fn run_command() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { exit::error() } else { exit::valid() };
        }
    };
    VERBOSE.store(cli.verbose, Ordering::Relaxed);
    init_logging(cli.verbose, matches!(cli.command, Command::Serve(_)));
    let result: anyhow::Result<ExitCode> = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Levels(args) => levels::run(args),
        Command::Run(args) => run::run(args),
        Command::Hunt(args) => hunt::run(args),
        Command::Recover(args) => recover::run(args),
        Command::Cleanup(args) => cleanup::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Scenario(args) => scenario::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Certificate(args) => certificate::run(args),
        Command::Emit(args) => online::emit(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("isocert: error: {}", error_text(&e));
            exit::error()
        }
    }
}

/// `e` and its causes joined by `: `, leaving out a cause whose words the text already
/// holds (drivers wrap a server's error and also report it as their source, so `{:#}`
/// printed the same server message two or three times).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// How many `-v` were given (set once at start).
static VERBOSE: AtomicU8 = AtomicU8::new(0);

/// Whether `-v` was given: text reports then show their internal detail.
pub(crate) fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed) > 0
}

/// `serving`: `isocert serve` logs its requests and its feed's events at the default level
/// (docs/API.md promises a line per request).
fn init_logging(verbose: u8, serving: bool) {
    let default = match verbose {
        0 if serving => "warn,isocert::request=info,isocert_server=info",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ISOCERT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal who has not asked for none (NO_COLOR, any
    // value but empty: no-color.org): escapes in a log file or a pipe are noise.
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && !no_color;
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    // A server's log keeps times and sources, as does `-v` (for whoever reads the
    // internals); a command's warnings read like its other messages.
    if serving || verbose > 0 || std::env::var_os("ISOCERT_LOG").is_some() {
        logs.init();
    } else {
        logs.event_format(PlainMessages).init();
    }
}

/// Log lines in the style of isocert's other messages: `isocert: warning: TEXT`, no time,
/// no module path.
struct PlainMessages;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PlainMessages
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(writer, "isocert: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_repeated_by_its_wrapper_is_printed_once() {
        #[derive(Debug)]
        struct Inner;
        impl std::fmt::Display for Inner {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("ERROR 1045: Access denied")
            }
        }
        impl std::error::Error for Inner {}
        #[derive(Debug)]
        struct Wrapper(Inner);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "Server error: `{}'", self.0)
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Wrapper(Inner)).context("connecting to mysql://root:***@h/db");
        assert_eq!(
            error_text(&e),
            "connecting to mysql://root:***@h/db: Server error: `ERROR 1045: Access denied'"
        );
    }
}
