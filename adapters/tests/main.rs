//! Integration tests of the adapters against a real PostgreSQL.

mod embedded;
mod replication;
mod stream_auth;
