//! Karmada mode's pure half: Karmada's `ResourceBinding`s (`work.karmada.io/v1alpha2`) whose
//! `spec.schedulerName` is tephra's, Karmada's `Cluster`s (`cluster.karmada.io/v1alpha1`) and
//! their members' nodes and pods, read into the core's cache, one gang per binding; and a
//! session's decisions turned into what karmada-scheduler writes on a binding, so that Karmada's
//! binding and execution controllers propagate as usual.
//!
//! A binding's gang is its `spec.components` (a multi-template workload: a Volcano Job's tasks,
//! each with its `minAvailable` replicas, as Karmada's interpreter reports them) or its
//! `spec.replicas` of `spec.replicaRequirements`. It goes whole to one member whose nodes hold
//! it all (the core simulates it on the member's nodes and pods), within the binding's
//! placement (cluster affinity, tolerations of cluster taints) and never to a cluster a
//! graceful-eviction task of the binding names. A binding of a non-workload (no replicas, no
//! components) is duplicated to every cluster its placement allows, as karmada-scheduler does.
//!
//! Until the member's pods of a placed gang hold their nodes, the gang keeps its room in the
//! member (a reservation: its missing pods are placed again, bound to that member, each session
//! and their binds dropped), so that two bindings are never sent to the same room.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeAffinity, Pod, PodSpec as K8sPodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};
use tephra_api::Cluster as ApiCluster;
use tephra_api::well_known::{GROUP_NAME_ANNOTATION, TASK_SPEC};
use tephra_scheduler::model::{GroupPhase, JobPolicy, PodGroupSpec, QueueSpec};
use tephra_scheduler::plugins::clusteraffinity;
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig};

use crate::convert::{self, ConvertError};

/// Karmada's binding API group.
pub const BINDING_GROUP: &str = "work.karmada.io";
/// Its version.
pub const BINDING_VERSION: &str = "v1alpha2";
/// Karmada's cluster API group (served by karmada-aggregated-apiserver).
pub const CLUSTER_GROUP: &str = "cluster.karmada.io";
/// Its version.
pub const CLUSTER_VERSION: &str = "v1alpha1";
/// Where karmada-scheduler records the placement it scheduled a binding with.
pub const APPLIED_PLACEMENT: &str = "policy.karmada.io/applied-placement";
/// The schedulerName tephra's synthetic pods carry inside the core.
const SYNTHETIC_SCHEDULER: &str = "tephra-karmada";
/// The label Volcano's job controller puts on a Job's pods.
const VOLCANO_JOB_LABEL: &str = "volcano.sh/job-name";

/// Why a Karmada object cannot be read. Each names the object and the field.
#[derive(Debug, thiserror::Error)]
pub enum KarmadaError {
    /// A binding does not decode.
    #[error("resourcebinding {key}: {message}")]
    Binding {
        /// `namespace/name`.
        key: String,
        /// Why, with the field.
        message: String,
    },
    /// A Cluster does not decode.
    #[error("cluster {name}: {message}")]
    Cluster {
        /// Name.
        name: String,
        /// Why.
        message: String,
    },
    /// A member's object cannot be read into the core.
    #[error("cluster {cluster}: {source}")]
    Member {
        /// The member.
        cluster: String,
        /// Why.
        source: Box<ConvertError>,
    },
}

/// A member: its Cluster, and its nodes and pods as its watchers see them.
#[derive(Clone, Debug)]
pub struct Member {
    /// The Cluster.
    pub cluster: ApiCluster,
    /// Whether tephra's own watchers of the member are synced (a member it cannot read holds
    /// nothing it can plan on).
    pub synced: bool,
    /// Its nodes.
    pub nodes: Vec<Node>,
    /// Its pods.
    pub pods: Vec<Pod>,
}

/// Everything one pass plans from.
pub struct Input<'a> {
    /// The schedulerNames tephra answers to.
    pub scheduler_names: &'a [String],
    /// The members, by name.
    pub members: &'a BTreeMap<String, Member>,
    /// Every binding.
    pub bindings: &'a [Binding],
    /// The Volcano Queues on Karmada's API server.
    pub queues: &'a [tephra_api::Queue],
    /// Each binding's queue (`namespace/name` of the binding → queue), as its resource
    /// template names it ([`template_queue`]); the default queue otherwise.
    pub queue_of: &'a BTreeMap<String, String>,
    /// The nodes planned for placed gangs (`namespace/name` of the binding → plan), read back
    /// from tephra's plan policies ([`read_plan_policy`]).
    pub plans: &'a BTreeMap<String, NodePlan>,
    /// The PodGroup each workload binding's pods name (`namespace/name` of the binding → the
    /// PodGroup's name), as its template says ([`template_pod_group`]).
    pub pod_groups: &'a BTreeMap<String, String>,
    /// The scheduler configuration.
    pub config: Arc<SchedulerConfig>,
    /// Now, in seconds.
    pub now: i64,
    /// The session's number.
    pub session: u64,
}

/// A write to one binding.
#[derive(Clone, Debug, PartialEq)]
pub struct BindingWrite {
    /// Namespace; empty for a ClusterResourceBinding.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// A merge patch of the object (`spec.clusters`, the applied-placement annotation).
    pub patch: Option<Value>,
    /// A merge patch of its status subresource.
    pub status: Option<Value>,
    /// The OverridePolicy that hands the planned nodes to the member ([`plan_policy`]), to be
    /// applied before `patch`: the binding is placed only once its plan is in place.
    pub policy: Option<Value>,
    /// An Event on it: (type, reason, message).
    pub event: Option<(&'static str, &'static str, String)>,
}

/// What one pass decided.
#[derive(Debug, Default)]
pub struct Plan {
    /// Writes, one per binding at most.
    pub writes: Vec<BindingWrite>,
    /// Objects that could not be read (one line each).
    pub problems: Vec<String>,
    /// The session's decisions (for metrics and tests).
    pub decisions: Decisions,
}

/// The reason karmada-scheduler gives a binding placed.
pub const REASON_SUCCESS: &str = "Success";
/// The reason a binding that fits no cluster now waits with.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// The reason a binding whose placement allows no cluster waits with.
pub const REASON_NO_CLUSTER_FIT: &str = "NoClusterFit";

fn scheduled_status(
    b: &Binding,
    ok: bool,
    reason: &str,
    message: &str,
    now: &Time,
) -> Option<Value> {
    let status = if ok { "True" } else { "False" };
    let same = b
        .condition("Scheduled")
        .is_some_and(|c| c.status == status && c.reason == reason && c.message == message);
    let generation = b.metadata.generation.unwrap_or(0);
    if same && (!ok || b.status.scheduler_observed_generation == generation) {
        return None;
    }
    let transition = match b.condition("Scheduled") {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    let mut conditions: Vec<Value> = b
        .status
        .conditions
        .iter()
        .filter(|c| c.type_ != "Scheduled")
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    conditions.push(
        json!({"type": "Scheduled", "status": status, "reason": reason,
        "message": message, "lastTransitionTime": transition,
        "observedGeneration": generation}),
    );
    let mut out = json!({"conditions": conditions});
    if ok {
        out["schedulerObservedGeneration"] = json!(generation);
        out["lastScheduledTime"] = json!(now);
    }
    Some(json!({"status": out}))
}

/// A synthetic pod of a binding's gang, as the core reads pods (the same shape a real pod of
/// the template would have).
fn synthetic_pod(b: &Binding, role: &str, index: u32, req: &Requirements) -> Pod {
    let claim = req.node_claim.clone().unwrap_or_default();
    let mut annotations = BTreeMap::new();
    annotations.insert(GROUP_NAME_ANNOTATION.to_string(), b.name());
    annotations.insert(TASK_SPEC.to_string(), role.to_string());
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{}:{role}:{index}", b.name())),
            namespace: Some(b.namespace()),
            annotations: Some(annotations),
            creation_timestamp: b.metadata.creation_timestamp.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(K8sPodSpec {
            scheduler_name: Some(SYNTHETIC_SCHEDULER.into()),
            containers: vec![Container {
                name: "replica".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(req.resource_request.clone()),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            node_selector: (!claim.node_selector.is_empty()).then_some(claim.node_selector),
            tolerations: (!claim.tolerations.is_empty()).then_some(claim.tolerations),
            affinity: claim.hard_node_affinity.map(|sel| Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(sel),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            priority_class_name: req.priority_class_name.clone(),
            ..K8sPodSpec::default()
        }),
        status: None,
    }
}

/// Whether a member's pod is one of the pods of `b`'s workload: a Volcano Job's pods by
/// `volcano.sh/job-name`, a PodGroup's by `scheduling.k8s.io/group-name`, in the template's
/// namespace. `None` for a kind whose pods tephra cannot tell.
fn copy_matcher(b: &Binding) -> Option<impl Fn(&Pod) -> bool + '_> {
    let r = &b.spec.resource;
    let matches: fn(&Pod, &str) -> bool = match (r.api_version.as_str(), r.kind.as_str()) {
        ("batch.volcano.sh/v1alpha1", "Job") => |p, name| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(VOLCANO_JOB_LABEL))
                .is_some_and(|v| v == name)
        },
        (v, "PodGroup") if v.starts_with("scheduling.volcano.sh/") => {
            |p, name| convert::group_of(p).as_deref() == Some(name)
        }
        _ => return None,
    };
    let ns = r.namespace.clone().unwrap_or_else(|| b.namespace());
    Some(move |p: &Pod| p.metadata.namespace.as_deref() == Some(ns.as_str()) && matches(p, &r.name))
}

/// Whether a pod has had its room: it holds a node, or it finished.
fn arrived(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        || matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// How many of the member's pods of `b`'s workload have had their room; `None` for a kind
/// whose pods tephra cannot tell.
fn arrived_copies(b: &Binding, member: &Member) -> Option<u32> {
    let is_copy = copy_matcher(b)?;
    let n = member
        .pods
        .iter()
        .filter(|p| arrived(p) && is_copy(p))
        .count();
    Some(u32::try_from(n).unwrap_or(u32::MAX))
}

/// How many of a placed gang's pods still need their room kept in `cluster`.
fn reservation(b: &Binding, cluster: &str, member: &Member) -> u32 {
    let total: u32 = b.gang().iter().map(|(_, n, _)| *n).sum();
    // A workload that finished there (its pods perhaps removed since) holds nothing.
    let finished = b.status.aggregated_status.iter().any(|s| {
        s.cluster_name == cluster
            && s.status
                .as_ref()
                .and_then(|st| st["state"]["phase"].as_str().or(st["phase"].as_str()))
                .is_some_and(|p| {
                    matches!(
                        p,
                        "Completed" | "Failed" | "Aborted" | "Terminated" | "Finished"
                    )
                })
    });
    if finished {
        return 0;
    }
    match arrived_copies(b, member) {
        Some(n) => total.saturating_sub(n),
        // A kind whose pods tephra cannot tell: its room is kept until Karmada finds it
        // applied and healthy there.
        None => {
            let healthy = b.status.aggregated_status.iter().any(|s| {
                s.cluster_name == cluster && s.applied && s.health.as_deref() == Some("Healthy")
            });
            if healthy { 0 } else { total }
        }
    }
}

fn group_spec(
    b: &Binding,
    queue: &str,
    min_member: u32,
    min_task_member: BTreeMap<String, u32>,
    phase: GroupPhase,
    policy: JobPolicy,
) -> PodGroupSpec {
    let created = b
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, convert::seconds);
    PodGroupSpec {
        namespace: b.namespace(),
        name: b.name(),
        queue: queue.to_string(),
        min_member,
        min_task_member,
        min_resources: None,
        largest_task: None,
        priority_class: None,
        priority: b
            .spec
            .schedule_priority
            .as_ref()
            .map(|p| p.priority)
            .filter(|p| *p != 0),
        phase,
        phase_since: created,
        created,
        policy: Arc::new(policy),
        topology: None,
        sub_groups: Vec::new(),
    }
}

fn default_queue() -> QueueSpec {
    QueueSpec::named(tephra_api::defaults::DEFAULT_QUEUE)
}

/// The gangs the pass schedules, by job key: the binding's index and why.
type Wanted = BTreeMap<String, (usize, &'static str)>;

/// Reads everything into a fresh cache: the queues; the members' clusters, nodes and pods
/// (another scheduler's, holding room; or a placed gang's, counted in its binding's job and
/// queue); the gangs of the bindings to schedule; and the reservations of placed gangs whose
/// pods do not hold their nodes yet.
fn build(
    input: &Input<'_>,
    groups: &BTreeMap<String, usize>,
    pins: &Pins,
    plan: &mut Plan,
) -> (Cache, Wanted, BTreeMap<String, String>) {
    let mut cache = Cache::new();
    let mut wanted = Wanted::new();
    let mut unfit = BTreeMap::new();
    let mut has_default = false;
    for q in input.queues {
        has_default |= q.metadata.name.as_deref() == Some(tephra_api::defaults::DEFAULT_QUEUE);
        match convert::queue(q, cache.names_mut()) {
            Ok(spec) => {
                let _ = cache.apply(Event::QueueUpsert(Box::new(spec)));
            }
            Err(e) => plan.problems.push(e.to_string()),
        }
    }
    if !has_default {
        let _ = cache.apply(Event::QueueUpsert(Box::new(default_queue())));
    }
    for (name, m) in input.members {
        let mut cluster = convert::cluster(&m.cluster, m.synced);
        cluster.name = name.clone();
        let _ = cache.apply(Event::ClusterUpsert(cluster));
        if !m.synced {
            continue;
        }
        for n in &m.nodes {
            match convert::node(name, n, cache.names_mut()) {
                Ok(spec) => {
                    let _ = cache.apply(Event::NodeUpsert(spec));
                }
                Err(source) => plan.problems.push(
                    KarmadaError::Member {
                        cluster: name.clone(),
                        source: Box::new(source),
                    }
                    .to_string(),
                ),
            }
        }
    }
    let ours = |b: &Binding| input.scheduler_names.contains(&b.spec.scheduler_name);
    let queue_of = |b: &Binding| {
        input
            .queue_of
            .get(&b.key())
            .cloned()
            .unwrap_or_else(|| tephra_api::defaults::DEFAULT_QUEUE.to_string())
    };
    // Placed gangs, by member: each is a job of its queue, holding what its pods hold.
    let mut placed: BTreeMap<&str, Vec<&Binding>> = BTreeMap::new();
    for (i, b) in input.bindings.iter().enumerate() {
        if !ours(b) || !b.is_workload() {
            continue;
        }
        let gang = b.gang();
        let total: u32 = gang.iter().map(|(_, n, _)| *n).sum();
        if let Some(pinned) = pins.get(&b.key()) {
            // Placed by an earlier pass of this plan: its pods hold the nodes chosen there.
            let cluster = pinned.values().next().map(|(c, _)| c.clone());
            let policy = JobPolicy {
                cluster_names: cluster.into_iter().collect(),
                ..JobPolicy::default()
            };
            let group = group_spec(
                b,
                &queue_of(b),
                total,
                BTreeMap::new(),
                GroupPhase::Running,
                policy,
            );
            let _ = cache.apply(Event::PodGroupUpsert(group));
            add_pods(&mut cache, b, &gang, u32::MAX, Where::Pinned(pinned), plan);
        } else if let Some(why) = b.needs_scheduling() {
            let group = groups
                .get(&b.key())
                .copied()
                .unwrap_or_else(|| b.first_affinity_group());
            let policy = match b.policy_in(group) {
                Ok(p) => p,
                Err(e) => {
                    unfit.insert(b.key(), e.to_string());
                    continue;
                }
            };
            let per_role = gang.iter().map(|(r, n, _)| (r.clone(), *n)).collect();
            let group = group_spec(
                b,
                &queue_of(b),
                total,
                per_role,
                GroupPhase::Pending,
                policy,
            );
            let _ = cache.apply(Event::PodGroupUpsert(group));
            add_pods(&mut cache, b, &gang, u32::MAX, Where::Anywhere, plan);
            wanted.insert(b.key(), (i, why));
        } else if let [target] = b.spec.clusters.as_slice()
            && let Some(member) = input.members.get(&target.name)
        {
            let missing = reservation(b, &target.name, member);
            let finished = missing == 0 && arrived_copies(b, member) == Some(0);
            let policy = JobPolicy {
                cluster_names: vec![target.name.clone()],
                ..JobPolicy::default()
            };
            let phase = if finished {
                GroupPhase::Completed
            } else if missing < total {
                GroupPhase::Running
            } else {
                GroupPhase::Inqueue
            };
            let group = group_spec(b, &queue_of(b), total, BTreeMap::new(), phase, policy);
            let _ = cache.apply(Event::PodGroupUpsert(group));
            match input
                .plans
                .get(&b.key())
                .filter(|p| p.cluster == target.name)
            {
                // Its room is kept on the nodes its plan names, for each pod not there yet.
                Some(planned) if plannable(b) => {
                    let pinned = planned_pins(b, &gang, planned, &target.name, member);
                    add_pods(&mut cache, b, &gang, u32::MAX, pinned, plan);
                }
                _ => add_pods(
                    &mut cache,
                    b,
                    &gang,
                    missing,
                    Where::LivesIn(&target.name),
                    plan,
                ),
            }
            placed.entry(target.name.as_str()).or_default().push(b);
        }
    }
    for (name, m) in input.members.iter().filter(|(_, m)| m.synced) {
        let gangs: Vec<(&Binding, _)> = placed
            .get(name.as_str())
            .into_iter()
            .flatten()
            .filter_map(|b| Some((*b, copy_matcher(b)?)))
            .collect();
        for p in &m.pods {
            match convert::pod(name, p, &[], cache.names_mut()) {
                Ok(Some(mut spec)) => {
                    // Pods of different members may share a name: the core keys them apart.
                    spec.name = format!("{name}:{}", spec.name);
                    if arrived(p)
                        && let Some((b, _)) = gangs.iter().find(|(_, is_copy)| is_copy(p))
                    {
                        // A copy of a gang tephra placed: the gang's, whoever binds it there.
                        spec.group = b.metadata.name.clone();
                        spec.foreign = false;
                    }
                    let _ = cache.apply(Event::PodUpsert(spec));
                }
                Ok(None) => {}
                Err(source) => plan.problems.push(
                    KarmadaError::Member {
                        cluster: name.clone(),
                        source: Box::new(source),
                    }
                    .to_string(),
                ),
            }
        }
    }
    (cache, wanted, unfit)
}

/// Where the synthetic pods of a placed Volcano Job with a plan go: each pod whose copy in the
/// member has not had its room yet, on its planned node where the member has that node (else
/// anywhere in the member); the others not at all.
fn planned_pins<'a>(
    b: &Binding,
    gang: &[(String, u32, Requirements)],
    planned: &NodePlan,
    cluster: &'a str,
    member: &Member,
) -> Where<'a> {
    let job = &b.spec.resource.name;
    let arrived_copies: BTreeSet<&str> = copy_matcher(b)
        .map(|is_copy| {
            member
                .pods
                .iter()
                .filter(|p| arrived(p) && is_copy(p))
                .filter_map(|p| p.metadata.name.as_deref())
                .collect()
        })
        .unwrap_or_default();
    let nodes: BTreeSet<&str> = member
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut pods = BTreeMap::new();
    for (role, n, _) in gang {
        for index in 0..*n {
            if arrived_copies.contains(format!("{job}-{role}-{index}").as_str()) {
                continue;
            }
            let node = planned
                .node(role, index)
                .filter(|n| nodes.contains(n))
                .map(str::to_string);
            pods.insert(format!("{role}:{index}"), node);
        }
    }
    Where::Planned(cluster, pods)
}

/// Where a gang's synthetic pods may go.
enum Where<'a> {
    /// Wherever the gang's placement allows: it is to be scheduled.
    Anywhere,
    /// In this cluster, which its binding names; the room its pods do not hold yet is kept.
    LivesIn(&'a str),
    /// On the cluster and node an earlier pass of the plan chose for each, by pod name.
    Pinned(&'a BTreeMap<String, (String, String)>),
    /// In this cluster, only the pods named (`<task>:<index>`), each on its node if it has one.
    Planned(&'a str, BTreeMap<String, Option<String>>),
}

/// The gangs an earlier pass of a plan placed: job key → pod key (`namespace/name`) →
/// (cluster, node).
type Pins = BTreeMap<String, BTreeMap<String, (String, String)>>;

/// Adds up to `limit` synthetic pods of `gang`, where `at` says.
fn add_pods(
    cache: &mut Cache,
    b: &Binding,
    gang: &[(String, u32, Requirements)],
    limit: u32,
    at: Where<'_>,
    plan: &mut Plan,
) {
    let mut added = 0u32;
    for (role, n, req) in gang {
        for index in 0..*n {
            if added >= limit {
                return;
            }
            let planned = match &at {
                Where::Planned(_, pods) => match pods.get(&format!("{role}:{index}")) {
                    Some(node) => node.as_deref(),
                    None => continue,
                },
                _ => None,
            };
            let pod = synthetic_pod(b, role, index, req);
            match convert::pod(
                "",
                &pod,
                &[SYNTHETIC_SCHEDULER.to_string()],
                cache.names_mut(),
            ) {
                Ok(Some(mut spec)) => {
                    match &at {
                        Where::Anywhere => spec.placement = None,
                        Where::LivesIn(cluster) => {
                            spec.placement = None;
                            spec.lives_in = Some((*cluster).to_string());
                        }
                        Where::Pinned(nodes) => {
                            let key = format!("{}/{}", spec.namespace, spec.name);
                            spec.placement = nodes.get(&key).cloned();
                            if let Some((cluster, _)) = &spec.placement {
                                spec.lives_in = Some(cluster.clone());
                                spec.status = tephra_scheduler::model::TaskStatus::Running;
                            }
                        }
                        Where::Planned(cluster, _) => {
                            spec.lives_in = Some((*cluster).to_string());
                            spec.placement = planned.map(|n| ((*cluster).to_string(), n.into()));
                            if spec.placement.is_some() {
                                spec.status = tephra_scheduler::model::TaskStatus::Running;
                            }
                        }
                    }
                    let _ = cache.apply(Event::PodUpsert(spec));
                    added += 1;
                }
                Ok(None) => {}
                Err(e) => {
                    plan.problems
                        .push(format!("resourcebinding {}: {e}", b.key()));
                    return;
                }
            }
        }
    }
}

/// How a wanted gang came out of a pass.
enum Outcome {
    /// Whole in this cluster, under this affinity group (when the binding has groups).
    Placed(String, Option<String>),
    /// Waiting, saying why.
    Waiting(String),
}

/// Schedules every binding of tephra's that needs it, and says what to write. A binding with
/// `clusterAffinities` that no cluster of its group can hold is tried with the next group in
/// another pass, as karmada-scheduler falls back group by group (from the group it last
/// used); what earlier passes placed holds its room in the later ones.
pub fn plan(input: &Input<'_>) -> Plan {
    let mut plan = Plan::default();
    let now = Time(
        k8s_openapi::jiff::Timestamp::from_second(input.now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut pins = Pins::new();
    let mut outcomes: BTreeMap<String, (usize, &'static str, Outcome)> = BTreeMap::new();
    let mut all_wanted = Wanted::new();
    let mut all_unfit = BTreeMap::new();
    for pass in 0.. {
        let mut problems = Plan::default();
        let (cache, wanted, unfit) = build(input, &groups, &pins, &mut problems);
        if pass == 0 {
            plan.problems = problems.problems;
        }
        let decisions = tephra_scheduler::schedule(
            cache.snapshot(),
            Arc::clone(&input.config),
            input.now,
            input.session,
        );
        let results = pass_outcomes(input.bindings, &wanted, &groups, &decisions);
        let mut again = false;
        for (key, (i, why, outcome)) in results {
            match &outcome {
                Outcome::Waiting(_) => {
                    let b = &input.bindings[i];
                    let group = groups
                        .get(&key)
                        .copied()
                        .unwrap_or_else(|| b.first_affinity_group());
                    if group + 1 < b.affinity_groups().len() {
                        groups.insert(key.clone(), group + 1);
                        again = true;
                    }
                }
                // The next pass sees this gang's pods on the nodes this one chose.
                Outcome::Placed(..) => {
                    let nodes = pins.entry(key.clone()).or_default();
                    for bind in decisions.binds.iter().filter(|d| d.job == key) {
                        nodes.insert(bind.task.clone(), (bind.cluster.clone(), bind.node.clone()));
                    }
                }
            }
            outcomes.insert(key, (i, why, outcome));
        }
        all_wanted.extend(wanted);
        for key in unfit.keys() {
            outcomes.remove(key);
        }
        all_unfit.extend(unfit);
        plan.decisions = decisions;
        if !again {
            break;
        }
    }
    let mut placed_now = BTreeMap::new();
    for (i, why, outcome) in outcomes.values() {
        let b = &input.bindings[*i];
        if let Outcome::Placed(cluster, _) = outcome {
            placed_now.insert(b.key(), cluster.clone());
        }
        let write = match outcome {
            Outcome::Placed(cluster, group) => {
                let policy = plannable(b)
                    .then(|| {
                        let pods = pins.get(&b.key()).into_iter().flatten();
                        plan_of(
                            cluster,
                            pods.map(|(pod, (_, node))| (pod.as_str(), node.as_str())),
                        )
                    })
                    .filter(|p| input.plans.get(&b.key()) != Some(p))
                    .map(|p| plan_policy(b, &p));
                placed_write(b, cluster, group.as_deref(), why, &now, policy)
            }
            Outcome::Waiting(message) => waiting_write(b, REASON_UNSCHEDULABLE, message, &now),
        };
        plan.writes.extend(write);
    }
    for (key, message) in all_unfit {
        if let Some(b) = input.bindings.iter().find(|b| b.key() == key) {
            plan.writes
                .extend(waiting_write(b, "SchedulerError", &message, &now));
        }
    }
    let leaders = follow::leaders(input);
    plan.writes
        .extend(follow::writes(input, &leaders, &placed_now, &now));
    plan.writes.extend(duplicated(input, &leaders, &now));
    plan.writes.extend(observed_generations(input, &all_wanted));
    plan
}

/// What one pass's session decided for each wanted gang: whole in one cluster, or waiting
/// with the core's reason.
fn pass_outcomes(
    bindings: &[Binding],
    wanted: &Wanted,
    groups: &BTreeMap<String, usize>,
    decisions: &tephra_scheduler::Decisions,
) -> BTreeMap<String, (usize, &'static str, Outcome)> {
    // Where each wanted gang's pods were placed this session.
    let mut placed: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut count: BTreeMap<&str, u32> = BTreeMap::new();
    for bind in &decisions.binds {
        if wanted.contains_key(&bind.job) {
            placed
                .entry(bind.job.as_str())
                .or_default()
                .insert(bind.cluster.as_str());
            *count.entry(bind.job.as_str()).or_default() += 1;
        }
    }
    let why_waiting = |job: &str| {
        decisions
            .events
            .iter()
            .filter(|e| e.job == job)
            .map(|e| e.message.clone())
            .next()
            .or_else(|| {
                decisions
                    .groups
                    .iter()
                    .filter(|g| g.job == job)
                    .flat_map(|g| g.conditions.iter())
                    .find(|c| !c.status || c.kind == "Unschedulable")
                    .map(|c| c.message.clone())
            })
    };
    let mut out = BTreeMap::new();
    for (key, (i, why)) in wanted {
        let b = &bindings[*i];
        let total: u32 = b.gang().iter().map(|(_, n, _)| *n).sum();
        let clusters = placed.get(key.as_str());
        let whole = count.get(key.as_str()).copied() == Some(total);
        let outcome = match clusters.map(|c| c.iter().collect::<Vec<_>>()).as_deref() {
            Some([cluster]) if whole => {
                let group = groups
                    .get(key)
                    .copied()
                    .unwrap_or_else(|| b.first_affinity_group());
                Outcome::Placed((**cluster).to_string(), b.affinity_name(group))
            }
            _ => Outcome::Waiting(why_waiting(key).unwrap_or_else(|| {
                format!("no cluster can hold the whole gang of {total} pods now")
            })),
        };
        out.insert(key.clone(), (*i, *why, outcome));
    }
    out
}

fn placed_write(
    b: &Binding,
    cluster: &str,
    group: Option<&str>,
    why: &str,
    now: &Time,
    policy: Option<Value>,
) -> Option<BindingWrite> {
    let placement = b.spec.placement.clone().unwrap_or(Value::Null);
    let target = TargetCluster {
        name: cluster.to_string(),
        replicas: b.spec.replicas.max(0),
    };
    let message = "Binding has been scheduled successfully.";
    let mut status = scheduled_status(b, true, REASON_SUCCESS, message, now);
    // The group used, where karmada-scheduler records it: the next scheduling starts there.
    if let Some(name) = group
        && b.status.scheduler_observing_affinity_name.as_deref() != Some(name)
    {
        let s = status.get_or_insert_with(|| json!({"status": {}}));
        s["status"]["schedulerObservingAffinityName"] = json!(name);
    }
    let under = group.map_or(String::new(), |g| format!(", cluster affinity group {g}"));
    Some(BindingWrite {
        namespace: b.namespace(),
        name: b.name(),
        patch: Some(json!({
            "metadata": {"annotations": {APPLIED_PLACEMENT: placement.to_string()}},
            "spec": {"clusters": [target]},
        })),
        status,
        policy,
        event: Some((
            "Normal",
            "ScheduleBindingSucceed",
            format!(
                "placed whole in cluster {cluster} ({why}{under}): every pod of the gang fits its nodes"
            ),
        )),
    })
}

fn waiting_write(
    b: &Binding,
    reason: &'static str,
    message: &str,
    now: &Time,
) -> Option<BindingWrite> {
    let status = scheduled_status(b, false, reason, message, now)?;
    Some(BindingWrite {
        namespace: b.namespace(),
        name: b.name(),
        patch: None,
        status: Some(status),
        policy: None,
        event: Some(("Warning", "ScheduleBindingFailed", message.to_string())),
    })
}

/// Non-workloads of tephra's: every cluster their placement allows that is ready and whose
/// taints they tolerate, as karmada-scheduler duplicates them.
fn duplicated(
    input: &Input<'_>,
    followers: &BTreeMap<String, Option<String>>,
    now: &Time,
) -> Vec<BindingWrite> {
    let mut out = Vec::new();
    for b in input.bindings {
        if !input.scheduler_names.contains(&b.spec.scheduler_name)
            || b.is_workload()
            || followers.contains_key(&b.key())
        {
            continue;
        }
        let Some(why) = b.needs_scheduling() else {
            continue;
        };
        let policy = match b.policy() {
            Ok(p) => p,
            Err(e) => {
                out.extend(waiting_write(b, "SchedulerError", &e.to_string(), now));
                continue;
            }
        };
        let targets: Vec<TargetCluster> = input
            .members
            .iter()
            .filter(|(name, m)| {
                let mut c = convert::cluster(&m.cluster, true);
                c.name = (*name).clone();
                c.ready
                    && clusteraffinity::allows(&policy, &c).is_ok()
                    && c.taints.iter().all(|t| {
                        !matches!(
                            t.effect,
                            tephra_scheduler::model::TaintEffect::NoSchedule
                                | tephra_scheduler::model::TaintEffect::NoExecute
                        ) || policy.tolerations.iter().any(|tol| tol.tolerates(t))
                    })
            })
            .map(|(name, _)| TargetCluster {
                name: name.clone(),
                replicas: 0,
            })
            .collect();
        if targets.is_empty() {
            out.extend(waiting_write(
                b,
                REASON_NO_CLUSTER_FIT,
                "no cluster is ready, allowed by the placement and tolerated",
                now,
            ));
            continue;
        }
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        let event = format!("duplicated to {} ({why})", names.join(", "));
        out.push(object_write(b, targets, event, now));
    }
    out
}

/// The write that places an object with no replicas of its own in `targets`, as
/// karmada-scheduler does, with `event` saying why.
fn object_write(
    b: &Binding,
    targets: Vec<TargetCluster>,
    event: String,
    now: &Time,
) -> BindingWrite {
    let placement = b.spec.placement.clone().unwrap_or(Value::Null);
    BindingWrite {
        namespace: b.namespace(),
        name: b.name(),
        patch: Some(json!({
            "metadata": {"annotations": {APPLIED_PLACEMENT: placement.to_string()}},
            "spec": {"clusters": targets},
        })),
        status: scheduled_status(
            b,
            true,
            REASON_SUCCESS,
            "Binding has been scheduled successfully.",
            now,
        ),
        policy: None,
        event: Some(("Normal", "ScheduleBindingSucceed", event)),
    }
}

/// Bindings of tephra's that stay where they are but whose generation moved on: their
/// `schedulerObservedGeneration` catches up, as karmada-scheduler's does.
fn observed_generations(input: &Input<'_>, wanted: &Wanted) -> Vec<BindingWrite> {
    input
        .bindings
        .iter()
        .filter(|b| input.scheduler_names.contains(&b.spec.scheduler_name))
        .filter(|b| !wanted.contains_key(&b.key()) && b.needs_scheduling().is_none())
        .filter(|b| b.metadata.deletion_timestamp.is_none())
        .filter(|b| b.status.scheduler_observed_generation != b.metadata.generation.unwrap_or(0))
        .map(|b| BindingWrite {
            namespace: b.namespace(),
            name: b.name(),
            patch: None,
            status: Some(json!({"status": {
                "schedulerObservedGeneration": b.metadata.generation.unwrap_or(0)}})),
            policy: None,
            event: None,
        })
        .collect()
}

mod follow;
mod handoff;
mod objects;
pub use handoff::*;
pub use objects::*;

#[cfg(test)]
mod tests;
