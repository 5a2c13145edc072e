//! Integration tests of the adapters against a real PostgreSQL.

mod embedded;
mod mariadb;
mod replication;
mod stream_auth;
