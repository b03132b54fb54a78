//! What a session's decisions and the cache say for the metrics: Volcano's scheduling and queue
//! metrics and tephra's per-cluster figures, recorded after every session.

use tephra_scheduler::Decisions;
use tephra_scheduler::cache::World;
use tephra_scheduler::model::GroupPhase;
use tephra_scheduler::resources::Resources;

use crate::metrics::Metrics;

/// Records one session's decisions (made at `now`, in seconds) and the cache's state.
pub fn session(m: &Metrics, world: &World, d: &Decisions, now: i64) {
    m.attempts
        .with_label_values(&["scheduled"])
        .inc_by(d.binds.len() as u64);
    for b in &d.binds {
        if let Some(t) = world.task_id(&b.task).and_then(|id| world.tasks.get(id)) {
            let waited = (now - t.spec.created).max(0);
            m.task.observe(waited as f64 * 1000.0);
        }
    }
    if !d.evictions.is_empty() {
        m.preemption_attempts.inc();
    }
    m.victims
        .set(i64::try_from(d.evictions.len()).unwrap_or(i64::MAX));
    let mut unschedulable_jobs = 0;
    // Every event explains a job that waits (not admitted, or not placed).
    for e in &d.events {
        let pending = world
            .job_id(&e.job)
            .and_then(|id| world.jobs.get(id))
            .map_or(0, |j| j.tally.pending);
        unschedulable_jobs += 1;
        m.attempts
            .with_label_values(&["unschedulable"])
            .inc_by(u64::try_from(pending).unwrap_or(0));
        m.unschedule_tasks
            .with_label_values(&[&e.job])
            .set(i64::from(pending));
    }
    // Jobs passed over as resting still wait, with nothing new to say: counted as before,
    // their per-job gauges keep the value their last event set.
    unschedulable_jobs += i64::from(d.resting.jobs);
    m.attempts
        .with_label_values(&["unschedulable"])
        .inc_by(d.resting.pending_tasks);
    m.unschedule_jobs.set(unschedulable_jobs);
    for g in &d.groups {
        if g.phase == GroupPhase::Running {
            let _ = m.unschedule_tasks.remove_label_values(&[&g.job]);
        }
        if g.phase != GroupPhase::Running {
            continue;
        }
        let Some(job) = world.job_id(&g.job).and_then(|id| world.jobs.get(id)) else {
            continue;
        };
        let Some(group) = &job.group else { continue };
        if g.conditions.iter().any(|c| c.kind == "Scheduled") {
            let took = (now - group.created).max(0) as f64 * 1000.0;
            m.e2e_job.observe(took);
            m.e2e_job_duration
                .with_label_values(&[&group.name, &group.queue, &group.namespace])
                .set(took);
        }
    }
    let names = &world.names;
    let scaled = |slot: usize, v: i64| -> f64 {
        if slot <= 1 {
            v as f64
        } else {
            v as f64 * 1000.0
        }
    };
    let list = |r: &Resources| -> Vec<(String, f64)> {
        (0..names.len())
            .map(|i| (names.name(i).to_string(), scaled(i, r.0[i])))
            .collect()
    };
    for q in &d.queues {
        m.queue.allocated.set(&q.name, &list(&q.allocated_vec));
        m.queue.admissible.set(&q.name, &list(&q.admissible));
        for (i, count) in [q.inqueue, q.pending, q.running, q.unknown, q.completed]
            .into_iter()
            .enumerate()
        {
            m.queue.groups[i]
                .with_label_values(&[&q.name])
                .set(f64::from(count));
        }
        if let Some((f, overused)) = &q.figures {
            m.queue.request.set(&q.name, &list(&f.request));
            m.queue.deserved.set(&q.name, &list(&f.deserved));
            // A queue that deserves nothing (root, an empty parent) has no share, not NaN.
            let share = if f.share.is_finite() { f.share } else { 0.0 };
            m.queue.share.with_label_values(&[&q.name]).set(share);
            m.queue
                .overused
                .with_label_values(&[&q.name])
                .set(if *overused { 1.0 } else { 0.0 });
        }
        if let Some(spec) = world.queues.get(&q.name) {
            m.queue
                .weight
                .with_label_values(&[&q.name])
                .set(f64::from(spec.weight));
            if let Some(cap) = &spec.capability {
                m.queue.capacity.set(&q.name, &list(cap));
            }
        }
    }
    m.vgpu.reset();
    for (cid, c) in world.clusters.iter() {
        let nodes = world
            .cluster_nodes
            .get(cid as usize)
            .map_or(&[][..], Vec::as_slice);
        m.member_seen(&c.name);
        m.cluster_ready
            .with_label_values(&[&c.name])
            .set(i64::from(c.ready));
        m.cluster_nodes
            .with_label_values(&[&c.name])
            .set(i64::try_from(nodes.len()).unwrap_or(i64::MAX));
        let mut alloc = Resources::ZERO;
        let mut used = Resources::ZERO;
        for n in nodes.iter().filter_map(|&n| world.nodes.get(n)) {
            alloc.add(&n.spec.allocatable);
            used.add(&n.used);
            gpu_limits(&m.vgpu, n);
        }
        for (name, v) in list(&alloc) {
            m.cluster_allocatable
                .with_label_values(&[&c.name, &name])
                .set(v);
        }
        for (name, v) in list(&used) {
            m.cluster_allocated
                .with_label_values(&[&c.name, &name])
                .set(v);
        }
    }
    gpu_users(m, world);
}

/// Volcano's vGPU gauges of node `n`'s registered GPUs: their memory, nothing given out yet.
/// gpushare cards have none (Volcano reports vGPUs only).
fn gpu_limits(v: &crate::metrics::VgpuMetrics, n: &tephra_scheduler::model::Node) {
    let vgpus = n
        .spec
        .gpus
        .iter()
        .filter(|g| tephra_scheduler::model::vgpu::share_index(&g.uuid).is_none());
    for g in vgpus {
        let at = [g.uuid.as_str(), n.spec.name.as_str()];
        v.memory_limit.with_label_values(&at).set(g.memory as f64);
        v.shared_number.with_label_values(&at).set(0.0);
        v.allocated_memory.with_label_values(&at).set(0.0);
        v.allocated_cores.with_label_values(&at).set(0.0);
    }
}

/// Volcano's vGPU gauges of what the pods that hold a node were given of its GPUs.
fn gpu_users(m: &Metrics, world: &World) {
    let v = &m.vgpu;
    for &t in &world.gpu_users {
        let Some(task) = world.tasks.get(t) else {
            continue;
        };
        let (Some(node), Some(grants)) = (
            task.node.and_then(|n| world.nodes.get(n)),
            task.spec.gpus.as_ref(),
        ) else {
            continue;
        };
        if !task.spec.status.holds_node() {
            continue;
        }
        if grants.share_indices().is_some() {
            continue;
        }
        for g in grants.all() {
            let Some(gpu) = node.spec.gpus.iter().find(|r| g.uuid.contains(&r.uuid)) else {
                continue;
            };
            let at = [gpu.uuid.as_str(), node.spec.name.as_str()];
            v.shared_number.with_label_values(&at).inc();
            v.allocated_memory
                .with_label_values(&at)
                .add(g.memory as f64);
            v.allocated_cores
                .with_label_values(&at)
                .add(f64::from(g.cores));
            let pod = [
                gpu.uuid.as_str(),
                node.spec.name.as_str(),
                task.spec.name.as_str(),
            ];
            v.pod_memory.with_label_values(&pod).add(g.memory as f64);
            v.pod_cores.with_label_values(&pod).add(f64::from(g.cores));
        }
    }
}
