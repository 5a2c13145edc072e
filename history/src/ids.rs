//! Dense integer ids that the loader interns every name into.
//!
//! Checkers index vectors with these ids instead of hashing strings: an id is the
//! position of the thing in the owning [`History`](crate::History) table.

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as a vector index.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of the thing at vector index `index`.
            #[inline]
            pub fn from_index(index: usize) -> Self {
                Self(u32::try_from(index).expect("more than u32::MAX interned ids"))
            }
        }
    };
}

dense_id!(
    /// A transaction: its position in [`History::txns`](crate::History::txns).
    TxnId
);
dense_id!(
    /// An object (a row: table plus primary key), interned at load time.
    ObjId
);
dense_id!(
    /// A client session (one connection), interned at load time.
    SessionId
);
dense_id!(
    /// A table, interned at load time; table `kv` is the key-value store.
    TableId
);
dense_id!(
    /// A column of one table, in the order the loader first saw it.
    ColId
);
dense_id!(
    /// A distinct predicate (table plus `where` text), interned so it is compiled once.
    PredId
);
dense_id!(
    /// A distinct value (scalar, row, list or absent), interned at load time.
    ValueId
);

impl ValueId {
    /// The value of an object that does not exist (unborn or deleted).
    pub const ABSENT: ValueId = ValueId(0);
}
