//! The backlog: a resting job that holds nothing leaves the active set, so that a session
//! touches it only when its queue could admit it. These tests prove it comes back exactly when
//! its situation changes (its pods, its PodGroup, its queue, its priority, the fleet, the
//! configuration, room freed where it may run), and, as a property, that a cache keeping such
//! jobs aside admits, binds and reports queues exactly as one where every waiting job is
//! looked at anew each session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::cache::Event;
use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, GroupPhase, PodGroupSpec, QueueSpec, TaskStatus};
use tephra_scheduler::testing::{
    GPU8, GangJob, Role, add_cluster, add_job, add_nodes, apply_binds,
};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap())
}

fn job(name: &str, gpus: &str) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(
            "w",
            1,
            &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", gpus)],
        )],
    )
    .phase(GroupPhase::Pending)
}

fn session(c: &mut Cache, id: u64) -> Decisions {
    let d = schedule(c.snapshot(), config(), id as i64, id);
    apply_binds(c, &d).unwrap();
    d
}

/// Whether the job is in the backlog, out of the active set.
fn aside(c: &Cache, key: &str) -> bool {
    let id = c.world().job_id(key).unwrap();
    c.world().backlog.contains(id) && !c.world().active_jobs.contains(&id)
}

/// Whether the job is in the active set, awake.
fn awake(c: &Cache, key: &str) -> bool {
    let id = c.world().job_id(key).unwrap();
    !c.world().backlog.contains(id)
        && !c.world().resting.contains(&id)
        && c.world().active_jobs.contains(&id)
}

const WAITING: [&str; 3] = ["default/w1", "default/w2", "default/w3"];

/// One 8-GPU node that a running job fills, and three 4-GPU jobs that the votes refuse (the
/// fleet, over-committed by 1.2, has 1.6 GPUs to admit with): all three in the backlog.
fn saturated() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("c0")).unwrap();
    add_nodes(&mut c, "c0", "gpu", 1, GPU8, &[]).unwrap();
    add_job(&mut c, &job("runner", "8")).unwrap();
    assert_eq!(
        session(&mut c, 1).binds.len(),
        1,
        "the runner fills the node"
    );
    for (i, name) in ["w1", "w2", "w3"].into_iter().enumerate() {
        add_job(&mut c, &job(name, "4").created(i as i64)).unwrap();
    }
    session(&mut c, 2);
    for key in WAITING {
        assert!(
            aside(&c, key),
            "{key} is set aside after its refusal was said"
        );
    }
    c
}

/// The runner's pod finishes, freeing the node.
fn runner_finishes(c: &mut Cache) {
    let runner = "default/runner-w-0";
    let at = c.task(runner).unwrap().placement.clone();
    c.set_task(runner, TaskStatus::Succeeded, at).unwrap();
}

fn group(c: &Cache, key: &str) -> PodGroupSpec {
    let id = c.world().job_id(key).unwrap();
    c.world().jobs.get(id).unwrap().group.clone().unwrap()
}

#[test]
fn a_refused_job_that_holds_nothing_waits_in_its_queues_backlog_with_what_it_asks() {
    let mut c = saturated();
    let (queue, b) = c.world().backlog.queues().next().unwrap();
    let (queue, b) = (queue.to_string(), b.clone());
    assert_eq!(queue, "default");
    assert_eq!((b.jobs, b.pending_tasks), (3, 3));
    let gpu = c.names_mut().parse([("nvidia.com/gpu", "12")]).unwrap();
    let gpu_slot = (0..gpu.0.len()).find(|&i| gpu.0[i] > 0).unwrap();
    assert_eq!(
        b.request.0[gpu_slot], 12,
        "what the three ask, for fair shares"
    );
    assert_eq!(b.admissible.0[gpu_slot], 12, "all three are valid");
    let d = session(&mut c, 3);
    assert_eq!(
        d.resting.jobs, 3,
        "a session passes them over, and counts them"
    );
    assert!(d.groups.is_empty() && d.events.is_empty(), "{:?}", d.groups);
    let default = d.queues.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(default.pending, 3);
    assert_eq!(default.admissible.0[gpu_slot], 12, "from the backlog's sum");
    assert!(WAITING.iter().all(|k| aside(&c, k)));
}

#[test]
fn freed_room_admits_the_backlog_in_job_order_and_only_the_admitted_leave_it() {
    let mut c = saturated();
    runner_finishes(&mut c);
    assert!(aside(&c, "default/w1"), "their own state did not change");
    let d = session(&mut c, 3);
    let placed: Vec<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(placed, vec!["default/w1", "default/w2"], "oldest first");
    assert!(d.event_for("default/w3").is_none());
    assert!(aside(&c, "default/w3"), "the third stays aside");
    assert!(
        !c.world()
            .backlog
            .contains(c.world().job_id("default/w1").unwrap())
    );
}

#[test]
fn a_change_to_its_pods_brings_a_job_back_from_the_backlog() {
    let mut c = saturated();
    let id = c.world().task_id("default/w2-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.created += 1;
    c.apply(Event::PodUpsert(spec)).unwrap();
    assert!(awake(&c, "default/w2"));
    assert!(aside(&c, "default/w1") && aside(&c, "default/w3"));
    let d = session(&mut c, 3);
    assert_eq!(
        d.event_for("default/w2").unwrap().reason,
        "NotInqueueable",
        "looked at anew, and told again"
    );
    assert!(aside(&c, "default/w2"), "and set aside again");
}

#[test]
fn a_change_to_its_podgroup_brings_a_job_back_from_the_backlog() {
    let mut c = saturated();
    let g = group(&c, "default/w3");
    c.apply(Event::PodGroupUpsert(g.clone())).unwrap();
    assert!(
        aside(&c, "default/w3"),
        "a resync that changes nothing keeps it aside"
    );
    c.apply(Event::PodGroupUpsert(PodGroupSpec {
        priority: Some(7),
        ..g
    }))
    .unwrap();
    assert!(awake(&c, "default/w3"));
    runner_finishes(&mut c);
    let d = session(&mut c, 3);
    let placed: Vec<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(
        placed,
        vec!["default/w3", "default/w1"],
        "its new priority puts it first"
    );
}

#[test]
fn a_change_to_its_queue_brings_every_job_of_the_backlog_back_and_a_status_write_does_not() {
    let mut c = saturated();
    let q = QueueSpec::named("default");
    c.apply(Event::QueueUpsert(Box::new(q.clone()))).unwrap();
    assert!(
        WAITING.iter().all(|k| aside(&c, k)),
        "the queue as it was (its status written back)"
    );
    c.apply(Event::QueueUpsert(Box::new(QueueSpec { weight: 3, ..q })))
        .unwrap();
    assert!(WAITING.iter().all(|k| awake(&c, k)), "its spec changed");
    session(&mut c, 3);
    assert!(WAITING.iter().all(|k| aside(&c, k)), "refused again");
    c.apply(Event::QueueDelete("default".into())).unwrap();
    assert!(WAITING.iter().all(|k| awake(&c, k)), "its queue is gone");
}

#[test]
fn the_fleet_or_a_new_configuration_brings_the_backlog_back() {
    let mut c = saturated();
    add_nodes(&mut c, "c0", "more", 1, GPU8, &[]).unwrap();
    assert!(WAITING.iter().all(|k| awake(&c, k)), "a node joined");
    let d = session(&mut c, 3);
    assert_eq!(d.binds.len(), 2, "the new node takes two of them");
    assert!(aside(&c, "default/w3"));
    c.unpark_all();
    assert!(awake(&c, "default/w3"), "a new configuration");
}

#[test]
fn a_priority_class_change_reorders_the_backlog_without_waking_it() {
    let mut c = saturated();
    // w3 takes its priority from a class, worth 0 so far: the same bucket as the others.
    let g = group(&c, "default/w3");
    c.apply(Event::PriorityClassUpsert {
        name: "urgent".into(),
        value: 0,
    })
    .unwrap();
    c.apply(Event::PodGroupUpsert(PodGroupSpec {
        priority: None,
        priority_class: Some("urgent".into()),
        ..g
    }))
    .unwrap();
    session(&mut c, 3);
    assert!(WAITING.iter().all(|k| aside(&c, k)));
    c.apply(Event::PriorityClassUpsert {
        name: "urgent".into(),
        value: 100,
    })
    .unwrap();
    assert!(
        WAITING.iter().all(|k| aside(&c, k)),
        "its status says the same: it stays aside"
    );
    let id = c.world().job_id("default/w3").unwrap();
    assert_eq!(c.world().backlog.entry(id).unwrap().bucket.0, 100);
    runner_finishes(&mut c);
    let d = session(&mut c, 4);
    let placed: Vec<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(
        placed,
        vec!["default/w3", "default/w1"],
        "its class's new value puts it first"
    );
}

#[test]
fn a_job_with_a_pod_past_pending_rests_in_the_active_set() {
    let mut c = saturated();
    // w1 gets a second pod, which is already Succeeded: it holds nothing that counts, yet it
    // is not all Pending, so it is not set aside.
    let g = group(&c, "default/w1");
    let id = c.world().task_id("default/w1-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.name = "w1-w-1".into();
    spec.index = 1;
    spec.status = TaskStatus::Succeeded;
    c.apply(Event::PodUpsert(spec)).unwrap();
    c.apply(Event::PodGroupUpsert(g)).unwrap();
    session(&mut c, 3);
    let id = c.world().job_id("default/w1").unwrap();
    assert!(c.world().active_jobs.contains(&id));
    assert!(!c.world().backlog.contains(id));
}

// The property: a cache whose resting jobs sit in the backlog decides as one where nothing
// rests from one session to the next.

#[derive(Clone, Debug)]
enum Op {
    Add {
        job: u8,
        queue: u8,
        gpus: u8,
        pods: u8,
        created: u8,
    },
    Finish {
        nth: u8,
    },
    DeletePods {
        job: u8,
    },
    Class {
        value: i32,
    },
    Weight {
        queue: u8,
        weight: u32,
    },
    Session,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..14, 0u8..3, 0u8..5, 1u8..3, 0u8..4).prop_map(|(job, queue, gpus, pods, created)| {
            Op::Add { job, queue, gpus, pods, created }
        }),
        2 => (0u8..8).prop_map(|nth| Op::Finish { nth }),
        1 => (0u8..14).prop_map(|job| Op::DeletePods { job }),
        1 => (-5i32..6).prop_map(|value| Op::Class { value }),
        1 => (0u8..3, 1u32..4).prop_map(|(queue, weight)| Op::Weight { queue, weight }),
        4 => Just(Op::Session),
    ]
}

const QUEUES: [&str; 3] = ["q0", "q1", "q2"];
/// A queue no job uses: the oracle changes it before each session, which wakes every resting
/// job there, and nothing else.
const NUDGE: &str = "zz";

fn fleet() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("c0")).unwrap();
    add_nodes(&mut c, "c0", "gpu", 2, GPU8, &[]).unwrap();
    for q in QUEUES.into_iter().chain([NUDGE]) {
        c.apply(Event::QueueUpsert(Box::new(QueueSpec::named(q))))
            .unwrap();
    }
    c.apply(Event::PriorityClassUpsert {
        name: "pc".into(),
        value: 0,
    })
    .unwrap();
    c
}

fn apply(c: &mut Cache, op: &Op) {
    match *op {
        Op::Add {
            job: j,
            queue,
            gpus,
            pods,
            created,
        } => {
            let name = format!("j{j}");
            if c.world().job_id(&format!("default/{name}")).is_some() {
                return;
            }
            let gpus = ["1", "2", "3", "4", "8"][usize::from(gpus)];
            let spec = GangJob::new(
                &name,
                vec![Role::new(
                    "w",
                    u32::from(pods),
                    &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", gpus)],
                )],
            )
            .queue(QUEUES[usize::from(queue)])
            .phase(GroupPhase::Pending)
            .priority(i32::from(j % 2))
            .created(i64::from(created));
            add_job(c, &spec).unwrap();
            if j % 3 == 0 {
                // Its priority from a class.
                let id = c.world().job_id(&format!("default/{name}")).unwrap();
                let g = c.world().jobs.get(id).unwrap().group.clone().unwrap();
                c.apply(Event::PodGroupUpsert(PodGroupSpec {
                    priority: None,
                    priority_class: Some("pc".into()),
                    ..g
                }))
                .unwrap();
            }
        }
        Op::Finish { nth } => {
            let mut running: Vec<String> = c
                .world()
                .tasks
                .iter()
                .filter(|(_, t)| t.spec.status == TaskStatus::Running)
                .map(|(_, t)| t.key.clone())
                .collect();
            running.sort();
            if running.is_empty() {
                return;
            }
            let key = &running[usize::from(nth) % running.len()];
            let at = c.task(key).unwrap().placement.clone();
            c.set_task(key, TaskStatus::Succeeded, at).unwrap();
        }
        Op::DeletePods { job } => {
            c.apply(Event::PodDelete {
                namespace: "default".into(),
                name: format!("j{job}-w-0"),
            })
            .unwrap();
        }
        Op::Class { value } => {
            c.apply(Event::PriorityClassUpsert {
                name: "pc".into(),
                value,
            })
            .unwrap();
        }
        Op::Weight { queue, weight } => {
            let mut q = QueueSpec::named(QUEUES[usize::from(queue)]);
            q.weight = weight;
            c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
        }
        Op::Session => {}
    }
}

/// What a session decided that does not depend on what it had to say: binds, evictions, new
/// phases, and every queue's status (the nudged queue's aside).
fn outcome(c: &Cache, d: &Decisions) -> String {
    let phases: Vec<(String, GroupPhase)> = d
        .groups
        .iter()
        .filter(|g| {
            let id = c.world().job_id(&g.job).unwrap();
            c.world()
                .jobs
                .get(id)
                .unwrap()
                .group
                .as_ref()
                .unwrap()
                .phase
                != g.phase
        })
        .map(|g| (g.job.clone(), g.phase))
        .collect();
    let queues: Vec<_> = d.queues.iter().filter(|q| q.name != NUDGE).collect();
    format!(
        "binds {:?}\nevictions {:?}\nphases {phases:?}\nqueues {queues:?}\nwake {:?}",
        d.binds, d.evictions, d.wake_at
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Whatever happens, the sessions of a cache that sets resting jobs aside bind, evict,
    /// admit and report queues exactly as those of a cache where every resting job is woken
    /// before each session (so that each is looked at in full, as if nothing had rested).
    #[test]
    fn setting_resting_jobs_aside_changes_no_decision(ops in prop::collection::vec(op(), 1..60)) {
        let mut kept = fleet();
        let mut oracle = fleet();
        let mut id = 0u64;
        let mut nudge = 0;
        for op in ops {
            apply(&mut kept, &op);
            apply(&mut oracle, &op);
            if !matches!(op, Op::Session) {
                continue;
            }
            id += 1;
            nudge += 1;
            let mut q = QueueSpec::named(NUDGE);
            q.priority = nudge;
            oracle.apply(Event::QueueUpsert(Box::new(q))).unwrap();
            prop_assert!(oracle.world().backlog.is_empty() && oracle.world().resting.is_empty());
            let now = id as i64 * 60;
            let a = schedule(kept.snapshot(), config(), now, id);
            let b = schedule(oracle.snapshot(), config(), now, id);
            prop_assert_eq!(outcome(&kept, &a), outcome(&oracle, &b), "session {}", id);
            apply_binds(&mut kept, &a).unwrap();
            apply_binds(&mut oracle, &b).unwrap();
        }
    }
}
