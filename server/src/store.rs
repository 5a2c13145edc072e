//! The durable version store: every committed transaction the change feed delivered, its
//! row changes by table incarnation, and the position the feed resumes from, in SQLite
//! (`sqlite://PATH`, the embedded default) or PostgreSQL (`postgres://...`, a store shared
//! by several servers) through sqlx's `Any` driver.
//!
//! A batch and the resume position are written in one database transaction, so after a
//! crash the store holds exactly the batches whose position it also holds, and the feed
//! resumes right after them; a transaction delivered again is dropped by its commit
//! position (primary key). Garbage collection deletes whole transactions older than the
//! retention window and marks their tables, so that a certificate which would need a
//! collected version is refused rather than given incomplete.

use std::time::{SystemTime, UNIX_EPOCH};

use isocert_adapters::{FeedTxn, TableIncarnation};
use isocert_recovery::{CommittedTxn, RawLog};
use serde_json::{json, Value as Json};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL is neither `sqlite://` nor `postgres://`.
    #[error("unsupported store URL scheme (use sqlite://PATH or postgres://...)")]
    Scheme,
    /// The database behind the store failed.
    #[error("version store: {0}")]
    Db(#[from] sqlx::Error),
    /// A stored transaction could not be read back.
    #[error("version store: a stored transaction is malformed: {0}")]
    Corrupt(String),
}

/// Sizes and bounds of what the store holds, for `/v1/status` and `/metrics`.
#[derive(Clone, Debug, Default, serde::Serialize, utoipa::ToSchema)]
pub struct StoreStats {
    /// Committed transactions stored.
    pub transactions: i64,
    /// Row changes stored.
    pub changes: i64,
    /// Tables (incarnations) seen.
    pub tables: i64,
    /// Unix time (seconds) the oldest stored transaction was stored, if any.
    pub oldest_stored_at: Option<i64>,
    /// The position the feed resumes from.
    pub resume_position: i64,
    /// Bytes the store's tables take on disk (SQLite: the database file's pages;
    /// PostgreSQL: the `isocert_*` tables with their indexes).
    pub bytes: i64,
}

/// A table incarnation as stored, with what makes certificates over it impossible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTable {
    /// The incarnation.
    pub table: TableIncarnation,
    /// The commit position of its first stored change.
    pub first_lsn: u64,
    /// It was truncated (no row-level versions exist past that).
    pub truncated: bool,
    /// Some of its versions were garbage-collected.
    pub collected: bool,
}

/// The store (cheap to clone: a connection pool).
#[derive(Clone, Debug)]
pub struct VersionStore {
    pool: AnyPool,
    /// Whether the store is SQLite (else PostgreSQL): only the size query differs.
    sqlite: bool,
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS isocert_feed_state (id BIGINT PRIMARY KEY, position BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS isocert_txns (commit_lsn BIGINT PRIMARY KEY, end_lsn BIGINT NOT NULL, \
     xid BIGINT NOT NULL, commit_time BIGINT NOT NULL, stored_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS isocert_changes (commit_lsn BIGINT NOT NULL, seq BIGINT NOT NULL, \
     relation BIGINT NOT NULL, change TEXT NOT NULL, PRIMARY KEY (commit_lsn, seq))",
    "CREATE INDEX IF NOT EXISTS isocert_changes_relation ON isocert_changes (relation, commit_lsn)",
    "CREATE TABLE IF NOT EXISTS isocert_tables (relation BIGINT PRIMARY KEY, schema_name TEXT NOT NULL, \
     table_name TEXT NOT NULL, first_lsn BIGINT NOT NULL, truncated BIGINT NOT NULL, collected BIGINT NOT NULL)",
];

impl VersionStore {
    /// Opens (creating if needed) the store at `url`: `sqlite://PATH` (the file is created)
    /// or `postgres://...` (tables prefixed `isocert_` are created in that database).
    ///
    /// # Errors
    /// [`StoreError::Scheme`] for another URL, [`StoreError::Db`] when it cannot be opened.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, max) = if let Some(path) = url.strip_prefix("sqlite://") {
            create_private(std::path::Path::new(path))?;
            // One writer at a time is SQLite's way; WAL mode lets readers run beside it.
            (format!("sqlite://{path}?mode=rwc"), 4)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (url.to_string(), 8)
        } else {
            return Err(StoreError::Scheme);
        };
        // A store that is down fails a batch quickly; the feed restarts from the stored position.
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(&url)
            .await?;
        let sqlite = url.starts_with("sqlite://");
        if sqlite {
            sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await?;
            sqlx::query("PRAGMA synchronous = FULL").execute(&pool).await?;
            for statement in SCHEMA {
                sqlx::query(statement).execute(&pool).await?;
            }
        } else {
            create_schema_locked(&pool).await?;
        }
        Ok(VersionStore { pool, sqlite })
    }

    /// The position the feed resumes from, if anything was ever stored.
    ///
    /// # Errors
    /// The store's.
    pub async fn resume_position(&self) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query("SELECT position FROM isocert_feed_state WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u64))
    }

    /// Stores a batch and the resume position in one transaction; a transaction already
    /// stored (same commit position) is skipped.
    ///
    /// # Errors
    /// The store's; nothing of the batch is stored then.
    pub async fn store(&self, txns: &[FeedTxn], resume: u64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let stored_at = now_secs();
        for feed in txns {
            let t = &feed.txn;
            let inserted = sqlx::query(
                "INSERT INTO isocert_txns (commit_lsn, end_lsn, xid, commit_time, stored_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (commit_lsn) DO NOTHING",
            )
            .bind(t.commit_lsn as i64)
            .bind(t.end_lsn as i64)
            .bind(t.xid as i64)
            .bind(t.commit_time)
            .bind(stored_at)
            .execute(&mut *tx)
            .await?;
            if inserted.rows_affected() == 0 {
                continue;
            }
            for (seq, (change, table)) in t.changes.iter().zip(&feed.tables).enumerate() {
                let row = change.row.as_ref().map(|r| {
                    r.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect::<serde_json::Map<_, _>>()
                });
                let text =
                    json!({"table": &*change.table, "key": change.key.to_json(), "row": row}).to_string();
                sqlx::query(
                    "INSERT INTO isocert_changes (commit_lsn, seq, relation, change) VALUES ($1, $2, $3, $4)",
                )
                .bind(t.commit_lsn as i64)
                .bind(seq as i64)
                .bind(table.id as i64)
                .bind(text)
                .execute(&mut *tx)
                .await?;
                note_table(&mut tx, table, t.commit_lsn).await?;
            }
            for table in &feed.truncated {
                note_table(&mut tx, table, t.commit_lsn).await?;
                sqlx::query("UPDATE isocert_tables SET truncated = 1 WHERE relation = $1")
                    .bind(table.id as i64)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        // Never backwards: a replica that lost the lead may still finish a batch after its
        // successor stored a later one.
        sqlx::query(
            "INSERT INTO isocert_feed_state (id, position) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET position = CASE WHEN excluded.position > isocert_feed_state.position \
             THEN excluded.position ELSE isocert_feed_state.position END",
        )
        .bind(resume as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The stored incarnations of `schema.table`, newest first.
    ///
    /// # Errors
    /// The store's.
    pub async fn incarnations(&self, schema: &str, table: &str) -> Result<Vec<StoredTable>, StoreError> {
        let rows = sqlx::query(
            "SELECT relation, schema_name, table_name, first_lsn, truncated, collected FROM isocert_tables \
             WHERE schema_name = $1 AND table_name = $2 ORDER BY first_lsn DESC",
        )
        .bind(schema)
        .bind(table)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(stored_table).collect())
    }

    /// Every stored table incarnation (for a tenant's `/v1/status`, filtered by its grants).
    ///
    /// # Errors
    /// The store's.
    pub async fn tables(&self) -> Result<Vec<StoredTable>, StoreError> {
        let rows = sqlx::query(
            "SELECT relation, schema_name, table_name, first_lsn, truncated, collected FROM isocert_tables \
             ORDER BY schema_name, table_name, first_lsn DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(stored_table).collect())
    }

    /// Per table incarnation of `relations`: its stored changes, the transactions that made
    /// them, and when the oldest of those was stored.
    ///
    /// # Errors
    /// The store's.
    pub async fn table_counts(&self, relations: &[u64]) -> Result<Vec<TableCounts>, StoreError> {
        if relations.is_empty() {
            return Ok(Vec::new());
        }
        let list = relations.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        let rows = sqlx::query(&format!(
            "SELECT c.relation, count(*), count(DISTINCT c.commit_lsn), min(t.stored_at) FROM isocert_changes c \
             JOIN isocert_txns t ON t.commit_lsn = c.commit_lsn WHERE c.relation IN ({list}) GROUP BY c.relation"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| TableCounts {
                relation: r.get::<i64, _>(0) as u64,
                changes: r.get::<i64, _>(1),
                transactions: r.get::<i64, _>(2),
                oldest_stored_at: r.try_get::<Option<i64>, _>(3).ok().flatten(),
            })
            .collect())
    }

    /// The transactions (commit position, database id) that changed table incarnation
    /// `relation`, in commit order, without their changes: enough to tell whether a
    /// history's transactions are among them.
    ///
    /// # Errors
    /// The store's.
    pub async fn writers_of(&self, relation: u64) -> Result<Vec<(u64, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT t.commit_lsn, t.xid FROM isocert_changes c JOIN isocert_txns t \
             ON t.commit_lsn = c.commit_lsn WHERE c.relation = $1 ORDER BY t.commit_lsn",
        )
        .bind(relation as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| (r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64)).collect())
    }

    /// The commit position of the last change stored for `relations`.
    ///
    /// # Errors
    /// The store's.
    pub async fn last_change(&self, relations: &[u64]) -> Result<Option<u64>, StoreError> {
        if relations.is_empty() {
            return Ok(None);
        }
        let list = relations.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        let row =
            sqlx::query(&format!("SELECT max(commit_lsn) FROM isocert_changes WHERE relation IN ({list})"))
                .fetch_one(&self.pool)
                .await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.map(|p| p as u64))
    }

    /// Whether this store can be shared by several servers (PostgreSQL), so that they must
    /// elect the one that consumes the change feed.
    pub fn is_shared(&self) -> bool {
        !self.sqlite
    }

    /// Tries to become the leader of feed `feed` among the servers sharing this store: a
    /// PostgreSQL session-level advisory lock, held by a connection of its own until the
    /// returned [`Leadership`] is dropped or that connection dies (a `kill -9` ends the
    /// session, and so frees the lock at once). `None` when another server holds it. A
    /// SQLite store is one server's: always granted.
    ///
    /// # Errors
    /// The store's.
    pub async fn try_lead(&self, feed: &str) -> Result<Option<Leadership>, StoreError> {
        if self.sqlite {
            return Ok(Some(Leadership { connection: None }));
        }
        let mut connection = self.pool.acquire().await?.detach();
        let won: bool = sqlx::query("SELECT pg_try_advisory_lock($1)")
            .bind(leader_lock_key(feed))
            .fetch_one(&mut connection)
            .await?
            .get(0);
        if won {
            Ok(Some(Leadership { connection: Some(connection) }))
        } else {
            let _ = sqlx::Connection::close(connection).await;
            Ok(None)
        }
    }

    /// The schemas in which a table named `table` was seen.
    ///
    /// # Errors
    /// The store's.
    pub async fn schemas_of(&self, table: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT schema_name FROM isocert_tables WHERE table_name = $1")
            .bind(table)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }

    /// The raw log of the transactions that changed the given table incarnations, each
    /// with only its changes to them, in commit order.
    ///
    /// # Errors
    /// The store's, or [`StoreError::Corrupt`].
    pub async fn log_for(&self, relations: &[u64]) -> Result<RawLog, StoreError> {
        let mut log = RawLog::new();
        self.extend_log(&mut log, relations, None).await?;
        Ok(log)
    }

    /// Appends to `log` the transactions that changed the given table incarnations after
    /// commit position `after` (all of them when `None`), each with only its changes to
    /// them, in commit order.
    ///
    /// # Errors
    /// The store's, or [`StoreError::Corrupt`].
    pub async fn extend_log(
        &self,
        log: &mut RawLog,
        relations: &[u64],
        after: Option<u64>,
    ) -> Result<(), StoreError> {
        if relations.is_empty() {
            return Ok(());
        }
        let list = relations.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        let after = after.map_or(String::new(), |lsn| format!(" AND c.commit_lsn > {}", lsn as i64));
        let rows = sqlx::query(&format!(
            "SELECT c.commit_lsn, t.end_lsn, t.xid, t.commit_time, c.change FROM isocert_changes c \
             JOIN isocert_txns t ON t.commit_lsn = c.commit_lsn WHERE c.relation IN ({list}){after} \
             ORDER BY c.commit_lsn, c.seq"
        ))
        .fetch_all(&self.pool)
        .await?;
        let mut current: Option<(i64, Json)> = None;
        let flush = |log: &mut RawLog, doc: Json| -> Result<(), StoreError> {
            let txn = CommittedTxn::from_json(&doc, 0).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            log.push(txn);
            Ok(())
        };
        for row in &rows {
            let lsn: i64 = row.get(0);
            let change: Json = serde_json::from_str(&row.get::<String, _>(4))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            match &mut current {
                Some((at, doc)) if *at == lsn => {
                    doc["changes"].as_array_mut().expect("changes array").push(change)
                }
                _ => {
                    if let Some((_, doc)) = current.take() {
                        flush(log, doc)?;
                    }
                    let doc = json!({
                        "xid": row.get::<i64, _>(2), "commit_lsn": lsn, "end_lsn": row.get::<i64, _>(1),
                        "commit_time": row.get::<i64, _>(3), "changes": [change],
                    });
                    current = Some((lsn, doc));
                }
            }
        }
        if let Some((_, doc)) = current {
            flush(log, doc)?;
        }
        Ok(())
    }

    /// Deletes the transactions stored before `before` (Unix seconds) and marks the tables
    /// they changed as collected; returns how many transactions went.
    ///
    /// # Errors
    /// The store's.
    pub async fn collect_garbage(&self, before: i64) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE isocert_tables SET collected = 1 WHERE relation IN (SELECT DISTINCT c.relation FROM \
             isocert_changes c JOIN isocert_txns t ON t.commit_lsn = c.commit_lsn WHERE t.stored_at < $1)",
        )
        .bind(before)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM isocert_changes WHERE commit_lsn IN (SELECT commit_lsn FROM isocert_txns WHERE stored_at < $1)")
            .bind(before)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM isocert_txns WHERE stored_at < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone.rows_affected())
    }

    /// Counts for `/v1/status`.
    ///
    /// # Errors
    /// The store's.
    pub async fn stats(&self) -> Result<StoreStats, StoreError> {
        let count = |sql: &'static str| async move {
            sqlx::query(sql).fetch_one(&self.pool).await.map(|r| r.get::<i64, _>(0))
        };
        let oldest = sqlx::query("SELECT min(stored_at) FROM isocert_txns")
            .fetch_one(&self.pool)
            .await?
            .try_get::<Option<i64>, _>(0)?;
        Ok(StoreStats {
            transactions: count("SELECT count(*) FROM isocert_txns").await?,
            changes: count("SELECT count(*) FROM isocert_changes").await?,
            tables: count("SELECT count(*) FROM isocert_tables").await?,
            oldest_stored_at: oldest,
            resume_position: self.resume_position().await?.unwrap_or(0) as i64,
            bytes: self.bytes().await?,
        })
    }

    async fn bytes(&self) -> Result<i64, StoreError> {
        let sql = if self.sqlite {
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
        } else {
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
             WHERE c.relkind = 'r' AND c.relname LIKE 'isocert\\_%'"
        };
        Ok(sqlx::query(sql).fetch_one(&self.pool).await?.get::<i64, _>(0))
    }
}

/// The lock that makes a server the leader of a feed (see [`VersionStore::try_lead`]).
#[derive(Debug)]
pub struct Leadership {
    /// The connection holding the advisory lock (none for SQLite).
    connection: Option<sqlx::AnyConnection>,
}

impl Leadership {
    /// Whether the lock is still held: its connection still answers. A failure means the
    /// session (and with it the lock) may be gone; the leader must stop its feed.
    pub async fn still_held(&mut self) -> bool {
        match &mut self.connection {
            None => true,
            Some(c) => sqlx::query("SELECT 1").fetch_one(c).await.is_ok(),
        }
    }

    /// Gives the lead up (closing the connection frees the lock).
    pub async fn release(self) {
        if let Some(c) = self.connection {
            let _ = sqlx::Connection::close(c).await;
        }
    }
}

/// The advisory lock key of feed `feed`: FNV-1a of its name, the same in every process and
/// version (the standard library's hashers promise neither).
fn leader_lock_key(feed: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in "isocert serve leader ".bytes().chain(feed.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

/// Creates the store's tables on PostgreSQL in one transaction holding an advisory lock
/// (issue 47): replicas started at the same moment on a fresh store each ran `CREATE TABLE
/// IF NOT EXISTS`, and all but one failed (`duplicate key value violates unique constraint
/// "pg_type_typname_nsp_index"`), since `IF NOT EXISTS` does not see a table another
/// transaction is creating. Under the lock the others wait, then find the tables there.
async fn create_schema_locked(pool: &AnyPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(SCHEMA_LOCK_KEY).execute(&mut *tx).await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The advisory lock key under which the store's tables are created: FNV-1a of a name of
/// its own, so it never equals a feed's leader lock ([`leader_lock_key`]).
const SCHEMA_LOCK_KEY: i64 = fnv1a(b"isocert serve store schema") as i64;

/// FNV-1a of `bytes` (the same in every process and version).
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// Creates the SQLite file readable and writable by its owner only (0600) before SQLite
/// opens it; SQLite gives its journal files the database file's permissions. An existing
/// file is left as it is.
fn create_private(path: &std::path::Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Db(sqlx::Error::Io(e))),
    }
}

/// Sizes of one table incarnation, for a tenant's `/v1/status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCounts {
    /// The incarnation's id.
    pub relation: u64,
    /// Row changes stored.
    pub changes: i64,
    /// Transactions that made them.
    pub transactions: i64,
    /// Unix time (seconds) the oldest of them was stored.
    pub oldest_stored_at: Option<i64>,
}

async fn note_table(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    table: &TableIncarnation,
    lsn: u64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO isocert_tables (relation, schema_name, table_name, first_lsn, truncated, collected) \
         VALUES ($1, $2, $3, $4, 0, 0) ON CONFLICT (relation) DO NOTHING",
    )
    .bind(table.id as i64)
    .bind(&*table.schema)
    .bind(&*table.name)
    .bind(lsn as i64)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn stored_table(row: &AnyRow) -> StoredTable {
    StoredTable {
        table: TableIncarnation {
            id: row.get::<i64, _>(0) as u64,
            schema: row.get::<String, _>(1).into(),
            name: row.get::<String, _>(2).into(),
        },
        first_lsn: row.get::<i64, _>(3) as u64,
        truncated: row.get::<i64, _>(4) != 0,
        collected: row.get::<i64, _>(5) != 0,
    }
}
