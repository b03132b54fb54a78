//! The benchmark worlds, generated deterministically in code.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

mod contracts;
mod synthetic;

#[allow(unused_imports)] // the memory bench builds no world with contracts
pub use contracts::{Contracts, world as world_with_contracts};

use synthetic::{
    FleetShape, Rng, RunningFill, add_running, add_workload, build_fleet, fill_running,
};
use tephra_scheduler::model::QueueSpec;
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes};
use tephra_scheduler::{Cache, Event, SchedulerConfig};

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

/// T: A with network topology: its 5,000 nodes in 625 racks of 8 (tier-1 HyperNodes, CPU and
/// GPU nodes racked apart, in node order) under 25 spines of 25 racks (tier 2), and every gang
/// `hard`, held to one rack (half of them) or one spine.
pub fn world_t() -> Cache {
    use tephra_scheduler::model::topology::{
        HyperNodeSpec, Member, MemberKind, MemberSelector, NetworkTopology, TopologyMode,
    };
    let mut c = world_a();
    let nodes: Vec<String> = c.world().cluster_nodes[0]
        .iter()
        .map(|n| c.world().nodes.get(*n).unwrap().spec.name.clone())
        .collect();
    let member = |kind, name: String| Member {
        kind,
        selector: MemberSelector::Exact(name),
    };
    for (r, rack) in nodes.chunks(8).enumerate() {
        c.apply(Event::HyperNodeUpsert(HyperNodeSpec {
            cluster: "c0".into(),
            name: format!("rack-{r}"),
            tier: 1,
            tier_name: Some("rack".into()),
            members: rack
                .iter()
                .map(|n| member(MemberKind::Node, n.clone()))
                .collect(),
        }))
        .unwrap();
    }
    for s in 0..25 {
        c.apply(Event::HyperNodeUpsert(HyperNodeSpec {
            cluster: "c0".into(),
            name: format!("spine-{s}"),
            tier: 2,
            tier_name: Some("spine".into()),
            members: (s * 25..(s + 1) * 25)
                .map(|r| member(MemberKind::HyperNode, format!("rack-{r}")))
                .collect(),
        }))
        .unwrap();
    }
    regroup(&mut c, |i, g| {
        g.topology = Some(NetworkTopology {
            mode: TopologyMode::Hard,
            highest_tier: Some(1 + (i % 2) as u32),
            highest_tier_name: None,
        });
    });
    c
}

/// Changes every PodGroup of the world (the `i`-th in slot order) by `change`.
fn regroup(c: &mut Cache, change: impl Fn(usize, &mut tephra_scheduler::model::PodGroupSpec)) {
    let groups: Vec<_> = c
        .world()
        .jobs
        .iter()
        .filter_map(|(_, j)| j.group.clone())
        .collect();
    for (i, mut g) in groups.into_iter().enumerate() {
        change(i, &mut g);
        c.apply(Event::PodGroupUpsert(g)).unwrap();
    }
}

/// Q: A with its gangs spread over 100 queues of equal weight (`q-0` … `q-99`): the queue order
/// is consulted once per gang, over every queue with work left.
pub fn world_q() -> Cache {
    let mut c = world_a();
    for i in 0..100 {
        let mut q = QueueSpec::named(&format!("q-{i}"));
        q.weight = 1;
        c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
    }
    regroup(&mut c, |i, g| g.queue = format!("q-{}", i % 100));
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
    // Steady state: the sessions before this one have seen every job already.
    c.clear_changed();
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

/// D: the 10,000-node fleet full: 16,000 one-GPU pods on the GPU nodes and 80,000 six-core
/// pods on the CPU nodes, all Running in the reclaimable queue `research` at priority 0. Then
/// 200 high-priority gangs of 2 x 8 GPUs arrive in `research` (preempt) and 200 more in the
/// idle queue `prod` (reclaim).
pub fn world_d() -> Cache {
    let mut c = fleet_20x500();
    for q in ["research", "prod"] {
        c.apply(Event::QueueUpsert(Box::new(QueueSpec::named(q))))
            .unwrap();
    }
    let fill = |c: &mut Cache, namespace, request, per_node, gang, gpu| {
        fill_running(
            c,
            &RunningFill {
                namespace,
                queue: "research",
                priority: 0,
                request,
                per_node,
                gang,
                gpu_nodes: Some(gpu),
            },
        )
        .unwrap()
    };
    fill(
        &mut c,
        "gpu-run",
        &[("cpu", "4"), ("memory", "32Gi"), ("nvidia.com/gpu", "1")],
        8,
        8,
        true,
    );
    fill(
        &mut c,
        "cpu-run",
        &[("cpu", "6"), ("memory", "24Gi")],
        10,
        10,
        false,
    );
    for i in 0..400 {
        let queue = if i % 2 == 0 { "research" } else { "prod" };
        let priority = if queue == "research" { 100 } else { 0 };
        let job = GangJob::new(
            &format!("wait-{i}"),
            vec![Role::new(
                "w",
                2,
                &[("cpu", "32"), ("memory", "256Gi"), ("nvidia.com/gpu", "8")],
            )],
        )
        .queue(queue)
        .priority(priority)
        .created(1000 + i);
        add_job(&mut c, &job).unwrap();
    }
    c
}

/// S: a saturated fleet with a backlog. One cluster of 64 GPU nodes (64 cores, 512Gi, 8 GPUs)
/// and 6,128 two-pod gangs (2 GPUs, 8 cores, 64Gi a pod), submitted Pending over three queues of
/// weight 3, 2 and 1; sessions are run and taken in, as the runtime and the simulator take them,
/// until one changes nothing: 128 gangs run and fill every GPU, about 6,000 wait (a few
/// admitted, the rest refused by the votes). The world the next session of a steady backlog
/// opens on.
pub fn world_s() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, tephra_scheduler::model::Cluster::named("c0")).unwrap();
    add_nodes(
        &mut c,
        "c0",
        "c0-gpu",
        64,
        &[
            ("cpu", "64"),
            ("memory", "512Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "8"),
        ],
        &[],
    )
    .unwrap();
    for (name, weight) in [("q-a", 3), ("q-b", 2), ("q-c", 1)] {
        let mut q = QueueSpec::named(name);
        q.weight = weight;
        c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
    }
    for i in 0..6128 {
        let job = GangJob::new(
            &format!("gang-{i}"),
            vec![Role::new(
                "w",
                2,
                &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "2")],
            )],
        )
        .queue(["q-a", "q-b", "q-c"][i % 3])
        .phase(tephra_scheduler::model::GroupPhase::Pending)
        .created(i as i64);
        add_job(&mut c, &job).unwrap();
    }
    settle(&mut c, 0);
    c
}

/// Runs sessions at `now` (default configuration) and takes each in, bound pods Running, until
/// one binds nothing and changes no PodGroup's phase. Returns the next session's id.
pub fn settle(c: &mut Cache, now: i64) -> u64 {
    use tephra_scheduler::model::TaskStatus;
    let config = std::sync::Arc::new(SchedulerConfig::default_config());
    for id in 1..100 {
        let d = tephra_scheduler::schedule(c.snapshot(), std::sync::Arc::clone(&config), now, id);
        let binds: Vec<_> = d.binds.clone();
        let taken = c.take(&d, TaskStatus::Bound).unwrap();
        for b in &binds {
            c.set_task(
                &b.task,
                TaskStatus::Running,
                Some((b.cluster.clone(), b.node.clone())),
            )
            .unwrap();
        }
        c.clear_changed();
        if binds.is_empty() && taken.phases.is_empty() {
            return id + 1;
        }
    }
    panic!("the world does not settle in 100 sessions")
}

/// S after one small change: the first running pod finishes (Succeeded), freeing its 2 GPUs.
pub fn one_pod_finishes(c: &mut Cache) {
    use tephra_scheduler::model::TaskStatus;
    let key = c
        .world()
        .tasks
        .iter()
        .find(|(_, t)| t.spec.status == TaskStatus::Running)
        .map(|(_, t)| format!("{}/{}", t.spec.namespace, t.spec.name))
        .unwrap();
    let at = c.task(&key).and_then(|t| t.placement.clone());
    c.set_task(&key, TaskStatus::Succeeded, at).unwrap();
}

/// tephra's default configuration with preempt and reclaim.
pub fn config_with_eviction() -> SchedulerConfig {
    let text = tephra_scheduler::config::DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    SchedulerConfig::parse(&text).unwrap()
}
