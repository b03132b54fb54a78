//! The queues and the workload of a scenario: explicit jobs, generated jobs from templates and
//! arrival processes, trace replays, and the placement policies jobs carry.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::fleet::{TolerationDef, TraceFormat};
use crate::values::{Dur, Resources};

/// A queue.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueDef {
    /// Name.
    pub name: String,
    /// Weight (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// Hard cap.
    #[serde(default)]
    pub capability: Option<Resources>,
    /// Reserved share.
    #[serde(default)]
    pub guarantee: Option<Resources>,
    /// Deserved share.
    #[serde(default)]
    pub deserved: Option<Resources>,
    /// Reclaimable (default true).
    #[serde(default)]
    pub reclaimable: Option<bool>,
    /// Parent queue.
    #[serde(default)]
    pub parent: Option<String>,
    /// Priority among siblings.
    #[serde(default)]
    pub priority: Option<i32>,
    /// `fifo` or `traverse`.
    #[serde(default)]
    pub dequeue_strategy: Option<String>,
    /// `Open` (default), `Closed` or `Closing`.
    #[serde(default)]
    pub state: Option<String>,
}

/// The workload.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Explicit jobs.
    #[serde(default)]
    pub jobs: Vec<JobDef>,
    /// Volcano manifests (paths): Jobs, Queues, PodGroups and their pods.
    #[serde(default)]
    pub manifests: Vec<String>,
    /// Run time of manifest pods that carry no `tephra.io/sim-duration` annotation (nor their
    /// Job or PodGroup).
    #[serde(default, rename = "manifestDuration")]
    pub manifest_duration: Option<Dur>,
    /// Synthetic arrivals.
    #[serde(default)]
    pub generate: Vec<GenerateDef>,
    /// Trace replays.
    #[serde(default)]
    pub traces: Vec<TraceDef>,
}

/// An explicit job.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobDef {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Queue (default `default`).
    #[serde(default)]
    pub queue: Option<String>,
    /// When it is submitted.
    #[serde(default)]
    pub submit_at: Dur,
    /// A priority class name from `scheduler.priorityClasses`.
    #[serde(default)]
    pub priority_class: Option<String>,
    /// Or a priority value.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Gang size (default: all replicas).
    #[serde(default)]
    pub min_available: Option<u32>,
    /// Tasks.
    pub tasks: Vec<TaskDef>,
    /// Placement policy.
    #[serde(default)]
    pub policy: Option<PolicyDef>,
    /// Network topology: how high a HyperNode tier the gang may span.
    #[serde(default)]
    pub network_topology: Option<NetworkTopologyDef>,
}
/// A job's `networkTopology`, as a Volcano Job writes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkTopologyDef {
    /// `hard` (default) or `soft`.
    #[serde(default)]
    pub mode: TopologyModeDef,
    /// The highest tier the gang may span.
    #[serde(default)]
    pub highest_tier_allowed: Option<u32>,
    /// Or the tier by its HyperNodes' `tierName`.
    #[serde(default)]
    pub highest_tier_name: Option<String>,
}

/// `networkTopology.mode`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TopologyModeDef {
    /// Stay within the tier or wait.
    #[default]
    Hard,
    /// The lowest tier that fits, else anywhere.
    Soft,
}

/// A task (role).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaskDef {
    /// Role name.
    pub name: String,
    /// Replicas.
    pub replicas: u32,
    /// The role's minimum in the gang.
    #[serde(default)]
    pub min_available: Option<u32>,
    /// Per-pod requests.
    pub resources: Resources,
    /// How long each pod runs once started.
    pub duration: Dur,
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
}

/// A placement policy, as a PropagationPolicy would give it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyDef {
    /// Allowed clusters.
    #[serde(default)]
    pub cluster_affinity: Option<AffinityDef>,
    /// Tolerated cluster taints.
    #[serde(default)]
    pub cluster_tolerations: Vec<TolerationDef>,
    /// Whether the gang may be split across clusters.
    #[serde(default)]
    pub splittable: bool,
}

/// Cluster affinity.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AffinityDef {
    /// Only these clusters.
    #[serde(default)]
    pub cluster_names: Vec<String>,
    /// Never these clusters.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Only these regions.
    #[serde(default)]
    pub regions: Vec<String>,
    /// Only these zones.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Only these providers.
    #[serde(default)]
    pub providers: Vec<String>,
    /// Required cluster labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A number or a distribution of numbers.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Count {
    /// A fixed value.
    Fixed(u32),
    /// A distribution.
    Dist(CountDist),
}

/// Distributions of counts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum CountDist {
    /// Uniform in `[min, max]`.
    Uniform([u32; 2]),
    /// One of the values, equally likely.
    Choice(Vec<u32>),
}

/// A duration or a distribution of durations.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Span {
    /// A fixed duration.
    Fixed(Dur),
    /// A distribution.
    Dist(SpanDist),
}

/// Distributions of durations.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum SpanDist {
    /// Uniform in `[min, max]`.
    Uniform([Dur; 2]),
    /// Exponential with this mean.
    Exponential {
        /// Mean.
        mean: Dur,
    },
    /// One of the values, equally likely.
    Choice(Vec<Dur>),
}

/// A template task for generated jobs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateTask {
    /// Role name.
    pub name: String,
    /// Replicas.
    pub replicas: Count,
    /// Per-pod requests.
    pub resources: Resources,
    /// How long each pod runs.
    pub duration: Span,
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
}

/// A template for generated jobs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Template {
    /// Name prefix (default `gen`).
    #[serde(default)]
    pub name: Option<String>,
    /// Priority class.
    #[serde(default)]
    pub priority_class: Option<String>,
    /// Or a priority value.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Gang size (default: all replicas).
    #[serde(default)]
    pub min_available: Option<u32>,
    /// Tasks.
    pub tasks: Vec<TemplateTask>,
    /// Placement policy.
    #[serde(default)]
    pub policy: Option<PolicyDef>,
    /// Network topology of every generated job.
    #[serde(default)]
    pub network_topology: Option<NetworkTopologyDef>,
}

/// Arrival processes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Arrival {
    /// Poisson arrivals.
    Poisson {
        /// Mean arrivals per hour.
        #[serde(rename = "perHour")]
        per_hour: f64,
    },
    /// One arrival every fixed interval.
    Every(Dur),
}

/// Synthetic arrivals.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GenerateDef {
    /// Number of jobs.
    pub count: usize,
    /// When the first may arrive (default 0).
    #[serde(default)]
    pub start: Dur,
    /// Arrival process.
    pub arrival: Arrival,
    /// Queue name → weight (default: `default`).
    #[serde(default)]
    pub queue: BTreeMap<String, u32>,
    /// The job template.
    pub template: Template,
}

/// A trace replay.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TraceDef {
    /// Format.
    pub format: TraceFormat,
    /// CSV path, relative to the scenario.
    pub path: String,
    /// Start of the window, in trace time.
    #[serde(default)]
    pub from: Option<Dur>,
    /// End of the window, in trace time.
    #[serde(default)]
    pub until: Option<Dur>,
    /// At most this many jobs.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Queue name → weight (default: `default`); assigned by job id.
    #[serde(default)]
    pub queues: BTreeMap<String, u32>,
    /// alibaba: skip GPU-sharing pods (`gpu_milli` < 1000) instead of rounding them up.
    #[serde(default)]
    pub skip_fractional_gpus: bool,
    /// philly/crux: CPU and memory requested per GPU (default 8 cores, 64Gi).
    #[serde(default)]
    pub per_gpu: Option<Resources>,
    /// philly/crux: the most GPUs one task may ask for; larger shapes are split (default 8).
    #[serde(default)]
    pub max_gpus_per_task: Option<u32>,
}
