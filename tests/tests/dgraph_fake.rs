//! `isocert run --db dgraph://...` end to end, against a small in-process imitation of one
//! Dgraph Alpha: snapshot isolation by timestamps (reads at `start_ts` see the newest version
//! committed at or before it, plus the transaction's own writes), first committer wins on
//! conflict keys, and the HTTP answer shapes of `dgraph/cmd/alpha/http.go` (see
//! `tests/tests/dgraph.rs`). It understands only what the adapter sends (key lookups,
//! filtered table reads, JSON set/delete mutations, commit, abort, `/alter`). With conflict detection off (only two creations of one key conflict) it loses
//! updates, and the run must say so.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use isocert_adapters::dgraph::{parse_filter, Filter, Func};
use isocert_adapters::TableSpec;
use serde_json::{json, Value as Json};

type Row = BTreeMap<String, i64>;

#[derive(Default)]
struct Txn {
    writes: BTreeMap<u64, Option<Row>>,
    keys: HashSet<String>,
}

#[derive(Default)]
struct Store {
    next_ts: u64,
    next_uid: u64,
    nodes: BTreeMap<u64, Vec<(u64, Option<Row>)>>,
    open: HashMap<u64, Txn>,
    commits: Vec<(u64, HashSet<String>)>,
    schema: BTreeSet<String>,
    upsert: BTreeSet<String>,
    detect_conflicts: bool,
}

const ABORTED: &str = r#"{"errors":[{"message":"Transaction has been aborted. Please retry","extensions":{"code":"ErrorInvalidRequest"}}]}"#;

fn error(message: &str) -> String {
    json!({"errors": [{"message": message, "extensions": {"code": "ErrorInvalidRequest"}}]}).to_string()
}

impl Store {
    fn ts(&mut self) -> u64 {
        self.next_ts += 1;
        self.next_ts
    }

    fn visible(&self, uid: u64, start: u64, txn: Option<&Txn>) -> Option<Row> {
        if let Some(w) = txn.and_then(|t| t.writes.get(&uid)) {
            return w.clone();
        }
        self.nodes.get(&uid)?.iter().rev().find(|(c, _)| *c <= start).and_then(|(_, r)| r.clone())
    }

    /// The transaction of `?startTs=N`, or a new one; `None` when it was aborted.
    fn txn_of(&mut self, query: &HashMap<String, String>) -> Option<u64> {
        match query.get("startTs").and_then(|v| v.parse().ok()) {
            Some(ts) => self.open.contains_key(&ts).then_some(ts),
            None => {
                let ts = self.ts();
                self.open.insert(ts, Txn::default());
                Some(ts)
            }
        }
    }

    fn query(&mut self, query: &HashMap<String, String>, body: &Json) -> String {
        let q = body["query"].as_str().unwrap_or_default().to_string();
        if let Some(list) = q.strip_prefix("schema(pred: [") {
            let asked: Vec<&str> = list.split(']').next().unwrap_or_default().split(", ").collect();
            let found: Vec<Json> = asked
                .iter()
                .filter(|p| self.schema.contains(**p))
                .map(|p| json!({"predicate": p, "type": "int"}))
                .collect();
            return json!({"data": {"schema": found}}).to_string();
        }
        let Some(start) = self.txn_of(query) else { return ABORTED.to_string() };
        // `{ q(func: eq(P, K)) { uid c0 : P0 ... } }` or `{ q(func: has(P)) @filter(F) { uid ... } }`.
        let at = q.find("{ uid").unwrap();
        let (root, selection) = q.split_at(at);
        let aliases: Vec<(String, String)> = selection
            .replace(['{', '}'], "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(3)
            .filter(|w| w[1] == ":")
            .map(|w| (w[0].to_string(), w[2].to_string()))
            .collect();
        let filter = root.split_once("@filter(").map(|(_, f)| {
            // The filter names predicates: read it over a table whose columns they are.
            let columns: Vec<&'static str> =
                aliases.iter().map(|(_, p)| &*Box::leak(p.clone().into_boxed_str())).collect();
            let spec = TableSpec::integers("fake", Box::leak(columns.into_boxed_slice()));
            parse_filter(&spec, f.trim_end().strip_suffix(')').unwrap()).unwrap()
        });
        let wanted: Box<dyn Fn(&Row) -> bool> = if let Some(eq) = root.split("func: eq(").nth(1) {
            let (p, k) = eq.split_once(", ").unwrap();
            let (p, k) = (p.to_string(), k.split(')').next().unwrap().parse::<i64>().unwrap());
            Box::new(move |r| r.get(&p) == Some(&k))
        } else {
            let p = root.split("func: has(").nth(1).unwrap().split(')').next().unwrap().to_string();
            Box::new(move |r| r.contains_key(&p) && filter.as_ref().is_none_or(|f| holds(f, r)))
        };
        let txn = self.open.get(&start);
        let uids: BTreeSet<u64> = self
            .nodes
            .keys()
            .copied()
            .chain(txn.map(|t| t.writes.keys().copied().collect::<Vec<_>>()).unwrap_or_default())
            .collect();
        let mut items = Vec::new();
        for uid in uids {
            let Some(row) = self.visible(uid, start, txn) else { continue };
            if !wanted(&row) {
                continue;
            }
            let mut item = serde_json::Map::new();
            item.insert("uid".into(), format!("0x{uid:x}").into());
            for (alias, p) in &aliases {
                if let Some(v) = row.get(p) {
                    item.insert(alias.clone(), (*v).into());
                }
            }
            items.push(Json::Object(item));
        }
        json!({"data": {"q": items}, "extensions": {"txn": {"start_ts": start}}}).to_string()
    }

    fn mutate(&mut self, query: &HashMap<String, String>, body: &Json) -> String {
        let Some(start) = self.txn_of(query) else { return ABORTED.to_string() };
        let mut blanks: BTreeMap<String, String> = BTreeMap::new();
        let mut keys = BTreeSet::new();
        let mut preds = BTreeSet::new();
        let set = body["set"].as_array().cloned().unwrap_or_default();
        let delete = body["delete"].as_array().cloned().unwrap_or_default();
        for (node, deleting) in set.iter().map(|n| (n, false)).chain(delete.iter().map(|n| (n, true))) {
            let uid_text = node["uid"].as_str().unwrap().to_string();
            let created = uid_text.starts_with("_:");
            let uid = if let Some(blank) = uid_text.strip_prefix("_:") {
                self.next_uid += 1;
                blanks.insert(blank.to_string(), format!("0x{:x}", self.next_uid));
                self.next_uid
            } else {
                u64::from_str_radix(uid_text.trim_start_matches("0x"), 16).unwrap()
            };
            let txn = self.open.get(&start);
            let mut row = self.visible(uid, start, txn).unwrap_or_default();
            for (p, v) in node.as_object().unwrap().iter().filter(|(p, _)| *p != "uid") {
                preds.insert(format!("1-0-{p}"));
                if deleting {
                    row.remove(p);
                } else {
                    let v = v.as_i64().unwrap();
                    // The key's index: two transactions creating one key conflict.
                    if created && self.upsert.contains(p) {
                        keys.insert(format!("idx:{p}={v}"));
                    }
                    row.insert(p.clone(), v);
                }
            }
            keys.insert(format!("uid:{uid}"));
            let txn = self.open.get_mut(&start).unwrap();
            txn.writes.insert(uid, (!row.is_empty()).then_some(row));
            txn.keys.extend(keys.iter().cloned());
        }
        if query.get("commitNow").is_some_and(|v| v == "true") {
            return self.commit(start, &blanks);
        }
        json!({"data": {"code": "Success", "message": "Done", "queries": null, "uids": blanks},
               "extensions": {"txn": {"start_ts": start, "keys": keys, "preds": preds}}})
        .to_string()
    }

    fn commit(&mut self, start: u64, uids: &BTreeMap<String, String>) -> String {
        let Some(txn) = self.open.remove(&start) else { return ABORTED.to_string() };
        // Without conflict detection only key creations conflict: updates of a node are lost.
        let conflicts = |keys: &HashSet<String>| {
            keys.iter().any(|k| txn.keys.contains(k) && (self.detect_conflicts || k.starts_with("idx:")))
        };
        if self.commits.iter().any(|(c, keys)| *c > start && conflicts(keys)) {
            return ABORTED.to_string();
        }
        let commit = self.ts();
        for (uid, row) in txn.writes {
            self.nodes.entry(uid).or_default().push((commit, row));
        }
        self.commits.push((commit, txn.keys));
        json!({"data": {"code": "Success", "message": "Done", "uids": uids},
               "extensions": {"txn": {"start_ts": start, "commit_ts": commit}}})
        .to_string()
    }

    fn handle(&mut self, method: &str, path: &str, body: &str) -> String {
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let query: HashMap<String, String> = query
            .split('&')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let json: Json = serde_json::from_str(body).unwrap_or(Json::Null);
        match (method, route) {
            ("GET", "/health") => r#"[{"instance":"alpha","status":"healthy"}]"#.to_string(),
            ("POST", "/alter") => {
                if let Some(p) = json.get("drop_attr").and_then(Json::as_str) {
                    self.schema.remove(p);
                    self.nodes.clear();
                } else {
                    for line in body.lines().filter(|l| !l.trim().is_empty()) {
                        let p = line.split(':').next().unwrap().trim().to_string();
                        if line.contains("@upsert") {
                            self.upsert.insert(p.clone());
                        }
                        self.schema.insert(p);
                    }
                }
                r#"{"data":{"code":"Success","message":"Done"}}"#.to_string()
            }
            ("POST", "/query") => self.query(&query, &json),
            ("POST", "/mutate") => self.mutate(&query, &json),
            ("POST", "/commit") => {
                let start: u64 = query.get("startTs").and_then(|v| v.parse().ok()).unwrap_or(0);
                if query.get("abort").is_some_and(|v| v == "true") {
                    self.open.remove(&start);
                    return r#"{"data":{"code":"Success","message":"Done"}}"#.to_string();
                }
                self.commit(start, &BTreeMap::new())
            }
            _ => error(&format!("no route {method} {route}")),
        }
    }
}

/// Dgraph's reading of a filter on a node: a function of a predicate the node lacks is false,
/// `NOT` is the complement.
fn holds(f: &Filter, row: &Row) -> bool {
    match f {
        Filter::Func { func, column, values } => row.get(column).is_some_and(|v| match func {
            Func::Eq => values.contains(v),
            Func::Ge => *v >= values[0],
            Func::Gt => *v > values[0],
            Func::Le => *v <= values[0],
            Func::Lt => *v < values[0],
        }),
        Filter::Between { column, low, high } => row.get(column).is_some_and(|v| low <= v && v <= high),
        Filter::And(items) => items.iter().all(|i| holds(i, row)),
        Filter::Or(items) => items.iter().any(|i| holds(i, row)),
        Filter::Not(inner) => !holds(inner, row),
    }
}

fn serve(mut socket: TcpStream, store: &Mutex<Store>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    let header_end = loop {
        if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&request[..header_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while request.len() < header_end + length {
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let mut first = head.lines().next().unwrap_or_default().split(' ');
    let (method, path) = (first.next().unwrap_or_default(), first.next().unwrap_or_default());
    let body = String::from_utf8_lossy(&request[header_end..]).to_string();
    let answer = store.lock().unwrap().handle(method, path, &body);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = socket.write_all(response.as_bytes());
}

/// Starts the imitation on a loopback port; returns its `dgraph://` URL.
fn fake_alpha(detect_conflicts: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let store = Arc::new(Mutex::new(Store { detect_conflicts, next_ts: 1, ..Store::default() }));
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let store = store.clone();
            std::thread::spawn(move || serve(socket, &store));
        }
    });
    format!("dgraph://{address}")
}

fn isocert(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let o = Command::new(isocert_tests::isocert_bin()).args(args).current_dir(dir).output().unwrap();
    (
        o.status.code(),
        format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

fn run(url: &str, dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    run_workload(url, dir, "kv", "300", extra)
}

fn run_workload(url: &str, dir: &Path, workload: &str, txns: &str, extra: &[&str]) -> (Option<i32>, String) {
    let args = ["run", "--db", url, "--workload", workload, "--isolation", "repeatable-read"];
    let more = ["--txns", txns, "--sessions", "4", "--keys", "6", "--seed", "7", "--out", "out"];
    isocert(&[&args[..], &more[..], extra].concat(), dir)
}

#[test]
fn a_kv_run_on_snapshot_isolation_certifies_and_every_path_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = run(&fake_alpha(true), dir.path(), &[]);
    assert_eq!(code, Some(0), "run:\n{out}");
    let history = std::fs::read_to_string(dir.path().join("out/history.jsonl")).unwrap();
    assert!(
        history.starts_with(r#"{"format":"isocert-history","version":1,"dialect":"dgraph""#),
        "{history}"
    );
    assert!(history.contains(r#""status":"aborted""#), "conflicts were retried:\n{out}");
    // Chronos and Aion on the timestamps written into history.jsonl.
    for checker in ["chronos", "aion"] {
        let args = ["check", "out/history.jsonl", "--isolation", "snapshot-isolation", "--checker", checker];
        let (code, text) = isocert(&args, dir.path());
        assert_eq!(code, Some(0), "{checker}:\n{text}");
    }
    // The certificate again, from the history alone.
    let args = ["recover", "--database", "dgraph", "--history", "out/history.jsonl", "--out", "again.json"];
    let (code, text) = isocert(&args, dir.path());
    assert_eq!(code, Some(0), "recover:\n{text}");
    let read = |p: &str| {
        serde_json::from_str::<Json>(&std::fs::read_to_string(dir.path().join(p)).unwrap()).unwrap()
    };
    assert_eq!(read("again.json"), read("out/certificate.json"));
}

#[test]
fn lost_updates_of_a_store_without_conflict_detection_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    // Without deletes: a node deleted and created again while a concurrent transaction
    // updates the old one would give one key two nodes, which the adapter refuses (exit 2).
    let (code, out) = run(&fake_alpha(false), dir.path(), &["--no-deletes"]);
    assert_eq!(code, Some(1), "run:\n{out}");
    let args = ["check", "out/history.jsonl", "--isolation", "snapshot-isolation", "--checker", "chronos"];
    let (code, text) = isocert(&args, dir.path());
    assert_eq!(code, Some(1), "chronos:\n{text}");
}

#[test]
fn a_predicate_run_records_dql_filters_that_the_oracle_and_emme_accept() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = run_workload(&fake_alpha(true), dir.path(), "predicate", "150", &[]);
    assert_eq!(code, Some(0), "run:\n{out}");
    let history = std::fs::read_to_string(dir.path().join("out/history.jsonl")).unwrap();
    assert!(history.contains(r#""where":"between("#) || history.contains(r#""where":"eq("#), "{history}");
    assert!(!history.contains(" BETWEEN "), "the SQL text was recorded:\n{history}");
}

#[test]
fn predicates_isocert_did_not_create_are_never_dropped() {
    let url = fake_alpha(true);
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = run_workload(&url, dir.path(), "kv", "20", &["--keep-tables"]);
    assert_eq!(code, Some(0), "first run:\n{out}");
    // The kept predicates now belong to nobody: a second run refuses to drop them...
    let (code, out) = run_workload(&url, dir.path(), "kv", "20", &["--force"]);
    assert_eq!(code, Some(2), "second run:\n{out}");
    // ... unless told to.
    let (code, out) = run_workload(&url, dir.path(), "kv", "20", &["--force", "--reset-tables"]);
    assert_eq!(code, Some(0), "third run:\n{out}");
}

/// `isocert run --emit` on the imitation (issue 36): each transaction is published with
/// the `start_ts`/`commit_ts` its session recorded as it completes, since recovery, with no
/// log to match, keeps them. Members check while the run goes. A store that loses updates,
/// checked by two members, and a valid one, checked by one, each get offline Chronos's
/// anomalies on the saved history, explanation for explanation. The run compares the
/// published timestamps with the recovered ones (exit 2 if one differs).
#[cfg(feature = "kafka")]
#[test]
fn a_run_publishes_its_recorded_timestamps_while_it_runs() {
    use std::process::Stdio;

    let Some(broker) = isocert_testsupport::KafkaBroker::start() else { return };
    for (detect_conflicts, members) in [(false, 2), (true, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let topic = format!("dgraph-live-{}-{nanos}", std::process::id());
        let url = format!("kafka://{}/{topic}", broker.bootstrap());
        let mut ms: Vec<_> = (0..members)
            .map(|i| {
                Command::new(isocert_tests::isocert_bin())
                    .args(["check", "-i", "si", "--json", "--online", &url, "--group", &topic])
                    .args(["--member", &format!("m{i}"), "--session-timeout", "2"])
                    .stdout(std::fs::File::create(dir.path().join(format!("m{i}.jsonl"))).unwrap())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let (code, out) = run(&fake_alpha(detect_conflicts), dir.path(), &["--no-deletes", "--emit", &url]);
        assert_eq!(code, Some(if detect_conflicts { 0 } else { 1 }), "run:\n{out}");
        assert!(out.contains("during the run"), "{out}");
        let codes: Vec<Option<i32>> = ms.iter_mut().map(|m| m.wait().unwrap().code()).collect();
        let args = ["check", "out/history.jsonl", "-i", "si", "--checker", "chronos", "--json"];
        let (_, report) = isocert(&args, dir.path());
        let json_start = report.find('{').unwrap();
        let report: Json =
            serde_json::Deserializer::from_str(&report[json_start..]).into_iter().next().unwrap().unwrap();
        let mut expected: Vec<String> = report["anomalies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["explanation"].as_str().unwrap().to_string())
            .collect();
        expected.sort();
        assert_eq!(expected.is_empty(), detect_conflicts, "{} anomalies offline", expected.len());
        let mut found = Vec::new();
        for i in 0..members {
            let text = std::fs::read_to_string(dir.path().join(format!("m{i}.jsonl"))).unwrap();
            for line in text.lines() {
                let v: Json = serde_json::from_str(line).unwrap();
                if v["record"] == "anomaly" {
                    found.push(v["explanation"].as_str().unwrap().to_string());
                }
            }
        }
        found.sort();
        assert_eq!(found, expected, "the members' anomalies are offline Chronos's, each once");
        let verdict = Some(if expected.is_empty() { 0 } else { 1 });
        assert_eq!(codes, vec![verdict; members], "online and offline verdicts");
    }
}
