//! Values a checker computes that the history may not hold (lists built by appends), and
//! the column of a version that predicates and indexes look at.

use isocert_history::{History, ObjId, Scalar, Value, ValueId};
use rustc_hash::FxHashMap;

pub(crate) use isocert_oracle::column_value;

/// The history's interned values plus lists computed by replaying appends. A computed list
/// the history also holds gets the history's id, so equal values always share one id.
#[derive(Debug)]
pub(crate) struct ValueStore<'h> {
    h: &'h History,
    extra: Vec<Value>,
    extra_index: FxHashMap<Value, ValueId>,
    /// The history's empty list, if it holds one (computed lists are never empty): the
    /// only value [`ValueStore::as_version`] changes, found without reading the value a
    /// read returned (a cache miss per read of an item-only history, `perf`).
    empty_list: Option<ValueId>,
}

impl<'h> ValueStore<'h> {
    pub(crate) fn new(h: &'h History) -> Self {
        let empty_list = h.value_id(&Value::List(Box::default()));
        ValueStore { h, extra: Vec::new(), extra_index: FxHashMap::default(), empty_list }
    }

    /// The value with id `id` (history or computed).
    pub(crate) fn get(&self, id: ValueId) -> &Value {
        let n = self.h.value_count();
        if id.index() < n {
            self.h.value(id)
        } else {
            &self.extra[id.index() - n]
        }
    }

    /// Whether `id` is one of the history's own values (the oracle can only see those).
    pub(crate) fn is_history_value(&self, id: ValueId) -> bool {
        id.index() < self.h.value_count()
    }

    /// The list `base` (absent or a list) with `element` appended, interned.
    pub(crate) fn append(&mut self, base: ValueId, element: &Scalar) -> ValueId {
        let mut items: Vec<Scalar> = match self.get(base) {
            Value::List(items) => items.to_vec(),
            _ => Vec::new(),
        };
        items.push(element.clone());
        let value = Value::List(items.into_boxed_slice());
        if let Some(id) = self.h.value_id(&value) {
            return id;
        }
        if let Some(&id) = self.extra_index.get(&value) {
            return id;
        }
        let id = ValueId::from_index(self.h.value_count() + self.extra.len());
        self.extra.push(value.clone());
        self.extra_index.insert(value, id);
        id
    }

    /// The id of `value` if the history or this store holds it.
    pub(crate) fn lookup(&self, value: &Value) -> Option<ValueId> {
        self.h.value_id(value).or_else(|| self.extra_index.get(value).copied())
    }

    /// `value` as a version: an empty list read from a list object is the unborn object.
    pub(crate) fn as_version(&self, value: ValueId) -> ValueId {
        if Some(value) == self.empty_list {
            ValueId::ABSENT
        } else {
            value
        }
    }

    /// A person's rendering of version `value` of `obj`.
    pub(crate) fn label(&self, obj: ObjId, value: ValueId) -> String {
        if self.is_history_value(value) {
            self.h.value_label(obj, value)
        } else if let Value::List(items) = self.get(value) {
            let parts: Vec<String> = items.iter().map(|s| s.to_string()).collect();
            format!("[{}]", parts.join(", "))
        } else {
            "?".to_string()
        }
    }
}
