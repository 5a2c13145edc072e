//! Synthetic histories with version certificates, valid by construction.
//!
//! A seeded simulation runs client sessions' interleaved transactions against a
//! multi-version store under snapshot isolation (snapshot reads, first-committer-wins) or
//! serializability (the same plus commit-time validation of reads and predicate reads, so
//! these histories satisfy both levels); aborted transactions are recorded as aborted. Every committed transaction carries `start_ts`/`commit_ts`; the
//! [`Certificate`](isocert_history::Certificate) carries the version order (commit order),
//! the version set of every committed predicate operation and the serialization order
//! (commit-timestamp order; read-only transactions commit at their start timestamp).
//!
//! [`generate`] builds a [`History`](isocert_history::History) in memory; [`write_stream`]
//! writes v1 JSON lines as transactions finish (a million transactions in seconds). With
//! [`GenConfig::inject`], the otherwise valid history gets exactly one [`Injection`].
//!
//! ```
//! use isocert_gen::{generate, GenConfig, Injection};
//! use isocert_history::IsolationLevel;
//!
//! let cfg = GenConfig { txns: 50, isolation: IsolationLevel::SnapshotIsolation, ..GenConfig::default() };
//! let g = generate(&cfg)?;
//! assert_eq!(g.history.txns.len(), 50);
//! assert!(g.history.txns.iter().all(|t| t.start_ts().is_some()));
//!
//! let bad = generate(&GenConfig { inject: Some(Injection::LostUpdate), ..cfg })?;
//! assert_eq!(bad.history.txns.len(), 52);
//! assert!(Injection::LostUpdate.rejected_at().contains(&"snapshot-isolation"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod build;
mod cert;
mod config;
mod error;
mod inject;
mod record;
mod sim;
mod store;
mod stream;

pub use build::{generate, Generated};
pub use config::{parse_simulated_level, DataModel, Distribution, GenConfig, SIMULATED_LEVELS};
pub use error::GenError;
pub use inject::Injection;
pub use sim::GenStats;
pub use stream::write_stream;
