//! `isocert cleanup`: drop the server-side objects (replication slots, publications) that
//! earlier `isocert run`s left on a database because they were killed before they could
//! clean up (SIGKILL, a machine that lost power). An abandoned logical replication slot
//! keeps every WAL segment from its position on, so it can fill the server's disk.
//!
//! Only objects named by isocert (`isocert_run_PID_START_HOST...`) whose process is gone
//! are dropped; objects of a run still going, objects in use, and anything not named by
//! isocert are left alone and listed. `isocert run --db` does the same at its start.

use std::process::ExitCode;

use anyhow::Context;
use isocert_adapters::{dispatch, redact_url, Database, DatabaseKind, DatabaseVisitor};
use serde_json::json;

use crate::exit;

/// Drop replication slots and publications left by isocert runs that are gone.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  isocert cleanup --db postgres://user@host/db")]
pub(crate) struct CleanupArgs {
    /// The database to clean (the same URL as `isocert run --db`).
    #[arg(long, value_name = "URL")]
    db: String,
    /// Also drop inactive isocert objects made from other hosts, whose processes this host
    /// cannot see (make sure no isocert run is going there).
    #[arg(long)]
    other_hosts: bool,
    /// Print what was dropped and left as JSON.
    #[arg(long)]
    json: bool,
    /// How long the database may take to answer before the command stops with exit 2.
    #[arg(long, value_name = "SECS", default_value_t = crate::answer::DEFAULT_SECS)]
    answer_timeout_secs: u64,
}

/// Runs `isocert cleanup`: exit 0 when done (whether or not anything was dropped), 2 on error.
pub(crate) fn run(args: CleanupArgs) -> anyhow::Result<ExitCode> {
    dispatch(DatabaseKind::from_url(&args.db)?, CleanupOn(args))?
}

struct CleanupOn(CleanupArgs);

impl DatabaseVisitor for CleanupOn {
    type Output = anyhow::Result<ExitCode>;

    fn visit<D: Database>(self) -> anyhow::Result<ExitCode> {
        let args = self.0;
        let db = D::from_url(&args.db)?;
        let rt =
            tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting tokio")?;
        let what = format!("cleaning {}", redact_url(&args.db));
        let limit = std::time::Duration::from_secs(args.answer_timeout_secs);
        let found =
            rt.block_on(crate::answer::within(limit, &what, &args.db, db.drop_stale(args.other_hosts)))?;
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({"dropped": found.dropped, "left": found.left}))?
            );
        } else {
            if found.dropped.is_empty() {
                println!("nothing to drop: no isocert objects left by runs that are gone");
            }
            for object in &found.dropped {
                println!("dropped {object}");
            }
            for object in &found.left {
                println!("left {object}");
            }
        }
        Ok(exit::valid())
    }
}
