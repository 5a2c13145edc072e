//! End-to-end tests of the `isocert` binary.

mod chronos;
mod formats;
mod mtc;
mod seam;
