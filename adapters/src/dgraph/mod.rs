//! Dgraph behind the seam: [`Dgraph`] implements [`Database`](crate::Database) over Alpha's
//! HTTP API ([`DgraphHttp`]; the gRPC client drops the commit's transaction context), with
//! a session that records each transaction's `start_ts` and `commit_ts`
//! ([`DgraphSession`]), rows as nodes keyed by an `@upsert`-indexed predicate and
//! predicates as DQL filters (`dql.rs`, `filter.rs`), no change capture (Dgraph has no per-key version
//! API), and `isocert_recovery::recover_dgraph` (timestamp ordering from the history alone)
//! as the recovery rule. Dgraph cannot run on isocert's CI machine: the payload shapes are
//! tested here, the whole path live when `ISOCERT_DGRAPH_URL` is set (docs/DGRAPH.md).

mod adapter;
mod dql;
mod filter;
mod http;
mod session;
mod url;

pub use adapter::{Dgraph, TimestampsOnly};
pub use filter::{parse_filter, Filter, Func};
pub use http::{classify, parse_answer, Answer, DgraphError, DgraphHttp, TxnContext};
pub use session::{DgraphOpFacts, DgraphSession};
pub use url::DgraphUrl;
