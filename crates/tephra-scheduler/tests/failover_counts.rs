//! A gang counts once for its queue during failover. When a gang moves, its old copy stays
//! behind as ghosts ([`tephra_scheduler::cache::ghost`]) that hold their nodes until the
//! member deletes them, while the declared pods are placed again elsewhere. Whatever order
//! binds, evictions, deletions and sessions come in, the queue's allocated resources count
//! each pod once (the copy that holds the room: the new one once it is placed, the ghost
//! before), the job counts once among the queue's PodGroups, nothing lands in the default
//! queue, and the nodes still carry every copy that holds them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::cache::{Event, ghost_name};
use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, GroupPhase, QueueSpec, TaskStatus};
use tephra_scheduler::resources::{PODS, Resources};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, apply_binds};
use tephra_scheduler::{Cache, SchedulerConfig, schedule};

const CLUSTERS: [&str; 2] = ["east", "west"];

fn fleet(pods: u32) -> Cache {
    let mut c = Cache::new();
    for name in CLUSTERS {
        add_cluster(&mut c, Cluster::named(name)).unwrap();
        add_nodes(
            &mut c,
            name,
            &format!("{name}-n"),
            2,
            &[("cpu", "16"), ("memory", "64Gi"), ("pods", "20")],
            &[],
        )
        .unwrap();
    }
    c.apply(Event::QueueUpsert(Box::new(QueueSpec::named("ml"))))
        .unwrap();
    let job = GangJob::new("train", vec![Role::new("w", pods, &[("cpu", "2")])])
        .queue("ml")
        .phase(GroupPhase::Inqueue);
    add_job(&mut c, &job).unwrap();
    c
}

#[derive(Clone, Debug)]
enum Op {
    /// A session places what it can (its binds taken in as Running).
    Session,
    /// The declared pod `i` is bound by hand in `cluster`.
    Bind { i: u32, cluster: usize },
    /// The job's copy in `cluster` is set aside (failover).
    Evict { cluster: usize },
    /// The ghost of pod `i` in `cluster` is terminating.
    GhostReleasing { i: u32, cluster: usize },
    /// The ghost of pod `i` in `cluster` is gone from its member.
    GhostGone { i: u32, cluster: usize },
    /// The declared pod `i` starts terminating.
    Releasing { i: u32 },
    /// The declared pod `i` finishes (Succeeded) or goes back to Pending, holding nothing.
    Stops { i: u32, finished: bool },
}

fn op(pods: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Session),
        2 => (0..pods, 0..2usize).prop_map(|(i, cluster)| Op::Bind { i, cluster }),
        2 => (0..2usize).prop_map(|cluster| Op::Evict { cluster }),
        1 => (0..pods, 0..2usize).prop_map(|(i, cluster)| Op::GhostReleasing { i, cluster }),
        2 => (0..pods, 0..2usize).prop_map(|(i, cluster)| Op::GhostGone { i, cluster }),
        1 => (0..pods).prop_map(|i| Op::Releasing { i }),
        1 => (0..pods, any::<bool>()).prop_map(|(i, finished)| Op::Stops { i, finished }),
    ]
}

fn pod(i: u32) -> String {
    format!("train-w-{i}")
}

/// Whether the task `key` holds a node and counts for its queue (not terminating).
fn counts(c: &Cache, key: &str) -> bool {
    c.task(key).is_some_and(|t| {
        t.placement.is_some() && t.status.holds_node() && t.status != TaskStatus::Releasing
    })
}

/// The queue's share: each pod once, by whichever of its copies holds a node.
fn expected_share(c: &Cache, pods: u32) -> i64 {
    let mut cpu = 0;
    for i in 0..pods {
        let key = format!("default/{}", pod(i));
        let declared = counts(c, &key);
        let ghost = CLUSTERS
            .iter()
            .any(|cl| counts(c, &format!("default/{}", ghost_name(&pod(i), cl))));
        cpu += if declared || ghost { 2000 } else { 0 };
    }
    cpu
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_moving_gang_counts_once_for_its_queue(
        pods in 1u32..4,
        ops in prop::collection::vec(op(3), 1..30),
    ) {
        let mut c = fleet(pods);
        let config = Arc::new(SchedulerConfig::parse(DEFAULT_CONFIG).unwrap());
        let mut session = 0u64;
        for op in ops {
            match op {
                Op::Session => {
                    session += 1;
                    let d = schedule(c.snapshot(), Arc::clone(&config), session as i64, session);
                    for q in &d.queues {
                        let total = q.pending + q.inqueue + q.running + q.unknown + q.completed;
                        let want = u32::from(q.name == "ml");
                        prop_assert_eq!(total, want, "queue {} counts the job once", q.name);
                    }
                    apply_binds(&mut c, &d).unwrap();
                    // What the session reports is what the cache holds once its binds are in.
                    let ml = d.queues.iter().find(|q| q.name == "ml").unwrap();
                    prop_assert_eq!(ml.allocated_vec.get(0), expected_share(&c, pods));
                }
                Op::Bind { i, cluster } => {
                    let key = format!("default/{}", pod(i % pods));
                    if c.task(&key).is_some_and(|t| t.placement.is_none()) {
                        let node = format!("{}-n-{}", CLUSTERS[cluster], i % 2);
                        c.set_task(&key, TaskStatus::Running, Some((CLUSTERS[cluster].into(), node)))
                            .unwrap();
                    }
                }
                Op::Evict { cluster } => {
                    // As the index does: the copy set aside, the pod declared again.
                    for key in c.copy_in("default/train", CLUSTERS[cluster]) {
                        let declared = c.task(&key).cloned().unwrap();
                        c.set_aside(&key, CLUSTERS[cluster]).unwrap();
                        c.apply(Event::PodUpsert(tephra_scheduler::model::PodSpec {
                            status: TaskStatus::Pending,
                            placement: None,
                            ..declared
                        }))
                        .unwrap();
                    }
                }
                Op::GhostReleasing { i, cluster } => {
                    let key = format!("default/{}", ghost_name(&pod(i % pods), CLUSTERS[cluster]));
                    if let Some(t) = c.task(&key).cloned() {
                        c.apply(Event::PodUpsert(tephra_scheduler::model::PodSpec {
                            status: TaskStatus::Releasing,
                            ..t
                        }))
                        .unwrap();
                    }
                }
                Op::GhostGone { i, cluster } => {
                    c.apply(Event::PodDelete {
                        namespace: "default".into(),
                        name: ghost_name(&pod(i % pods), CLUSTERS[cluster]),
                    })
                    .unwrap();
                }
                Op::Releasing { i } => {
                    c.release(&format!("default/{}", pod(i % pods))).unwrap();
                }
                Op::Stops { i, finished } => {
                    let key = format!("default/{}", pod(i % pods));
                    if let Some(t) = c.task(&key).cloned() {
                        let (status, placement) = if finished {
                            (TaskStatus::Succeeded, t.placement.clone())
                        } else {
                            (TaskStatus::Pending, None)
                        };
                        c.apply(Event::PodUpsert(tephra_scheduler::model::PodSpec {
                            status,
                            placement,
                            ..t
                        }))
                        .unwrap();
                    }
                }
            }
            let w = c.world();
            let share = w.queue_used.get("ml").copied().unwrap_or(Resources::ZERO);
            prop_assert_eq!(share.get(0), expected_share(&c, pods), "the queue's CPU, each pod once");
            prop_assert!(share.get(PODS) <= i64::from(pods), "never more pods than the gang has");
            prop_assert!(
                w.queue_used.get("default").is_none_or(|r| r.is_zero()),
                "a ghost counts for its own job's queue, not the default one"
            );
            let phases: u32 = w
                .queue_phases
                .values()
                .map(|p| p.get(GroupPhase::Pending) + p.get(GroupPhase::Inqueue)
                    + p.get(GroupPhase::Running) + p.get(GroupPhase::Unknown)
                    + p.get(GroupPhase::Completed))
                .sum();
            prop_assert_eq!(phases, 1, "one PodGroup, counted once, ghosts or none");
            // The nodes still carry every copy that holds them.
            let mut on_nodes = 0;
            for (_, n) in w.nodes.iter() {
                on_nodes += n.used.get(PODS);
            }
            let holding = w
                .tasks
                .iter()
                .filter(|(_, t)| t.node.is_some() && t.spec.status.holds_node())
                .count() as i64;
            prop_assert_eq!(on_nodes, holding);
        }
    }
}
