//! The state of one object in the simulation: a plain value, or a list built by appends.

use isocert_history::{KvHistory, KvValue, Scalar, Value};

/// What an object holds at one point of the simulated execution.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) enum ObjState {
    /// A value written (or the initial value); `Absent` for unborn or deleted objects.
    Plain(KvValue),
    /// A list, oldest element first, built by appends (elements are scalars).
    List(Vec<KvValue>),
    /// Nothing yet (before initialisation).
    #[default]
    Unset,
}

impl ObjState {
    /// The state an object starts in, from its initial value (a list value starts a list).
    pub(crate) fn initial(kv: &KvHistory, v: KvValue) -> ObjState {
        if let KvValue::Interned(id) = v {
            if let Value::List(items) = kv.dict().value(id) {
                return ObjState::List(
                    items.iter().map(|s| elem(kv, s).unwrap_or(KvValue::Absent)).collect(),
                );
            }
        }
        ObjState::Plain(v)
    }

    /// Applies a write.
    #[inline]
    pub(crate) fn write(&mut self, v: KvValue) {
        *self = ObjState::Plain(v);
    }

    /// Applies an append: a list grows; an absent object starts an empty list; a plain
    /// value is replaced by a list holding only the element (lists and plain values do not mix).
    pub(crate) fn append(&mut self, e: KvValue) {
        match self {
            ObjState::List(items) => items.push(e),
            _ => *self = ObjState::List(vec![e]),
        }
    }

    /// Whether a read that returned `seen` is explained by this state. An empty list and an
    /// absent object read alike (`null` or `[]`).
    pub(crate) fn explains(&self, kv: &KvHistory, seen: KvValue) -> bool {
        match self {
            ObjState::Plain(v) => *v == seen || (*v == KvValue::Absent && is_empty_list(kv, seen)),
            ObjState::List(items) => match seen {
                KvValue::Absent => items.is_empty(),
                KvValue::Interned(id) => match kv.dict().value(id) {
                    Value::List(read) => {
                        read.len() == items.len()
                            && read.iter().zip(items).all(|(s, e)| elem(kv, s) == Some(*e))
                    }
                    _ => false,
                },
                KvValue::Int(_) => false,
            },
            ObjState::Unset => seen == KvValue::Absent,
        }
    }

    /// The state a read leaves in the transaction's own view (the value read; a list value
    /// becomes a list state so later appends extend it).
    pub(crate) fn from_read(kv: &KvHistory, seen: KvValue) -> ObjState {
        ObjState::initial(kv, seen)
    }

    /// A human rendering.
    pub(crate) fn label(&self, kv: &KvHistory) -> String {
        match self {
            ObjState::Plain(v) => kv.value_label(*v),
            ObjState::List(items) => {
                let parts: Vec<String> = items.iter().map(|e| kv.value_label(*e)).collect();
                format!("[{}]", parts.join(", "))
            }
            ObjState::Unset => "absent".to_string(),
        }
    }
}

/// A list element as a [`KvValue`]: integers inline, other scalars by their interned id
/// (`None` when no operation of the history wrote that scalar, so it equals no element).
fn elem(kv: &KvHistory, s: &Scalar) -> Option<KvValue> {
    match s {
        Scalar::Int(i) => Some(KvValue::Int(*i)),
        other => kv.dict().value_id(&Value::Scalar(other.clone())).map(KvValue::Interned),
    }
}

fn is_empty_list(kv: &KvHistory, v: KvValue) -> bool {
    matches!(v, KvValue::Interned(id) if matches!(kv.dict().value(id), Value::List(items) if items.is_empty()))
}
