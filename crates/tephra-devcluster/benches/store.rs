//! The store of one API server under concurrent requests, as a member sees them while gangs
//! run: each thread stands for a client (the scheduler's binds, the kubelet's status writes,
//! a controller) and updates its pods, creates and deletes events, reads a PodGroup and, once
//! in 64 steps, lists its namespace's pods; a watcher of each kind takes every change. Measures
//! steps per second; README ("Shared state") records a run against a `DashMap` store.
//!
//! `cargo bench -p tephra-devcluster --bench store`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tephra_devcluster::store::{Store, Subscriber};
use tokio::sync::mpsc;

/// Steps per thread per iteration.
const STEPS: usize = 4_000;
/// Pods per thread's namespace.
const PODS: usize = 256;
const KINDS: [&str; 3] = ["/pods", "/events", "/podgroups"];

fn object(ns: &str, name: &str, step: usize) -> Value {
    json!({"metadata": {"namespace": ns, "name": name},
           "status": {"phase": "Running", "step": step}})
}

/// A store with each thread's pods and PodGroup, and a draining watcher per kind.
fn store(threads: usize) -> Arc<Store> {
    let store = Arc::new(Store::new(1_000));
    for t in 0..threads {
        let ns = format!("team-{t}");
        for p in 0..PODS {
            store
                .create("/pods", object(&ns, &format!("pod-{p}"), 0))
                .unwrap();
        }
        store.create("/podgroups", object(&ns, "gang", 0)).unwrap();
    }
    for kind in KINDS {
        let (tx, mut rx) = mpsc::unbounded_channel();
        store.watch(kind, None, Subscriber::Unbounded(tx)).unwrap();
        std::thread::spawn(move || while rx.blocking_recv().is_some() {});
    }
    store
}

fn run(store: &Arc<Store>, threads: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(store);
            std::thread::spawn(move || {
                let ns = format!("team-{t}");
                for step in 0..STEPS {
                    let key = (ns.clone(), format!("pod-{}", step % PODS));
                    let rv = store.get("/pods", &key).unwrap().rv;
                    // Another client may have written it meanwhile: a conflict, as on a server.
                    let _ = black_box(store.replace("/pods", &key, rv, object(&ns, &key.1, step)));
                    let name = format!("event-{step}");
                    let ev = store.create("/events", object(&ns, &name, step)).unwrap();
                    store.remove("/events", &ev.key(), None).unwrap();
                    black_box(store.get("/podgroups", &(ns.clone(), "gang".into())));
                    if step % 64 == 0 {
                        black_box(store.list("/pods", Some(&ns), None).0.len());
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    for threads in [1, 2, 4] {
        group.throughput(Throughput::Elements((STEPS * threads) as u64));
        group.bench_function(format!("{threads}_clients"), |b| {
            let store = store(threads);
            b.iter(|| run(&store, threads));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
