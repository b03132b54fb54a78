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
    )
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
        "!has(self.tasks) || self.tasks.all(t, !has(t.dependsOn) || !has(t.dependsOn.name) || t.dependsOn.name.all(n, (!has(t.name) || n != t.name) && self.tasks.exists(u, has(u.name) && u.name == n)))"
    ).message("spec.tasks[].dependsOn.name must list other tasks of this job").field_path(".tasks"),
    validation = Rule::new(
        "!has(self.minSuccess) || !has(self.tasks) || self.minSuccess <= self.tasks.map(t, has(t.replicas) ? t.replicas : 0).sum()"
    ).message("spec.minSuccess must not exceed the total replicas of all tasks").field_path(".minSuccess"),
    validation = Rule::new(
        "!has(self.plugins) || self.plugins.all(p, p in ['env', 'svc', 'ssh', 'pytorch', 'mpi', 'tensorflow', 'ray'])"
    ).message("spec.plugins keys must be job plugins: env, svc, ssh, pytorch, mpi, tensorflow or ray").field_path(".plugins")
)]
pub struct JobSpec {
    /// Default scheduler for the pods of every task (`tasks[].template.spec.schedulerName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,

    /// The least number of pods that must be placed together (gang size). Defaults to the sum of
    /// the tasks' `minAvailable` (or replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_available: Option<i32>,

    /// Volumes (PVCs) mounted into every pod of the job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,

    /// The roles of the job, each a pod template with a replica count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
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
    #[schemars(length(max = 253))]
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
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    /// Path within the container at which the volume is mounted; must not contain ':'.
    pub mount_path: String,
    /// Name of an existing PVC to mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// Network topology constraint of a job or PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`. Defaults to `hard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkTopologyMode>,
    /// The highest network tier a job may cross. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub highest_tier_allowed: Option<i32>,
}

/// One role of a job.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.minAvailable) || self.minAvailable <= (has(self.replicas) ? self.replicas : 0)")
        .message("tasks[].minAvailable must not exceed the task's replicas").field_path(".minAvailable"),
    validation = Rule::new("!has(self.name) || self.name == '' || self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("tasks[].name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit").field_path(".name")
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
    #[schemars(length(max = 64))]
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
        .message("policies[] needs an event, events or exitCode to react to")
)]
pub struct LifecyclePolicy {
    /// The action taken when the policy matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// The event the policy reacts to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    /// Several events the policy reacts to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// A container exit code the policy reacts to (not with `event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Grace period before the action is taken (a duration such as `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Events a lifecycle policy can react to (Volcano's `bus/v1alpha1.Event`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Event {
    /// Any event.
    #[serde(rename = "*")]
    Any,
    /// A pod failed.
    PodFailed,
    /// A pod was evicted or deleted.
    PodEvicted,
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
    /// Internal: the job was updated (scaled).
    JobUpdated,
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
