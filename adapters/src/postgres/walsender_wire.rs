//! The bytes of PostgreSQL's streaming replication protocol once the connection is in
//! CopyBoth mode: backend message framing, the XLogData (`w`) and primary keepalive (`k`)
//! messages inside CopyData, and the Standby Status Update (`r`) the client sends back.
//!
//! Pure functions on buffers, so that the exact server shapes are unit-tested without a
//! socket; `walsender.rs` does the I/O.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};

use crate::AdapterError;

/// Seconds from the Unix epoch to PostgreSQL's epoch, 2000-01-01 00:00:00 UTC.
const POSTGRES_EPOCH_UNIX_SECS: u64 = 946_684_800;

/// Largest backend message accepted (a pgoutput message carries one row; 1 GiB is
/// PostgreSQL's own limit on a field).
const MAX_MESSAGE_LEN: usize = 1 << 30;

/// One backend message: its tag byte and its body (without tag and length).
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) tag: u8,
    pub(crate) body: Bytes,
}

/// Takes the next complete backend message off the front of `buf`, or `None` when `buf`
/// holds only part of one (read more and call again).
///
/// # Errors
/// [`AdapterError::Protocol`] for a length below 4 or above [`MAX_MESSAGE_LEN`].
pub(crate) fn next_frame(buf: &mut BytesMut) -> Result<Option<Frame>, AdapterError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if !(4..=MAX_MESSAGE_LEN).contains(&len) {
        return Err(protocol(format!("backend message {:?} with length {len}", buf[0] as char)));
    }
    if buf.len() < len + 1 {
        buf.reserve(len + 1 - buf.len());
        return Ok(None);
    }
    let tag = buf[0];
    let mut frame = buf.split_to(len + 1);
    frame.advance(5);
    Ok(Some(Frame { tag, body: frame.freeze() }))
}

/// What a CopyData message of a logical replication stream carries.
#[derive(Debug, PartialEq)]
pub(crate) enum StreamMessage {
    /// XLogData: output of the decoding plugin (one pgoutput message).
    XLogData {
        /// The WAL position of the data (for logical decoding: the end of the commit
        /// record on a transaction's last message, else 0).
        wal_start: u64,
        /// The server's end of WAL as the walsender reports it (the same as `wal_start`
        /// for logical decoding).
        wal_end: u64,
        /// The plugin's bytes.
        data: Bytes,
    },
    /// Primary keepalive: the walsender has decoded, and sent the output of, everything
    /// before `wal_end`.
    Keepalive {
        /// The walsender's sent position.
        wal_end: u64,
        /// The server asks for a Standby Status Update now (else it times the client out).
        reply_requested: bool,
    },
}

/// Parses the body of a CopyData message of the replication stream.
///
/// # Errors
/// [`AdapterError::Protocol`] for a truncated message or an unknown kind.
pub(crate) fn parse_copy_data(mut body: Bytes) -> Result<StreamMessage, AdapterError> {
    if body.is_empty() {
        return Err(protocol("empty CopyData message"));
    }
    match body.get_u8() {
        b'w' => {
            if body.len() < 24 {
                return Err(protocol(format!("XLogData header of {} bytes, expected 24", body.len())));
            }
            let wal_start = body.get_u64();
            let wal_end = body.get_u64();
            let _send_time = body.get_i64();
            Ok(StreamMessage::XLogData { wal_start, wal_end, data: body })
        }
        b'k' => {
            if body.len() != 17 {
                return Err(protocol(format!("primary keepalive of {} bytes, expected 17", body.len())));
            }
            let wal_end = body.get_u64();
            let _send_time = body.get_i64();
            let reply_requested = body.get_u8() != 0;
            Ok(StreamMessage::Keepalive { wal_end, reply_requested })
        }
        other => Err(protocol(format!("unknown replication message {:?}", other as char))),
    }
}

/// The CopyData payload of a Standby Status Update reporting `position` as written,
/// flushed and applied (the client has recorded every transaction committing before it),
/// sent at `now_micros` (microseconds since 2000-01-01); `reply` asks the server to answer
/// at once with a keepalive carrying its sent position.
pub(crate) fn standby_status_update(position: u64, now_micros: i64, reply: bool) -> [u8; 34] {
    let mut out = [0u8; 34];
    out[0] = b'r';
    out[1..9].copy_from_slice(&position.to_be_bytes());
    out[9..17].copy_from_slice(&position.to_be_bytes());
    out[17..25].copy_from_slice(&position.to_be_bytes());
    out[25..33].copy_from_slice(&now_micros.to_be_bytes());
    out[33] = u8::from(reply);
    out
}

/// Microseconds since PostgreSQL's epoch, for status updates.
pub(crate) fn postgres_now_micros() -> i64 {
    let since_unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let micros = since_unix.as_micros() as i64;
    micros - (POSTGRES_EPOCH_UNIX_SECS as i64) * 1_000_000
}

/// The fields of an ErrorResponse or NoticeResponse body that say what happened.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ServerNotice {
    /// Severity (`ERROR`, `FATAL`, `NOTICE`, ...).
    pub(crate) severity: String,
    /// SQLSTATE code.
    pub(crate) code: String,
    /// Primary message.
    pub(crate) message: String,
}

/// Reads the severity, SQLSTATE and message of an ErrorResponse/NoticeResponse body
/// (a list of one-byte field types each followed by a NUL-terminated string).
pub(crate) fn parse_notice(body: &[u8]) -> ServerNotice {
    let mut notice = ServerNotice::default();
    let mut rest = body;
    while let Some((&kind, tail)) = rest.split_first() {
        if kind == 0 {
            break;
        }
        let end = tail.iter().position(|b| *b == 0).unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]).into_owned();
        match kind {
            b'V' => notice.severity = value,
            b'S' if notice.severity.is_empty() => notice.severity = value,
            b'C' => notice.code = value,
            b'M' => notice.message = value,
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or_default();
    }
    notice
}

/// An ErrorResponse body as an [`AdapterError::Server`].
pub(crate) fn server_error(context: impl Into<String>, body: &[u8]) -> AdapterError {
    let ServerNotice { severity, code, message } = parse_notice(body);
    AdapterError::Server { context: context.into(), severity, code, message }
}

/// Formats a WAL position the way PostgreSQL writes it (`16/B374D848`).
pub(crate) fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

fn protocol(message: impl Into<String>) -> AdapterError {
    AdapterError::Protocol { message: format!("replication stream: {}", message.into()) }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A backend message with its tag and length, the way the server frames it.
    pub(crate) fn backend(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend(((body.len() + 4) as u32).to_be_bytes());
        out.extend(body);
        out
    }

    /// An XLogData CopyData body as walsender.c's WalSndPrepareWrite lays it out.
    pub(crate) fn xlogdata(lsn: u64, send_time: i64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![b'w'];
        out.extend(lsn.to_be_bytes());
        out.extend(lsn.to_be_bytes());
        out.extend(send_time.to_be_bytes());
        out.extend(payload);
        out
    }

    /// A primary keepalive CopyData body as walsender.c's WalSndKeepalive lays it out.
    fn keepalive(wal_end: u64, send_time: i64, reply: bool) -> Vec<u8> {
        let mut out = vec![b'k'];
        out.extend(wal_end.to_be_bytes());
        out.extend(send_time.to_be_bytes());
        out.push(u8::from(reply));
        out
    }

    #[test]
    fn frames_are_split_only_when_complete() {
        let commit = [b'C', 0, 0, 0, 0, 0, 0, 0, 0x01, 0x80];
        let mut stream = backend(b'd', &xlogdata(0x1_0000_0180, 7, &commit));
        stream.extend(backend(b'd', &keepalive(0x1_0000_0200, 8, true)));
        // Arrives in two pieces, the cut inside the first message's body.
        let mut buf = BytesMut::from(&stream[..12]);
        assert!(next_frame(&mut buf).unwrap().is_none());
        assert_eq!(buf.len(), 12, "a partial message is left in place");
        buf.extend_from_slice(&stream[12..]);
        let first = next_frame(&mut buf).unwrap().unwrap();
        assert_eq!(first.tag, b'd');
        assert_eq!(
            parse_copy_data(first.body).unwrap(),
            StreamMessage::XLogData {
                wal_start: 0x1_0000_0180,
                wal_end: 0x1_0000_0180,
                data: Bytes::copy_from_slice(&commit)
            }
        );
        let second = next_frame(&mut buf).unwrap().unwrap();
        assert_eq!(
            parse_copy_data(second.body).unwrap(),
            StreamMessage::Keepalive { wal_end: 0x1_0000_0200, reply_requested: true }
        );
        assert!(next_frame(&mut buf).unwrap().is_none());
        assert!(buf.is_empty());
    }

    #[test]
    fn keepalive_without_reply_request() {
        let msg = parse_copy_data(Bytes::from(keepalive(42, -1, false))).unwrap();
        assert_eq!(msg, StreamMessage::Keepalive { wal_end: 42, reply_requested: false });
    }

    #[test]
    fn malformed_stream_messages_are_errors_not_panics() {
        for bad in [&b""[..], b"w\x00\x00", b"k\x00\x00\x00\x00\x00\x00\x00\x01", b"x123"] {
            let err = parse_copy_data(Bytes::copy_from_slice(bad)).unwrap_err();
            assert!(err.to_string().contains("replication stream"), "{err}");
        }
        let mut buf = BytesMut::from(&[b'd', 0, 0, 0, 2][..]);
        assert!(next_frame(&mut buf).unwrap_err().to_string().contains("length 2"));
        let mut huge = BytesMut::from(&[b'd', 0x7f, 0xff, 0xff, 0xff][..]);
        assert!(next_frame(&mut huge).is_err());
    }

    #[test]
    fn status_update_has_the_documented_layout() {
        let msg = standby_status_update(0x16_B374_D848, 0x0102_0304_0506_0708, true);
        assert_eq!(msg[0], b'r');
        for field in [&msg[1..9], &msg[9..17], &msg[17..25]] {
            assert_eq!(field, 0x16_B374_D848u64.to_be_bytes());
        }
        assert_eq!(&msg[25..33], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(msg[33], 1);
        assert_eq!(standby_status_update(1, 0, false)[33], 0);
    }

    #[test]
    fn error_fields_are_read() {
        let body =
            b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0Fpostgres.c\0\0";
        let err = server_error("streaming", body);
        let AdapterError::Server { severity, code, message, .. } = &err else { panic!("{err:?}") };
        assert_eq!((severity.as_str(), code.as_str()), ("FATAL", "57P01"));
        assert!(message.starts_with("terminating connection"), "{message}");
        // A truncated body is read as far as it goes.
        assert_eq!(parse_notice(b"C08006").code, "08006");
    }

    #[test]
    fn times_and_positions_are_in_postgres_terms() {
        // 2024-01-01 is 24 years after PostgreSQL's epoch; now is later than that.
        assert!(postgres_now_micros() > 757_382_400 * 1_000_000);
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
    }
}
