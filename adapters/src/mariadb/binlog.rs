//! The change capture: MariaDB's row-based binary log, read as a replica would
//! (`COM_REGISTER_SLAVE` + `COM_BINLOG_DUMP` through mysql_async), from the position where
//! the run started. Each transaction's GTID event starts it, its table-map and rows events
//! carry the row images (`binlog_row_image=FULL`), its XID event commits it.
//!
//! A dropped dump connection (the server restarted, `KILL` of the dump thread) is reopened
//! from the end of the last recorded transaction, so nothing is lost or doubled (the
//! [`RawLog`] also drops repeats by position). The capture holds nothing on the server:
//! there is no slot to clean up.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use isocert_history::{History, Scalar};
use isocert_recovery::{binlog_key, gtid_seq, CommittedTxn, RawLog, RowChange};
use mysql_async::binlog::events::{Event, EventData};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Value};
use tokio::sync::watch;

use super::client::connect;
use crate::seam::{redact_url, ChangeCapture, TableSpec};
use crate::AdapterError;

/// MariaDB's GTID event (it starts every transaction in the binary log).
const MARIADB_GTID_EVENT: u8 = 162;
/// The GTID event's flag for a statement outside a transaction (DDL): no XID follows.
const GTID_STANDALONE: u8 = 1;
/// How many times a lost dump connection is reopened before the capture gives up.
const MAX_RECONNECTS: u32 = 20;

/// Where the capture is in the binary log.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LogPosition {
    file: String,
    offset: u64,
}

/// A transaction being read: its GTID sequence number and row changes so far.
#[derive(Debug, Default)]
struct Pending {
    seq: u64,
    standalone: bool,
    changes: Vec<RowChange>,
}

/// What the capture task shares with its handle: the log so far (a live run takes its
/// commits as they come, [`ChangeCapture::take_committed`]).
#[derive(Debug, Default)]
struct Shared {
    log: Mutex<RawLog>,
}

/// The binary-log change capture of one run (see the module doc).
#[derive(Debug)]
pub struct BinlogCapture {
    url: String,
    shared: Arc<Shared>,
    started: watch::Receiver<Option<Result<(), String>>>,
    stop: watch::Sender<Option<u64>>,
    task: tokio::task::JoinHandle<Result<RawLog, AdapterError>>,
    /// The dump connection's thread id, for fault injection (`KILL`).
    dump_thread: watch::Receiver<Option<u32>>,
    /// The GTID sequence number of the last transaction the reader has read.
    read_seq: watch::Receiver<u64>,
    /// The connection [`ChangeCapture::take_committed`] reads the log's end on, kept: a
    /// live run asks at every cut.
    position_conn: Option<Conn>,
    /// How many of the log's transactions [`ChangeCapture::take_committed`] handed out.
    taken: usize,
}

fn mysql_error(context: impl Into<String>, source: mysql_async::Error) -> AdapterError {
    AdapterError::Mysql { context: context.into(), source }
}

/// Checks the server writes a row-based binary log with full row images and returns its
/// current end (where the capture starts).
async fn current_position(conn: &mut Conn) -> Result<LogPosition, AdapterError> {
    let sql = "SELECT @@log_bin, @@binlog_format, @@binlog_row_image";
    let settings: Option<(i64, String, String)> =
        conn.query_first(sql).await.map_err(|e| mysql_error(sql, e))?;
    match settings {
        Some((1, format, image))
            if format.eq_ignore_ascii_case("ROW") && image.eq_ignore_ascii_case("FULL") => {}
        Some((log_bin, format, image)) => {
            return Err(AdapterError::Protocol {
                message: format!(
                "certificate recovery reads MariaDB's binary log with full row images, but this server has \
                     log_bin={log_bin}, binlog_format={format}, binlog_row_image={image}: start it with \
                     --log-bin --binlog-format=ROW --binlog-row-image=FULL"
            ),
            })
        }
        None => return Err(AdapterError::Protocol { message: format!("{sql} returned no row") }),
    }
    let sql = "SHOW MASTER STATUS";
    let row: Option<mysql_async::Row> = conn.query_first(sql).await.map_err(|e| {
        mysql_error(
            format!("{sql} (the capture's user needs the BINLOG MONITOR or REPLICATION CLIENT privilege)"),
            e,
        )
    })?;
    let row =
        row.ok_or_else(|| AdapterError::Protocol { message: "SHOW MASTER STATUS returned no row".into() })?;
    let file: String =
        row.get(0).ok_or_else(|| AdapterError::Protocol { message: "no binary log file".into() })?;
    let offset: u64 =
        row.get(1).ok_or_else(|| AdapterError::Protocol { message: "no binary log position".into() })?;
    Ok(LogPosition { file, offset })
}

impl BinlogCapture {
    /// Starts reading the binary log of the server at `url` from its current end, keeping
    /// the changes of `table` in database `database`. `replica_id` is the server id the
    /// capture registers with (unique among the server's replicas).
    ///
    /// # Errors
    /// When the server has no row-based binary log with full images, or the user lacks the
    /// privileges to read it.
    pub async fn start(
        url: &str,
        database: &str,
        table: &TableSpec,
        replica_id: u32,
    ) -> Result<Self, AdapterError> {
        let mut conn = connect(url).await.map_err(AdapterError::from)?;
        let from = current_position(&mut conn).await?;
        // Everything logged so far is before `from`: finishing must not wait for it (a run
        // that commits nothing would otherwise wait for the setup's last GTID forever).
        let sql = "SELECT @@gtid_binlog_pos";
        let logged: Option<Option<String>> = conn.query_first(sql).await.map_err(|e| mysql_error(sql, e))?;
        // Row images list the columns in the table's order, which need not be the spec's
        // (key first): the position of each of the spec's columns.
        let sql = format!(
            "SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' \
             AND TABLE_NAME = '{}' ORDER BY ORDINAL_POSITION",
            database.replace('\'', "''"),
            table.name.replace('\'', "''")
        );
        let physical: Vec<String> = conn.query(&sql).await.map_err(|e| mysql_error(sql.as_str(), e))?;
        let _ = conn.disconnect().await;
        let positions = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| physical.iter().position(|p| p == c).unwrap_or(i))
            .collect();
        let last_seq = logged.flatten().as_deref().and_then(gtid_seq).unwrap_or(0);
        let shared = Arc::new(Shared::default());
        let (read_seq_tx, read_seq) = watch::channel(last_seq);
        let (started_tx, started) = watch::channel(None);
        let (stop, stop_rx) = watch::channel(None);
        let (dump_tx, dump_thread) = watch::channel(None);
        let reader = Reader {
            url: url.to_string(),
            database: database.to_string(),
            table: *table,
            positions,
            replica_id,
            shared: shared.clone(),
            position: from,
            last_seq,
            read_seq: read_seq_tx,
        };
        let task = tokio::spawn(reader.run(started_tx, stop_rx, dump_tx));
        Ok(BinlogCapture {
            url: url.to_string(),
            shared,
            started,
            stop,
            task,
            dump_thread,
            read_seq,
            position_conn: None,
            taken: 0,
        })
    }

    /// The thread id of the current dump connection, once connected.
    pub fn dump_thread(&self) -> Option<u32> {
        *self.dump_thread.borrow()
    }
}

impl ChangeCapture for BinlogCapture {
    async fn wait_started(&mut self, timeout: Duration) -> Result<(), AdapterError> {
        let wait = self.started.wait_for(Option::is_some);
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(state)) => match state.as_ref() {
                Some(Ok(())) => Ok(()),
                Some(Err(message)) => Err(AdapterError::Protocol { message: message.clone() }),
                None => unreachable!("wait_for returns a started state"),
            },
            Ok(Err(_)) => Err(AdapterError::Protocol {
                message: "the binary log reader ended before it started".into(),
            }),
            Err(_) => Err(AdapterError::Protocol {
                message: format!("the binary log reader did not start within {}s", timeout.as_secs()),
            }),
        }
    }

    fn recorded(&self) -> usize {
        self.shared.log.lock().expect("log lock").len()
    }

    /// Reads the binary log's end (`@@gtid_binlog_pos`, on a connection kept for it), as
    /// [`ChangeCapture::finish`] does, waits until the reader has passed it, and hands out
    /// the transactions recorded since the last call.
    async fn take_committed(&mut self) -> Result<Vec<CommittedTxn>, AdapterError> {
        let conn = match self.position_conn.as_mut() {
            Some(conn) => conn,
            None => self.position_conn.insert(connect(&self.url).await.map_err(AdapterError::from)?),
        };
        let target = match log_end(conn).await {
            Ok(target) => target,
            Err(e) => {
                // Reconnect on the next call.
                self.position_conn = None;
                return Err(e);
            }
        };
        self.read_seq.wait_for(|&seq| seq >= target).await.map_err(|_| AdapterError::Protocol {
            message: "the binary log reader ended before it reached the log's end".into(),
        })?;
        let log = self.shared.log.lock().expect("log lock");
        let taken = log.txns().get(self.taken..).unwrap_or_default().to_vec();
        self.taken += taken.len();
        Ok(taken)
    }

    async fn finish(self, _history: Option<&History>) -> Result<RawLog, AdapterError> {
        if let Some(conn) = self.position_conn {
            let _ = conn.disconnect().await;
        }
        let mut conn = connect(&self.url).await.map_err(AdapterError::from)?;
        let target = log_end(&mut conn).await;
        let _ = conn.disconnect().await;
        let target = target?;
        let _ = self.stop.send(Some(target));
        self.task
            .await
            .map_err(|e| AdapterError::Protocol { message: format!("the binary log reader failed: {e}") })?
    }
}

/// The GTID sequence number of the binary log's last transaction (`@@gtid_binlog_pos`; 0
/// for an empty log).
async fn log_end(conn: &mut Conn) -> Result<u64, AdapterError> {
    let sql = "SELECT @@gtid_binlog_pos";
    let end: Option<Option<String>> = conn.query_first(sql).await.map_err(|e| mysql_error(sql, e))?;
    Ok(end.flatten().as_deref().and_then(gtid_seq).unwrap_or(0))
}

/// The capture task's state.
struct Reader {
    url: String,
    database: String,
    table: TableSpec,
    /// The position in a row image of each of the table's columns.
    positions: Vec<usize>,
    replica_id: u32,
    shared: Arc<Shared>,
    /// Just past the last recorded transaction (where a reconnect resumes).
    position: LogPosition,
    /// The GTID sequence number of the last transaction read (recorded or not).
    last_seq: u64,
    /// `last_seq`, for the handle.
    read_seq: watch::Sender<u64>,
}

impl Reader {
    async fn run(
        mut self,
        started: watch::Sender<Option<Result<(), String>>>,
        mut stop: watch::Receiver<Option<u64>>,
        dump_thread: watch::Sender<Option<u32>>,
    ) -> Result<RawLog, AdapterError> {
        let mut reconnects = 0;
        loop {
            match self.read_until_stopped(&started, &mut stop, &dump_thread).await {
                Ok(()) => return Ok(std::mem::take(&mut *self.shared.log.lock().expect("log lock"))),
                Err(e) if reconnects < MAX_RECONNECTS && started.borrow().is_some() => {
                    reconnects += 1;
                    tracing::warn!(
                        "binary log reader: {e}; reconnecting from {}:{}",
                        self.position.file,
                        self.position.offset
                    );
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(reconnects))).await;
                }
                Err(e) => {
                    let _ = started.send(Some(Err(e.to_string())));
                    return Err(e);
                }
            }
        }
    }

    /// One dump connection, from `self.position`, until the stop target is reached.
    async fn read_until_stopped(
        &mut self,
        started: &watch::Sender<Option<Result<(), String>>>,
        stop: &mut watch::Receiver<Option<u64>>,
        dump_thread: &watch::Sender<Option<u32>>,
    ) -> Result<(), AdapterError> {
        let mut conn = connect(&self.url).await.map_err(AdapterError::from)?;
        // Ask for MariaDB's own events (GTID events), as a MariaDB replica does.
        let sql = "SET @mariadb_slave_capability = 4";
        conn.query_drop(sql).await.map_err(|e| mysql_error(sql, e))?;
        let _ = dump_thread.send(Some(conn.id()));
        let file = self.position.file.clone();
        let request = BinlogStreamRequest::new(self.replica_id)
            .with_filename(file.as_bytes())
            .with_pos(self.position.offset);
        let mut stream = conn.get_binlog_stream(request).await.map_err(|e| {
            mysql_error(
                format!(
                    "reading the binary log of {} (the user needs REPLICATION SLAVE)",
                    redact_url(&self.url)
                ),
                e,
            )
        })?;
        let mut current_file = self.position.file.clone();
        let mut pending: Option<Pending> = None;
        loop {
            if stop.borrow().is_some_and(|target| self.last_seq >= target) {
                let _ = stream.close().await;
                return Ok(());
            }
            let event = tokio::select! {
                event = stream.next() => event,
                _ = stop.changed() => continue,
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(e)) => return Err(mysql_error("reading the binary log", e)),
                None => return Err(AdapterError::Protocol { message: "the binary log stream ended".into() }),
            };
            if started.borrow().is_none() {
                let _ = started.send(Some(Ok(())));
            }
            let header = event.header();
            if header.event_type_raw() == MARIADB_GTID_EVENT {
                pending = Some(parse_gtid(&event)?);
                continue;
            }
            match event
                .read_data()
                .map_err(|e| AdapterError::Protocol { message: format!("a binary log event: {e}") })?
            {
                // The artificial rotate event that opens every dump (log position 0) names the
                // file asked for, followed by checksum bytes the parser cannot strip yet (it
                // comes before the format description); only real rotations change the file.
                Some(EventData::RotateEvent(rotate)) if header.log_pos() != 0 => {
                    current_file = rotate.name().into_owned();
                }
                Some(EventData::RowsEvent(rows)) => {
                    let Some(tme) = stream.get_tme(rows.table_id()) else { continue };
                    if tme.database_name() != self.database.as_str() || tme.table_name() != self.table.name {
                        continue;
                    }
                    let Some(p) = pending.as_mut() else { continue };
                    for pair in rows.rows(tme) {
                        let (before, after) = pair
                            .map_err(|e| AdapterError::Protocol { message: format!("a rows event: {e}") })?;
                        let image = after.as_ref().or(before.as_ref());
                        let Some(image) = image else { continue };
                        let key = column(image, self.positions[0])?;
                        let row = match &after {
                            Some(after) => Some(
                                self.table
                                    .columns
                                    .iter()
                                    .enumerate()
                                    .map(|(i, c)| {
                                        Ok((
                                            Arc::from(*c),
                                            typed_column(after, self.positions[i], i, &self.table)?,
                                        ))
                                    })
                                    .collect::<Result<Vec<_>, AdapterError>>()?,
                            ),
                            None => None,
                        };
                        p.changes.push(RowChange {
                            table: Arc::from(self.table.name),
                            key: Scalar::Int(key),
                            row,
                        });
                    }
                }
                Some(EventData::XidEvent(_)) => {
                    self.commit(pending.take(), &current_file, header.log_pos(), header.timestamp())?;
                }
                Some(EventData::QueryEvent(q)) if q.query().trim().eq_ignore_ascii_case("COMMIT") => {
                    self.commit(pending.take(), &current_file, header.log_pos(), header.timestamp())?;
                }
                Some(EventData::QueryEvent(_)) if pending.as_ref().is_some_and(|p| p.standalone) => {
                    // A statement outside a transaction (DDL): nothing of the workload's rows.
                    if let Some(p) = pending.take() {
                        self.last_seq = self.last_seq.max(p.seq);
                        self.read_seq.send_replace(self.last_seq);
                    }
                    self.position =
                        LogPosition { file: current_file.clone(), offset: u64::from(header.log_pos()) };
                }
                _ => {}
            }
        }
    }

    /// Records a committed transaction that changed the table, and moves the resume point.
    /// A position it cannot order is an error, never a silently dropped transaction.
    fn commit(
        &mut self,
        pending: Option<Pending>,
        file: &str,
        end: u32,
        time: u32,
    ) -> Result<(), AdapterError> {
        let Some(p) = pending else { return Ok(()) };
        let seq = p.seq;
        self.position = LogPosition { file: file.to_string(), offset: u64::from(end) };
        self.record(p, file, end, time)?;
        // Told only once recorded: a live run waiting for `seq` then finds it in the log.
        self.last_seq = self.last_seq.max(seq);
        self.read_seq.send_replace(self.last_seq);
        Ok(())
    }

    /// Records a transaction's changes of the table, if it has any.
    fn record(&mut self, p: Pending, file: &str, end: u32, time: u32) -> Result<(), AdapterError> {
        if p.changes.is_empty() {
            return Ok(());
        }
        let key = binlog_key(file, u64::from(end)).ok_or_else(|| AdapterError::Protocol {
            message: format!(
                "binary log file {:?} has no sequence number after its last '.', so transaction {} cannot be ordered",
                isocert_history::quote_capped(file),
                p.seq
            ),
        })?;
        self.shared.log.lock().expect("log lock").push(CommittedTxn {
            xid: p.seq,
            commit_lsn: key,
            end_lsn: key,
            commit_time: i64::from(time),
            commit_ts: None,
            changes: p.changes,
        });
        Ok(())
    }
}

/// MariaDB's GTID event body: sequence number (8 bytes), domain id (4), flags (1), ...
fn parse_gtid(event: &Event) -> Result<Pending, AdapterError> {
    let data = event.data();
    if data.len() < 13 {
        return Err(AdapterError::Protocol { message: format!("a GTID event of {} bytes", data.len()) });
    }
    let seq = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
    let flags = data[12];
    Ok(Pending { seq, standalone: flags & GTID_STANDALONE != 0, changes: Vec::new() })
}

/// Column `at` of a row image as a scalar of the type of `table`'s column `i`.
fn typed_column(
    row: &mysql_async::binlog::row::BinlogRow,
    at: usize,
    i: usize,
    table: &TableSpec,
) -> Result<Scalar, AdapterError> {
    let message = |m: String| AdapterError::Protocol {
        message: format!("column {} of a row image: {m}", table.columns.get(i).copied().unwrap_or("?")),
    };
    match row.as_ref(at) {
        Some(BinlogValue::Value(v)) => crate::mysql_sql::scalar_of(table.column_type(i), v).map_err(message),
        other => Err(message(format!("{other:?}, not a value"))),
    }
}

/// Column `i` of a row image as an integer (the key).
fn column(row: &mysql_async::binlog::row::BinlogRow, i: usize) -> Result<i64, AdapterError> {
    match row.as_ref(i) {
        Some(BinlogValue::Value(Value::Int(v))) => Ok(*v),
        Some(BinlogValue::Value(Value::UInt(v))) => i64::try_from(*v)
            .map_err(|_| AdapterError::Protocol { message: format!("column {i}: {v} does not fit 64 bits") }),
        other => Err(AdapterError::Protocol {
            message: format!("column {i} of a row image: {other:?}, not an integer"),
        }),
    }
}
