//! End-to-end tests: one integration binary, one module per topic.

mod cockroach;
mod cockroach_feed;
mod convert_roundtrip;
mod corpus;
mod dgraph;
mod dgraph_fake;
mod generated;
mod html;
mod mariadb;
mod mongodb;
mod postgres;
mod safety;
mod scenario_safety;
mod scenarios;
mod tidb;
