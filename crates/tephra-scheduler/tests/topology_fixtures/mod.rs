//! What the topology tests share: a cache of racked clusters (tier-1 racks under a tier-2
//! spine), GPU gangs, pods reported running, and where a job's pods were bound.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::cache::topology::Topology;
use tephra_scheduler::model::topology::{
    HyperNodeSpec, Member, MemberKind, MemberSelector, NetworkTopology, TopologyMode,
};
use tephra_scheduler::model::*;
use tephra_scheduler::testing::*;
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

pub fn run(c: &Cache) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    )
}

pub fn node(cluster: &str, name: &str, gpus: &str, labels: &[(&str, &str)]) -> Event {
    let mut c = Cache::new();
    Event::NodeUpsert(NodeSpec {
        gpus: Default::default(),
        gpu_lock: None,
        name: name.into(),
        cluster: cluster.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: vec![],
        allocatable: resources(
            &mut c,
            &[("cpu", "64"), ("memory", "256Gi"), ("nvidia.com/gpu", gpus)],
        )
        .unwrap(),
        unschedulable: false,
        ready: true,
    })
}

pub fn hypernode(cluster: &str, name: &str, tier: u32, members: Vec<Member>) -> Event {
    Event::HyperNodeUpsert(HyperNodeSpec {
        cluster: cluster.into(),
        name: name.into(),
        tier,
        tier_name: None,
        members,
    })
}

pub fn exact(kind: MemberKind, name: &str) -> Member {
    Member {
        kind,
        selector: MemberSelector::Exact(name.into()),
    }
}

/// A cluster of `racks` racks of `per_rack` 8-GPU nodes (`r<rack>-n<i>`), each rack a tier-1
/// HyperNode `rack-<rack>`, all under the tier-2 HyperNode `spine` (by a pattern).
pub fn racked(cache: &mut Cache, cluster: &str, racks: usize, per_rack: usize) {
    add_cluster(cache, Cluster::named(cluster)).unwrap();
    for r in 0..racks {
        let mut members = Vec::new();
        for i in 0..per_rack {
            let name = format!("r{r}-n{i}");
            cache.apply(node(cluster, &name, "8", &[])).unwrap();
            members.push(exact(MemberKind::Node, &name));
        }
        cache
            .apply(hypernode(cluster, &format!("rack-{r}"), 1, members))
            .unwrap();
    }
    cache
        .apply(hypernode(
            cluster,
            "spine",
            2,
            vec![Member {
                kind: MemberKind::HyperNode,
                selector: MemberSelector::Regex("^rack-".into()),
            }],
        ))
        .unwrap();
}

pub fn hard(tier: u32) -> NetworkTopology {
    NetworkTopology {
        mode: TopologyMode::Hard,
        highest_tier: Some(tier),
        highest_tier_name: None,
    }
}

pub fn gpu_gang(name: &str, pods: u32, gpus: &str) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(
            "worker",
            pods,
            &[("cpu", "1"), ("nvidia.com/gpu", gpus)],
        )],
    )
}

/// Occupies `gpus` GPUs of a node with a running pod (a job of its own).
pub fn occupy(cache: &mut Cache, cluster: &str, node: &str, gpus: &str) {
    let name = format!("busy-{node}");
    add_job(cache, &gpu_gang(&name, 1, gpus)).unwrap();
    run_on(cache, &format!("default/{name}-worker-0"), cluster, node);
}

/// Reports a pod as running on `node`.
pub fn run_on(cache: &mut Cache, pod: &str, cluster: &str, node: &str) {
    let id = cache.world().task_id(pod).unwrap();
    let mut spec = cache.world().tasks.get(id).unwrap().spec.clone();
    spec.status = TaskStatus::Running;
    spec.placement = Some((cluster.into(), node.into()));
    cache.apply(Event::PodUpsert(spec)).unwrap();
}

pub fn topology(c: &Cache, cluster: &str) -> Arc<Topology> {
    let id = c.world().cluster_id(cluster).unwrap();
    c.world().topology(id).unwrap()
}

pub fn names(c: &Cache, nodes: &[Id]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| c.world().nodes.get(*n).unwrap().spec.name.clone())
        .collect()
}

/// The domain (by name) of every bound pod of `job`, at `tier`.
pub fn domains_of(c: &Cache, d: &Decisions, job: &str, cluster: &str, tier: u32) -> Vec<String> {
    let t = topology(c, cluster);
    let mut out: Vec<String> = d
        .binds
        .iter()
        .filter(|b| b.job == job)
        .map(|b| {
            let id = c.world().node_id(&b.cluster, &b.node).unwrap();
            t.domains
                .iter()
                .find(|dom| dom.tier == tier && dom.nodes.contains(&id))
                .map(|dom| dom.name.clone())
                .unwrap_or_else(|| format!("outside tier {tier}"))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
