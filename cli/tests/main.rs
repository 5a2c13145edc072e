//! End-to-end tests of the `isocert` binary.

mod bad_input;
mod black_box;
mod chronos;
mod fast_reader;
mod formats;
mod hunt;
mod issue_30;
mod mtc;
mod newcomer;
#[cfg(feature = "kafka")]
mod online;
mod peer_histories;
mod predicate_reader;
mod readme;
mod seam;
mod serve;
mod weak;
