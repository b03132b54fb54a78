//! Property tests over thousands of generated fleets and workloads: no node over-committed, no
//! gang partly bound, no gang split or misplaced against its policy, no host port given twice on
//! a node, no `DoNotSchedule` spread constraint broken by a bind, same input same output, every
//! waiting job explained, and no higher-priority job left waiting behind a lower one. The
//! checks themselves are in `invariants/checks.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::cache::{DraChange, StorageChange};
use tephra_scheduler::model::{
    AccessModes, ClaimRef, Cluster, GroupPhase, HostPort, JobPolicy, LabelSelector,
    PersistentVolume, PodRules, Requirement, SelectorOp, SpreadTerm, StorageClass, Taint,
    TaintEffect, TaskStatus, Toleration, VolumeClaim, WhenUnsatisfiable, tolerated,
};
use tephra_scheduler::model::{
    AllocatedDevice, AllocationMode, ClaimAllocation, Device, DeviceClass, DeviceRequest, PodClaim,
    ResourceClaim, ResourceSlice, SliceNodes,
};
use tephra_scheduler::plugins;
use tephra_scheduler::resources::{MAX_RESOURCES, Resources};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, resources};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

#[derive(Clone, Debug)]
struct ClusterGen {
    nodes: Vec<(u32, u32)>, // (cpus, gpus)
    tainted: bool,
}

#[derive(Clone, Debug)]
struct JobGen {
    roles: Vec<(u32, u32, u32)>, // (replicas, cpus, gpus)
    min_frac: u32,               // percent of replicas that form the gang
    priority: i32,
    allowed: Vec<bool>, // per cluster; all false means any
    splittable: bool,
    tolerates: bool,
    pending: bool,
    queue: u8,
    /// A host port every pod asks for.
    port: Option<u16>,
    /// A zone spread constraint over the job's own pods: (maxSkew, DoNotSchedule).
    spread: Option<(u32, bool)>,
    /// Each role's pods mount one claim of their own role (WaitForFirstConsumer, local
    /// volumes only), or one already bound to the volume of node 0 of cluster 0.
    claim: Option<bool>,
    /// Each pod of a role takes a ResourceClaim of its role for this many devices.
    devices: Option<u32>,
    /// Pod `i` is planned on node `n<(k + i) % 4>-0` (a fleet scheduler's plan, which may name
    /// a node that is full, too small or absent).
    planned: Option<u32>,
}

fn cluster_gen() -> impl Strategy<Value = ClusterGen> {
    (
        prop::collection::vec(
            (
                prop_oneof![Just(4u32), Just(8), Just(16)],
                prop_oneof![Just(0u32), Just(2), Just(4), Just(8)],
            ),
            1..5,
        ),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(nodes, tainted)| ClusterGen { nodes, tainted })
}

fn job_gen() -> impl Strategy<Value = JobGen> {
    (
        (
            prop::collection::vec(
                (
                    1u32..4,
                    1u32..6,
                    prop_oneof![Just(0u32), Just(0), Just(1), Just(2), Just(4), Just(8)],
                ),
                1..3,
            ),
            1u32..=100,
            0i32..4,
            prop::collection::vec(any::<bool>(), 3),
            prop::bool::weighted(0.3),
            any::<bool>(),
            prop::bool::weighted(0.3),
            0u8..2,
            prop::option::weighted(0.25, prop_oneof![Just(80u16), Just(8080)]),
            prop::option::weighted(0.3, (1u32..3, any::<bool>())),
            prop::option::weighted(0.3, prop::bool::weighted(0.2)),
            prop::option::weighted(0.3, 1u32..3),
        ),
        prop::option::weighted(0.3, 0u32..4),
    )
        .prop_map(
            |(
                (
                    roles,
                    min_frac,
                    priority,
                    allowed,
                    splittable,
                    tolerates,
                    pending,
                    queue,
                    port,
                    spread,
                    claim,
                    devices,
                ),
                planned,
            )| JobGen {
                roles,
                min_frac,
                priority,
                allowed,
                splittable,
                tolerates,
                pending,
                queue,
                port,
                spread,
                claim,
                devices,
                planned,
            },
        )
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn dra(c: &mut Cache, cluster: &str, change: DraChange) {
    c.apply(Event::Dra {
        cluster: cluster.into(),
        change,
    })
    .unwrap();
}

fn storage(c: &mut Cache, cluster: &str, change: StorageChange) {
    c.apply(Event::Storage {
        cluster: cluster.into(),
        change,
    })
    .unwrap();
}

/// The local volume of node `host` of `cluster`, bound to `claim` if given.
fn local_pv(cluster: &str, host: &str, claim: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        name: format!("pv-{cluster}-{host}"),
        labels: Default::default(),
        class: "local".into(),
        capacity: 10 << 30,
        access_modes: AccessModes::RWO,
        block: false,
        node_affinity: vec![vec![Requirement {
            key: HOST.into(),
            op: SelectorOp::In,
            values: vec![host.into()],
        }]],
        claim: claim.map(|n| ClaimRef {
            namespace: "default".into(),
            name: n.into(),
        }),
        available: claim.is_none(),
        deleting: false,
        csi: None,
    }
}

/// The labels, host ports and spread constraint of job `j`'s pods.
fn rules_of(j: usize, jg: &JobGen) -> PodRules {
    let app: BTreeMap<String, String> = [("app".to_string(), format!("j{j}"))].into();
    PodRules {
        labels: app.clone(),
        host_ports: jg
            .port
            .map(|p| vec![HostPort::new(p, "TCP", "")])
            .unwrap_or_default(),
        spread: jg
            .spread
            .map(|(max_skew, hard)| {
                vec![SpreadTerm {
                    max_skew,
                    topology_key: ZONE.into(),
                    when_unsatisfiable: if hard {
                        WhenUnsatisfiable::DoNotSchedule
                    } else {
                        WhenUnsatisfiable::ScheduleAnyway
                    },
                    selector: Some(LabelSelector {
                        match_labels: app,
                        expressions: vec![],
                    }),
                    min_domains: 1,
                    honor_node_affinity: true,
                    honor_taints: false,
                }]
            })
            .unwrap_or_default(),
        ..PodRules::default()
    }
}

const TAINT_KEY: &str = "example.com/maintenance";

fn build(clusters: &[ClusterGen], jobs: &[JobGen], all_inqueue: bool) -> (Cache, Vec<GangJob>) {
    let mut c = Cache::new();
    c.apply(Event::QueueUpsert(Box::new(
        tephra_scheduler::model::QueueSpec::named("q1"),
    )))
    .unwrap();
    for (i, cg) in clusters.iter().enumerate() {
        let name = format!("c{i}");
        let mut cl = Cluster::named(&name);
        cl.region = Some(format!("r{}", i % 2));
        if cg.tainted {
            cl.taints = vec![Taint {
                key: TAINT_KEY.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            }];
        }
        add_cluster(&mut c, cl).unwrap();
        dra(
            &mut c,
            &name,
            DraChange::ClassUpsert(DeviceClass {
                name: "dev".into(),
                selectors: vec![],
            }),
        );
        storage(
            &mut c,
            &name,
            StorageChange::ClassUpsert(StorageClass {
                name: "local".into(),
                provisioner: tephra_scheduler::model::volumes::NO_PROVISIONER.into(),
                wait_for_first_consumer: true,
                allowed_topologies: vec![],
            }),
        );
        for (n, (cpus, gpus)) in cg.nodes.iter().enumerate() {
            let cpu = cpus.to_string();
            let gpu = gpus.to_string();
            let zone = format!("z{}", n % 2);
            let host = format!("n{n}-0");
            add_nodes(
                &mut c,
                &name,
                &format!("n{n}"),
                1,
                &[
                    ("cpu", &cpu),
                    ("memory", "64Gi"),
                    ("pods", "20"),
                    ("nvidia.com/gpu", &gpu),
                ],
                &[(ZONE, &zone), (HOST, &host)],
            )
            .unwrap();
            // Each node has one local volume of its own, and n % 3 devices.
            storage(
                &mut c,
                &name,
                StorageChange::VolumeUpsert(local_pv(&name, &host, None)),
            );
            dra(
                &mut c,
                &name,
                DraChange::SliceUpsert(ResourceSlice {
                    name: format!("{host}-devices"),
                    driver: "dev.example.com".into(),
                    pool: host.clone(),
                    generation: 1,
                    nodes: SliceNodes::Node(host.clone()),
                    devices: (0..n % 3)
                        .map(|i| Device {
                            name: format!("d{i}"),
                            attributes: Default::default(),
                            capacity: Default::default(),
                            ..Default::default()
                        })
                        .collect(),
                    counter_sets: Default::default(),
                }),
            );
        }
    }
    let mut gangs = Vec::new();
    for (j, jg) in jobs.iter().enumerate() {
        if let Some(count) = jg.devices {
            for r in 0..jg.roles.len() {
                for ci in 0..clusters.len() {
                    let claim = ResourceClaim {
                        namespace: "default".into(),
                        name: format!("rc-j{j}-r{r}"),
                        requests: vec![DeviceRequest {
                            name: "dev".into(),
                            class: "dev".into(),
                            selectors: vec![],
                            mode: AllocationMode::Exact(count),
                            capacity: Default::default(),
                        }],
                        match_attributes: vec![],
                        distinct_attributes: vec![],
                        // One job in three finds its claims in cluster 0 allocated before, to a
                        // device of a node that is gone (a bind that failed after its PreBind):
                        // they keep its pods off every node there until deallocated.
                        allocation: (j % 3 == 2 && ci == 0).then(|| ClaimAllocation {
                            devices: vec![AllocatedDevice {
                                request: "dev".into(),
                                driver: "dev.example.com".into(),
                                pool: "gone".into(),
                                device: "d0".into(),
                                ..Default::default()
                            }],
                            nodes: SliceNodes::Node("gone".into()),
                        }),
                        reserved_for: vec![],
                        unsupported: None,
                        deleting: false,
                        resource_version: "1".into(),
                    };
                    dra(&mut c, &format!("c{ci}"), DraChange::ClaimUpsert(claim));
                }
            }
        }
        if let Some(bound) = jg.claim {
            for r in 0..jg.roles.len() {
                let name = format!("c-j{j}-r{r}");
                let volume = bound.then(|| {
                    // Bound to node 0's volume of cluster 0, taken over for it.
                    let pv = local_pv("c0", "n0-0", Some(&name));
                    let v = pv.name.clone();
                    storage(&mut c, "c0", StorageChange::VolumeUpsert(pv));
                    v
                });
                for ci in 0..clusters.len() {
                    let claim = VolumeClaim {
                        namespace: "default".into(),
                        name: name.clone(),
                        class: "local".into(),
                        request: 1 << 30,
                        access_modes: AccessModes::RWO,
                        block: false,
                        volume: volume.clone().filter(|_| ci == 0),
                        bound: volume.is_some() && ci == 0,
                        selected_node: None,
                        selector: None,
                        lost: false,
                        deleting: false,
                    };
                    storage(&mut c, &format!("c{ci}"), StorageChange::ClaimUpsert(claim));
                }
            }
        }
        let roles: Vec<Role> = jg
            .roles
            .iter()
            .enumerate()
            .map(|(r, (replicas, cpus, gpus))| {
                let cpu = cpus.to_string();
                let gpu = gpus.to_string();
                Role::new(
                    &format!("r{r}"),
                    *replicas,
                    &[("cpu", &cpu), ("memory", "1Gi"), ("nvidia.com/gpu", &gpu)],
                )
                .rules(PodRules {
                    device_claims: jg
                        .devices
                        .map(|_| {
                            vec![PodClaim {
                                name: "dev".into(),
                                claim: Some(format!("rc-j{j}-r{r}")),
                            }]
                        })
                        .unwrap_or_default(),
                    claims: jg
                        .claim
                        .map(|_| vec![format!("c-j{j}-r{r}")])
                        .unwrap_or_default(),
                    ..rules_of(j, jg)
                })
                .planned(
                    &jg.planned
                        .map(|k| {
                            (0..*replicas)
                                .map(|i| format!("n{}-0", (k + r as u32 + i) % 4))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let total: u32 = jg.roles.iter().map(|r| r.0).sum();
        let min = ((total * jg.min_frac).div_ceil(100)).max(1);
        let names: Vec<String> = jg
            .allowed
            .iter()
            .enumerate()
            .filter(|(i, a)| **a && *i < clusters.len())
            .map(|(i, _)| format!("c{i}"))
            .collect();
        let policy = JobPolicy {
            cluster_names: names,
            splittable: jg.splittable,
            tolerations: if jg.tolerates {
                vec![Toleration {
                    key: TAINT_KEY.into(),
                    exists: true,
                    ..Default::default()
                }]
            } else {
                vec![]
            },
            ..JobPolicy::default()
        };
        let phase = if jg.pending && !all_inqueue {
            GroupPhase::Pending
        } else {
            GroupPhase::Inqueue
        };
        let queue = if jg.queue == 0 { "default" } else { "q1" };
        let g = GangJob::new(&format!("j{j}"), roles)
            .min_member(min)
            .priority(jg.priority)
            .created(j as i64)
            .phase(phase)
            .queue(queue)
            .policy(policy);
        add_job(&mut c, &g).unwrap();
        gangs.push(g);
    }
    (c, gangs)
}

fn run(c: &Cache) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    )
}

/// The default configuration with preempt and reclaim.
fn run_evicting(c: &Cache) -> Decisions {
    let text = tephra_scheduler::config::DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(&text).unwrap()),
        0,
        2,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn sessions_never_overcommit_split_or_misplace_a_gang(
        clusters in prop::collection::vec(cluster_gen(), 1..4),
        jobs in prop::collection::vec(job_gen(), 1..7),
    ) {
        let (mut c, _) = build(&clusters, &jobs, false);
        let d = run(&c);
        check_invariants(&c, &d)?;
        check_spread(&c, &d)?;
        prop_assert_eq!(&d, &run(&c), "same snapshot and config, different decisions");
        // A second session on top of the first one's binds keeps every rule too.
        tephra_scheduler::testing::apply_binds(&mut c, &d).unwrap();
        let d2 = run(&c);
        check_invariants(&c, &d2)?;
        check_spread(&c, &d2)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn with_preempt_and_reclaim_sessions_never_overcommit_split_or_misplace_a_gang(
        clusters in prop::collection::vec(cluster_gen(), 1..4),
        jobs in prop::collection::vec(job_gen(), 1..7),
        later in prop::collection::vec(job_gen(), 1..4),
    ) {
        let (mut c, _) = build(&clusters, &jobs, false);
        let d = run_evicting(&c);
        check_invariants(&c, &d)?;
        check_pipelined(&c, &d)?;
        // Running work, then new and higher-priority jobs that evict some of it.
        tephra_scheduler::testing::apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
        let (_, more) = build(&clusters, &later, true);
        for (i, j) in more.iter().enumerate() {
            let mut g = j.clone();
            g.name = format!("late{i}");
            let g = g.priority(j.priority + 2).created(100 + i as i64);
            add_job(&mut c, &g).unwrap();
        }
        let d2 = run_evicting(&c);
        check_invariants(&c, &d2)?;
        check_pipelined(&c, &d2)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn a_higher_priority_job_never_waits_behind_a_lower_one_that_took_its_room(
        clusters in prop::collection::vec(cluster_gen(), 1..3),
        jobs in prop::collection::vec(job_gen(), 2..6),
    ) {
        let (c, gangs) = build(&clusters, &jobs, true);
        let d = run(&c);
        let bound: BTreeSet<String> = d.binds.iter().map(|b| b.job.clone()).collect();
        for high in &gangs {
            if bound.contains(&high.key()) {
                continue;
            }
            for low in &gangs {
                if low.queue != high.queue || low.priority >= high.priority || !bound.contains(&low.key()) {
                    continue;
                }
                // Remove the lower-priority job: the higher one must still not fit.
                let mut without = c.clone();
                let w = c.world();
                let j = w.jobs.get(w.job_id(&low.key()).unwrap()).unwrap();
                for t in &j.tasks {
                    let name = w.tasks.get(*t).unwrap().spec.name.clone();
                    without.apply(Event::PodDelete { namespace: "default".into(), name }).unwrap();
                }
                without.apply(Event::PodGroupDelete { namespace: "default".into(), name: low.name.clone() }).unwrap();
                let d2 = run(&without);
                prop_assert!(
                    !d2.binds.iter().any(|b| b.job == high.key()),
                    "{} (priority {}) waited while {} (priority {}) took room it could use",
                    high.key(), high.priority, low.key(), low.priority
                );
            }
        }
    }
}

#[test]
fn resources_helper_parses_against_the_cache() {
    let mut c = Cache::new();
    let r = resources(&mut c, &[("cpu", "1"), ("nvidia.com/gpu", "2")]).unwrap();
    assert_eq!(r.get(0), 1000);
}

#[path = "invariants/checks.rs"]
mod checks;

use checks::{check_invariants, check_pipelined, check_spread};
