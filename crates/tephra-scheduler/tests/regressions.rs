//! Regression tests for bugs found in review: each reproduces the original failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::sync::Arc;
use tephra_scheduler::model::*;
use tephra_scheduler::testing::*;
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

fn run(c: &Cache) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    )
}

/// Cluster `east` with `count` 8-CPU nodes, `n-0`, `n-1`, ...
fn cpu_nodes(count: usize) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "n",
        count,
        &[("cpu", "8"), ("memory", "8Gi"), ("pods", "110")],
        &[],
    )
    .unwrap();
    c
}

fn pod(
    c: &Cache,
    name: &str,
    group: Option<&str>,
    req: tephra_scheduler::resources::Resources,
    status: TaskStatus,
    placement: Option<(&str, &str)>,
) -> PodSpec {
    let _ = c;
    PodSpec {
        gpus: None,
        namespace: "default".into(),
        name: name.into(),
        group: group.map(String::from),
        shape: Arc::new(TaskShape {
            role: "r".into(),
            request: req,
            node_selector: Default::default(),
            affinity: vec![],
            tolerations: vec![],
            priority: 0,
            preemptable: true,
            namespace: "default".into(),
            priority_class: None,
            rules: Default::default(),
        }),
        index: 0,
        status,
        placement: placement.map(|(a, b)| (a.to_string(), b.to_string())),
        created: 0,
        lives_in: None,
        planned: None,
        ghost_of: None,
        foreign: false,
    }
}

// A: a node holding releasing GPUs is preferred over a free node -> pipelined, not bound.
#[test]
fn a_free_node_is_preferred_over_one_whose_resources_are_still_being_released() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", 2, GPU8, &[]).unwrap();
    let mut req = resources(
        &mut c,
        &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
    )
    .unwrap();
    req.set(2, 1);
    c.apply(Event::PodUpsert(pod(
        &c,
        "old",
        None,
        req,
        TaskStatus::Releasing,
        Some(("east", "gpu-0")),
    )))
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new(
            "train",
            vec![Role::new(
                "w",
                1,
                &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
            )],
        ),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1, "gpu-1 is entirely free");
}

// B: gang mixing best-effort and regular pods where min needs both: never placed.
#[test]
fn a_gang_that_needs_its_best_effort_pods_is_placed_whole() {
    let mut c = cpu_nodes(2);
    let job = GangJob::new(
        "mix",
        vec![Role::new("w", 2, &[("cpu", "1")]), Role::new("be", 1, &[])],
    );
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 3);
}

// C: a Running PodGroup whose pods all succeed never becomes Completed.
#[test]
fn a_running_podgroup_whose_pods_all_succeeded_becomes_completed() {
    let mut c = cpu_nodes(1);
    let job = GangJob::new("j", vec![Role::new("w", 1, &[("cpu", "1")])]);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    apply_binds(&mut c, &d).unwrap();
    let id = c.world().task_id("default/j-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.status = TaskStatus::Succeeded;
    c.apply(Event::PodUpsert(spec)).unwrap();
    let d2 = run(&c);
    assert!(
        d2.groups
            .iter()
            .any(|g| g.job == "default/j" && g.phase == GroupPhase::Completed)
    );
}

// D: a best-effort job that cannot be placed gets no explanation.
#[test]
fn a_best_effort_job_that_cannot_be_placed_is_explained() {
    let mut c = cpu_nodes(1);
    let job = GangJob::new("be", vec![Role::new("w", 1, &[]).select("zone", "nowhere")]);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert!(d.event_for("default/be").is_some());
}

// E: a pod that leaves its PodGroup gets a job without a group: never scheduled, never explained.
#[test]
fn a_pod_that_leaves_its_podgroup_is_scheduled_like_a_bare_pod() {
    let mut c = cpu_nodes(1);
    let job = GangJob::new("j", vec![Role::new("w", 1, &[("cpu", "1")])]);
    add_job(&mut c, &job).unwrap();
    let id = c.world().task_id("default/j-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.group = None;
    c.apply(Event::PodUpsert(spec.clone())).unwrap();
    let d = run(&c);
    // Compare with the same pod created fresh without group
    let mut c2 = Cache::new();
    add_cluster(&mut c2, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c2,
        "east",
        "n",
        1,
        &[("cpu", "8"), ("memory", "8Gi"), ("pods", "110")],
        &[],
    )
    .unwrap();
    c2.apply(Event::PodUpsert(spec)).unwrap();
    let d2 = run(&c2);
    assert_eq!(
        d2.binds.len(),
        1,
        "a bare pod is scheduled: {:?}",
        d2.events
    );
    assert_eq!(
        d.binds.iter().map(|b| &b.task).collect::<Vec<_>>(),
        d2.binds.iter().map(|b| &b.task).collect::<Vec<_>>(),
        "the pod that left its group is scheduled as the bare pod is"
    );
}

// F: a node over-used (allocatable shrank) hides free room on another node of the cluster.
#[test]
fn an_overused_node_does_not_hide_free_room_elsewhere_in_its_cluster() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "a",
        1,
        &[("cpu", "8"), ("pods", "110")],
        &[],
    )
    .unwrap();
    add_nodes(
        &mut c,
        "east",
        "b",
        1,
        &[("cpu", "4"), ("pods", "110")],
        &[],
    )
    .unwrap();
    let mut req = resources(&mut c, &[("cpu", "8")]).unwrap();
    req.set(2, 1);
    c.apply(Event::PodUpsert(pod(
        &c,
        "big",
        None,
        req,
        TaskStatus::Running,
        Some(("east", "a-0")),
    )))
    .unwrap();
    // node a shrinks to 2 cpus: idle -6
    add_nodes(
        &mut c,
        "east",
        "a",
        1,
        &[("cpu", "2"), ("pods", "110")],
        &[],
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("j", vec![Role::new("w", 1, &[("cpu", "3")])]),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1, "b-0 has 4 cpus free: {:?}", d.events);
}

// G: fifo queue blocked by a PodGroup that has no pods yet.
#[test]
fn a_fifo_queue_is_not_blocked_by_a_podgroup_without_pods() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "n",
        1,
        &[("cpu", "8"), ("pods", "110")],
        &[],
    )
    .unwrap();
    let mut q = QueueSpec::named("default");
    q.dequeue = Dequeue::Fifo;
    c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
    // empty group, created first
    c.apply(Event::PodGroupUpsert(PodGroupSpec {
        namespace: "default".into(),
        name: "empty".into(),
        queue: "default".into(),
        min_member: 2,
        min_task_member: Default::default(),
        min_resources: None,
        largest_task: None,
        priority_class: None,
        priority: None,
        phase: GroupPhase::Inqueue,
        phase_since: 0,
        created: 0,
        policy: Arc::new(JobPolicy::default()),
        topology: None,
        sub_groups: Vec::new(),
    }))
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("j", vec![Role::new("w", 1, &[("cpu", "1")])]).created(5),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1);
}

// H: running pods on a deleted node no longer pin the gang to its cluster.
#[test]
fn a_gang_whose_running_pods_node_is_unknown_stays_in_its_cluster() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("a")).unwrap();
    add_cluster(&mut c, Cluster::named("b")).unwrap();
    add_nodes(&mut c, "a", "n", 1, &[("cpu", "1"), ("pods", "110")], &[]).unwrap();
    add_nodes(&mut c, "b", "m", 1, &[("cpu", "8"), ("pods", "110")], &[]).unwrap();
    add_job(
        &mut c,
        &GangJob::new("j", vec![Role::new("w", 2, &[("cpu", "1")])]).min_member(1),
    )
    .unwrap();
    // w-0 running in a on a node the cache no longer knows
    let id = c.world().task_id("default/j-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.status = TaskStatus::Running;
    spec.placement = Some(("a".into(), "n-0".into()));
    c.apply(Event::PodUpsert(spec)).unwrap();
    c.apply(Event::NodeDelete {
        cluster: "a".into(),
        name: "n-0".into(),
    })
    .unwrap();
    let d = run(&c);
    assert!(
        d.binds.iter().all(|b| b.cluster == "a"),
        "gang split across clusters"
    );
}

// One role, two shapes (pods of the same role with different requests), minTaskMember 2.
#[test]
fn a_role_minimum_is_met_by_pods_of_two_shapes() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "n",
        2,
        &[("cpu", "8"), ("pods", "110")],
        &[],
    )
    .unwrap();
    let mut min_task = std::collections::BTreeMap::new();
    min_task.insert("w".to_string(), 2u32);
    c.apply(Event::PodGroupUpsert(PodGroupSpec {
        namespace: "default".into(),
        name: "g".into(),
        queue: "default".into(),
        min_member: 2,
        min_task_member: min_task,
        min_resources: None,
        largest_task: None,
        priority_class: None,
        priority: None,
        phase: GroupPhase::Inqueue,
        phase_since: 0,
        created: 0,
        policy: Arc::new(JobPolicy::default()),
        topology: None,
        sub_groups: Vec::new(),
    }))
    .unwrap();
    for (i, cpu) in [("0", "1"), ("1", "2")] {
        let mut req = resources(&mut c, &[("cpu", cpu)]).unwrap();
        req.set(2, 1);
        c.apply(Event::PodUpsert(PodSpec {
            gpus: None,
            namespace: "default".into(),
            name: format!("p{i}"),
            group: Some("g".into()),
            shape: Arc::new(TaskShape {
                role: "w".into(),
                request: req,
                node_selector: Default::default(),
                affinity: vec![],
                tolerations: vec![],
                priority: 0,
                preemptable: true,
                namespace: "default".into(),
                priority_class: None,
                rules: Default::default(),
            }),
            index: i.parse().unwrap(),
            status: TaskStatus::Pending,
            placement: None,
            created: 0,
            lives_in: None,
            planned: None,
            ghost_of: None,
            foreign: false,
        }))
        .unwrap();
    }
    let d = run(&c);
    assert_eq!(d.binds.len(), 2);
}

#[test]
fn negative_quantities_are_refused() {
    let mut c = Cache::new();
    let err = resources(&mut c, &[("cpu", "-1")]).unwrap_err();
    assert!(err.to_string().contains("must not be negative"), "{err}");
}

// A terminating pod still holds its node, but its queue no longer counts it: queue shares
// (and so reclaim and DRF) see only pods that are running or being placed.
#[test]
fn a_releasing_pod_holds_its_node_but_not_its_queues_share() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", 1, GPU8, &[]).unwrap();
    let req = resources(&mut c, &[("cpu", "8"), ("nvidia.com/gpu", "4")]).unwrap();
    for (name, status) in [
        ("staying", TaskStatus::Running),
        ("leaving", TaskStatus::Running),
    ] {
        c.apply(Event::PodUpsert(pod(
            &c,
            name,
            None,
            req,
            status,
            Some(("east", "gpu-0")),
        )))
        .unwrap();
    }
    let share = |c: &Cache| {
        let d = run(c);
        let q = d.queues.iter().find(|q| q.name == "default").unwrap();
        q.allocated.get("nvidia.com/gpu").cloned()
    };
    assert_eq!(share(&c).as_deref(), Some("8"));
    c.apply(Event::PodUpsert(pod(
        &c,
        "leaving",
        None,
        req,
        TaskStatus::Releasing,
        Some(("east", "gpu-0")),
    )))
    .unwrap();
    assert_eq!(
        share(&c).as_deref(),
        Some("4"),
        "releasing pod still counted"
    );
    // The node is still full until the pod is gone: a new 8-GPU pod cannot bind.
    let whole = resources(&mut c, &[("cpu", "8"), ("nvidia.com/gpu", "8")]).unwrap();
    c.apply(Event::PodUpsert(pod(
        &c,
        "next",
        None,
        whole,
        TaskStatus::Pending,
        None,
    )))
    .unwrap();
    assert!(run(&c).binds.is_empty());
}

// A pod without a PodGroup (another scheduler's, bound by name) that its kubelet refused
// (Failed) holds nothing: its implicit group must not go back to Pending, be admitted again
// and keep the fleet's admission budget, leaving a job that fits waiting (seen on a real API
// server: kube-scheduler placed the pod, tephra left it NotInqueueable).
#[test]
fn a_finished_pod_without_a_podgroup_holds_no_admission_budget() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    let shape = [
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "110"),
        ("nvidia.com/gpu", "2"),
    ];
    add_nodes(&mut c, "east", "n", 2, &shape, &[]).unwrap();
    let two_gpus = resources(&mut c, &[("cpu", "500m"), ("nvidia.com/gpu", "2")]).unwrap();
    let on_n1 = Some(("east", "n-1"));
    // The kubelet refuses the second pod (the first holds the node's GPUs); the third ends.
    for (name, status) in [
        ("holding", TaskStatus::Running),
        ("refused", TaskStatus::Bound),
        ("finished", TaskStatus::Running),
        ("refused", TaskStatus::Failed),
        ("finished", TaskStatus::Succeeded),
    ] {
        let mut theirs = pod(&c, name, None, two_gpus, status, on_n1);
        theirs.foreign = true;
        c.apply(Event::PodUpsert(theirs)).unwrap();
    }
    // Sessions go by: nothing of the finished pods is to be admitted or placed.
    for _ in 0..3 {
        let d = run(&c);
        assert!(d.binds.is_empty(), "{:?}", d.binds);
        apply_binds(&mut c, &d).unwrap();
    }
    // The fleet has 4 GPUs, 2 in use: a job asking for 1 is admitted and placed (on n-0).
    let job = GangJob::new(
        "next",
        vec![Role::new("w", 1, &[("cpu", "2"), ("nvidia.com/gpu", "1")])],
    )
    .phase(GroupPhase::Pending);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert!(
        d.binds
            .iter()
            .any(|b| b.task == "default/next-w-0" && b.node == "n-0"),
        "binds {:?}, events {:?}",
        d.binds,
        d.events
    );
}
