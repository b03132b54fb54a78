//! The differential test's only source of randomness: the project's SplitMix64
//! (`tephra_scenario::rng`), seeded by the sequence's number so a seed replays the same
//! requests on every machine, with the draws the generator needs.

/// A seeded generator.
pub struct Rng(tephra_scenario::rng::Rng);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(tephra_scenario::rng::Rng::new(seed ^ 0x5851_f42d_4c95_7f2d))
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.below(100) < percent
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[test]
fn the_same_seed_draws_the_same_requests() {
    let (mut a, mut b, mut c) = (Rng::new(7), Rng::new(7), Rng::new(8));
    let xs: Vec<usize> = (0..8).map(|_| a.below(1000)).collect();
    assert_eq!(xs, (0..8).map(|_| b.below(1000)).collect::<Vec<_>>());
    assert_ne!(xs, (0..8).map(|_| c.below(1000)).collect::<Vec<_>>());
}
