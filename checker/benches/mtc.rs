//! The MTC benchmark: a million mini-transactions checked without a certificate at
//! serializable, snapshot isolation and strict serializability (figures and commands in
//! docs/PERFORMANCE.md).
//!
//! ```text
//! cargo bench -p isocert-checker --bench mtc -- [TXNS] [OUT.jsonl]
//! ```
//!
//! The history is built in memory: 25 sessions taking turns, 10,000 keys picked uniformly,
//! MTC's shapes in the `mini` workload's proportions (one read 20%, two reads 15%, one
//! read-modify-write 30%, a read then a read-modify-write 15%, two read-modify-writes 20%),
//! values unique, executed serially so the history is valid at every level (each run
//! asserts it). Transaction i is invoked at 10·i and completes up to 40 later, so
//! neighbours overlap in real time. With OUT, it is also written as a v1 history for timing
//! `isocert check`.

use std::fs::File;
use std::io::BufWriter;
use std::time::Instant;

use isocert_checker::{check, CheckerKind, IsolationLevel};
use isocert_history::{v1, Certificate, History, Op, RealTime, Scalar, Transaction, Value, KV_TABLE};
use isocert_random::rand::Rng as _;

const SESSIONS: u64 = 25;
const KEYS: u64 = 10_000;

fn generate(txns: usize) -> History {
    let mut h = History::new();
    let table = h.intern_table(KV_TABLE);
    let objs: Vec<_> = (0..KEYS).map(|k| h.intern_object(table, Scalar::Int(k as i64))).collect();
    let zero = h.intern_value(Value::Scalar(Scalar::Int(0)));
    h.initial = objs.iter().map(|&o| (o, zero)).collect();
    let sessions: Vec<_> = (0..SESSIONS).map(|s| h.intern_session(Scalar::Int(s as i64))).collect();
    let mut current = vec![zero; KEYS as usize];
    let mut rng = isocert_random::seeded(0x9E37_79B9_7F4A_7C15);
    let mut next = 1i64;
    for i in 0..txns {
        let x = rng.random_range(0..KEYS) as usize;
        let y = (x + 1 + rng.random_range(0..KEYS - 1) as usize) % KEYS as usize;
        let shape = rng.random_range(0..100);
        let mut ops = Vec::with_capacity(4);
        let rmw = |h: &mut History, ops: &mut Vec<Op>, current: &mut [_], next: &mut i64, k: usize| {
            ops.push(Op::Read { obj: objs[k], value: current[k] });
            let v = h.intern_value(Value::Scalar(Scalar::Int(*next)));
            *next += 1;
            ops.push(Op::Write { obj: objs[k], value: v });
            current[k] = v;
        };
        match shape {
            0..20 => ops.push(Op::Read { obj: objs[x], value: current[x] }),
            20..35 => {
                ops.push(Op::Read { obj: objs[x], value: current[x] });
                ops.push(Op::Read { obj: objs[y], value: current[y] });
            }
            35..65 => rmw(&mut h, &mut ops, &mut current, &mut next, x),
            65..80 => {
                ops.push(Op::Read { obj: objs[y], value: current[y] });
                rmw(&mut h, &mut ops, &mut current, &mut next, x);
            }
            _ => {
                rmw(&mut h, &mut ops, &mut current, &mut next, x);
                rmw(&mut h, &mut ops, &mut current, &mut next, y);
            }
        }
        let session = sessions[i % SESSIONS as usize];
        let mut t = Transaction::new(Scalar::Int(i as i64 + 1), session, ops);
        let invoked_at = 10 * i as i64;
        t.set_real_time(Some(RealTime { invoked_at, completed_at: invoked_at + rng.random_range(0..40) }));
        h.push_txn(t).expect("fresh transaction name");
    }
    h
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let txns: usize = args.first().map(|a| a.parse().expect("TXNS is a number")).unwrap_or(1_000_000);
    let started = Instant::now();
    let h = generate(txns);
    println!("generated {txns} mini-transactions in {:.2?}", started.elapsed());
    if let Some(out) = args.get(1) {
        let mut file = BufWriter::new(File::create(out).expect("creating OUT"));
        v1::write_history(&h, &mut file).expect("writing OUT");
        println!("wrote {out}");
    }
    let oracle = isocert_oracle::Interpreter::new(&h).expect("kv history");
    let none = Certificate::default();
    for level in
        [IsolationLevel::Serializable, IsolationLevel::SnapshotIsolation, IsolationLevel::StrictSerializable]
    {
        let started = Instant::now();
        let report = check(&h, &none, level, CheckerKind::Mtc, &oracle).expect("mtc runs");
        let elapsed = started.elapsed();
        assert!(report.is_valid(), "the generated history must be valid: {:?}", report.anomalies.first());
        println!("mtc {level}: {txns} transactions, {} edges, valid, {elapsed:.2?}", report.stats.edges);
    }
}
