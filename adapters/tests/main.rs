//! Integration tests of the adapters against a real PostgreSQL.

mod embedded;
mod replication;
