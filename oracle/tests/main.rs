//! Integration tests of the oracle crate, one module per topic.

mod bounds;
mod common;
mod deep;
mod dgraph;
mod differential;
mod grammar;
mod histories;
mod semantics;
