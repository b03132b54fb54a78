//! The generators of the benchmark worlds (`benches/common/synthetic.rs`), under test.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

#[path = "../benches/common/synthetic.rs"]
mod synthetic;

use synthetic::{Rng, gang_sizes};

#[test]
fn gang_sizes_hit_the_pod_total_within_bounds() {
    let mut rng = Rng::new(7);
    let sizes = gang_sizes(&mut rng, 5000, 50_000);
    assert_eq!(sizes.iter().map(|s| *s as usize).sum::<usize>(), 50_000);
    assert!(sizes.iter().all(|s| (1..=64).contains(s)));
    assert_eq!(
        gang_sizes(&mut Rng::new(7), 5000, 50_000),
        sizes,
        "deterministic"
    );
}
