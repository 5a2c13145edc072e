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
    /// Per predicate operation, its version set given by a snapshot instead of row by row
    /// (isocert extension, [`crate::SnapshotSet`]); an operation is in at most one of
    /// `version_sets` and `snapshot_sets`. `None`: there are none.
    pub snapshot_sets: Option<FxHashMap<OpRef, crate::SnapshotSet>>,
    /// The expected serialization order of the committed transactions (Enne).
    pub serialization_order: Option<Vec<TxnId>>,
    /// Whether the version order's writers identify the versions (isocert extension
    /// `"version_identity": "writer"`): the database recorded who wrote each version
    /// (PostgreSQL's `xmin`, the binary log), so two writers of one value are two versions,
    /// not a duplicate write; only an item read of a value several versions hold needs the
    /// version it saw named in `version_sets`, or it is ambiguous (`duplicate-write`).
    /// `false`: versions are told apart by value, as the shared spec reads them.
    pub writer_identity: bool,
    /// Operations whose outcome rests on a value this certificate does not show (isocert
    /// extension `hidden_reads`, what `isocert serve` marks): no checker may call a history
    /// with such an operation valid, nor an anomaly through it, so checking refuses it as
    /// uncertified. A database's own capture adds [`HiddenReason::ReadTimeUnknown`] where
    /// the database did not tell enough.
    pub hidden_reads: Vec<HiddenRead>,
}

/// An operation of the history whose outcome depends on a value written outside the
/// submitted history and not shown (see [`Certificate::hidden_reads`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HiddenRead {
    /// The operation.
    pub at: OpRef,
    /// Why its outcome rests on a hidden value.
    pub why: HiddenReason,
}

/// Why an operation's outcome rests on a hidden value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HiddenReason {
    /// An item read (or a row a predicate read returned) holds a value that no transaction
    /// of the submitted history wrote and that is not its initial value, of a row written
    /// outside the history: which version it saw would rest on comparing the claimed value
    /// with another writer's hidden value.
    ValueWrittenOutside,
    /// A predicate operation evaluated a version written outside the history whose value is
    /// not shown: whether it matched rests on that value.
    PredicateOverHidden,
    /// The database gave no read time for the operation (CockroachDB below SERIALIZABLE,
    /// MongoDB's snapshot within a client-measured bracket), and the bounds that the
    /// versions it returned and the client's measurements set leave commits that change
    /// what it saw: which versions it evaluated is not known.
    ReadTimeUnknown,
}

impl HiddenReason {
    /// The name in the certificate's JSON (`value-written-outside`).
    pub fn as_str(self) -> &'static str {
        match self {
            HiddenReason::ValueWrittenOutside => "value-written-outside",
            HiddenReason::PredicateOverHidden => "predicate-over-hidden",
            HiddenReason::ReadTimeUnknown => "read-time-unknown",
        }
    }

    /// The reason named `name` ([`as_str`](Self::as_str)).
    pub fn from_name(name: &str) -> Option<Self> {
        [HiddenReason::ValueWrittenOutside, HiddenReason::PredicateOverHidden, HiddenReason::ReadTimeUnknown]
            .into_iter()
            .find(|r| r.as_str() == name)
    }

    /// What it means, for an uncertified verdict.
    pub fn explain(self) -> &'static str {
        match self {
            HiddenReason::ValueWrittenOutside => {
                "its value was written outside the submitted history; this server does not reveal other writers' values"
            }
            HiddenReason::PredicateOverHidden => {
                "its predicate evaluated a row written outside the submitted history; this server does not reveal other writers' values"
            }
            HiddenReason::ReadTimeUnknown => {
                "the database gave no read time for it, and commits between the bounds its returned versions set change what it saw"
            }
        }
    }
}

impl Certificate {
    /// Whether the certificate carries nothing at all.
    pub fn is_empty(&self) -> bool {
        self.version_order.is_none()
            && self.version_sets.is_none()
            && self.snapshot_sets.is_none()
            && self.serialization_order.is_none()
    }
}

/// A writer the certificate names that is not a transaction of the history (isocert
/// extension `foreign_writers`, as `isocert serve` answers): another client wrote rows the
/// history touched, so its versions belong in the version order, but neither its id nor
/// the values the history did not read may be shown. Reading such a certificate adds a
/// committed transaction of its own session for each foreign writer.
#[derive(Clone, Debug, PartialEq)]
pub struct ForeignWriter {
    /// The transaction standing for it in the history (named `~1`, `~2`, ...).
    pub txn: TxnId,
    /// What it wrote: per object, the value when the history read it, else `None`
    /// (opaque: see [`opaque_value`]).
    pub writes: Vec<(ObjId, Option<crate::ValueId>)>,
}

/// The stand-in for a version whose value is not shown: SQL NULL for a key-value object,
/// a row of NULLs otherwise. No read returns it and no comparison matches it, which is
/// what the server checks before it leaves a value out (a predicate read that evaluated an
/// opaque version gets the same answer from the stand-in as from the real row).
pub fn opaque_value(h: &mut crate::History, obj: ObjId) -> crate::ValueId {
    let table = h.object(obj).table;
    if h.table(table).is_kv() {
        h.intern_value(crate::Value::Scalar(crate::Scalar::Null))
    } else {
        h.intern_row(&[])
    }
}

/// Whether `value` is the opaque stand-in of `obj` ([`opaque_value`]): several foreign
/// writers may install it, like the absent value, without making a read ambiguous (no read
/// returns it: the server shows every value the history read).
pub fn is_opaque_value(h: &crate::History, obj: ObjId, value: crate::ValueId) -> bool {
    let table = h.object(obj).table;
    let stand_in = if h.table(table).is_kv() {
        crate::Value::Scalar(crate::Scalar::Null)
    } else {
        crate::Value::Row(crate::Row::new(Vec::new()))
    };
    h.value_id(&stand_in) == Some(value)
}
