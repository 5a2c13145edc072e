//! Measures the importers on a generated key-value history.
//!
//! `cargo run --release -p isocert-history --example formats_bench -- FORMAT TXNS [DIR]`
//! writes a history of TXNS transactions (8 sessions, 4 ops each, 1,000 keys, half reads,
//! every written value unique) in FORMAT under DIR (default: a temporary directory), then
//! times reading it back and prints one line: format, transactions, bytes, seconds, rate.
//! Run it under `/usr/bin/time -v` for the peak memory of the read. FORMAT `king-cobra`
//! is a Cobra log directory read with a King Cobra version order file beside it.

use std::path::PathBuf;
use std::time::Instant;

use isocert_history::formats::{read_cobra_dir_with_version_order, write_king_cobra_version_order, Format};
use isocert_history::{Certificate, History, Op, Scalar, Transaction, Value, KV_TABLE};
use isocert_random::rand::Rng as _;
use rustc_hash::FxHashMap;

/// A history every int format can carry: integer keys and values, initial value `initial`.
fn generate(txns: usize, initial: i64) -> History {
    let mut h = History::new();
    let kv = h.intern_table(KV_TABLE);
    let zero = h.intern_value(Value::Scalar(Scalar::Int(initial)));
    let keys: Vec<_> = (0..1000).map(|k| h.intern_object(kv, Scalar::Int(k))).collect();
    for &k in &keys {
        h.initial.push((k, zero));
    }
    let sessions: Vec<_> = (0..8).map(|s| h.intern_session(Scalar::Int(s + 1))).collect();
    let mut rng = isocert_random::seeded(0x2545_f491_4f6c_dd1d);
    let mut current = vec![initial; keys.len()];
    let mut fresh = 1i64;
    let mut order: Vec<Vec<Transaction>> = vec![Vec::new(); sessions.len()];
    for t in 0..txns {
        let session = t % sessions.len();
        let mut ops = Vec::with_capacity(4);
        for _ in 0..4 {
            let k = rng.random_range(0..keys.len());
            if rng.random::<bool>() {
                let value = h.intern_value(Value::Scalar(Scalar::Int(current[k])));
                ops.push(Op::Read { obj: keys[k], value });
            } else {
                current[k] = fresh;
                fresh += 1;
                let value = h.intern_value(Value::Scalar(Scalar::Int(current[k])));
                ops.push(Op::Write { obj: keys[k], value });
            }
        }
        order[session].push(Transaction::new(Scalar::Int(0), sessions[session], ops));
    }
    let mut name = 0;
    for txn in order.into_iter().flatten() {
        name += 1;
        let mut txn = txn;
        txn.name = Scalar::Int(name);
        h.push_txn(txn).expect("fresh names");
    }
    h
}

/// A version order listing every write, in transaction order.
fn version_order(h: &History) -> Certificate {
    let mut order: FxHashMap<_, Vec<_>> = FxHashMap::default();
    for t in h.txn_ids() {
        for op in &h.txn(t).ops {
            if let Op::Write { obj, .. } = op {
                let writers = order.entry(*obj).or_default();
                if writers.last() != Some(&t) {
                    writers.push(t);
                }
            }
        }
    }
    Certificate { version_order: Some(order), ..Certificate::default() }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: formats_bench FORMAT TXNS [DIR]";
    let king_cobra = args.get(1).is_some_and(|f| f == "king-cobra");
    let format: Format =
        if king_cobra { Format::Cobra } else { args.get(1).expect(usage).parse().expect("a format name") };
    let txns: usize = args.get(2).expect(usage).parse().expect("a transaction count");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = args.get(3).map(PathBuf::from).unwrap_or_else(|| tmp.path().to_path_buf());
    let path = dir.join(format!("history.{}", format.name()));
    if !path.exists() {
        let initial = if format == Format::Cobra { isocert_history::formats::COBRA_INIT_ID } else { 0 };
        let h = generate(txns, initial);
        format.write_path(&h, &path).expect("the generated history fits every int format");
        let mut vo = Vec::new();
        write_king_cobra_version_order(&h, &version_order(&h), &mut vo).expect("an int version order");
        std::fs::write(path.with_extension("vo"), vo).expect("writes the version order");
    }
    let bytes: u64 = if path.is_dir() {
        std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
    } else {
        std::fs::metadata(&path).unwrap().len()
    };
    let started = Instant::now();
    let imported = if king_cobra {
        read_cobra_dir_with_version_order(&path, &path.with_extension("vo")).expect("reads back")
    } else {
        format.read_path(&path).expect("reads back")
    };
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(imported.history.txns.len(), txns);
    println!(
        "{}\t{txns} txns\t{:.1} MB\t{seconds:.3} s\t{:.0} txns/s\t{:.1} MB/s",
        if king_cobra { "king-cobra" } else { format.name() },
        bytes as f64 / 1e6,
        txns as f64 / seconds,
        bytes as f64 / 1e6 / seconds
    );
}
