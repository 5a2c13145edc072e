//! End-to-end tests of the `isocert` binary.

mod bad_input;
mod chronos;
mod formats;
mod mtc;
mod seam;
mod serve;
mod weak;
