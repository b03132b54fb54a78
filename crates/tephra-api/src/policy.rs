//! `policy.tephra.io/v1alpha1`: PropagationPolicy, where the jobs it selects may go. Field names
//! follow Karmada's.

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Places the jobs it selects onto member clusters: which clusters are allowed, which cluster
/// taints are tolerated, how a job may spread, and what happens on failover.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "policy.tephra.io",
    version = "v1alpha1",
    kind = "PropagationPolicy",
    plural = "propagationpolicies",
    singular = "propagationpolicy",
    shortname = "pp",
    namespaced,
    printcolumn(name = "PRIORITY", type_ = "integer", json_path = ".spec.priority"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("size(self.resourceSelectors) > 0")
        .message("spec.resourceSelectors must select at least one resource").field_path(".resourceSelectors")
)]
pub struct PropagationPolicySpec {
    /// The jobs (or PodGroups) this policy applies to.
    #[schemars(length(max = 64))]
    pub resource_selectors: Vec<ResourceSelector>,

    /// Where the selected jobs may be placed.
    #[serde(default)]
    pub placement: Placement,

    /// When several policies select a job, the highest priority wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,

    /// What happens when a cluster or application fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,
}

/// Selects resources by kind and name or labels.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.name) && self.name != '' && has(self.labelSelector))")
        .message("resourceSelectors[]: set name or labelSelector, not both")
)]
pub struct ResourceSelector {
    /// API version of the target, e.g. `batch.volcano.sh/v1alpha1`.
    pub api_version: String,
    /// Kind of the target, e.g. `Job` or `PodGroup`.
    pub kind: String,
    /// Namespace of the target; defaults to the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector for targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// Where a job may be placed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Which clusters are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,
    /// Cluster taints the job tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_tolerations: Vec<Toleration>,
    /// How the job spreads over clusters, regions, zones or providers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub spread_constraints: Vec<SpreadConstraint>,
    /// Whether one gang may be split across clusters. Defaults to false: a gang runs in one
    /// cluster. A split gang is still admitted all at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_gang_split: bool,
}

/// Which clusters are allowed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinity {
    /// Only these clusters (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    /// Never these clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Clusters whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Clusters whose provider, region or zone match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
}

/// Matches clusters by `provider`, `region` or `zone`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    /// All expressions must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub match_expressions: Vec<FieldSelectorRequirement>,
}

/// One field requirement.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.key in ['provider', 'region', 'zone']")
        .message("fieldSelector.matchExpressions[].key must be provider, region or zone").field_path(".key"),
    validation = Rule::new("self.operator in ['In', 'NotIn']")
        .message("fieldSelector.matchExpressions[].operator must be In or NotIn").field_path(".operator"),
    validation = Rule::new("size(self.values) > 0")
        .message("fieldSelector.matchExpressions[].values must not be empty").field_path(".values")
)]
pub struct FieldSelectorRequirement {
    /// `provider`, `region` or `zone`.
    pub key: String,
    /// `In` or `NotIn`.
    pub operator: String,
    /// Values to match.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A spread constraint.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.minGroups) || !has(self.maxGroups) || self.minGroups <= self.maxGroups")
        .message("spreadConstraints[].minGroups must not exceed maxGroups").field_path(".minGroups")
)]
pub struct SpreadConstraint {
    /// Spread over `cluster`, `region`, `zone` or `provider` groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_by_field: Option<SpreadByField>,
    /// Or spread over the values of this cluster label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_by_label: Option<String>,
    /// At most this many groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_groups: Option<i32>,
    /// At least this many groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_groups: Option<i32>,
}

/// What a spread constraint groups clusters by.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SpreadByField {
    /// Each cluster is a group.
    #[serde(rename = "cluster")]
    Cluster,
    /// Clusters grouped by region.
    #[serde(rename = "region")]
    Region,
    /// Clusters grouped by zone.
    #[serde(rename = "zone")]
    Zone,
    /// Clusters grouped by provider.
    #[serde(rename = "provider")]
    Provider,
}

/// How workloads are removed from a failed cluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PurgeMode {
    /// Delete at once, then re-place.
    Directly,
    /// Re-place first; delete the old pods once the new placement runs, or after a timeout.
    Gracefully,
    /// Never delete; re-place only.
    Never,
}

/// Failover behavior.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverBehavior {
    /// When a whole cluster fails (a NoExecute taint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFailoverBehavior>,
    /// When the application in a cluster is unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationFailoverBehavior>,
}

/// Cluster failover behavior.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFailoverBehavior {
    /// How the failed cluster's pods are removed. Defaults to Gracefully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
}

/// Application failover behavior.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.gracePeriodSeconds) || (has(self.purgeMode) && self.purgeMode == 'Gracefully')")
        .message("failover.application.gracePeriodSeconds applies only with purgeMode Gracefully").field_path(".gracePeriodSeconds")
)]
pub struct ApplicationFailoverBehavior {
    /// When failover is triggered.
    #[serde(default)]
    pub decision_conditions: DecisionConditions,
    /// How the unhealthy placement is removed. Defaults to Gracefully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// Longest wait for the new placement before the old one is deleted anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub grace_period_seconds: Option<i32>,
}

/// When application failover is triggered.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionConditions {
    /// Seconds the application may stay unhealthy before failover. Defaults to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub toleration_seconds: Option<i32>,
}
