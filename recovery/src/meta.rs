//! Reading the facts an adapter's session recorded in the history's `meta` back into its
//! typed structs (each rule's facts are serde structs; a transaction or operation without
//! `meta` gets the defaults).

use isocert_history::{History, Transaction, TxnId};
use serde::de::DeserializeOwned;

use crate::RecoveryError;

/// The facts of transaction `t`.
pub(crate) fn txn_facts<T: DeserializeOwned + Default>(h: &History, t: TxnId) -> Result<T, RecoveryError> {
    facts_of_txn(h.txn(t))
}

/// The facts of `txn` (a live rule has the transaction, not the history).
pub(crate) fn facts_of_txn<T: DeserializeOwned + Default>(txn: &Transaction) -> Result<T, RecoveryError> {
    let Some(meta) = txn.meta() else { return Ok(T::default()) };
    serde_json::from_value(meta.clone()).map_err(|e| RecoveryError::Meta {
        txn: format!("T{}", txn.name),
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
    facts_of_op(h.txn(t), op)
}

/// The facts of operation `op` of `txn`.
pub(crate) fn facts_of_op<T: DeserializeOwned + Default>(
    txn: &Transaction,
    op: usize,
) -> Result<T, RecoveryError> {
    let Some(meta) = txn.op_meta(op) else { return Ok(T::default()) };
    serde_json::from_value(meta.clone()).map_err(|e| RecoveryError::Meta {
        txn: format!("T{}", txn.name),
        field: format!("ops[{op}].meta"),
        message: e.to_string(),
    })
}
