//! Integration tests of the history model and the v1 format.

mod certificate;
mod fast_readers;
mod formats;
mod row_interning;
mod v1_errors;
mod v1_roundtrip;
