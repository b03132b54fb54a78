//! Benchmark worlds E and F: world A's fleet and workload, with the node contracts of real
//! pods. E: every pod has a zone spread constraint over its job's pods and a volume claim of
//! its own (WaitForFirstConsumer, provisioned where the pod lands). F: GPUs come from Dynamic
//! Resource Allocation: GPU nodes publish 8 devices in a ResourceSlice instead of an extended
//! resource, and each GPU pod claims its GPUs through a ResourceClaim of its own, matched by a
//! CEL selector.

use std::collections::BTreeMap;
use std::sync::Arc;

use tephra_scheduler::cache::{Cache, DraChange, Event, StorageChange};
use tephra_scheduler::model::{
    AccessModes, AllocationMode, Attribute, Capacity, Cluster, Device, DeviceClass, DeviceRequest,
    GroupPhase, LabelSelector, NodeSpec, PodClaim, PodGroupSpec, PodRules, PodSpec, ResourceClaim,
    ResourceSlice, Selector, SliceNodes, SpreadTerm, StorageClass, TaskShape, TaskStatus,
    VolumeClaim, WhenUnsatisfiable,
};
use tephra_scheduler::resources::PODS;
use tephra_scheduler::testing::resources;

use super::synthetic::{Rng, gang_sizes};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Which contracts the pods carry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Contracts {
    /// A zone spread constraint and a provisioned volume claim per pod (E).
    SpreadAndVolume,
    /// GPUs through a ResourceClaim per GPU pod (F).
    DraGpus,
}

/// One cluster `c0` of 4,000 CPU and 1,000 GPU nodes in four zones; with `dra`, GPU nodes have
/// no `nvidia.com/gpu` but a ResourceSlice of 8 devices each.
fn fleet(c: &mut Cache, dra: bool) {
    c.apply(Event::ClusterUpsert(Cluster::named("c0"))).unwrap();
    let cpu = resources(c, &[("cpu", "64"), ("memory", "256Gi"), ("pods", "110")]).unwrap();
    let gpu_list: Vec<(&str, &str)> = if dra {
        vec![("cpu", "96"), ("memory", "1Ti"), ("pods", "110")]
    } else {
        vec![
            ("cpu", "96"),
            ("memory", "1Ti"),
            ("pods", "110"),
            ("nvidia.com/gpu", "8"),
        ]
    };
    let gpu = resources(c, &gpu_list).unwrap();
    for (kind, count, alloc) in [("cpu", 4000, cpu), ("gpu", 1000, gpu)] {
        for i in 0..count {
            let name = format!("c0-{kind}-{i}");
            let labels = BTreeMap::from([(ZONE.to_string(), format!("z{}", i % 4))]);
            c.apply(Event::NodeUpsert(NodeSpec {
                gpus: Default::default(),
                gpu_lock: None,
                name: name.clone(),
                cluster: "c0".into(),
                labels,
                taints: Vec::new(),
                allocatable: alloc,
                unschedulable: false,
                ready: true,
            }))
            .unwrap();
            if dra && kind == "gpu" {
                let devices = (0..8)
                    .map(|d| Device {
                        name: format!("gpu-{d}"),
                        attributes: [(
                            "gpu.example.com/model".to_string(),
                            Attribute::Str("A100".into()),
                        )]
                        .into(),
                        capacity: [(
                            "gpu.example.com/memory".to_string(),
                            Capacity {
                                text: "80Gi".into(),
                                value: (80 << 30) * 1000,
                                policy: None,
                            },
                        )]
                        .into(),
                        ..Default::default()
                    })
                    .collect();
                c.apply(Event::Dra {
                    cluster: "c0".into(),
                    change: DraChange::SliceUpsert(ResourceSlice {
                        name: format!("{name}-gpu"),
                        driver: "gpu.example.com".into(),
                        pool: name.clone(),
                        generation: 1,
                        nodes: SliceNodes::Node(name),
                        devices,
                        counter_sets: Default::default(),
                    }),
                })
                .unwrap();
            }
        }
    }
}

/// World A with `contracts` on its pods: the same gangs, sizes and requests (seed 0xA).
pub fn world(contracts: Contracts) -> Cache {
    let mut c = Cache::new();
    let dra = contracts == Contracts::DraGpus;
    fleet(&mut c, dra);
    let selector = tephra_controllers::dra::CelSelector::compile(
        "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model == 'A100'",
    )
    .unwrap();
    let gpu_class = Selector(Arc::new(selector));
    match contracts {
        Contracts::SpreadAndVolume => {
            c.apply(Event::Storage {
                cluster: "c0".into(),
                change: StorageChange::ClassUpsert(StorageClass {
                    name: "standard".into(),
                    provisioner: "csi.example.com".into(),
                    wait_for_first_consumer: true,
                    allowed_topologies: Vec::new(),
                }),
            })
            .unwrap();
        }
        Contracts::DraGpus => {
            c.apply(Event::Dra {
                cluster: "c0".into(),
                change: DraChange::ClassUpsert(DeviceClass {
                    name: "gpu".into(),
                    selectors: vec![gpu_class],
                }),
            })
            .unwrap();
        }
    }
    let mut rng = Rng::new(0xA);
    let sizes = gang_sizes(&mut rng, 5000, 50_000);
    for (i, size) in sizes.iter().enumerate() {
        let job = format!("job-{i}");
        let gpus: i64 = if rng.unit() < 0.3 {
            [1, 2, 4, 8][rng.below(4) as usize]
        } else {
            0
        };
        let (cpu, mem) = if gpus > 0 {
            ((gpus * 8).to_string(), format!("{}Gi", gpus * 64))
        } else {
            (
                (1 + rng.below(16)).to_string(),
                format!("{}Gi", 4 * (1 + rng.below(16))),
            )
        };
        let mut list = vec![("cpu", cpu.as_str()), ("memory", mem.as_str())];
        let gpu_text = gpus.to_string();
        if gpus > 0 && !dra {
            list.push(("nvidia.com/gpu", &gpu_text));
        }
        let mut request = resources(&mut c, &list).unwrap();
        request.set(PODS, 1);
        c.apply(Event::PodGroupUpsert(PodGroupSpec {
            namespace: "default".into(),
            name: job.clone(),
            queue: "default".into(),
            min_member: *size,
            min_task_member: BTreeMap::new(),
            min_resources: Some(request.times(i64::from(*size))),
            largest_task: None,
            priority_class: None,
            priority: Some(0),
            phase: GroupPhase::Inqueue,
            phase_since: i as i64,
            created: i as i64,
            policy: Arc::new(Default::default()),
            topology: None,
            sub_groups: Vec::new(),
        }))
        .unwrap();
        for p in 0..*size {
            let pod = format!("{job}-worker-{p}");
            let labels = BTreeMap::from([("app".to_string(), job.clone())]);
            let mut rules = PodRules {
                labels: labels.clone(),
                ..PodRules::default()
            };
            match contracts {
                Contracts::SpreadAndVolume => {
                    rules.spread = vec![SpreadTerm {
                        max_skew: 1,
                        topology_key: ZONE.into(),
                        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                        selector: Some(LabelSelector {
                            match_labels: labels,
                            expressions: Vec::new(),
                        }),
                        min_domains: 1,
                        honor_node_affinity: true,
                        honor_taints: false,
                    }];
                    let claim = format!("{pod}-data");
                    rules.claims = vec![claim.clone()];
                    c.apply(Event::Storage {
                        cluster: "c0".into(),
                        change: StorageChange::ClaimUpsert(VolumeClaim {
                            namespace: "default".into(),
                            name: claim,
                            class: "standard".into(),
                            request: 100 << 30,
                            access_modes: AccessModes::RWO,
                            block: false,
                            volume: None,
                            bound: false,
                            selected_node: None,
                            selector: None,
                            lost: false,
                            deleting: false,
                        }),
                    })
                    .unwrap();
                }
                Contracts::DraGpus if gpus > 0 => {
                    let claim = format!("{pod}-gpu");
                    rules.device_claims = vec![PodClaim {
                        name: "gpu".into(),
                        claim: Some(claim.clone()),
                    }];
                    c.apply(Event::Dra {
                        cluster: "c0".into(),
                        change: DraChange::ClaimUpsert(ResourceClaim {
                            namespace: "default".into(),
                            name: claim,
                            requests: vec![DeviceRequest {
                                name: "gpu".into(),
                                class: "gpu".into(),
                                selectors: Vec::new(),
                                mode: AllocationMode::Exact(gpus as u32),
                                capacity: Default::default(),
                            }],
                            match_attributes: Vec::new(),
                            distinct_attributes: Vec::new(),
                            allocation: None,
                            reserved_for: Vec::new(),
                            unsupported: None,
                            deleting: false,
                            resource_version: String::new(),
                        }),
                    })
                    .unwrap();
                }
                Contracts::DraGpus => {}
            }
            let shape = Arc::new(TaskShape {
                role: "worker".into(),
                request,
                node_selector: BTreeMap::new(),
                affinity: Vec::new(),
                tolerations: Vec::new(),
                priority: 0,
                preemptable: true,
                namespace: "default".into(),
                priority_class: None,
                rules,
            });
            c.apply(Event::PodUpsert(PodSpec {
                gpus: None,
                namespace: "default".into(),
                name: pod,
                group: Some(job.clone()),
                shape,
                index: p,
                status: TaskStatus::Pending,
                placement: None,
                created: i as i64,
                lives_in: None,
                planned: None,
                ghost_of: None,
                foreign: false,
            }))
            .unwrap();
        }
    }
    c
}
