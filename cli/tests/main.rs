//! End-to-end tests of the `isocert` binary.

mod formats;
