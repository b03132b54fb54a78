//! Preemption and reclaim: gang-aware, fewest victims, never for equal or lower priority,
//! never across clusters, and reclaim only from queues above their deserved share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, QueueSpec};
use tephra_scheduler::testing::{
    GPU8, GangJob, Role, add_cluster, add_job, add_nodes, apply_binds,
};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    let text = DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

fn run(c: &Cache) -> Decisions {
    schedule(c.snapshot(), config(), 0, 1)
}

fn gpu_job(name: &str, replicas: u32, gpus: &str) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(
            "w",
            replicas,
            &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", gpus)],
        )],
    )
}

/// Submits and runs `jobs` (binds applied) on a fresh cache with `nodes` 8-GPU nodes.
fn running(nodes: usize, jobs: &[GangJob]) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", nodes, GPU8, &[]).unwrap();
    for j in jobs {
        add_job(&mut c, j).unwrap();
        let d = run(&c);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
    }
    c
}

fn evicted_jobs(d: &Decisions) -> std::collections::BTreeSet<String> {
    d.evictions.iter().map(|e| e.job.clone()).collect()
}

#[test]
fn a_higher_priority_gang_preempts_a_lower_one_and_is_pipelined_onto_its_room() {
    let mut c = running(1, &[gpu_job("low", 1, "8").priority(1)]);
    add_job(&mut c, &gpu_job("high", 1, "8").priority(100).created(1)).unwrap();
    let d = run(&c);
    assert_eq!(d.evictions.len(), 1);
    let e = &d.evictions[0];
    assert_eq!(e.job, "default/low");
    assert_eq!(
        e.reason,
        "preempted by default/high (priority 100) in queue default"
    );
    assert_eq!(
        d.pipelined.len(),
        1,
        "the preemptor waits on the freed room"
    );
    assert_eq!(d.pipelined[0].job, "default/high");
    assert!(d.binds.is_empty());
}

#[test]
fn equal_priority_never_preempts() {
    let mut c = running(1, &[gpu_job("first", 1, "8").priority(50)]);
    add_job(&mut c, &gpu_job("second", 1, "8").priority(50).created(1)).unwrap();
    let d = run(&c);
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
}

#[test]
fn a_running_gang_loses_only_its_tasks_above_min_member() {
    // 4 workers, gang of 2: two may go, the gang keeps running on the other two.
    let mut c = running(4, &[gpu_job("elastic", 4, "8").min_member(2).priority(1)]);
    add_job(&mut c, &gpu_job("urgent", 2, "8").priority(100).created(1)).unwrap();
    let d = run(&c);
    assert_eq!(d.evictions.len(), 2, "{:?}", d.evictions);
    assert!(d.evictions.iter().all(|e| e.job == "default/elastic"));
    assert_eq!(d.pipelined.len(), 2);
}

#[test]
fn preemption_never_takes_a_role_below_its_own_minimum() {
    // 2 parameter servers (both required) and 2 workers (1 required), gang of 3: the one
    // spare pod is a worker, so a parameter server may not go even though the gang as a
    // whole could lose one pod.
    let ps = |r: Role| r.min(2);
    let job = GangJob::new(
        "elastic",
        vec![
            ps(Role::new(
                "ps",
                2,
                &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
            )),
            Role::new(
                "w",
                2,
                &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
            )
            .min(1),
        ],
    )
    .min_member(3)
    .priority(1);
    let mut c = running(4, &[job]);
    add_job(&mut c, &gpu_job("urgent", 1, "8").priority(100).created(1)).unwrap();
    let d = run(&c);
    let elastic: Vec<_> = d
        .evictions
        .iter()
        .filter(|e| e.job == "default/elastic")
        .map(|e| e.task.as_str())
        .collect();
    let ps_gone = elastic.iter().filter(|t| t.contains("-ps-")).count();
    assert!(
        ps_gone == 0 || elastic.len() == 4,
        "a parameter server went while the gang kept running: {:?}",
        d.evictions
    );
    assert_eq!(
        elastic.len(),
        1,
        "one spare worker is enough: {:?}",
        d.evictions
    );
}

#[test]
fn a_gang_at_its_minimum_is_evicted_whole_or_not_at_all() {
    // 2 workers, gang of 2: evicting one would break it, so both go.
    let mut c = running(2, &[gpu_job("rigid", 2, "8").priority(1)]);
    add_job(&mut c, &gpu_job("urgent", 1, "8").priority(100).created(1)).unwrap();
    let d = run(&c);
    let victims: Vec<_> = d
        .evictions
        .iter()
        .filter(|e| e.job == "default/rigid")
        .collect();
    assert_eq!(victims.len(), 2, "never below minMember: {:?}", d.evictions);
}

#[test]
fn the_lowest_priority_gang_goes_first_and_no_eviction_is_pointless() {
    // node 0: "tiny" (priority 1) uses 4 GPUs next to "keep" (priority 90) using 4;
    // node 1: "big" (priority 2) uses all 8. The preemptor needs one whole node: evicting
    // "tiny" alone cannot give it one, so "big" goes and "tiny" is spared.
    let mut c = running(
        2,
        &[
            gpu_job("tiny", 1, "4").priority(1),
            gpu_job("keep", 1, "4").priority(90),
            gpu_job("big", 1, "8").priority(2),
        ],
    );
    add_job(&mut c, &gpu_job("urgent", 1, "8").priority(50).created(9)).unwrap();
    let d = run(&c);
    assert_eq!(evicted_jobs(&d), ["default/big".to_string()].into());
}

#[test]
fn preemption_stays_in_the_preemptors_cluster() {
    let mut c = Cache::new();
    for name in ["a", "b"] {
        add_cluster(&mut c, Cluster::named(name)).unwrap();
        add_nodes(&mut c, name, name, 1, GPU8, &[]).unwrap();
    }
    for (i, j) in [
        gpu_job("low-a", 1, "8").priority(1),
        gpu_job("low-b", 1, "8").priority(2),
    ]
    .iter()
    .enumerate()
    {
        add_job(&mut c, &j.clone().created(i as i64)).unwrap();
        let d = run(&c);
        apply_binds(&mut c, &d).unwrap();
    }
    add_job(&mut c, &gpu_job("wide", 2, "8").priority(100).created(5)).unwrap();
    let d = run(&c);
    // Two 8-GPU pods need both clusters' nodes, but a gang stays in one cluster: evicting in
    // both would be the MultiKueue failure. Nothing is evicted.
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
}

fn two_queues(reclaimable: bool) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", 4, GPU8, &[]).unwrap();
    for (name, r) in [("q1", true), ("q2", reclaimable)] {
        let mut q = QueueSpec::named(name);
        q.reclaimable = r;
        c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
    }
    // q2 takes the whole cluster while q1 is idle.
    add_job(&mut c, &gpu_job("hog", 4, "8").min_member(1).queue("q2")).unwrap();
    let d = run(&c);
    apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    add_job(&mut c, &gpu_job("back", 2, "8").queue("q1").created(5)).unwrap();
    c
}

#[test]
fn a_queue_below_its_deserved_share_reclaims_from_one_above_it() {
    let c = two_queues(true);
    let d = run(&c);
    assert_eq!(
        d.evictions.len(),
        2,
        "{:?} {:?} {:?}",
        d.evictions,
        d.events,
        d.groups
    );
    assert!(d.evictions.iter().all(|e| e.job == "default/hog"));
    assert!(
        d.evictions[0]
            .reason
            .starts_with("reclaimed by default/back for queue q1")
    );
}

#[test]
fn a_queue_that_is_not_reclaimable_keeps_its_resources() {
    let c = two_queues(false);
    let d = run(&c);
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
}

#[test]
fn reclaim_never_pushes_a_queue_below_its_deserved_share() {
    // q2 holds 4 nodes and deserves 2 (equal weights, both asking for everything): at most
    // two nodes' worth can be reclaimed, even though "back" asks for three.
    let mut c = two_queues(true);
    add_job(&mut c, &gpu_job("more", 1, "8").queue("q1").created(6)).unwrap();
    let d = run(&c);
    assert_eq!(
        d.evictions.len(),
        2,
        "exactly q2's two nodes above its share: {:?}",
        d.evictions
    );
    assert!(d.evictions.iter().all(|e| e.job == "default/hog"));
    assert!(
        d.pipelined.iter().all(|b| b.job == "default/back"),
        "only back fits in q1's share: {:?}",
        d.pipelined
    );
}

fn sla_config() -> Arc<SchedulerConfig> {
    let text = DEFAULT_CONFIG.replace(
        "  - name: priority\n",
        "  - name: priority\n  - name: sla\n    arguments:\n      sla-waiting-time: 1h\n",
    );
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

#[test]
fn a_gang_past_its_sla_reserves_room_so_small_jobs_cannot_starve_it() {
    // Node 0 has 4 GPUs free, node 1 none. The 2 x 4-GPU gang cannot fit yet; a 4-GPU job
    // arriving later could take node 0's room and keep the gang waiting forever.
    let mut c = running(
        2,
        &[
            gpu_job("filler0", 1, "4"),
            gpu_job("filler1", 1, "8").created(1),
        ],
    );
    add_job(&mut c, &gpu_job("big", 2, "4").created(10)).unwrap();
    add_job(&mut c, &gpu_job("small", 1, "4").created(20)).unwrap();
    // Without an SLA the small job takes the room.
    let d = schedule(c.snapshot(), config(), 7200, 1);
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/small").count(),
        1
    );
    // With the big gang two hours late against a one-hour SLA, it reserves node 0's room.
    let d = schedule(c.snapshot(), sla_config(), 7200, 1);
    assert!(
        d.binds.iter().all(|b| b.job != "default/small"),
        "{:?}",
        d.binds
    );
    assert!(d.pipelined.iter().any(|b| b.job == "default/big"));
    let ev = d.event_for("default/big").unwrap();
    assert!(
        ev.message
            .starts_with("waited past its SLA: reserving room"),
        "{}",
        ev.message
    );
    // Before the SLA runs out nothing is reserved.
    let d = schedule(c.snapshot(), sla_config(), 600, 1);
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/small").count(),
        1
    );
}

#[test]
fn a_late_gang_keeps_the_room_it_reserved_from_one_session_to_the_next() {
    // Two 8-GPU nodes, each with a 5-GPU filler. The 2 x 8-GPU gang is two hours late: it
    // holds both nodes as they drain.
    let mut c = running(
        2,
        &[gpu_job("f0", 1, "5"), gpu_job("f1", 1, "5").created(1)],
    );
    add_job(&mut c, &gpu_job("big", 2, "8").created(10)).unwrap();
    let d = schedule(c.snapshot(), sla_config(), 7200, 1);
    assert!(d.binds.is_empty());
    let held: Vec<&str> = d.held.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(held, ["gpu-0", "gpu-1"], "{:?}", d.held);
    assert!(
        d.event_for("default/big")
            .unwrap()
            .message
            .contains("holding 2 node(s)"),
        "{:?}",
        d.events
    );
    apply_binds(&mut c, &d).unwrap();

    // f0 finishes; a higher-priority 6-GPU job, which goes before the gang, arrives.
    c.apply(Event::PodDelete {
        namespace: "default".into(),
        name: "f0-w-0".into(),
    })
    .unwrap();
    add_job(&mut c, &gpu_job("grab", 1, "6").priority(10).created(7000)).unwrap();
    // Had the room not been kept, the newcomer would take node 0.
    let mut forgetful = c.clone();
    forgetful.nominate(std::iter::empty());
    let d = schedule(forgetful.snapshot(), sla_config(), 7300, 2);
    assert!(d.binds.iter().any(|b| b.job == "default/grab"));
    // It is kept: node 0 is the gang's, which reserves one task there and keeps node 1.
    let d = schedule(c.snapshot(), sla_config(), 7300, 2);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let mut held: Vec<(&str, &str)> = d
        .held
        .iter()
        .map(|b| (b.job.as_str(), b.node.as_str()))
        .collect();
    held.sort();
    assert_eq!(held, [("default/big", "gpu-0"), ("default/big", "gpu-1")]);
    apply_binds(&mut c, &d).unwrap();

    // f1 finishes too: the whole gang fits and binds, and nothing is held any more.
    c.apply(Event::PodDelete {
        namespace: "default".into(),
        name: "f1-w-0".into(),
    })
    .unwrap();
    let d = schedule(c.snapshot(), sla_config(), 7400, 3);
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/big").count(),
        2,
        "{:?}",
        d.binds
    );
    assert!(d.held.is_empty());
    apply_binds(&mut c, &d).unwrap();
    assert!(c.world().nominated.is_empty());
}

#[test]
fn a_late_gang_does_not_hold_room_beyond_its_queues_share() {
    // Two queues of equal weight on two 8-GPU nodes; the gang's queue already runs a 4-GPU
    // job, so the 2 x 8-GPU gang could never run within its half while the other queue asks
    // for room too: the gang keeps nothing for the next session and holds no node.
    let mut c = running(1, &[gpu_job("f0", 1, "4").queue("other")]);
    add_nodes(&mut c, "east", "more", 1, GPU8, &[]).unwrap();
    for q in ["other", "mine"] {
        c.apply(Event::QueueUpsert(Box::new(
            tephra_scheduler::model::QueueSpec::named(q),
        )))
        .unwrap();
    }
    add_job(
        &mut c,
        &gpu_job("mine-run", 1, "4").queue("mine").created(1),
    )
    .unwrap();
    let d = schedule(c.snapshot(), sla_config(), 0, 1);
    apply_binds(&mut c, &d).unwrap();
    add_job(&mut c, &gpu_job("big", 2, "8").queue("mine").created(10)).unwrap();
    add_job(
        &mut c,
        &gpu_job("wide", 1, "8").queue("other").created(7100),
    )
    .unwrap();
    let d = schedule(c.snapshot(), sla_config(), 7200, 2);
    assert!(d.held.is_empty(), "{:?}", d.held);
    let why = &d.event_for("default/big").unwrap().message;
    assert!(
        why.starts_with("waited past its SLA") && !why.contains("holding"),
        "{why}"
    );
}

#[test]
fn impossible_preemptors_ahead_do_not_starve_a_possible_one() {
    // Two 8-GPU nodes full of low-priority work. Five high-priority gangs ahead in job order
    // need three whole nodes each and can never fit; the sixth needs one node.
    let mut c = running(
        2,
        &[
            gpu_job("low0", 1, "8").priority(1),
            gpu_job("low1", 1, "8").priority(1).created(1),
        ],
    );
    for i in 0..5 {
        add_job(
            &mut c,
            &gpu_job(&format!("wide{i}"), 3, "8")
                .priority(100)
                .created(10 + i),
        )
        .unwrap();
    }
    add_job(&mut c, &gpu_job("fits", 1, "8").priority(100).created(20)).unwrap();
    let d = run(&c);
    assert_eq!(d.evictions.len(), 1, "{:?} {:?}", d.evictions, d.events);
    assert!(
        d.pipelined.iter().any(|b| b.job == "default/fits"),
        "{:?}",
        d.pipelined
    );
}
