//! The version certificate: what the database says about the order of versions.

use rustc_hash::FxHashMap;

use crate::{ObjId, TxnId};

/// Who installed a version: the implicit initial transaction or a history transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Writer {
    /// The implicit initial transaction (the header's `initial`, or the unborn object).
    Initial,
    /// A committed transaction of the history.
    Txn(TxnId),
}

impl Writer {
    /// The transaction, unless this is the initial version.
    pub fn txn(self) -> Option<TxnId> {
        match self {
            Writer::Initial => None,
            Writer::Txn(t) => Some(t),
        }
    }
}

/// Which version of one object a predicate operation evaluated its predicate on, or (isocert
/// extension) which version an item read saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeenVersion {
    /// The object.
    pub obj: ObjId,
    /// The transaction whose version it saw.
    pub writer: Writer,
}

/// An operation (a predicate operation or an item read), named by its transaction and op index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpRef {
    /// The transaction.
    pub txn: TxnId,
    /// The operation's index in that transaction's ops.
    pub op: u32,
}

/// A version certificate: per-object version order, per-predicate version sets and the
/// expected serialization order. Every part is optional; each checker says what it needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Certificate {
    /// Per object, the committed transactions that installed its versions, oldest first
    /// (after the implicit initial version). `None`: the certificate has no version order.
    pub version_order: Option<FxHashMap<ObjId, Vec<TxnId>>>,
    /// Per predicate operation, the version of each object it evaluated; an object not
    /// listed was unborn for it. Per item read (isocert extension, for reads whose value
    /// several versions hold), exactly one entry: the version of the object it saw.
    /// `None`: the certificate has no version sets.
    pub version_sets: Option<FxHashMap<OpRef, Vec<SeenVersion>>>,
    /// The expected serialization order of the committed transactions (Enne).
    pub serialization_order: Option<Vec<TxnId>>,
}

impl Certificate {
    /// Whether the certificate carries nothing at all.
    pub fn is_empty(&self) -> bool {
        self.version_order.is_none() && self.version_sets.is_none() && self.serialization_order.is_none()
    }
}
