//! The PostgreSQL facts the test client records in `meta` (see docs/POSTGRES.md).

use isocert_history::{History, TxnId};
use serde_json::Value as Json;

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

fn read_txn(h: &History, t: TxnId) -> Result<TxnFacts, RecoveryError> {
    let txn = h.txn(t);
    let bad = |field: String, message: String| RecoveryError::Meta { txn: h.txn_label(t), field, message };
    let mut facts = TxnFacts::default();
    let mut isolation = None;
    if let Some(meta) = txn.meta.as_deref() {
        let Json::Object(map) = meta else {
            return Err(bad("meta".into(), "is not an object".into()));
        };
        facts.xid = match map.get("xid") {
            None | Some(Json::Null) => None,
            Some(Json::Number(n)) => {
                Some(n.as_u64().ok_or_else(|| bad("xid".into(), format!("{n} is not a transaction id")))?)
            }
            Some(Json::String(s)) => {
                Some(s.parse().map_err(|_| bad("xid".into(), format!("{s:?} is not a transaction id")))?)
            }
            Some(other) => return Err(bad("xid".into(), format!("{other} is not a transaction id"))),
        };
        facts.snapshot = snapshot_field(map.get("snapshot")).map_err(|m| bad("snapshot".into(), m))?;
        isolation = match map.get("isolation") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.to_ascii_lowercase().replace(['-', '_'], " ")),
            Some(other) => return Err(bad("isolation".into(), format!("{other} is not a string"))),
        };
    }
    for (op, meta) in &txn.op_meta {
        let field = || format!("ops[{op}].meta.snapshot");
        let Json::Object(map) = meta else {
            return Err(bad(format!("ops[{op}].meta"), "is not an object".into()));
        };
        if let Some(s) = snapshot_field(map.get("snapshot")).map_err(|m| bad(field(), m))? {
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

fn snapshot_field(v: Option<&Json>) -> Result<Option<PgSnapshot>, String> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => s.parse::<PgSnapshot>().map(Some).map_err(|e| e.to_string()),
        Some(other) => Err(format!("{other} is not a snapshot string")),
    }
}
