//! The simulated fleet as the scheduler's world and the control plane see it: each cluster's
//! model, its nodes in scenario order with their capacity, the nodes a fault has taken down,
//! and each member as the cluster status controller tracks it, with the failover chain's
//! timings. `world.rs` builds it from the scenario, the controllers' passes over its members
//! are `members/mod.rs`'s, and `faults.rs` changes what is true of a member.

use std::collections::BTreeMap;

use tephra_scheduler::model::Cluster;

use super::member::{Member, Timings};

/// Resource quantities as (name, quantity).
pub(crate) type Quantities = Vec<(String, String)>;

/// The fleet.
pub(crate) struct Fleet {
    /// Nodes of each cluster in scenario order, with their capacity.
    pub(crate) nodes: BTreeMap<String, Vec<(String, Quantities)>>,
    /// Each cluster as the scheduler models it.
    pub(crate) clusters: BTreeMap<String, Cluster>,
    /// Nodes down, with how many faults hold each down.
    pub(crate) down_nodes: BTreeMap<(String, String), u32>,
    /// The members as the control plane sees them.
    pub(crate) members: BTreeMap<String, Member>,
    /// The failover chain's timings.
    pub(crate) timings: Timings,
}

impl Fleet {
    /// An empty fleet with the failover chain's `timings`.
    pub(crate) fn new(timings: Timings) -> Self {
        Self {
            nodes: BTreeMap::new(),
            clusters: BTreeMap::new(),
            down_nodes: BTreeMap::new(),
            members: BTreeMap::new(),
            timings,
        }
    }
}
