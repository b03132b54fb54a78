//! The scenario format, field by field (see README for an example): the fleet, queues, the
//! workload, faults, scheduler and run settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::values::{Dur, Resources};

/// The whole scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Clusters and nodes.
    pub fleet: Fleet,
    /// Queues (Volcano Queue spec fields).
    #[serde(default)]
    pub queues: Vec<QueueDef>,
    /// What is submitted.
    #[serde(default)]
    pub workload: Workload,
    /// Injected failures: a list, or `{list, random}` with a seeded generator.
    #[serde(default)]
    pub faults: Faults,
    /// Scheduler settings.
    #[serde(default)]
    pub scheduler: SchedulerDef,
    /// The failover chain's settings (the controller-manager's and scheduler's flags).
    #[serde(default)]
    pub failover: FailoverDef,
    /// Run settings.
    #[serde(default)]
    pub run: RunDef,
    /// Directory paths in the scenario are relative to (set by the loader).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file the scenario came from (set by the loader).
    #[serde(skip)]
    pub source: String,
}

/// The fleet.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fleet {
    /// Explicit clusters.
    #[serde(default)]
    pub clusters: Vec<ClusterDef>,
    /// Or a node list from a trace, split into clusters.
    #[serde(default)]
    pub from_trace: Option<FleetTrace>,
}

/// A cluster.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterDef {
    /// Name.
    pub name: String,
    /// Provider.
    #[serde(default)]
    pub provider: Option<String>,
    /// Region.
    #[serde(default)]
    pub region: Option<String>,
    /// Zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Cluster taints.
    #[serde(default)]
    pub taints: Vec<TaintDef>,
    /// Price per resource-hour.
    #[serde(default)]
    pub price: BTreeMap<String, f64>,
    /// StorageClasses.
    #[serde(default)]
    pub storage_classes: Vec<StorageClassDef>,
    /// DeviceClasses of Dynamic Resource Allocation.
    #[serde(default)]
    pub device_classes: Vec<DeviceClassDef>,
    /// Node pools.
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
}

/// A StorageClass.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StorageClassDef {
    /// Name.
    pub name: String,
    /// Its provisioner; `kubernetes.io/no-provisioner` provisions nothing (local volumes only).
    pub provisioner: String,
    /// `Immediate` (the default) or `WaitForFirstConsumer`.
    #[serde(default)]
    pub volume_binding_mode: Option<String>,
    /// `allowedTopologies` as one term: node label → allowed values.
    #[serde(default)]
    pub allowed_topologies: BTreeMap<String, Vec<String>>,
    /// Whether it is the default class (claims that name none get it).
    #[serde(default)]
    pub default: bool,
}

/// A DeviceClass.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceClassDef {
    /// Name.
    pub name: String,
    /// CEL selectors every device of the class matches.
    #[serde(default)]
    pub selectors: Vec<String>,
}

/// Local volumes on every node of a pool.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolVolumesDef {
    /// Their StorageClass.
    pub storage_class: String,
    /// Capacity of each.
    pub capacity: super::values::Qty,
    /// How many on each node (default 1).
    #[serde(default = "one")]
    pub count: usize,
    /// Access modes (default `[ReadWriteOnce]`).
    #[serde(default)]
    pub access_modes: Vec<String>,
}

/// A DRA driver's devices on every node of a pool (a ResourceSlice per node).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolDevicesDef {
    /// The driver (and the attributes' domain).
    pub driver: String,
    /// Devices per node.
    pub count: usize,
    /// Attributes of each device, by name: strings, integers or booleans.
    #[serde(default)]
    pub attributes: BTreeMap<String, serde_json::Value>,
    /// Capacity of each device, by name.
    #[serde(default)]
    pub capacity: BTreeMap<String, super::values::Qty>,
}

/// A taint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintDef {
    /// Key.
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: Effect,
}

/// Taint effects.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Effect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// A toleration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TolerationDef {
    /// Key (empty with Exists: everything).
    #[serde(default)]
    pub key: String,
    /// `Equal` (default) or `Exists`.
    #[serde(default)]
    pub operator: Option<String>,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// Effect.
    #[serde(default)]
    pub effect: Option<Effect>,
    /// For a NoExecute cluster taint: how long the job stays once it is added (absent: for
    /// good).
    #[serde(default, rename = "tolerationSeconds")]
    pub toleration_seconds: Option<i64>,
}

/// A pool of identical nodes, named `<cluster>-<pool>-<index>`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePool {
    /// Pool name.
    pub name: String,
    /// Number of nodes.
    pub count: usize,
    /// Allocatable per node.
    pub capacity: Resources,
    /// Node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    #[serde(default)]
    pub taints: Vec<TaintDef>,
    /// Local volumes on each node.
    #[serde(default)]
    pub volumes: Vec<PoolVolumesDef>,
    /// A DRA driver's devices on each node.
    #[serde(default)]
    pub devices: Option<PoolDevicesDef>,
}

/// A fleet from a trace's node list.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetTrace {
    /// `alibaba-gpu-2023`.
    pub format: TraceFormat,
    /// Node list CSV, relative to the scenario.
    pub path: String,
    /// Number of clusters to split the nodes into (round robin).
    #[serde(default = "one")]
    pub clusters: usize,
}

fn one() -> usize {
    1
}

/// Trace formats.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum TraceFormat {
    /// Alibaba openb GPU cluster (node list or pod list).
    #[serde(rename = "alibaba-gpu-2023")]
    AlibabaGpu2023,
    /// Microsoft Philly, RFold six-column format.
    #[serde(rename = "philly")]
    Philly,
    /// Alibaba Lingjun / Crux, RFold six-column format.
    #[serde(rename = "crux")]
    Crux,
}

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

/// Fault kinds.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The member's API server cannot be reached.
    Unreachable,
    /// The member reports not ready.
    Notready,
    /// Nodes go down.
    NodeDown,
    /// Everything in the cluster comes back.
    Recover,
}

/// The faults of a scenario: given ones, and randomly drawn ones (from `run.seed`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "FaultsInput")]
pub struct Faults {
    /// Faults given one by one.
    pub list: Vec<FaultDef>,
    /// Faults drawn at random.
    pub random: Option<RandomFaults>,
}

/// `faults:` as written: a list, or a map.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum FaultsInput {
    List(Vec<FaultDef>),
    Map(FaultsMap),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsMap {
    #[serde(default)]
    list: Vec<FaultDef>,
    #[serde(default)]
    random: Option<RandomFaults>,
}

impl From<FaultsInput> for Faults {
    fn from(f: FaultsInput) -> Self {
        match f {
            FaultsInput::List(list) => Faults { list, random: None },
            FaultsInput::Map(m) => Faults {
                list: m.list,
                random: m.random,
            },
        }
    }
}

/// Faults drawn at random over `[0, run.until)`: each at a uniform time, in a uniform cluster
/// of the fleet, of a uniform kind among `kinds`, lasting an exponential time of mean
/// `meanDuration` (a node-down fault takes one node).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RandomFaults {
    /// How many.
    pub count: usize,
    /// Which kinds (default: unreachable, notready and node-down).
    #[serde(default)]
    pub kinds: Vec<FaultKind>,
    /// Mean duration.
    pub mean_duration: Dur,
}

/// A fault.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultDef {
    /// When.
    pub at: Dur,
    /// Which cluster.
    pub cluster: String,
    /// What.
    pub kind: FaultKind,
    /// How long (then it recovers); absent means until a `recover` fault.
    #[serde(default, rename = "for")]
    pub duration: Option<Dur>,
    /// node-down: this node.
    #[serde(default)]
    pub node: Option<String>,
    /// node-down: this many nodes (the first ones of the cluster).
    #[serde(default)]
    pub count: Option<usize>,
}

/// Scheduler settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerDef {
    /// How often a session runs when there is work.
    #[serde(default = "default_period")]
    pub period: Dur,
    /// A config file path, or an inline Volcano config.
    #[serde(default)]
    pub config: Option<ConfigRef>,
    /// PriorityClass name → value.
    #[serde(default)]
    pub priority_classes: BTreeMap<String, i32>,
}

impl Default for SchedulerDef {
    fn default() -> Self {
        Self {
            period: default_period(),
            config: None,
            priority_classes: BTreeMap::new(),
        }
    }
}

fn default_period() -> Dur {
    Dur(1000)
}

/// Where the scheduler config comes from.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ConfigRef {
    /// A path, relative to the scenario.
    Path(String),
    /// An inline config in Volcano's format.
    Inline(serde_json::Value),
}

/// Run settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunDef {
    /// Stop at this simulated time (default: when everything is done).
    #[serde(default)]
    pub until: Option<Dur>,
    /// Seed of every random choice.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Delay from bind to pod start.
    #[serde(default = "default_start_delay")]
    pub pod_start_delay: Dur,
    /// How long a preempted or reclaimed pod takes to terminate, holding its node.
    #[serde(default = "default_grace")]
    pub eviction_grace_period: Dur,
}

/// The failover chain's settings, with the runtime's defaults.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FailoverDef {
    /// How often each member's health is probed (`--cluster-status-update-frequency`).
    #[serde(default = "default_probe")]
    pub cluster_status_update_frequency: Dur,
    /// How long a failing probe must hold before Ready turns False or Unknown.
    #[serde(default = "default_threshold")]
    pub cluster_failure_threshold: Dur,
    /// How long a passing probe must hold before Ready turns True again.
    #[serde(default = "default_threshold")]
    pub cluster_success_threshold: Dur,
    /// How long Ready stays False or Unknown before the NoExecute taint joins
    /// (`--no-execute-taint-grace`).
    #[serde(default = "default_no_execute")]
    pub no_execute_taint_grace: Dur,
    /// The longest wait for a new placement before the old copy goes
    /// (`--graceful-eviction-timeout`).
    #[serde(default = "default_eviction_timeout")]
    pub graceful_eviction_timeout: Dur,
}

impl Default for FailoverDef {
    fn default() -> Self {
        Self {
            cluster_status_update_frequency: default_probe(),
            cluster_failure_threshold: default_threshold(),
            cluster_success_threshold: default_threshold(),
            no_execute_taint_grace: default_no_execute(),
            graceful_eviction_timeout: default_eviction_timeout(),
        }
    }
}

fn default_probe() -> Dur {
    Dur(10_000)
}

fn default_threshold() -> Dur {
    Dur(30_000)
}

fn default_no_execute() -> Dur {
    Dur(300_000)
}

fn default_eviction_timeout() -> Dur {
    Dur(600_000)
}

impl Default for RunDef {
    fn default() -> Self {
        Self {
            until: None,
            seed: default_seed(),
            pod_start_delay: default_start_delay(),
            eviction_grace_period: default_grace(),
        }
    }
}

fn default_seed() -> u64 {
    42
}

fn default_grace() -> Dur {
    Dur(30_000)
}

fn default_start_delay() -> Dur {
    Dur(5000)
}
