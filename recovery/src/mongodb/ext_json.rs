//! The pieces of MongoDB extended JSON (relaxed and canonical, as `mongoexport`, `mongosh`'s
//! `EJSON.stringify` and the drivers write it) that oplog entries and change events use.

use std::sync::Arc;

use isocert_history::{Scalar, Timestamp};
use serde_json::{Map, Value as Json};

/// A BSON `Timestamp(t, i)` (`{"$timestamp":{"t":T,"i":I}}`) as the HLC pair (t, i).
pub(crate) fn timestamp(v: &Json) -> Option<Timestamp> {
    let ts = v.get("$timestamp")?;
    Some(Timestamp::hlc(ts.get("t")?.as_u64()?, ts.get("i")?.as_u64()?))
}

/// An integer: a JSON number, `{"$numberLong":"N"}` or `{"$numberInt":"N"}`.
pub(crate) fn long(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::Object(o) => o.get("$numberLong").or_else(|| o.get("$numberInt"))?.as_str()?.parse().ok(),
        _ => None,
    }
}

/// A session id (`lsid.id`): the base64 text of a UUID binary, canonical
/// (`{"$binary":{"base64":B,"subType":"04"}}`) or legacy (`{"$binary":B,"$type":"04"}`),
/// or `{"$uuid":"hex"}` as the hex text.
pub(crate) fn session_id(v: &Json) -> Option<String> {
    let o = v.as_object()?;
    if let Some(b) = o.get("$binary") {
        return match b {
            Json::String(s) => Some(s.clone()),
            Json::Object(inner) => inner.get("base64")?.as_str().map(str::to_string),
            _ => None,
        };
    }
    o.get("$uuid")?.as_str().map(str::to_string)
}

/// The 64-bit id of transaction `txn_number` of session `lsid` (the base64 text of its
/// UUID, as [`session_id`] reads it): what the client records and the capture computes,
/// so that logged transactions match the history's. Never 0 (0 means "no id").
pub fn mongo_txn_xid(lsid: &str, txn_number: i64) -> u64 {
    // FNV-1a, 64 bit: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lsid.bytes().chain(txn_number.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// The transaction id of an entry or event carrying `lsid` and `txnNumber`, if it has both.
pub(crate) fn txn_xid(entry: &Map<String, Json>) -> Result<Option<u64>, (String, String)> {
    let (Some(lsid), Some(num)) = (entry.get("lsid"), entry.get("txnNumber")) else {
        return Ok(None);
    };
    let id = lsid
        .get("id")
        .and_then(session_id)
        .ok_or_else(|| ("lsid.id".to_string(), "not a UUID binary".to_string()))?;
    let n = long(num).ok_or_else(|| ("txnNumber".to_string(), "not an integer".to_string()))?;
    Ok(Some(mongo_txn_xid(&id, n)))
}

/// A bad field: its path and what is wrong.
pub(crate) type FieldError = (String, String);

/// A document field as a history scalar.
pub(crate) fn scalar(v: &Json) -> Result<Scalar, String> {
    Ok(match v {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Scalar::Int(i),
            None => Scalar::Float(n.as_f64().ok_or("a number out of range")?),
        },
        Json::String(s) => Scalar::Text(s.as_str().into()),
        Json::Array(_) => return Err("an array (the history's documents hold scalars)".into()),
        Json::Object(o) => {
            let (k, inner) = o.iter().next().ok_or("an empty embedded document")?;
            let text = inner.as_str();
            match (k.as_str(), text) {
                ("$numberInt" | "$numberLong", Some(s)) => {
                    Scalar::Int(s.parse().map_err(|_| format!("{k} {s:?} is not an integer"))?)
                }
                ("$numberDouble", Some(s)) => Scalar::Float(match s {
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    "NaN" => f64::NAN,
                    _ => s.parse().map_err(|_| format!("$numberDouble {s:?} is not a number"))?,
                }),
                ("$oid", Some(s)) => Scalar::Text(s.into()),
                (k, _) if k.starts_with('$') => {
                    return Err(format!("extended JSON type {k} has no history scalar"))
                }
                _ => return Err("an embedded document (the history's documents are flat)".into()),
            }
        }
    })
}

/// A flat document as (field, scalar) pairs, leaving out isocert's `writer` tag (the
/// history records the writer as the transaction, not as a column).
pub(crate) fn document(o: &Map<String, Json>) -> Result<Vec<(Arc<str>, Scalar)>, FieldError> {
    let mut out = Vec::with_capacity(o.len());
    for (k, v) in o {
        if k == "writer" {
            continue;
        }
        out.push((Arc::from(k.as_str()), scalar(v).map_err(|m| (k.clone(), m))?));
    }
    Ok(out)
}
