//! Who the runtime talks to: the clients of the control plane and of each member that writes
//! go to ([`Clients`]), what a member's connection depends on ([`Endpoint`]), and the name the
//! control plane goes by where a write names a cluster ([`CONTROL_PLANE`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;

use crate::writes::Write;
pub use tephra_index::endpoint::{CONTROL_PLANE, Endpoint};

/// The clients of the clusters writes go to: the control plane (PodGroups, Queues, Events)
/// and each member by name (binds, evictions).
#[derive(Clone)]
pub struct Clients {
    /// The control plane.
    pub control: Client,
    /// Members by name.
    pub members: Arc<std::sync::RwLock<BTreeMap<String, Client>>>,
}

impl Clients {
    pub(crate) fn member(&self, name: &str) -> Option<Client> {
        self.members.read().ok()?.get(name).cloned()
    }

    pub(crate) fn for_write(&self, w: &Write) -> Option<Client> {
        match w {
            Write::Bind { cluster, .. }
            | Write::Evict { cluster, .. }
            | Write::Place { cluster, .. }
            | Write::Purge { cluster, .. }
            | Write::PreBind { cluster, .. }
            | Write::Nominate { cluster, .. }
            | Write::Deallocate { cluster, .. }
            | Write::HyperNodeStatus { cluster, .. } => self.member(cluster),
            Write::Binding { .. }
            | Write::DeclaredStatus { .. }
            | Write::DeclaredMember { .. }
            | Write::EvictionTasks { .. }
            | Write::BindingStatus { .. } => Some(self.control.clone()),
            Write::GroupStatus { cluster, .. }
            | Write::KubeGroupConditions { cluster, .. }
            | Write::GroupAnnotation { cluster, .. }
            | Write::PodCondition { cluster, .. }
            | Write::Event { cluster, .. } => {
                self.member(cluster).or_else(|| Some(self.control.clone()))
            }
            Write::QueueStatus { .. } => Some(self.control.clone()),
        }
    }
}
