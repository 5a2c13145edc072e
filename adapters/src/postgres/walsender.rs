//! A connection in PostgreSQL's streaming replication protocol (`replication=database`,
//! served by a walsender process): startup and authentication (trust, password, md5,
//! SCRAM-SHA-256; the message encoders, md5 hashing and SCRAM come from `postgres-protocol`,
//! rust-postgres's codec crate), `START_REPLICATION ... LOGICAL`, then the CopyBoth stream.
//!
//! tokio-postgres cannot enter CopyBoth mode, so this connection is driven directly over a
//! TCP or Unix socket. The URL is parsed by tokio-postgres, so `--db` means the same thing
//! for the workload's connections and for this one. TLS is not supported (neither do the
//! other connections of isocert).

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_postgres::config::{Config, Host, SslMode};

use super::replication::quote_ident;
use super::walsender_wire::{
    lsn_text, next_frame, parse_copy_data, parse_notice, postgres_now_micros, server_error,
    standby_status_update, Frame, StreamMessage,
};
use crate::AdapterError;

/// How long a connection attempt may take when the URL sets no `connect_timeout`.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes the receive buffer grows by when it is full.
const READ_CHUNK: usize = 64 * 1024;

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// An authenticated replication connection to one walsender.
pub(crate) struct WalSender {
    reader: Reader,
    writer: Writer,
    /// Received bytes not yet taken as messages.
    buf: BytesMut,
    /// Encoded messages to send.
    out: BytesMut,
    backend_pid: i32,
    /// `host:port` or the socket path, for error messages.
    peer: String,
}

impl std::fmt::Debug for WalSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalSender").field("peer", &self.peer).field("backend_pid", &self.backend_pid).finish()
    }
}

impl WalSender {
    /// Connects to the first host of `url` that accepts a replication connection and
    /// authenticates.
    ///
    /// # Errors
    /// [`AdapterError::Db`] for an unparsable URL, [`AdapterError::Io`] when no host can be
    /// reached, [`AdapterError::Server`] when the server refuses (bad password, no
    /// REPLICATION privilege, too many walsenders), [`AdapterError::Protocol`] for an
    /// authentication method isocert does not speak or a URL without a needed password.
    pub(crate) async fn connect(url: &str) -> Result<Self, AdapterError> {
        let config: Config =
            url.parse().map_err(|e| AdapterError::db(format!("parsing {}", crate::redact_url(url)), e))?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(protocol(format!(
                "{url} requires TLS (sslmode=require), which isocert's connections do not support"
            )));
        }
        let user = match config.get_user() {
            Some(user) => user.to_string(),
            None => std::env::var("USER")
                .map_err(|_| protocol(format!("{} names no user", crate::redact_url(url))))?,
        };
        let mut targets: Vec<Host> =
            config.get_hostaddrs().iter().map(|a| Host::Tcp(a.to_string())).collect();
        if targets.is_empty() {
            targets = config.get_hosts().to_vec();
        }
        if targets.is_empty() {
            return Err(protocol(format!("{} names no host", crate::redact_url(url))));
        }
        let ports = config.get_ports();
        let mut last_error = None;
        for (i, host) in targets.iter().enumerate() {
            let port = ports.get(i).or_else(|| ports.first()).copied().unwrap_or(5432);
            match Self::connect_host(host, port, &config, &user).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one host was tried"))
    }

    async fn connect_host(host: &Host, port: u16, config: &Config, user: &str) -> Result<Self, AdapterError> {
        let timeout = config.get_connect_timeout().copied().unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let (reader, writer, peer): (Reader, Writer, String) = match host {
            Host::Tcp(name) => {
                let peer = format!("{name}:{port}");
                let stream = within(timeout, &peer, TcpStream::connect((name.as_str(), port))).await?;
                stream.set_nodelay(true).map_err(|e| AdapterError::io(format!("configuring {peer}"), e))?;
                let (r, w) = stream.into_split();
                (Box::new(r), Box::new(w), peer)
            }
            Host::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{port}"));
                let peer = path.display().to_string();
                let stream = within(timeout, &peer, UnixStream::connect(&path)).await?;
                let (r, w) = stream.into_split();
                (Box::new(r), Box::new(w), peer)
            }
        };
        let mut conn = WalSender {
            reader,
            writer,
            buf: BytesMut::with_capacity(READ_CHUNK),
            out: BytesMut::new(),
            backend_pid: 0,
            peer,
        };
        let database = config.get_dbname().unwrap_or(user);
        let mut params = vec![
            ("user", user),
            ("database", database),
            ("replication", "database"),
            ("client_encoding", "UTF8"),
            ("application_name", config.get_application_name().unwrap_or("isocert-replication")),
        ];
        if let Some(options) = config.get_options() {
            params.push(("options", options));
        }
        frontend::startup_message(params, &mut conn.out)
            .map_err(|e| conn.io_error("encoding the startup message", e))?;
        conn.flush().await?;
        conn.authenticate(config, user).await?;
        Ok(conn)
    }

    /// Answers the server's authentication requests until ReadyForQuery.
    async fn authenticate(&mut self, config: &Config, user: &str) -> Result<(), AdapterError> {
        let password = config.get_password();
        let need_password = |method: &str| {
            password.ok_or_else(|| {
                protocol(format!("the server asks for a password ({method}) and the URL has none"))
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            let Frame { tag, mut body } = self.read_frame().await?;
            match tag {
                b'R' => {
                    if body.len() < 4 {
                        return Err(protocol("truncated authentication request"));
                    }
                    match body.get_i32() {
                        0 => {}
                        3 => {
                            let password = need_password("password")?;
                            frontend::password_message(password, &mut self.out)
                                .map_err(|e| self.io_error("encoding the password", e))?;
                        }
                        5 => {
                            if body.len() < 4 {
                                return Err(protocol("truncated md5 salt"));
                            }
                            let salt = [body[0], body[1], body[2], body[3]];
                            let hash = md5_hash(user.as_bytes(), need_password("md5")?, salt);
                            frontend::password_message(hash.as_bytes(), &mut self.out)
                                .map_err(|e| self.io_error("encoding the password", e))?;
                        }
                        10 => {
                            let offered = sasl_mechanisms(&body);
                            if !offered.iter().any(|m| m == SCRAM_SHA_256) {
                                return Err(protocol(format!(
                                    "the server offers SASL mechanisms {offered:?}; isocert speaks {SCRAM_SHA_256}"
                                )));
                            }
                            let client = ScramSha256::new(
                                need_password("SCRAM-SHA-256")?,
                                ChannelBinding::unsupported(),
                            );
                            frontend::sasl_initial_response(SCRAM_SHA_256, client.message(), &mut self.out)
                                .map_err(|e| self.io_error("encoding the SCRAM message", e))?;
                            scram = Some(client);
                        }
                        11 => {
                            let client =
                                scram.as_mut().ok_or_else(|| protocol("SASL continue before SASL start"))?;
                            client.update(&body).map_err(|e| protocol(format!("SCRAM exchange: {e}")))?;
                            frontend::sasl_response(client.message(), &mut self.out)
                                .map_err(|e| self.io_error("encoding the SCRAM message", e))?;
                        }
                        12 => {
                            let client =
                                scram.as_mut().ok_or_else(|| protocol("SASL final before SASL start"))?;
                            client.finish(&body).map_err(|e| {
                                protocol(format!("SCRAM: the server's signature does not verify: {e}"))
                            })?;
                        }
                        code => {
                            return Err(protocol(format!(
                            "authentication method {} is not supported (isocert speaks trust, password, md5 \
                                 and SCRAM-SHA-256)",
                            auth_method_name(code)
                        )))
                        }
                    }
                    self.flush().await?;
                }
                b'K' => {
                    if body.len() >= 4 {
                        self.backend_pid = body.get_i32();
                    }
                }
                b'S' => {}
                b'N' => self.log_notice(&body),
                b'Z' => return Ok(()),
                b'E' => {
                    return Err(server_error(
                        format!("connecting to {} for streaming replication", self.peer),
                        &body,
                    ))
                }
                other => {
                    return Err(protocol(format!("unexpected message {:?} during startup", other as char)))
                }
            }
        }
    }

    /// The server process id of the walsender (for `pg_terminate_backend`).
    pub(crate) fn backend_pid(&self) -> i32 {
        self.backend_pid
    }

    /// Starts streaming slot `slot` (pgoutput, protocol version 1, publication
    /// `publication`) from WAL position `start`: the server sends every transaction that
    /// commits at or after `start` and after the slot's confirmed position.
    ///
    /// # Errors
    /// [`AdapterError::Server`] when the server refuses (slot missing or in use by another
    /// process: SQLSTATE 55006), [`AdapterError::Io`] when the connection breaks.
    pub(crate) async fn start_logical(
        &mut self,
        slot: &str,
        start: u64,
        publication: &str,
    ) -> Result<(), AdapterError> {
        let command = format!(
            "START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names '{}')",
            quote_ident(slot),
            lsn_text(start),
            quote_ident(publication).replace('\'', "''"),
        );
        frontend::query(&command, &mut self.out)
            .map_err(|e| self.io_error("encoding START_REPLICATION", e))?;
        self.flush().await?;
        loop {
            let Frame { tag, body } = self.read_frame().await?;
            match tag {
                b'W' => return Ok(()),
                b'N' => self.log_notice(&body),
                b'E' => return Err(server_error(format!("starting replication from slot {slot}"), &body)),
                other => {
                    return Err(protocol(format!(
                        "unexpected message {:?} after START_REPLICATION",
                        other as char
                    )))
                }
            }
        }
    }

    /// The next complete stream message already received, if any (no I/O).
    ///
    /// # Errors
    /// [`AdapterError::Server`] when the server reports an error (e.g. the walsender was
    /// terminated: SQLSTATE 57P01), [`AdapterError::Io`] when the server ends the stream,
    /// [`AdapterError::Protocol`] for a malformed message.
    pub(crate) fn next_message(&mut self) -> Result<Option<StreamMessage>, AdapterError> {
        while let Some(Frame { tag, body }) = next_frame(&mut self.buf)? {
            match tag {
                b'd' => return parse_copy_data(body).map(Some),
                b'N' => self.log_notice(&body),
                // A reported setting that changed (harmless; not expected while streaming).
                b'S' => {}
                b'E' => return Err(server_error("streaming replication", &body)),
                b'c' => {
                    let ended = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "the server ended the stream",
                    );
                    return Err(self.io_error("streaming replication", ended));
                }
                other => {
                    return Err(protocol(format!(
                        "unexpected message {:?} in the replication stream",
                        other as char
                    )))
                }
            }
        }
        Ok(None)
    }

    /// Waits for more bytes from the server. Cancel-safe: when dropped before completing
    /// (in a `select!`), nothing was read.
    ///
    /// # Errors
    /// [`AdapterError::Io`] when the connection is closed or broken.
    pub(crate) async fn receive(&mut self) -> Result<(), AdapterError> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        let n = self.reader.read_buf(&mut self.buf).await.map_err(|e| self.io_error("reading", e))?;
        if n == 0 {
            let eof =
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection");
            return Err(self.io_error("reading", eof));
        }
        Ok(())
    }

    /// Sends a Standby Status Update: every transaction committing before `position` is
    /// recorded (the server may forget it); `reply` asks for an immediate keepalive.
    ///
    /// # Errors
    /// [`AdapterError::Io`] when the connection is broken.
    pub(crate) async fn send_status(&mut self, position: u64, reply: bool) -> Result<(), AdapterError> {
        let update = standby_status_update(position, postgres_now_micros(), reply);
        frontend::CopyData::new(&update[..])
            .map_err(|e| self.io_error("encoding a status update", e))?
            .write(&mut self.out);
        self.flush().await
    }

    /// Tells the server the session ends and closes the socket.
    pub(crate) async fn close(mut self) {
        frontend::terminate(&mut self.out);
        let _ = self.flush().await;
        let _ = self.writer.shutdown().await;
    }

    async fn read_frame(&mut self) -> Result<Frame, AdapterError> {
        loop {
            if let Some(frame) = next_frame(&mut self.buf)? {
                return Ok(frame);
            }
            self.receive().await?;
        }
    }

    async fn flush(&mut self) -> Result<(), AdapterError> {
        let out = self.out.split();
        self.writer.write_all(&out).await.map_err(|e| self.io_error("writing", e))?;
        self.writer.flush().await.map_err(|e| self.io_error("writing", e))
    }

    fn io_error(&self, what: &str, source: std::io::Error) -> AdapterError {
        AdapterError::io(format!("{what} on the replication connection to {}", self.peer), source)
    }

    fn log_notice(&self, body: &Bytes) {
        let notice = parse_notice(body);
        tracing::debug!(peer = %self.peer, "{} {}: {}", notice.severity, notice.code, notice.message);
    }
}

/// Runs a connect future with a timeout, naming the peer in the error.
async fn within<T>(
    timeout: Duration,
    peer: &str,
    connect: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, AdapterError> {
    match tokio::time::timeout(timeout, connect).await {
        Ok(result) => result.map_err(|e| AdapterError::io(format!("connecting to {peer}"), e)),
        Err(_) => Err(AdapterError::io(
            format!("connecting to {peer}"),
            std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {timeout:?}")),
        )),
    }
}

/// The NUL-terminated mechanism names of an AuthenticationSASL body.
fn sasl_mechanisms(body: &[u8]) -> Vec<String> {
    body.split(|b| *b == 0)
        .filter(|m| !m.is_empty())
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .collect()
}

fn auth_method_name(code: i32) -> String {
    match code {
        2 => "Kerberos V5".into(),
        6 => "SCM credentials".into(),
        7 | 8 => "GSSAPI".into(),
        9 => "SSPI".into(),
        other => format!("#{other}"),
    }
}

fn protocol(message: impl Into<String>) -> AdapterError {
    AdapterError::Protocol { message: format!("replication connection: {}", message.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::PgOutputDecoder;
    use isocert_history::Scalar;

    use crate::postgres::walsender_wire::tests::backend;

    /// CopyData carrying XLogData with `payload` (walsender.c: `w`, dataStart, walEnd,
    /// sendTime; logical walsenders put the commit's end in both positions of a
    /// transaction's last message and 0 elsewhere).
    fn xlogdata(lsn: u64, payload: &[u8]) -> Vec<u8> {
        backend(b'd', &crate::postgres::walsender_wire::tests::xlogdata(lsn, 777_000_000, payload))
    }

    fn cstr(out: &mut Vec<u8>, s: &str) {
        out.extend(s.as_bytes());
        out.push(0);
    }

    /// pgoutput v1 Begin, Relation items(id int4 key, v int8), Insert (7, 70), Commit.
    fn one_insert_transaction(commit_lsn: u64, end_lsn: u64) -> Vec<u8> {
        let mut begin = vec![b'B'];
        begin.extend(end_lsn.to_be_bytes());
        begin.extend(5i64.to_be_bytes());
        begin.extend(901u32.to_be_bytes());
        let mut relation = vec![b'R'];
        relation.extend(16400u32.to_be_bytes());
        cstr(&mut relation, "public");
        cstr(&mut relation, "items");
        relation.push(b'f');
        relation.extend(2u16.to_be_bytes());
        for (name, oid) in [("id", 23u32), ("v", 20)] {
            relation.push(1);
            cstr(&mut relation, name);
            relation.extend(oid.to_be_bytes());
            relation.extend(u32::MAX.to_be_bytes());
        }
        let mut insert = vec![b'I'];
        insert.extend(16400u32.to_be_bytes());
        insert.push(b'N');
        insert.extend(2u16.to_be_bytes());
        for text in ["7", "70"] {
            insert.push(b't');
            insert.extend((text.len() as u32).to_be_bytes());
            insert.extend(text.as_bytes());
        }
        let mut commit = vec![b'C', 0];
        commit.extend(commit_lsn.to_be_bytes());
        commit.extend(end_lsn.to_be_bytes());
        commit.extend(5i64.to_be_bytes());
        let mut out = xlogdata(0, &begin);
        out.extend(xlogdata(0, &relation));
        out.extend(xlogdata(0, &insert));
        out.extend(xlogdata(end_lsn, &commit));
        out
    }

    /// A connection whose server side is `server` (already-sent bytes) and whose client
    /// writes go to `client_out`.
    fn connection(server: Vec<u8>, client_out: tokio::io::DuplexStream) -> WalSender {
        WalSender {
            reader: Box::new(std::io::Cursor::new(server)),
            writer: Box::new(client_out),
            buf: BytesMut::new(),
            out: BytesMut::new(),
            backend_pid: 4242,
            peer: "test".into(),
        }
    }

    #[tokio::test]
    async fn a_server_stream_decodes_into_transactions_then_ends_with_the_servers_error() {
        let mut server = one_insert_transaction(0x1_0000_0100, 0x1_0000_0130);
        let mut keepalive = vec![b'k'];
        keepalive.extend(0x1_0000_0200u64.to_be_bytes());
        keepalive.extend(0i64.to_be_bytes());
        keepalive.push(1);
        server.extend(backend(b'd', &keepalive));
        server.extend(backend(
            b'E',
            b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0",
        ));
        let (client_out, mut server_in) = tokio::io::duplex(1024);
        let mut conn = connection(server, client_out);
        let mut decoder = PgOutputDecoder::new([("items".to_string(), "id".to_string())]);
        let mut txns = Vec::new();
        let mut keepalives = Vec::new();
        let err = loop {
            match conn.next_message() {
                Ok(Some(StreamMessage::XLogData { data, .. })) => txns.extend(decoder.feed(&data).unwrap()),
                Ok(Some(StreamMessage::Keepalive { wal_end, reply_requested })) => {
                    keepalives.push((wal_end, reply_requested));
                    conn.send_status(0x1_0000_0130, false).await.unwrap();
                }
                Ok(None) => conn.receive().await.unwrap(),
                Err(e) => break e,
            }
        };
        assert_eq!(txns.len(), 1);
        let txn = &txns[0];
        assert_eq!((txn.xid, txn.commit_lsn, txn.end_lsn), (901, 0x1_0000_0100, 0x1_0000_0130));
        assert_eq!(txn.changes[0].key, Scalar::Int(7));
        assert_eq!(txn.changes[0].row.as_ref().unwrap()[1].1, Scalar::Int(70));
        assert_eq!(keepalives, vec![(0x1_0000_0200, true)]);
        let AdapterError::Server { code, .. } = &err else { panic!("{err}") };
        assert_eq!(code, "57P01");
        // The answer to the keepalive: CopyData holding a 34-byte status update.
        let mut sent = [0u8; 39];
        tokio::io::AsyncReadExt::read_exact(&mut server_in, &mut sent).await.unwrap();
        assert_eq!(&sent[..5], &[b'd', 0, 0, 0, 38]);
        assert_eq!(sent[5], b'r');
        assert_eq!(&sent[6..14], &0x1_0000_0130u64.to_be_bytes());
        // After the last byte the connection reads as closed.
        let eof = conn.receive().await.unwrap_err();
        assert!(eof.to_string().contains("closed the connection"), "{eof}");
    }

    #[test]
    fn sasl_mechanism_lists_are_read_like_the_server_writes_them() {
        assert_eq!(
            sasl_mechanisms(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0"),
            ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]
        );
        assert!(sasl_mechanisms(b"\0").is_empty());
    }

    #[test]
    fn names_are_quoted_for_the_replication_grammar() {
        assert_eq!(quote_ident("isocert_run_1"), "\"isocert_run_1\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
