//! The state `bind` shares between kube-scheduler's concurrent bind requests, as the server
//! uses it for each arrival: take a ticket, park the caller under it, pass the gang's barrier,
//! read the held count for `/metrics`, and answer every released caller. Two structures:
//!
//! - `one_lock`: a `Mutex` each around the barrier, the parked callers and the ticket counter
//!   (what the server kept before issue 31);
//! - `sharded`: what the server keeps, the barrier's gangs in a `DashMap`, the parked callers
//!   in another, an atomic ticket counter.
//!
//! Both run the real [`Barrier`]. Gangs of 8, each pod's bind arriving from another thread as
//! kube-scheduler's binding goroutines do. Measures arrivals per second; README ("Shared
//! state") records a run.
//!
//! `cargo bench -p tephra-extender --bench barrier`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dashmap::DashMap;
use tephra_extender::barrier::{Arrival, Barrier, Release, Ticket};
use tephra_extender::index::Needs;

/// Pods per gang (its minMember).
const GANG: usize = 8;
/// Gangs per iteration.
const GANGS: usize = 2_048;
const TIMEOUT_MS: i64 = 20_000;

/// One arrival's trip through the shared state; returns how many callers it answered.
trait Shared: Send + Sync {
    fn arrive(&self, gang: &str, pod: String, needs: &Needs) -> usize;
}

/// Everything behind one lock each, as the server kept it before.
struct OneLock {
    barrier: Mutex<Barrier>,
    waiting: Mutex<HashMap<Ticket, u64>>,
    next: Mutex<Ticket>,
}

impl Shared for OneLock {
    fn arrive(&self, gang: &str, pod: String, needs: &Needs) -> usize {
        let ticket = {
            let mut t = self.next.lock().unwrap();
            *t += 1;
            *t
        };
        self.waiting.lock().unwrap().insert(ticket, ticket);
        let out = self
            .barrier
            .lock()
            .unwrap()
            .arrive(gang, arrival(ticket, pod), needs, &[], 0);
        black_box(self.barrier.lock().unwrap().held());
        answer(out, |t| self.waiting.lock().unwrap().remove(&t).is_some())
    }
}

/// As the server keeps it: the barrier's gangs in a `DashMap`, the parked callers in another,
/// an atomic ticket counter.
struct Sharded {
    barrier: Barrier,
    waiting: DashMap<Ticket, u64>,
    next: AtomicU64,
}

impl Shared for Sharded {
    fn arrive(&self, gang: &str, pod: String, needs: &Needs) -> usize {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.waiting.insert(ticket, ticket);
        let out = self
            .barrier
            .arrive(gang, arrival(ticket, pod), needs, &[], 0);
        black_box(self.barrier.held());
        answer(out, |t| self.waiting.remove(&t).is_some())
    }
}

fn arrival(ticket: Ticket, pod: String) -> Arrival {
    Arrival {
        ticket,
        pod,
        role: None,
        node: "node-1".into(),
    }
}

fn answer(out: Vec<Release>, mut take: impl FnMut(Ticket) -> bool) -> usize {
    out.into_iter()
        .filter(|r| match r {
            Release::Bind(a) => take(a.ticket),
            Release::Fail(t, _) => take(*t),
        })
        .count()
}

/// `threads` threads pass `GANGS` gangs through `shared`; arrival `i` (pod `i % GANG` of gang
/// `i / GANG`) is made by thread `i % threads`. Returns the callers answered.
fn run(shared: &Arc<dyn Shared>, gangs: &Arc<Vec<String>>, threads: usize, round: usize) -> usize {
    let needs = Arc::new(Needs {
        min_member: GANG as u32,
        roles: Default::default(),
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (shared, gangs, needs) =
                (Arc::clone(shared), Arc::clone(gangs), Arc::clone(&needs));
            std::thread::spawn(move || {
                let mut answered = 0;
                for i in (t..GANGS * GANG).step_by(threads) {
                    let gang = &gangs[(i / GANG + round * GANGS) % gangs.len()];
                    let pod = format!("{gang}-{}", i % GANG);
                    answered += shared.arrive(gang, pod, &needs);
                }
                answered
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

fn one_lock() -> Arc<dyn Shared> {
    Arc::new(OneLock {
        barrier: Mutex::new(Barrier::new(TIMEOUT_MS)),
        waiting: Mutex::default(),
        next: Mutex::default(),
    })
}

fn sharded() -> Arc<dyn Shared> {
    Arc::new(Sharded {
        barrier: Barrier::new(TIMEOUT_MS),
        waiting: DashMap::new(),
        next: AtomicU64::new(0),
    })
}

fn barrier(c: &mut Criterion) {
    let gangs: Arc<Vec<String>> = Arc::new(
        (0..GANGS * 4)
            .map(|g| format!("ns-{}/gang-{g}", g % 16))
            .collect(),
    );
    let mut group = c.benchmark_group("barrier");
    for threads in [1, 2, 4] {
        group.throughput(Throughput::Elements((GANGS * GANG) as u64));
        for (name, make) in [
            ("one_lock", one_lock as fn() -> Arc<dyn Shared>),
            ("sharded", sharded),
        ] {
            group.bench_function(format!("{name}/{threads}_threads"), |b| {
                let shared = make();
                let mut round = 0;
                b.iter(|| {
                    round += 1;
                    let answered = run(&shared, &gangs, threads, round);
                    assert_eq!(answered, GANGS * GANG, "every caller answered");
                    black_box(answered)
                });
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = barrier
}
criterion_main!(benches);
