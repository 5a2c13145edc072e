//! Scripted interleavings: PostgreSQL isolationtester `.spec` scenarios run through the
//! database seam, every permutation recorded as a history and certified with the same
//! recovery and checkers as random workloads (`isocert scenario`, docs/SCENARIOS.md).
//!
//! - [`spec`]: the `.spec` format (setup, teardown, sessions, steps, permutations);
//! - [`translate`]: each statement as transaction control, a recorded [`Step`] of the seam
//!   (the adapter runs its equivalent and records the database's answer and facts), or SQL
//!   run as written and listed as unrecorded;
//! - [`runner`]: one permutation on a database: one connection per session, steps in order,
//!   lock waits detected so the next step can start.
//!
//! [`Step`]: isocert_adapters::Step

mod interleave;
pub mod runner;
mod sessions;
pub mod spec;
mod split;
mod tables;
pub mod translate;
mod worker;

pub use runner::{run_permutation, PermutationRun, RunOptions, ScenarioError, Unrecorded};
pub use spec::{parse, Permutation, Spec, SpecError, CHECK_DIRECTIVE};
pub use translate::{find_tables, survey_tables, Action, Effect, ScenarioTable, SkippedTable, Translator};
