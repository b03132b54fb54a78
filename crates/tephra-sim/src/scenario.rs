//! The scenario file: a fleet, queues, a workload, faults, scheduler settings and run settings.
//! The format is public and documented in README; keep it stable.
//!
//! Durations and quantities are checked while the YAML is read, so a bad one is reported with
//! the file, line and column it sits on, and the field it belongs to.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use tephra_scheduler::quantity::parse_scaled;

/// A bad scenario. Nothing runs when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The YAML does not parse, or a field is unknown, missing or malformed.
    #[error("{path}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// What is wrong, with line and column when known.
        message: String,
    },
}

/// A duration in milliseconds, written Go-style: `90s`, `10m`, `6h`, `2d`, `1h30m`, `500ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub i64);

impl Dur {
    /// Whole seconds (rounded down).
    pub fn secs(self) -> i64 {
        self.0 / 1000
    }

    /// Parses a Go-style duration.
    pub fn parse(text: &str) -> Result<Self, String> {
        let s = text.trim();
        if s.is_empty() {
            return Err("empty duration".into());
        }
        if s == "0" {
            return Ok(Dur(0));
        }
        let mut total: f64 = 0.0;
        let mut rest = s;
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| {
                    format!("invalid duration {text:?}: missing unit (use ms, s, m, h or d)")
                })?;
            if num_end == 0 {
                return Err(format!("invalid duration {text:?}: expected a number"));
            }
            let value: f64 = rest[..num_end]
                .parse()
                .map_err(|_| format!("invalid duration {text:?}: bad number"))?;
            let unit_end = rest[num_end..]
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .map_or(rest.len(), |i| num_end + i);
            let unit_ms = match &rest[num_end..unit_end] {
                "ms" => 1.0,
                "s" => 1000.0,
                "m" => 60_000.0,
                "h" => 3_600_000.0,
                "d" => 86_400_000.0,
                other => {
                    return Err(format!(
                        "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h or d)"
                    ));
                }
            };
            total += value * unit_ms;
            rest = &rest[unit_end..];
        }
        if !total.is_finite() || total > 1e15 {
            return Err(format!("invalid duration {text:?}: out of range"));
        }
        Ok(Dur(total.round() as i64))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0 as f64 / 1000.0)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(0) => Ok(Dur(0)),
            Raw::Int(n) => Err(serde::de::Error::custom(format!(
                "invalid duration {n}: give a unit, e.g. {n}s"
            ))),
            Raw::Text(s) => Dur::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// A Kubernetes quantity, checked when read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qty(pub String);

impl<'de> Deserialize<'de> for Qty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Int(n) => n.to_string(),
            Raw::Float(f) => f.to_string(),
            Raw::Text(s) => s,
        };
        parse_scaled(&text, 1000).map_err(serde::de::Error::custom)?;
        Ok(Qty(text))
    }
}

/// A resource list.
pub type Resources = BTreeMap<String, Qty>;

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
    /// Injected failures.
    #[serde(default)]
    pub faults: Vec<FaultDef>,
    /// Scheduler settings.
    #[serde(default)]
    pub scheduler: SchedulerDef,
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
    /// Node pools.
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
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
    /// Volcano Job manifests (paths).
    #[serde(default)]
    pub manifests: Vec<String>,
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
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
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

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: display.clone(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &display, &base)
    }

    /// Parses a scenario from text; `source` names it in errors, `base_dir` resolves paths.
    pub fn parse(text: &str, source: &str, base_dir: &Path) -> Result<Self, ScenarioError> {
        let mut s: Scenario = serde_saphyr::from_str(text).map_err(|e| ScenarioError::Invalid {
            path: source.to_string(),
            message: e.to_string(),
        })?;
        s.base_dir = base_dir.to_path_buf();
        s.source = source.to_string();
        s.check().map_err(|message| ScenarioError::Invalid {
            path: source.to_string(),
            message,
        })?;
        Ok(s)
    }

    /// A path from the scenario, resolved against the scenario's directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.fleet.clusters.is_empty() && self.fleet.from_trace.is_none() {
            return Err("fleet: give clusters or fromTrace".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.fleet.clusters.iter().enumerate() {
            if !names.insert(c.name.as_str()) {
                return Err(format!(
                    "fleet.clusters[{i}].name: duplicate cluster {:?}",
                    c.name
                ));
            }
            if c.node_pools.is_empty() {
                return Err(format!(
                    "fleet.clusters[{i}] ({}).nodePools: at least one pool is needed",
                    c.name
                ));
            }
        }
        if self.scheduler.period.0 <= 0 {
            return Err("scheduler.period: must be positive".into());
        }
        let queues: std::collections::BTreeSet<&str> = self
            .queues
            .iter()
            .map(|q| q.name.as_str())
            .chain(["default", "root"])
            .collect();
        for (i, q) in self.queues.iter().enumerate() {
            if let Some(w) = q.weight
                && !(1..=65535).contains(&w)
            {
                return Err(format!(
                    "queues[{i}] ({}).weight: must be between 1 and 65535",
                    q.name
                ));
            }
            if let Some(s) = &q.dequeue_strategy
                && s != "fifo"
                && s != "traverse"
            {
                return Err(format!(
                    "queues[{i}] ({}).dequeueStrategy: must be fifo or traverse, got {s:?}",
                    q.name
                ));
            }
            if let Some(s) = &q.state
                && !["Open", "Closed", "Closing"].contains(&s.as_str())
            {
                return Err(format!(
                    "queues[{i}] ({}).state: must be Open, Closed or Closing, got {s:?}",
                    q.name
                ));
            }
        }
        let check_queue = |field: String, q: &str| -> Result<(), String> {
            if queues.contains(q) {
                Ok(())
            } else {
                Err(format!(
                    "{field}: unknown queue {q:?} (declare it under queues)"
                ))
            }
        };
        let classes = &self.scheduler.priority_classes;
        for (i, j) in self.workload.jobs.iter().enumerate() {
            if let Some(q) = &j.queue {
                check_queue(format!("workload.jobs[{i}] ({}).queue", j.name), q)?;
            }
            if let Some(pc) = &j.priority_class
                && !classes.contains_key(pc)
            {
                return Err(format!(
                    "workload.jobs[{i}] ({}).priorityClass: unknown class {pc:?} (declare it under scheduler.priorityClasses)",
                    j.name
                ));
            }
            if j.tasks.is_empty() {
                return Err(format!(
                    "workload.jobs[{i}] ({}).tasks: at least one task is needed",
                    j.name
                ));
            }
            let total: u32 = j.tasks.iter().map(|t| t.replicas).sum();
            if let Some(m) = j.min_available
                && m > total
            {
                return Err(format!(
                    "workload.jobs[{i}] ({}).minAvailable: {m} exceeds the {total} replicas of its tasks",
                    j.name
                ));
            }
        }
        for (i, g) in self.workload.generate.iter().enumerate() {
            for q in g.queue.keys() {
                check_queue(format!("workload.generate[{i}].queue"), q)?;
            }
            if let Arrival::Poisson { per_hour } = g.arrival
                && !(per_hour > 0.0 && per_hour.is_finite())
            {
                return Err(format!(
                    "workload.generate[{i}].arrival.poisson.perHour: must be positive"
                ));
            }
            if g.template.tasks.is_empty() {
                return Err(format!(
                    "workload.generate[{i}].template.tasks: at least one task is needed"
                ));
            }
        }
        for (i, t) in self.workload.traces.iter().enumerate() {
            for q in t.queues.keys() {
                check_queue(format!("workload.traces[{i}].queues"), q)?;
            }
            if t.format == TraceFormat::AlibabaGpu2023 && t.per_gpu.is_some() {
                return Err(format!(
                    "workload.traces[{i}].perGpu: only for philly and crux traces"
                ));
            }
        }
        let cluster_known = |c: &str| self.fleet.from_trace.is_some() || names.contains(c);
        for (i, f) in self.faults.iter().enumerate() {
            if !cluster_known(&f.cluster) {
                return Err(format!(
                    "faults[{i}].cluster: unknown cluster {:?}",
                    f.cluster
                ));
            }
            if f.kind == FaultKind::NodeDown && f.node.is_none() && f.count.is_none() {
                return Err(format!("faults[{i}]: node-down needs node or count"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_durations_parse() {
        assert_eq!(Dur::parse("90s"), Ok(Dur(90_000)));
        assert_eq!(Dur::parse("10m"), Ok(Dur(600_000)));
        assert_eq!(Dur::parse("1h30m"), Ok(Dur(5_400_000)));
        assert_eq!(Dur::parse("2d"), Ok(Dur(172_800_000)));
        assert_eq!(Dur::parse("500ms"), Ok(Dur(500)));
        assert_eq!(Dur::parse("1.5h"), Ok(Dur(5_400_000)));
        assert!(Dur::parse("5x").unwrap_err().contains("unknown unit \"x\""));
        assert!(Dur::parse("10").unwrap_err().contains("missing unit"));
    }

    #[test]
    fn a_bad_field_is_reported_with_file_and_line() {
        let text = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - name: p\n          count: 1\n          capacity: {cpu: \"4x\"}\n";
        let err = Scenario::parse(text, "s.yaml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yaml: "), "{err}");
        assert!(err.contains("line 7"), "{err}");
        assert!(err.contains("\"4x\""), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let text = "fleet:\n  clusters: []\n  nodes: 3\n";
        let err = Scenario::parse(text, "s.yaml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes"), "{err}");
    }
}
