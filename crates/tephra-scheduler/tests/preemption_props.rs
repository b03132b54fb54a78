//! Property tests for eviction: never for a job of equal or lower priority (preempt), never
//! below a gang's minMember, never in two clusters for one preemptor, and a queue's
//! capability is never exceeded by what a session places.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, QueueSpec, TaskStatus};
use tephra_scheduler::testing::{
    GangJob, Role, add_cluster, add_job, add_nodes, apply_binds, resources,
};
use tephra_scheduler::{Cache, Event, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    let text = DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

#[derive(Clone, Debug)]
struct J {
    replicas: u32,
    gpus: u32,
    min: u32,
    priority: i32,
    queue: u8,
}

fn job() -> impl Strategy<Value = J> {
    (
        1u32..4,
        prop_oneof![Just(2u32), Just(4), Just(8)],
        1u32..4,
        0i32..5,
        0u8..2,
    )
        .prop_map(|(replicas, gpus, min, priority, queue)| J {
            replicas,
            gpus,
            min: min.min(replicas),
            priority,
            queue,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn evictions_respect_priority_gangs_clusters_and_capability(
        clusters in 1usize..3,
        nodes in 1usize..4,
        first in prop::collection::vec(job(), 1..5),
        later in prop::collection::vec(job(), 1..4),
        cap_gpus in prop_oneof![Just(0u32), Just(8), Just(16)],
    ) {
        let mut c = Cache::new();
        for i in 0..clusters {
            add_cluster(&mut c, Cluster::named(&format!("c{i}"))).unwrap();
            add_nodes(&mut c, &format!("c{i}"), &format!("c{i}n"), nodes, &[("cpu", "64"), ("memory", "512Gi"), ("pods", "110"), ("nvidia.com/gpu", "8")], &[]).unwrap();
        }
        for q in ["q0", "q1"] {
            let mut spec = QueueSpec::named(q);
            if q == "q1" && cap_gpus > 0 {
                spec.capability = Some(resources(&mut c, &[("nvidia.com/gpu", &cap_gpus.to_string())]).unwrap());
            }
            c.apply(Event::QueueUpsert(Box::new(spec))).unwrap();
        }
        let gang = |name: String, j: &J, created: i64| {
            GangJob::new(&name, vec![Role::new("w", j.replicas, &[("cpu", "4"), ("memory", "16Gi"), ("nvidia.com/gpu", &j.gpus.to_string())])])
                .min_member(j.min)
                .priority(j.priority)
                .queue(if j.queue == 0 { "q0" } else { "q1" })
                .created(created)
        };
        for (i, j) in first.iter().enumerate() {
            add_job(&mut c, &gang(format!("run{i}"), j, i as i64)).unwrap();
        }
        let d = schedule(c.snapshot(), config(), 0, 1);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
        for (i, j) in later.iter().enumerate() {
            add_job(&mut c, &gang(format!("new{i}"), j, 100 + i as i64)).unwrap();
        }
        let d = schedule(c.snapshot(), config(), 0, 2);
        let w = c.world();
        let job_of = |key: &str| w.jobs.get(w.job_id(key).unwrap()).unwrap();
        // Who gained a place this session (bound or pipelined), per queue.
        let mut winners: BTreeMap<String, i32> = BTreeMap::new();
        for b in d.binds.iter().chain(&d.pipelined) {
            let j = job_of(&b.job);
            let p = w.job_priority(j);
            let e = winners.entry(j.queue().to_string()).or_insert(i32::MIN);
            *e = (*e).max(p);
        }
        let mut evicted_per_job: BTreeMap<&str, usize> = BTreeMap::new();
        let mut clusters_per_reason: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for e in &d.evictions {
            *evicted_per_job.entry(e.job.as_str()).or_insert(0) += 1;
            clusters_per_reason.entry(e.reason.as_str()).or_default().insert(e.cluster.as_str());
            let victim = job_of(&e.job);
            if e.reason.starts_with("preempted") {
                let best = winners.get(victim.queue()).copied().unwrap_or(i32::MIN);
                prop_assert!(w.job_priority(victim) < best, "{} (priority {}) preempted without a higher-priority winner: {}", e.job, w.job_priority(victim), e.reason);
            }
        }
        for (reason, cl) in &clusters_per_reason {
            prop_assert_eq!(cl.len(), 1, "one preemptor evicted in several clusters: {}", reason);
        }
        for (job, n) in evicted_per_job {
            let j = job_of(job);
            let ready = j.tasks.iter().filter(|t| w.tasks.get(**t).unwrap().spec.status == TaskStatus::Running).count();
            let left = ready - n;
            prop_assert!(left == 0 || left >= j.min_member() as usize, "{job} cut to {left} below its gang of {}", j.min_member());
        }
        let gpu = w.names.get("nvidia.com/gpu").unwrap();
        let request = |task: &str| w.tasks.get(w.task_id(task).unwrap()).unwrap().spec.shape.request;
        // Binds and pipelined reservations together never over-commit a node, counting the
        // room evictions free.
        let mut node_after: BTreeMap<(String, String), tephra_scheduler::resources::Resources> = BTreeMap::new();
        for (_, n) in w.nodes.iter() {
            node_after.insert((n.spec.cluster.clone(), n.spec.name.clone()), n.used);
        }
        for b in d.binds.iter().chain(&d.pipelined) {
            node_after.get_mut(&(b.cluster.clone(), b.node.clone())).unwrap().add(&request(&b.task));
        }
        for e in &d.evictions {
            let t = w.tasks.get(w.task_id(&e.task).unwrap()).unwrap();
            let (cluster, node) = t.spec.placement.clone().unwrap();
            node_after.get_mut(&(cluster, node)).unwrap().sub(&t.spec.shape.request);
        }
        for ((cluster, node), after) in &node_after {
            let n = w.nodes.get(w.node_id(cluster, node).unwrap()).unwrap();
            prop_assert!(after.get(gpu) <= n.spec.allocatable.get(gpu), "node {cluster}/{node} over-committed with pipelined pods: {} GPUs", after.get(gpu));
        }
        // Reclaim never takes a queue below its deserved share: with two queues of equal
        // weight, each deserves at least half the fleet or all it asks for.
        let total = (clusters * nodes * 8) as i64;
        for q in ["q0", "q1"] {
            // What the queue holds apart from reclaim: before the session, plus what this
            // session placed for it (bound or pipelined), less what preempt took within it.
            let before = w.queue_used.get(q).map_or(0, |r| r.get(gpu))
                + d.binds.iter().chain(&d.pipelined).filter(|b| job_of(&b.job).queue() == q).map(|b| request(&b.task).get(gpu)).sum::<i64>()
                - d.evictions.iter().filter(|e| e.reason.starts_with("preempted") && job_of(&e.job).queue() == q).map(|e| request(&e.task).get(gpu)).sum::<i64>();
            let reclaimed: i64 = d.evictions.iter()
                .filter(|e| e.reason.starts_with("reclaimed") && job_of(&e.job).queue() == q)
                .map(|e| request(&e.task).get(gpu))
                .sum();
            prop_assert!(before - reclaimed >= before.min(total / 2), "queue {q} reclaimed from {before} to {} GPUs, below half of {total}: {:?} {:?}", before - reclaimed, d.evictions, d.pipelined);
        }
        if cap_gpus > 0 {
            let mut held: i64 = w.queue_used.get("q1").map_or(0, |r| r.get(gpu));
            for b in &d.binds {
                let j = job_of(&b.job);
                if j.queue() == "q1" {
                    held += w.tasks.get(w.task_id(&b.task).unwrap()).unwrap().spec.shape.request.get(gpu);
                }
            }
            for e in &d.evictions {
                let j = job_of(&e.job);
                if j.queue() == "q1" {
                    held -= w.tasks.get(w.task_id(&e.task).unwrap()).unwrap().spec.shape.request.get(gpu);
                }
            }
            let before = w.queue_used.get("q1").map_or(0, |r| r.get(gpu));
            prop_assert!(held <= i64::from(cap_gpus).max(before), "queue q1 holds {held} GPUs over its capability {cap_gpus}");
        }
    }
}
