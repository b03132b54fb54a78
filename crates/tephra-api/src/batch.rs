//! `batch.volcano.sh/v1alpha1`: the Volcano Job.
//!
//! Field names, JSON spellings and enum strings are Volcano's, so a manifest written for Volcano
//! parses here without change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::defaults;

/// A Volcano batch job: a gang of tasks (roles), each a pod template with a replica count.
///
/// The job controller turns a Job into one PodGroup plus pods, and the scheduler places the
/// PodGroup as a gang: all `minAvailable` pods or none.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "batch.volcano.sh",
    version = "v1alpha1",
    kind = "Job",
    plural = "jobs",
    singular = "job",
    shortname = "vcjob",
    shortname = "vj",
    namespaced,
    status = "JobStatus",
    printcolumn(name = "STATUS", type_ = "string", json_path = ".status.state.phase"),
    printcolumn(
        name = "minAvailable",
        type_ = "integer",
        json_path = ".status.minAvailable"
    ),
    printcolumn(name = "RUNNINGS", type_ = "integer", json_path = ".status.running"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "QUEUE",
        type_ = "string",
        json_path = ".spec.queue",
        priority = 1
    ),
    validation = Rule::new("!has(self.metadata.name) || size(self.metadata.name) <= 63")
        .message("metadata.name: a Job name must be no more than 63 characters: it names the job's Service and its pods' subdomain"),
    validation = Rule::new("!has(self.metadata.generateName) || size(self.metadata.generateName) <= 58")
        .message("metadata.generateName: must be no more than 58 characters, so that the generated Job name fits in 63")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(
        "!has(self.minAvailable) || !has(self.tasks) || self.minAvailable <= self.tasks.map(t, has(t.replicas) ? t.replicas : 0).sum()"
    ).message("spec.minAvailable must not exceed the total replicas of all tasks").field_path(".minAvailable"),
    validation = Rule::new(
        "!has(self.tasks) || self.tasks.all(t, !has(t.name) || t.name == '' || self.tasks.exists_one(u, has(u.name) && u.name == t.name))"
    ).message("spec.tasks[].name must be unique within the job").field_path(".tasks"),
    validation = Rule::new(
        "!has(self.tasks) || self.tasks.all(t, !has(t.dependsOn) || !has(t.dependsOn.name) || (!(has(t.name) && t.name in t.dependsOn.name) && sets.contains(self.tasks.map(u, has(u.name) ? u.name : ''), t.dependsOn.name)))"
    ).message("spec.tasks[].dependsOn.name must list other tasks of this job").field_path(".tasks"),
    validation = Rule::new(
        "!has(self.minSuccess) || !has(self.tasks) || self.minSuccess <= self.tasks.map(t, has(t.replicas) ? t.replicas : 0).sum()"
    ).message("spec.minSuccess must not exceed the total replicas of all tasks").field_path(".minSuccess"),
    validation = Rule::new(plugins_rule()).message(plugins_message().as_str()).field_path(".plugins"),
    validation = Rule::new("!has(self.queue) || self.queue != 'root'")
        .message("spec.queue: a job cannot be submitted to the root queue; use a leaf queue").field_path(".queue"),
    validation = Rule::new(POLICY_EVENTS_UNIQUE)
        .message("spec.policies: an event may appear in only one policy of a list (duplicate event across different policies)").field_path(".policies"),
    validation = Rule::new(POLICY_ANY_ALONE)
        .message("spec.policies: with a policy for event '*', no other event policy may be given").field_path(".policies"),
    validation = Rule::new(POLICY_EXIT_CODES_UNIQUE)
        .message("spec.policies: duplicate exitCode: each exit code may have only one policy").field_path(".policies")
)]
pub struct JobSpec {
    /// Default scheduler for the pods of every task (`tasks[].template.spec.schedulerName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub scheduler_name: Option<String>,

    /// The least number of pods that must be placed together (gang size). Defaults to the sum of
    /// the tasks' `minAvailable` (or replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_available: Option<i32>,

    /// Volumes (PVCs) mounted into every pod of the job, one per mount path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["mountPath"]))]
    pub volumes: Vec<VolumeSpec>,

    /// The roles of the job, each a pod template with a replica count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64))]
    pub tasks: Vec<TaskSpec>,

    /// Job-wide lifecycle policies: what to do when an event happens to any task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub policies: Vec<LifecyclePolicy>,

    /// Job plugins by name (`env`, `svc`, `ssh`, ...), each with its argument list.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub plugins: BTreeMap<String, Vec<String>>,

    /// The user's estimate of how long the job runs (a duration such as `2h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_estimate: Option<String>,

    /// The queue the job is admitted through. Defaults to `default`.
    #[serde(default = "defaults::queue")]
    #[schemars(length(max = 253), regex(pattern = crate::defaults::DNS1123_SUBDOMAIN))]
    pub queue: String,

    /// How many times the job may be restarted before it is marked Failed. Defaults to 3.
    #[serde(default = "defaults::max_retry")]
    #[schemars(range(min = 0))]
    pub max_retry: i32,

    /// Seconds after the job finishes (Completed or Failed) before it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// PriorityClass of the job; it orders jobs within a queue and decides preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = crate::defaults::DNS1123_SUBDOMAIN))]
    pub priority_class_name: Option<String>,

    /// The least number of succeeded pods for the job to count as Completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_success: Option<i32>,

    /// Network topology constraint (works with HyperNodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// A volume mounted into every pod of a job.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.volumeClaim) != has(self.volumeClaimName)")
        .message("volumes[]: set either volumeClaim (a new PVC) or volumeClaimName (an existing one), not both and not neither")
)]
pub struct VolumeSpec {
    /// Path within the container at which the volume is mounted; must not contain ':'.
    #[schemars(length(min = 1, max = 4096), regex(pattern = r"^[^:]+$"))]
    pub mount_path: String,
    /// Name of an existing PVC to mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub volume_claim_name: Option<String>,
    /// A PVC to create for the job and mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim: Option<PersistentVolumeClaimSpec>,
}

/// Network topology mode: `hard` must stay within the allowed tier, `soft` prefers to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NetworkTopologyMode {
    /// The job must not cross `highestTierAllowed`.
    #[serde(rename = "hard")]
    Hard,
    /// The job prefers not to cross `highestTierAllowed`.
    #[serde(rename = "soft")]
    Soft,
}

/// Network topology constraint of a job, a task partition or a PodGroup (and its sub-groups).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.highestTierAllowed) || !has(self.highestTierName)")
        .message("networkTopology: must not specify 'highestTierAllowed' and 'highestTierName' simultaneously")
)]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`. Defaults to `hard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkTopologyMode>,
    /// The highest network tier a job may cross, by number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub highest_tier_allowed: Option<i64>,
    /// The highest network tier a job may cross, by the tier's name (instead of its number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub highest_tier_name: Option<String>,
}

/// How a task's replicas are split into equal partitions that are placed as sub-gangs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionPolicySpec {
    /// Number of partitions; replicas must equal totalPartitions × partitionSize.
    #[schemars(range(min = 1))]
    pub total_partitions: i32,
    /// Pods per partition.
    #[schemars(range(min = 1))]
    pub partition_size: i32,
    /// The least number of partitions that must be placed together. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_partitions: Option<i32>,
    /// Network topology constraint of each partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// One role of a job.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.minAvailable) || self.minAvailable <= (has(self.replicas) ? self.replicas : 0)")
        .message("tasks[].minAvailable must not exceed the task's replicas").field_path(".minAvailable"),
    validation = Rule::new("!has(self.name) || self.name == '' || self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("tasks[].name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit").field_path(".name"),
    validation = Rule::new("has(self.template) && has(self.template.spec) && size(self.template.spec.containers) > 0")
        .message("tasks[].template.spec.containers: Required value: every task needs a pod template with at least one container").field_path(".template"),
    validation = Rule::new("!has(self.partitionPolicy) || (has(self.replicas) ? self.replicas : 0) == self.partitionPolicy.totalPartitions * self.partitionPolicy.partitionSize")
        .message("tasks[].replicas must equal partitionPolicy.totalPartitions × partitionPolicy.partitionSize").field_path(".partitionPolicy"),
    validation = Rule::new("!has(self.partitionPolicy) || !has(self.minAvailable) || !has(self.partitionPolicy.minPartitions) || self.partitionPolicy.minPartitions == 0 || self.minAvailable == self.partitionPolicy.minPartitions * self.partitionPolicy.partitionSize")
        .message("tasks[].minAvailable must equal partitionPolicy.minPartitions × partitionPolicy.partitionSize").field_path(".minAvailable"),
    validation = Rule::new(POLICY_EVENTS_UNIQUE)
        .message("tasks[].policies: an event may appear in only one policy of a list (duplicate event across different policies)").field_path(".policies"),
    validation = Rule::new(POLICY_ANY_ALONE)
        .message("tasks[].policies: with a policy for event '*', no other event policy may be given").field_path(".policies"),
    validation = Rule::new(POLICY_EXIT_CODES_UNIQUE)
        .message("tasks[].policies: duplicate exitCode: each exit code may have only one policy").field_path(".policies")
)]
pub struct TaskSpec {
    /// Name of the role, unique within the job (a DNS-1123 label). Empty names are defaulted to
    /// `default<index>` by the job controller, as Volcano does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub name: Option<String>,

    /// Number of pods of this role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,

    /// The least number of this role's pods that must be placed together. Defaults to replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_available: Option<i32>,

    /// The pod template of this role.
    #[serde(default)]
    pub template: PodTemplateSpec,

    /// Lifecycle policies for this role; they take precedence over the job's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub policies: Vec<LifecyclePolicy>,

    /// NUMA topology policy of the role's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_policy: Option<NumaPolicy>,

    /// How many times a pod of this role may be restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_retry: Option<i32>,

    /// Roles that must reach Running before this role's pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,

    /// Splits the role's replicas into partitions placed as sub-gangs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_policy: Option<PartitionPolicySpec>,
}

/// The NUMA topology policy of a task.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NumaPolicy {
    /// No NUMA alignment.
    #[serde(rename = "none")]
    None,
    /// Prefer NUMA alignment.
    #[serde(rename = "best-effort")]
    BestEffort,
    /// Require alignment where possible.
    #[serde(rename = "restricted")]
    Restricted,
    /// All resources from a single NUMA node.
    #[serde(rename = "single-numa-node")]
    SingleNumaNode,
}

/// Roles a task waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// Names of the roles waited for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), extend("items" = {"type": "string", "maxLength": 63}))]
    pub name: Vec<String>,
    /// `any`: start when one of them runs; `all`: when all of them run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<Iteration>,
}

/// How `dependsOn` combines several roles.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Iteration {
    /// Any one of the roles.
    #[serde(rename = "any")]
    Any,
    /// All of the roles.
    #[serde(rename = "all")]
    All,
}

/// What the job controller does when an event happens or a container exits with a code.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.exitCode) || (!has(self.event) && !has(self.events))")
        .message("policies[]: set either event/events or exitCode, not both"),
    validation = Rule::new("!has(self.exitCode) || self.exitCode != 0")
        .message("policies[].exitCode must not be 0: 0 is success, not an error code").field_path(".exitCode"),
    validation = Rule::new("has(self.exitCode) || has(self.event) || has(self.events)")
        .message("policies[] needs an event, events or exitCode to react to"),
    validation = Rule::new("!(has(self.event) || has(self.events)) || has(self.action)")
        .message("policies[].action: a policy for an event needs an action").field_path(".action")
)]
pub struct LifecyclePolicy {
    /// The action taken when the policy matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<PolicyAction>")]
    pub action: Option<Action>,
    /// The event the policy reacts to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<PolicyEvent>")]
    pub event: Option<Event>,
    /// Several events the policy reacts to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<PolicyEvent>", length(max = 16))]
    pub events: Vec<Event>,
    /// A container exit code the policy reacts to (not with `event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Grace period before the action is taken (a duration such as `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// The policy rules that look across a list of policies (on a job and on each task). Each
/// walks the list a bounded number of times: the list holds at most 32 policies of at most 16
/// events.
/// The job plugins a Job may name in `spec.plugins`, as Volcano's: the job controller applies
/// each (`tephra_controllers::job::plugins`) but `tensorflow`, `ray` and `hcclrank`, which are
/// accepted and not applied yet.
pub const JOB_PLUGINS: [&str; 8] = [
    "env",
    "svc",
    "ssh",
    "pytorch",
    "mpi",
    "tensorflow",
    "ray",
    "hcclrank",
];

/// The CRD's CEL rule for `spec.plugins`: every key one of [`JOB_PLUGINS`].
fn plugins_rule() -> String {
    let names: Vec<String> = JOB_PLUGINS.iter().map(|n| format!("'{n}'")).collect();
    format!(
        "!has(self.plugins) || self.plugins.all(p, p in [{}])",
        names.join(", ")
    )
}

/// The message of [`plugins_rule`].
fn plugins_message() -> String {
    let (last, rest) = JOB_PLUGINS.split_last().unwrap_or((&"", &[]));
    format!(
        "spec.plugins keys must be job plugins: {} or {last}",
        rest.join(", ")
    )
}

const POLICY_EVENTS_UNIQUE: &str = "!has(self.policies) || ['*', 'PodFailed', 'PodEvicted', 'PodPending', 'Unknown', 'TaskCompleted', 'TaskFailed', 'JobUpdated'].all(v, self.policies.filter(p, (has(p.event) && p.event == v) || (has(p.events) && v in p.events)).size() <= 1)";
const POLICY_ANY_ALONE: &str = "!has(self.policies) || !self.policies.exists(p, (has(p.event) && p.event == '*') || (has(p.events) && '*' in p.events)) || self.policies.all(p, has(p.exitCode) || ((!has(p.event) || p.event == '*') && (!has(p.events) || p.events.all(e, e == '*'))))";
const POLICY_EXIT_CODES_UNIQUE: &str = "!has(self.policies) || self.policies.all(p, !has(p.exitCode) || self.policies.filter(q, has(q.exitCode) && q.exitCode == p.exitCode).size() == 1)";

/// The events a lifecycle policy may name (the schema of `event` and `events`), as Volcano's
/// job webhook allows them.
#[derive(JsonSchema)]
#[allow(dead_code)]
enum PolicyEvent {
    #[serde(rename = "*")]
    Any,
    PodFailed,
    PodEvicted,
    PodPending,
    Unknown,
    TaskCompleted,
    TaskFailed,
    JobUpdated,
}

/// The actions a lifecycle policy may take (the schema of `action`).
#[derive(JsonSchema)]
#[allow(dead_code)]
enum PolicyAction {
    AbortJob,
    RestartJob,
    RestartTask,
    RestartPod,
    RestartPartition,
    TerminateJob,
    CompleteJob,
    ResumeJob,
}

/// Events a lifecycle policy can react to: every value of Volcano's `bus/v1alpha1.Event`.
/// `OutOfSync`, `CommandIssued` and `PodRunning` are internal: the schema knows them (as
/// Volcano's does) but a policy may not name them ([`Event::is_policy_event`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Event {
    /// Any event.
    #[serde(rename = "*")]
    Any,
    /// A pod failed.
    PodFailed,
    /// A pod was evicted or deleted.
    PodEvicted,
    /// A pod stayed Pending (with the policy's `timeout`: for that long).
    PodPending,
    /// Internal: a pod started running.
    PodRunning,
    /// Part of the gang is running and the rest cannot be scheduled.
    Unknown,
    /// All replicas of a task succeeded.
    TaskCompleted,
    /// A task finished unexpectedly.
    TaskFailed,
    /// Internal: the job or a pod changed.
    OutOfSync,
    /// Internal: a user issued a command.
    CommandIssued,
    /// The job was updated (scaled).
    JobUpdated,
}

impl Event {
    /// The events a lifecycle policy may name, as Volcano's job webhook allows them.
    pub const POLICY_EVENTS: [Event; 8] = [
        Event::Any,
        Event::PodFailed,
        Event::PodEvicted,
        Event::PodPending,
        Event::Unknown,
        Event::TaskCompleted,
        Event::TaskFailed,
        Event::JobUpdated,
    ];

    /// Whether a lifecycle policy may name this event.
    pub fn is_policy_event(self) -> bool {
        Self::POLICY_EVENTS.contains(&self)
    }
}

/// Actions of a lifecycle policy (Volcano's `bus/v1alpha1.Action`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Action {
    /// Evict all pods and create none; the job can be resumed.
    AbortJob,
    /// Restart the whole job.
    RestartJob,
    /// Restart only the task.
    RestartTask,
    /// Restart only the pod.
    RestartPod,
    /// Restart the pod's partition (tasks with a `partitionPolicy`).
    RestartPartition,
    /// Evict all pods; the job cannot be resumed.
    TerminateJob,
    /// Kill unfinished pods and mark the job Completed.
    CompleteJob,
    /// Resume an aborted job.
    ResumeJob,
    /// Internal: sync job and pod status.
    SyncJob,
    /// Internal: sync the job's Inqueue status.
    EnqueueJob,
    /// Internal: sync queue status.
    SyncQueue,
    /// Internal: open a queue.
    OpenQueue,
    /// Internal: close a queue.
    CloseQueue,
}

impl Action {
    /// The actions a lifecycle policy may take, as Volcano's job webhook allows them; the
    /// others are internal to the controllers.
    pub const POLICY_ACTIONS: [Action; 8] = [
        Action::AbortJob,
        Action::RestartJob,
        Action::RestartTask,
        Action::RestartPod,
        Action::RestartPartition,
        Action::TerminateJob,
        Action::CompleteJob,
        Action::ResumeJob,
    ];
}

/// The phase of a Volcano job.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum JobPhase {
    /// Waiting in its queue for a scheduling decision.
    Pending,
    /// Being aborted; pods are being released.
    Aborting,
    /// Aborted by a user or a policy.
    Aborted,
    /// At least minAvailable pods are running.
    Running,
    /// Being restarted.
    Restarting,
    /// Required tasks completed; cleaning up.
    Completing,
    /// All required tasks completed.
    Completed,
    /// Being terminated.
    Terminating,
    /// Terminated unexpectedly.
    Terminated,
    /// Failed after maxRetry restarts.
    Failed,
}

/// Current state of a job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobState {
    /// The phase of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,
    /// One-word CamelCase reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Pod counts of one task by pod phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskState {
    /// Number of pods in each pod phase (Pending, Running, Succeeded, Failed, Unknown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phase: BTreeMap<String, i32>,
}

/// Which phase a job moved to, and when.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// The phase the job entered.
    pub status: JobPhase,
    /// When it entered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Observed state of a job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Current state.
    #[serde(default)]
    pub state: JobState,
    /// The gang size in force.
    #[serde(default)]
    pub min_available: i32,
    /// Pod counts per task, by pod phase.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_status_count: BTreeMap<String, TaskState>,
    /// Pending pods.
    #[serde(default)]
    pub pending: i32,
    /// Running pods.
    #[serde(default)]
    pub running: i32,
    /// Succeeded pods.
    #[serde(default)]
    pub succeeded: i32,
    /// Failed pods.
    #[serde(default)]
    pub failed: i32,
    /// Terminating pods.
    #[serde(default)]
    pub terminating: i32,
    /// Pods in phase Unknown.
    #[serde(default)]
    pub unknown: i32,
    /// Version of the job, bumped on every restart.
    #[serde(default)]
    pub version: i32,
    /// Number of restarts so far.
    #[serde(default)]
    pub retry_count: i32,
    /// How long the job ran, from Running to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_duration: Option<String>,
    /// Resources the job controls (Services, ConfigMaps, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controlled_resources: BTreeMap<String, String>,
    /// Phases the job went through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
}

impl Default for JobSpec {
    fn default() -> Self {
        Self {
            scheduler_name: None,
            min_available: None,
            volumes: Vec::new(),
            tasks: Vec::new(),
            policies: Vec::new(),
            plugins: BTreeMap::new(),
            running_estimate: None,
            queue: defaults::queue(),
            max_retry: defaults::max_retry(),
            ttl_seconds_after_finished: None,
            priority_class_name: None,
            min_success: None,
            network_topology: None,
        }
    }
}

impl JobSpec {
    /// Sum of all tasks' replicas.
    pub fn total_replicas(&self) -> i64 {
        self.tasks
            .iter()
            .map(|t| i64::from(t.replicas.unwrap_or(0)))
            .sum()
    }
}
