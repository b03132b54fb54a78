//! `cluster.tephra.io/v1alpha1`: a member cluster. Names follow Karmada's `Cluster`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scheduling::ResourceList;

/// A member cluster that tephra places jobs onto. The cluster that tephra runs in is an ordinary
/// member named `local`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cluster.tephra.io",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    singular = "cluster",
    status = "ClusterStatus",
    printcolumn(name = "VERSION", type_ = "string", json_path = ".status.kubernetesVersion"),
    printcolumn(name = "MODE", type_ = "string", json_path = ".spec.syncMode"),
    printcolumn(name = "READY", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "REGION", type_ = "string", json_path = ".spec.region", priority = 1),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("self.metadata.name == 'local' || self.spec.syncMode != 'Push' || (has(self.spec.apiEndpoint) && self.spec.apiEndpoint != '')")
        .message("spec.apiEndpoint is required for a Push-mode member (only the 'local' cluster may omit it)").field_path(".spec.apiEndpoint")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.apiEndpoint) || self.apiEndpoint == '' || self.apiEndpoint.startsWith('https://') || self.apiEndpoint.startsWith('http://')")
        .message("spec.apiEndpoint must be an http(s) URL such as https://10.0.0.1:6443").field_path(".apiEndpoint"),
    validation = Rule::new("!has(self.taints) || self.taints.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])")
        .message("spec.taints[].effect must be NoSchedule, PreferNoSchedule or NoExecute").field_path(".taints")
)]
pub struct ClusterSpec {
    /// `Push`: tephra drives the member through its API server. `Pull`: an agent in the member
    /// pulls its work.
    pub sync_mode: ClusterSyncMode,

    /// API server URL of the member (required for Push mode, except for `local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub api_endpoint: Option<String>,

    /// Secret holding the member's credentials (`token` and `caBundle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,

    /// Skip TLS verification of the member's API server. For test fleets only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verification: bool,

    /// Cloud provider, matched by `clusterAffinity.fieldSelector` (key `provider`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,

    /// Region, matched by `fieldSelector` (key `region`) and used by region spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,

    /// Zones of the cluster, matched by `fieldSelector` (key `zone`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,

    /// Cluster taints. Jobs that do not tolerate a NoSchedule taint are not placed here; a
    /// NoExecute taint evicts them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub taints: Vec<Taint>,

    /// Price per resource-hour for cost-aware placement: per core for `cpu`, per GiB for
    /// `memory`, per unit for extended resources such as `nvidia.com/gpu`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub price: ResourceList,

    /// How pods reach their nodes in this member. Defaults to `Direct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_mode: Option<BindingMode>,
}

/// How tephra talks to a member.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ClusterSyncMode {
    /// tephra drives the member's API server.
    Push,
    /// An agent in the member pulls its work.
    Pull,
}

/// How pods reach their planned nodes in a member.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum BindingMode {
    /// tephra binds each pod through the Binding subresource.
    Direct,
    /// The member's kube-scheduler binds, guided by tephra's extender.
    Extender,
}

/// A reference to a Secret in a given namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
}

/// Observed state of a member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Kubernetes version of the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Conditions; `Ready` tells whether the member answers its health probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Node counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_summary: Option<NodeSummary>,
    /// Resource totals over the member's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_summary: Option<ResourceSummary>,
}

/// Node counts of a member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    /// All nodes.
    #[serde(default)]
    pub total_num: i32,
    /// Ready nodes.
    #[serde(default)]
    pub ready_num: i32,
}

/// Resource totals of a member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    /// Sum of the nodes' allocatable resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: ResourceList,
    /// Requested by pods that are not yet bound.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocating: ResourceList,
    /// Requested by bound pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated: ResourceList,
}
