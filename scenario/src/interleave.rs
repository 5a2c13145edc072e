//! Every interleaving of a spec's sessions that keeps each session's order, in
//! isolationtester's order, one at a time: counted (a multinomial coefficient), built by
//! number (unranked by counting) or walked (each the next multiset permutation), never
//! listed in memory.

use crate::spec::{Permutation, PermutationStep, Spec};

/// The number of interleavings of sessions with `counts` steps each, keeping each
/// session's order; `None` beyond 64 bits.
pub(crate) fn interleavings(counts: &[usize]) -> Option<u64> {
    // Built one binomial at a time: C(placed + c, c) for each session's c steps; each
    // partial product is itself a binomial, so every division is exact.
    let mut total: u128 = 1;
    let mut placed: u128 = 0;
    for &c in counts {
        for i in 1..=c as u128 {
            placed += 1;
            total = total.checked_mul(placed)? / i;
            if total > u64::MAX as u128 {
                return None;
            }
        }
    }
    u64::try_from(total).ok()
}

/// The permutations of a spec, one at a time: the listed ones, or the interleavings in
/// isolationtester's order, each the next multiset permutation of the sequence of session
/// numbers (lexicographic order is the order of its depth-first walk).
pub(crate) struct Interleavings<'a> {
    spec: &'a Spec,
    /// The listed permutation to give next.
    listed: usize,
    /// The session of each step of the next interleaving; `None` when done.
    next: Option<Vec<usize>>,
}

impl<'a> Interleavings<'a> {
    pub(crate) fn new(spec: &'a Spec) -> Self {
        let first = spec
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(s, session)| std::iter::repeat_n(s, session.steps.len()))
            .collect();
        Interleavings { spec, listed: 0, next: spec.permutations.is_empty().then_some(first) }
    }
}

impl Iterator for Interleavings<'_> {
    type Item = Permutation;

    fn next(&mut self) -> Option<Permutation> {
        if !self.spec.permutations.is_empty() {
            let p = self.spec.permutations.get(self.listed).cloned();
            self.listed += 1;
            return p;
        }
        let order = self.next.take()?;
        let mut taken = vec![0usize; self.spec.sessions.len()];
        let steps = order
            .iter()
            .map(|&s| {
                let name = self.spec.sessions[s].steps[taken[s]].name.clone();
                taken[s] += 1;
                PermutationStep { name, blockers: Vec::new() }
            })
            .collect();
        self.next = next_multiset_permutation(order);
        Some(Permutation { steps, line: 0 })
    }
}

/// The next permutation of `v` in lexicographic order (`None` after the last).
fn next_multiset_permutation(mut v: Vec<usize>) -> Option<Vec<usize>> {
    let i = (1..v.len()).rev().find(|&i| v[i - 1] < v[i])?;
    let j = (i..v.len()).rev().find(|&j| v[j] > v[i - 1])?;
    v.swap(i - 1, j);
    v[i..].reverse();
    Some(v)
}
