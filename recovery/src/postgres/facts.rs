//! PostgreSQL's facts, declared once: [`PgTxnFacts`] and [`PgOpFacts`] are what the adapter's
//! session writes into a history's `meta` (docs/POSTGRES.md) and what this rule reads back.
//! Reading goes through serde (`serde_path_to_error` names the field in each error); a
//! transaction id may be a number or its decimal text (other tools' histories); unknown
//! keys are ignored.

use isocert_history::{History, Transaction, TxnId};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value as Json;

use crate::{PgSnapshot, RecoveryError};

/// What a PostgreSQL session records per transaction, serialised into its `meta` (the
/// keys are the on-disk format: docs/POSTGRES.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgTxnFacts {
    /// `pg_current_xact_id_if_assigned()` just before COMMIT (`null`: read-only).
    #[serde(default, deserialize_with = "xid")]
    pub xid: Option<u64>,
    /// The level, as isocert spells it (`repeatable-read`); the session always writes it.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// The transaction snapshot (repeatable read, serializable), once a statement ran.
    #[serde(default, deserialize_with = "snapshot_text", skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Why the attempt failed: the SQLSTATE, `connection` or `client`.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub sqlstate: Option<String>,
}

/// What a PostgreSQL session records per operation, serialised into its `meta`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgOpFacts {
    /// The writer (`xmin`) of the version an item read returned or an item write installed.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub xmin: Option<u64>,
    /// Set when a read returned more than one version of a row (docs/POSTGRES.md).
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub versions_returned: Option<usize>,
    /// Set on an item read that is an extra version a select returned.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub extra_version_of_select: Option<bool>,
    /// The writers of the rows a predicate operation returned or wrote, in row order.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub xmins: Option<Vec<u64>>,
    /// At read committed: `[key, xmin]` of the rows matching a predicate write in its snapshot.
    #[serde(default, deserialize_with = "shown", skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<(i64, u64)>>,
    /// At read committed: the statement's snapshot.
    #[serde(default, deserialize_with = "snapshot_text", skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// A field read through its JSON value, so that the error shows what was there
/// (`5: invalid type: ...`); `null` is absent.
fn shown<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let value = Json::deserialize(d)?;
    if value.is_null() {
        return Ok(None);
    }
    T::deserialize(&value).map(Some).map_err(|e| D::Error::custom(format!("{value}: {e}")))
}

/// A transaction id as histories write it: a number, or its decimal text.
fn xid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    xid_of(&Json::deserialize(d)?).map_err(D::Error::custom)
}

/// [`xid`] on a JSON value already parsed: `null` is none; otherwise why it is not one.
fn xid_of(value: &Json) -> Result<Option<u64>, String> {
    match value {
        Json::Null => Ok(None),
        Json::String(s) => s.parse().map(Some).map_err(|_| format!("{s:?} is not a transaction id")),
        value => value.as_u64().map(Some).ok_or_else(|| format!("{value} is not a transaction id")),
    }
}

/// A snapshot's text (`xmin:xmax:xip,...`, parsed by [`PgSnapshot`] where it is used).
fn snapshot_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Json::deserialize(d)? {
        Json::Null => Ok(None),
        Json::String(s) => Ok(Some(s)),
        value => Err(D::Error::custom(format!("{value} is not a snapshot string"))),
    }
}

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

/// Each transaction's recorded xid (`meta.xid`), read without the rest of its facts: what
/// telling foreign writers from the history's transactions needs, several times per
/// certificate in `isocert serve`, where reading every fact was a fifth of a request's CPU
/// (`perf`, issue 32). The same parser as [`PgTxnFacts::xid`]'s.
///
/// # Errors
/// [`RecoveryError::Meta`] naming the transaction when its `xid` is not a transaction id.
pub(crate) fn read_xids(h: &History) -> Result<Vec<Option<u64>>, RecoveryError> {
    h.txn_ids()
        .map(|t| {
            let bad = |field: &str, message: String| RecoveryError::Meta {
                txn: h.txn_label(t),
                field: field.into(),
                message,
            };
            match h.txn(t).meta() {
                None => Ok(None),
                Some(Json::Object(map)) => map.get("xid").map_or(Ok(None), xid_of).map_err(|m| bad("xid", m)),
                Some(_) => Err(bad("meta", "is not an object".into())),
            }
        })
        .collect()
}

/// What placing the history's start needs of its facts: every recorded xid and every
/// snapshot (transaction and statement snapshots), read without the rest of the facts, as
/// [`read_xids`] is and for the same reason (once per certificate in `isocert serve`).
pub(crate) struct Placement {
    /// Each transaction's recorded xid, in history order.
    pub(crate) xids: Vec<Option<u64>>,
    /// Per transaction, whether it recorded any snapshot.
    pub(crate) has_snapshot: Vec<bool>,
    /// Every snapshot recorded.
    pub(crate) snapshots: Vec<PgSnapshot>,
}

/// Reads a [`Placement`]; the same parsers as [`PgTxnFacts`]'s and [`PgOpFacts`]'s.
///
/// # Errors
/// [`RecoveryError::Meta`] naming the transaction and field of a malformed xid or snapshot.
pub(crate) fn read_placement(h: &History) -> Result<Placement, RecoveryError> {
    let xids = read_xids(h)?;
    let mut has_snapshot = Vec::with_capacity(xids.len());
    let mut snapshots = Vec::new();
    for t in h.txn_ids() {
        let txn = h.txn(t);
        let bad =
            |field: String, message: String| RecoveryError::Meta { txn: h.txn_label(t), field, message };
        let snapshot_of = |meta: &Json, field: &dyn Fn() -> String| match meta.get("snapshot") {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(text)) => {
                text.parse::<PgSnapshot>().map(Some).map_err(|e| bad(field(), e.to_string()))
            }
            Some(other) => Err(bad(field(), format!("{other} is not a snapshot string"))),
        };
        let before = snapshots.len();
        if let Some(meta) = txn.meta() {
            snapshots.extend(snapshot_of(meta, &|| "snapshot".into())?);
        }
        for (op, meta) in txn.op_metas() {
            snapshots.extend(snapshot_of(meta, &|| format!("ops[{op}].meta.snapshot"))?);
        }
        has_snapshot.push(snapshots.len() > before);
    }
    Ok(Placement { xids, has_snapshot, snapshots })
}

/// `meta` read as `T`, or the field whose value does not fit and why.
fn read_meta<T: DeserializeOwned + Default>(meta: Option<&Json>) -> Result<T, (String, String)> {
    match meta {
        None => Ok(T::default()),
        Some(Json::Object(_)) => serde_path_to_error::deserialize(meta.unwrap_or(&Json::Null))
            .map_err(|e| (e.path().to_string(), e.into_inner().to_string())),
        Some(_) => Err(("meta".into(), "is not an object".into())),
    }
}

fn read_txn(h: &History, t: TxnId) -> Result<TxnFacts, RecoveryError> {
    read_txn_facts(h.txn(t))
}

/// The facts one transaction recorded (what a live run reads as each transaction completes).
pub(crate) fn read_txn_facts(txn: &Transaction) -> Result<TxnFacts, RecoveryError> {
    let bad = |(field, message): (String, String)| RecoveryError::Meta {
        txn: format!("T{}", txn.name),
        field,
        message,
    };
    let recorded: PgTxnFacts = read_meta(txn.meta()).map_err(bad)?;
    let mut facts = TxnFacts {
        xid: recorded.xid,
        snapshot: parsed(recorded.snapshot, "snapshot").map_err(bad)?,
        ..TxnFacts::default()
    };
    for (op, meta) in txn.op_metas() {
        let in_op = |(field, message): (String, String)| {
            let field =
                if field == "meta" { format!("ops[{op}].meta") } else { format!("ops[{op}].meta.{field}") };
            bad((field, message))
        };
        let recorded: PgOpFacts = read_meta(Some(meta)).map_err(in_op)?;
        if let Some(s) = parsed(recorded.snapshot, "snapshot").map_err(in_op)? {
            facts.op_snapshots.push((*op, s));
        }
    }
    facts.op_snapshots.sort_by_key(|(i, _)| *i);
    let isolation = recorded.isolation.map(|s| s.to_ascii_lowercase().replace(['-', '_'], " "));
    facts.read_committed = match isolation.as_deref() {
        Some("read committed" | "read uncommitted") => true,
        Some(_) => false,
        None => facts.snapshot.is_none() && !facts.op_snapshots.is_empty(),
    };
    Ok(facts)
}

/// A snapshot field's text parsed as `xmin:xmax:xip,...`.
fn parsed(text: Option<String>, name: &str) -> Result<Option<PgSnapshot>, (String, String)> {
    text.map(|s| s.parse::<PgSnapshot>().map_err(|e| (name.to_string(), e.to_string()))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys and their order are the on-disk format the adapter writes (docs/POSTGRES.md).
    #[test]
    fn facts_are_written_as_the_history_format_says_and_read_back() {
        let txn = PgTxnFacts {
            xid: Some(741),
            isolation: Some("read-committed".into()),
            snapshot: None,
            sqlstate: Some("40001".into()),
        };
        let text = serde_json::to_string(&txn).unwrap();
        assert_eq!(text, r#"{"xid":741,"isolation":"read-committed","sqlstate":"40001"}"#);
        assert_eq!(serde_json::from_str::<PgTxnFacts>(&text).unwrap(), txn);
        let read_only = PgTxnFacts { isolation: Some("serializable".into()), ..PgTxnFacts::default() };
        assert_eq!(serde_json::to_string(&read_only).unwrap(), r#"{"xid":null,"isolation":"serializable"}"#);
        let op = PgOpFacts {
            xmins: Some(vec![5, 6]),
            candidates: Some(vec![(1, 5)]),
            snapshot: Some("5:9:".into()),
            ..PgOpFacts::default()
        };
        let text = serde_json::to_string(&op).unwrap();
        assert_eq!(text, r#"{"xmins":[5,6],"candidates":[[1,5]],"snapshot":"5:9:"}"#);
        assert_eq!(serde_json::from_str::<PgOpFacts>(&text).unwrap(), op);
        assert_eq!(serde_json::to_string(&PgOpFacts::default()).unwrap(), "{}");
    }

    /// The xid-only reader agrees with reading every fact, and refuses what it refuses.
    #[test]
    fn xids_alone_read_as_the_facts_do() {
        let lines = [
            r#"{"id":1,"session":0,"ops":[],"meta":{"xid":7,"snapshot":"7:7:"}}"#,
            r#"{"id":2,"session":0,"ops":[],"meta":{"xid":"8"}}"#,
            r#"{"id":3,"session":0,"ops":[],"meta":{"xid":null}}"#,
            r#"{"id":4,"session":0,"ops":[]}"#,
        ];
        let h = isocert_history::v1::read_history(lines.join("\n").as_bytes()).unwrap();
        let facts: Vec<Option<u64>> = read_facts(&h).unwrap().iter().map(|f| f.xid).collect();
        assert_eq!(read_xids(&h).unwrap(), facts);
        assert_eq!(facts, [Some(7), Some(8), None, None]);
        for bad in [r#"{"xid":"x"}"#, r#"{"xid":-1}"#, "[1]"] {
            let line = format!(r#"{{"id":1,"session":0,"ops":[],"meta":{bad}}}"#);
            let h = isocert_history::v1::read_history(line.as_bytes()).unwrap();
            assert!(read_xids(&h).is_err() && read_facts(&h).is_err(), "{bad}");
        }
    }

    /// The placement reader sees the snapshots and xids reading every fact sees.
    #[test]
    fn placement_reads_as_the_facts_do() {
        let lines = [
            r#"{"id":1,"session":0,"ops":[],"meta":{"xid":7,"snapshot":"7:7:"}}"#,
            r#"{"id":2,"session":0,"ops":[{"f":"r","key":1,"value":0,"meta":{"snapshot":"8:9:8"}},{"f":"r","key":1,"value":0}],"meta":{"xid":"8","isolation":"read-committed"}}"#,
            r#"{"id":3,"session":0,"ops":[],"meta":{"xid":null}}"#,
        ];
        let h = isocert_history::v1::read_history(lines.join("\n").as_bytes()).unwrap();
        let facts = read_facts(&h).unwrap();
        let placement = read_placement(&h).unwrap();
        let snapshots: Vec<PgSnapshot> = facts.iter().flat_map(|f| f.snapshots().cloned()).collect();
        assert_eq!(placement.snapshots, snapshots);
        assert_eq!(placement.xids, facts.iter().map(|f| f.xid).collect::<Vec<_>>());
        assert_eq!(placement.has_snapshot, [true, true, false]);
        for bad in [r#"{"snapshot":7}"#, r#"{"snapshot":"9:8:"}"#] {
            let line = format!(r#"{{"id":1,"session":0,"ops":[],"meta":{bad}}}"#);
            let h = isocert_history::v1::read_history(line.as_bytes()).unwrap();
            assert!(read_placement(&h).is_err() && read_facts(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bad_field_is_named() {
        let meta: Json = serde_json::from_str(r#"{"xid":"12","snapshot":7}"#).unwrap();
        let (field, message) = read_meta::<PgTxnFacts>(Some(&meta)).unwrap_err();
        assert_eq!((field.as_str(), message.as_str()), ("snapshot", "7 is not a snapshot string"));
        let meta: Json = serde_json::from_str(r#"{"xmins":[1,"x"]}"#).unwrap();
        let (field, message) = read_meta::<PgOpFacts>(Some(&meta)).unwrap_err();
        assert_eq!(field, "xmins");
        assert!(message.starts_with(r#"[1,"x"]: invalid type"#), "{message}");
        assert_eq!(read_meta::<PgOpFacts>(Some(&Json::Bool(true))).unwrap_err().0, "meta");
        let meta: Json = serde_json::from_str(r#"{"xid":"12","tool":{"x":1}}"#).unwrap();
        assert_eq!(read_meta::<PgTxnFacts>(Some(&meta)).unwrap().xid, Some(12));
    }
}
