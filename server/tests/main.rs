//! Tests of isocert serve against a real PostgreSQL.
