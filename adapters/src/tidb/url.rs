//! `tidb://` URLs: the MySQL connection, plus where the status port is and which
//! transaction mode to run.

use std::fmt;

use crate::seam::DatabaseUrl;
use crate::AdapterError;
use crate::DatabaseKind;

/// TiDB's default status port (the MVCC API).
const STATUS_PORT: u16 = 10080;

/// `tidb_txn_mode`: how TiDB detects write conflicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnMode {
    /// Locks rows as statements write them (TiDB's default since 3.0.8); DML and
    /// `SELECT ... FOR UPDATE` read the newest committed version (`for_update_ts`).
    Pessimistic,
    /// Checks conflicts at commit; every read is at the start timestamp.
    Optimistic,
}

impl TxnMode {
    /// The value of `tidb_txn_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            TxnMode::Pessimistic => "pessimistic",
            TxnMode::Optimistic => "optimistic",
        }
    }
}

impl TxnMode {
    /// The mode a level runs in when the URL names none: optimistic at REPEATABLE READ,
    /// where every read is at the start timestamp and TiDB promises snapshot isolation
    /// (`transaction-isolation-levels.md`); pessimistic at READ COMMITTED, which TiDB runs only
    /// in pessimistic transactions. A pessimistic REPEATABLE READ transaction reads at
    /// `for_update_ts` in its DML ("current read", `pessimistic-transaction.md`), which TiDB
    /// documents as non-repeatable: not snapshot isolation.
    pub fn for_level(level: crate::seam::IsolationLevel) -> TxnMode {
        match level {
            crate::seam::IsolationLevel::ReadCommitted => TxnMode::Pessimistic,
            _ => TxnMode::Optimistic,
        }
    }
}

impl fmt::Display for TxnMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `tidb://user:password@host:4000/database?status=host:10080&txn_mode=optimistic`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TiDbUrl {
    /// The same URL as `mysql://`, without isocert's parameters (for the MySQL driver).
    pub mysql_url: String,
    /// The database the workload's table goes in.
    pub database: String,
    /// The status port's base URL (`http://host:10080`): `status=` gives it (`host:port`,
    /// or a full `http://` / `https://` URL), else the SQL host on port 10080.
    pub status_url: String,
    /// `txn_mode=`: pessimistic or optimistic; `None` (not given) runs each level in the mode
    /// that gives TiDB's documented level ([`TxnMode::for_level`]).
    pub txn_mode: Option<TxnMode>,
}

impl TiDbUrl {
    /// Parses `url` (scheme `tidb`).
    ///
    /// # Errors
    /// A URL of another scheme, without a database, or with an unknown `txn_mode`.
    pub fn parse(url: &str) -> Result<Self, AdapterError> {
        let parsed = DatabaseUrl::parse(url, DatabaseKind::TiDb, "tidb://user@HOST:4000/DATABASE")?;
        let bad = |message: String| parsed.error(message);
        let database = parsed.database().to_string();
        if database.is_empty() {
            return Err(bad("a TiDB URL must name the database the workload's tables go in (tidb://user@host:4000/DATABASE)".into()));
        }
        let mut status_url = format!("http://{}:{STATUS_PORT}", parsed.host());
        let mut txn_mode = None;
        let mut passed: Vec<&str> = Vec::new();
        for option in parsed.options() {
            match (option.key, option.value) {
                ("status", Some(v)) if v.starts_with("http://") || v.starts_with("https://") => {
                    status_url = v.trim_end_matches('/').to_string();
                }
                ("status", Some(v)) => status_url = format!("http://{v}"),
                ("txn_mode", Some("pessimistic")) => txn_mode = Some(TxnMode::Pessimistic),
                ("txn_mode", Some("optimistic")) => txn_mode = Some(TxnMode::Optimistic),
                ("txn_mode", Some(other)) => {
                    return Err(bad(format!("txn_mode={other}: use pessimistic or optimistic")));
                }
                _ => passed.push(option.text),
            }
        }
        let mut mysql_url = format!("mysql://{}", parsed.authority_and_path());
        if !passed.is_empty() {
            mysql_url.push('?');
            mysql_url.push_str(&passed.join("&"));
        }
        Ok(TiDbUrl { mysql_url, database, status_url, txn_mode })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_port_and_mode_come_from_the_url_and_the_rest_goes_to_the_driver() {
        let u = TiDbUrl::parse("tidb://root:pw@10.0.0.5:4000/test").unwrap();
        assert_eq!(u.mysql_url, "mysql://root:pw@10.0.0.5:4000/test");
        assert_eq!((u.database.as_str(), u.status_url.as_str()), ("test", "http://10.0.0.5:10080"));
        assert_eq!(u.txn_mode, None, "the mode follows the level");
        assert_eq!(
            TiDbUrl::parse("tidb://h/db?txn_mode=pessimistic").unwrap().txn_mode,
            Some(TxnMode::Pessimistic)
        );
        let u =
            TiDbUrl::parse("tidb://root@h:4000/db?status=h2:20080&txn_mode=optimistic&prefer_socket=false")
                .unwrap();
        assert_eq!(u.mysql_url, "mysql://root@h:4000/db?prefer_socket=false");
        assert_eq!((u.status_url.as_str(), u.txn_mode), ("http://h2:20080", Some(TxnMode::Optimistic)));
        let u = TiDbUrl::parse("tidb://root@h/db?status=https://s:1/").unwrap();
        assert_eq!(u.status_url, "https://s:1");
        let e = TiDbUrl::parse("tidb://root:s3cret@h:4000").unwrap_err().to_string();
        assert!(e.contains("DATABASE") && !e.contains("s3cret"), "{e}");
        let e = TiDbUrl::parse("tidb://root@h/db?txn_mode=lazy").unwrap_err().to_string();
        assert!(e.contains("txn_mode=lazy"), "{e}");
        assert!(TiDbUrl::parse("mysql://root@h/db").is_err());
    }
}
