//! Waiting jobs cost nothing: a job a session finds can never be placed is parked, no later
//! session looks at it, and it comes back as soon as something that could change the verdict
//! happens (its PodGroup or pods, a node or cluster that could hold it, a new configuration).
//! The queue counts the cache keeps for every session stay equal to a full recount.
//!
//! A Pending job the enqueue votes refused rests likewise: later sessions say nothing new of it
//! while the votes still refuse it, and it is admitted as soon as something that could change
//! the answer happens: room freed where it may run, its own PodGroup, its queue, a new
//! configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::cache::Event;
use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, GroupPhase, PhaseCounts, QueueSpec, TaskStatus};
use tephra_scheduler::resources::Resources;
use tephra_scheduler::testing::{
    GPU8, GangJob, Role, add_cluster, add_job, add_nodes, apply_binds,
};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

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

/// One cluster of one 8-GPU node, a 16-GPU job that can never be placed and a 1-GPU job that
/// fits.
fn fleet() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("c0")).unwrap();
    add_nodes(&mut c, "c0", "gpu", 1, GPU8, &[]).unwrap();
    add_job(&mut c, &job("huge", "16")).unwrap();
    add_job(&mut c, &job("small", "1")).unwrap();
    c
}

fn session(c: &mut Cache, id: u64) -> Decisions {
    let d = schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap()),
        id as i64,
        id,
    );
    apply_binds(c, &d).unwrap();
    d
}

fn parked(c: &Cache, key: &str) -> bool {
    let id = c.world().job_id(key).unwrap();
    c.world().parked.contains(&id) && !c.world().active_jobs.contains(&id)
}

fn pending_in_default(d: &Decisions) -> u32 {
    d.queues
        .iter()
        .find(|q| q.name == "default")
        .unwrap()
        .pending
}

#[test]
fn a_job_that_can_never_be_placed_is_parked_and_no_later_session_looks_at_it() {
    let mut c = fleet();
    let first = session(&mut c, 1);
    assert_eq!(
        first.event_for("default/huge").unwrap().reason,
        "NotInqueueable"
    );
    assert_eq!(first.park.jobs, vec!["default/huge".to_string()]);
    assert!(parked(&c, "default/huge"));
    assert!(
        !parked(&c, "default/small"),
        "a job that fits is never parked"
    );

    let second = session(&mut c, 2);
    assert!(
        second.event_for("default/huge").is_none() && second.group("default/huge").is_none(),
        "a parked job is not tried again: {:?}",
        second.events
    );
    assert!(parked(&c, "default/huge"));
    assert_eq!(pending_in_default(&second), 1, "it still counts as Pending");
}

#[test]
fn a_parked_job_comes_back_when_a_node_that_can_hold_it_joins() {
    let mut c = fleet();
    session(&mut c, 1);
    assert!(parked(&c, "default/huge"));
    add_nodes(
        &mut c,
        "c0",
        "big",
        1,
        &[
            ("cpu", "96"),
            ("memory", "1Ti"),
            ("pods", "110"),
            ("nvidia.com/gpu", "16"),
        ],
        &[],
    )
    .unwrap();
    assert!(!parked(&c, "default/huge"), "a new node ends every verdict");
    let mut bound = false;
    for id in 2..5 {
        let d = session(&mut c, id);
        bound |= d.binds.iter().any(|b| b.job == "default/huge");
    }
    assert!(bound, "the job runs on the new node");
}

#[test]
fn a_parked_job_comes_back_when_its_podgroup_changes() {
    let mut c = fleet();
    session(&mut c, 1);
    let id = c.world().job_id("default/huge").unwrap();
    let group = c.world().jobs.get(id).unwrap().group.clone().unwrap();
    c.apply(Event::PodGroupUpsert(group.clone())).unwrap();
    assert!(
        parked(&c, "default/huge"),
        "a resync that changes nothing keeps it parked"
    );
    c.apply(Event::PodGroupUpsert(
        tephra_scheduler::model::PodGroupSpec {
            priority: Some(5),
            ..group
        },
    ))
    .unwrap();
    assert!(!parked(&c, "default/huge"));
    let d = session(&mut c, 2);
    assert_eq!(
        d.event_for("default/huge").unwrap().reason,
        "NotInqueueable",
        "tried again, and still says why it waits"
    );
    assert!(parked(&c, "default/huge"));
}

#[test]
fn a_verdict_on_a_snapshot_older_than_a_change_parks_nothing() {
    let mut c = fleet();
    let d = schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap()),
        1,
        1,
    );
    assert_eq!(d.park.jobs.len(), 1);
    // The job's pod changes while the session runs.
    let id = c.world().task_id("default/huge-w-0").unwrap();
    let mut spec = c.world().tasks.get(id).unwrap().spec.clone();
    spec.created += 1;
    c.apply(Event::PodUpsert(spec)).unwrap();
    c.park(&d.park);
    assert!(!parked(&c, "default/huge"), "the change must be seen first");

    // The fleet changes while the session runs.
    let mut c = fleet();
    let d = schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap()),
        1,
        1,
    );
    add_cluster(&mut c, Cluster::named("c1")).unwrap();
    c.park(&d.park);
    assert!(!parked(&c, "default/huge"));
}

#[test]
fn a_new_configuration_brings_every_parked_job_back() {
    let mut c = fleet();
    session(&mut c, 1);
    assert!(parked(&c, "default/huge"));
    c.unpark_all();
    assert!(!parked(&c, "default/huge"));
    assert!(c.world().parked.is_empty());
}

#[test]
fn a_node_that_only_changes_readiness_keeps_verdicts() {
    let mut c = fleet();
    session(&mut c, 1);
    let id = c.world().node_id("c0", "gpu-0").unwrap();
    let mut spec = c.world().nodes.get(id).unwrap().spec.clone();
    spec.ready = false;
    c.apply(Event::NodeUpsert(spec)).unwrap();
    assert!(
        parked(&c, "default/huge"),
        "what a cluster could ever hold counts every node, ready or not"
    );
}

/// A full recount of PodGroups by queue and phase.
fn recount(c: &Cache) -> std::collections::BTreeMap<String, PhaseCounts> {
    let mut out = std::collections::BTreeMap::<String, PhaseCounts>::new();
    for (_, j) in c.world().jobs.iter() {
        if let Some(g) = &j.group {
            out.entry(g.queue.clone()).or_default().count(g.phase, 1);
        }
    }
    out
}

const PHASES: [GroupPhase; 5] = [
    GroupPhase::Pending,
    GroupPhase::Inqueue,
    GroupPhase::Running,
    GroupPhase::Unknown,
    GroupPhase::Completed,
];

#[derive(Clone, Debug)]
enum Op {
    Add { job: u8, queue: u8, phase: u8 },
    SetPhase { job: u8, phase: u8 },
    Move { job: u8, queue: u8 },
    DeleteGroup { job: u8 },
    DeletePods { job: u8 },
    Session,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, 0u8..3, 0u8..5).prop_map(|(job, queue, phase)| Op::Add { job, queue, phase }),
        (0u8..6, 0u8..5).prop_map(|(job, phase)| Op::SetPhase { job, phase }),
        (0u8..6, 0u8..3).prop_map(|(job, queue)| Op::Move { job, queue }),
        (0u8..6).prop_map(|job| Op::DeleteGroup { job }),
        (0u8..6).prop_map(|job| Op::DeletePods { job }),
        Just(Op::Session),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever happens to PodGroups and pods, the counts the cache keeps (PodGroups by queue
    /// and phase, what each job's Pending pods ask for) equal a recount, and a session's queue
    /// status agrees with them.
    #[test]
    fn queue_counts_kept_by_the_cache_equal_a_recount(ops in prop::collection::vec(op(), 1..40)) {
        let mut c = Cache::new();
        add_cluster(&mut c, Cluster::named("c0")).unwrap();
        add_nodes(&mut c, "c0", "gpu", 1, GPU8, &[]).unwrap();
        for q in ["q0", "q1", "q2"] {
            c.apply(Event::QueueUpsert(Box::new(tephra_scheduler::model::QueueSpec::named(q)))).unwrap();
        }
        let mut id = 0;
        for op in ops {
            let group = |c: &Cache, job: u8| {
                c.world()
                    .job_id(&format!("default/j{job}"))
                    .and_then(|id| c.world().jobs.get(id))
                    .and_then(|j| j.group.clone())
            };
            match op {
                Op::Add { job: j, queue, phase } => {
                    let gpus = if j % 3 == 0 { "16" } else { "2" };
                    add_job(&mut c, &job(&format!("j{j}"), gpus)
                        .queue(&format!("q{queue}"))
                        .phase(PHASES[phase as usize])).unwrap();
                }
                Op::SetPhase { job, phase } => {
                    if let Some(g) = group(&c, job) {
                        c.apply(Event::PodGroupUpsert(tephra_scheduler::model::PodGroupSpec {
                            phase: PHASES[phase as usize], ..g
                        })).unwrap();
                    }
                }
                Op::Move { job, queue } => {
                    if let Some(g) = group(&c, job) {
                        c.apply(Event::PodGroupUpsert(tephra_scheduler::model::PodGroupSpec {
                            queue: format!("q{queue}"), ..g
                        })).unwrap();
                    }
                }
                Op::DeleteGroup { job } => {
                    c.apply(Event::PodGroupDelete { namespace: "default".into(), name: format!("j{job}") }).unwrap();
                }
                Op::DeletePods { job } => {
                    c.apply(Event::PodDelete { namespace: "default".into(), name: format!("j{job}-w-0") }).unwrap();
                }
                Op::Session => {
                    id += 1;
                    let d = session(&mut c, id);
                    let before = recount(&c);
                    for q in &d.queues {
                        let want = before.get(&q.name).copied().unwrap_or_default();
                        prop_assert_eq!(q.pending, want.get(GroupPhase::Pending), "queue {}", q.name);
                        prop_assert_eq!(q.running, want.get(GroupPhase::Running), "queue {}", q.name);
                        prop_assert_eq!(q.inqueue, want.get(GroupPhase::Inqueue), "queue {}", q.name);
                    }
                }
            }
            prop_assert_eq!(&c.world().queue_phases, &recount(&c));
            for p in &c.world().parked {
                prop_assert!(!c.world().active_jobs.contains(p));
                prop_assert!(c.world().jobs.get(*p).is_some());
            }
            for r in &c.world().resting {
                prop_assert!(c.world().has_work(*r), "a resting job has work");
            }
            check_backlog(&c)?;
            // What each job's Pending pods ask for, kept with its tally, equals a recount.
            let w = c.world();
            for (_, j) in w.jobs.iter() {
                let mut all = Resources::ZERO;
                for t in j.tasks.iter().filter_map(|t| w.tasks.get(*t)) {
                    if t.spec.status == TaskStatus::Pending {
                        all.add(&t.spec.shape.request);
                    }
                }
                prop_assert_eq!(j.pending_request, all, "job {}", j.key);
                prop_assert_eq!(j.pending_ungated, all, "job {} (no gates here)", j.key);
            }
        }
    }
}

/// The backlog holds resting jobs that hold nothing, out of the active set, and what it keeps
/// by queue equals a recount.
fn check_backlog(c: &Cache) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut sums = std::collections::BTreeMap::<String, (Resources, u32, u64)>::new();
    for id in w.backlog.ids() {
        prop_assert!(w.resting.contains(&id), "a job in the backlog rests");
        prop_assert!(!w.active_jobs.contains(&id), "and is not active");
        let j = w.jobs.get(id).unwrap();
        let pods_pending = j
            .tasks
            .iter()
            .all(|t| w.tasks.get(*t).unwrap().spec.status == TaskStatus::Pending);
        prop_assert!(pods_pending, "job {} holds nothing", j.key);
        let g = j.group.as_ref().unwrap();
        prop_assert_eq!(g.phase, GroupPhase::Pending);
        let e = w.backlog.entry(id).unwrap();
        prop_assert_eq!(&e.queue, &g.queue);
        prop_assert_eq!(
            e.bucket.0,
            w.job_priority(j),
            "job {} in its priority's bucket",
            j.key
        );
        let s = sums.entry(g.queue.clone()).or_default();
        s.0.add(&j.pending_request);
        s.1 += 1;
        s.2 += u64::try_from(j.tally.pending).unwrap();
    }
    let kept: std::collections::BTreeMap<String, (Resources, u32, u64)> = w
        .backlog
        .queues()
        .map(|(q, b)| (q.clone(), (b.request, b.jobs, b.pending_tasks)))
        .collect();
    prop_assert_eq!(kept, sums);
    Ok(())
}

fn resting(c: &Cache, key: &str) -> bool {
    let id = c.world().job_id(key).unwrap();
    c.world().resting.contains(&id)
}

const WAITING: [&str; 3] = ["default/w1", "default/w2", "default/w3"];

/// One 8-GPU node that a running job fills, and three 4-GPU jobs that the votes refuse: the
/// fleet, over-committed by 1.2, has 1.6 GPUs to admit with.
fn saturated() -> Cache {
    saturated_at(0)
}

/// [`saturated`], every job at `priority`.
fn saturated_at(priority: i32) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("c0")).unwrap();
    add_nodes(&mut c, "c0", "gpu", 1, GPU8, &[]).unwrap();
    add_job(&mut c, &job("runner", "8").priority(priority)).unwrap();
    let d = session(&mut c, 1);
    assert_eq!(d.binds.len(), 1, "the runner fills the node");
    for name in ["w1", "w2", "w3"] {
        add_job(&mut c, &job(name, "4").priority(priority)).unwrap();
    }
    let refused = session(&mut c, 2);
    for key in WAITING {
        let e = refused.event_for(key).unwrap();
        assert_eq!(e.reason, "NotInqueueable");
        assert!(
            e.message.contains("cannot admit the job yet"),
            "{}",
            e.message
        );
        assert!(resting(&c, key), "{key} rests after its refusal was said");
    }
    c
}

#[test]
fn a_refused_job_rests_and_later_sessions_say_nothing_new_of_it() {
    let mut c = saturated();
    let d = session(&mut c, 3);
    for key in WAITING {
        assert!(
            d.event_for(key).is_none() && d.group(key).is_none(),
            "nothing new to say of {key}: {:?}",
            d.groups
        );
        assert!(resting(&c, key));
    }
    assert_eq!(d.resting.jobs, 3, "passed over, and counted");
    assert_eq!(d.resting.pending_tasks, 3);
    let default = d.queues.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(default.pending, 3, "they still count as Pending");
    assert!(
        !default.admissible.is_zero(),
        "and what they ask is still admissible"
    );
}

#[test]
fn a_resting_job_is_admitted_and_placed_as_soon_as_room_is_freed_where_it_may_run() {
    let mut c = saturated();
    session(&mut c, 3);
    // The runner finishes: nothing about the waiting jobs changed, only the room.
    let runner = "default/runner-w-0";
    let at = c.task(runner).unwrap().placement.clone();
    c.set_task(runner, TaskStatus::Succeeded, at).unwrap();
    assert!(resting(&c, "default/w1"), "their own state did not change");
    let d = session(&mut c, 4);
    let placed: Vec<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(
        placed,
        vec!["default/w1", "default/w2"],
        "the freed room goes to the waiting jobs in order, in the same session"
    );
    assert!(
        d.event_for("default/w3").is_none(),
        "the third is still refused, with nothing new to say"
    );
    assert!(resting(&c, "default/w3") && !resting(&c, "default/w1"));
}

#[test]
fn a_resting_job_wakes_when_its_podgroup_changes() {
    let mut c = saturated();
    let id = c.world().job_id("default/w1").unwrap();
    let mut spec = c.world().jobs.get(id).unwrap().group.clone().unwrap();
    spec.created += 1;
    c.apply(Event::PodGroupUpsert(spec)).unwrap();
    assert!(!resting(&c, "default/w1"), "its own spec changed");
    let d = session(&mut c, 3);
    assert_eq!(
        d.event_for("default/w1").unwrap().reason,
        "NotInqueueable",
        "looked at again, and told again"
    );
    assert!(d.event_for("default/w2").is_none());
    assert!(resting(&c, "default/w1"), "and rests again");
}

#[test]
fn a_queue_change_or_a_new_configuration_wakes_every_resting_job() {
    let mut c = saturated();
    c.apply(Event::QueueUpsert(Box::new(QueueSpec::named("other"))))
        .unwrap();
    assert!(WAITING.iter().all(|k| !resting(&c, k)), "a queue changed");
    session(&mut c, 3);
    assert!(WAITING.iter().all(|k| resting(&c, k)), "refused again");
    c.unpark_all();
    assert!(
        WAITING.iter().all(|k| !resting(&c, k)),
        "a new configuration may change any answer"
    );
}

#[test]
fn a_resting_job_is_admitted_when_work_it_may_preempt_appears_in_its_queue() {
    let mut c = saturated_at(10);
    session(&mut c, 3);
    // The runner drops below the waiting jobs' priority: they could now preempt their way
    // in, though nothing about them changed and the votes still refuse them.
    let id = c.world().job_id("default/runner").unwrap();
    let mut spec = c.world().jobs.get(id).unwrap().group.clone().unwrap();
    spec.priority = Some(0);
    c.apply(Event::PodGroupUpsert(spec)).unwrap();
    assert!(resting(&c, "default/w1"));
    let d = session(&mut c, 4);
    let admitted = d
        .groups
        .iter()
        .filter(|g| g.phase == GroupPhase::Inqueue)
        .count();
    assert!(
        admitted >= 1,
        "entitled by the work below it, a resting job is admitted: {:?}",
        d.groups
    );
}
