//! `isocert certificate`: fetch the certificate of a recorded history from an
//! `isocert serve` API (docs/API.md), for histories recorded by any client that recorded
//! the adapter's facts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use isocert_server::client::{CertificateClient, Request};

use crate::exit;
use crate::output::write_file;

/// Fetch a history's version certificate from a certificate API.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert certificate out/history.jsonl --api http://127.0.0.1:8443 --token-file token --out certificate.json"
)]
pub(crate) struct CertificateArgs {
    /// The history (v1 JSON Lines with the adapter's facts in `meta`, as `isocert run` records it).
    history: PathBuf,
    /// The API's base URL (`http://host:port`).
    #[arg(long, value_name = "URL")]
    api: String,
    /// A file whose first line is the API token.
    #[arg(long, value_name = "FILE")]
    token_file: PathBuf,
    /// The schema of the history's tables, when the token may read the table name in
    /// several schemas.
    #[arg(long, value_name = "SCHEMA")]
    schema: Option<String>,
    /// Ask the server for its verdict at this level instead (the report JSON of
    /// `isocert check --json`).
    #[arg(long, value_name = "LEVEL")]
    check: Option<String>,
    /// Where to write the answer [default: standard output].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// How long to keep retrying while the server is not ready, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    timeout_secs: u64,
}

/// Runs the command: exit 0 with the answer written, 2 on any error.
pub(crate) fn run(args: CertificateArgs) -> anyhow::Result<ExitCode> {
    let history =
        std::fs::read(&args.history).with_context(|| format!("reading {}", args.history.display()))?;
    isocert_history::v1::read_history(&history[..])
        .with_context(|| format!("reading {}", args.history.display()))?;
    let mut client = CertificateClient::new(&args.api, &args.token_file)?;
    client.deadline = std::time::Duration::from_secs(args.timeout_secs);
    let request = match &args.check {
        Some(level) => Request::Check(level),
        None => Request::Certificate,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting tokio")?;
    let answer = rt.block_on(client.fetch(&history, request, args.schema.as_deref()))?;
    match &args.out {
        Some(path) => write_file(path, |out| Ok(std::io::Write::write_all(out, &answer)?))?,
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&answer)?;
            if !answer.ends_with(b"\n") {
                stdout.write_all(b"\n")?;
            }
        }
    }
    Ok(exit::valid())
}
