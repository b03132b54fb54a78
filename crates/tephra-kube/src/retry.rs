//! How long a failing watch waits before it asks again.
//!
//! kube's default (client-go's reflector: 0.8 s doubling to 30 s, doubled again at random)
//! is kind to a struggling API server, but a scheduler that waits 30 s after its API server
//! came back is 30 s blind: no gang is placed in that time. Paged lists hid this, since every
//! attempt starts with a marker event that resets the backoff; a streaming list fails before
//! any event, so its delays grow. [`watch`] doubles from 0.5 s to at most 4 s instead: a
//! cluster's twenty-odd watchers then ask about five times a second while it is down, a cost
//! an API server does not notice, and each delay is spread ±25% so that they do not ask in
//! step.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use kube::runtime::utils::Backoff;

/// The first delay after a failure.
pub const FIRST: Duration = Duration::from_millis(500);
/// The longest delay, however long the failures go on.
pub const LONGEST: Duration = Duration::from_secs(4);

/// Delays for a watch: [`FIRST`], doubling up to [`LONGEST`], each spread ±25%. Reset by
/// kube's stream backoff whenever the watch yields an event.
pub fn watch() -> Delays {
    Delays {
        next: FIRST,
        seed: RandomState::new(),
        count: 0,
    }
}

/// See [`watch`].
pub struct Delays {
    next: Duration,
    seed: RandomState,
    count: u64,
}

impl Delays {
    /// A factor in [0.75, 1.25), different for every delay.
    fn spread(&mut self) -> f64 {
        self.count = self.count.wrapping_add(1);
        let bits = self.seed.hash_one(self.count);
        0.75 + (bits >> 11) as f64 / (1u64 << 53) as f64 * 0.5
    }
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.next;
        self.next = (self.next * 2).min(LONGEST);
        Some(base.mul_f64(self.spread()))
    }
}

impl Backoff for Delays {
    fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_half_a_second_and_never_pass_five_seconds() {
        let mut d = watch();
        let first: Vec<Duration> = d.by_ref().take(4).collect();
        let bases = [500, 1000, 2000, 4000];
        for (got, base) in first.iter().zip(bases) {
            let ms = got.as_millis() as u64;
            assert!(
                ms >= base * 3 / 4 && ms < base * 5 / 4,
                "{ms} ms is not within 25% of {base} ms"
            );
        }
        for got in d.by_ref().take(1000) {
            assert!(got < Duration::from_secs(5), "{got:?}");
            assert!(got >= Duration::from_secs(3), "{got:?}");
        }
        d.reset();
        assert!(d.next().is_some_and(|got| got < Duration::from_millis(625)));
    }

    #[test]
    fn delays_are_spread_so_that_watchers_do_not_retry_in_step() {
        let mut d = watch();
        d.next = LONGEST;
        let seen: std::collections::BTreeSet<u128> =
            d.take(50).map(|got| got.as_millis()).collect();
        assert!(seen.len() > 25, "only {} distinct delays", seen.len());
    }
}
