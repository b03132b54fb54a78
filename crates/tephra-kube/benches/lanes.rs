//! The executor's per-object lanes (`tephra_kube::lanes`) as its workers use them: several
//! threads each carry out writes, every write entering its object's lane and leaving it when
//! done, over many objects with a few hot ones (a gang's PodGroup status written by each of its
//! pods' binds). Measures writes per second through the lanes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tephra_kube::lanes::Lanes;

/// Writes each thread carries out per iteration.
const WRITES: usize = 20_000;
/// Distinct objects; one write in four goes to one of the 8 hot ones.
const OBJECTS: usize = 4_096;

fn keys() -> Vec<String> {
    (0..OBJECTS).map(|i| format!("default/pod-{i}")).collect()
}

/// `threads` workers, each running `WRITES` writes through the lanes: a write whose object is
/// busy waits in its lane and is carried out by the worker that leaves the lane.
fn run(lanes: &Arc<Lanes<usize>>, keys: &Arc<Vec<String>>, threads: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lanes, keys) = (Arc::clone(lanes), Arc::clone(keys));
            std::thread::spawn(move || {
                let mut done = 0usize;
                for i in 0..WRITES {
                    let n = i.wrapping_mul(2_654_435_761).wrapping_add(t * 7919);
                    let key = if n % 4 == 0 {
                        &keys[n % 8]
                    } else {
                        &keys[n % OBJECTS]
                    };
                    let mut next = lanes.enter(key, i);
                    while let Some(w) = next {
                        done += black_box(w) & 1;
                        next = lanes.leave(key);
                    }
                }
                done
            })
        })
        .collect();
    for h in handles {
        black_box(h.join().unwrap());
    }
}

fn lanes(c: &mut Criterion) {
    let keys = Arc::new(keys());
    let mut group = c.benchmark_group("lanes");
    for threads in [1, 2, 4] {
        group.throughput(Throughput::Elements((WRITES * threads) as u64));
        group.bench_function(format!("{threads}_workers"), |b| {
            let lanes = Arc::new(Lanes::default());
            b.iter(|| run(&lanes, &keys, threads));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = lanes
}
criterion_main!(benches);
