//! Columns of optional transaction fields that most histories never fill.
//!
//! Timestamps (Chronos, Aion, v1 with `start_ts`) and clients' real times are absent from
//! most histories (every Plume, dbcop or Cobra file): a column of `Option`s would still cost
//! its 24 or 32 bytes a transaction. A [`LazyColumn`] stays empty until the first
//! transaction that has the field, then holds a value (or `None`) for every transaction.

/// The optional field of each transaction, by column index: empty until the first
/// transaction that has one, then padded with `None` for those before it.
#[derive(Clone, Debug)]
pub(crate) struct LazyColumn<T>(Vec<Option<T>>);

impl<T> Default for LazyColumn<T> {
    fn default() -> Self {
        LazyColumn(Vec::new())
    }
}

impl<T: Copy> LazyColumn<T> {
    /// Records `value` for the transaction at column index `at` (the one after the last
    /// recorded, or after the last of a column still empty).
    #[inline]
    pub(crate) fn push(&mut self, at: usize, value: Option<T>) {
        if value.is_some() || !self.0.is_empty() {
            self.0.resize(at, None);
            self.0.push(value);
        }
    }

    /// The field of the transaction at column index `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        self.0.get(i).copied().flatten()
    }

    /// Appends the fields of the first `count` transactions of `next` as those from column
    /// index `at` on (this column holding those before `at`), staying empty if both are.
    pub(crate) fn extend_from(&mut self, at: usize, next: &LazyColumn<T>, count: usize) {
        if !next.0.is_empty() || !self.0.is_empty() {
            self.0.resize(at, None);
            self.0.extend((0..count).map(|i| next.get(i)));
        }
    }

    /// Forgets the first `n` transactions (retired: the column index of the others drops by `n`).
    pub(crate) fn drain_front(&mut self, n: usize) {
        let held = n.min(self.0.len());
        self.0.drain(..held);
    }

    /// Forgets every transaction, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// The bytes the column has allocated.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.capacity() * std::mem::size_of::<Option<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::LazyColumn;

    #[test]
    fn stays_empty_until_a_value_then_pads() {
        let mut column = LazyColumn::default();
        column.push(0, None);
        column.push(1, None);
        assert_eq!(column.heap_bytes(), 0);
        column.push(2, Some(7u64));
        column.push(3, None);
        assert_eq!((column.get(0), column.get(2), column.get(3), column.get(9)), (None, Some(7), None, None));
        column.drain_front(3);
        assert_eq!((column.get(0), column.get(1)), (None, None));
        let mut other = LazyColumn::default();
        other.extend_from(5, &LazyColumn::default(), 4);
        assert_eq!(other.heap_bytes(), 0);
        other.extend_from(5, &column, 1);
        other.extend_from(6, &LazyColumn(vec![Some(1)]), 1);
        assert_eq!((other.get(4), other.get(6)), (None, Some(1)));
    }
}
