//! `isocert run` and `isocert recover` pick the database adapter by URL scheme or name, and
//! refuse the ones not built yet with a clear error and exit code 2 (no database needed).

use std::process::{Command, Output};

fn isocert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isocert")).args(args).output().expect("isocert runs")
}

fn run_on(db: &str, out: &std::path::Path) -> Output {
    let out = out.to_str().unwrap();
    isocert(&["run", "--db", db, "--workload", "kv", "--isolation", "serializable", "--out", out])
}

/// What a binary built without the `mongodb` feature says about MongoDB.
const NO_MONGODB: &str = "MongoDB needs a binary built with the `mongodb` feature";

#[test]
fn databases_without_an_adapter_are_refused_by_name_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 9: with the feature the driver gives up quickly, naming the URL.
    let url = "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=500&connectTimeoutMS=500";
    let o = run_on(url, dir.path());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{url}: {stderr}");
    if cfg!(feature = "mongodb") {
        assert!(stderr.contains("mongodb://127.0.0.1:9") && !stderr.contains(NO_MONGODB), "{stderr}");
    } else {
        assert!(stderr.contains(NO_MONGODB), "{stderr}");
    }
    let o = run_on("oracle://scott:tiger@db/orcl", dir.path());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown database URL scheme oracle://"), "{stderr}");
    assert!(!stderr.contains("tiger"), "the password is never printed: {stderr}");
    let o = isocert(&["run", "--database", "db2", "--workload", "kv", "--isolation", "rc", "--out", "x"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown database \"db2\""), "{stderr}");
    let o = isocert(&["recover", "--database", "mongodb", "--history", "h", "--out", "c"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    if !cfg!(feature = "mongodb") {
        assert!(stderr.contains(NO_MONGODB), "{stderr}");
    }
}

#[test]
fn dgraph_urls_reach_the_dgraph_adapter() {
    // Nothing listens on port 9: the adapter's HTTP client says so, naming Dgraph.
    let dir = tempfile::tempdir().unwrap();
    let o = run_on("dgraph://127.0.0.1:9", dir.path());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no answer from Dgraph") && !stderr.contains("not supported yet"), "{stderr}");
    let o = isocert(&["run", "--database", "dgraph", "--workload", "kv", "--isolation", "rr", "--out", "x"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot start a throwaway Dgraph"), "{stderr}");
}

#[test]
fn a_url_and_a_throwaway_server_choice_exclude_each_other() {
    let o = isocert(&[
        "run",
        "--db",
        "postgres://h/db",
        "--database",
        "mariadb",
        "--workload",
        "kv",
        "--isolation",
        "rc",
        "--out",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    let o = isocert(&[
        "run",
        "--server-setting",
        "novalue",
        "--workload",
        "kv",
        "--isolation",
        "rc",
        "--out",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not NAME=VALUE"));
}

#[test]
fn recover_names_a_missing_or_malformed_input() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    std::fs::write(
        &history,
        "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":10}],\"meta\":{\"xid\":700}}\n",
    )
    .unwrap();
    let h = history.to_str().unwrap();
    let cert = dir.path().join("cert.json");
    let c = cert.to_str().unwrap();
    let o = isocert(&["recover", "--database", "postgres", "--history", h, "--out", c]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot open captured log") && stderr.contains("raw-log.jsonl"), "{stderr}");
    // The log beside the history, with the one commit: the certificate orders the write.
    std::fs::write(
        dir.path().join("raw-log.jsonl"),
        "{\"xid\":700,\"commit_lsn\":1,\"end_lsn\":2,\"commit_time\":0,\"changes\":[{\"table\":\"kv\",\"key\":1,\"row\":{\"key\":1,\"value\":10}}]}\n",
    )
    .unwrap();
    let o = isocert(&["recover", "--database", "postgres", "--history", h, "--out", c]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let cert: serde_json::Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    assert!(cert.to_string().contains("version_order"), "{cert}");
    // A log whose commit the history does not record is refused (exit 2, naming the xid).
    std::fs::write(
        dir.path().join("raw-log.jsonl"),
        "{\"xid\":701,\"commit_lsn\":1,\"end_lsn\":2,\"commit_time\":0,\"changes\":[{\"table\":\"kv\",\"key\":1,\"row\":{\"key\":1,\"value\":11}}]}\n",
    )
    .unwrap();
    let o = isocert(&["recover", "--database", "postgres", "--history", h, "--out", c]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("701"), "{stderr}");
}

/// Issue 29: a transaction whose outcome neither the client nor the log knows leaves its
/// part of the history undecided: `recover` writes the certificate and exits 2, unless
/// `--allow-uncertified`; once the log settles it (its write is there), exit 0.
#[test]
fn issue_29_recover_exits_2_while_an_outcome_stays_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    std::fs::write(
        &history,
        "{\"id\":1,\"session\":0,\"ops\":[{\"f\":\"w\",\"key\":1,\"value\":10}],\"meta\":{\"xid\":700}}\n\
         {\"id\":2,\"session\":1,\"status\":\"unknown\",\"ops\":[{\"f\":\"w\",\"key\":2,\"value\":20}]}\n",
    )
    .unwrap();
    let log = dir.path().join("raw-log.jsonl");
    let commit = |xid: u64, key: u64, value: u64| {
        format!(
            "{{\"xid\":{xid},\"commit_lsn\":{xid},\"end_lsn\":{xid},\"commit_time\":0,\"changes\":[{{\"table\":\"kv\",\"key\":{key},\"row\":{{\"key\":{key},\"value\":{value}}}}}]}}\n"
        )
    };
    std::fs::write(&log, commit(700, 1, 10)).unwrap();
    let (h, c) = (history.to_str().unwrap(), dir.path().join("cert.json"));
    let c = c.to_str().unwrap();
    let o = isocert(&["recover", "--database", "postgres", "--history", h, "--out", c]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("uncertified") && stderr.contains("1 transaction(s) of unknown status"),
        "{stderr}"
    );
    assert!(std::path::Path::new(c).exists(), "the certificate is written anyway");
    let o =
        isocert(&["recover", "--database", "postgres", "--history", h, "--out", c, "--allow-uncertified"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(&log, commit(700, 1, 10) + &commit(701, 2, 20)).unwrap();
    let o = isocert(&["recover", "--database", "postgres", "--history", h, "--out", c]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}
