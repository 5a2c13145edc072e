//! The `txnNumber` the driver really sent for each session, learned from command monitoring.
//!
//! The Rust driver keeps `txnNumber` on the pooled *server* session, not on the
//! `ClientSession`: a session checked out of the pool continues from whatever number its
//! server session reached (retryable writes outside transactions advance it too), and a
//! reconnected test-client session may get an `lsid` an earlier one used. A count kept by
//! isocert would then name other transactions' oplog entries and change events, and
//! recovery would fail with `UnknownWriter` or `ValueMismatch` (issue 33). The driver does
//! not expose the number (`ClientSession::txn_number` is crate-private), but every command it
//! sends in a transaction carries `lsid` and `txnNumber`, and a command-started event shows
//! the command as sent (MongoDB's command monitoring specification; mongo-rust-driver
//! `src/event/command.rs`). [`TxnNumbers`] keeps the last number per `lsid`; a session reads
//! its own after its first statement and after `commitTransaction`, while it holds the
//! server session exclusively.

use std::sync::{Arc, Mutex};

use base64::Engine;
use mongodb::bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use rustc_hash::FxHashMap;

/// The last `txnNumber` sent per session id (the base64 text of `lsid.id`).
#[derive(Clone, Debug, Default)]
pub struct TxnNumbers(Arc<Mutex<FxHashMap<String, i64>>>);

impl TxnNumbers {
    /// Notes the `lsid` and `txnNumber` of a command as the driver sent it; commands
    /// outside a transaction (no `txnNumber`) or without a session change nothing.
    pub fn record(&self, command: &Document) {
        let Some(lsid) = lsid_text(command) else { return };
        let number = match command.get("txnNumber") {
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Int32(n)) => i64::from(*n),
            _ => return,
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(lsid, number);
    }

    /// The last `txnNumber` sent with session `lsid`.
    pub fn last(&self, lsid: &str) -> Option<i64> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(lsid).copied()
    }

    /// The command-started handler that feeds this record (for `ClientOptions`).
    pub fn handler(&self) -> EventHandler<CommandEvent> {
        let numbers = self.clone();
        EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event {
                numbers.record(&started.command);
            }
        })
    }
}

/// The base64 text of a command's `lsid.id`, as the session records it.
pub(crate) fn lsid_text(command: &Document) -> Option<String> {
    match command.get_document("lsid").ok()?.get("id")? {
        Bson::Binary(b) => Some(base64::engine::general_purpose::STANDARD.encode(&b.bytes)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use mongodb::bson::spec::BinarySubtype;
    use mongodb::bson::{doc, Binary};

    use super::*;

    fn lsid(byte: u8) -> Document {
        doc! { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![byte; 16] } }
    }

    /// Commands shaped as the driver sends them inside a transaction (the transactions
    /// specification: `lsid`, `txnNumber`, `startTransaction` on the first, `autocommit`),
    /// as a command-started event shows them.
    #[test]
    fn the_last_number_sent_per_session_is_kept() {
        let numbers = TxnNumbers::default();
        let a = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        assert_eq!(numbers.last(&a), None);
        // A pooled server session that earlier transactions and retryable writes took to 41.
        numbers.record(&doc! {
            "insert": "kv", "documents": [], "lsid": lsid(1), "txnNumber": 42_i64,
            "startTransaction": true, "autocommit": false, "$db": "isocert",
        });
        numbers.record(
            &doc! { "find": "kv", "filter": {}, "lsid": lsid(2), "txnNumber": 7_i64, "autocommit": false },
        );
        assert_eq!(numbers.last(&a), Some(42));
        numbers.record(
            &doc! { "commitTransaction": 1, "lsid": lsid(1), "txnNumber": 42_i64, "autocommit": false },
        );
        // Outside a transaction (no txnNumber) or without a session: nothing changes.
        numbers.record(&doc! { "find": "kv", "lsid": lsid(1) });
        numbers.record(&doc! { "hello": 1, "txnNumber": 99_i64 });
        assert_eq!(numbers.last(&a), Some(42));
        assert_eq!(numbers.last(&base64::engine::general_purpose::STANDARD.encode([2u8; 16])), Some(7));
        // The same lsid checked out again by a new test-client session continues the count.
        numbers
            .record(&doc! { "update": "kv", "lsid": lsid(1), "txnNumber": 43_i64, "startTransaction": true });
        assert_eq!(numbers.last(&a), Some(43));
    }
}
