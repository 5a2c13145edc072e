//! Integration tests of the workload against a real PostgreSQL: `ISOCERT_TEST_PG` when set,
//! otherwise a private [`EmbeddedPostgres`](isocert_adapters::EmbeddedPostgres).

mod support;

mod anomalies;
mod facts;
mod postgres_behaviour;
mod seam;
mod shapes;
