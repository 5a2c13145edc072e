//! What travels on the topic of transactions (docs/ONLINE.md, "Messages").
//!
//! Every message's Kafka key is `KIND:PRODUCER` (the producer's id, unique per process);
//! its value depends on the kind:
//!
//! | kind | sent to | value |
//! |---|---|---|
//! | `hello` | every partition | empty: the producer exists (watermarks wait for it) |
//! | `header` | every partition | the v1 header line (initial values), before any transaction |
//! | `txn` | the partitions owning its session and its objects | one v1 transaction line, unchanged |
//! | `mark` | every partition | `START COMMIT`: every later transaction of this producer starts at or after START and commits at or after COMMIT (v1 timestamps) |
//! | `end` | every partition | empty: this producer publishes nothing more |
//!
//! A transaction goes whole to each partition it touches: the explanation of an anomaly
//! names operations by their index in the transaction, so each partition sees the same
//! transaction the offline check sees and checks only the objects and session it owns.

use isocert_checker::Watermark;
use isocert_history::Timestamp;

/// The kind of a message on the topic of transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// A producer announces itself.
    Hello,
    /// The v1 header line.
    Header,
    /// One transaction.
    Txn,
    /// A producer's watermark.
    Mark,
    /// A producer's last message.
    End,
}

impl MessageKind {
    /// The key's prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Hello => "hello",
            MessageKind::Header => "header",
            MessageKind::Txn => "txn",
            MessageKind::Mark => "mark",
            MessageKind::End => "end",
        }
    }
}

/// The key of a message of `kind` from `producer`.
pub fn key(kind: MessageKind, producer: &str) -> String {
    format!("{}:{producer}", kind.as_str())
}

/// Splits a message key into its kind and producer.
pub fn parse_key(key: &[u8]) -> Option<(MessageKind, &str)> {
    let key = std::str::from_utf8(key).ok()?;
    let (kind, producer) = key.split_once(':')?;
    let kind = match kind {
        "hello" => MessageKind::Hello,
        "header" => MessageKind::Header,
        "txn" => MessageKind::Txn,
        "mark" => MessageKind::Mark,
        "end" => MessageKind::End,
        _ => return None,
    };
    Some((kind, producer))
}

/// The value of a `mark` message.
pub fn mark_value(w: Watermark) -> String {
    format!("{} {}", w.start, w.commit)
}

/// Parses the value of a `mark` message.
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_mark(value: &[u8]) -> Result<Watermark, String> {
    let text = std::str::from_utf8(value).map_err(|_| "a mark that is not UTF-8".to_string())?;
    let (start, commit) =
        text.split_once(' ').ok_or_else(|| format!("mark {text:?}: expected \"START COMMIT\""))?;
    let ts = |s: &str| Timestamp::parse_str(s).map_err(|e| format!("mark {text:?}: {e}"));
    Ok(Watermark { start: ts(start)?, commit: ts(commit)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_marks_round_trip() {
        for kind in
            [MessageKind::Hello, MessageKind::Header, MessageKind::Txn, MessageKind::Mark, MessageKind::End]
        {
            assert_eq!(parse_key(key(kind, "host-1:7").as_bytes()), Some((kind, "host-1:7")));
        }
        assert_eq!(parse_key(b"other:x"), None);
        assert_eq!(parse_key(b"txn"), None);
        let w = Watermark { start: Timestamp::hlc(5, 3), commit: Timestamp::new(9) };
        assert_eq!(parse_mark(mark_value(w).as_bytes()), Ok(w));
        assert!(parse_mark(b"5").unwrap_err().contains("START COMMIT"));
        assert!(parse_mark(b"x 5").is_err());
    }
}
