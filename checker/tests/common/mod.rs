//! Helpers shared by the brute-force tests.

/// Calls `f` with every permutation of `p[k..]` (after `p[..k]`).
pub(crate) fn permutations(p: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k == p.len() {
        f(p);
        return;
    }
    for i in k..p.len() {
        p.swap(k, i);
        permutations(p, k + 1, f);
        p.swap(k, i);
    }
}
