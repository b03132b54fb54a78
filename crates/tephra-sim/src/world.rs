//! Building the simulated world from a scenario: the fleet ([`Fleet::build`]: clusters and
//! node pools, or a trace's node list), queues, and the scheduler configuration. Every object
//! reaches the scheduler through the cache's event API, and the checker and statistics learn
//! the capacity too.

use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::cache::{Cache, Event};
use tephra_scheduler::model::{Cluster, Dequeue, NodeSpec, QueueSpec, QueueState, Taint};
use tephra_scheduler::resources::{ResourceError, Resources};

use crate::checker::CheckCluster;
use crate::ctx::Ctx;
use crate::ctx::scaled;
use crate::error::{SimError, build_err};
use crate::members::fleet::Fleet;
use crate::members::member::{Timings, members};
use crate::scenario::{ConfigRef, Scenario, ScenarioError, TraceFormat, objects};
use crate::workload::effect;

/// A fleet object (`scenario::objects`) as the cache event that declares it in `cluster`, read
/// as the runtime reads it (the same conversions of `tephra_controllers`).
fn cluster_object(obj: &serde_json::Value) -> Result<Box<dyn FnOnce(String) -> Event>, String> {
    use tephra_controllers::{dra, storage};
    use tephra_scheduler::cache::{DraChange, StorageChange};
    fn typed<T: serde::de::DeserializeOwned>(obj: &serde_json::Value) -> Result<T, String> {
        serde_json::from_value(obj.clone()).map_err(|e| e.to_string())
    }
    let kind = obj
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let storage_event = |change: StorageChange| -> Box<dyn FnOnce(String) -> Event> {
        Box::new(move |cluster| Event::Storage { cluster, change })
    };
    let dra_event = |change: DraChange| -> Box<dyn FnOnce(String) -> Event> {
        Box::new(move |cluster| Event::Dra { cluster, change })
    };
    Ok(match kind {
        "StorageClass" => storage_event(StorageChange::ClassUpsert(storage::class(&typed(obj)?))),
        "PersistentVolume" => {
            let mut pv = storage::volume(&typed(obj)?).map_err(|e| e.to_string())?;
            // No PV controller runs here: a volume no claim references is available at once.
            pv.available = pv.claim.is_none();
            storage_event(StorageChange::VolumeUpsert(pv))
        }
        "DeviceClass" => dra_event(DraChange::ClassUpsert(
            dra::class(&typed(obj)?).map_err(|e| e.to_string())?,
        )),
        "ResourceSlice" => dra_event(DraChange::SliceUpsert(dra::slice(&typed(obj)?))),
        "HyperNode" => {
            let spec = tephra_controllers::topology::hypernode("", &typed(obj)?)
                .map_err(|e| e.to_string())?;
            Box::new(move |cluster| {
                Event::HyperNodeUpsert(tephra_scheduler::model::topology::HyperNodeSpec {
                    cluster,
                    ..spec
                })
            })
        }
        other => return Err(format!("{other} is not a fleet object")),
    })
}

/// The scheduler configuration a scenario names (a file, inline, or tephra's default).
/// With `strict`, Volcano plugins tephra does not implement are refused instead of loaded inert.
pub(crate) fn load_config(s: &Scenario, strict: bool) -> Result<SchedulerConfig, SimError> {
    let text = match &s.scheduler.config {
        None => return Ok(SchedulerConfig::default_config()),
        Some(ConfigRef::Path(p)) => {
            let path = s.resolve(p);
            std::fs::read_to_string(&path).map_err(|e| {
                SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!("scheduler.config: {}: {e}", path.display()),
                })
            })?
        }
        Some(ConfigRef::Inline(v)) => serde_saphyr::to_string(v).map_err(|e| {
            SimError::Scenario(ScenarioError::Invalid {
                path: s.source.clone(),
                message: format!("scheduler.config: {e}"),
            })
        })?,
    };
    let parsed = if strict {
        SchedulerConfig::parse_strict(&text)
    } else {
        SchedulerConfig::parse(&text)
    };
    parsed.map_err(|e| {
        SimError::Scenario(ScenarioError::Invalid {
            path: s.source.clone(),
            message: format!("scheduler.config: {e}"),
        })
    })
}

fn resources_of(cache: &mut Cache, list: &[(String, String)]) -> Result<Resources, ResourceError> {
    cache
        .names_mut()
        .parse(list.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

impl Fleet {
    /// The fleet of scenario `s`: its clusters and node pools, or a trace's node list, each
    /// declared to the cache, the checker and the statistics; and its members at time 0.
    pub(crate) fn build(s: &Scenario, ctx: &mut Ctx) -> Result<Self, SimError> {
        let mut fleet = Fleet::new(Timings::from_def(&s.failover));
        fleet.add_clusters(s, ctx)?;
        fleet.members = members(
            fleet
                .clusters
                .iter()
                .map(|(n, c)| (n.as_str(), c.taints.as_slice())),
        );
        Ok(fleet)
    }

    fn add_cluster(&mut self, ctx: &mut Ctx, c: Cluster) -> Result<(), SimError> {
        ctx.checker.cluster(
            &c.name,
            CheckCluster {
                labels: c.labels.clone(),
                provider: c.provider.clone(),
                region: c.region.clone(),
                zone: c.zones.first().cloned(),
                taints: c.taints.clone(),
                ready: true,
            },
        );
        ctx.stats.cluster(&c.name);
        self.clusters.insert(c.name.clone(), c.clone());
        ctx.apply(Event::ClusterUpsert(c))
    }

    fn add_node(
        &mut self,
        ctx: &mut Ctx,
        spec: NodeSpec,
        capacity: Vec<(String, String)>,
    ) -> Result<(), SimError> {
        ctx.checker.node(&spec.cluster, &spec.name, &capacity);
        let gpus: Vec<(String, u32, u64)> = spec
            .gpus
            .iter()
            .map(|g| (g.uuid.clone(), g.split, g.memory))
            .collect();
        ctx.checker.node_gpus(&spec.cluster, &spec.name, &gpus);
        ctx.stats.capacity(
            &spec.cluster,
            scaled(&capacity, "nvidia.com/gpu"),
            scaled(&capacity, "cpu"),
        );
        self.nodes
            .entry(spec.cluster.clone())
            .or_default()
            .push((spec.name.clone(), capacity));
        ctx.apply(Event::NodeUpsert(spec))
    }

    fn add_clusters(&mut self, s: &Scenario, ctx: &mut Ctx) -> Result<(), SimError> {
        for c in &s.fleet.clusters {
            let mut cluster = Cluster::named(&c.name);
            cluster.labels = c.labels.clone();
            cluster.provider = c.provider.clone();
            cluster.region = c.region.clone();
            cluster.zones = c.zone.clone().into_iter().collect();
            cluster.price = c.price.clone();
            cluster.taints = c
                .taints
                .iter()
                .map(|t| Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: effect(t.effect),
                })
                .collect();
            self.add_cluster(ctx, cluster)?;
            for pool in &c.node_pools {
                let capacity: Vec<(String, String)> =
                    objects::pool_capacity(pool).into_iter().collect();
                let alloc =
                    resources_of(&mut ctx.cache, &capacity).map_err(build_err(&s.source))?;
                let taints: Vec<Taint> = pool
                    .taints
                    .iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: effect(t.effect),
                    })
                    .collect();
                for i in 0..pool.count {
                    self.add_node(
                        ctx,
                        NodeSpec {
                            gpus: objects::node_gpus(c, pool, i).into(),
                            gpu_lock: None,
                            name: objects::node_name(c, pool, i),
                            cluster: c.name.clone(),
                            labels: objects::node_labels(c, pool, i),
                            taints: taints.clone(),
                            allocatable: alloc,
                            unschedulable: false,
                            ready: true,
                        },
                        capacity.clone(),
                    )?;
                }
            }
            for obj in objects::objects(c) {
                let change = cluster_object(&obj).map_err(|message| {
                    SimError::Scenario(ScenarioError::Invalid {
                        path: s.source.clone(),
                        message: format!("fleet.clusters ({}): {message}", c.name),
                    })
                })?;
                ctx.apply(change(c.name.clone()))?;
            }
        }
        if let Some(ft) = &s.fleet.from_trace {
            if ft.format != TraceFormat::AlibabaGpu2023 {
                return Err(SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: "fleet.fromTrace.format: only alibaba-gpu-2023 has a node list".into(),
                }));
            }
            let path = s.resolve(&ft.path);
            let nodes = crate::traces::openb_nodes(&path).map_err(|message| {
                SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!("fleet.fromTrace.path: {message}"),
                })
            })?;
            let max = crate::scenario::check::MAX_NODES;
            if nodes.len() as u64 > max {
                return Err(SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!(
                        "fleet.fromTrace.path: {} nodes; a scenario has at most {max}",
                        nodes.len()
                    ),
                }));
            }
            let n = ft.clusters.max(1);
            for c in 0..n {
                self.add_cluster(ctx, Cluster::named(&format!("openb-{c}")))?;
            }
            for (i, node) in nodes.into_iter().enumerate() {
                let cluster = format!("openb-{}", i % n);
                let alloc =
                    resources_of(&mut ctx.cache, &node.capacity).map_err(build_err(&s.source))?;
                self.add_node(
                    ctx,
                    NodeSpec {
                        gpus: Default::default(),
                        gpu_lock: None,
                        name: node.name,
                        cluster,
                        labels: node.labels,
                        taints: Vec::new(),
                        allocatable: alloc,
                        unschedulable: false,
                        ready: true,
                    },
                    node.capacity,
                )?;
            }
        }
        Ok(())
    }
}

/// Declares the queues of scenario `s`, and `manifests`' Queue documents, to the cache and the
/// statistics.
pub(crate) fn build_queues(
    s: &Scenario,
    ctx: &mut Ctx,
    manifests: Vec<tephra_api::Queue>,
) -> Result<(), SimError> {
    for q in &s.queues {
        let list = |r: &Option<crate::scenario::Resources>| -> Option<Vec<(String, String)>> {
            r.as_ref()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        };
        let mut spec = QueueSpec::named(&q.name);
        spec.weight = q.weight.unwrap_or(1);
        if let Some(l) = list(&q.capability) {
            spec.capability = Some(resources_of(&mut ctx.cache, &l).map_err(build_err(&s.source))?);
        }
        if let Some(l) = list(&q.guarantee) {
            spec.guarantee = Some(resources_of(&mut ctx.cache, &l).map_err(build_err(&s.source))?);
        }
        if let Some(l) = list(&q.deserved) {
            spec.deserved = Some(resources_of(&mut ctx.cache, &l).map_err(build_err(&s.source))?);
        }
        spec.reclaimable = q.reclaimable.unwrap_or(true);
        spec.parent = q.parent.clone();
        spec.priority = q.priority.unwrap_or(0);
        spec.dequeue = match q.dequeue_strategy.as_deref() {
            Some("fifo") => Dequeue::Fifo,
            _ => Dequeue::Traverse,
        };
        spec.state = match q.state.as_deref() {
            Some("Closed") => QueueState::Closed,
            Some("Closing") => QueueState::Closing,
            _ => QueueState::Open,
        };
        ctx.stats.queue(&q.name, spec.weight);
        ctx.apply(Event::QueueUpsert(Box::new(spec)))?;
    }
    // Queue documents among the manifests, read as the Kubernetes runtime reads them.
    for q in manifests {
        let spec = tephra_controllers::queue::spec(&q, ctx.cache.names_mut()).map_err(|e| {
            SimError::Scenario(ScenarioError::Invalid {
                path: s.source.clone(),
                message: format!(
                    "workload.manifests: Queue {}: {e}",
                    q.metadata.name.as_deref().unwrap_or_default()
                ),
            })
        })?;
        ctx.stats.queue(&spec.name, spec.weight);
        ctx.apply(Event::QueueUpsert(Box::new(spec)))?;
    }
    Ok(())
}
