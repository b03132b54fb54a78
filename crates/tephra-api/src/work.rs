//! `work.tephra.io/v1alpha1`: ResourceBinding, the scheduler's decision for one job. Field names
//! follow Karmada's.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::PurgeMode;

/// The placement of one job: which clusters run how many replicas of each task, what is being
/// evicted from where, and how the placement is doing.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "work.tephra.io",
    version = "v1alpha1",
    kind = "ResourceBinding",
    plural = "resourcebindings",
    singular = "resourcebinding",
    shortname = "rb",
    namespaced,
    status = "ResourceBindingStatus",
    printcolumn(
        name = "CLUSTERS",
        type_ = "string",
        description = "The member clusters the job is placed in",
        json_path = ".spec.clusters[*].name"
    ),
    printcolumn(
        name = "SCHEDULED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].status"
    ),
    printcolumn(
        name = "FULLYAPPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"FullyApplied\")].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "WORKLOAD",
        type_ = "string",
        priority = 1,
        json_path = ".spec.resource.name"
    ),
    printcolumn(
        name = "EVICTING-FROM",
        type_ = "string",
        priority = 1,
        json_path = ".spec.gracefulEvictionTasks[*].fromCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingSpec {
    /// The Job or PodGroup this binding places.
    pub resource: ObjectReference,
    /// Target clusters and the replicas of each task placed there, one entry per cluster (the
    /// API server keeps the names unique: a list keyed by `name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub clusters: Vec<TargetCluster>,
    /// Placements being removed after a failover.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub graceful_eviction_tasks: Vec<GracefulEvictionTask>,
    /// Set to ask the scheduler to place the job again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_triggered_at: Option<Time>,
}

/// A reference to the placed object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API version, e.g. `batch.volcano.sh/v1alpha1`.
    pub api_version: String,
    /// Kind, e.g. `Job`.
    pub kind: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID, to tell a re-created object from the old one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// One target cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetCluster {
    /// Cluster name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// Replicas of each task placed in this cluster (not negative).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("additionalProperties" = {"type": "integer", "format": "int32", "minimum": 0}, "maxProperties" = 64))]
    pub tasks: BTreeMap<String, i32>,
}

/// A placement being removed from a cluster after failover.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GracefulEvictionTask {
    /// The cluster being evicted from.
    pub from_cluster: String,
    /// How the old pods are removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// One-word CamelCase reason, e.g. `TaintUntolerated`.
    pub reason: String,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The controller that added the task, e.g. `TaintManager`.
    pub producer: String,
    /// Longest wait for the new placement before the old pods are deleted anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub grace_period_seconds: Option<i32>,
    /// Keep the old pods until this is set to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_deletion: Option<bool>,
    /// When the task was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
}

/// Observed state of a placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingStatus {
    /// `Scheduled` and `FullyApplied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per-cluster state of the placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// Per-cluster state of a placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// Cluster name.
    pub cluster_name: String,
    /// Whether the pods were created or bound in the cluster.
    #[serde(default)]
    pub applied: bool,
    /// Why applying failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_message: Option<String>,
    /// Health of the placement in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
}

/// Health of a placement in one cluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ResourceHealth {
    /// All placed pods run.
    Healthy,
    /// Some placed pods failed or cannot run.
    Unhealthy,
    /// Not known yet.
    Unknown,
}
