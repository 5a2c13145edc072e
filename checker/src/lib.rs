//! Isolation checkers over version certificates.
//!
//! [`check`] certifies a [`History`](isocert_history::History) against an
//! [`IsolationLevel`] using the database's [`Certificate`](isocert_history::Certificate)
//! and returns a [`Report`]: no anomalies means the level holds; otherwise every
//! [`Anomaly`] carries its transactions, operations, objects and, for cycles, the shortest
//! cycle found with one explained [`Edge`] per dependency.
//!
//! - **Emme** builds Adya's dependency graph from the certificate's version order (item
//!   ww/wr/rw) and version sets (predicate-wr/rw, asking a
//!   [`MatchesOracle`](isocert_oracle::MatchesOracle) which versions change a predicate's
//!   matches), then looks for the cycles each level forbids (G0, G1c, G2-item, G2, G-SI)
//!   and for reads no level allows (G1a, G1b, garbage reads, ...).
//! - **Enne** replays the committed transactions in the certificate's serialization order
//!   and compares every read with the replayed state.
//!
//! Reports render as text ([`render_text`]), JSON ([`render_json`]) and Graphviz
//! ([`render_dot`]).

mod aggregate;
mod aion;
mod check;
mod chronos;
mod colindex;
mod emme;
mod enne;
mod error;
mod level;
mod render;
mod report;
mod values;
mod versions;

pub use aion::{check_aion, check_aion_kv, Aion, AionDelay, AionOptions};
pub use check::{check, resolve};
pub use chronos::{check_chronos, check_chronos_kv};
pub use error::CheckError;
pub use level::{CheckerKind, IsolationLevel, ParseNameError};
pub use render::{render_dot, render_json, render_text};
pub use report::{Anomaly, AnomalyKind, CheckStats, Edge, EdgeKind, Report};
