//! Turning facts recovered from a database into a version certificate.
//!
//! An adapter (in `isocert-adapters`) consumes the database's change stream into a
//! [`RawLog`]: committed transactions in commit order with their row changes. A rule per
//! concurrency-control protocol combines that log with the client's [`History`] (which
//! carries the facts the client recorded in `meta`) into a
//! [`Certificate`](isocert_history::Certificate). PostgreSQL's rule is [`recover_postgres`]:
//! version order = replication commit order per row, version sets from the recorded
//! snapshots ([`PgSnapshot`]), timestamps consistent with visibility.
//!
//! ```
//! use isocert_history::{v1, Scalar};
//! use isocert_recovery::{recover_postgres, CommittedTxn, RawLog, RowChange};
//!
//! let text = r#"{"id":1,"session":0,"ops":[{"f":"w","key":1,"value":10}],"meta":{"xid":700,"snapshot":"700:700:"}}
//! {"id":2,"session":1,"ops":[{"f":"select","table":"kv","where":"value > 5","rows":[{"key":1,"value":10}]}],"meta":{"xid":null,"snapshot":"701:701:"}}"#;
//! let mut h = v1::read_history(text.as_bytes())?;
//! let mut log = RawLog::new();
//! log.push(CommittedTxn { xid: 700, commit_lsn: 1, end_lsn: 2, commit_time: 0, commit_ts: None, changes: vec![RowChange {
//!     table: "kv".into(), key: Scalar::Int(1),
//!     row: Some(vec![("key".into(), Scalar::Int(1)), ("value".into(), Scalar::Int(10))]) }] });
//! let recovered = recover_postgres(&mut h, &log, &|_, _, _, _| Ok(true))?;
//! let order = recovered.certificate.version_order.unwrap();
//! assert_eq!(order.values().next().unwrap().len(), 1);
//! assert!(h.txns[0].commit_ts() < h.txns[1].start_ts());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cockroach;
mod dgraph;
mod error;
mod innodb;
mod live;
mod matching;
mod meta;
mod mongodb;
mod postgres;
mod raw_log;
mod recovered;
mod snapshot;
mod tidb;
pub mod timestamp_order;

pub use cockroach::{
    cockroach_timestamps, parse_hlc, recover_cockroach, single_change_per_row, CrdbOpFacts, CrdbTxnFacts,
};
pub use dgraph::{dgraph_timestamps, recover_dgraph, DgraphTxnFacts};
pub use error::RecoveryError;
pub use innodb::InnoDbLiveTicks;
pub use innodb::{binlog_key, binlog_key_text, gtid_seq, recover_innodb, InnoDbOpFacts, InnoDbTxnFacts};
pub use live::{LiveTicks, PgLiveTicks};
pub use mongodb::{
    mongo_txn_xid, read_change_stream, read_oplog, recover_mongodb, ChangeStreamReader, ClusterTime,
    MongoLiveTicks, MongoTxnFacts,
};
pub use postgres::{
    add_foreign_writers, hide_foreign_values, initial_load, recover_postgres, settle_initial, InitialVersion,
    PgOpFacts, PgTxnFacts, PostgresRecovery,
};
pub use raw_log::{CommittedTxn, RawLog, RawLogError, RowChange};
pub use recovered::{FactSources, Recovered, RecoveryStats, RowMatcher};
pub use snapshot::{widen_xid, PgSnapshot, SnapshotParseError};
pub use tidb::{recover_tidb, tidb_timestamps, TiDbOpFacts, TiDbTxnFacts};
pub use timestamp_order::{
    recover_by_timestamps, LogMatch, ReadWindow, RecordedLiveTicks, RecordedTimestamps, TimestampFacts,
    VersionSource,
};
