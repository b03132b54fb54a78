//! `topology.volcano.sh/v1alpha1`: Volcano's HyperNode, a network-topology domain of one tier
//! (tier 1 closest, e.g. the nodes under one leaf switch) whose members are nodes or lower
//! HyperNodes. Field names, validation and printer columns follow Volcano's CRD, so that
//! manifests written for Volcano are accepted as they are.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A collection of nodes that share network performance (a rack under one switch, a spine
/// above racks). The scheduler keeps a gang with `networkTopology` within one HyperNode of its
/// allowed tier.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "topology.volcano.sh",
    version = "v1alpha1",
    kind = "HyperNode",
    plural = "hypernodes",
    singular = "hypernode",
    shortname = "hn",
    status = "HyperNodeStatus",
    printcolumn(name = "Tier", type_ = "string", json_path = ".spec.tier"),
    printcolumn(name = "TierName", type_ = "string", json_path = ".spec.tierName"),
    printcolumn(name = "NodeCount", type_ = "integer", json_path = ".status.nodeCount"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// The tier: 1 is the closest (the best network performance).
    #[schemars(range(min = 0))]
    pub tier: i64,

    /// The tier's name, by which a job's `highestTierName` may refer to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub tier_name: Option<String>,

    /// The nodes, or the lower HyperNodes, it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub members: Option<Vec<MemberSpec>>,
}

/// What a member is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MemberType {
    /// A node of the cluster.
    Node,
    /// A lower HyperNode.
    HyperNode,
}

/// One member entry: a node or HyperNode, or several chosen by a selector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type")]
    pub type_: MemberType,
    /// Which ones (none without a selector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<MemberSelector>,
}

/// How members are selected: exactly one of an exact name, a regular expression on names, or
/// node labels (for `Node` members only).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)")
        .message("Either ExactMatch or RegexMatch or LabelMatch must be specified"),
    validation = Rule::new("(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1")
        .message("Only one of ExactMatch, RegexMatch, or LabelMatch can be specified")
)]
pub struct MemberSelector {
    /// The member with exactly this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<ExactMatch>,
    /// The members whose names match a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,
    /// The nodes whose labels match (only for `Node` members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_match: Option<LabelSelector>,
}

/// An exact name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ExactMatch {
    /// The name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// A regular expression on names (unanchored, as Go's `regexp` matches).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct RegexMatch {
    /// The pattern.
    #[schemars(length(min = 1))]
    pub pattern: String,
}

/// What the HyperNode holds now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many nodes it holds, its lower HyperNodes' included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_count: Option<i64>,
}
