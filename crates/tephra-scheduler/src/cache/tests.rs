//! The cache's unit tests.

use std::sync::Arc;

use super::{Cache, Event};
use crate::model::{Cluster, GroupPhase, NodeSpec, PodSpec, TaskShape, TaskStatus};
use crate::resources::Resources;

/// A ready, schedulable node without labels or taints.
fn node(cluster: &str, name: &str, allocatable: Resources) -> NodeSpec {
    NodeSpec {
        gpus: Default::default(),
        gpu_lock: None,
        name: name.into(),
        cluster: cluster.into(),
        labels: Default::default(),
        taints: vec![],
        allocatable,
        unschedulable: false,
        ready: true,
    }
}

fn cache_with_node() -> Cache {
    let mut c = Cache::new();
    c.apply(Event::ClusterUpsert(Cluster::named("c1"))).unwrap();
    let alloc = c.names_mut().parse([("cpu", "8"), ("pods", "10")]).unwrap();
    c.apply(Event::NodeUpsert(node("c1", "n1", alloc))).unwrap();
    c
}

fn pod(name: &str, status: TaskStatus, placed: bool, cpu: i64) -> PodSpec {
    let mut request = Resources::of(crate::resources::CPU, cpu);
    request.set(crate::resources::PODS, 1);
    PodSpec {
        gpus: None,
        namespace: "ns".into(),
        name: name.into(),
        group: Some("g".into()),
        shape: Arc::new(TaskShape {
            role: "worker".into(),
            request,
            node_selector: Default::default(),
            affinity: vec![],
            tolerations: vec![],
            priority: 0,
            preemptable: true,
            namespace: "ns".into(),
            priority_class: None,
            rules: Default::default(),
        }),
        index: 0,
        status,
        placement: placed.then(|| ("c1".into(), "n1".into())),
        created: 0,
        lives_in: None,
        planned: None,
        ghost_of: None,
        foreign: false,
    }
}

#[test]
fn node_usage_follows_pod_events() {
    let mut c = cache_with_node();
    c.apply(Event::PodUpsert(pod("p1", TaskStatus::Running, true, 3000)))
        .unwrap();
    let n = c.world().node_id("c1", "n1").unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 3000);
    c.apply(Event::PodUpsert(pod(
        "p1",
        TaskStatus::Succeeded,
        true,
        3000,
    )))
    .unwrap();
    assert_eq!(
        c.world().nodes.get(n).unwrap().used.get(0),
        0,
        "finished pods free the node"
    );
    c.apply(Event::PodUpsert(pod("p2", TaskStatus::Running, true, 1000)))
        .unwrap();
    c.apply(Event::PodDelete {
        namespace: "ns".into(),
        name: "p2".into(),
    })
    .unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 0);
}

/// Another scheduler's bound pod holds its node's room, and, as in Volcano, counts in no
/// queue: no PodGroup phase, no share of any queue's allocation. A pod of tephra's without a
/// PodGroup does count, in the default queue.
#[test]
fn another_schedulers_pod_holds_its_room_and_counts_in_no_queue() {
    let mut c = cache_with_node();
    let mut theirs = pod("ds", TaskStatus::Running, true, 2000);
    theirs.group = None;
    theirs.foreign = true;
    c.apply(Event::PodUpsert(theirs.clone())).unwrap();
    let n = c.world().node_id("c1", "n1").unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 2000);
    assert!(
        c.world().queue_phases.is_empty(),
        "{:?}",
        c.world().queue_phases
    );
    assert!(
        c.world().queue_used.values().all(|r| r.get(0) == 0),
        "{:?}",
        c.world().queue_used
    );
    let mut ours = pod("bare", TaskStatus::Running, true, 1000);
    ours.group = None;
    c.apply(Event::PodUpsert(ours)).unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 3000);
    let default = tephra_api::defaults::DEFAULT_QUEUE;
    assert_eq!(
        c.world()
            .queue_phases
            .get(default)
            .map(|p| p.get(GroupPhase::Running)),
        Some(1)
    );
    assert_eq!(
        c.world().queue_used.get(default).map(|r| r.get(0)),
        Some(1000)
    );
    // It finishing, or going, frees the room and changes no count.
    theirs.status = TaskStatus::Succeeded;
    c.apply(Event::PodUpsert(theirs)).unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 1000);
    assert_eq!(
        c.world()
            .queue_phases
            .get(default)
            .map(|p| p.get(GroupPhase::Running)),
        Some(1)
    );
}

#[test]
fn pods_seen_before_their_node_are_counted_when_it_arrives() {
    let mut c = Cache::new();
    c.apply(Event::ClusterUpsert(Cluster::named("c1"))).unwrap();
    c.apply(Event::PodUpsert(pod(
        "early",
        TaskStatus::Running,
        true,
        2000,
    )))
    .unwrap();
    let alloc = c.names_mut().parse([("cpu", "8")]).unwrap();
    c.apply(Event::NodeUpsert(node("c1", "n1", alloc))).unwrap();
    let n = c.world().node_id("c1", "n1").unwrap();
    assert_eq!(c.world().nodes.get(n).unwrap().used.get(0), 2000);
}

#[test]
fn a_snapshot_is_not_disturbed_by_later_events() {
    let mut c = cache_with_node();
    c.apply(Event::PodUpsert(pod(
        "p1",
        TaskStatus::Pending,
        false,
        1000,
    )))
    .unwrap();
    let snap = c.snapshot();
    let generation = snap.generation;
    c.apply(Event::PodDelete {
        namespace: "ns".into(),
        name: "p1".into(),
    })
    .unwrap();
    assert_eq!(snap.generation, generation);
    assert!(
        snap.task_id("ns/p1").is_some(),
        "snapshot still sees the pod"
    );
    assert!(c.world().task_id("ns/p1").is_none());
}

#[test]
fn active_jobs_track_pending_work_only() {
    let mut c = cache_with_node();
    c.apply(Event::PodUpsert(pod(
        "p1",
        TaskStatus::Pending,
        false,
        1000,
    )))
    .unwrap();
    let job = c.world().job_id("ns/g").unwrap();
    assert!(c.world().active_jobs.contains(&job));
    c.apply(Event::PodUpsert(pod("p1", TaskStatus::Running, true, 1000)))
        .unwrap();
    assert!(
        !c.world().active_jobs.contains(&job),
        "no PodGroup and nothing pending"
    );
}

#[test]
fn a_node_for_an_unknown_cluster_is_refused_and_changes_nothing() {
    let mut c = Cache::new();
    let generation = c.world().generation;
    let err = c
        .apply(Event::NodeUpsert(node("ghost", "n", Resources::ZERO)))
        .unwrap_err();
    assert!(err.to_string().contains("unknown cluster \"ghost\""));
    assert_eq!(c.world().generation, generation);
}
