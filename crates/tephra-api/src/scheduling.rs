//! `scheduling.volcano.sh/v1beta1`: PodGroup and Queue, as Volcano defines them.
//!
//! Kubeflow training-operator, KubeRay, Spark and the MPI operator create these PodGroups
//! themselves, so their shape must match Volcano's exactly.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::batch::NetworkTopologySpec;
use crate::defaults;

/// A resource list: resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...) to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

crate::root::optional_spec_root!(
    /// A gang: a set of pods that the scheduler places all together (at least `minMember`) or
    /// not at all. `spec` may be left out (every field has a default), as with Volcano.
    PodGroup,
    PodGroupCrd,
    PodGroupSpec,
    PodGroupStatus
);

crate::root::optional_spec_root!(
    /// A queue: a share of the fleet that PodGroups are admitted through. `spec` may be left out
    /// (every field has a default), as with Volcano.
    Queue,
    QueueCrd,
    QueueSpec,
    QueueStatus
);

/// The spec of a gang: a set of pods that the scheduler places all together (at least
/// `minMember`) or not at all. The derive renders the CRD through the hidden `PodGroupCrd`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    root = "PodGroupCrd",
    plural = "podgroups",
    singular = "podgroup",
    shortname = "pg",
    shortname = "podgroup-v1beta1",
    namespaced,
    status = "PodGroupStatus",
    printcolumn(name = "STATUS", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "minMember", type_ = "integer", json_path = ".spec.minMember"),
    printcolumn(name = "RUNNINGS", type_ = "integer", json_path = ".status.running"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "QUEUE",
        type_ = "string",
        json_path = ".spec.queue",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// The least number of pods that must be placed together; if they cannot all be placed, none
    /// is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_member: Option<i32>,

    /// The least number of pods of each task (role) that must be placed together.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("additionalProperties" = {"type": "integer", "format": "int32", "minimum": 0}))]
    pub min_task_member: BTreeMap<String, i32>,

    /// The queue this PodGroup is admitted through. Defaults to `default`.
    #[serde(default = "defaults::queue")]
    #[schemars(length(max = 253), regex(pattern = defaults::DNS1123_SUBDOMAIN))]
    pub queue: String,

    /// PriorityClass of the PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,

    /// The least resources needed to start the gang; the enqueue action admits the PodGroup only
    /// when its queue can hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<ResourceList>,

    /// Network topology constraint (works with HyperNodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Sub-groups of the gang (a Job task's partitions), each placed together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub sub_group_policy: Vec<SubGroupPolicySpec>,
}

impl Default for PodGroupSpec {
    fn default() -> Self {
        Self {
            min_member: None,
            min_task_member: BTreeMap::new(),
            queue: defaults::queue(),
            priority_class_name: None,
            min_resources: None,
            network_topology: None,
            sub_group_policy: Vec::new(),
        }
    }
}

/// One sub-group policy of a PodGroup: the pods its selector matches, split into sub-groups of
/// `subGroupSize` by the values of `matchLabelKeys`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicySpec {
    /// Name of the policy (the Job task it comes from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub name: Option<String>,
    /// Network topology constraint of each sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Pods per sub-group. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 1))]
    pub sub_group_size: Option<i32>,
    /// The least number of sub-groups that must be placed together. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 0))]
    pub min_sub_groups: Option<i32>,
    /// The pods this policy applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Pod label keys whose values split the selected pods into sub-groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

/// Phase of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodGroupPhase {
    /// Accepted, but its queue cannot admit it yet.
    Pending,
    /// At least minMember pods are running.
    Running,
    /// Part of the gang runs and the rest cannot be scheduled.
    Unknown,
    /// Admitted by its queue; pods may be created and placed.
    Inqueue,
    /// All pods completed.
    Completed,
}

/// Condition types of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodGroupConditionType {
    /// The gang could not be placed in the last session.
    Unschedulable,
    /// The gang was placed.
    Scheduled,
}

/// Reasons on PodGroup conditions, with Volcano's strings.
pub mod reasons {
    /// A pod of the PodGroup failed.
    pub const POD_FAILED: &str = "PodFailed";
    /// A pod of the PodGroup was deleted.
    pub const POD_DELETED: &str = "PodDeleted";
    /// Not enough resources to place the gang.
    pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
    /// Fewer pods exist than `spec.minMember`.
    pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
    /// Fewer pods of a task exist than `spec.minTaskMember`.
    pub const NOT_ENOUGH_PODS_OF_TASK: &str = "NotEnoughPodsOfTask";
}

/// A condition of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// `Unschedulable` or `Scheduled`.
    #[serde(rename = "type")]
    pub type_: PodGroupConditionType,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The scheduling session that set this condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "transitionID")]
    pub transition_id: Option<String>,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One-word CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable explanation, e.g. why the gang is waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Observed state of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,
    /// Conditions, most recent last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodGroupCondition>,
    /// Running pods.
    #[serde(default)]
    pub running: i32,
    /// Succeeded pods.
    #[serde(default)]
    pub succeeded: i32,
    /// Failed pods.
    #[serde(default)]
    pub failed: i32,
}

/// The spec of a queue: a share of the fleet that PodGroups are admitted through. Queues form a
/// tree through `spec.parent`, rooted at the queue named `root`. The derive renders the CRD
/// through the hidden `QueueCrd`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    root = "QueueCrd",
    plural = "queues",
    singular = "queue",
    shortname = "q",
    shortname = "queue-v1beta1",
    status = "QueueStatus",
    printcolumn(name = "WEIGHT", type_ = "integer", json_path = ".spec.weight"),
    printcolumn(name = "STATE", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "PARENT", type_ = "string", json_path = ".spec.parent"),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("!has(self.spec) || !has(self.spec.parent) || self.spec.parent != self.metadata.name")
        .message("spec.parent must name another queue: a queue cannot be its own parent").field_path(".spec.parent"),
    validation = Rule::new("self.metadata.name != 'root' || !has(self.spec) || !has(self.spec.parent) || self.spec.parent == ''")
        .message("the root queue cannot have a parent").field_path(".spec.parent")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.capability) || !has(self.guarantee) || !has(self.guarantee.resource) || self.guarantee.resource.all(r, !(r in self.capability) || quantity(string(self.guarantee.resource[r])).compareTo(quantity(string(self.capability[r]))) <= 0)")
        .message("spec.guarantee.resource must not exceed spec.capability for any resource").field_path(".guarantee"),
    validation = Rule::new("!has(self.capability) || !has(self.deserved) || self.deserved.all(r, !(r in self.capability) || quantity(string(self.deserved[r])).compareTo(quantity(string(self.capability[r]))) <= 0)")
        .message("spec.deserved must not exceed spec.capability for any resource").field_path(".deserved"),
    validation = Rule::new("!has(self.deserved) || !has(self.guarantee) || !has(self.guarantee.resource) || self.guarantee.resource.all(r, !(r in self.deserved) || quantity(string(self.guarantee.resource[r])).compareTo(quantity(string(self.deserved[r]))) <= 0)")
        .message("spec.guarantee.resource must not exceed spec.deserved for any resource").field_path(".guarantee")
)]
pub struct QueueSpec {
    /// Relative share of the fleet (1 to 65535). Defaults to 1.
    #[serde(default = "defaults::weight")]
    #[schemars(range(min = 1, max = 65535))]
    pub weight: i32,

    /// Hard upper bound on what the queue's jobs may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<ResourceList>,

    /// Whether other queues may reclaim resources from this one when it is above its deserved
    /// share. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,

    /// Resources reserved for this queue; unused guarantee is lent to sibling queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,

    /// The share the queue deserves (capacity plugin); above it, its jobs may be reclaimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deserved: Option<ResourceList>,

    /// Parent queue in the hierarchy. Defaults to `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = defaults::DNS1123_SUBDOMAIN))]
    pub parent: Option<String>,

    /// Priority of the queue over its siblings, for reclaim and ordering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub priority: Option<i32>,

    /// `fifo`: the head job blocks the queue until it fits. `traverse`: skip a job that cannot fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dequeue_strategy: Option<DequeueStrategy>,

    /// Node groups the queue's pods must or should run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<QueueAffinity>,

    /// Queue type, free-form (Volcano passes it through).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    #[schemars(length(max = 253))]
    pub type_: Option<String>,

    /// Clusters the queue extends to, with a weight and capacity each (Volcano's multi-cluster
    /// field; tephra places across members through Cluster objects and keeps this as given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extend_clusters: Vec<ExtendCluster>,
}

/// A cluster a queue extends to (Volcano's `Cluster` in a Queue spec).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtendCluster {
    /// Cluster name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Weight of the cluster for the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Capacity of the queue in that cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
}

impl Default for QueueSpec {
    fn default() -> Self {
        Self {
            weight: defaults::weight(),
            capability: None,
            reclaimable: None,
            guarantee: None,
            deserved: None,
            parent: None,
            priority: None,
            dequeue_strategy: None,
            affinity: None,
            type_: None,
            extend_clusters: Vec::new(),
        }
    }
}

/// Resources reserved for a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guarantee {
    /// The reserved amount per resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// How a queue hands out its jobs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DequeueStrategy {
    /// Strict order: the head job blocks the queue until it fits.
    #[serde(rename = "fifo")]
    Fifo,
    /// Skip a job that cannot fit and try the next one.
    #[serde(rename = "traverse")]
    Traverse,
}

/// Node-group affinity of a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueAffinity {
    /// Node groups the queue's pods must or should run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_affinity: Option<NodeGroupAffinity>,
    /// Node groups the queue's pods must or should avoid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_anti_affinity: Option<NodeGroupAffinity>,
}

/// Required and preferred node groups (by the `volcano.sh/nodegroup-name` node label).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupAffinity {
    /// Node groups that are required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_during_scheduling_ignored_during_execution: Vec<String>,
    /// Node groups that are preferred.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<String>,
}

/// State of a queue.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum QueueState {
    /// Admits new jobs.
    Open,
    /// Admits nothing new.
    Closed,
    /// Admits nothing new; running jobs drain.
    Closing,
    /// Unknown.
    Unknown,
}

/// Observed state of a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Open, Closed, Closing or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<QueueState>,
    /// PodGroups in phase Unknown.
    #[serde(default)]
    pub unknown: i32,
    /// PodGroups in phase Pending.
    #[serde(default)]
    pub pending: i32,
    /// PodGroups in phase Running.
    #[serde(default)]
    pub running: i32,
    /// PodGroups in phase Inqueue.
    #[serde(default)]
    pub inqueue: i32,
    /// PodGroups in phase Completed.
    #[serde(default)]
    pub completed: i32,
    /// Resources held by the queue's running and bound pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<ResourceList>,
}
