//! Reading the facts an adapter's session recorded in the history's `meta` back into its
//! typed structs (each rule's facts are serde structs; a transaction or operation without
//! `meta` gets the defaults).

use isocert_history::{History, TxnId};
use serde::de::DeserializeOwned;

use crate::RecoveryError;

/// The facts of transaction `t`.
pub(crate) fn txn_facts<T: DeserializeOwned + Default>(h: &History, t: TxnId) -> Result<T, RecoveryError> {
    let Some(meta) = h.txn(t).meta() else { return Ok(T::default()) };
    serde_json::from_value(meta.clone()).map_err(|e| RecoveryError::Meta {
        txn: h.txn_label(t),
        field: "meta".into(),
        message: e.to_string(),
    })
}

/// The facts of operation `op` of transaction `t`.
pub(crate) fn op_facts<T: DeserializeOwned + Default>(
    h: &History,
    t: TxnId,
    op: usize,
) -> Result<T, RecoveryError> {
    let Some(meta) = h.txn(t).op_meta(op) else { return Ok(T::default()) };
    serde_json::from_value(meta.clone()).map_err(|e| RecoveryError::Meta {
        txn: h.txn_label(t),
        field: format!("ops[{op}].meta"),
        message: e.to_string(),
    })
}
