//! What follows a session in the cache, as every front end takes it (`Cache::take`,
//! `Cache::copy_in`, `Cache::set_aside`): the decisions taken in at once, and a moved gang's
//! old copy set aside as ghosts that keep their nodes and belong to no job.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, GroupPhase, TaskStatus};
use tephra_scheduler::testing::{GPU8, GangJob, Role, add_cluster, add_job, add_nodes};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap())
}

/// Two clusters of two 8-GPU nodes each, and a gang of four 2-GPU pods.
fn fleet() -> Cache {
    let mut c = Cache::new();
    for name in ["east", "west"] {
        add_cluster(&mut c, Cluster::named(name)).unwrap();
        add_nodes(&mut c, name, name, 2, GPU8, &[]).unwrap();
    }
    let job = GangJob::new(
        "g",
        vec![Role::new("w", 4, &[("cpu", "4"), ("nvidia.com/gpu", "2")])],
    )
    .phase(GroupPhase::Pending);
    add_job(&mut c, &job).unwrap();
    c
}

fn session(c: &Cache, now: i64, id: u64) -> Decisions {
    schedule(c.snapshot(), config(), now, id)
}

/// The gang admitted and placed, taken in with its pods `Bound`: the binds.
fn placed(c: &mut Cache) -> Vec<tephra_scheduler::decisions::Bind> {
    let d = session(c, 100, 1);
    c.take(&d, TaskStatus::Bound).unwrap();
    assert_eq!(d.binds.len(), 4, "{d:?}");
    d.binds
}

fn gpus_used(c: &Cache) -> i64 {
    let gpu = c.world().names.get("nvidia.com/gpu").unwrap();
    c.world().nodes.iter().map(|(_, n)| n.used.get(gpu)).sum()
}

fn status(c: &Cache, key: &str) -> TaskStatus {
    c.task(key).unwrap().status
}

#[test]
fn taking_a_session_binds_its_pods_and_moves_its_podgroup_since_the_session() {
    let mut c = fleet();
    // One session admits the gang and places it: Pending -> Running.
    let d = session(&c, 100, 1);
    assert_eq!(d.binds.len(), 4, "{d:?}");
    let taken = c.take(&d, TaskStatus::Binding).unwrap();
    assert_eq!(
        taken.phases,
        vec![("default/g".to_string(), GroupPhase::Running)]
    );
    let g = c.world().job_id("default/g").unwrap();
    let group = c.world().jobs.get(g).unwrap().group.clone().unwrap();
    assert_eq!((group.phase, group.phase_since), (GroupPhase::Running, 100));
    for b in &d.binds {
        let t = c.task(&b.task).unwrap();
        assert_eq!(t.status, TaskStatus::Binding);
        assert_eq!(t.placement, Some((b.cluster.clone(), b.node.clone())));
    }
    assert_eq!(gpus_used(&c), 8, "the bound pods hold their nodes at once");
    // The next session places nothing again and leaves the phase as it is.
    let next = session(&c, 130, 2);
    assert!(next.binds.is_empty(), "{next:?}");
    assert!(
        c.take(&next, TaskStatus::Binding)
            .unwrap()
            .phases
            .is_empty()
    );
    let group = c.world().jobs.get(g).unwrap().group.clone().unwrap();
    assert_eq!(group.phase_since, 100);
}

#[test]
fn an_evicted_pod_is_releasing_where_it_is_and_only_if_it_holds_a_node() {
    let mut c = fleet();
    let placed = placed(&mut c)[0].clone();
    let mut evict = Decisions::default();
    evict.evictions.push(tephra_scheduler::decisions::Eviction {
        job: placed.job.clone(),
        task: placed.task.clone(),
        cluster: placed.cluster.clone(),
        reason: "preempted".into(),
    });
    c.take(&evict, TaskStatus::Bound).unwrap();
    assert_eq!(status(&c, &placed.task), TaskStatus::Releasing);
    assert_eq!(
        c.task(&placed.task).unwrap().placement,
        Some((placed.cluster.clone(), placed.node.clone()))
    );
    // A pod that holds no node is not released.
    c.set_task(&placed.task, TaskStatus::Pending, None).unwrap();
    assert!(!c.release(&placed.task).unwrap());
    assert_eq!(status(&c, &placed.task), TaskStatus::Pending);
}

#[test]
fn a_copy_is_every_pod_placed_in_the_cluster_finished_ones_too_but_not_those_leaving() {
    let mut c = fleet();
    let at = |n: &str| Some((n.split('-').next().unwrap().to_string(), n.to_string()));
    let pods: Vec<String> = (0..4).map(|i| format!("default/g-w-{i}")).collect();
    c.set_task(&pods[0], TaskStatus::Running, at("east-0"))
        .unwrap();
    c.set_task(&pods[1], TaskStatus::Failed, at("east-0"))
        .unwrap();
    c.set_task(&pods[2], TaskStatus::Releasing, at("east-1"))
        .unwrap();
    c.set_task(&pods[3], TaskStatus::Running, at("west-0"))
        .unwrap();
    assert_eq!(
        c.copy_in("default/g", "east"),
        vec![pods[0].clone(), pods[1].clone()]
    );
    assert_eq!(c.copy_in("default/g", "west"), vec![pods[3].clone()]);
    assert!(c.copy_in("default/nope", "east").is_empty());
}

#[test]
fn a_ghost_keeps_its_node_belongs_to_no_job_and_cannot_be_preempted() {
    let mut c = fleet();
    let b = placed(&mut c)[0].clone();
    let used = gpus_used(&c);

    let ghost = c.set_aside(&b.task, &b.cluster).unwrap().unwrap();
    let name = b.task.split_once('/').unwrap().1;
    assert_eq!(ghost.name, format!("{name}~{}", b.cluster));
    assert_eq!(ghost.group, None);
    assert!(!ghost.shape.preemptable);
    assert_eq!(ghost.placement, Some((b.cluster.clone(), b.node.clone())));
    assert_eq!(gpus_used(&c), used, "the ghost still holds the node");
    assert!(c.task(&b.task).is_none(), "the pod left its job");
    let job = c.world().job_id("default/g").unwrap();
    assert_eq!(c.world().jobs.get(job).unwrap().tasks.len(), 3);
    assert_eq!(c.set_aside("default/nope", "east").unwrap(), None);
}
