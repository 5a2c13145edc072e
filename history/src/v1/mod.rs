//! The isocert interchange format, version 1 (`shared/spec/history-format-v1.md`).
//!
//! Histories are JSON Lines read one transaction at a time ([`HistoryReader`]); a
//! certificate is one JSON document ([`read_certificate`]). Unknown fields are errors.
//!
//! Project extensions (optional, documented in `docs/FORMAT.md`):
//! - header `"dialect": "postgres" | "mysql" | "mongodb"`: the predicates' dialect (SQL, or
//!   MongoDB query filters as extended JSON);
//! - operation `{"f":"aggregate","table":T,"where":SQL,"function":"min|max|count|sum",
//!   "column":C,"result":V}`: an aggregate over the rows a predicate matches;
//! - header `"promises"`: what the database documents for its statements beyond the level
//!   (`{"database":"PostgreSQL","statements":["write-from-replaced", ...]}`);
//! - update `"set":{"n":{"expr":"n + 3"}}` and `"excluded":ROW`: an assignment computed from
//!   the replaced row (and an upsert's proposed row);
//! - transaction `"meta"` and operation `"meta"`: adapter facts (xid, snapshot, row
//!   writers) that recovery reads and checkers ignore.

mod certificate;
pub(crate) mod json;
pub(crate) mod raw;
mod read;
mod write;

pub use certificate::{
    read_certificate, read_certificate_bytes, write_certificate, write_certificate_with_facts,
};
pub(crate) use read::{header_promises, HEADER_NOT_FIRST};
pub use read::{read_history, read_history_bytes, read_history_vec, AdapterFacts, HistoryReader};
pub use write::{write_header, write_history, write_txn};
