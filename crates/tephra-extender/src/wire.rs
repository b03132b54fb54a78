//! kube-scheduler's extender protocol (`k8s.io/kube-scheduler/extender/v1`), field for field.
//! The Go types carry no JSON tags, so the wire names are the Go field names (`Pod`,
//! `NodeNames`, `FailedAndUnresolvableNodes`, ...). kube-scheduler sends `Nodes` (full node
//! objects) when the extender is configured with `nodeCacheCapable: false` and `NodeNames` when
//! it is `true`, and reads back the same one; nil pointers and maps are `null` or absent.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::{Deserialize, Deserializer, Serialize};

/// The highest score an extender gives a node (kube-scheduler multiplies it by the weight).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// `v1.NodeList` as kube-scheduler marshals it: no `apiVersion` or `kind` (it builds the list
/// itself), and `items` may be `null`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeList {
    /// Set when a sender fills in the type.
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    /// Set when a sender fills in the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// List metadata (empty).
    #[serde(default)]
    pub metadata: ListMeta,
    /// The nodes.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<Node>,
}

/// A Go nil slice arrives as `null`.
fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A Go nil map arrives as `null`.
fn null_as_empty_map<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
    d: D,
) -> Result<BTreeMap<String, V>, D::Error> {
    Ok(Option::<BTreeMap<String, V>>::deserialize(d)?.unwrap_or_default())
}

/// A node name in a request, borrowed from the request's bytes when it has no escapes (node
/// names never do), so that 5,000 names cost no allocation each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct NodeName<'a>(pub Cow<'a, str>);

impl NodeName<'_> {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for NodeName<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = NodeName<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a node name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visit)
    }
}

/// What `filter` and `prioritize` receive (node names borrowed from the request's bytes).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderArgs<'a> {
    /// The pod being scheduled.
    #[serde(rename = "Pod", default)]
    pub pod: Option<Pod>,
    /// Candidate nodes (`nodeCacheCapable: false`).
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names (`nodeCacheCapable: true`).
    #[serde(rename = "NodeNames", default, borrow)]
    pub node_names: Option<Vec<NodeName<'a>>>,
}

/// Node name → why it fails.
pub type FailedNodesMap = BTreeMap<String, String>;

/// What `filter` answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderFilterResult {
    /// Nodes that pass (`nodeCacheCapable: false`).
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    /// Names of nodes that pass (`nodeCacheCapable: true`).
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Nodes that fail, where preemption might help.
    #[serde(
        rename = "FailedNodes",
        default,
        deserialize_with = "null_as_empty_map"
    )]
    pub failed_nodes: FailedNodesMap,
    /// Nodes that fail whatever is preempted.
    #[serde(
        rename = "FailedAndUnresolvableNodes",
        default,
        deserialize_with = "null_as_empty_map"
    )]
    pub failed_and_unresolvable_nodes: FailedNodesMap,
    /// A non-empty error fails the scheduling cycle.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// One node's score.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: String,
    /// 0 to [`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score")]
    pub score: i64,
}

/// What `prioritize` answers.
pub type HostPriorityList = Vec<HostPriority>;

/// What `bind` receives.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderBindingArgs {
    /// Pod name.
    #[serde(rename = "PodName")]
    pub pod_name: String,
    /// Pod namespace.
    #[serde(rename = "PodNamespace")]
    pub pod_namespace: String,
    /// Pod UID.
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    /// The node kube-scheduler chose.
    #[serde(rename = "Node")]
    pub node: String,
}

/// What `bind` answers: an empty error means bound.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    /// Why the bind failed, if it did.
    #[serde(rename = "Error")]
    pub error: String,
}

/// Pods a preemption on one node would evict (full pods).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Victims {
    /// The pods.
    #[serde(rename = "Pods", default, deserialize_with = "null_as_empty")]
    pub pods: Vec<Pod>,
    /// PodDisruptionBudgets the eviction would violate.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// A victim named by UID only.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MetaPod {
    /// The pod's UID.
    #[serde(rename = "UID")]
    pub uid: String,
}

/// Pods a preemption on one node would evict (UIDs).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MetaVictims {
    /// The pods.
    #[serde(rename = "Pods", default, deserialize_with = "null_as_empty")]
    pub pods: Vec<MetaPod>,
    /// PodDisruptionBudgets the eviction would violate.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// What `preempt` receives: victims per candidate node, full (`nodeCacheCapable: false`) or
/// by UID (`true`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderPreemptionArgs {
    /// The pod that would preempt.
    #[serde(rename = "Pod", default)]
    pub pod: Option<Pod>,
    /// Victims per node, full pods.
    #[serde(rename = "NodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Victims>>,
    /// Victims per node, by UID.
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// What `preempt` answers: the candidate nodes left, each with its victims by UID.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderPreemptionResult {
    /// Victims per node still a candidate.
    #[serde(
        rename = "NodeNameToMetaVictims",
        default,
        deserialize_with = "null_as_empty_map"
    )]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}
