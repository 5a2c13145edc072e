//! What travels on the topic of transactions (docs/ONLINE.md, "Messages").
//!
//! Every message's Kafka key is `KIND:PRODUCER` (the producer's id, unique per process);
//! its value depends on the kind:
//!
//! | kind | sent to | value |
//! |---|---|---|
//! | `hello` | every partition | the protocol the producer speaks, `isocert-online 2` (empty: protocol 1) |
//! | `header` | every partition | the v1 header line (initial values), before any transaction |
//! | `parts` (protocol 2) | the partitions owning a session or object of its transactions | one or more shares of transactions, one a line: `NUMBERS LINE` |
//! | `txn` (protocol 1) | the partitions owning its session and its objects | one v1 transaction line, unchanged |
//! | `mark` | every partition | `START COMMIT`: every later transaction of this producer starts at or after START and commits at or after COMMIT (v1 timestamps) |
//! | `end` | every partition | empty: this producer publishes nothing more |
//!
//! Protocol 2 splits and batches. A partition receives only its share of each
//! transaction ([`isocert_checker::Partitioning::split_line`]): the transaction's fields
//! and the operations on its objects. `NUMBERS` gives those operations' numbers in the
//! whole transaction, which explanations cite: `*` when the share is the whole
//! transaction, `-` when it holds no operation (the session's partition), otherwise the
//! numbers separated by commas (`0,3,7`). One `parts` message carries the shares of many
//! transactions, in publication order. Members take protocol 1's `txn` messages too;
//! a message of a kind they do not know stops them with an error.

use isocert_checker::Watermark;
use isocert_history::Timestamp;

/// The protocol this crate's producers speak (the value of their `hello`).
pub const PROTOCOL: u32 = 2;

/// The kind of a message on the topic of transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// A producer announces itself and its protocol.
    Hello,
    /// The v1 header line.
    Header,
    /// Shares of transactions (protocol 2).
    Parts,
    /// One whole transaction (protocol 1).
    Txn,
    /// A producer's watermark.
    Mark,
    /// A producer's last message.
    End,
}

impl MessageKind {
    /// Every kind, for tests and error messages.
    pub const ALL: [MessageKind; 6] = [
        MessageKind::Hello,
        MessageKind::Header,
        MessageKind::Parts,
        MessageKind::Txn,
        MessageKind::Mark,
        MessageKind::End,
    ];

    /// The key's prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Hello => "hello",
            MessageKind::Header => "header",
            MessageKind::Parts => "parts",
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
///
/// # Errors
/// A message naming what is wrong: a key that is not `KIND:PRODUCER`, or a kind this
/// member does not know (a producer of a newer protocol: never skipped, since a skipped
/// transaction would make the verdict wrong).
pub fn parse_key(key: &[u8]) -> Result<(MessageKind, &str), String> {
    let text = std::str::from_utf8(key).ok().and_then(|k| k.split_once(':')).ok_or_else(|| {
        "a message whose key is not KIND:PRODUCER (not from an isocert producer)".to_string()
    })?;
    let (kind, producer) = text;
    match MessageKind::ALL.into_iter().find(|k| k.as_str() == kind) {
        Some(k) => Ok((k, producer)),
        None => Err(format!(
            "producer {producer} sent a message of kind {kind:?}, which this member does not know (it knows {}; \
             protocol {PROTOCOL}): upgrade the members to the producer's isocert",
            MessageKind::ALL.map(MessageKind::as_str).join(", ")
        )),
    }
}

/// The value of a `hello` message.
pub fn hello_value() -> String {
    format!("isocert-online {PROTOCOL}")
}

/// The protocol a `hello` message's value announces (an empty value is protocol 1).
///
/// # Errors
/// A value that is not `isocert-online N`, or a protocol newer than this member's.
pub fn parse_hello(value: &[u8]) -> Result<u32, String> {
    if value.is_empty() {
        return Ok(1);
    }
    let text = std::str::from_utf8(value).map_err(|_| "a hello that is not UTF-8".to_string())?;
    let version = text
        .strip_prefix("isocert-online ")
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or_else(|| format!("hello {text:?}: expected \"isocert-online N\""))?;
    if version > PROTOCOL {
        return Err(format!(
            "the producer speaks protocol {version} and this member protocol {PROTOCOL}: upgrade the members"
        ));
    }
    Ok(version)
}

/// Appends one share to a `parts` message's value: its operation numbers (`total` is the
/// whole transaction's count) and its line.
pub fn push_part(value: &mut Vec<u8>, numbers: &[u32], total: usize, line: &[u8]) {
    use std::io::Write as _;
    if numbers.len() == total && numbers.iter().enumerate().all(|(i, &n)| n as usize == i) {
        value.push(b'*');
    } else if numbers.is_empty() {
        value.push(b'-');
    } else {
        for (i, n) in numbers.iter().enumerate() {
            if i > 0 {
                value.push(b',');
            }
            write!(value, "{n}").expect("writing to a Vec");
        }
    }
    value.push(b' ');
    value.extend_from_slice(line);
    value.push(b'\n');
}

/// One share of a `parts` message: its operation numbers (`None`: the whole transaction)
/// and its v1 line.
pub type Part<'a> = (Option<Vec<u32>>, &'a [u8]);

/// The shares of a `parts` message, in order.
///
/// # Errors
/// A message naming the share (1-based) and what is wrong.
pub fn parse_parts(value: &[u8]) -> Result<Vec<Part<'_>>, String> {
    let mut parts = Vec::new();
    for (i, entry) in value.split(|&b| b == b'\n').enumerate() {
        if entry.is_empty() {
            continue;
        }
        let bad = |what: &str| format!("share {} of a parts message: {what}", i + 1);
        let space = entry.iter().position(|&b| b == b' ').ok_or_else(|| bad("expected \"NUMBERS LINE\""))?;
        let (numbers, line) = (&entry[..space], &entry[space + 1..]);
        let numbers = match numbers {
            b"*" => None,
            b"-" => Some(Vec::new()),
            list => Some(
                list.split(|&b| b == b',')
                    .map(|n| std::str::from_utf8(n).ok().and_then(|n| n.parse::<u32>().ok()))
                    .collect::<Option<Vec<u32>>>()
                    .ok_or_else(|| bad("operation numbers must be *, - or numbers separated by commas"))?,
            ),
        };
        parts.push((numbers, line));
    }
    Ok(parts)
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
        for kind in MessageKind::ALL {
            assert_eq!(parse_key(key(kind, "host-1:7").as_bytes()), Ok((kind, "host-1:7")));
        }
        let e = parse_key(b"other:x").unwrap_err();
        assert!(e.contains("\"other\"") && e.contains("producer x") && e.contains("upgrade"), "{e}");
        assert!(parse_key(b"txn").unwrap_err().contains("KIND:PRODUCER"));
        let w = Watermark { start: Timestamp::hlc(5, 3), commit: Timestamp::new(9) };
        assert_eq!(parse_mark(mark_value(w).as_bytes()), Ok(w));
        assert!(parse_mark(b"5").unwrap_err().contains("START COMMIT"));
        assert!(parse_mark(b"x 5").is_err());
    }

    #[test]
    fn hellos_name_their_protocol() {
        assert_eq!(parse_hello(hello_value().as_bytes()), Ok(PROTOCOL));
        assert_eq!(parse_hello(b""), Ok(1));
        assert!(parse_hello(b"isocert-online 3").unwrap_err().contains("protocol 3"));
        assert!(parse_hello(b"hi").unwrap_err().contains("isocert-online N"));
    }

    #[test]
    fn parts_round_trip() {
        let mut value = Vec::new();
        push_part(&mut value, &[0, 1, 2], 3, b"{\"id\":1}");
        push_part(&mut value, &[], 3, b"{\"id\":2}");
        push_part(&mut value, &[1, 4], 5, b"{\"id\":3}");
        push_part(&mut value, &[0], 2, b"{\"id\":4}");
        assert_eq!(value, b"* {\"id\":1}\n- {\"id\":2}\n1,4 {\"id\":3}\n0 {\"id\":4}\n");
        let parts = parse_parts(&value).unwrap();
        assert_eq!(
            parts,
            [
                (None, &b"{\"id\":1}"[..]),
                (Some(vec![]), &b"{\"id\":2}"[..]),
                (Some(vec![1, 4]), &b"{\"id\":3}"[..]),
                (Some(vec![0]), &b"{\"id\":4}"[..]),
            ]
        );
        assert!(parse_parts(b"{\"id\":1}").unwrap_err().contains("share 1"));
        assert!(parse_parts(b"* {}\n1,x {}").unwrap_err().contains("share 2"));
    }
}
