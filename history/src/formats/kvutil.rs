//! Helpers shared by the integer key-value formats (dbcop, Plume, Cobra, Viper).

use crate::model::KV_TABLE;
use crate::{FormatError, History, ObjId, Op, Scalar, TxnId, Value, ValueId};

/// The transactions of each session, sessions in [`SessionId`](crate::SessionId) order and
/// transactions in file (session) order.
pub(crate) fn sessions(h: &History) -> Vec<Vec<TxnId>> {
    let mut out = vec![Vec::new(); h.session_count()];
    for id in h.txn_ids() {
        out[h.txn(id).session.index()].push(id);
    }
    out
}

/// Names an operation for an error message: `transaction T7, ops[2]`.
pub(crate) fn at_op(h: &History, txn: TxnId, op: usize) -> String {
    format!("transaction {}, ops[{op}]", h.txn_label(txn))
}

/// An [`FormatError::Unsupported`] error.
pub(crate) fn unsupported(format: &'static str, message: impl Into<String>) -> FormatError {
    FormatError::Unsupported { format, message: message.into() }
}

/// The integer key of a kv object, or why the format cannot carry it.
pub(crate) fn int_key(h: &History, obj: ObjId, format: &'static str, at: &str) -> Result<i64, FormatError> {
    let o = h.object(obj);
    if &*h.table(o.table).name != KV_TABLE {
        return Err(unsupported(
            format,
            format!("{at}: table {} (only the kv table)", h.table(o.table).name),
        ));
    }
    match o.key {
        Scalar::Int(k) => Ok(k),
        ref other => Err(unsupported(format, format!("{at}: key {other} is not an integer"))),
    }
}

/// The integer a kv value holds, or why the format cannot carry it.
pub(crate) fn int_value(
    h: &History,
    value: ValueId,
    format: &'static str,
    at: &str,
) -> Result<i64, FormatError> {
    match h.value(value) {
        Value::Scalar(Scalar::Int(v)) => Ok(*v),
        other => Err(unsupported(format, format!("{at}: value {other:?} is not an integer"))),
    }
}

/// The value a read of `obj` returned, as the integer the int formats write: the initial
/// value 0 stands for both the declared initial `0` and an unborn object.
pub(crate) fn read_as_int(
    h: &History,
    obj: ObjId,
    value: ValueId,
    format: &'static str,
    at: &str,
) -> Result<i64, FormatError> {
    if value == ValueId::ABSENT {
        if h.initial.iter().any(|(o, v)| *o == obj && *v != ValueId::ABSENT) {
            return Err(unsupported(
                format,
                format!("{at}: a read of an absent object that has an initial value"),
            ));
        }
        return Ok(0);
    }
    int_value(h, value, format, at)
}

/// Checks that the initial versions are all `0` (the only initial state the int formats have).
pub(crate) fn check_initial_zero(h: &History, format: &'static str) -> Result<(), FormatError> {
    for &(obj, value) in &h.initial {
        if value != ValueId::ABSENT && h.value(value) != &Value::Scalar(Scalar::Int(0)) {
            return Err(unsupported(
                format,
                format!(
                    "initial value of {} is not 0 (the format's implicit initial state)",
                    h.object_label(obj)
                ),
            ));
        }
    }
    Ok(())
}

/// One item operation of an int format: read or write of an integer key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntOp {
    /// Read of `key` returning `value`.
    Read { key: i64, value: i64 },
    /// Write of `value` to `key`.
    Write { key: i64, value: i64 },
}

/// The item operations of a transaction as int-format events, or why they cannot be carried.
pub(crate) fn int_ops(h: &History, txn: TxnId, format: &'static str) -> Result<Vec<IntOp>, FormatError> {
    let t = h.txn(txn);
    let mut out = Vec::with_capacity(t.ops.len());
    for (i, op) in t.ops.iter().enumerate() {
        let at = at_op(h, txn, i);
        match op {
            Op::Read { obj, value } => out.push(IntOp::Read {
                key: int_key(h, *obj, format, &at)?,
                value: read_as_int(h, *obj, *value, format, &at)?,
            }),
            Op::Write { obj, value } => {
                if *value == ValueId::ABSENT {
                    return Err(unsupported(format, format!("{at}: a delete (the format has no deletes)")));
                }
                out.push(IntOp::Write {
                    key: int_key(h, *obj, format, &at)?,
                    value: int_value(h, *value, format, &at)?,
                })
            }
            _ => return Err(unsupported(format, format!("{at}: only item reads and writes of integers"))),
        }
    }
    Ok(out)
}

/// Adds an integer item operation to `ops`, interning the kv object and value.
pub(crate) fn push_int_op(h: &mut History, ops: &mut Vec<Op>, op: IntOp) {
    let kv = h.intern_table(KV_TABLE);
    match op {
        IntOp::Read { key, value } => {
            let obj = h.intern_object(kv, Scalar::Int(key));
            let value = h.intern_value(Value::Scalar(Scalar::Int(value)));
            ops.push(Op::Read { obj, value });
        }
        IntOp::Write { key, value } => {
            let obj = h.intern_object(kv, Scalar::Int(key));
            let value = h.intern_value(Value::Scalar(Scalar::Int(value)));
            ops.push(Op::Write { obj, value });
        }
    }
}
