//! `isocert hunt`: find isolation anomalies without knowing which contention provokes
//! them, shrink what was found, and hand back a reproducer.
//!
//! - [`Search`] sweeps a [`Space`] of [`TrialParams`] (workloads, key counts from 2,
//!   sessions, key distributions, transaction lengths, delete and client-abort mixes,
//!   trial sizes, seeds), spending more trials near those where the server aborted most;
//! - [`run_trial`] runs one trial on any database behind the seam and checks it;
//! - [`shrink`] reduces a failing history to a 1-minimal set of transactions that still
//!   shows the anomaly class under the same certificate facts;
//! - [`repro`] writes an isolationtester spec of the shrunk history and runs it again.
//!
//! The CLI (`cli/src/hunt.rs`) drives them with a budget, a progress bar and the files.
//!
//! ```
//! use isocert_hunt::{Search, Space, TrialScore};
//! use isocert_workload::WorkloadKind;
//!
//! let space = Space { workloads: vec![WorkloadKind::Kv, WorkloadKind::Append], deletes: true, max_txns: 3000 };
//! let mut search = Search::new(space, 0);
//! let first = search.next_trial();
//! assert_eq!(first.workload, WorkloadKind::Kv);
//! assert!(first.keys >= 2 && first.txns <= 3000);
//! search.record(TrialScore { params: first, abort_rate: 0.4 });
//! assert_eq!(search.next_trial().workload, WorkloadKind::Append, "each workload once first");
//! ```

mod error;
mod params;
pub mod repro;
mod search;
mod shrink;
mod trial;

pub use error::HuntError;
pub use params::{Space, TrialParams};
pub use search::{Search, TrialScore};
pub use shrink::{shrink, sub_history, touched_objects, Selection, Shrunk};
pub use trial::{recover_and_check, run_trial, Trial};
