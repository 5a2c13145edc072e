//! The isocert model: histories, operations, version certificates and the v1 format.
//!
//! A [`History`] is what a test client saw: [`Transaction`]s of [`Op`]s over objects
//! (rows: table plus primary key). Everything is interned at load time into dense ids
//! ([`TxnId`], [`ObjId`], [`ValueId`], [`PredId`], ...) so checkers index vectors instead of
//! hashing strings. A [`Certificate`] is what the database says: the version order of each
//! object, the version set of each predicate read, the serialization order.
//!
//! ```
//! use isocert_history::{v1, Op, Value, Scalar};
//!
//! let text = r#"{"id":1,"session":0,"ops":[{"f":"w","key":"x","value":1}]}
//! {"id":2,"session":1,"ops":[{"f":"r","key":"x","value":1}]}"#;
//! let h = v1::read_history(text.as_bytes())?;
//! let Op::Read { value, .. } = h.txns[1].ops[0] else { unreachable!() };
//! assert_eq!(h.value(value), &Value::Scalar(Scalar::Int(1)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod atomic;
mod certificate;
pub mod chronos;
mod error;
pub mod formats;
mod ids;
mod intern;
mod kv;
mod level;
mod model;
mod name;
mod open;
mod promises;
mod snapshot_set;
mod text;
mod timestamp;
pub mod v1;
mod value;

pub use atomic::{write_atomically, write_directory_atomically, ExistingDirectory};
pub use certificate::{
    is_opaque_value, opaque_value, Certificate, ForeignWriter, HiddenRead, HiddenReason, OpRef, SeenVersion,
    Writer,
};
pub use error::{quote_capped, FormatError, QUOTE_BYTES};
pub use ids::{ColId, ObjId, PredId, SessionId, TableId, TxnId, ValueId};
pub use kv::{
    read_kv_v1, read_kv_v1_bytes, read_kv_v1_chunks, read_kv_v1_file, ChunkFailed, KvHistory, KvOp, KvOpKind,
    KvTxnFields, KvV1Chunks, KvV1Reader, KvValue,
};
pub use level::IsolationLevel;
pub use model::{
    AggregateFn, Assign, Dialect, History, ObjectKey, Op, Predicate, RealTime, ResultRow, SetExpr, Status,
    Table, Transaction, KV_TABLE,
};
pub use name::UnknownName;
pub use open::{open, open_input, open_kv, OpenError};
pub use promises::{Promises, StatementPromise};
pub use snapshot_set::{SnapshotResolver, SnapshotRow, SnapshotSet, SnapshotSetError};
pub use timestamp::{SerialOrder, Timestamp};
pub use value::{Row, Scalar, Value};
