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
}

/// One job (a PodGroup and its pods).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobView {
    /// Namespace.
    pub namespace: String,
    /// Name (the PodGroup's).
    pub name: String,
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

/// The fleet in `world`; `condition(job)` is the `Unschedulable` condition of a job's PodGroup
/// (`namespace/name`), if it has one that is true.
pub fn build(
    world: &World,
    role: &str,
    condition: &dyn Fn(&str) -> Option<Condition>,
) -> FleetView {
    let mut jobs = Vec::new();
    let mut waiting: BTreeMap<String, Resources> = BTreeMap::new();
    for (_, job) in world.jobs.iter() {
        let Some(g) = job.group.as_ref() else {
            continue;
        };
        let (mut running, mut pending) = (0, 0);
        let (mut clusters, mut nodes) = (Vec::new(), Vec::new());
        for t in job.tasks.iter().filter_map(|t| world.tasks.get(*t)) {
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
        let (reason, message) = condition(&job.key).unwrap_or_default();
        jobs.push(JobView {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
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
            }
        })
        .collect();
    let mut clusters: Vec<ClusterView> = world
        .clusters
        .iter()
        .map(|(id, c)| {
            let (mut alloc, mut used) = (Resources::ZERO, Resources::ZERO);
            let (mut nodes, mut ready_nodes) = (0, 0);
            for n in world
                .cluster_nodes
                .get(id as usize)
                .into_iter()
                .flatten()
                .filter_map(|n| world.nodes.get(*n))
            {
                nodes += 1;
                if n.spec.ready && !n.spec.unschedulable {
                    ready_nodes += 1;
                }
                alloc.add(&n.allocatable());
                used.add(&n.used);
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
                hypernodes: world
                    .topology(id)
                    .map(|t| {
                        t.domains
                            .iter()
                            .map(|d| HyperNodeView {
                                name: d.name.clone(),
                                tier: d.tier,
                                nodes: d.nodes.len(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
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
