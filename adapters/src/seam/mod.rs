//! The database seam: what every database adapter implements so that the test client
//! (isocert-workload), `isocert run` and `isocert recover` work on it without knowing which
//! database it is. docs/ADAPTERS.md is the checklist for adding one.
//!
//! An adapter is a type implementing [`Database`] (one value per database URL), whose
//! [`Database::Session`] runs transactions on one connection and records the typed facts
//! recovery needs, whose [`Database::Capture`] consumes the database's change stream (or
//! version source) into a [`RawLog`] while the workload runs, and whose [`Database::recover`]
//! applies the database's recovery rule (isocert-recovery) to history + log.
//!
//! The test client's loop, per transaction attempt, is:
//!
//! 1. [`Session::begin`] at an [`IsolationLevel`] the database runs ([`Database::RUN_LEVELS`]), which returns the transaction's facts
//!    (the adapter's `TxnFacts`, serialised into the history's `meta`);
//! 2. [`Session::execute`] for each [`Step`]; each returns the [`RecordedOp`]s the
//!    database answered with their `OpFacts` (serialised into the op's `meta`); an error
//!    ends the attempt;
//! 3. [`Session::commit`], giving a [`CommitOutcome`];
//! 4. after an error: [`Session::note_error`] records it in the facts, then
//!    [`Session::rollback`] unless the connection is lost; [`DbError::is_retryable`] says
//!    whether to retry the plan as a new transaction, [`DbError::is_connection_lost`]
//!    whether to reconnect.
//!
//! Everything that depends on the database's SQL dialect, error codes and facts stays in
//! its adapter module; this module has none of it.

mod feed;
mod level;
mod no_server;
mod physical;
mod step;
mod url;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use isocert_history::{Dialect, History, Scalar};
/// The level names and the one error for an unknown name (a level, a database),
/// re-exported for the seam.
pub use isocert_history::{IsolationLevel, UnknownName};
/// The recovery types the seam's signatures use, re-exported for implementers.
pub use isocert_recovery::{CommittedTxn, LiveTicks, RawLog, Recovered, RecoveryError, RowMatcher};
use serde::Serialize;

use crate::AdapterError;

pub use crate::registry::{dispatch, DatabaseKind, DatabaseVisitor};
pub use feed::{FeedProgress, FeedSink, FeedTxn, TableIncarnation};
pub use level::{has_transaction_snapshot, parse_run_level, sql_level, unrunnable_level, SQL_RUN_LEVELS};
pub use no_server::NoThrowawayServer;
pub use physical::{AccessPath, PhysicalDesign, SecondaryIndex, TableLayout};
pub use step::{
    int_row, integer_table, row_key, sql_literal, ColumnType, IntOp, IntStep, RecordedOp, SetValue,
    StatementWrite, Step, TableSpec,
};
pub use url::{DatabaseUrl, UrlOption};

/// How a failed database request should be handled; each adapter decides it in one
/// function from its driver's error (SQLSTATE, MySQL error number, I/O error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The database rolled the transaction back and a new attempt may succeed
    /// (serialization failure, deadlock, lock wait timeout, write conflict).
    Retryable,
    /// The connection is gone (closed, I/O error, the server ended the session): the
    /// transaction did not commit unless the loss happened during COMMIT.
    ConnectionLost,
    /// Anything else: the run stops with this error.
    Fatal,
}

/// A failed database request, classified by its adapter.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct DbError {
    /// How to handle it.
    pub class: ErrorClass,
    /// The database's error code as text (SQLSTATE `40001`, MySQL `1213`), if the server sent one.
    pub code: Option<String>,
    /// What was being done (the statement, shortened, or `connecting to ...`).
    pub context: String,
    /// The driver's error.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl DbError {
    /// A classified error.
    pub fn new(
        class: ErrorClass,
        code: Option<String>,
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        DbError {
            class,
            code,
            context: isocert_history::quote_capped(&context.into()),
            source: source.into(),
        }
    }

    /// A fatal error for an answer the adapter did not expect from the database.
    pub fn unexpected(context: &str, message: impl Into<String>) -> Self {
        DbError::new(ErrorClass::Fatal, None, format!("unexpected result of {context}"), message.into())
    }

    /// Whether retrying the transaction may succeed (the transaction was rolled back).
    pub fn is_retryable(&self) -> bool {
        self.class == ErrorClass::Retryable
    }

    /// Whether the connection is gone.
    pub fn is_connection_lost(&self) -> bool {
        self.class == ErrorClass::ConnectionLost
    }

    /// The database's error code, if the server sent one.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// What a session records about the failure in its facts: the server's code,
    /// `connection` when the connection was lost without one, else `client`.
    pub fn fact(&self) -> String {
        match (self.code(), self.class) {
            (Some(code), _) => code.to_string(),
            (None, ErrorClass::ConnectionLost) => "connection".to_string(),
            (None, _) => "client".to_string(),
        }
    }
}

/// The error of an adapter that has no list append yet ([`Step::Append`], the `append`
/// workload): fatal, naming the database.
pub fn append_unsupported(database: &str) -> DbError {
    DbError::unexpected(
        "a list append",
        format!("the append workload is not supported on {database} yet (PostgreSQL and MariaDB run it)"),
    )
}

/// `url` safe to print: a password in its user part becomes `***`
/// (`postgres://u:***@h/db`), and so does the value of every `password=` parameter (in a
/// query string, `?password=...`, or a keyword connection string, `host=h password=...`).
/// Adapters use it in every message that names a URL.
/// A text without `://` is redacted as an authority too (`user:pass@host` becomes
/// `user:***@host`): a mistyped URL is printed in the error that refuses it.
pub fn redact_url(url: &str) -> String {
    let url = redact_password_parameters(url);
    let (prefix, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url.as_str()),
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split_once(':').map_or(user, |(n, _)| n);
            format!("{prefix}{name}:***@{host}{path}")
        }
        _ => url.clone(),
    }
}

/// Replaces the value after each `password=` (case-insensitive) up to `&`, `;` or white
/// space (a quoted keyword value up to its closing quote) with `***`.
fn redact_password_parameters(text: &str) -> String {
    const KEY: &str = "password=";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.to_ascii_lowercase().find(KEY) {
        out.push_str(&rest[..at + KEY.len()]);
        let value = &rest[at + KEY.len()..];
        let end = if let Some(quoted) = value.strip_prefix('\'') {
            quoted.find('\'').map_or(value.len(), |q| q + 2)
        } else {
            value.find(['&', ';', ' ', '\t', '\n']).unwrap_or(value.len())
        };
        out.push_str("***");
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

/// How a `COMMIT` ended.
#[derive(Debug)]
pub enum CommitOutcome {
    /// The database acknowledged the commit.
    Committed,
    /// The database refused to commit and rolled back; the plan may be retried
    /// (serialization failure detected at commit).
    AbortedRetryable(DbError),
    /// The connection broke while COMMIT was in flight: it may or may not have committed
    /// (the history records the attempt as `unknown`; recovery settles it from the log).
    Unknown(DbError),
    /// Any other failure: the attempt is recorded as aborted and the run stops.
    Failed(DbError),
}

impl CommitOutcome {
    /// How a COMMIT (or a statement just before it) that failed with `e` ends the
    /// attempt, by the error's class.
    pub fn failed_with(e: DbError) -> Self {
        match e.class {
            ErrorClass::Retryable => CommitOutcome::AbortedRetryable(e),
            ErrorClass::ConnectionLost => CommitOutcome::Unknown(e),
            ErrorClass::Fatal => CommitOutcome::Failed(e),
        }
    }
}

/// One connection of the test client, running one transaction at a time.
///
/// Facts are typed per adapter and serialised with serde into the history: `TxnFacts`
/// into the transaction's `meta`, `OpFacts` into the operation's `meta` (both must
/// serialise to a JSON object; an empty object is left out). Recovery reads them back
/// with serde, so their field names are the on-disk format: keep them, or version them.
pub trait Session: Send + 'static {
    /// What the session records per transaction (PostgreSQL: xid, snapshot, isolation).
    type TxnFacts: Serialize + Send + fmt::Debug;
    /// What the session records per operation (PostgreSQL: the row writers' xids).
    type OpFacts: Serialize + Send + fmt::Debug;

    /// The database's id of this connection (PostgreSQL backend pid, MySQL thread id),
    /// used by [`Database::kill_session`] for fault injection.
    fn server_id(&self) -> u64;

    /// Starts a transaction at `level` (an adapter may defer the statement to the first
    /// [`Session::execute`] to save a round trip) and returns its facts so far.
    fn begin(
        &mut self,
        level: IsolationLevel,
    ) -> impl Future<Output = Result<Self::TxnFacts, DbError>> + Send;

    /// Runs one step in the open transaction; returns the operations the database
    /// reported, in order, with their facts. May add to the transaction's facts (a
    /// snapshot read by the first statement).
    fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        facts: &mut Self::TxnFacts,
    ) -> impl Future<Output = Result<Vec<(RecordedOp, Self::OpFacts)>, DbError>> + Send;

    /// Runs SQL the test client does not record (a scenario's DDL, `SET`, a statement
    /// outside the recordable subset), inside the open transaction if there is one (sending
    /// a deferred begin first); its result is discarded.
    fn execute_sql(&mut self, sql: &str) -> impl Future<Output = Result<(), DbError>> + Send;

    /// Commits the open transaction (sending the deferred begin first if nothing ran),
    /// recording what the commit reveals (PostgreSQL: the xid) in `facts`.
    fn commit(&mut self, facts: &mut Self::TxnFacts) -> impl Future<Output = CommitOutcome> + Send;

    /// Ends a failed transaction. An error here means the connection is unusable.
    fn rollback(&mut self) -> impl Future<Output = Result<(), DbError>> + Send;

    /// Records in `facts` why the attempt failed or is unknown (PostgreSQL: `sqlstate`,
    /// `connection` when the connection was lost, `client` for a client-side failure).
    fn note_error(&self, facts: &mut Self::TxnFacts, error: &DbError);
}

/// Options for the change capture, from the command line.
#[derive(Clone, Debug)]
pub struct CaptureOptions {
    /// A name unique to this run, for server-side objects the capture creates (a slot).
    pub run_name: String,
    /// How to consume the stream, in the adapter's words (PostgreSQL: `stream` or
    /// `poll`); `None` for the adapter's default. An adapter refuses modes it lacks.
    pub mode: Option<String>,
    /// For polling modes: shortest time between two polls.
    pub poll_interval: Duration,
}

/// The database's change stream or version source, consumed while the workload runs.
///
/// Started after the table is set up and before the first workload transaction, so that
/// it sees exactly the history's transactions. It acknowledges to the database only what
/// it has recorded, resumes after a reconnect without losing or doubling a transaction
/// (the [`RawLog`] drops repeats by commit position), and removes what it created on the
/// server when finished or dropped.
pub trait ChangeCapture: Send + 'static {
    /// Waits until the capture is running (a consumer that cannot start is reported
    /// before the workload runs).
    fn wait_started(&mut self, timeout: Duration) -> impl Future<Output = Result<(), AdapterError>> + Send;

    /// Committed transactions recorded so far (for the progress bar).
    fn recorded(&self) -> usize;

    /// Waits until every transaction that committed before this call is recorded and
    /// returns the commits recorded since the previous call, in stream order (which may
    /// include later commits): what a live run feeds its [`LiveTicks`] while the workload
    /// runs. Default: this capture hands out nothing before [`ChangeCapture::finish`].
    fn take_committed(&mut self) -> impl Future<Output = Result<Vec<CommittedTxn>, AdapterError>> + Send {
        async {
            Err(AdapterError::NotSupportedHere {
                message: "this change capture gives its log only when the run is finished".into(),
            })
        }
    }
    /// Waits until everything committed so far is recorded, cleans up, and returns the log.
    /// `history` is the run's recorded history (`None` when the run failed before it was
    /// complete): a version source read per row after the run (TiDB's MVCC API) asks for
    /// the rows it names; a change stream ignores it.
    fn finish(self, history: Option<&History>) -> impl Future<Output = Result<RawLog, AdapterError>> + Send;
}

/// What [`Database::drop_stale`] dropped and what it left alone (with the reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaleObjects {
    /// The objects dropped, e.g. `replication slot isocert_run_1_2_3`.
    pub dropped: Vec<String>,
    /// The isocert-named objects left alone, each with why.
    pub left: Vec<String>,
}

/// A throwaway server started for one run or test, removed when shut down or dropped.
pub trait ThrowawayServer: Send + 'static {
    /// The URL to connect to it (scheme of its adapter).
    fn url(&self) -> String;

    /// Stops the server and removes its files.
    fn shutdown(self) -> impl Future<Output = Result<(), AdapterError>> + Send;
}

/// One database under test, reached through one URL (cheap to clone: each session task
/// holds a copy).
///
/// Required: connecting, preparing the workload table, starting the change capture,
/// recovery. Defaulted hooks: [`Database::checked_as`] (the checker level a level maps to).
pub trait Database: Sized + Clone + Send + Sync + 'static {
    /// One connection of the test client.
    type Session: Session;
    /// The change stream or version source.
    type Capture: ChangeCapture;
    /// The embedded throwaway server.
    type Server: ThrowawayServer;

    /// Which database this is.
    const KIND: DatabaseKind;

    /// The SQL dialect the database evaluates predicates in (the history's `dialect`, which
    /// the predicate oracle follows: PostgreSQL's strict types and C collation, or MySQL's
    /// case-insensitive collation and implicit conversions).
    const DIALECT: Dialect = Dialect::Postgres;

    /// Whether [`Database::recover`] needs the captured log (`raw-log.jsonl`). `false` for a
    /// database whose certificate follows from the facts in the history alone (Dgraph: its
    /// transactions' timestamps), so that `isocert recover` needs only the history.
    const NEEDS_LOG: bool = true;

    /// Whether the version source reports only a row's last change per transaction and the
    /// recovery rule therefore refuses a transaction whose predicate update or delete also
    /// changes the same rows by another statement (CockroachDB's changefeeds, the Emme
    /// paper's restriction). `true` makes the workload plan predicate writes without other
    /// writes in the same transaction.
    const ONE_CHANGE_PER_ROW: bool = false;

    /// Whether the adapter runs and records statements whose `SET` is an expression over the
    /// row they replace (`StatementWrite::ExprUpdate`: `UPDATE ... SET n = n + k`, an upsert's
    /// `DO UPDATE SET n = t.n + EXCLUDED.n`), which the `counter` workload issues. `false`
    /// makes `isocert hunt` leave that workload out of its sweep.
    const EXPRESSION_UPDATES: bool = false;

    /// The levels this database runs transactions at, a subset of [`SQL_RUN_LEVELS`] (what
    /// `run --isolation` accepts); its [`Session::begin`] refuses any other level with an
    /// error naming these. Default: all three.
    const RUN_LEVELS: &'static [IsolationLevel] = &SQL_RUN_LEVELS;

    /// The adapter for `url` (no connection is made yet). Fails on a URL it cannot use.
    fn from_url(url: &str) -> Result<Self, AdapterError>;

    /// Starts a throwaway server with extra server settings (`name=value`, passed to the
    /// server's configuration) and returns it with the adapter connected to it.
    fn start_server(
        settings: &[(String, String)],
    ) -> impl Future<Output = Result<(Self, Self::Server), AdapterError>> + Send;

    /// [`Database::start_server`] of major version `version` (`--server-version`; `None`:
    /// whichever the machine has). Default: a version is refused (an adapter whose
    /// throwaway server comes in one version only).
    fn start_server_version(
        version: Option<String>,
        settings: &[(String, String)],
    ) -> impl Future<Output = Result<(Self, Self::Server), AdapterError>> + Send {
        async move {
            match version {
                None => Self::start_server(settings).await,
                Some(v) => Err(AdapterError::NotSupportedHere {
                    message: format!(
                        "the throwaway {} comes in one version; --server-version {v} is for PostgreSQL",
                        Self::KIND.display_name()
                    ),
                }),
            }
        }
    }

    /// The server's version as it reports it (`PostgreSQL 18.4`, `MariaDB 10.11.6-MariaDB`), for
    /// `run.json` and the reports. Default: not known.
    fn server_version(&self) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }

    /// Whether the server runs `MERGE INTO table USING (VALUES ...) ON pk = key WHEN MATCHED
    /// THEN UPDATE SET n = t.n + s.n ...` recorded as an expression update
    /// (`StatementWrite::ExprUpdate`), which the `counter` workload then issues beside its
    /// other statements. Default: no (PostgreSQL says yes from release 15).
    fn has_merge(&self) -> impl Future<Output = bool> + Send {
        async { false }
    }

    /// Opens one test-client connection.
    fn connect(&self) -> impl Future<Output = Result<Self::Session, DbError>> + Send;

    /// Drops and recreates the workload's table (never any other object; `isocert run`
    /// calls it only after [`Database::table_exists`] said no or the user allowed it) and inserts
    /// `rows`; committed when this returns.
    fn prepare_table(
        &self,
        table: &TableSpec,
        rows: &[Vec<i64>],
    ) -> impl Future<Output = Result<(), DbError>> + Send;

    /// [`Database::prepare_table`] with a physical design (layout, secondary index, filler
    /// rows, which `rows` already holds) and returns notes on what of it the adapter did
    /// not apply. Default: a plain table, noting every part of a non-default design as
    /// ignored.
    fn prepare_designed_table(
        &self,
        table: &TableSpec,
        rows: &[Vec<i64>],
        design: &PhysicalDesign,
    ) -> impl Future<Output = Result<Vec<String>, DbError>> + Send {
        async move {
            self.prepare_table(table, rows).await?;
            let mut notes = Vec::new();
            if design.layout != TableLayout::Plain || design.index != SecondaryIndex::None {
                notes.push(format!(
                    "{} ignores the {} layout and the {} secondary index: the table is plain",
                    Self::KIND.display_name(),
                    design.layout,
                    design.index
                ));
            }
            Ok(notes)
        }
    }

    /// The statements a session runs once after connecting to push its planner to `path`
    /// (outside any transaction). `Err` with a note when the database has no such setting:
    /// the session then runs with the planner's own choice. Default: only
    /// [`AccessPath::Any`].
    fn access_path_settings(path: AccessPath) -> Result<Vec<String>, String> {
        match path {
            AccessPath::Any => Ok(Vec::new()),
            other => Err(format!(
                "{} has no planner setting for the {other} path: ignored",
                Self::KIND.display_name()
            )),
        }
    }

    /// The maintenance statements a session of its own loops over beside the workload
    /// (PostgreSQL: `VACUUM`, `ANALYZE`, `CHECKPOINT`, `REINDEX ... CONCURRENTLY`, `CREATE
    /// INDEX CONCURRENTLY`), each run outside a transaction, on `table` and its own
    /// indexes only. Default: none (no maintenance session).
    fn maintenance_statements(table: &TableSpec, design: &PhysicalDesign) -> Vec<String> {
        let _ = (table, design);
        Vec::new()
    }

    /// Whether the workload's table already exists. `isocert run` never drops a table it
    /// did not create: it refuses to run when this is true, unless the user allows it.
    fn table_exists(&self, table: &TableSpec) -> impl Future<Output = Result<bool, DbError>> + Send;

    /// Drops the workload's table (only ever called for a table this run created).
    fn drop_table(&self, table: &TableSpec) -> impl Future<Output = Result<(), DbError>> + Send;

    /// Finds the server-side objects of earlier runs whose isocert process is gone (killed
    /// by SIGKILL before it could clean up; see `guard::run_name`) and drops them; with
    /// `other_hosts`, also inactive ones made from other hosts. Never drops objects of a
    /// run still going. Default: nothing to clean (an adapter whose capture creates nothing
    /// on the server).
    fn drop_stale(
        &self,
        other_hosts: bool,
    ) -> impl Future<Output = Result<StaleObjects, AdapterError>> + Send {
        let _ = other_hosts;
        async { Ok(StaleObjects::default()) }
    }

    /// The table's rows, ordered by key (the history's initial versions), each value in
    /// its column type's canonical form ([`ColumnType::canonical`]). An adapter that
    /// records integer columns only refuses a table with other columns.
    fn read_table(&self, table: &TableSpec)
        -> impl Future<Output = Result<Vec<Vec<Scalar>>, DbError>> + Send;

    /// Ends the server session of connection `server_id` ([`Session::server_id`]), to test
    /// that lost connections and unknown commits are handled.
    fn kill_session(&self, server_id: u64) -> impl Future<Output = Result<(), DbError>> + Send;

    /// Whether connection `server_id` ([`Session::server_id`]) is waiting for a lock held
    /// by another transaction (scenarios move on to the next step when it is). Default:
    /// never reported, so a blocked step is only noticed by a timeout.
    fn is_blocked(&self, server_id: u64) -> impl Future<Output = Result<bool, DbError>> + Send {
        let _ = server_id;
        async { Ok(false) }
    }

    /// The database's incremental tick rule, for publishing each transaction with its
    /// start and commit ticks while the workload runs (`isocert run --emit`): fed closed
    /// groups of transactions with the stream's commits ([`ChangeCapture::take_committed`]),
    /// it gives the ticks [`Database::recover`] will give them. Default: none (the run
    /// publishes after recovery).
    fn live_ticks() -> Option<Box<dyn LiveTicks>> {
        None
    }
    /// Starts consuming the change stream for `table`.
    fn start_capture(
        &self,
        table: &TableSpec,
        options: &CaptureOptions,
    ) -> impl Future<Output = Result<Self::Capture, AdapterError>> + Send;

    /// Creates the durable change feed `name` over every table if it does not exist yet
    /// (PostgreSQL: a publication `FOR ALL TABLES` and a logical slot, both named `name`),
    /// and returns the position a new consumer starts from. It is never dropped by isocert
    /// (not by `isocert cleanup` either): `isocert serve` resumes it after every restart.
    /// Default: the database has no durable feed.
    fn open_feed(&self, name: &str) -> impl Future<Output = Result<u64, AdapterError>> + Send {
        let _ = name;
        async {
            Err(AdapterError::NotSupportedHere {
                message: format!(
                    "{} has no durable change feed for isocert serve yet",
                    Self::KIND.display_name()
                ),
            })
        }
    }

    /// Consumes feed `name` from position `resume` (the last one `sink` stored) into `sink`
    /// until `stop` turns true, reconnecting after lost connections, keeping `progress`
    /// up to date and answering its waiters promptly.
    fn run_feed<S: FeedSink>(
        &self,
        name: &str,
        resume: u64,
        sink: S,
        progress: std::sync::Arc<FeedProgress>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> impl Future<Output = Result<(), AdapterError>> + Send {
        let _ = (name, resume, sink, progress, stop);
        async {
            Err(AdapterError::NotSupportedHere {
                message: format!(
                    "{} has no durable change feed for isocert serve yet",
                    Self::KIND.display_name()
                ),
            })
        }
    }

    /// The database's position in its change stream now: every transaction that
    /// committed before this call commits before it (what a feed must cover before a
    /// certificate for a finished history can be given).
    fn stream_position(&self) -> impl Future<Output = Result<u64, AdapterError>> + Send {
        async {
            Err(AdapterError::NotSupportedHere {
                message: format!(
                    "{} has no durable change feed for isocert serve yet",
                    Self::KIND.display_name()
                ),
            })
        }
    }

    /// Adds to `h` a synthetic committed transaction for each logged transaction that no
    /// history transaction can be (a foreign writer: another client of the same tables, as
    /// `isocert serve` meets them), so that [`Database::recover`] places its versions;
    /// returns them. Default: none are recognised, and recovery refuses the log's unknown
    /// writers.
    fn add_foreign_writers(
        h: &mut History,
        log: &RawLog,
    ) -> Result<Vec<isocert_history::TxnId>, RecoveryError> {
        let _ = (h, log);
        Ok(Vec::new())
    }

    /// How many of `log`'s first transactions (commit order) are the history's initial
    /// load, in a change feed over whole tables (`isocert serve`): the table's setup and
    /// whatever else committed before the history began, decided by position (the
    /// database's transaction ids and snapshots), never by comparing values (issue 32).
    /// Default: 0, the whole log is in scope (an adapter without snapshot facts cannot
    /// place the history's start; its unknown writers are then refused).
    ///
    /// # Errors
    /// [`RecoveryError`] when the history's facts are malformed.
    fn initial_load(h: &History, log: &RawLog) -> Result<usize, RecoveryError> {
        let _ = (h, log);
        Ok(0)
    }

    /// Sets `h`'s initial versions to what its initial `load` ([`Database::initial_load`])
    /// left on the rows it names, whatever the history claims, and returns them as a
    /// certificate shows them (`None`: hidden), or `None` when the adapter has no rule, in
    /// which case the claims stand. Only values the history may see (its own, or all when
    /// `reveal`) are shown or compared with its claims. Default: no rule (the default
    /// [`Database::initial_load`] takes no load, so every logged writer stays in scope).
    ///
    /// # Errors
    /// [`RecoveryError`] when a claim the history may check is wrong, naming the row.
    fn settle_initial(
        h: &mut History,
        load: &[isocert_recovery::CommittedTxn],
        reveal: bool,
    ) -> Result<Option<Vec<isocert_recovery::InitialVersion>>, RecoveryError> {
        let _ = (h, load, reveal);
        Ok(None)
    }

    /// Facts about the rows [`Database::read_table`] is about to return, for the history's
    /// header `meta` (PostgreSQL: `initial_xids`, the writers of the initial versions, read
    /// **before** the rows, so that a writer committing in between is never taken for the
    /// history's own). Default: none.
    fn initial_facts(
        &self,
        table: &TableSpec,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, DbError>> + Send {
        let _ = table;
        async { Ok(None) }
    }

    /// `log` with the values of the transactions [`Database::add_foreign_writers`] would take
    /// for foreign hidden (`isocert serve` without a grant to reveal them), decided without
    /// comparing any value; `None` when there is nothing to hide. Default: `None` (no
    /// transaction is recognised as foreign, so recovery refuses them anyway).
    ///
    /// # Errors
    /// [`RecoveryError`] when telling foreign transactions from the history's would need
    /// their values.
    fn hide_foreign_values(h: &History, log: &RawLog) -> Result<Option<RawLog>, RecoveryError> {
        let _ = (h, log);
        Ok(None)
    }

    /// Reads a captured source for `isocert recover --source`. Default: a `raw-log.jsonl`
    /// ([`RawLog::read_jsonl`]); an adapter whose database has its own dump format (MongoDB's
    /// oplog or change events) reads that too.
    ///
    /// # Errors
    /// A [`isocert_recovery::RawLogError`] naming the bad line and field.
    fn read_source(input: &mut dyn std::io::BufRead) -> Result<RawLog, isocert_recovery::RawLogError> {
        RawLog::read_jsonl(input)
    }

    /// The recovery rule: history (with the facts the sessions recorded) + captured log
    /// -> certificate, with derived timestamps written into the history. `matcher` is the
    /// predicate oracle.
    fn recover(h: &mut History, log: &RawLog, matcher: RowMatcher<'_>) -> Result<Recovered, RecoveryError>;

    /// What the database documents for its statements at `level`, beyond Adya's definition
    /// (docs/CHECKING.md, "Statement-level promises"): `isocert run` writes it into the
    /// history's header, and the checker checks it. Declared here, beside the adapter, so
    /// that no checker names a database. Default: nothing beyond the level.
    fn statement_promises(&self, level: IsolationLevel) -> Option<isocert_history::Promises> {
        let _ = level;
        None
    }

    /// The level a history run at `level` is checked against by default. Defaults to the
    /// level itself, with repeatable read checked as snapshot isolation. A method, since what
    /// a level means can depend on how the database was reached (TiDB's `txn_mode`).
    fn checked_as(&self, level: IsolationLevel) -> IsolationLevel {
        match level {
            IsolationLevel::RepeatableRead => IsolationLevel::SnapshotIsolation,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_never_printed() {
        assert_eq!(redact_url("postgres://u:s3cret@h:5432/db?x=1"), "postgres://u:***@h:5432/db?x=1");
        assert_eq!(redact_url("mysql://root:p@ss@127.0.0.1/isocert"), "mysql://root:***@127.0.0.1/isocert");
        assert_eq!(redact_url("user:Pass@host/x"), "user:***@host/x");
        assert_eq!(redact_url("htp://user:Pass@127.0.0.1:99999/"), "htp://user:***@127.0.0.1:99999/");
        assert_eq!(
            redact_url("postgres://u@h/db?password=s3cret&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("host=h user=u password=s3cret dbname=d"),
            "host=h user=u password=*** dbname=d"
        );
        assert_eq!(redact_url("host=h PASSWORD='a b' dbname=d"), "host=h PASSWORD=*** dbname=d");
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5432/postgres"),
            "postgres://postgres@127.0.0.1:5432/postgres"
        );
        assert_eq!(redact_url("host=h password=x"), "host=h password=***");
    }
}
