//! The scenario format, field by field (see README for an example): the whole [`Scenario`] and
//! its scheduler and run settings here; the fleet (`fleet.rs`), the queues and the workload
//! (`workload.rs`) and the faults (`faults.rs`) in their own files, their types re-exported.

mod faults;
mod fleet;
mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

pub use faults::*;
pub use fleet::*;
pub use workload::*;

use crate::values::Dur;

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
    /// Node label keys HyperNodes are discovered from, lowest tier first (as `tephra
    /// scheduler --topology-labels`).
    #[serde(default)]
    pub topology_labels: Vec<String>,
    /// The fleet's tiers above its clusters, lowest first (as `tephra scheduler
    /// --fleet-tiers`): `region`, `zone`, `provider` or a cluster label.
    #[serde(default)]
    pub fleet_tiers: Vec<String>,
}

impl Default for SchedulerDef {
    fn default() -> Self {
        Self {
            period: default_period(),
            config: None,
            priority_classes: BTreeMap::new(),
            topology_labels: Vec::new(),
            fleet_tiers: Vec::new(),
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
