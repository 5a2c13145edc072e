//! Online timestamp checking on Kafka (docs/ONLINE.md): producers publish each completed
//! transaction's shares to the partitions that check them, batched ([`Emitter`],
//! [`LiveEmitter`], [`emit_file`]; the messages: [`protocol`]); members of a consumer group each check the partitions Kafka assigns
//! them ([`run_member`]) with Aion scoped to the partition's objects and sessions
//! ([`isocert_checker::AionScope`]) and final by the producers' watermark; verdicts go to
//! a results topic, once each ([`Results`]).
//!
//! This crate does the I/O; how the checks split across partitions is decided in the
//! checker crate ([`isocert_checker::Partitioning`]), which talks to no broker.
//!
//! ```
//! use isocert_online::OnlineTarget;
//! let target = OnlineTarget::parse("kafka://127.0.0.1:9092/txns")?;
//! assert_eq!(target.default_results_topic(), "txns.results");
//! # Ok::<(), isocert_online::OnlineError>(())
//! ```

mod admin;
mod checking;
mod emit;
mod error;
mod member;
pub mod protocol;
mod results;
mod target;

pub use admin::{ensure_topic, partition_count};
pub use emit::{default_producer_id, emit_file, emit_lines, Emitter, LiveEmitter};
pub use error::OnlineError;
pub use member::{run_member, MemberEvent, MemberOptions, Summary};
pub use results::{scalar_json, AnomalyRecord, DoneRecord, LateRecord, ResultRecord, Results};
pub use target::OnlineTarget;
