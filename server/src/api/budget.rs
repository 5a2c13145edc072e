//! Bounds on what requests with a valid token hold at once (issue 47): without them, slow
//! uploads with one token held `--max-connections` × `--max-body-mib` bytes.
//!
//! - [`BodyBudget`]: the bytes of request bodies held by all requests together (as sent,
//!   and once inflated, the larger of the two), reserved as they arrive (a declared
//!   `Content-Length` at once) and given back when the request is answered. A body that
//!   does not fit is refused with 503 and `Retry-After`.
//! - [`TokenSlots`]: how many certificate and check requests each token has in flight; one
//!   more is refused with 429 and `Retry-After`.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use tokio::sync::Semaphore;

use crate::tenants::TokenDigest;

/// The unit of the budget's permits (a semaphore's permits are counted in `u32` per
/// acquisition; KiB keep any body limit within that).
const UNIT: usize = 1024;

/// The byte budget shared by the bodies of every request in flight.
#[derive(Clone, Debug)]
pub(crate) struct BodyBudget {
    units: Arc<Semaphore>,
    bytes: usize,
}

impl BodyBudget {
    /// A budget of `bytes` (rounded up to whole KiB).
    pub(crate) fn new(bytes: usize) -> Self {
        BodyBudget { units: Arc::new(Semaphore::new(bytes.div_ceil(UNIT).max(1))), bytes }
    }

    /// The budget in bytes, for messages.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// An empty reservation, grown by [`BodyReservation::cover`].
    pub(crate) fn reserve(&self) -> BodyReservation {
        BodyReservation { units: Arc::clone(&self.units), held: 0 }
    }
}

/// Bytes of the [`BodyBudget`] one request holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct BodyReservation {
    units: Arc<Semaphore>,
    held: usize,
}

impl BodyReservation {
    /// Grows the reservation to cover `bytes`; `false` (and unchanged) when the budget has
    /// no room for them now.
    pub(crate) fn cover(&mut self, bytes: usize) -> bool {
        let need = bytes.div_ceil(UNIT);
        if need <= self.held {
            return true;
        }
        let Ok(more) = u32::try_from(need - self.held) else { return false };
        match self.units.try_acquire_many(more) {
            Ok(permit) => {
                permit.forget();
                self.held = need;
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        self.units.add_permits(self.held);
    }
}

/// Each token's certificate and check requests in flight, at most `cap` at once.
#[derive(Debug)]
pub(crate) struct TokenSlots {
    cap: usize,
    in_flight: Arc<Mutex<FxHashMap<TokenDigest, usize>>>,
}

impl TokenSlots {
    /// At most `cap` requests per token at once.
    pub(crate) fn new(cap: usize) -> Self {
        TokenSlots { cap: cap.max(1), in_flight: Arc::default() }
    }

    /// The most requests a token may have in flight.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for one more request of `token`, held until dropped; `None` when the token
    /// has `cap` requests in flight already.
    pub(crate) fn enter(&self, token: TokenDigest) -> Option<TokenSlot> {
        let mut in_flight = self.in_flight.lock().expect("token slots lock");
        let count = in_flight.entry(token).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(TokenSlot { token, in_flight: Arc::clone(&self.in_flight) })
    }
}

/// One request's place among its token's requests in flight.
#[derive(Debug)]
pub(crate) struct TokenSlot {
    token: TokenDigest,
    in_flight: Arc<Mutex<FxHashMap<TokenDigest, usize>>>,
}

impl Drop for TokenSlot {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = in_flight.get_mut(&self.token) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_given_back_and_never_overdrawn() {
        let budget = BodyBudget::new(10 * UNIT);
        let mut a = budget.reserve();
        assert!(a.cover(4 * UNIT + 1));
        assert!(a.cover(3 * UNIT), "a smaller size is already covered");
        let mut b = budget.reserve();
        assert!(b.cover(5 * UNIT));
        assert!(!b.cover(6 * UNIT), "4 + 1 + 6 KiB exceed 10");
        assert!(b.cover(5 * UNIT), "a refusal leaves the reservation as it was");
        drop(a);
        assert!(b.cover(10 * UNIT));
        drop(b);
        assert!(budget.reserve().cover(10 * UNIT));
    }

    #[test]
    fn each_token_has_at_most_its_cap_in_flight() {
        let slots = TokenSlots::new(2);
        let (x, y) = ([1; 32], [2; 32]);
        let first = slots.enter(x).unwrap();
        let _second = slots.enter(x).unwrap();
        assert!(slots.enter(x).is_none());
        let _other = slots.enter(y).expect("another token has its own slots");
        drop(first);
        assert!(slots.enter(x).is_some());
    }
}
