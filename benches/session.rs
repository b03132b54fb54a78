//! Scheduler session benchmarks A, B and C (see README for the numbers and the command).
//!
//! Run: `cargo bench --bench session`. A one-shot summary (pods bound, session time, pods per
//! second) is printed before criterion's measurements.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use tephra_scheduler::placement::Placer;
use tephra_scheduler::{Cache, SchedulerConfig, open_session, schedule};

fn summary(name: &str, cache: &Cache) {
    let config = Arc::new(SchedulerConfig::default_config());
    let start = Instant::now();
    let d = schedule(cache.snapshot(), config, 0, 1);
    let secs = start.elapsed().as_secs_f64();
    let pending: usize = cache
        .world()
        .tasks
        .iter()
        .filter(|(_, t)| t.spec.status == tephra_scheduler::model::TaskStatus::Pending)
        .count();
    println!(
        "{name}: {} nodes, {} pending pods, {} bound in {:.1} ms ({:.0} pods/s), {} gangs waiting",
        cache.world().nodes.len(),
        pending,
        d.binds.len(),
        secs * 1e3,
        d.binds.len() as f64 / secs,
        d.events.len()
    );
}

fn bench(c: &mut Criterion) {
    let config = Arc::new(SchedulerConfig::default_config());
    let a = common::world_a();
    summary("A", &a);
    let b = common::world_b();
    summary("B", &b);
    let cw = common::world_c();
    summary("C", &cw);
    let dw = common::world_d();
    let evict_config = Arc::new(common::config_with_eviction());
    {
        let start = Instant::now();
        let d = schedule(dw.snapshot(), Arc::clone(&evict_config), 0, 1);
        let secs = start.elapsed().as_secs_f64();
        let preempted = d
            .evictions
            .iter()
            .filter(|e| e.reason.starts_with("preempted"))
            .count();
        println!(
            "D: {} nodes, {} pods ({} running), preempt + reclaim session {:.1} ms: {} evicted by preempt, {} by reclaim, {} pods pipelined",
            dw.world().nodes.len(),
            dw.world().tasks.len(),
            dw.world()
                .tasks
                .iter()
                .filter(|(_, t)| t.spec.status == tephra_scheduler::model::TaskStatus::Running)
                .count(),
            secs * 1e3,
            preempted,
            d.evictions.len() - preempted,
            d.pipelined.len()
        );
    }

    let mut g = c.benchmark_group("session");
    g.sample_size(10);
    g.bench_function("A: 5k nodes, 50k pending pods, allocate", |bench| {
        bench.iter(|| black_box(schedule(a.snapshot(), Arc::clone(&config), 0, 1)))
    });
    g.bench_function("B: 20x500 nodes, 100k pending pods, allocate", |bench| {
        bench.iter(|| black_box(schedule(b.snapshot(), Arc::clone(&config), 0, 1)))
    });
    g.bench_function(
        "D: 10k nodes, 96k running pods, preempt + reclaim",
        |bench| bench.iter(|| black_box(schedule(dw.snapshot(), Arc::clone(&evict_config), 0, 1))),
    );
    g.sample_size(50);
    g.bench_function("C: 10k nodes, 100k running pods, open+close", |bench| {
        bench.iter(|| {
            let ssn = open_session(cw.snapshot(), &config, 0, 1);
            // Opening includes placement's node classes, which every session builds.
            black_box(Placer::new(&ssn));
            black_box(ssn.close())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
