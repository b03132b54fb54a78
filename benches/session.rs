//! Scheduler session benchmarks A to F, Q, S and T (see README for the numbers and the command).
//!
//! Run: `cargo bench --bench session` (`TEPHRA_BENCH_WORLDS=AE` builds and measures only A and
//! E). A one-shot summary (pods bound, session time, pods per second) is printed before each
//! world's criterion measurement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
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

/// The worlds to build and measure: all, or those whose letters `TEPHRA_BENCH_WORLDS` names
/// (`TEPHRA_BENCH_WORLDS=AEF cargo bench --bench session`).
fn wanted(world: char) -> bool {
    std::env::var("TEPHRA_BENCH_WORLDS")
        .ok()
        .is_none_or(|w| w.contains(world))
}

fn preempt_summary(dw: &Cache, evict_config: &Arc<SchedulerConfig>) {
    let start = Instant::now();
    let d = schedule(dw.snapshot(), Arc::clone(evict_config), 0, 1);
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

/// A world to allocate: its letter, its benchmark name and how to build it.
type Allocating = (char, &'static str, fn() -> Cache);

fn bench(c: &mut Criterion) {
    let config = Arc::new(SchedulerConfig::default_config());
    let mut g = c.benchmark_group("session");
    g.sample_size(10);
    let allocating: [Allocating; 6] = [
        (
            'A',
            "A: 5k nodes, 50k pending pods, allocate",
            common::world_a,
        ),
        (
            'B',
            "B: 20x500 nodes, 100k pending pods, allocate",
            common::world_b,
        ),
        (
            'E',
            "E: A with spread and a volume per pod, allocate",
            || common::world_with_contracts(common::Contracts::SpreadAndVolume),
        ),
        ('F', "F: A with GPUs from DRA claims, allocate", || {
            common::world_with_contracts(common::Contracts::DraGpus)
        }),
        ('Q', "Q: A over 100 queues, allocate", common::world_q),
        (
            'T',
            "T: A in 625 racks under 25 spines, every gang hard (rack or spine), allocate",
            common::world_t,
        ),
    ];
    for (letter, name, build) in allocating {
        if !wanted(letter) {
            continue;
        }
        let w = build();
        summary(name, &w);
        g.bench_function(name, |bench| {
            bench.iter(|| black_box(schedule(w.snapshot(), Arc::clone(&config), 0, 1)))
        });
    }
    if wanted('D') {
        let dw = common::world_d();
        let evict_config = Arc::new(common::config_with_eviction());
        preempt_summary(&dw, &evict_config);
        g.bench_function(
            "D: 10k nodes, 96k running pods, preempt + reclaim",
            |bench| {
                bench.iter(|| black_box(schedule(dw.snapshot(), Arc::clone(&evict_config), 0, 1)))
            },
        );
    }
    if wanted('S') {
        let sw = common::world_s();
        let next = common::settle(&mut sw.clone(), 0);
        let start = Instant::now();
        let d = schedule(sw.snapshot(), Arc::clone(&config), 0, next);
        println!(
            "S: {} nodes, {} jobs ({} active, {} in the backlog), a session with nothing changed: {:.2} ms, {} binds, {} PodGroup statuses",
            sw.world().nodes.len(),
            sw.world().jobs.len(),
            sw.world().active_jobs.len(),
            sw.world().backlog.len(),
            start.elapsed().as_secs_f64() * 1e3,
            d.binds.len(),
            d.groups.len()
        );
        g.bench_function(
            "S: saturated 64 nodes, 6k gangs waiting, nothing changed",
            |bench| bench.iter(|| black_box(schedule(sw.snapshot(), Arc::clone(&config), 0, next))),
        );
        g.bench_function(
            "S: saturated 64 nodes, 6k gangs waiting, one pod finished",
            |bench| {
                bench.iter_batched(
                    || {
                        let mut c = sw.clone();
                        common::one_pod_finishes(&mut c);
                        c
                    },
                    |c| black_box(schedule(c.snapshot(), Arc::clone(&config), 0, next)),
                    BatchSize::SmallInput,
                )
            },
        );
    }
    if wanted('C') {
        let cw = common::world_c();
        summary("C", &cw);
        g.sample_size(50);
        g.bench_function("C: 10k nodes, 100k running pods, open+close", |bench| {
            bench.iter(|| {
                let ssn = open_session(cw.snapshot(), &config, 0, 1);
                // Opening includes placement's node classes, which every session builds.
                black_box(Placer::new(&ssn));
                black_box(ssn.close())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
