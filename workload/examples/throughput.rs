//! Measures workload throughput against a real PostgreSQL: transactions per second of
//! `setup` + `run`, with the counts of committed, aborted and unknown transactions.
//!
//! ```text
//! cargo run --release -p isocert-workload --example throughput -- \
//!     [--db URL] [--workload kv|predicate|skew] [--isolation LEVEL] [--txns N] \
//!     [--sessions S] [--keys K] [--distribution uniform|zipfian|hotspot] [--seed X]
//! ```
//! Without `--db` (or `ISOCERT_TEST_PG`) it starts an embedded PostgreSQL.

use std::process::ExitCode;
use std::time::Instant;

use isocert_adapters::EmbeddedPostgres;
use isocert_history::Status;
use isocert_workload::{run, setup, WorkloadConfig, WorkloadKind};

fn parse_args() -> Result<(Option<String>, WorkloadConfig), String> {
    let mut cfg = WorkloadConfig::new(WorkloadKind::Kv, isocert_adapters::IsolationLevel::Serializable);
    cfg.txns = 5000;
    let mut db = std::env::var("ISOCERT_TEST_PG").ok();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag}: not a number: {v}"));
        match flag.as_str() {
            "--db" => db = Some(value),
            "--workload" => cfg.kind = value.parse().map_err(|e| format!("{e}"))?,
            "--isolation" => cfg.isolation = value.parse().map_err(|e| format!("{e}"))?,
            "--distribution" => cfg.distribution = value.parse().map_err(|e| format!("{e}"))?,
            "--txns" => cfg.txns = num(&value)?,
            "--sessions" => cfg.sessions = num(&value)? as u32,
            "--keys" => cfg.keys = num(&value)? as u32,
            "--seed" => cfg.seed = num(&value)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok((db, cfg))
}

fn main() -> ExitCode {
    let (db, cfg) = match parse_args() {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("throughput: {e}");
            return ExitCode::from(2);
        }
    };
    let embedded = match db {
        Some(_) => None,
        None => match EmbeddedPostgres::start() {
            Ok(pg) => Some(pg),
            Err(e) => {
                eprintln!("throughput: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let url = db.unwrap_or_else(|| embedded.as_ref().map(EmbeddedPostgres::url).unwrap_or_default());
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = rt.block_on(async {
        setup(&url, &cfg).await?;
        let start = Instant::now();
        let h = run(&url, &cfg, |_| {}).await?;
        Ok::<_, isocert_workload::WorkloadError>((h, start.elapsed()))
    });
    let (h, elapsed) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("throughput: {e}");
            return ExitCode::from(2);
        }
    };
    let count = |s: Status| h.txns.iter().filter(|t| t.status == s).count();
    let committed = count(Status::Committed);
    let ops: usize = h.txns.iter().map(|t| t.ops.len()).sum();
    println!(
        "workload={} isolation={} sessions={} keys={} distribution={}: {} committed, {} aborted, {} unknown, {} ops in {:.2} s = {:.0} committed txns/s",
        cfg.kind,
        cfg.isolation,
        cfg.sessions,
        cfg.keys,
        cfg.distribution,
        committed,
        count(Status::Aborted),
        count(Status::Unknown),
        ops,
        elapsed.as_secs_f64(),
        committed as f64 / elapsed.as_secs_f64()
    );
    ExitCode::SUCCESS
}
