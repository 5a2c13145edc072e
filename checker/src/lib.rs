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
//! - **MTC** (no certificate) infers the version order of a mini-transaction history from
//!   its read-modify-writes and checks serializability and snapshot isolation in linear time.
//! - **Weak** (no certificate) checks read committed, read atomic and causal consistency
//!   on histories with unique written values in near-linear time, saturating Biswas and
//!   Enea's axioms (the approach of AWDIT).
//! - **Enne** replays the committed transactions in the certificate's serialization order
//!   and compares every read with the replayed state.
//!
//! Reports render as text ([`render_text`]), JSON ([`render_json`]), Graphviz
//! ([`render_dot`]) and a self-contained HTML page ([`render_html`]).
//!
//! ```
//! use isocert_checker::{check, AnomalyKind, CheckerKind, IsolationLevel};
//! use isocert_history::v1;
//! use isocert_oracle::Interpreter;
//!
//! // Write skew: each transaction reads both keys and writes one.
//! let text = r#"{"format":"isocert-history","version":1,"initial":[{"key":"x","value":0},{"key":"y","value":0}]}
//! {"id":1,"session":1,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"x","value":1}]}
//! {"id":2,"session":2,"ops":[{"f":"r","key":"x","value":0},{"f":"r","key":"y","value":0},{"f":"w","key":"y","value":1}]}"#;
//! let mut h = v1::read_history(text.as_bytes())?;
//! let cert = v1::read_certificate(
//!     r#"{"version_order":[{"key":"x","writers":[1]},{"key":"y","writers":[2]}]}"#.as_bytes(),
//!     &mut h,
//! )?;
//! let oracle = Interpreter::new(&h)?;
//! let ser = check(&h, &cert, IsolationLevel::Serializable, CheckerKind::Auto, &oracle)?;
//! assert_eq!(ser.anomalies[0].kind, AnomalyKind::G2Item);
//! assert_eq!(ser.anomalies[0].cycle.len(), 2);
//! let rc = check(&h, &cert, IsolationLevel::ReadCommitted, CheckerKind::Emme, &oracle)?;
//! assert!(rc.is_valid());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aggregate;
mod aion;
mod check;
mod chronos;
mod colindex;
mod emme;
mod enne;
mod error;
mod html;
mod items;
mod level;
mod mtc;
mod partition;
mod promises;
mod render;
mod report;
mod sat;
pub mod stream;
mod values;
mod versions;
mod weak;
mod words;

pub use aion::{check_aion, check_aion_kv, Aion, AionDelay, AionOptions, AionScope, Watermark};
pub use check::{
    check, check_black_box, check_with, partial_version_order, resolve, runs_black_box, without_session_order,
};
pub use chronos::{
    check_chronos, check_chronos_kv, commit_order_decides, settle_serial_order, ChronosStream, StreamStop,
};
pub use error::CheckError;
pub use html::{render_html, GraphLayout, HtmlOptions};
pub use isocert_history::{IsolationLevel, UnknownName};
pub use level::{CheckerKind, SessionOrder};
pub use mtc::infer_mtc_certificate;
pub use partition::{Partitioning, TxnPart};
pub use render::{render_dot, render_json, render_text, render_text_verbose};
pub use report::{Anomaly, AnomalyKind, CheckStats, Edge, EdgeBasis, EdgeKind, Report};
