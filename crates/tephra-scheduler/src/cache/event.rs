//! What the cache is fed: one change of one object, as an informer or the simulator reports it,
//! and why an event may be refused.

use crate::model::{Cluster, NodeSpec, PdbSpec, PodGroupSpec, PodSpec, QueueSpec};

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
