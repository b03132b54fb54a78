//! What the cache is fed: one change of one object, as an informer or the simulator reports it,
//! and why an event may be refused; a storage or DRA change made in its cluster's objects.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::topology::HyperNodeSpec;
use crate::model::{
    Cluster, DeviceClass, Dra, NodeSpec, PdbSpec, PersistentVolume, PodGroupSpec, PodSpec,
    QueueSpec, ResourceClaim, ResourceSlice, Storage, StorageClass, VolumeClaim,
};

/// One change reported by an informer or the simulator.
#[derive(Clone, Debug)]
pub enum Event {
    /// A cluster appeared or changed.
    ClusterUpsert(Cluster),
    /// A cluster was removed, with its nodes.
    ClusterDelete(String),
    /// A node appeared or changed.
    NodeUpsert(NodeSpec),
    /// A node was removed.
    NodeDelete {
        /// Cluster.
        cluster: String,
        /// Node.
        name: String,
    },
    /// A pod appeared or changed.
    PodUpsert(PodSpec),
    /// A pod was removed.
    PodDelete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A PodGroup appeared or changed.
    PodGroupUpsert(PodGroupSpec),
    /// A PodGroup was removed.
    PodGroupDelete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A queue appeared or changed.
    QueueUpsert(Box<QueueSpec>),
    /// A queue was removed.
    QueueDelete(String),
    /// A PriorityClass appeared or changed.
    PriorityClassUpsert {
        /// Name.
        name: String,
        /// Value.
        value: i32,
    },
    /// A PriorityClass was removed.
    PriorityClassDelete(String),
    /// A PodDisruptionBudget appeared or changed.
    PdbUpsert(PdbSpec),
    /// A PodDisruptionBudget was removed.
    PdbDelete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A Dynamic Resource Allocation object of a member cluster changed.
    Dra {
        /// The member cluster.
        cluster: String,
        /// What changed.
        change: DraChange,
    },
    /// A storage object of a member cluster changed.
    Storage {
        /// The member cluster.
        cluster: String,
        /// What changed.
        change: StorageChange,
    },
    /// A HyperNode of a member cluster appeared or changed.
    HyperNodeUpsert(HyperNodeSpec),
    /// A HyperNode of a member cluster was removed.
    HyperNodeDelete {
        /// The member cluster.
        cluster: String,
        /// The HyperNode.
        name: String,
    },
    /// Sessions run before HyperNodes are listed: until [`Event::HyperNodesListed`] names a
    /// cluster, gangs with a `networkTopology` wait in it.
    HyperNodesDeferred,
    /// The dynamic MIG geometries GPU models allow (the device configuration's
    /// `nvidia.knownMigGeometries`; empty: MIG-mode GPUs are shared as any other).
    MigGeometries(crate::model::mig::KnownGeometries),
    /// The HyperNodes of a cluster have been listed whole.
    HyperNodesListed {
        /// The member cluster.
        cluster: String,
    },
}

/// One change to a member cluster's storage objects.
#[derive(Clone, Debug)]
pub enum StorageChange {
    /// A StorageClass appeared or changed.
    ClassUpsert(StorageClass),
    /// A StorageClass was removed.
    ClassDelete(String),
    /// A PersistentVolume appeared or changed.
    VolumeUpsert(PersistentVolume),
    /// A PersistentVolume was removed.
    VolumeDelete(String),
    /// A PersistentVolumeClaim appeared or changed.
    ClaimUpsert(VolumeClaim),
    /// A PersistentVolumeClaim was removed (`namespace/name`).
    ClaimDelete(String),
    /// A node's CSI attach limits by driver (a CSINode); empty when it was removed.
    AttachLimits {
        /// Node.
        node: String,
        /// Limit per driver.
        limits: BTreeMap<String, u32>,
    },
    /// A session gave the volume to the claim for `pod`'s bind, which writes the volume's
    /// claim reference: the volume is the claim's until a watcher shows it taken
    /// ([`Storage::assume`](crate::model::Storage::assume)).
    Assume {
        /// The volume.
        volume: String,
        /// The claim.
        claim: crate::model::ClaimRef,
        /// The pod (`namespace/name`) whose bind writes it.
        pod: String,
    },
    /// `pod`'s bind failed: the volumes it was to take are free again.
    Unassume {
        /// The pod (`namespace/name`).
        pod: String,
    },
}

impl StorageChange {
    /// Makes the change in a member cluster's storage objects.
    pub(super) fn apply_to(self, s: &mut Storage) {
        match self {
            Self::ClassUpsert(c) => {
                s.classes.insert(c.name.clone(), Arc::new(c));
            }
            Self::ClassDelete(name) => {
                s.classes.remove(&name);
            }
            Self::VolumeUpsert(v) => s.upsert_volume(v),
            Self::VolumeDelete(name) => s.delete_volume(&name),
            Self::Assume { volume, claim, pod } => s.assume(&volume, claim, &pod),
            Self::Unassume { pod } => s.unassume(&pod),
            Self::ClaimUpsert(c) => {
                s.claims.insert(c.key(), Arc::new(c));
            }
            Self::ClaimDelete(key) => {
                s.claims.remove(&key);
            }
            Self::AttachLimits { node, limits } => {
                if limits.is_empty() {
                    s.attach_limits.remove(&node);
                } else {
                    s.attach_limits.insert(node, limits);
                }
            }
        }
    }
}

/// Errors applying an event. The cache is unchanged when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// A node names a cluster the cache does not know.
    #[error("node {node}: unknown cluster {cluster:?}")]
    UnknownCluster {
        /// Node name.
        node: String,
        /// Cluster name.
        cluster: String,
    },
    /// A queue lists itself as its parent.
    #[error("queue {0}: spec.parent names the queue itself")]
    QueueOwnParent(String),
}

/// One change to a member cluster's Dynamic Resource Allocation objects.
#[derive(Clone, Debug)]
pub enum DraChange {
    /// A DeviceClass appeared or changed.
    ClassUpsert(DeviceClass),
    /// A DeviceClass was removed.
    ClassDelete(String),
    /// A ResourceSlice appeared or changed.
    SliceUpsert(ResourceSlice),
    /// A ResourceSlice was removed.
    SliceDelete(String),
    /// A ResourceClaim appeared or changed.
    ClaimUpsert(ResourceClaim),
    /// A ResourceClaim was removed (`namespace/name`).
    ClaimDelete(String),
    /// A session gave the claim (`namespace/name`) this allocation for `pod`'s bind, which
    /// writes it: the claim holds it until a watcher shows the claim allocated
    /// ([`Dra::assume`](crate::model::Dra::assume)).
    Assume {
        /// The claim.
        claim: String,
        /// What it was given.
        allocation: crate::model::ClaimAllocation,
        /// The pod (`namespace/name`) whose bind writes it.
        pod: String,
    },
    /// `pod`'s bind failed: what its claims were assumed to be given is free again.
    Unassume {
        /// The pod (`namespace/name`).
        pod: String,
    },
}

impl DraChange {
    /// Makes the change in a member cluster's DRA objects.
    pub(super) fn apply_to(self, d: &mut Dra) {
        match self {
            Self::ClassUpsert(c) => {
                d.classes.insert(c.name.clone(), Arc::new(c));
            }
            Self::ClassDelete(name) => {
                d.classes.remove(&name);
            }
            Self::SliceUpsert(s) => d.upsert_slice(s),
            Self::SliceDelete(name) => d.delete_slice(&name),
            Self::ClaimUpsert(c) => d.upsert_claim(c),
            Self::ClaimDelete(key) => d.delete_claim(&key),
            Self::Assume {
                claim,
                allocation,
                pod,
            } => d.assume(&claim, allocation, &pod),
            Self::Unassume { pod } => d.unassume(&pod),
        }
    }
}
