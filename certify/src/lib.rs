//! History + captured log -> certificate -> verdict, written once.
//!
//! A history a test client recorded, the change stream captured beside it and a database's
//! recovery rule ([`Database::recover`]) make a version certificate; a checker turns history
//! and certificate into a verdict. `isocert run`, `recover`, `scenario`, `serve` and `hunt`
//! all do this; each calls the steps here and keeps only its own job (arguments, output,
//! exit codes, HTTP):
//!
//! 1. [`Interpreter::new`]: compile the history's predicates once (the caller names what
//!    failed in its own words);
//! 2. [`recover`]: apply the database's rule with that interpreter as the row matcher, then
//!    bring the interpreter up to date with what recovery changed in the history;
//!    [`unlogged_writers`] tells a log that holds none of the history's commits;
//! 3. [`check`]: the verdict, with the same interpreter.
//!
//! [`certify`] does all three.

mod pipeline;

pub use isocert_checker::check;
pub use isocert_oracle::Interpreter;
pub use pipeline::{certify, recover, unlogged_writers, Certified, CertifyError};
