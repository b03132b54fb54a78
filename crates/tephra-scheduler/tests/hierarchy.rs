//! The capacity plugin: hierarchical queues, capability inherited down the tree, guarantees
//! lent while unused and reclaimed when needed, and siblings balanced before their children.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, QueueSpec};
use tephra_scheduler::testing::{
    GPU8, GangJob, Role, add_cluster, add_job, add_nodes, apply_binds, resources,
};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    let text = DEFAULT_CONFIG
        .replace(
            "actions: \"enqueue, allocate, backfill\"",
            "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
        )
        .replace("  - name: proportion\n", "  - name: capacity\n");
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

fn run(c: &Cache) -> Decisions {
    schedule(c.snapshot(), config(), 0, 1)
}

fn gpus(c: &mut Cache, n: &str) -> Option<tephra_scheduler::resources::Resources> {
    Some(resources(c, &[("nvidia.com/gpu", n)]).unwrap())
}

fn queue(c: &mut Cache, name: &str, parent: &str, f: impl FnOnce(&mut Cache, &mut QueueSpec)) {
    let mut q = QueueSpec::named(name);
    q.parent = Some(parent.to_string());
    f(c, &mut q);
    c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
}

fn fleet(nodes: usize) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", nodes, GPU8, &[]).unwrap();
    c
}

fn job(name: &str, queue: &str, replicas: u32) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(
            "w",
            replicas,
            &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
        )],
    )
    .queue(queue)
}

#[test]
fn a_parents_capability_caps_its_children_together() {
    let mut c = fleet(4);
    queue(&mut c, "org", "root", |c, q| q.capability = gpus(c, "16"));
    queue(&mut c, "team-a", "org", |_, _| {});
    queue(&mut c, "team-b", "org", |_, _| {});
    add_job(&mut c, &job("a", "team-a", 2)).unwrap();
    add_job(&mut c, &job("b", "team-b", 2).created(1)).unwrap();
    let d = run(&c);
    let jobs: std::collections::BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(
        jobs.len(),
        1,
        "org may hold 16 GPUs, each team asks for 16: {jobs:?}"
    );
}

#[test]
fn an_unused_guarantee_is_lent_and_taken_back_by_reclaim() {
    let mut c = fleet(4);
    queue(&mut c, "team-a", "root", |c, q| {
        q.guarantee = gpus(c, "16");
        q.deserved = gpus(c, "16");
    });
    queue(&mut c, "team-b", "root", |c, q| q.deserved = gpus(c, "16"));
    // team-a is idle: team-b borrows the whole fleet.
    add_job(&mut c, &job("borrow", "team-b", 4).min_member(1)).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 4, "team-a's unused guarantee is lent");
    apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    // team-a comes back and takes its guarantee back.
    add_job(&mut c, &job("back", "team-a", 2).created(5)).unwrap();
    let d = run(&c);
    assert_eq!(d.evictions.len(), 2, "{:?} {:?}", d.evictions, d.events);
    assert!(
        d.evictions
            .iter()
            .all(|e| e.job == "default/borrow" && e.reason.starts_with("reclaimed"))
    );
}

#[test]
fn siblings_are_balanced_before_their_children() {
    // org-a holds half of what it deserves, org-b all of it. Among leaves b1 looks starved
    // (4 of 100), but the choice is made between the organisations first: a1 goes first.
    let mut c = fleet(3);
    queue(&mut c, "org-a", "root", |c, q| q.deserved = gpus(c, "16"));
    queue(&mut c, "org-b", "root", |c, q| q.deserved = gpus(c, "4"));
    queue(&mut c, "a1", "org-a", |c, q| q.deserved = gpus(c, "16"));
    queue(&mut c, "b1", "org-b", |c, q| q.deserved = gpus(c, "100"));
    for (name, q, n) in [("first-a", "a1", "8"), ("first-b", "b1", "4")] {
        let j = GangJob::new(
            name,
            vec![Role::new("w", 1, &[("cpu", "8"), ("nvidia.com/gpu", n)])],
        )
        .queue(q);
        add_job(&mut c, &j).unwrap();
        let d = run(&c);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
    }
    // One whole node is left; both want it.
    add_job(&mut c, &job("more-a", "a1", 1).created(2)).unwrap();
    add_job(&mut c, &job("more-b", "b1", 1).created(3)).unwrap();
    let d = run(&c);
    assert_eq!(
        d.binds.iter().map(|b| b.job.as_str()).collect::<Vec<_>>(),
        ["default/more-a"]
    );
}

#[test]
fn capacity_and_proportion_cannot_both_order_queues() {
    let text = DEFAULT_CONFIG.replace(
        "  - name: proportion\n",
        "  - name: proportion\n  - name: capacity\n",
    );
    let e = SchedulerConfig::parse(&text).unwrap_err();
    assert!(
        e.to_string()
            .contains("proportion and capacity all order queues"),
        "{e}"
    );
}

#[test]
fn hierarchical_drf_orders_queues_by_weighted_dominant_share() {
    let text = DEFAULT_CONFIG
        .replace(
            "  - name: drf\n    enablePreemptable: false\n",
            "  - name: drf\n    enablePreemptable: false\n    enableHierarchy: true\n",
        )
        .replace("  - name: proportion\n", "");
    let hdrf = Arc::new(SchedulerConfig::parse(&text).unwrap());
    let mut c = fleet(4);
    queue(&mut c, "org-a", "root", |_, q| q.weight = 1);
    queue(&mut c, "org-b", "root", |_, q| q.weight = 3);
    queue(&mut c, "a1", "org-a", |_, _| {});
    queue(&mut c, "b1", "org-b", |_, _| {});
    // org-a holds a quarter of the fleet at weight 1; org-b half at weight 3.
    for (name, q, n) in [("a-run", "a1", 1), ("b-run", "b1", 2)] {
        add_job(&mut c, &job(name, q, n)).unwrap();
        let d = schedule(c.snapshot(), Arc::clone(&hdrf), 0, 1);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
    }
    add_job(&mut c, &job("a-more", "a1", 1).created(5)).unwrap();
    add_job(&mut c, &job("b-more", "b1", 1).created(6)).unwrap();
    let d = schedule(c.snapshot(), hdrf, 0, 2);
    // 0.5 / 3 < 0.25 / 1: org-b is further below its weighted share and gets the last node,
    // although a1 comes first by name.
    assert_eq!(
        d.binds.iter().map(|b| b.job.as_str()).collect::<Vec<_>>(),
        ["default/b-more"]
    );
}

#[test]
fn queue_status_carries_what_each_queue_and_its_parent_ask_for_and_deserve() {
    let mut c = fleet(2);
    queue(&mut c, "org", "root", |c, q| q.deserved = gpus(c, "16"));
    queue(&mut c, "team-a", "org", |c, q| q.deserved = gpus(c, "8"));
    // Three 8-GPU pods asked for, on a fleet of two 8-GPU nodes: two fit, one waits.
    add_job(&mut c, &job("a", "team-a", 1)).unwrap();
    add_job(&mut c, &job("b", "team-a", 1).created(1)).unwrap();
    add_job(&mut c, &job("c", "team-a", 1).created(2)).unwrap();
    let d = run(&c);
    let gpu = c.world().names.len() - 1;
    let figures = |name: &str| {
        d.queues
            .iter()
            .find(|q| q.name == name)
            .and_then(|q| q.figures)
            .map(|(f, _)| f)
            .unwrap()
    };
    let team = figures("team-a");
    assert_eq!(team.request.0[gpu], 24, "three 8-GPU pods pending at open");
    assert_eq!(team.deserved.0[gpu], 8);
    let org = figures("org");
    assert_eq!(
        org.request.0[gpu], 24,
        "a parent asks for what its children ask for"
    );
    assert_eq!(org.deserved.0[gpu], 16);
}
