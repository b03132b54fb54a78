//! What the web UI shows (`/ui/api/v1/fleet`): the fleet as the scheduler's state holds it,
//! queues, jobs and clusters, built without IO. The same on every replica: a standby's warm
//! cache holds what the leader wrote (PodGroup phases and conditions), so it shows the same
//! picture. Quantities are Kubernetes quantities; nothing secret is in the state, so none is
//! shown.

use std::collections::BTreeMap;

use serde::Serialize;
use tephra_scheduler::cache::World;
use tephra_scheduler::model::{GroupPhase, TaskStatus};
use tephra_scheduler::resources::{MAX_RESOURCES, Resources, format_quantity};

/// The version of the JSON the UI renders (its path says it too).
pub const VERSION: &str = "v1";

/// The whole fleet, as one document.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FleetView {
    /// [`VERSION`].
    pub version: &'static str,
    /// `leader` or `standby`.
    pub role: String,
    /// The cache's generation (bumped by every change it took in).
    pub generation: u64,
    /// Queues, by name.
    pub queues: Vec<QueueView>,
    /// Jobs (PodGroups), by queue and name.
    pub jobs: Vec<JobView>,
    /// Member clusters, by name.
    pub clusters: Vec<ClusterView>,
    /// The expected-start forecast the jobs' `expected_start` come from, once one ran.
    pub forecast: Option<ForecastView>,
}

/// The forecast behind the expected starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ForecastView {
    /// When the state it ran on was taken (seconds since the epoch).
    pub computed_at: i64,
    /// Sessions it ran.
    pub sessions: u32,
    /// Whether its budget ran out before its horizon (jobs without a prediction were not
    /// reached).
    pub cut_short: bool,
}

/// One queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QueueView {
    /// Name.
    pub name: String,
    /// Parent queue (hierarchical queues).
    pub parent: Option<String>,
    /// Weight.
    pub weight: u32,
    /// `Open`, `Closed`, ...
    pub state: String,
    /// What its placed pods hold, per resource.
    pub allocated: BTreeMap<String, String>,
    /// `spec.deserved`, per resource, if set.
    pub deserved: BTreeMap<String, String>,
    /// `spec.capability`, per resource, if set.
    pub capability: BTreeMap<String, String>,
    /// What its jobs not yet running ask for, per resource (their pending pods).
    pub waiting_request: BTreeMap<String, String>,
    /// PodGroups by phase.
    pub pending: u32,
    /// Admitted, not running.
    pub inqueue: u32,
    /// Running.
    pub running: u32,
    /// Why it is starved, if it is: jobs wait while it holds less than it deserves (or
    /// nothing, without `deserved`), with their reasons counted.
    pub starved: Option<String>,
}

/// One job (a PodGroup and its pods).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobView {
    /// Namespace.
    pub namespace: String,
    /// Name (the PodGroup's).
    pub name: String,
    /// The Volcano Job the PodGroup was made for (its controller), when there is one: the
    /// name the user gave, which the UI and the history key the job by ([`JobView::key`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// What made the job, when something did: `CronJob <name>` or `JobFlow <name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Queue.
    pub queue: String,
    /// PodGroup phase.
    pub phase: String,
    /// minMember.
    pub min_member: u32,
    /// Pods.
    pub pods: u32,
    /// Pods running (or bound, or succeeded).
    pub running: u32,
    /// Pods waiting for a node.
    pub pending: u32,
    /// Where its pods run: member clusters.
    pub clusters: Vec<String>,
    /// And nodes (`cluster/node`).
    pub nodes: Vec<String>,
    /// Why it waits, in the words of its PodGroup's condition (`Unschedulable`), if it does.
    pub reason: Option<String>,
    /// The condition's message.
    pub message: Option<String>,
    /// When it entered its phase (seconds since the epoch).
    pub phase_since: i64,
    /// `networkTopology`, in words (`hard, tier 1`), if set.
    pub topology: Option<String>,
    /// When it is expected to start (seconds since the epoch), if it waits and the forecast
    /// reached it.
    pub expected_start: Option<i64>,
    /// Or: not before this time (it does not start within the forecast's horizon).
    pub expected_after: Option<i64>,
    /// What the expected start assumes: how sure it is and which running jobs it assumes end
    /// first ([`crate::eta::Basis::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_basis: Option<String>,
    /// Why it never starts as the fleet is (it can never be placed, its queue does not
    /// exist): never is not "later".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_never: Option<String>,
    /// The clusters it is being evicted from (failover), its old copies still there.
    pub evicting: Vec<String>,
    /// The smallest network-topology domain (HyperNode) holding all its placed pods, when
    /// they are in one cluster and it has HyperNodes.
    pub domain: Option<String>,
}

impl JobView {
    /// What the user named, `namespace/name`: the Volcano Job's name when the PodGroup is a
    /// Job's, the PodGroup's otherwise (an integration's, or one made by hand).
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.namespace,
            self.job.as_deref().unwrap_or(&self.name)
        )
    }
}

/// One member cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClusterView {
    /// Name.
    pub name: String,
    /// Whether its health probe succeeds.
    pub ready: bool,
    /// Region.
    pub region: Option<String>,
    /// Taints (`key=value:Effect`).
    pub taints: Vec<String>,
    /// Nodes.
    pub nodes: u32,
    /// Nodes ready and schedulable.
    pub ready_nodes: u32,
    /// Allocatable, per resource.
    pub allocatable: BTreeMap<String, String>,
    /// Held by its pods, per resource.
    pub allocated: BTreeMap<String, String>,
    /// Its HyperNodes (and label-discovered domains), lowest tier first.
    pub hypernodes: Vec<HyperNodeView>,
    /// Its nodes by class: by GPU product (`nvidia.com/gpu.product`), else by the extended
    /// resources they offer, else `cpu`.
    pub node_classes: Vec<NodeClassView>,
    /// Nodes with shared GPUs, by name.
    pub shared_gpus: Vec<SharedGpuView>,
}

/// One node's shared GPUs (Volcano's vGPU) and what pods hold of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SharedGpuView {
    /// The node.
    pub node: String,
    /// Its shared GPUs.
    pub gpus: u32,
    /// Their memory in all, in MiB.
    pub memory: u64,
    /// The memory pods hold of them, in MiB.
    pub used_memory: u64,
    /// The slices pods hold (one per pod and GPU).
    pub slices: u32,
}

/// Nodes of one class in a cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeClassView {
    /// The class.
    pub name: String,
    /// Nodes.
    pub nodes: u32,
    /// Allocatable, per resource.
    pub allocatable: BTreeMap<String, String>,
    /// Held, per resource.
    pub allocated: BTreeMap<String, String>,
}

/// A node's class (see [`ClusterView::node_classes`]).
fn node_class(world: &World, n: &tephra_scheduler::model::Node) -> String {
    if let Some(p) = n.spec.labels.get("nvidia.com/gpu.product") {
        return p.clone();
    }
    let a = n.allocatable();
    let extended: Vec<&str> = (3..MAX_RESOURCES.min(world.names.len()))
        .filter(|s| a.get(*s) > 0)
        .map(|s| world.names.name(s))
        .collect();
    if extended.is_empty() {
        "cpu".into()
    } else {
        extended.join("+")
    }
}

/// One network-topology domain.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HyperNodeView {
    /// Name.
    pub name: String,
    /// Tier.
    pub tier: u32,
    /// Nodes under it.
    pub nodes: usize,
    /// The HyperNode above it (the smallest of a higher tier holding all its nodes), if any:
    /// the tree the UI draws.
    pub parent: Option<String>,
}

/// A PodGroup's waiting reason and message, as its `Unschedulable` condition says.
pub type Condition = (Option<String>, Option<String>);

fn quantities(world: &World, r: &Resources) -> BTreeMap<String, String> {
    (0..MAX_RESOURCES)
        .filter(|&s| r.get(s) != 0 && s < world.names.len())
        .map(|s| {
            (
                world.names.name(s).to_string(),
                format_quantity(s, r.get(s)),
            )
        })
        .collect()
}

/// A quantity's value in its own units (cores, bytes, ...), or 0 if it does not parse.
pub(crate) fn number(text: &str) -> f64 {
    tephra_scheduler::quantity::parse_scaled(text, 1000).map_or(0.0, |m| m as f64 / 1000.0)
}

/// What the runtime knows of a job beyond the cache, by `namespace/name`.
pub struct Extra<'a> {
    /// The `Unschedulable` condition of its PodGroup, if it has one that is true.
    pub condition: &'a dyn Fn(&str) -> Option<Condition>,
    /// The clusters it is being evicted from.
    pub evicting: &'a dyn Fn(&str) -> Vec<String>,
    /// The Volcano Job its PodGroup was made for, if any.
    pub job: &'a dyn Fn(&str) -> Option<String>,
    /// The CronJob or JobFlow that made that Job, if one did.
    pub owner: &'a dyn Fn(&str) -> Option<String>,
}

/// Why queue `q` is starved, if it is (see [`QueueView::starved`]).
fn starved(q: &QueueView, jobs: &[JobView]) -> Option<String> {
    let waiting: Vec<&JobView> = jobs
        .iter()
        .filter(|j| j.queue == q.name && (j.phase == "Pending" || j.phase == "Inqueue"))
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let short: Vec<&String> = q
        .waiting_request
        .keys()
        .filter(|r| {
            let held = q.allocated.get(*r).map_or(0.0, |v| number(v));
            q.deserved.get(*r).is_some_and(|d| held < number(d))
        })
        .collect();
    let below = if q.deserved.is_empty() {
        q.allocated.is_empty().then(|| "holds nothing".to_string())
    } else {
        let names: Vec<&str> = short.iter().map(|s| s.as_str()).collect();
        (!short.is_empty()).then(|| format!("holds less than it deserves of {}", names.join(", ")))
    }?;
    let mut reasons: BTreeMap<&str, u32> = BTreeMap::new();
    for j in &waiting {
        *reasons
            .entry(j.reason.as_deref().unwrap_or("not tried yet"))
            .or_default() += 1;
    }
    let why: Vec<String> = reasons.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
    Some(format!(
        "{} job(s) wait ({}) while it {below}",
        waiting.len(),
        why.join(", ")
    ))
}

/// The fleet in `world`, with what `extra` knows of each job.
pub fn build(world: &World, role: &str, extra: &Extra<'_>) -> FleetView {
    let topologies: BTreeMap<&str, _> = world
        .clusters
        .iter()
        .filter_map(|(id, c)| Some((c.name.as_str(), world.topology(id)?)))
        .collect();
    let mut jobs = Vec::new();
    let mut waiting: BTreeMap<String, Resources> = BTreeMap::new();
    for (_, job) in world.jobs.iter() {
        // A ghost's job is the old copy of a moving gang, shown with its job (`evicting`).
        let Some(g) = job.group.as_ref().filter(|_| !job.ghost) else {
            continue;
        };
        let (mut running, mut pending) = (0, 0);
        let (mut clusters, mut nodes, mut node_ids) = (Vec::new(), Vec::new(), Vec::new());
        for t in job.tasks.iter().filter_map(|t| world.tasks.get(*t)) {
            node_ids.extend(t.node);
            match t.spec.status {
                TaskStatus::Pending => {
                    pending += 1;
                    if g.phase != GroupPhase::Running {
                        waiting
                            .entry(g.queue.clone())
                            .or_default()
                            .add(&t.spec.shape.request);
                    }
                }
                s if s.is_ready() => running += 1,
                _ => {}
            }
            if let Some((c, n)) = &t.spec.placement {
                if !clusters.contains(c) {
                    clusters.push(c.clone());
                }
                nodes.push(format!("{c}/{n}"));
            }
        }
        clusters.sort();
        nodes.sort();
        nodes.dedup();
        let domain = match (clusters.as_slice(), node_ids.is_empty()) {
            ([one], false) => topologies.get(one.as_str()).and_then(|t| {
                t.domains
                    .iter()
                    .filter(|d| node_ids.iter().all(|n| d.nodes.binary_search(n).is_ok()))
                    .min_by_key(|d| d.tier)
                    .map(|d| d.name.clone())
            }),
            _ => None,
        };
        let (reason, message) = (extra.condition)(&job.key).unwrap_or_default();
        jobs.push(JobView {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            job: (extra.job)(&job.key),
            owner: (extra.owner)(&job.key),
            queue: g.queue.clone(),
            phase: g.phase.as_str().to_string(),
            min_member: g.min_member,
            pods: job.tasks.len() as u32,
            running,
            pending,
            clusters,
            nodes,
            reason,
            message,
            phase_since: g.phase_since,
            topology: g.topology.as_ref().map(|t| {
                let mode = if t.is_hard() { "hard" } else { "soft" };
                match (&t.highest_tier_name, t.highest_tier) {
                    (Some(n), _) => format!("{mode}, tier {n}"),
                    (None, Some(k)) => format!("{mode}, tier {k}"),
                    (None, None) => mode.to_string(),
                }
            }),
            expected_start: None,
            expected_after: None,
            expected_basis: None,
            expected_never: None,
            evicting: (extra.evicting)(&job.key),
            domain,
        });
    }
    jobs.sort_by(|a, b| (&a.queue, &a.namespace, &a.name).cmp(&(&b.queue, &b.namespace, &b.name)));
    let queues = world
        .queues
        .values()
        .map(|q| {
            let phases = world.queue_phases.get(&q.name).copied().unwrap_or_default();
            QueueView {
                name: q.name.clone(),
                parent: q.parent.clone(),
                weight: q.weight,
                state: format!("{:?}", q.state),
                allocated: world
                    .queue_used
                    .get(&q.name)
                    .map(|r| quantities(world, r))
                    .unwrap_or_default(),
                deserved: q
                    .deserved
                    .as_ref()
                    .map(|r| quantities(world, r))
                    .unwrap_or_default(),
                capability: q
                    .capability
                    .as_ref()
                    .map(|r| quantities(world, r))
                    .unwrap_or_default(),
                waiting_request: waiting
                    .get(&q.name)
                    .map(|r| quantities(world, r))
                    .unwrap_or_default(),
                pending: phases.get(GroupPhase::Pending),
                inqueue: phases.get(GroupPhase::Inqueue),
                running: phases.get(GroupPhase::Running) + phases.get(GroupPhase::Unknown),
                starved: None,
            }
        })
        .collect::<Vec<QueueView>>();
    let queues = queues
        .into_iter()
        .map(|mut q| {
            q.starved = starved(&q, &jobs);
            q
        })
        .collect();
    // What pods hold of each node's shared GPUs: node slot → (MiB, slices).
    let mut gpu_use: BTreeMap<tephra_scheduler::model::Id, (u64, u32)> = BTreeMap::new();
    for t in world.gpu_users.iter().filter_map(|&t| world.tasks.get(t)) {
        if let (Some(node), Some(g), true) = (t.node, &t.spec.gpus, t.spec.status.holds_node()) {
            let u = gpu_use.entry(node).or_default();
            for grant in g.all() {
                u.0 += grant.memory;
                u.1 += 1;
            }
        }
    }
    let mut clusters: Vec<ClusterView> = world
        .clusters
        .iter()
        .map(|(id, c)| {
            let mut shared_gpus = Vec::new();
            let (mut alloc, mut used) = (Resources::ZERO, Resources::ZERO);
            let (mut nodes, mut ready_nodes) = (0, 0);
            let mut classes: BTreeMap<String, (u32, Resources, Resources)> = BTreeMap::new();
            for (nid, n) in world
                .cluster_nodes
                .get(id as usize)
                .into_iter()
                .flatten()
                .filter_map(|&nid| world.nodes.get(nid).map(|n| (nid, n)))
            {
                nodes += 1;
                if n.spec.ready && !n.spec.unschedulable {
                    ready_nodes += 1;
                }
                alloc.add(&n.allocatable());
                used.add(&n.used);
                if !n.spec.gpus.is_empty() {
                    let (used_memory, slices) = gpu_use.get(&nid).copied().unwrap_or_default();
                    shared_gpus.push(SharedGpuView {
                        node: n.spec.name.clone(),
                        gpus: u32::try_from(n.spec.gpus.len()).unwrap_or(u32::MAX),
                        memory: n.spec.gpus.iter().map(|g| g.memory).sum(),
                        used_memory,
                        slices,
                    });
                }
                let class = classes.entry(node_class(world, n)).or_default();
                class.0 += 1;
                class.1.add(&n.allocatable());
                class.2.add(&n.used);
            }
            ClusterView {
                name: c.name.clone(),
                ready: c.ready,
                region: c.region.clone(),
                taints: c
                    .taints
                    .iter()
                    .map(|t| format!("{}={}:{:?}", t.key, t.value, t.effect))
                    .collect(),
                nodes,
                ready_nodes,
                allocatable: quantities(world, &alloc),
                allocated: quantities(world, &used),
                hypernodes: topologies
                    .get(c.name.as_str())
                    .map(|t| {
                        t.domains
                            .iter()
                            .map(|d| HyperNodeView {
                                name: d.name.clone(),
                                tier: d.tier,
                                nodes: d.nodes.len(),
                                parent: t
                                    .domains
                                    .iter()
                                    .filter(|p| {
                                        p.tier > d.tier
                                            && d.nodes
                                                .iter()
                                                .all(|n| p.nodes.binary_search(n).is_ok())
                                    })
                                    .min_by_key(|p| (p.tier, p.nodes.len()))
                                    .map(|p| p.name.clone()),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                node_classes: classes
                    .into_iter()
                    .map(|(name, (nodes, a, u))| NodeClassView {
                        name,
                        nodes,
                        allocatable: quantities(world, &a),
                        allocated: quantities(world, &u),
                    })
                    .collect(),
                shared_gpus: {
                    shared_gpus.sort_by(|a, b| a.node.cmp(&b.node));
                    shared_gpus
                },
            }
        })
        .collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    FleetView {
        version: VERSION,
        role: role.to_string(),
        generation: world.generation,
        queues,
        jobs,
        clusters,
        forecast: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(queue: &str, reason: Option<&str>) -> JobView {
        JobView {
            queue: queue.into(),
            phase: "Pending".into(),
            reason: reason.map(String::from),
            ..JobView::default()
        }
    }

    fn q(allocated: &str, deserved: Option<&str>) -> QueueView {
        let m = |v: &str| BTreeMap::from([("cpu".to_string(), v.to_string())]);
        QueueView {
            name: "q".into(),
            allocated: if allocated.is_empty() {
                BTreeMap::new()
            } else {
                m(allocated)
            },
            deserved: deserved.map(m).unwrap_or_default(),
            waiting_request: m("4"),
            ..QueueView::default()
        }
    }

    #[test]
    fn a_queue_is_starved_when_jobs_wait_while_it_holds_less_than_it_deserves() {
        let jobs = [
            waiting("q", Some("NotEnoughResources")),
            waiting("q", Some("NotEnoughResources")),
            waiting("q", None),
            waiting("other", Some("NotInqueueable")),
        ];
        assert_eq!(
            starved(&q("2", Some("8")), &jobs).as_deref(),
            Some(
                "3 job(s) wait (NotEnoughResources ×2, not tried yet ×1) while it holds less than it deserves of cpu"
            )
        );
        assert_eq!(
            starved(&q("8", Some("8")), &jobs),
            None,
            "holds what it deserves"
        );
        assert_eq!(
            starved(&q("2", None), &jobs),
            None,
            "holds something, deserves nothing set"
        );
        assert!(starved(&q("", None), &jobs).is_some_and(|s| s.ends_with("holds nothing")));
        assert_eq!(
            starved(&q("", None), &jobs[3..]),
            None,
            "no job of its own waits"
        );
    }
}
