//! CockroachDB behind the seam: [`CockroachDb`] implements [`Database`](crate::Database)
//! over pgwire (the PostgreSQL client's simple-query helpers; `session.rs` renders the steps
//! in CockroachDB's SQL and records `cluster_logical_timestamp()` before COMMIT and each
//! row's `crdb_internal_mvcc_timestamp`), TLS by rustls (`sslmode=require|verify-full`),
//! a sinkless changefeed as the version source ([`ChangefeedCapture`], payloads parsed by
//! `changefeed.rs`), and `isocert_recovery::recover_cockroach` (the shared
//! timestamp-ordering rule) for recovery. CockroachDB cannot run on isocert's CI machine: the
//! payload shapes are tested here, the whole path live when `ISOCERT_COCKROACH_URL` is set
//! (docs/COCKROACHDB.md).

mod adapter;
mod capture;
mod changefeed;
#[cfg(feature = "kafka")]
mod kafka;
mod session;
mod tls;
mod url;

pub use adapter::CockroachDb;
pub use capture::ChangefeedCapture;
pub use changefeed::{
    bytes_text, capture_line, parse_capture_line, parse_message, read_capture, FeedChange, FeedLog,
    FeedMessage, FeedRow,
};
#[cfg(feature = "kafka")]
pub use kafka::{delete_topic, KafkaFeed, KafkaTarget, TopicOrigin};
pub use session::{classify, CrdbSession};
pub use url::{CockroachUrl, TlsMode};
