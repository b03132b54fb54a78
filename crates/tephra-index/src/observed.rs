//! What the watchers report, in the index's words: the kinds watched, one watched object, and
//! what happened to objects of one kind in one cluster (applied, deleted, a (re)list object
//! by object, a failed watch, a member that answers again).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as KubePodGroup;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use tephra_api::{
    Cluster as ApiCluster, HyperNode, PodGroup, PropagationPolicy, Queue, ResourceBinding,
};

/// The kinds the scheduler watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Nodes, on each member.
    Node,
    /// Pods, on each member.
    Pod,
    /// PodGroups, on the control plane.
    PodGroup,
    /// Kubernetes' own PodGroups (`scheduling.k8s.io/v1beta1`, the Workload API), on the
    /// control plane: the second front end to the same gangs.
    KubePodGroup,
    /// Queues, on the control plane.
    Queue,
    /// PriorityClasses, on the control plane.
    PriorityClass,
    /// PodDisruptionBudgets, on the control plane.
    Pdb,
    /// Member clusters (`Cluster` objects), on the control plane.
    Cluster,
    /// PropagationPolicies, on the control plane (fleet mode).
    Policy,
    /// ResourceBindings, on the control plane (fleet mode): their graceful-eviction tasks.
    Binding,
    /// PersistentVolumeClaims, on each member.
    Pvc,
    /// PersistentVolumes, on each member.
    Pv,
    /// StorageClasses, on each member.
    StorageClass,
    /// CSINodes (attach limits), on each member.
    CsiNode,
    /// DeviceClasses, on each member.
    DeviceClass,
    /// ResourceSlices, on each member.
    ResourceSlice,
    /// ResourceClaims, on each member.
    ResourceClaim,
    /// Volcano's HyperNodes (network topology), on each member.
    HyperNode,
    /// The vGPU device configuration ConfigMap (`volcano-vgpu-device-config` in
    /// `kube-system`, or as `deviceshare` names it), in the scheduler's own cluster: the
    /// dynamic MIG geometries.
    DeviceConfig,
}

impl Kind {
    /// Whether a cluster may not serve the kind at all: `resource.k8s.io/v1` is served from
    /// Kubernetes 1.34 on, and HyperNodes only where their CRD is installed. A cluster that
    /// answers 404 for it has none of it (403 too, for the [`forbidden_is_absent`] kinds).
    ///
    /// [`forbidden_is_absent`]: Kind::forbidden_is_absent
    pub fn optional(self) -> bool {
        matches!(
            self,
            Kind::DeviceClass
                | Kind::ResourceSlice
                | Kind::ResourceClaim
                | Kind::HyperNode
                | Kind::KubePodGroup
                | Kind::DeviceConfig
        )
    }

    /// Whether a cluster that forbids reading the kind (403) counts as having none: the
    /// device configuration, which only dynamic MIG needs, must not hold back readiness.
    pub fn forbidden_is_absent(self) -> bool {
        self == Kind::DeviceConfig
    }

    /// Why a cluster may not serve an [`optional`](Kind::optional) kind.
    pub fn absent_why(self) -> &'static str {
        match self {
            Kind::HyperNode => "the HyperNode CRD (topology.volcano.sh) is not installed",
            Kind::DeviceConfig => {
                "the vGPU device configuration ConfigMap may not be read (403): MIG-mode GPUs \
                 are shared as any other"
            }
            Kind::KubePodGroup => {
                "scheduling.k8s.io/v1beta1 is not served (Kubernetes 1.37 with the GenericWorkload \
                 gate and that API version on)"
            }
            _ => "resource.k8s.io/v1 needs Kubernetes 1.34",
        }
    }

    /// The kind's name in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::PodGroup => "podgroups",
            Kind::KubePodGroup => "podgroups.scheduling.k8s.io",
            Kind::Queue => "queues",
            Kind::PriorityClass => "priorityclasses",
            Kind::Pdb => "poddisruptionbudgets",
            Kind::Cluster => "clusters",
            Kind::Policy => "propagationpolicies",
            Kind::Binding => "resourcebindings",
            Kind::Pvc => "persistentvolumeclaims",
            Kind::Pv => "persistentvolumes",
            Kind::StorageClass => "storageclasses",
            Kind::CsiNode => "csinodes",
            Kind::DeviceClass => "deviceclasses",
            Kind::ResourceSlice => "resourceslices",
            Kind::ResourceClaim => "resourceclaims",
            Kind::HyperNode => "hypernodes",
            Kind::DeviceConfig => "configmaps",
        }
    }
}

/// One watched object.
#[derive(Clone, Debug)]
pub enum Obj {
    /// A Node.
    Node(Box<Node>),
    /// A Pod.
    Pod(Box<Pod>),
    /// A PodGroup.
    PodGroup(Box<PodGroup>),
    /// A Kubernetes PodGroup (`scheduling.k8s.io/v1beta1`).
    KubePodGroup(Box<KubePodGroup>),
    /// A Queue.
    Queue(Box<Queue>),
    /// A PriorityClass.
    PriorityClass(Box<PriorityClass>),
    /// A PodDisruptionBudget.
    Pdb(Box<PodDisruptionBudget>),
    /// A member cluster.
    Cluster(Box<ApiCluster>),
    /// A PropagationPolicy.
    Policy(Box<PropagationPolicy>),
    /// A ResourceBinding.
    Binding(Box<ResourceBinding>),
    /// A PersistentVolumeClaim.
    Pvc(Box<PersistentVolumeClaim>),
    /// A PersistentVolume.
    Pv(Box<PersistentVolume>),
    /// A StorageClass.
    StorageClass(Box<StorageClass>),
    /// A CSINode.
    CsiNode(Box<CSINode>),
    /// A DeviceClass.
    DeviceClass(Box<DeviceClass>),
    /// A ResourceSlice.
    ResourceSlice(Box<ResourceSlice>),
    /// A ResourceClaim.
    ResourceClaim(Box<ResourceClaim>),
    /// A HyperNode.
    HyperNode(Box<HyperNode>),
    /// The vGPU device configuration ConfigMap.
    DeviceConfig(Box<k8s_openapi::api::core::v1::ConfigMap>),
}

impl Obj {
    /// The kind of the object.
    pub fn kind(&self) -> Kind {
        match self {
            Obj::Node(_) => Kind::Node,
            Obj::Pod(_) => Kind::Pod,
            Obj::PodGroup(_) => Kind::PodGroup,
            Obj::KubePodGroup(_) => Kind::KubePodGroup,
            Obj::Queue(_) => Kind::Queue,
            Obj::PriorityClass(_) => Kind::PriorityClass,
            Obj::Pdb(_) => Kind::Pdb,
            Obj::Cluster(_) => Kind::Cluster,
            Obj::Policy(_) => Kind::Policy,
            Obj::Binding(_) => Kind::Binding,
            Obj::Pvc(_) => Kind::Pvc,
            Obj::Pv(_) => Kind::Pv,
            Obj::StorageClass(_) => Kind::StorageClass,
            Obj::CsiNode(_) => Kind::CsiNode,
            Obj::DeviceClass(_) => Kind::DeviceClass,
            Obj::ResourceSlice(_) => Kind::ResourceSlice,
            Obj::ResourceClaim(_) => Kind::ResourceClaim,
            Obj::HyperNode(_) => Kind::HyperNode,
            Obj::DeviceConfig(_) => Kind::DeviceConfig,
        }
    }

    /// The object's key within its kind and cluster: `namespace/name`, or `name` when
    /// cluster-scoped.
    pub fn key(&self) -> String {
        let meta = match self {
            Obj::Node(o) => &o.metadata,
            Obj::Pod(o) => &o.metadata,
            Obj::PodGroup(o) => &o.metadata,
            Obj::KubePodGroup(o) => &o.metadata,
            Obj::Queue(o) => &o.metadata,
            Obj::PriorityClass(o) => &o.metadata,
            Obj::Pdb(o) => &o.metadata,
            Obj::Cluster(o) => &o.metadata,
            Obj::Policy(o) => &o.metadata,
            Obj::Binding(o) => &o.metadata,
            Obj::Pvc(o) => &o.metadata,
            Obj::Pv(o) => &o.metadata,
            Obj::StorageClass(o) => &o.metadata,
            Obj::CsiNode(o) => &o.metadata,
            Obj::DeviceClass(o) => &o.metadata,
            Obj::ResourceSlice(o) => &o.metadata,
            Obj::ResourceClaim(o) => &o.metadata,
            Obj::HyperNode(o) => &o.metadata,
            Obj::DeviceConfig(o) => &o.metadata,
        };
        match &meta.namespace {
            Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
            None => meta.name.clone().unwrap_or_default(),
        }
    }
}

/// What happened to objects of one kind in one cluster.
#[derive(Clone, Debug)]
pub enum Change {
    /// An object appeared or changed.
    Apply(Obj),
    /// An object was deleted.
    Delete(Obj),
    /// A full (re)list begins: the objects that follow are all there are.
    ListStart,
    /// One object of a (re)list.
    Listed(Obj),
    /// The (re)list is complete: what it did not name is gone.
    ListDone,
    /// A whole (re)list at once (for callers that have it in hand).
    Relisted(Vec<Obj>),
    /// The watch failed: the cluster may be unreachable (its last known objects still count).
    Failed,
    /// A probe of the cluster succeeded: it answers again.
    Reachable,
}

/// A change reported by one watcher.
#[derive(Clone, Debug)]
pub struct Update {
    /// The cluster the watcher watches.
    pub cluster: Arc<str>,
    /// The kind it watches.
    pub kind: Kind,
    /// What happened.
    pub change: Change,
}
