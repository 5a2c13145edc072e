//! The PostgreSQL facts the test client records in `meta` (see docs/POSTGRES.md; the
//! adapter writes them from its `PgTxnFacts`/`PgOpFacts` structs), read back with serde
//! field by field so that an error names the field. A transaction id may be a number or
//! its decimal text (other tools' histories); unknown keys are ignored.

use isocert_history::{History, TxnId};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::{PgSnapshot, RecoveryError};

/// What the client recorded about one transaction.
#[derive(Debug, Default)]
pub(crate) struct TxnFacts {
    /// `pg_current_xact_id_if_assigned()` just before COMMIT.
    pub(crate) xid: Option<u64>,
    /// The transaction snapshot (REPEATABLE READ / SERIALIZABLE).
    pub(crate) snapshot: Option<PgSnapshot>,
    /// Whether statements take their own snapshots and UPDATE/DELETE re-check rows (EvalPlanQual).
    pub(crate) read_committed: bool,
    /// Statement snapshots by op index, ascending (READ COMMITTED).
    pub(crate) op_snapshots: Vec<(u32, PgSnapshot)>,
}

impl TxnFacts {
    /// The snapshot operation `op` read from.
    pub(crate) fn snapshot_of(&self, op: u32) -> Option<&PgSnapshot> {
        self.op_snapshots
            .binary_search_by_key(&op, |(i, _)| *i)
            .ok()
            .map(|k| &self.op_snapshots[k].1)
            .or(self.snapshot.as_ref())
    }

    /// The first statement snapshot taken after operation `op`, if any.
    pub(crate) fn snapshot_after(&self, op: u32) -> Option<&PgSnapshot> {
        let k = self.op_snapshots.partition_point(|(i, _)| *i <= op);
        self.op_snapshots.get(k).map(|(_, s)| s)
    }

    /// Every snapshot of the transaction, in program order.
    pub(crate) fn snapshots(&self) -> impl Iterator<Item = &PgSnapshot> {
        self.snapshot.iter().chain(self.op_snapshots.iter().map(|(_, s)| s))
    }
}

/// Reads the facts of every transaction of `h`.
pub(crate) fn read_facts(h: &History) -> Result<Vec<TxnFacts>, RecoveryError> {
    h.txn_ids().map(|t| read_txn(h, t)).collect()
}

/// A transaction id as histories write it: a number, or its decimal text.
#[derive(Deserialize)]
#[serde(untagged)]
enum XidField {
    Number(u64),
    Text(String),
}

/// Field `name` of a `meta` object read with serde (`None` when absent or null); the error
/// names the field.
fn field<T: DeserializeOwned>(map: &Map<String, Json>, name: &str) -> Result<Option<T>, (String, String)> {
    match map.get(name) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => T::deserialize(v).map(Some).map_err(|e| (name.to_string(), format!("{v}: {e}"))),
    }
}

fn read_txn(h: &History, t: TxnId) -> Result<TxnFacts, RecoveryError> {
    let txn = h.txn(t);
    let bad =
        |(field, message): (String, String)| RecoveryError::Meta { txn: h.txn_label(t), field, message };
    let mut facts = TxnFacts::default();
    let mut isolation = None;
    if let Some(meta) = txn.meta.as_deref() {
        let Json::Object(map) = meta else {
            return Err(bad(("meta".into(), "is not an object".into())));
        };
        facts.xid = match field::<XidField>(map, "xid").map_err(|(f, _)| {
            bad((f, format!("{} is not a transaction id", map.get("xid").unwrap_or(&Json::Null))))
        })? {
            None => None,
            Some(XidField::Number(n)) => Some(n),
            Some(XidField::Text(s)) => {
                Some(s.parse().map_err(|_| bad(("xid".into(), format!("{s:?} is not a transaction id"))))?)
            }
        };
        facts.snapshot = snapshot(map, "snapshot").map_err(bad)?;
        isolation = field::<String>(map, "isolation")
            .map_err(bad)?
            .map(|s| s.to_ascii_lowercase().replace(['-', '_'], " "));
    }
    for (op, meta) in &txn.op_meta {
        let Json::Object(map) = meta else {
            return Err(bad((format!("ops[{op}].meta"), "is not an object".into())));
        };
        if let Some(s) =
            snapshot(map, "snapshot").map_err(|(_, m)| bad((format!("ops[{op}].meta.snapshot"), m)))?
        {
            facts.op_snapshots.push((*op, s));
        }
    }
    facts.op_snapshots.sort_by_key(|(i, _)| *i);
    facts.read_committed = match isolation.as_deref() {
        Some("read committed" | "read uncommitted") => true,
        Some(_) => false,
        None => facts.snapshot.is_none() && !facts.op_snapshots.is_empty(),
    };
    Ok(facts)
}

/// A snapshot field: text parsed as `xmin:xmax:xip,...`.
fn snapshot(map: &Map<String, Json>, name: &str) -> Result<Option<PgSnapshot>, (String, String)> {
    match field::<String>(map, name) {
        Ok(None) => Ok(None),
        Ok(Some(s)) => s.parse::<PgSnapshot>().map(Some).map_err(|e| (name.to_string(), e.to_string())),
        Err((f, _)) => Err((f, format!("{} is not a snapshot string", map.get(name).unwrap_or(&Json::Null)))),
    }
}
