//! The fleet of a scenario: clusters, their node pools, storage, devices and taints, or the
//! nodes of a trace.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::values::Resources;

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
    /// Network topology: HyperNodes over the cluster's nodes, in pool order.
    #[serde(default)]
    pub topology: Option<TopologyDef>,
}

/// HyperNodes built over a cluster's nodes, in pool order: tier 1 groups every `size` nodes,
/// each tier above groups every `size` HyperNodes of the tier below. HyperNodes are named
/// `<tier name>-<index>`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopologyDef {
    /// Tiers, the closest (tier 1) first.
    pub tiers: Vec<TierDef>,
}

/// One tier of a generated topology.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TierDef {
    /// The tier's name (its HyperNodes' `tierName` and name prefix).
    pub name: String,
    /// Members per HyperNode: nodes for tier 1, HyperNodes of the tier below above it.
    pub size: usize,
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
    pub capacity: crate::values::Qty,
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
    pub capacity: BTreeMap<String, crate::values::Qty>,
}

/// GPUs shared through Volcano's vGPU device plugin on every node of a pool: the node registers
/// them (`volcano.sh/node-vgpu-register`) and offers the plugin's three resources.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolVGpusDef {
    /// GPUs per node.
    pub count: usize,
    /// Memory of each, in MiB.
    pub memory: u64,
    /// How many pods may share one (the plugin's split count).
    #[serde(default = "ten")]
    pub split: u32,
    /// The GPU type the plugin registers (`NVIDIA-` and the model).
    #[serde(default = "a100")]
    pub model: String,
}

fn ten() -> u32 {
    10
}

fn a100() -> String {
    "NVIDIA-A100-SXM4-80GB".into()
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
    /// GPUs shared through Volcano's vGPU device plugin on each node.
    #[serde(default)]
    pub vgpus: Option<PoolVGpusDef>,
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
