//! MongoDB behind the seam: [`MongoDb`] implements [`Database`](crate::Database) over the
//! official async driver (feature `mongodb`): every attempt a multi-document transaction
//! with read concern `snapshot` and write concern `majority` on a replica set (a standalone
//! server is refused), documents `{_id: key, <columns>, writer: id}`, the workload's SQL
//! predicates translated into query filters ([`sql_to_filter`]) that the history records in
//! the `mongodb` dialect, a change stream as the version source ([`MongoCapture`]), and
//! `isocert_recovery::recover_mongodb` (timestamp ordering by cluster time) as the recovery
//! rule. MongoDB cannot run on isocert's CI machine: the payload shapes are tested in
//! `isocert-recovery`, the whole path live when `ISOCERT_MONGODB_URL` is set
//! (docs/MONGODB.md).

#[cfg(feature = "mongodb")]
mod adapter;
#[cfg(feature = "mongodb")]
mod capture;
mod filter;
#[cfg(feature = "mongodb")]
mod session;
#[cfg(feature = "mongodb")]
mod txn_numbers;

#[cfg(feature = "mongodb")]
pub use adapter::{read_mongodb_source, MongoDb, DEFAULT_DATABASE};
#[cfg(feature = "mongodb")]
pub use capture::{MongoCapture, MARKER_PREFIX};
pub use filter::sql_to_filter;
#[cfg(feature = "mongodb")]
pub use session::{classify, MongoOpFacts, MongoSession};
#[cfg(feature = "mongodb")]
pub use txn_numbers::TxnNumbers;
