//! The Chronos/Aion benchmark: generates the paper's workload shape and times parsing,
//! checking and online ingest (figures and commands in docs/PERFORMANCE.md).
//!
//! ```text
//! cargo bench -p isocert-checker --bench chronos -- gen DIR [TXNS]   # write the inputs
//! cargo bench -p isocert-checker --bench chronos -- run DIR          # time them
//! ```
//!
//! The generator is seeded and streams: 50 sessions, 1,000 keys picked zipfian (s = 0.99),
//! 15 operations per transaction, half of them reads, every transaction committed and the
//! history valid under snapshot isolation by construction: transaction `i` runs in
//! `[10i, 10i + 15]`, overlapping only its neighbours, whose written keys it avoids, and
//! reads the snapshot at its start. Each run asserts the history is valid before timing.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use isocert_checker::{check_chronos_kv, Aion, AionOptions, IsolationLevel};
use isocert_history::chronos::read_chronos;
use isocert_history::{read_kv_v1, KvV1Reader};
use isocert_random::rand::Rng as _;
use isocert_random::{Distribution, KeyChooser};

const SESSIONS: usize = 50;
const KEYS: usize = 1000;
const OPS: usize = 15;

/// One generated transaction: its reads and writes (key, value).
struct Txn {
    id: usize,
    ops: Vec<(bool, usize, i64)>,
}

/// Generates transactions in timestamp order, calling `emit` for each.
fn generate(txns: usize, mut emit: impl FnMut(&Txn) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut rng = isocert_random::seeded(0x9E37_79B9_7F4A_7C15);
    let zipf = KeyChooser::new(Distribution::Zipfian, KEYS as u64);
    // Committed state, and the previous transaction's writes (not yet visible at our start).
    let mut frontier = vec![0i64; KEYS];
    let mut prev_writes: Vec<(usize, i64)> = Vec::new();
    let mut txn = Txn { id: 0, ops: Vec::with_capacity(OPS) };
    for i in 0..txns {
        txn.id = i;
        txn.ops.clear();
        let mut own: Vec<(usize, i64)> = Vec::new();
        for j in 0..OPS {
            let mut k = zipf.pick(&mut rng) as usize;
            if rng.random::<bool>() {
                let v = own.iter().rev().find(|(key, _)| *key == k).map_or(frontier[k], |(_, v)| *v);
                txn.ops.push((false, k, v));
            } else {
                while prev_writes.iter().any(|(key, _)| *key == k) {
                    k = (k + 1) % KEYS;
                }
                let v = (i * OPS + j + 1) as i64;
                own.push((k, v));
                txn.ops.push((true, k, v));
            }
        }
        emit(&txn)?;
        // The previous transaction commits (10i - 10 + 15 = 10i + 5) before the next start (10i + 10).
        for &(k, v) in &prev_writes {
            frontier[k] = v;
        }
        prev_writes = own;
    }
    Ok(())
}

fn v1_line(out: &mut Vec<u8>, t: &Txn) {
    let start = 10 * t.id as u64;
    let _ = write!(
        out,
        "{{\"id\":{},\"session\":{},\"start_ts\":{},\"commit_ts\":{},\"ops\":[",
        t.id,
        t.id % SESSIONS,
        start,
        start + 15
    );
    for (j, &(write, k, v)) in t.ops.iter().enumerate() {
        let sep = if j == 0 { "" } else { "," };
        let f = if write { "w" } else { "r" };
        let _ = write!(out, "{sep}{{\"f\":\"{f}\",\"key\":{k},\"value\":{v}}}");
    }
    out.extend_from_slice(b"]}\n");
}

fn chronos_obj(out: &mut Vec<u8>, t: &Txn) {
    let start = 10 * t.id as u64;
    let _ = write!(
        out,
        "{}{{\"tid\":{},\"sid\":{},\"sts\":{{\"p\":\"{}\",\"l\":0}},\"cts\":{{\"p\":\"{}\",\"l\":0}},\"ops\":[",
        if t.id == 0 { "[\n" } else { ",\n" },
        t.id,
        t.id % SESSIONS,
        start,
        start + 15
    );
    for (j, &(write, k, v)) in t.ops.iter().enumerate() {
        let sep = if j == 0 { "" } else { "," };
        let f = if write { "w" } else { "r" };
        let _ = write!(out, "{sep}{{\"t\":\"{f}\",\"k\":{k},\"v\":{v}}}");
    }
    out.extend_from_slice(b"]}");
}

/// Writes `bench.jsonl` (v1), `bench.chronos.json` and `bench-displaced.jsonl` (arrival
/// displaced by up to 499 positions, session order kept).
fn gen(dir: &Path, txns: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut v1 = BufWriter::new(File::create(dir.join("bench.jsonl"))?);
    let mut chronos = BufWriter::new(File::create(dir.join("bench.chronos.json"))?);
    let mut displaced = BufWriter::new(File::create(dir.join("bench-displaced.jsonl"))?);
    let mut rng = isocert_random::seeded(7);
    let mut block: Vec<Vec<u8>> = Vec::new();
    let flush_block = |block: &mut Vec<Vec<u8>>,
                       rng: &mut isocert_random::SeededRng,
                       out: &mut BufWriter<File>|
     -> std::io::Result<()> {
        // Shuffle, then restore each session's order over the shuffled slots.
        let n = block.len();
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let mut slots_by_session: Vec<Vec<usize>> = vec![Vec::new(); SESSIONS];
        for (slot, &i) in order.iter().enumerate() {
            slots_by_session[i % SESSIONS].push(slot);
        }
        let mut arranged = vec![0usize; n];
        for (s, slots) in slots_by_session.iter_mut().enumerate() {
            slots.sort_unstable();
            let members = (0..n).filter(|i| i % SESSIONS == s);
            for (slot, i) in slots.iter().zip(members) {
                arranged[*slot] = i;
            }
        }
        for i in arranged {
            out.write_all(&block[i])?;
        }
        block.clear();
        Ok(())
    };
    let mut header = String::from("{\"format\":\"isocert-history\",\"version\":1,\"initial\":[");
    for k in 0..KEYS {
        header.push_str(&format!("{}{{\"key\":{k},\"value\":0}}", if k == 0 { "" } else { "," }));
    }
    header.push_str("]}\n");
    v1.write_all(header.as_bytes())?;
    displaced.write_all(header.as_bytes())?;
    let mut line = Vec::with_capacity(1024);
    generate(txns, |t| {
        line.clear();
        v1_line(&mut line, t);
        v1.write_all(&line)?;
        block.push(line.clone());
        if block.len() == 500 {
            flush_block(&mut block, &mut rng, &mut displaced)?;
        }
        line.clear();
        chronos_obj(&mut line, t);
        chronos.write_all(&line)
    })?;
    flush_block(&mut block, &mut rng, &mut displaced)?;
    chronos.write_all(b"\n]\n")?;
    v1.flush()?;
    chronos.flush()?;
    displaced.flush()
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

fn run(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let si = IsolationLevel::SnapshotIsolation;
    for (name, chronos_format) in [("bench.jsonl", false), ("bench.chronos.json", true)] {
        let path = dir.join(name);
        let bytes = std::fs::metadata(&path)?.len();
        let t0 = Instant::now();
        let kv = if chronos_format {
            read_chronos(File::open(&path)?, Some(&isocert_history::Scalar::Int(0)))?
        } else {
            read_kv_v1(File::open(&path)?)?
        };
        let parse = secs(t0);
        let (txns, ops) = (kv.len(), kv.op_count());
        let t1 = Instant::now();
        let (report, _) = check_chronos_kv(kv, si)?;
        let check = secs(t1);
        assert!(report.is_valid(), "the benchmark history must be valid: {:?}", report.anomalies.first());
        println!(
            "chronos {name}: {txns} txns, {ops} ops, {:.0} MB: parse {parse:.2} s ({:.0} MB/s), check {check:.2} s, total {:.2} s",
            bytes as f64 / 1e6,
            bytes as f64 / 1e6 / parse,
            parse + check
        );
    }
    let path = dir.join("bench-displaced.jsonl");
    let t0 = Instant::now();
    let mut reader = KvV1Reader::new(File::open(&path)?);
    let mut aion = Aion::new(AionOptions::new(si))?;
    while let Some(t) = reader.next_txn()? {
        aion.receive(reader.history(), t)?;
        if (t.index() + 1) % isocert_history::KvHistory::BLOCK == 0 {
            reader.history_mut().free_block(t.index() / isocert_history::KvHistory::BLOCK);
        }
    }
    let kv = reader.into_history();
    let report = aion.finish(&kv);
    let total = secs(t0);
    assert!(report.is_valid(), "{:?} {:?}", report.anomalies.first(), report.notes);
    println!(
        "aion bench-displaced.jsonl: {} txns in {total:.2} s: {:.0} txns/s (parse included)",
        kv.len(),
        kv.len() as f64 / total
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    match args.first().map(String::as_str) {
        Some("gen") => {
            let dir = PathBuf::from(args.get(1).ok_or("gen DIR [TXNS]")?);
            let txns = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1_000_000);
            gen(&dir, txns)?;
        }
        Some("run") => run(Path::new(args.get(1).ok_or("run DIR")?))?,
        _ => eprintln!("usage: chronos gen DIR [TXNS] | chronos run DIR"),
    }
    Ok(())
}
