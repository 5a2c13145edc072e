//! The raw version log: committed transactions in commit order, as a change stream reports
//! them, and its JSON-lines file (`raw-log.jsonl`), which `isocert run` saves and
//! `isocert recover` reads back.

use std::io::{BufRead, Write};
use std::sync::Arc;

use isocert_history::{Scalar, Timestamp};
use serde_json::{json, Map, Value as Json};

/// One row change of a committed transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table the row belongs to (without schema).
    pub table: Arc<str>,
    /// The row's primary key.
    pub key: Scalar,
    /// The new row as (column, value) pairs, primary key included; `None` for a delete.
    pub row: Option<Vec<(Arc<str>, Scalar)>>,
}

/// A committed transaction as the change stream reports it.
///
/// Its identity and positions are opaque outside its adapter and recovery rule: only the
/// adapter that captured the log and the rule that reads it give them meaning (the field
/// names are PostgreSQL's, where they began). Every other component only compares
/// positions for order.
#[derive(Clone, Debug, PartialEq)]
pub struct CommittedTxn {
    /// The database's id of the transaction as the stream carries it, opaque (PostgreSQL:
    /// the 32-bit xid of Begin; MariaDB: the binlog Xid event's id; 0 when the stream has
    /// none, as in changefeeds).
    pub xid: u64,
    /// Position of the commit in the stream, opaque, strictly increasing (PostgreSQL: the
    /// commit LSN; MariaDB: binlog file number << 32 | offset of the commit event).
    pub commit_lsn: u64,
    /// Position just past the commit, opaque: acknowledging it to the database
    /// acknowledges this transaction and every earlier one.
    pub end_lsn: u64,
    /// The commit time the database reported, in the adapter's unit (PostgreSQL:
    /// microseconds since 2000-01-01; MariaDB: the event header's Unix seconds).
    pub commit_time: i64,
    /// The commit timestamp, for databases that order versions by timestamp (TiDB's
    /// `commit_ts`, CockroachDB's HLC `updated`, MongoDB's cluster time); `None` where the
    /// commit position is the order (PostgreSQL, MariaDB).
    pub commit_ts: Option<Timestamp>,
    /// The row changes in the order the transaction made them (a row may change twice).
    pub changes: Vec<RowChange>,
}

/// Committed transactions in commit order, deduplicated by commit position so that a
/// consumer that reconnects and receives a transaction again records it once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawLog {
    txns: Vec<CommittedTxn>,
}

impl RawLog {
    /// An empty log.
    pub fn new() -> Self {
        RawLog::default()
    }

    /// Appends `txn` unless a transaction at or after its commit position is already
    /// recorded (a redelivery after a reconnect); returns whether it was appended.
    pub fn push(&mut self, txn: CommittedTxn) -> bool {
        if self.last_commit_lsn().is_some_and(|last| txn.commit_lsn <= last) {
            return false;
        }
        self.txns.push(txn);
        true
    }

    /// The commit position of the last recorded transaction.
    pub fn last_commit_lsn(&self) -> Option<u64> {
        self.txns.last().map(|t| t.commit_lsn)
    }

    /// The recorded transactions, in commit order.
    pub fn txns(&self) -> &[CommittedTxn] {
        &self.txns
    }

    /// Number of recorded transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Number of recorded row changes.
    pub fn change_count(&self) -> usize {
        self.txns.iter().map(|t| t.changes.len()).sum()
    }

    /// One log from the logs of several captures of the same database (one per table): the
    /// transactions in commit order, one transaction's changes from several logs (the same
    /// commit position) joined in the order of `logs`. Each table's changes keep their
    /// order; the order between tables within a transaction is not known (recovery orders
    /// the versions of each row, never across rows).
    pub fn merge(logs: Vec<RawLog>) -> RawLog {
        let mut all: Vec<CommittedTxn> = logs.into_iter().flat_map(|l| l.txns).collect();
        // Stable: a transaction's parts stay in the order of `logs`.
        all.sort_by_key(|t| t.commit_lsn);
        let mut merged: Vec<CommittedTxn> = Vec::with_capacity(all.len());
        for txn in all {
            match merged.last_mut() {
                Some(last) if last.commit_lsn == txn.commit_lsn => last.changes.extend(txn.changes),
                _ => merged.push(txn),
            }
        }
        RawLog { txns: merged }
    }
}

/// Why a raw log file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RawLogError {
    /// The file could not be read.
    #[error("reading the raw log: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not a committed transaction as [`RawLog::write_jsonl`] writes it.
    #[error("raw log line {line}: {field}: {message}")]
    Line {
        /// The line number, from 1.
        line: usize,
        /// The field at fault (`commit_lsn`, `changes[2].row`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

fn scalar_from_json(v: &Json) -> Option<Scalar> {
    Some(match v {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Scalar::Int(i),
            None => Scalar::Float(n.as_f64()?),
        },
        Json::String(t) => Scalar::Text(t.as_str().into()),
        _ => return None,
    })
}

impl CommittedTxn {
    /// The transaction as one JSON object: `xid`, `commit_lsn`, `end_lsn`, `commit_time`,
    /// `commit_ts` when known (`"WALL"` or `"WALL.LOGICAL"`), `changes` (each `table`, `key`,
    /// `row`: an object of columns in order, or `null`).
    pub fn to_json(&self) -> Json {
        let changes: Vec<Json> = self
            .changes
            .iter()
            .map(|c| {
                let row = c
                    .row
                    .as_ref()
                    .map(|r| r.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect::<Map<_, _>>());
                json!({"table": &*c.table, "key": c.key.to_json(), "row": row})
            })
            .collect();
        let mut out = json!({"xid": self.xid, "commit_lsn": self.commit_lsn, "end_lsn": self.end_lsn, "commit_time": self.commit_time, "changes": changes});
        if let Some(ts) = self.commit_ts {
            out["commit_ts"] = Json::String(ts.to_string());
        }
        out
    }

    /// Reads a transaction [`CommittedTxn::to_json`] wrote; errors name `line` and the field.
    ///
    /// # Errors
    /// [`RawLogError::Line`] for an unknown or malformed field.
    pub fn from_json(v: &Json, line: usize) -> Result<Self, RawLogError> {
        let bad = |field: &str, message: &str| RawLogError::Line {
            line,
            field: field.to_string(),
            message: message.to_string(),
        };
        let obj = v.as_object().ok_or_else(|| bad("line", "is not a JSON object"))?;
        if let Some(k) = obj.keys().find(|k| {
            !["xid", "commit_lsn", "end_lsn", "commit_time", "commit_ts", "changes"].contains(&k.as_str())
        }) {
            return Err(bad(k, "unknown field"));
        }
        let number = |f: &str| {
            obj.get(f).and_then(Json::as_u64).ok_or_else(|| bad(f, "missing or not a non-negative integer"))
        };
        let (xid, commit_lsn, end_lsn) = (number("xid")?, number("commit_lsn")?, number("end_lsn")?);
        let commit_time = obj
            .get("commit_time")
            .and_then(Json::as_i64)
            .ok_or_else(|| bad("commit_time", "missing or not an integer"))?;
        let commit_ts = match obj.get("commit_ts") {
            None => None,
            Some(Json::String(s)) => Some(Timestamp::parse_str(s).map_err(|e| bad("commit_ts", &e))?),
            Some(_) => return Err(bad("commit_ts", "not a string \"WALL\" or \"WALL.LOGICAL\"")),
        };
        let mut changes = Vec::new();
        let list = obj
            .get("changes")
            .and_then(Json::as_array)
            .ok_or_else(|| bad("changes", "missing or not an array"))?;
        for (i, c) in list.iter().enumerate() {
            let field = |f: &str| format!("changes[{i}].{f}");
            let c = c.as_object().ok_or_else(|| bad(&format!("changes[{i}]"), "is not an object"))?;
            let table = c
                .get("table")
                .and_then(Json::as_str)
                .ok_or_else(|| bad(&field("table"), "missing or not a string"))?;
            let key = c
                .get("key")
                .and_then(scalar_from_json)
                .ok_or_else(|| bad(&field("key"), "missing or not a scalar"))?;
            let row = match c.get("row") {
                None | Some(Json::Null) => None,
                Some(Json::Object(cols)) => Some(
                    cols.iter()
                        .map(|(k, v)| {
                            Ok((
                                Arc::from(k.as_str()),
                                scalar_from_json(v)
                                    .ok_or_else(|| bad(&field("row"), "a column is not a scalar"))?,
                            ))
                        })
                        .collect::<Result<Vec<_>, RawLogError>>()?,
                ),
                Some(_) => return Err(bad(&field("row"), "not an object or null")),
            };
            changes.push(RowChange { table: table.into(), key, row });
        }
        Ok(CommittedTxn { xid, commit_lsn, end_lsn, commit_time, commit_ts, changes })
    }
}

impl RawLog {
    /// Writes the log as JSON lines, one committed transaction per line in commit order.
    ///
    /// # Errors
    /// The writer's error.
    pub fn write_jsonl(&self, out: &mut impl Write) -> std::io::Result<()> {
        for t in &self.txns {
            writeln!(out, "{}", t.to_json())?;
        }
        Ok(())
    }

    /// Reads a log [`RawLog::write_jsonl`] wrote (blank lines are skipped).
    ///
    /// # Errors
    /// [`RawLogError::Line`] naming the line and field of a malformed transaction, or one
    /// whose commit position does not increase.
    pub fn read_jsonl(input: impl BufRead) -> Result<RawLog, RawLogError> {
        let mut log = RawLog::new();
        for (i, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let v: Json = serde_json::from_str(&line).map_err(|e| RawLogError::Line {
                line: i + 1,
                field: "line".into(),
                message: e.to_string(),
            })?;
            let txn = CommittedTxn::from_json(&v, i + 1)?;
            if !log.push(txn) {
                return Err(RawLogError::Line {
                    line: i + 1,
                    field: "commit_lsn".into(),
                    message: "not after the previous line's".into(),
                });
            }
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(lsn: u64) -> CommittedTxn {
        CommittedTxn {
            xid: lsn,
            commit_lsn: lsn,
            end_lsn: lsn + 1,
            commit_time: 0,
            commit_ts: None,
            changes: Vec::new(),
        }
    }

    #[test]
    fn logs_of_several_tables_merge_in_commit_order_joining_one_transaction() {
        let change =
            |table: &str, key: i64| RowChange { table: table.into(), key: Scalar::Int(key), row: None };
        let with = |lsn: u64, changes: Vec<RowChange>| CommittedTxn { changes, ..txn(lsn) };
        let mut a = RawLog::new();
        a.push(with(10, vec![change("a", 1), change("a", 2)]));
        a.push(with(30, vec![change("a", 3)]));
        let mut b = RawLog::new();
        b.push(with(20, vec![change("b", 1)]));
        b.push(with(30, vec![change("b", 2)]));
        let merged = RawLog::merge(vec![a, b]);
        let lsns: Vec<u64> = merged.txns().iter().map(|t| t.commit_lsn).collect();
        assert_eq!(lsns, [10, 20, 30]);
        assert_eq!(merged.txns()[2].changes, vec![change("a", 3), change("b", 2)]);
        assert_eq!(merged.change_count(), 5);
    }

    #[test]
    fn redelivered_transactions_are_recorded_once() {
        let mut log = RawLog::new();
        assert!(log.push(txn(10)));
        assert!(log.push(txn(20)));
        assert!(!log.push(txn(10)));
        assert!(!log.push(txn(20)));
        assert!(log.push(txn(30)));
        assert_eq!(log.txns().iter().map(|t| t.commit_lsn).collect::<Vec<_>>(), vec![10, 20, 30]);
    }

    #[test]
    fn json_lines_round_trip_and_bad_lines_are_named() {
        let mut log = RawLog::new();
        let row = vec![
            ("id".into(), Scalar::Int(3)),
            ("name".into(), Scalar::Text("x".into())),
            ("f".into(), Scalar::Float(1.5)),
        ];
        log.push(CommittedTxn {
            xid: 7,
            commit_lsn: 0x1_0000_0100,
            end_lsn: 0x1_0000_0130,
            commit_time: -5,
            commit_ts: Some(Timestamp::hlc(1_700_000_000_000_000_000, 3)),
            changes: vec![
                RowChange { table: "items".into(), key: Scalar::Int(3), row: Some(row) },
                RowChange { table: "items".into(), key: Scalar::Int(4), row: None },
            ],
        });
        log.push(txn(0x1_0000_0200));
        let mut out = Vec::new();
        log.write_jsonl(&mut out).unwrap();
        assert_eq!(RawLog::read_jsonl(&out[..]).unwrap(), log);
        let text = String::from_utf8(out).unwrap();
        let swapped: String = text.lines().rev().map(|l| format!("{l}\n")).collect();
        let e = RawLog::read_jsonl(swapped.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("line 2: commit_lsn"), "{e}");
        let e = RawLog::read_jsonl(&b"\n{\"xid\":1,\"commit_lsn\":1,\"end_lsn\":2,\"commit_time\":0,\"changes\":[{\"table\":\"kv\",\"key\":1,\"row\":5}]}\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: changes[0].row"), "{e}");
        let e = RawLog::read_jsonl(&b"{\"xid\":1,\"lsn\":1}"[..]).unwrap_err().to_string();
        assert!(e.contains("line 1: lsn: unknown field"), "{e}");
    }
}
