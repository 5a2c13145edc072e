//! `isocert serve`: the version-certificate API (docs/API.md). With `--db` it serves the
//! certificates of that database; without it, it starts a throwaway PostgreSQL, creates a
//! demo tenant and prints how to run a workload against both.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use isocert_adapters::{dispatch, redact_url, Database, DatabaseKind, DatabaseVisitor, ThrowawayServer};
use isocert_server::api::ApiConfig;
use isocert_server::listen::ConnectionLimits;
use isocert_server::tenants::{token_digest_hex, TenantRegistry, Tenants};
use isocert_server::{run_server, ServeConfig};

use crate::exit;

/// Serve version certificates over HTTP to the tenants of a database.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert serve   # a demo: throwaway PostgreSQL, a demo tenant, the line to run against it\n  isocert serve --db postgres://feed@host/db --tenants tenants.toml --listen 127.0.0.1:8443"
)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// The database whose certificates are served (its role must be allowed to replicate
    /// and to create a publication for all tables). Without it a throwaway server of
    /// --database is started with a demo tenant.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// Without --db: which throwaway server to start.
    #[arg(long, value_name = "DATABASE", default_value = "postgres", conflicts_with = "db")]
    database: DatabaseKind,
    /// The tenants file (TOML: names, token digests, granted tables, rates; docs/API.md).
    /// Required with --db.
    #[arg(long, value_name = "FILE", conflicts_with = "hash_token")]
    tenants: Option<PathBuf>,
    /// Where recovered versions are stored: sqlite://PATH or postgres://...
    /// [default: sqlite://isocert-serve.sqlite with --db; a temporary file without]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// The name of the durable change feed (replication slot and publication).
    #[arg(long, value_name = "NAME", default_value = "isocert_serve")]
    feed_name: String,
    /// How long a request waits for the change feed to reach the history's commits
    /// before answering 202 (retry later).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    wait_secs: u64,
    /// The largest history accepted, in MiB (after decompression); larger ones get 413.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    max_body_mib: usize,
    /// The most bytes of request bodies the server holds at once, all requests together,
    /// in MiB (as sent, or inflated when larger) [default: 256, or --max-body-mib when
    /// larger]; a body that does not fit is refused with 503 and Retry-After.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(1..))]
    max_bodies_mib: Option<u32>,
    /// The most certificate and check requests one token may have in flight at once; one
    /// more is refused with 429 and Retry-After.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    max_requests_per_token: u32,
    /// How long recovered versions are kept, in hours; older ones are collected and a
    /// certificate that would need them is refused (410).
    #[arg(long, value_name = "HOURS", default_value_t = 24)]
    retention_hours: u64,
    /// Where to serve `/metrics` (Prometheus; global positions and sizes, for the
    /// operator) and `/healthz`: a listener of its own, never the tenants'. Without it
    /// `/metrics` is not served.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// The most connections open at once; past it new ones wait in the kernel's backlog.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// How long a client may take to send a request's headers (and to finish a TLS
    /// handshake); an idle connection is closed after it too.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_secs: u64,
    /// TLS certificate (PEM) for HTTPS; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Read a token from standard input, print the digest a tenants file lists for it, exit.
    #[arg(long)]
    hash_token: bool,
}

/// Runs `isocert serve` until SIGINT/SIGTERM (exit 0), or exits 2 when it cannot start.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.hash_token {
        let mut token = String::new();
        std::io::stdin().read_to_string(&mut token).context("reading the token from standard input")?;
        if token.trim().is_empty() {
            anyhow::bail!("no token on standard input");
        }
        println!("{}", token_digest_hex(&token));
        return Ok(exit::valid());
    }
    if args.db.is_some() && args.tenants.is_none() {
        anyhow::bail!("--db needs --tenants FILE: the tenants who may ask for certificates (docs/API.md)");
    }
    let kind = match &args.db {
        Some(url) => DatabaseKind::from_url(url)?,
        None => args.database,
    };
    dispatch(kind, ServeOn(args))?
}

struct ServeOn(ServeArgs);

impl DatabaseVisitor for ServeOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        serve_with::<D>(self.0)
    }
}

/// `--max-bodies-mib` when not given (or `--max-body-mib` when that is larger).
const DEFAULT_BODIES_MIB: usize = 256;

fn serve_with<D: Database>(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let bodies_mib = match args.max_bodies_mib {
        Some(mib) => {
            anyhow::ensure!(
                mib as usize >= args.max_body_mib,
                "--max-bodies-mib {mib} is smaller than --max-body-mib {}: a body of the largest size \
                 accepted would never fit",
                args.max_body_mib
            );
            mib as usize
        }
        None => args.max_body_mib.max(DEFAULT_BODIES_MIB),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let api = ApiConfig {
        feed_name: args.feed_name.clone(),
        wait: Duration::from_secs(args.wait_secs),
        body_limit: args.max_body_mib << 20,
        retention: Duration::from_secs(args.retention_hours * 3600),
        bodies_budget: bodies_mib << 20,
        requests_per_token: args.max_requests_per_token as usize,
    };
    let connections = ConnectionLimits {
        max_connections: args.max_connections as usize,
        header_timeout: Duration::from_secs(args.header_timeout_secs),
    };
    let metrics_listen = args.metrics_listen;
    let tls = args.tls_cert.clone().zip(args.tls_key.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    match &args.db {
        Some(url) => {
            let db = D::from_url(url)?;
            let tenants = Arc::new(TenantRegistry::from_file(args.tenants.as_deref().expect("checked"))?);
            let store = args.store.clone().unwrap_or_else(|| "sqlite://isocert-serve.sqlite".into());
            let config = ServeConfig {
                listen: args.listen,
                metrics_listen,
                store_url: store,
                tenants,
                api,
                connections,
                tls,
            };
            eprintln!("isocert serve: certificates of {}", redact_url(url));
            rt.block_on(run_server(db, config, |bound| {
                if let Some(metrics) = bound.metrics {
                    eprintln!("isocert serve: metrics on http://{metrics}/metrics");
                }
                eprintln!("isocert serve: listening on {scheme}://{}", bound.api)
            }))?;
        }
        None => {
            let name = D::KIND.display_name();
            eprintln!("isocert serve: starting a throwaway {name} (use --db to serve your own)");
            let (db, server) =
                rt.block_on(D::start_server(&[])).with_context(|| format!("starting the embedded {name}"))?;
            let dir = tempfile::Builder::new()
                .prefix("isocert-serve-")
                .tempdir()
                .context("creating a directory")?;
            let token: String = {
                use rand::Rng;
                let bytes: [u8; 24] = rand::rng().random();
                bytes.iter().map(|b| format!("{b:02x}")).collect()
            };
            let token_file = dir.path().join("demo.token");
            write_private(&token_file, &format!("{token}\n")).context("writing the demo token")?;
            let store = args
                .store
                .clone()
                .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("store.sqlite").display()));
            let tenants = Arc::new(TenantRegistry::fixed(Tenants::demo(&token)));
            let config = ServeConfig {
                listen: args.listen,
                metrics_listen,
                store_url: store,
                tenants,
                api,
                connections,
                tls,
            };
            let db_url = server.url();
            let served = rt.block_on(run_server(db, config, |bound| {
                let addr = bound.api;
                if let Some(metrics) = bound.metrics {
                    println!("isocert serve: metrics on http://{metrics}/metrics");
                }
                println!("isocert serve: listening on {scheme}://{addr}");
                println!("  demo tenant token: {token} (in {})", token_file.display());
                println!("  the demo tenant may read every table of schema public of {db_url}");
                println!("  try, in another terminal:");
                println!(
                    "    isocert run --db {db_url} --workload kv --isolation serializable --txns 500 --out out/api --force \\\n      --certificate-api {scheme}://{addr} --token-file {}",
                    token_file.display()
                );
            }));
            if let Err(e) = rt.block_on(server.shutdown()) {
                tracing::warn!("stopping the embedded {name}: {e}");
            }
            served?;
        }
    }
    Ok(exit::valid())
}

/// Writes `text` to a new file readable by its owner only (0600): the demo token is a
/// secret.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}
