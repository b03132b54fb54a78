//! The writes themselves: one variant per kind of change to an API server, the object each
//! changes (writes to one object keep their order) and its verb for metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::PodGroupStatus;
use tephra_api::ResourceBinding;

use super::ExtenderPlan;

/// A pod declared on the control plane (fleet mode), kept as its compact JSON until a member
/// needs a copy. Fleet mode holds every declared pod for as long as it exists, and
/// k8s-openapi's `Pod` takes about 7.5 KB of memory for a one-container pod whose JSON is under
/// 1 KB (most of its many optional fields are inline).
#[derive(Clone, Debug)]
pub struct DeclaredPod {
    json: Arc<[u8]>,
    uid: Option<Arc<str>>,
}

impl DeclaredPod {
    /// Keeps `pod`.
    pub fn new(pod: &Pod) -> Result<Self, serde_json::Error> {
        Ok(Self {
            json: serde_json::to_vec(pod)?.into(),
            uid: pod.metadata.uid.as_deref().map(Arc::from),
        })
    }

    /// The pod, decoded again.
    pub fn pod(&self) -> Result<Pod, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// Its `metadata.uid`, which its member copies carry in `tephra.io/declared-uid`.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }
}

/// One write to an API server.
#[derive(Clone, Debug)]
pub enum Write {
    /// Bind a pod to a node (`pods/binding`).
    Bind {
        /// Member cluster.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Node.
        node: String,
        /// Job (`namespace/podgroup`).
        job: String,
        /// Annotations the binding sets on the pod as it binds it (the shared GPUs it was
        /// given, [`gpu_annotations`](super::gpu_annotations)); empty for most pods.
        annotations: BTreeMap<String, String>,
        /// Take the node's lock for shared GPUs first (`deviceshare.NodeLockEnable`).
        gpu_lock: bool,
    },
    /// Create a declared pod in the member it was placed in, on its node (fleet mode, Direct
    /// binding).
    Place {
        /// Member cluster.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Node.
        node: String,
        /// The pod as declared on the control plane (the member's copy is made when the write
        /// runs: see [`member_pod`](super::member_pod)).
        pod: DeclaredPod,
        /// Set when the member binds through its own kube-scheduler and tephra's extender.
        extender: Option<ExtenderPlan>,
        /// Annotations the member's copy is made with besides the declared pod's (the shared
        /// GPUs it was given).
        annotations: BTreeMap<String, String>,
        /// Take the node's lock for shared GPUs first (`deviceshare.NodeLockEnable`).
        gpu_lock: bool,
    },
    /// Report on a pod declared on the control plane how its member copy runs (`status`
    /// fields to merge: phase and a `PodScheduled` condition naming the cluster and node).
    DeclaredStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The status fields.
        status: serde_json::Value,
    },
    /// Set (or, with `None`, remove) the [`MEMBER`](tephra_api::well_known::MEMBER) label of a
    /// pod declared on the control plane: the member whose copy of it counts now.
    DeclaredMember {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The member cluster, or `None` while the pod waits to be placed.
        member: Option<String>,
    },
    /// Create or update a job's ResourceBinding (server-side apply).
    Binding {
        /// Namespace.
        namespace: String,
        /// Name (the job's).
        name: String,
        /// The object.
        object: Box<ResourceBinding>,
        /// The binding there is an earlier PodGroup's: it is deleted, then this one created.
        replaces: bool,
    },
    /// Evict a pod (`pods/eviction`), after marking it with a `DisruptionTarget` condition.
    Evict {
        /// Member cluster.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Why, for the condition.
        reason: String,
    },
    /// Delete the old copy of a moved gang's pod in the member it was evicted from (graceful
    /// eviction's purge).
    Purge {
        /// Member cluster.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// Set a pending pod's `PodScheduled` condition to False, saying why it waits.
    PodCondition {
        /// The cluster holding the pod.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// The condition's reason (`Unschedulable`).
        reason: String,
        /// Its message.
        message: String,
    },
    /// Set (or, with None, clear) a pending pod's `status.nominatedNodeName`: the node kept for
    /// it while the room it needs is freed (preemption, or pods terminating there).
    Nominate {
        /// Member cluster.
        cluster: String,
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// The node, or None to clear.
        node: Option<String>,
    },
    /// Merge into a ResourceBinding's status (its aggregated status).
    BindingStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// `status` fields to merge.
        status: serde_json::Value,
    },
    /// Set a ResourceBinding's graceful-eviction tasks (those done are gone).
    EvictionTasks {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The tasks left.
        tasks: Vec<tephra_api::work::GracefulEvictionTask>,
    },
    /// Replace a PodGroup's status.
    GroupStatus {
        /// The cluster holding the PodGroup.
        cluster: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The status.
        status: PodGroupStatus,
    },
    /// Set a Kubernetes PodGroup's (`scheduling.k8s.io/v1beta1`) `status.conditions`: those
    /// observed with tephra's `PodGroupInitiallyScheduled` in place (see `crate::workload`).
    KubeGroupConditions {
        /// The cluster holding the PodGroup.
        cluster: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The conditions.
        conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    },
    /// Set (or remove, `None`) annotations of a PodGroup, in one write.
    GroupAnnotation {
        /// The cluster holding the PodGroup.
        cluster: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Each annotation's key and value; `None` removes it.
        set: Vec<(String, Option<String>)>,
    },
    /// Set a HyperNode's `status.nodeCount` (in a member).
    HyperNodeStatus {
        /// Member cluster.
        cluster: String,
        /// HyperNode name (cluster-scoped).
        name: String,
        /// The nodes it holds, its lower HyperNodes' included.
        node_count: i64,
    },
    /// Set a Queue's status counts and allocation.
    QueueStatus {
        /// Queue.
        name: String,
        /// `status` fields to merge.
        status: serde_json::Value,
    },
    /// Bind a gang's volume claims (`steps`) in a member, wait until they are bound, then carry
    /// out the gang's binds (`then`): see `tephra_kube::prebind`.
    PreBind {
        /// Member cluster.
        cluster: String,
        /// Job (`namespace/podgroup`).
        job: String,
        /// The volume claims.
        steps: Vec<ClaimStep>,
        /// The ResourceClaims.
        devices: Vec<DeviceStep>,
        /// The gang's binds (or member copies), carried out once every claim is bound.
        then: Vec<Write>,
    },
    /// Deallocate a ResourceClaim that keeps its pod off the nodes, if it is still as the
    /// session saw it (`resource_version`) and reserved for nobody but the pod.
    Deallocate {
        /// Member cluster.
        cluster: String,
        /// Namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// The pod it keeps back.
        pod: String,
        /// The claim's `resourceVersion` as the session saw it.
        resource_version: String,
    },
    /// Record an Event on a PodGroup.
    Event {
        /// The cluster holding the object.
        cluster: String,
        /// Namespace.
        namespace: String,
        /// What the Event is about: a PodGroup, or (for the scheduler's own troubles, such as a
        /// refused configuration) the scheduler's Pod.
        kind: Involved,
        /// The object's name.
        group: String,
        /// The object's uid.
        uid: Option<String>,
        /// One-word reason.
        reason: String,
        /// Message.
        message: String,
        /// Warning (else Normal).
        warning: bool,
    },
}

impl Write {
    /// The object this write changes (`<cluster>/<kind>/<namespace>/<name>`, the control
    /// plane's cluster empty): the executor carries out writes to one object in the order they
    /// were planned. Events change none.
    pub fn object(&self) -> Option<String> {
        let at = |cluster: &str, kind: &str, namespace: &str, name: &str| {
            Some(format!("{cluster}/{kind}/{namespace}/{name}"))
        };
        match self {
            Write::Bind {
                cluster,
                namespace,
                name,
                ..
            }
            | Write::Place {
                cluster,
                namespace,
                name,
                ..
            }
            | Write::Evict {
                cluster,
                namespace,
                name,
                ..
            }
            | Write::Purge {
                cluster,
                namespace,
                name,
            }
            | Write::Nominate {
                cluster,
                namespace,
                name,
                ..
            }
            | Write::PodCondition {
                cluster,
                namespace,
                name,
                ..
            } => at(cluster, "pod", namespace, name),
            Write::DeclaredStatus {
                namespace, name, ..
            }
            | Write::DeclaredMember {
                namespace, name, ..
            } => at("", "pod", namespace, name),
            Write::Binding {
                namespace, name, ..
            }
            | Write::BindingStatus {
                namespace, name, ..
            }
            | Write::EvictionTasks {
                namespace, name, ..
            } => at("", "resourcebinding", namespace, name),
            Write::GroupStatus {
                cluster,
                namespace,
                name,
                ..
            }
            | Write::GroupAnnotation {
                cluster,
                namespace,
                name,
                ..
            } => at(cluster, "podgroup", namespace, name),
            Write::KubeGroupConditions {
                cluster,
                namespace,
                name,
                ..
            } => at(cluster, "kubepodgroup", namespace, name),
            Write::QueueStatus { name, .. } => at("", "queue", "", name),
            Write::HyperNodeStatus { cluster, name, .. } => at(cluster, "hypernode", "", name),
            Write::PreBind { cluster, job, .. } => at(cluster, "prebind", "", job),
            Write::Deallocate {
                cluster,
                namespace,
                claim,
                ..
            } => at(cluster, "resourceclaim", namespace, claim),
            Write::Event { .. } => None,
        }
    }

    /// The API verb, for metrics.
    pub fn verb(&self) -> &'static str {
        match self {
            Write::Bind { .. } => "bind",
            Write::Place { .. } => "place",
            Write::Binding { .. } => "resourcebinding",
            Write::DeclaredStatus { .. } => "declared_status",
            Write::DeclaredMember { .. } => "declared_member",
            Write::Evict { .. } => "evict",
            Write::Purge { .. } => "purge",
            Write::EvictionTasks { .. } => "eviction_tasks",
            Write::BindingStatus { .. } => "resourcebinding_status",
            Write::Nominate { .. } => "nominate",
            Write::PodCondition { .. } => "pod_condition",
            Write::GroupStatus { .. } => "podgroup_status",
            Write::GroupAnnotation { .. } => "podgroup_annotation",
            Write::KubeGroupConditions { .. } => "kube_podgroup_status",
            Write::QueueStatus { .. } => "queue_status",
            Write::HyperNodeStatus { .. } => "hypernode_status",
            Write::PreBind { .. } => "prebind",
            Write::Deallocate { .. } => "deallocate",
            Write::Event { .. } => "event",
        }
    }
}

/// The kind of object an Event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Involved {
    /// A PodGroup (`scheduling.volcano.sh/v1beta1`).
    PodGroup,
    /// A Kubernetes PodGroup (`scheduling.k8s.io/v1beta1`).
    KubePodGroup,
    /// A Pod (`v1`).
    Pod,
}

impl Involved {
    /// `(apiVersion, kind)`.
    pub fn type_meta(self) -> (&'static str, &'static str) {
        match self {
            Involved::PodGroup => ("scheduling.volcano.sh/v1beta1", "PodGroup"),
            Involved::KubePodGroup => ("scheduling.k8s.io/v1beta1", "PodGroup"),
            Involved::Pod => ("v1", "Pod"),
        }
    }
}

/// One claim to bind before its gang.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimStep {
    /// Namespace.
    pub namespace: String,
    /// The claim.
    pub claim: String,
    /// The volume chosen for it; `None`: provisioned on `node`.
    pub volume: Option<String>,
    /// The node its pod is bound to.
    pub node: String,
}

/// One ResourceClaim to allocate (when the session allocated it) and reserve for its pod
/// before the pod is bound.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceStep {
    /// Namespace.
    pub namespace: String,
    /// The claim.
    pub claim: String,
    /// The pod it is reserved for.
    pub pod: String,
    /// `status.allocation` to write; `None`: allocated already, only to reserve.
    pub allocation: Option<serde_json::Value>,
    /// Whether to reserve it for the pod now (the pod exists in the member).
    pub reserve: bool,
}
