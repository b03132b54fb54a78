//! Property tests over thousands of generated fleets and workloads: no node over-committed, no
//! gang partly bound, no gang split or misplaced against its policy, no host port given twice on
//! a node, no `DoNotSchedule` spread constraint broken by a bind, same input same output, every
//! waiting job explained, and no higher-priority job left waiting behind a lower one.
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
    AllocationMode, Device, DeviceClass, DeviceRequest, PodClaim, ResourceClaim, ResourceSlice,
    SliceNodes,
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
    )
        .prop_map(
            |(
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
                        })
                        .collect(),
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
                        }],
                        match_attributes: vec![],
                        allocation: None,
                        reserved_for: vec![],
                        unsupported: None,
                        deleting: false,
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

/// Pipelined reservations never over-commit a node: what runs there, less what is evicted,
/// plus what is bound and pipelined, fits its allocatable.
fn check_pipelined(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut after: BTreeMap<(String, String), Resources> = w
        .nodes
        .iter()
        .map(|(_, n)| ((n.spec.cluster.clone(), n.spec.name.clone()), n.used))
        .collect();
    let request = |task: &str| w.tasks.get(w.task_id(task).unwrap()).unwrap();
    for b in d.binds.iter().chain(&d.pipelined) {
        after
            .get_mut(&(b.cluster.clone(), b.node.clone()))
            .unwrap()
            .add(&request(&b.task).spec.shape.request);
    }
    for e in &d.evictions {
        let t = request(&e.task);
        let (cluster, node) = t.spec.placement.clone().unwrap();
        after
            .get_mut(&(cluster, node))
            .unwrap()
            .sub(&t.spec.shape.request);
    }
    for ((cluster, node), used) in &after {
        let n = w.nodes.get(w.node_id(cluster, node).unwrap()).unwrap();
        for i in 0..MAX_RESOURCES {
            if i == tephra_scheduler::resources::PODS && n.spec.allocatable.get(i) == 0 {
                continue;
            }
            prop_assert!(
                used.get(i) <= n.spec.allocatable.get(i),
                "node {cluster}/{node} over-committed with pipelined pods on {}",
                w.names.name(i)
            );
        }
    }
    Ok(())
}

fn check_invariants(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    // 1. No node over-committed, on any resource.
    let mut added: BTreeMap<(String, String), Resources> = BTreeMap::new();
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        added
            .entry((b.cluster.clone(), b.node.clone()))
            .or_default()
            .add(&t.spec.shape.request);
    }
    for ((cluster, node), req) in &added {
        let n = w.nodes.get(w.node_id(cluster, node).unwrap()).unwrap();
        let total = n.used.plus(req);
        for i in 0..MAX_RESOURCES {
            if i == tephra_scheduler::resources::PODS && n.spec.allocatable.get(i) == 0 {
                continue;
            }
            prop_assert!(
                total.get(i) <= n.spec.allocatable.get(i),
                "node {cluster}/{node} over-committed on {}: {} > {}",
                w.names.name(i),
                total.get(i),
                n.spec.allocatable.get(i)
            );
        }
    }
    // 2-4. Gangs whole, in one cluster unless splittable, where their policy allows.
    let mut by_job: BTreeMap<&str, Vec<&tephra_scheduler::decisions::Bind>> = BTreeMap::new();
    for b in &d.binds {
        by_job.entry(b.job.as_str()).or_default().push(b);
    }
    for (job, binds) in &by_job {
        let j = w.jobs.get(w.job_id(job).unwrap()).unwrap();
        let g = j.group.as_ref().unwrap();
        let ready_before = j
            .tasks
            .iter()
            .filter(|t| w.tasks.get(**t).unwrap().spec.status.is_ready())
            .count();
        prop_assert!(
            binds.len() + ready_before >= g.min_member as usize,
            "job {job} partly bound: {} of {}",
            binds.len(),
            g.min_member
        );
        for (role, min) in &g.min_task_member {
            let n = binds.iter().filter(|b| &b.role == role).count();
            prop_assert!(
                n >= *min as usize,
                "job {job} role {role} below its minimum"
            );
        }
        let clusters: BTreeSet<&str> = binds.iter().map(|b| b.cluster.as_str()).collect();
        prop_assert!(
            g.policy.splittable || clusters.len() == 1,
            "job {job} split across {clusters:?}"
        );
        for cname in clusters {
            let cl = w.clusters.get(w.cluster_id(cname).unwrap()).unwrap();
            prop_assert!(
                plugins::clusteraffinity_allows(&g.policy, cl).is_ok(),
                "job {job} placed on excluded cluster {cname}"
            );
            for t in &cl.taints {
                prop_assert!(
                    t.effect == TaintEffect::PreferNoSchedule
                        || tolerated(&g.policy.tolerations, t),
                    "job {job} placed on tainted cluster {cname}"
                );
            }
        }
    }
    // 5. No host port given twice on one node, counting what runs there.
    check_ports(c, d)?;
    // 6. No pod bound where its volumes cannot be used.
    check_volumes(c, d)?;
    // 7. No pod bound where its devices are not, no device given to two claims.
    check_devices(c, d)?;
    // 6. Every job still waiting has an explanation: from this session, or, for a job an
    // earlier session parked as never placeable, from that session (checked here when parked).
    let bound: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    for job in &d.park.jobs {
        prop_assert!(
            d.event_for(job).is_some(),
            "job {job} parked without an explanation"
        );
    }
    for (id, j) in w.jobs.iter() {
        if w.parked.contains(&id) {
            continue;
        }
        let waiting = j
            .tasks
            .iter()
            .any(|t| w.tasks.get(*t).unwrap().spec.status == TaskStatus::Pending);
        if waiting && !bound.contains(j.key.as_str()) {
            prop_assert!(
                d.event_for(&j.key).is_some(),
                "job {} waits without an explanation",
                j.key
            );
        }
    }
    Ok(())
}

/// Where each pod is once `d`'s binds are applied (pods that hold a node, less those evicted).
fn placed_after(c: &Cache, d: &Decisions) -> Vec<(String, String, String)> {
    let w = c.world();
    let evicted: BTreeSet<&str> = d.evictions.iter().map(|e| e.task.as_str()).collect();
    let mut out: Vec<(String, String, String)> = w
        .tasks
        .iter()
        .filter(|(_, t)| t.spec.status.holds_node() && !evicted.contains(t.key.as_str()))
        .filter_map(|(_, t)| {
            let (cl, n) = t.spec.placement.clone()?;
            Some((t.key.clone(), cl, n))
        })
        .collect();
    out.extend(
        d.binds
            .iter()
            .map(|b| (b.task.clone(), b.cluster.clone(), b.node.clone())),
    );
    out
}

/// Every bound pod's claims are served on its node: a bound claim's volume, or what the
/// session gave the claim (a volume there, or provisioning there); no volume given to two
/// claims.
fn check_volumes(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut given: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    let mut volumes: BTreeMap<(String, String), String> = BTreeMap::new();
    for p in &d.prebinds {
        for v in &p.volumes {
            let slot = (p.cluster.clone(), v.claim.clone());
            if let Some(before) = given.insert(slot.clone(), v.volume.clone()) {
                prop_assert_eq!(&before, &v.volume, "claim {:?} given two things", slot);
            }
            if let Some(pv) = &v.volume
                && let Some(other) =
                    volumes.insert((p.cluster.clone(), pv.clone()), v.claim.clone())
            {
                prop_assert_eq!(&other, &v.claim, "volume {} given to two claims", pv);
            }
        }
    }
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        let n = w
            .nodes
            .get(w.node_id(&b.cluster, &b.node).unwrap())
            .unwrap();
        let st = &w.storage[&b.cluster];
        for name in &t.spec.shape.rules.claims {
            let key = format!("default/{name}");
            let claim = st.claims.get(&key).unwrap();
            let volume = if claim.bound {
                claim.volume.clone()
            } else {
                given
                    .get(&(b.cluster.clone(), key.clone()))
                    .cloned()
                    .flatten()
            };
            let pv = volume.and_then(|v| st.volumes.get(&v));
            prop_assert!(
                pv.is_some_and(|pv| pv.node_allows(&n.spec.labels)),
                "pod {} bound to {}/{} where its claim {key} has no volume",
                b.task,
                b.cluster,
                b.node
            );
        }
    }
    Ok(())
}

/// Every bound pod's ResourceClaims are allocated devices its node reaches, and no device is
/// allocated to two claims.
fn check_devices(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut allocations: BTreeMap<(String, String), tephra_scheduler::model::ClaimAllocation> =
        BTreeMap::new();
    for p in &d.prebinds {
        for b in &p.devices {
            if let Some(a) = &b.allocation {
                let slot = (p.cluster.clone(), b.claim.clone());
                if let Some(before) = allocations.insert(slot.clone(), a.clone()) {
                    prop_assert_eq!(&before, a, "claim {:?} allocated twice", slot);
                }
            }
        }
    }
    let mut held: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for ((cluster, claim), a) in &allocations {
        for dev in &a.devices {
            let k = (cluster.clone(), dev.pool.clone(), dev.device.clone());
            if let Some(other) = held.insert(k.clone(), claim.clone()) {
                prop_assert!(false, "device {k:?} allocated to {other} and {claim}");
            }
        }
    }
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        let n = w
            .nodes
            .get(w.node_id(&b.cluster, &b.node).unwrap())
            .unwrap();
        for pc in &t.spec.shape.rules.device_claims {
            let key = format!("default/{}", pc.claim.clone().unwrap());
            let a = allocations
                .get(&(b.cluster.clone(), key.clone()))
                .cloned()
                .or_else(|| w.dra[&b.cluster].claims[&key].allocation.clone());
            prop_assert!(
                a.is_some_and(|a| a.nodes.reach(&n.spec.name, &n.spec.labels)),
                "pod {} bound to {}/{} where its claim {key} has no devices",
                b.task,
                b.cluster,
                b.node
            );
        }
    }
    Ok(())
}

fn check_ports(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut held: BTreeMap<(String, String), Vec<(String, HostPort)>> = BTreeMap::new();
    for (task, cluster, node) in placed_after(c, d) {
        let t = w.tasks.get(w.task_id(&task).unwrap()).unwrap();
        for p in &t.spec.shape.rules.host_ports {
            let on = held.entry((cluster.clone(), node.clone())).or_default();
            if let Some((other, _)) = on.iter().find(|(_, q)| q.clashes(p)) {
                prop_assert!(
                    false,
                    "{task} and {other} both hold port {} on {cluster}/{node}",
                    p.port
                );
            }
            on.push((task.clone(), p.clone()));
        }
    }
    Ok(())
}

/// After a session that evicted nothing, every job's `DoNotSchedule` zone spread holds: its
/// pods per zone of each cluster differ by at most maxSkew.
fn check_spread(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    if !d.evictions.is_empty() {
        return Ok(());
    }
    let w = c.world();
    // (job, cluster) -> (maxSkew, zone -> pods), with every zone of the cluster present.
    type Zones = BTreeMap<String, u32>;
    let mut counts: BTreeMap<(String, String), (u32, Zones)> = BTreeMap::new();
    let zones_of = |cluster: &str| -> BTreeSet<String> {
        w.nodes
            .iter()
            .filter(|(_, n)| n.spec.cluster == cluster)
            .filter_map(|(_, n)| n.spec.labels.get(ZONE).cloned())
            .collect()
    };
    for (task, cluster, node) in placed_after(c, d) {
        let t = w.tasks.get(w.task_id(&task).unwrap()).unwrap();
        let Some(term) = t.spec.shape.rules.spread.iter().find(|s| s.is_hard()) else {
            continue;
        };
        let key = (t.spec.shape.rules.labels["app"].clone(), cluster.clone());
        let (_, zones) = counts.entry(key).or_insert_with(|| {
            let zones = zones_of(&cluster).into_iter().map(|z| (z, 0)).collect();
            (term.max_skew, zones)
        });
        let n = w.nodes.get(w.node_id(&cluster, &node).unwrap()).unwrap();
        *zones.entry(n.spec.labels[ZONE].clone()).or_insert(0) += 1;
    }
    for ((job, cluster), (max_skew, zones)) in &counts {
        let (min, max) = (zones.values().min().unwrap(), zones.values().max().unwrap());
        prop_assert!(
            max - min <= *max_skew,
            "job {job} spread over {cluster} as {zones:?}, beyond its maxSkew"
        );
    }
    Ok(())
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
