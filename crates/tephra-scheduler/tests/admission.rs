//! Admission (Pending → Inqueue): never a gang that can never be placed, never held forever by
//! one that cannot be placed now, and done by allocate itself when no `enqueue` is configured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, GroupPhase, PodGroupSpec};
use tephra_scheduler::testing::{GPU8, GangJob, Role, add_cluster, add_job, add_nodes, resources};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

fn gpu_job(name: &str, replicas: u32, gpus: &str) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(
            "w",
            replicas,
            &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", gpus)],
        )],
    )
    .phase(GroupPhase::Pending)
}

/// `clusters` clusters of `nodes` 8-GPU nodes each.
fn fleet(clusters: usize, nodes: usize) -> Cache {
    let mut c = Cache::new();
    for i in 0..clusters {
        let name = format!("c{i}");
        add_cluster(&mut c, Cluster::named(&name)).unwrap();
        add_nodes(&mut c, &name, "gpu", nodes, GPU8, &[]).unwrap();
    }
    c
}

fn run_with(c: &Cache, config: &str) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(config).unwrap()),
        0,
        1,
    )
}

#[test]
fn a_gang_that_fits_only_across_clusters_is_never_admitted_and_does_not_block_others() {
    let mut c = fleet(2, 1);
    add_job(&mut c, &gpu_job("a", 3, "4").created(0)).unwrap();
    add_job(&mut c, &gpu_job("b", 1, "8").created(1)).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    assert!(
        d.group("default/a")
            .is_none_or(|g| g.phase == GroupPhase::Pending),
        "a must stay Pending: {:?}",
        d.group("default/a")
    );
    let why = d.event_for("default/a").unwrap();
    assert_eq!(why.reason, "NotInqueueable");
    assert!(
        why.message.contains("can never be placed")
            && why.message.contains("nvidia.com/gpu")
            && why.message.contains("must fit in one"),
        "{}",
        why.message
    );
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/b").count(),
        1,
        "b runs: {:?}",
        d.events
    );
}

#[test]
fn a_splittable_gang_is_admitted_on_the_clusters_together() {
    let mut c = fleet(2, 1);
    let mut a = gpu_job("a", 3, "4");
    a.policy.splittable = true;
    add_job(&mut c, &a).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    assert_ne!(
        d.event_for("default/a").map(|e| e.reason),
        Some("NotInqueueable"),
        "{:?}",
        d.events
    );
}

#[test]
fn a_task_larger_than_any_node_is_never_admitted() {
    let mut c = fleet(1, 4);
    add_job(&mut c, &gpu_job("huge", 1, "16")).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    let why = d.event_for("default/huge").unwrap();
    assert!(
        why.message
            .contains("largest task needs more nvidia.com/gpu than any node"),
        "{}",
        why.message
    );
}

#[test]
fn without_an_enqueue_action_allocate_admits_pending_jobs_itself() {
    // Volcano's own agent scheduler config has `actions: "allocate"`.
    let config = DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"allocate\"",
    );
    let mut c = fleet(1, 1);
    add_job(&mut c, &gpu_job("j", 1, "8")).unwrap();
    let d = run_with(&c, &config);
    assert_eq!(d.binds.len(), 1, "{:?}", d.events);
    assert_eq!(d.group("default/j").unwrap().phase, GroupPhase::Running);
}

#[test]
fn an_admitted_job_that_cannot_be_placed_goes_back_to_pending_and_frees_the_budget() {
    // Two 8-GPU nodes, one half taken by a long job. A (2 x 6 GPUs) was admitted on the
    // cluster's free total (12) but fits no node; while it holds the admission budget, C
    // (4 GPUs, which would fit) is not admitted.
    let mut c = fleet(1, 2);
    add_job(&mut c, &gpu_job("long", 1, "4").phase(GroupPhase::Inqueue)).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    tephra_scheduler::testing::apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    add_job(
        &mut c,
        &gpu_job("a", 2, "6").phase(GroupPhase::Inqueue).created(0),
    )
    .unwrap();
    add_job(&mut c, &gpu_job("c", 1, "4").created(10)).unwrap();
    let at = |c: &Cache, now: i64| {
        schedule(
            c.snapshot(),
            Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap()),
            now,
            2,
        )
    };
    let early = at(&c, 100);
    assert!(
        early.binds.iter().all(|b| b.job != "default/c"),
        "{:?}",
        early.binds
    );
    assert_eq!(
        early.event_for("default/c").unwrap().reason,
        "NotInqueueable"
    );

    // Still not placed at 400s, even this session: back to Pending when the session closes.
    let late = at(&c, 400);
    let a = late.group("default/a").unwrap();
    assert_eq!(a.phase, GroupPhase::Pending);
    assert_eq!(a.conditions[0].reason, "InqueueTimeout");
    assert!(
        a.conditions[0].message.contains("admitted 400s ago"),
        "{}",
        a.conditions[0].message
    );
    // The next session admits c before a (which just gave its admission back), and c runs.
    let w = c.world();
    let group = w
        .jobs
        .get(w.job_id("default/a").unwrap())
        .unwrap()
        .group
        .clone()
        .unwrap();
    c.apply(tephra_scheduler::Event::PodGroupUpsert(PodGroupSpec {
        phase: GroupPhase::Pending,
        phase_since: 400,
        ..group
    }))
    .unwrap();
    let next = at(&c, 401);
    assert_eq!(
        next.binds.iter().filter(|b| b.job == "default/c").count(),
        1,
        "c is admitted and runs once a stops holding the budget: {:?}",
        next.events
    );
}

#[test]
fn a_podgroup_whose_pods_are_all_gone_goes_back_to_pending() {
    let mut c = fleet(1, 1);
    add_job(&mut c, &gpu_job("j", 2, "2").phase(GroupPhase::Inqueue)).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    tephra_scheduler::testing::apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    assert_eq!(
        c.world()
            .jobs
            .get(c.world().job_id("default/j").unwrap())
            .unwrap()
            .group
            .as_ref()
            .unwrap()
            .phase,
        GroupPhase::Running
    );
    for i in 0..2 {
        c.apply(tephra_scheduler::Event::PodDelete {
            namespace: "default".into(),
            name: format!("j-w-{i}"),
        })
        .unwrap();
    }
    let d = run_with(&c, DEFAULT_CONFIG);
    assert_eq!(
        d.group("default/j").map(|g| g.phase),
        Some(GroupPhase::Pending),
        "{:?}",
        d.groups
    );
}

/// One full 8-GPU node (low-priority work) and three high-priority 8-GPU jobs waiting.
fn full_node_and_three_urgent_jobs() -> Cache {
    let mut c = fleet(1, 1);
    add_job(
        &mut c,
        &gpu_job("low", 1, "8")
            .priority(1)
            .phase(GroupPhase::Inqueue),
    )
    .unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    tephra_scheduler::testing::apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    for i in 0..3 {
        add_job(
            &mut c,
            &gpu_job(&format!("urgent{i}"), 1, "8")
                .priority(100)
                .created(10 + i),
        )
        .unwrap();
    }
    c
}

fn admitted(d: &Decisions) -> usize {
    d.groups
        .iter()
        .filter(|g| g.job.starts_with("default/urgent") && g.phase == GroupPhase::Inqueue)
        .count()
}

#[test]
fn priority_entitlement_counts_what_it_already_granted() {
    let c = full_node_and_three_urgent_jobs();
    let d = run_with(&c, DEFAULT_CONFIG);
    assert_eq!(
        admitted(&d),
        1,
        "one node of lower-priority work makes room for one job, not three: {:?}",
        d.groups
    );
}

#[test]
fn priority_entitlement_honours_the_enqueue_switches() {
    let c = full_node_and_three_urgent_jobs();
    let config = DEFAULT_CONFIG.replace(
        "  - name: priority\n",
        "  - name: priority\n    enableJobEnqueued: false\n",
    );
    assert_ne!(config, DEFAULT_CONFIG);
    let d = run_with(&c, &config);
    assert_eq!(admitted(&d), 0, "{:?}", d.groups);
}

#[test]
fn a_gang_that_only_a_cluster_now_down_can_hold_is_not_called_impossible() {
    let mut c = Cache::new();
    let mut down = Cluster::named("big");
    down.ready = false;
    add_cluster(&mut c, down).unwrap();
    add_nodes(&mut c, "big", "gpu", 2, GPU8, &[]).unwrap();
    add_cluster(&mut c, Cluster::named("small")).unwrap();
    add_nodes(&mut c, "small", "gpu", 1, GPU8, &[]).unwrap();
    add_job(&mut c, &gpu_job("wide", 2, "8")).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    assert!(
        d.event_for("default/wide")
            .is_none_or(|e| !e.message.contains("can never be placed")),
        "{:?}",
        d.events
    );
}

#[test]
fn a_queue_admissible_demand_counts_only_waiting_jobs_that_could_be_placed() {
    let mut c = fleet(1, 1);
    // Takes the only node.
    add_job(&mut c, &gpu_job("runs", 1, "8").created(0)).unwrap();
    // Could run once the node is free: admissible.
    add_job(&mut c, &gpu_job("waits", 1, "8").created(1)).unwrap();
    // No node has 16 GPUs: never placed.
    add_job(&mut c, &gpu_job("huge", 1, "16").created(2)).unwrap();
    // Two pods for a gang of five: never placed until more pods come.
    add_job(&mut c, &gpu_job("short", 2, "1").min_member(5).created(3)).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    assert_eq!(d.binds.len(), 1, "{:?}", d.binds);
    assert_eq!(d.binds[0].job, "default/runs");
    let q = d.queues.iter().find(|q| q.name == "default").unwrap();
    let one = resources(
        &mut c,
        &[
            ("cpu", "8"),
            ("memory", "64Gi"),
            ("nvidia.com/gpu", "8"),
            ("pods", "1"),
        ],
    )
    .unwrap();
    assert_eq!(
        q.admissible, one,
        "only `waits` could be placed once room is made"
    );
    // The deserved share still counts what every job asks (Volcano's proportion).
    let (figures, _) = q.figures.unwrap();
    assert!(
        figures.request.0 > q.admissible.0,
        "request {:?} counts the jobs that can never be placed too",
        figures.request
    );
}

#[test]
fn a_job_the_queue_cannot_admit_yet_is_told_what_it_asks_for() {
    let mut c = fleet(1, 1);
    add_job(&mut c, &gpu_job("first", 1, "8").created(0)).unwrap();
    add_job(&mut c, &gpu_job("second", 1, "8").created(1)).unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    let why = d.event_for("default/second").unwrap();
    assert_eq!(why.reason, "NotInqueueable");
    assert!(
        why.message.contains("cannot admit the job yet")
            && why.message.contains("nvidia.com/gpu 8")
            && why.message.contains("cpu 8"),
        "{}",
        why.message
    );
}

/// A Volcano Job's PodGroup comes before its pods: the largest task its controller declares
/// is enough to tell, in the first session, that no node can ever hold it.
#[test]
fn a_podgroup_whose_declared_task_fits_no_node_is_not_inqueueable_before_its_pods_exist() {
    let mut c = fleet(2, 2);
    let mut group = |name: &str, gpus: &str| {
        let ask = resources(&mut c, &[("cpu", "1"), ("nvidia.com/gpu", gpus)]).unwrap();
        PodGroupSpec {
            namespace: "default".into(),
            name: name.into(),
            queue: "default".into(),
            min_member: 1,
            min_task_member: Default::default(),
            min_resources: Some(ask),
            largest_task: Some(ask),
            priority_class: None,
            priority: None,
            phase: GroupPhase::Pending,
            phase_since: 0,
            created: 0,
            policy: Arc::new(Default::default()),
            topology: None,
            sub_groups: Vec::new(),
        }
    };
    let (big, fits) = (group("big", "12"), group("fits", "8"));
    c.apply(tephra_scheduler::Event::PodGroupUpsert(big))
        .unwrap();
    c.apply(tephra_scheduler::Event::PodGroupUpsert(fits))
        .unwrap();
    let d = run_with(&c, DEFAULT_CONFIG);
    let why = d.event_for("default/big").unwrap();
    assert_eq!(why.reason, "NotInqueueable");
    assert!(
        why.message.contains("never be placed")
            && why
                .message
                .contains("largest task needs more nvidia.com/gpu"),
        "{}",
        why.message
    );
    assert_ne!(
        d.group("default/big").map(|g| g.phase),
        Some(GroupPhase::Inqueue)
    );
    // A task as large as a node is admitted (its pods come next).
    assert_eq!(
        d.group("default/fits").map(|g| g.phase),
        Some(GroupPhase::Inqueue)
    );
}
