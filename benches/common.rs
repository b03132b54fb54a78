//! The benchmark worlds, generated deterministically in code.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use tephra_scheduler::Cache;
use tephra_scheduler::builder::synthetic::{
    FleetShape, Rng, add_running, add_workload, build_fleet,
};

/// A: one cluster of 5,000 nodes (4,000 CPU nodes of 64 cores / 256Gi, 1,000 GPU nodes of
/// 8 GPUs) and 50,000 pending pods in 5,000 gang jobs of 1 to 64 pods, 30% of them GPU jobs.
pub fn world_a() -> Cache {
    let mut c = Cache::new();
    build_fleet(
        &mut c,
        FleetShape {
            clusters: 1,
            cpu_nodes: 4000,
            gpu_nodes: 1000,
        },
    )
    .unwrap();
    add_workload(&mut c, &mut Rng::new(0xA), 5000, 50_000, 0.3, 1).unwrap();
    c
}

/// B: 20 clusters x 500 nodes (400 CPU + 100 GPU each) and 100,000 pending pods in 10,000 gang
/// jobs, one in ten pinned to a region.
pub fn world_b() -> Cache {
    let mut c = fleet_20x500();
    add_workload(&mut c, &mut Rng::new(0xB), 10_000, 100_000, 0.3, 20).unwrap();
    c
}

/// C: 10,000 nodes and 100,000 running pods with nothing new to place.
pub fn world_c() -> Cache {
    let mut c = fleet_20x500();
    add_running(&mut c, 10, 10).unwrap();
    c
}

/// 20 clusters x 500 nodes (400 CPU + 100 GPU each): 10,000 nodes.
fn fleet_20x500() -> Cache {
    let mut c = Cache::new();
    build_fleet(
        &mut c,
        FleetShape {
            clusters: 20,
            cpu_nodes: 400,
            gpu_nodes: 100,
        },
    )
    .unwrap();
    c
}
